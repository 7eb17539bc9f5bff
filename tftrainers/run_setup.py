"""Everything a run needs before TensorFlow: the env, the seed, the run folder and the errors
a run ends with (imports no TensorFlow, no trainer; ``runner`` trains on top of it).

    seed = resolve_seed(options)
    env, mode = open_env(options, seed)            # inline, or instances in env workers
    parameters = environment_parameters_of(options, seed, env)   # checked against the env
    folder = RunFolder.open(options.checkpoint_settings)         # checked, locked

Every user mistake these can find (the env id and args, a behavior without settings, the
environment parameters, the run folder) is one line raised here, before TensorFlow is
imported and before ``--force`` removes an earlier run (docs/dev/architecture.md#layers).
"""
from __future__ import annotations

import os
import random

from tftrainers.run_folder import CONFIG_FILE, RunError, RunFolder, write_atomically
from tftrainers.settings import ConfigError, RunOptions


class RunFailed(Exception):
    """The run stopped on a failure that is not a usage error (the env raised or sent bad
    data, an update was not finite); what could be saved was saved first. One line for
    the user; exit code 1."""

    exit_code = 1


class EnvStepError(RuntimeError):
    """The environment raised during the run; names the env, the call and the env step."""


def env_target(options: RunOptions, env=None):
    """What the env is made from: ``env`` (an env object or factory given to the Python
    API) or else the id ``env_settings.env_path``."""
    if env is not None:
        return env
    return options.env_settings.env_path  # None: the Unity Editor (``envs.unity``)


def env_label(options: RunOptions, env=None) -> str:
    """How logs and errors name the env."""
    from tftrainers.envs.python_env import describe
    target = env_target(options, env)
    return "the Unity Editor" if target is None else describe(target)


def make_env(options: RunOptions, seed: int, env=None):
    """The environment of ``env_settings``: ``num_envs`` instances of built-in and gym envs
    are one env with ``num_envs x num_areas`` areas (see ``envs.make``); a Unity build is
    ``num_envs`` players, no env at all the Unity Editor (``envs.unity``)."""
    from tftrainers.envs import make
    es = options.env_settings
    return make(env_target(options, env), seed=seed, num_areas=es.num_areas,
                num_envs=es.num_envs, **env_args_of(options, env))


def env_args_of(options: RunOptions, env=None) -> dict:
    """The env args ``envs.make`` gets: ``env_settings.env_args``, or for a Unity build or
    the Editor the player's settings (port, log folder, engine settings, its arguments)."""
    from tftrainers.envs.unity import is_unity_env_id
    es, cs = options.env_settings, options.checkpoint_settings
    if env is not None or not is_unity_env_id(es.env_path):
        return dict(es.env_args or {})
    from tftrainers.envs.unity.options import unity_env_args
    return unity_env_args(options, os.path.join(cs.results_dir, cs.run_id, "run_logs"))


#: ``workers: auto`` runs ``num_envs > 1`` instances in worker processes when one step of
#: one instance takes this long or longer (benchmarks/workers.py: below it, stepping the
#: instances inline, as one env of more areas, is faster).
SLOW_STEP_MS = 1.0


def make_env_instance(options: RunOptions, seed: int, env=None):
    """One instance of the environment (what each env worker runs)."""
    from tftrainers.envs import make
    es = options.env_settings
    return make(env_target(options, env), seed=seed, num_areas=es.num_areas,
                **env_args_of(options, env))


