"""From a run's settings to ``UnityEnv`` arguments, and ``envs.make`` for build paths.

    kwargs = unity_env_args(options, log_folder="results/run/run_logs")
    env = make_unity_env("Builds/Game", seed=0, worker_id=2, **kwargs)   # port 5007

What ML-Agents' settings mean here: ``env_settings.env_path`` the build (none: the Editor),
``base_port`` (5005; the Editor listens on 5004 unless another port is given),
``env_args`` the player's own arguments, ``timeout_wait`` the seconds to wait for each
message, ``engine_settings`` sent through the engine-configuration side channel
(``no_graphics``: ``-nographics -batchmode``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from tftrainers.envs.unity.env import BUILD_PORT, EDITOR_PORT

ENGINE_KEYS = ("width", "height", "quality_level", "time_scale", "target_frame_rate",
               "capture_frame_rate")


def player_args(env_args: Any) -> List[str]:
    """``env_settings.env_args`` -> the player's arguments: a list as given; a mapping (or
    ``key=value`` items, read as one) as ``key=value`` strings."""
    if not env_args:
        return []
    if isinstance(env_args, dict):
        return [f"{key}={value}" for key, value in env_args.items()]
    return [str(a) for a in env_args]


def unity_env_args(options, log_folder: Optional[str]) -> Dict[str, Any]:
    """The ``UnityEnv`` keyword arguments of run options (``envs.make`` takes them as env
    args for a build path)."""
    es, engine = options.env_settings, options.engine_settings
    port = es.base_port
    if not es.env_path and port == BUILD_PORT:  # the Editor's own default, as ML-Agents
        port = EDITOR_PORT
    return {"base_port": port, "no_graphics": bool(engine.no_graphics),
            "timeout_wait": es.timeout_wait, "additional_args": player_args(es.env_args),
            "log_folder": log_folder,
            "engine_settings": {key: getattr(engine, key) for key in ENGINE_KEYS}}


_UNITY_KWARGS = ("base_port", "no_graphics", "timeout_wait", "additional_args", "log_folder",
                 "engine_settings", "side_channels", "log")


def make_unity_env(env_id: Optional[str], seed: int = 0, num_areas: Optional[int] = None,
                   num_envs: int = 1, worker_id: int = 0, **env_args):
    """``envs.make`` for a build path or the Editor (``env_id`` empty). ``num_envs`` players
    (inline) are ``num_envs`` UnityEnvs on consecutive ports, stepped one after another.
    Env args other than UnityEnv's own arguments go to the player as ``key=value``."""
    from tftrainers.envs.unity.env import UnityEnv
    kwargs = {k: v for k, v in env_args.items() if k in _UNITY_KWARGS}
    extra = {k: v for k, v in env_args.items() if k not in _UNITY_KWARGS}
    if extra:
        kwargs["additional_args"] = list(kwargs.get("additional_args") or ()) + player_args(extra)
    if not env_id and num_envs > 1:
        raise ValueError(f"the Unity Editor is one player; num_envs must be 1 without a build "
                         f"(got {num_envs})")
    if num_envs == 1:
        return UnityEnv(env_id or None, worker_id=worker_id, seed=seed,
                        num_areas=num_areas or 1, **kwargs)
    from tftrainers.envs.multi_env import MultiEnv
    envs = []
    try:
        for k in range(num_envs):
            envs.append(UnityEnv(env_id, worker_id=worker_id + k, seed=seed + k,
                                 num_areas=num_areas or 1, **kwargs))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return MultiEnv(envs)


__all__ = ["ENGINE_KEYS", "make_unity_env", "player_args", "unity_env_args"]
