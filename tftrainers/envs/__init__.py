"""Environments: the ML-Agents-shaped API, built-in envs, adapters, and ``make``."""
from __future__ import annotations

from typing import Optional

from tftrainers.envs.base import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                                  ObservationKind, ObservationSpec, ObservationType, TerminalSteps,
                                  validate_actions)
from tftrainers.envs.builtin import BUILTIN_ENVS
from tftrainers.envs.checker import EnvCheckError, check_env

ENV_ID_HELP = ("builtin:NAME (" + ", ".join(sorted(BUILTIN_ENVS)) + "), gym:ID "
               "(a Gymnasium id, e.g. gym:CartPole-v1), pettingzoo:MODULE.ENV (a PettingZoo "
               "parallel env, e.g. pettingzoo:mpe2.simple_spread_v3), python:MODULE:NAME "
               "(your BaseEnv subclass, gymnasium.Env class or env factory; the working "
               "directory is on the import path) or the path of a Unity build")


def make(env_id, seed: int = 0, num_areas: Optional[int] = None, num_envs: int = 1,
         worker_id: int = 0, **env_args) -> BaseEnv:
    """Creates an environment from its id.

    Args:
        env_id: ``builtin:NAME``, ``gym:ID``, ``pettingzoo:MODULE.ENV``,
            ``python:MODULE:NAME``, the path of a Unity build, or None for the Unity Editor
            (``envs.unity``); or, from Python, an env class, object or factory
            (``envs.python_env``).
        seed: makes the environment deterministic.
        num_areas: training areas of a built-in env, or copies of a Gymnasium env (each
            copy is one agent) or of a PettingZoo env (each copy is one group); None takes
            the env's default (1 copy for Gymnasium and PettingZoo).
        num_envs: environment instances (``--num-envs``). Built-in, Gymnasium and PettingZoo
            envs run in this process and vectorise, so ``num_envs`` instances of ``num_areas``
            areas are built as one env of ``num_envs x num_areas`` areas (each area or copy
            has its own random stream): one step call instead of one per instance. A
            built-in given ``step_latency_ms`` stands for a slow engine, one frame per
            instance: its ``num_envs`` instances are stepped one after another
            (``MultiEnv``, instance ``k`` seeded ``seed + k``), or in worker processes
            (``env_settings.workers``).
        worker_id: the instance's number among env workers: a Unity player's port is
            ``base_port + worker_id`` (other envs ignore it).
        **env_args: the env's own arguments (for a Unity build: ``UnityEnv``'s, see
            ``envs.unity.options``) (``obs="visual"`` for GridWorld; keyword
            arguments of ``gymnasium.make`` or of the PettingZoo module's ``parallel_env``).

    Raises:
        ValueError: an unknown id (listing the built-ins) or bad env args.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if env_id is not None and not isinstance(env_id, str):
        from tftrainers.envs.python_env import describe, env_from_target
        return env_from_target(env_id, describe(env_id), seed=seed, num_areas=num_areas,
                               num_envs=num_envs, env_args=env_args)
    from tftrainers.envs.unity import is_unity_env_id
    if is_unity_env_id(env_id):
        return _make_unity(env_id, seed, num_areas, num_envs, worker_id, env_args)
    kind, _, name = env_id.partition(":")
    if kind == "builtin" and name in BUILTIN_ENVS:
        cls = BUILTIN_ENVS[name]
        areas = cls.default_num_areas if num_areas is None else num_areas
        if env_args.get("step_latency_ms") and num_envs > 1:
            from tftrainers.envs.multi_env import MultiEnv
            return MultiEnv([cls(seed=seed + k, num_areas=areas, **env_args)
                             for k in range(num_envs)])
        return cls(seed=seed, num_areas=areas * num_envs, **env_args)
    if kind == "builtin":
        raise ValueError(f"unknown built-in env '{name}'; built-ins: "
                         f"{', '.join(sorted(BUILTIN_ENVS))}")
    if kind == "gym" and name:
        from tftrainers.envs.gym_adapter import GymEnv
        return GymEnv(name, num_envs=(num_areas or 1) * num_envs, seed=seed, **env_args)
    if kind == "pettingzoo" and name:
        from tftrainers.envs.pettingzoo_adapter import PettingZooEnv
        return PettingZooEnv(name, num_envs=(1 if num_areas is None else num_areas) * num_envs,
                             seed=seed, **env_args)
    if kind == "python" and name:
        from tftrainers.envs.python_env import make_python
        return make_python(env_id, seed=seed, num_areas=num_areas, num_envs=num_envs,
                           **env_args)
    raise ValueError(f"unknown env id '{env_id}'; use {ENV_ID_HELP}")


def _make_unity(env_id, seed, num_areas, num_envs, worker_id, env_args) -> BaseEnv:
    import os
    from tftrainers.envs.unity.launcher import UnityBuildError
    from tftrainers.envs.unity.options import make_unity_env
    try:
        return make_unity_env(env_id, seed=seed, num_areas=num_areas, num_envs=num_envs,
                              worker_id=worker_id, **env_args)
    except UnityBuildError:
        if env_id and not os.path.exists(env_id) and not any(sep in env_id for sep in "/\\"):
            raise ValueError(f"unknown env id '{env_id}'; use {ENV_ID_HELP}") from None
        raise


__all__ = ["ActionSpec", "ActionTuple", "BaseEnv", "BehaviorSpec", "BUILTIN_ENVS", "DecisionSteps",
           "EnvCheckError", "ObservationKind", "ObservationSpec", "ObservationType",
           "TerminalSteps", "check_env", "make", "validate_actions"]
