"""The Python API: ``train(config, env) -> Run``; the CLI ``tftrainers-learn`` is a thin layer
over it (docs/guides/python-api.md).

    run = tftrainers.train("configs/ppo/Basic.yaml", run_id="basic", max_steps=5000)
    run.stats("Basic")["Environment/Cumulative Reward"]
    policy = tftrainers.load_policy(run)

``train`` does what ``tftrainers-learn`` does, with the same run folder, checks and one-line
messages, but as a library: errors are exceptions (``TrainingError``: a usage, config or file
problem, the CLI's exit code 2; ``TrainingFailed``: the run failed, exit code 1), no signal
handler is installed (Ctrl-C is Python's KeyboardInterrupt: every trainer saves, then it is
raised again), and progress goes to ``print`` unless ``verbose=0``.

Overrides (keyword arguments) set any key of the config, by one of three kinds of name
(``__`` or ``.`` separates levels; a dict value is merged into the mapping it names):

- the command line's: ``env_path``, ``env_args``, ``num_envs``, ``num_areas``, ``seed``,
  ``run_id``, ``resume``, ``force``, ``initialize_from``, ``inference``, ``results_dir``,
  ``device``, ``workers``, ``ray_address``, ``timeout_wait``;
- a path from the top: ``behaviors__Ball3D__hyperparameters__learning_rate=1e-3``,
  ``tf_settings__jit_compile=False``, ``behaviors={"Ball3D": {"max_steps": 500}}``;
- a behavior setting, set for every behavior of the config (and ``default_settings``):
  ``max_steps=500``, ``hyperparameters__batch_size=32``.
"""
from __future__ import annotations

import copy
import csv
import dataclasses
import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

import numpy as np

from tftrainers.callbacks import Callback, CallbackError, CallbackList
from tftrainers.errors import TrainingError, TrainingFailed


# ------------------------------------------------------------------------------ overrides

def _cli_names() -> Mapping[str, Any]:
    from tftrainers.settings import _OVERRIDES
    return _OVERRIDES


