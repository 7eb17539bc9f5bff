"""``tftrainers.load_policy``: a trained policy as a function of NumPy batches.

    policy = tftrainers.load_policy("results/basic")        # a run: its latest checkpoint
    policy = tftrainers.load_policy("results/basic/Basic.onnx")   # an export, no config
    actions = policy(observations)                          # [n, ...] -> [n, actions]
    policy.spec                                             # observations and actions

One class for every source: a run folder (its latest readable checkpoint, run by
TensorFlow; ``policy.keras_model`` is its actor network), an exported ``.onnx`` (run by
onnxruntime) or SavedModel folder (by TensorFlow), each read with the loaders of
``tftrainers.export.loading``. Observations are the env's: float32 ``[n, *shape]`` per
observation, images HWC in [0, 1]; masks are ``True`` for a forbidden action.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

from tftrainers.envs.base import ActionTuple, BehaviorSpec, DecisionSteps


def _error(message: str):
    from tftrainers.errors import TrainingError
    return TrainingError(message)


class Policy:
    """A trained policy on NumPy batches (made by ``load_policy``).

    Attributes:
        behavior_name: the behavior it acts for.
        spec: its ``BehaviorSpec`` (``spec.observation_specs``, ``spec.action_spec``).
        memory_size: the recurrent memory per agent (0: none); row ``i`` of a batch is
            agent ``i``, whose memory is carried to the next call until ``reset``.
        keras_model: the Keras model it runs (a run's actor network), or None (an export
            run by onnxruntime or a SavedModel).
        source: where it was loaded from.
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, source: str, make,
                 keras_model=None, memory_size: int = 0):
        self.behavior_name = behavior_name
        self.spec = spec
        self.source = source
        self.keras_model = keras_model
        self.memory_size = memory_size
        self._make = make  # deterministic -> callable(behavior_name, decision_steps)
        self._runners: Dict[bool, object] = {}
        self._rows = 0

    @property
    def observation_specs(self):
        return self.spec.observation_specs

    @property
    def action_spec(self):
        return self.spec.action_spec

    def __repr__(self) -> str:
        return f"Policy({self.behavior_name!r} from {self.source})"

    def _runner(self, deterministic: bool):
        key = bool(deterministic)
        if key not in self._runners:
            self._runners[key] = self._make(key)
        return self._runners[key]

    def _observations(self, observations) -> List[np.ndarray]:
        specs = self.spec.observation_specs
        if isinstance(observations, np.ndarray) or not isinstance(observations,
                                                                   (list, tuple)):
            observations = [observations]
        if len(observations) != len(specs):
            raise ValueError(f"{self.source}: {len(observations)} observation array(s) given; "
                             f"the policy takes {len(specs)} "
                             f"({', '.join(_shape(o.shape) for o in specs)}, each batched)")
        out = []
        for i, (obs, spec) in enumerate(zip(observations, specs)):
            obs = np.asarray(obs, np.float32)
            if obs.shape[1:] != tuple(spec.shape):
                raise ValueError(f"{self.source}: observation {i} has shape "
                                 f"{_shape(obs.shape)}; expected [n, "
                                 f"{_shape(spec.shape)[1:-1]}] (a batch of n)")
            out.append(obs)
        if len({len(o) for o in out}) > 1:
            raise ValueError(f"{self.source}: the observation arrays have different batch "
                             f"sizes {[len(o) for o in out]}")
        return out

    def _masks(self, mask, n: int) -> List[np.ndarray]:
        branches = self.spec.action_spec.discrete_branches
        if mask is None:
            return [np.zeros((n, b), bool) for b in branches]
        if not branches:
            raise ValueError(f"{self.source}: a mask was given but the policy has no discrete "
                             f"actions")
        if isinstance(mask, (list, tuple)):
            parts = [np.asarray(m, bool) for m in mask]
        else:
            mask = np.asarray(mask, bool)
            if mask.shape != (n, sum(branches)):
                raise ValueError(f"{self.source}: mask has shape {_shape(mask.shape)}; "
                                 f"expected [{n}, {sum(branches)}] (True = forbidden) or "
                                 f"one [n, size] array per branch {list(branches)}")
            parts = np.split(mask, np.cumsum(branches)[:-1], axis=1)
        if [p.shape for p in parts] != [(n, b) for b in branches]:
            raise ValueError(f"{self.source}: mask parts have shapes "
                             f"{[list(p.shape) for p in parts]}; expected one [{n}, size] "
                             f"array per branch {list(branches)}")
        return parts

    def __call__(self, observations, mask=None, deterministic: bool = True):
        """Actions for a batch of agents.

        Args:
            observations: one array ``[n, *shape]`` per observation spec (a single array
                when the policy has one observation).
            mask: discrete actions forbidden (True), ``[n, sum(branches)]`` or one
                ``[n, branch]`` array per branch; None allows every action.
            deterministic: the most likely actions (True) or sampled ones.

        Returns:
            ``[n, continuous_size]`` float32 for continuous actions, ``[n, branches]`` int32
            for discrete ones, an ``ActionTuple(continuous, discrete)`` for hybrid ones.
        """
        obs = self._observations(observations)
        n = len(obs[0])
        steps = DecisionSteps(obs, np.zeros(n, np.float32), np.arange(n, dtype=np.int32),
                              self._masks(mask, n))
        self._rows = max(self._rows, n)
        actions = self._runner(deterministic)(self.behavior_name, steps)
        spec = self.spec.action_spec
        if spec.continuous_size and spec.discrete_branches:
            return ActionTuple(actions.continuous, actions.discrete)
        return actions.continuous if spec.continuous_size else actions.discrete

    def reset(self, rows: Optional[Sequence[int]] = None) -> None:
        """Forgets the recurrent memory of ``rows`` (default: every agent), e.g. when their
        episodes end."""
        ids = np.arange(self._rows, dtype=np.int32) if rows is None else np.asarray(rows,
                                                                                   np.int32)
        for runner in self._runners.values():
            ended = getattr(runner, "episode_ended", None)
            if ended is not None:
                ended(self.behavior_name, ids)