def measure_step_ms(env, steps: int = 10, budget_s: float = 0.5) -> float:
    """Median milliseconds of ``env.step()`` (zero actions), over up to ``steps`` steps or
    ``budget_s`` seconds."""
    import time
    env.reset()
    times = []
    while len(times) < steps and sum(times) < budget_s:
        for name, spec in env.behavior_specs.items():
            decision, _ = env.get_steps(name)
            if len(decision):
                env.set_actions(name, spec.action_spec.empty_action(len(decision)))
        start = time.perf_counter()
        env.step()
        times.append(time.perf_counter() - start)
    return 1000.0 * sorted(times)[len(times) // 2]


def open_env(options: RunOptions, seed: int, env=None):
    """The env the learner's process holds, and where the env instances step.

    Returns:
        (env, mode): mode "inline" (``env`` is the whole env, stepped by the learner's
        loop), "process" or "ray" (``env`` is one instance, for the behavior specs; the
        ``num_envs`` instances run in env workers).
    """
    es = options.env_settings
    if es.ray_address or es.workers == "process":
        if options.tf_settings.act_runtime != "onnxruntime":
            raise ConfigError(f"tf_settings.act_runtime: {options.tf_settings.act_runtime} "
                              f"cannot act in env workers (they run no TensorFlow); allowed "
                              f"with workers: onnxruntime, or env_settings.workers: inline")
        _check_worker_target(env)
        return _instance(options, seed, env), "ray" if es.ray_address else "process"
    if (es.workers == "auto" and es.num_envs > 1
            and options.tf_settings.act_runtime == "onnxruntime" and _picklable(env)):
        from tftrainers.envs.unity import is_unity_env_id
        if env is None and is_unity_env_id(es.env_path):  # a player per worker, as ML-Agents
            return make_env_instance(options, seed), "process"
        probe = _instance(options, seed, env)
        try:
            if measure_step_ms(probe) >= SLOW_STEP_MS:
                return probe, "process"
        except BaseException:
            probe.close()
            raise
        probe.close()
    # Called with (options, seed) when there is no env object: tests wrap these two.
    return (make_env(options, seed) if env is None else make_env(options, seed, env)), "inline"


def _instance(options: RunOptions, seed: int, env=None):
    return (make_env_instance(options, seed) if env is None
            else make_env_instance(options, seed, env))


def _picklable(env) -> bool:
    """Whether env workers can receive ``env`` (an id always; a factory if it pickles)."""
    if env is None or isinstance(env, str):
        return True
    import pickle
    try:
        pickle.dumps(env)
        return True
    except Exception:  # pylint: disable=broad-except  (pickling raises many kinds)
        return False


def _check_worker_target(env) -> None:
    if not _picklable(env) or not (env is None or isinstance(env, str) or callable(env)):
        raise ConfigError(f"env_settings.workers: env workers build their own env in another "
                          f"process, from an env id or a picklable factory (a module-level "
                          f"function or class); {type(env).__name__} {env!r:.60} is neither: "
                          f"use python:MODULE:NAME, or env_settings.workers: inline")


def resolve_seed(options: RunOptions) -> int:
    seed = options.env_settings.seed
    if seed == -1:  # as ML-Agents: a random seed, recorded in configuration.yaml
        seed = random.SystemRandom().randrange(0, 2**31 - 1)
        options.env_settings.seed = seed
    return seed


def open_folder_for_player(options: RunOptions):
    """The run folder, opened before a Unity build is launched (its log goes to
    ``run_logs/Player-<worker>.log``) once the build path resolves; None for other envs."""
    from tftrainers.envs.unity import is_unity_env_id
    es = options.env_settings
    if not is_unity_env_id(es.env_path):
        return None
    if es.env_path:
        from tftrainers.envs.unity.launcher import resolve_build
        resolve_build(es.env_path)  # a wrong path is refused before --force deletes a run
    folder = RunFolder.open(options.checkpoint_settings)
    try:
        os.makedirs(os.path.join(folder.path, "run_logs"), exist_ok=True)
    except OSError as error:
        folder.close()
        raise unwritable(error, folder.path) from None
    return folder


def unwritable(error: OSError, run_dir: str) -> RunError:
    return RunError(f"{error.filename or run_dir}: cannot write the run folder "
                    f"({error.strerror or error})")


def _flat(data, prefix: str = ""):
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out = {}
    for key, value in (data or {}).items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def record_configuration(options: RunOptions, run_dir: str, log) -> None:
    """Rewrites a resumed run's configuration.yaml with the settings it now trains with
    (as ML-Agents does on every start) and names the settings that changed. Called only
    once the resume's checks have passed: a refused resume leaves the file as it was."""
    import yaml
    path = os.path.join(run_dir, CONFIG_FILE)
    text = options.to_yaml()
    try:
        with open(path) as f:
            before = _flat(yaml.safe_load(f))
    except (OSError, yaml.YAMLError):
        before = None  # unreadable: replaced below, nothing to compare with
    try:
        write_atomically(path, text)
    except OSError as error:
        raise unwritable(error, run_dir) from None
    if before is None:
        return
    after = _flat(yaml.safe_load(text))
    # How this start was asked for (--resume itself), not how the run trains.
    changed = [f"{key} {before.get(key)} -> {after.get(key)}"
               for key in sorted(set(before) | set(after))
               if before.get(key) != after.get(key) and not key.startswith("checkpoint_settings.")]
    if changed:
        log(f"[INFO] {CONFIG_FILE} updated for this resume: {', '.join(changed[:8])}"
            f"{', ...' if len(changed) > 8 else ''}")


def environment_parameters_of(options: RunOptions, seed: int, env):
    """The run's EnvironmentParameterManager (None without environment_parameters), checked
    against the env before TensorFlow is imported: the criteria's behaviors, and the names
    the env reads (an unknown one is a config error, exit 2, not the env failing mid-run)."""
    from tftrainers.environment_parameters import EnvironmentParameterManager
    manager = EnvironmentParameterManager(options.environment_parameters, run_seed=seed)
    if not manager:
        return None
    manager.check_behaviors(env.behavior_specs, options.behaviors)
    try:
        env.set_environment_parameters(manager.samplers())
    except ValueError as error:
        raise ConfigError(f"environment_parameters: {error}") from None
    return manager