def _fields(cls) -> List[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _set_path(data: dict, path: List[str], value: Any, key: str) -> None:
    """Sets ``data[path[0]]...[path[-1]] = value``, merging a dict value into a dict there."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise _config_error(f"{key}: '{part}' holds {type(child).__name__} "
                                f"{child!r:.40}, not a mapping to set a key in")
        node = child
    last = path[-1]
    if isinstance(value, Mapping) and isinstance(node.get(last), dict):
        node[last] = _merged(node[last], value)
    else:
        node[last] = copy.deepcopy(value)


def _merged(base: dict, extra: Mapping) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = (_merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict)
                  else copy.deepcopy(v))
    return out


def _config_error(message: str):
    from tftrainers.settings import ConfigError
    return ConfigError(message)


def apply_overrides(data: Any, overrides: Mapping[str, Any]) -> tuple:
    """Splits and applies ``train``'s keyword overrides (see the module docstring).

    Returns:
        (the config data with the path overrides set, the command-line overrides).

    Raises:
        ConfigError: a name that is none of the three kinds (one line, listing them).
    """
    from tftrainers.settings import RunOptions, TrainerSettings
    data = copy.deepcopy(data) if isinstance(data, Mapping) else data
    cli = {}
    top, behavior_keys = _fields(RunOptions), _fields(TrainerSettings)
    for key, value in overrides.items():
        path = key.replace("__", ".").split(".")
        if len(path) == 1 and path[0] in _cli_names():
            cli[path[0]] = value
            continue
        if not isinstance(data, Mapping):
            continue  # the settings loader names the top level that is not a mapping
        if path[0] in top:
            _set_path(data, path, value, key)
        elif path[0] in behavior_keys:
            targets = [name for name in ("behaviors", "default_settings")
                       if isinstance(data.get(name), dict)]
            if not targets:
                raise _config_error(f"{key}: a behavior setting, but the config has no "
                                    f"behaviors or default_settings to set it in")
            if "behaviors" in targets:
                for name, settings in data["behaviors"].items():
                    if settings is None:
                        settings = data["behaviors"][name] = {}
                    if isinstance(settings, dict):
                        _set_path(settings, path, value, key)
            if "default_settings" in targets:
                _set_path(data["default_settings"], path, value, key)
        else:
            raise _config_error(
                f"{key}: not a setting; allowed: a command-line name "
                f"({', '.join(_cli_names())}), a path from the top ({', '.join(top)}, e.g. "
                f"behaviors__NAME__max_steps) or a behavior setting set for every behavior "
                f"({', '.join(behavior_keys)})")
    return data, cli


def resolve_options(config, env=None, overrides: Optional[Mapping[str, Any]] = None):
    """``RunOptions`` from ``train``'s ``config``, ``env`` and overrides (checked).

    Raises:
        ConfigError: one line (the file, the key, what is allowed).
    """
    from tftrainers.settings import RunOptions, read_config_file
    overrides = dict(overrides or {})
    if isinstance(config, RunOptions):
        data, source = config.as_dict(), config._source
    elif isinstance(config, Mapping):
        data, source = dict(config), "<config dict>"
    elif isinstance(config, (str, os.PathLike)):
        data, source = read_config_file(os.fspath(config)), os.fspath(config)
    else:
        raise _config_error(f"config: a {type(config).__name__} is not a config; allowed: a "
                            f"YAML file path, a dict in ML-Agents' schema, or RunOptions")
    if isinstance(env, str):
        overrides["env_path"] = env
    data, cli = apply_overrides(data, overrides)
    options = RunOptions.from_dict(data, source=source, overrides=cli)
    if env is not None and not isinstance(env, str):
        options.env_settings.env_path = None  # an object: nothing a later start could name
    return options


# ------------------------------------------------------------------------------ the run

class _Log:
    """``print``, or nothing at ``verbose=0`` (``silent`` also turns off the status line)."""

    def __init__(self, verbose: int):
        self.silent = not verbose

    def __call__(self, line: str) -> None:
        if not self.silent:
            print(line, flush=True)


def _as_error(error: BaseException) -> TrainingError:
    """The API's exception for what the runner raised (same one-line message)."""
    from tftrainers.runner import RunFailed
    message = " ".join(str(error).split("\n")).strip()
    if isinstance(error, RunFailed) or isinstance(error, CallbackError):
        return TrainingFailed(message)
    if isinstance(error, TrainingError):
        return error
    if isinstance(error, (ValueError, ImportError)):
        return TrainingError(message)
    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return TrainingError(f"{where}{error.strerror or error}")
    return None


def train(config, env=None, *, run_id: Optional[str] = None, results_dir: Optional[str] = None,
          seed: Optional[int] = None, resume: bool = False, force: bool = False,
          callbacks: Iterable[Union[Callback, Callable]] = (), verbose: int = 1,
          **overrides) -> "Run":
    """Trains as ``tftrainers-learn`` does and returns the Run.

    Args:
        config: a YAML file (ML-Agents' schema), a dict of the same, or ``RunOptions``.
        env: an env id (``builtin:``, ``gym:``, ``pettingzoo:``, ``python:``), an env object
            (a ``BaseEnv``, a ``gymnasium.Env`` or ``SyncVectorEnv``, a PettingZoo parallel
            env: one instance), or a zero-argument factory returning one (called once per
            copy or instance: needed for ``num_envs`` > 1 or ``num_areas`` > 1, and, when
            picklable, for env workers). None: ``env_settings.env_path``. An env object is
            closed when the run ends.
        run_id, results_dir, seed, resume, force: as the command line's flags; None (or
            False) keeps the config's (whose defaults are ``ppo``, ``results``, 0).
        callbacks: ``Callback`` objects or functions ``f(behavior, step, stats)``
            (``tftrainers.callbacks``).
        verbose: 1 prints what the command prints (summaries, notes); 0 prints nothing.
        **overrides: any key of the config (module docstring: three kinds of names).

    Returns:
        The Run: ``run.path``, ``run.stats()``, ``run.checkpoints``, ``run.exports``,
        ``run.stopped_by`` (None, "callback ...", or None when it ran to ``max_steps``).

    Raises:
        TrainingError: a usage, config or file problem (one line, as the CLI's).
        TrainingFailed: the env failed, sent bad data, an update was not finite, or a
            callback raised; checkpoints were saved first.
        KeyboardInterrupt: Ctrl-C (or a notebook's interrupt) during training, after
            every trainer saved its checkpoint; continue with ``resume=True``.
    """
    given = {"run_id": run_id, "results_dir": results_dir, "seed": seed,
             "resume": resume or None, "force": force or None}
    clash = [k for k in given if k in overrides]
    if clash:
        raise TrainingError(f"{clash[0]} is given twice")
    overrides.update({k: v for k, v in given.items() if v is not None})
    log = _Log(verbose)
    try:
        options = resolve_options(config, env, overrides)
    except ValueError as error:
        raise _as_error(error) from error
    for note in options.notes:
        log(f"[NOTE] {note}")
    return train_options(options, None if isinstance(env, str) else env, callbacks, log)


def train_options(options, env=None, callbacks=(), log=print, signals: bool = False) -> "Run":
    """Runs resolved options: ``train`` after its checks, and ``tftrainers-learn`` with
    ``signals`` (its SIGINT/SIGTERM handlers, ``signals.stop_signals``; the API installs
    none). Returns the Run; raises what ``train`` raises."""
    from tftrainers.runner import run_training
    from tftrainers.signals import StopFlag
    hooks = CallbackList(callbacks)
    cs = options.checkpoint_settings
    run = Run(os.path.join(cs.results_dir, cs.run_id))
    hooks.run = run
    stop = None if signals else StopFlag()
    try:
        run.exit_code = run_training(options, log=log, env=env, stop=stop, callbacks=hooks)
    except Exception as error:  # pylint: disable=broad-except  (mapped, or raised as is)
        converted = _as_error(error)
        if converted is None or converted is error:
            raise
        raise converted from error
    finally:
        if os.path.isdir(run.path):
            hooks.each("on_end", run)
    run.stopped_by = hooks.stopped_by
    return run


# ------------------------------------------------------------------------------ Run

class Run:
    """A training run's folder, read back (also of a run trained earlier, or by the CLI).

    Args:
        path: the run folder (``results/RUN``).

    Attributes:
        exit_code: what ``tftrainers-learn`` would have exited with (0, or 128 + signal).
        stopped_by: "callback NAME" when a callback stopped it, else None.
    """

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        self.exit_code = 0
        self.stopped_by: Optional[str] = None

    @property
    def run_id(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def __repr__(self) -> str:
        return f"Run({self.path!r})"

    def __fspath__(self) -> str:
        return self.path

    @property
    def behaviors(self) -> List[str]:
        """The behaviors the run trained (those with a ``behavior_spec.json``)."""
        from tftrainers.runs import run_behaviors
        try:
            return run_behaviors(self.path)
        except ValueError as error:
            raise TrainingError(str(error)) from None

    @property
    def checkpoints(self) -> Dict[str, Optional[str]]:
        """Behavior -> its latest checkpoint folder (None if it has none)."""
        from tftrainers.checkpoint import Checkpointer
        return {b: Checkpointer(os.path.join(self.path, b, "checkpoints"), b).latest()
                for b in self.behaviors}

    @property
    def exports(self) -> Dict[str, Dict[str, str]]:
        """Behavior -> ``{"onnx": RUN/B.onnx, "savedmodel": RUN/B/saved_model/STEP}`` (the
        latest of each that exists)."""
        out = {}
        for b in self.behaviors:
            found = {}
            onnx = os.path.join(self.path, f"{b}.onnx")
            if os.path.isfile(onnx):
                found["onnx"] = onnx
            root = os.path.join(self.path, b, "saved_model")
            versions = sorted(int(d) for d in (os.listdir(root) if os.path.isdir(root) else [])
                              if d.isdigit())
            if versions:
                found["savedmodel"] = os.path.join(root, str(versions[-1]))
            out[b] = found
        return out

    def stats(self, behavior: Optional[str] = None, as_frame: Optional[bool] = None):
        """The run's summaries (``run_logs/<behavior>.csv``): one row per summary.

        Args:
            behavior: which behavior (default: the run's only one).
            as_frame: True for a pandas DataFrame, False for ``{column: array}``; None: a
                DataFrame if pandas is installed, else the dict.

        Returns:
            ``step`` and ML-Agents' stat names as columns (NaN where a summary had none).
        """
        behaviors = self.behaviors
        if behavior is None:
            if len(behaviors) != 1:
                raise TrainingError(f"{self.path}: behavior=... is needed: the run has "
                                    f"{', '.join(behaviors) or 'no behavior'}")
            behavior = behaviors[0]
        path = os.path.join(self.path, "run_logs", f"{behavior}.csv")
        columns: Dict[str, List[float]] = {}
        if os.path.isfile(path):
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                names = list(reader.fieldnames or [])
                columns = {n: [] for n in names}
                for row in reader:
                    for n in names:
                        columns[n].append(_number(row.get(n)))
        elif behavior not in behaviors:
            raise TrainingError(f"{self.path}: no behavior '{behavior}'; the run has "
                                f"{', '.join(behaviors) or 'none'}")
        arrays = {n: np.asarray(v, np.float64) for n, v in columns.items()}
        if "step" in arrays:
            arrays["step"] = arrays["step"].astype(np.int64)
        if as_frame is False:
            return arrays
        try:
            import pandas
        except ImportError:
            if as_frame:
                raise TrainingError("as_frame=True needs pandas: pip install pandas") from None
            return arrays
        return pandas.DataFrame(arrays)

    def load_policy(self, behavior: Optional[str] = None, seed: int = 0):
        """``tftrainers.load_policy(self, behavior)``."""
        from tftrainers.inference import load_policy
        return load_policy(self, behavior=behavior, seed=seed)


def _number(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")