def _shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class _CheckpointRunner:
    def __init__(self, actor):
        self.actor = actor

    def __call__(self, behavior_name, decision_steps):
        return self.actor.act(decision_steps)[1]

    def episode_ended(self, behavior_name, agent_ids):
        self.actor.episode_ended(agent_ids)


def _from_run(run_dir: str, behavior: Optional[str], seed: int) -> Policy:
    from tftrainers.console import quiet_tensorflow_import
    from tftrainers.runs import load_policy as load_checkpoint, read_behavior_spec, run_behaviors
    behaviors = run_behaviors(run_dir)
    if behavior is None:
        if len(behaviors) != 1:
            raise _error(f"{run_dir}: behavior=... is needed: the run has "
                         f"{', '.join(behaviors) or 'no behavior'}")
        behavior = behaviors[0]

    def warn(line):
        print(line, file=sys.stderr)

    loaded = {}

    def make(deterministic):
        with quiet_tensorflow_import():
            policy = load_checkpoint(run_dir, behavior, deterministic=deterministic, seed=seed,
                                     log=warn)
        loaded[deterministic] = policy
        return _CheckpointRunner(policy.make_actor("tensorflow", seed=seed))

    first = make(True)  # read now: a missing or damaged checkpoint is named at load
    out = Policy(behavior, read_behavior_spec(run_dir, behavior), run_dir, make,
                 keras_model=loaded[True].actor, memory_size=loaded[True].memory_size)
    out._runners[True] = first
    return out


def _from_export(path: str, kind: str) -> Policy:
    from tftrainers.console import quiet_tensorflow_import
    with quiet_tensorflow_import():
        from tftrainers.export.loading import exported_policy
    first = exported_policy(path, None, deterministic=True)

    def make(deterministic):
        return first if deterministic else exported_policy(path, first.spec,
                                                           deterministic=False)

    name = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
    if kind == "savedmodel":  # RUN/B/saved_model/STEP: the behavior is B
        parts = os.path.normpath(first.source).split(os.sep)
        name = parts[-3] if len(parts) >= 3 and parts[-2] == "saved_model" else name
    out = Policy(name, first.spec, first.source, make, memory_size=first.memory_size)
    out._runners[True] = first
    return out


def load_policy(source, behavior: Optional[str] = None, seed: int = 0) -> Policy:
    """A trained policy from a run, an ``.onnx``, ``.keras`` or ``.tflite`` file or a
    SavedModel folder.

    Args:
        source: a ``Run`` (what ``train`` returned) or run folder (``results/RUN``: its
            latest readable checkpoint), a ``.onnx``, ``.keras`` or ``.tflite`` file (as
            ``tftrainers-export --format`` writes them), a SavedModel folder (or its
            parent of numbered versions: the highest is taken).
        behavior: the behavior of a run with several (default: its only one).
        seed: the sampling noise of ``deterministic=False`` calls.

    Raises:
        TrainingError: one line: no such file, not a policy of ours, no checkpoint, a
            damaged file, a behavior the run does not have.
    """
    path = os.fspath(source)
    try:
        if os.path.isfile(os.path.join(path, "configuration.yaml")):
            return _from_run(path, behavior, seed)
        if path.endswith((".onnx", ".keras", ".tflite")):
            return _from_export(path, path.rsplit(".", 1)[1])
        if os.path.isdir(path):
            return _from_export(path, "savedmodel")
        raise _error(f"{path}: no such run folder, .onnx, .keras or .tflite file or SavedModel "
                     f"folder")
    except (ValueError, FileNotFoundError) as error:
        from tftrainers.errors import TrainingError
        if isinstance(error, TrainingError):
            raise
        raise _error(" ".join(str(error).split())) from error
