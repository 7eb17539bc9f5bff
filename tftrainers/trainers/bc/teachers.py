"""Teachers of a BC student: ``teacher(decision_steps) -> ActionTuple`` of env actions.

    teacher = model_teacher("results/ppo_ball", "Ball3D", spec, key)   # a trained policy
    teacher = heuristic_teacher("heuristic", env, "Basic", key)       # the env's Heuristic()

Models load with the loaders export and evaluate use (``runs.load_policy`` for a run
folder, acting in onnxruntime; ``export.loading.OnnxPolicy`` / ``SavedModelPolicy`` for
exported files), checked against the student's behavior there; they act with their most
likely actions (``deterministic``). Every problem is a ``ConfigError`` naming the key.
"""
from __future__ import annotations

import importlib
import os
from typing import Callable

import numpy as np

from tftrainers.checkpoint import CheckpointError
from tftrainers.envs.base import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps
from tftrainers.settings import ConfigError


class _ActorTeacher:
    """A trained run's policy (its act graph in onnxruntime) as a teacher."""

    def __init__(self, actor):
        self.actor = actor

    def __call__(self, decision_steps: DecisionSteps) -> ActionTuple:
        return self.actor.act(decision_steps)[1]

    def episode_ended(self, agent_ids: np.ndarray) -> None:
        self.actor.episode_ended(agent_ids)


class _PolicyTeacher:
    """A ``policy(behavior_name, decision_steps)`` (exported model, env heuristic)."""

    def __init__(self, policy, behavior_name: str):
        self.policy = policy
        self.behavior_name = behavior_name

    def __call__(self, decision_steps: DecisionSteps) -> ActionTuple:
        return self.policy(self.behavior_name, decision_steps)

    def episode_ended(self, agent_ids: np.ndarray) -> None:
        ended = getattr(self.policy, "episode_ended", None)
        if ended is not None:
            ended(self.behavior_name, agent_ids)


class _ExpertTeacher:
    """An expert function ``f(decision_steps) -> ActionTuple | array`` (an array is the
    discrete actions [n] / [n, branches] or the continuous ones [n, c])."""

    def __init__(self, function: Callable, spec: BehaviorSpec, name: str):
        self.function = function
        self.spec = spec
        self.name = name

    def __call__(self, decision_steps: DecisionSteps) -> ActionTuple:
        out = self.function(decision_steps)
        if isinstance(out, ActionTuple):
            return out
        n = len(decision_steps)
        actions = self.spec.action_spec.empty_action(n)
        out = np.asarray(out)
        if self.spec.action_spec.discrete_size:
            return ActionTuple(actions.continuous, out.astype(np.int32).reshape(n, -1))
        return ActionTuple(out.astype(np.float32).reshape(n, -1), actions.discrete)


def _has_heuristic(env: BaseEnv) -> bool:
    from tftrainers.envs.multi_env import MultiEnv
    if isinstance(env, MultiEnv):  # its copies' heuristic
        env = env.envs[0]
    from tftrainers.envs.area_env import AreaEnv
    if isinstance(env, AreaEnv):  # built-ins and the gym adapter: their _heuristic
        return type(env)._heuristic is not AreaEnv._heuristic
    return type(env).heuristic is not BaseEnv.heuristic


def heuristic_teacher(teacher: str, env: BaseEnv, behavior_name: str, key: str):
    """``heuristic`` (the env's own) or ``heuristic:MODULE:FUNCTION`` (an expert by import
    path)."""
    spec = env.behavior_specs[behavior_name]
    if teacher == "heuristic":
        if not _has_heuristic(env):
            raise ConfigError(f"{key}: heuristic, but {env!r} has no heuristic for behavior "
                              f"'{behavior_name}'; name an expert as heuristic:MODULE:FUNCTION, "
                              f"or a trained teacher (results/RUN, FILE.onnx, SavedModel folder)")
        return _PolicyTeacher(env.heuristic, behavior_name)
    _, module_name, function_name = (teacher.split(":") + ["", ""])[:3]
    if not module_name or not function_name:
        raise ConfigError(f"{key}: '{teacher}' is not heuristic:MODULE:FUNCTION")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"{key}: cannot import {function_name} from {module_name} "
                          f"({str(error).splitlines()[0]})") from None
    if not callable(function):
        raise ConfigError(f"{key}: {module_name}.{function_name} is not callable")
    return _ExpertTeacher(function, spec, teacher)


def is_heuristic(teacher: str) -> bool:
    return teacher == "heuristic" or teacher.startswith("heuristic:")


def model_teacher(teacher: str, behavior_name: str, spec: BehaviorSpec, key: str, seed: int = 0):
    """A trained policy: a run folder (its newest checkpoint), a ``.onnx`` file or a
    SavedModel folder, acting deterministically for ``spec``'s agents."""
    from tftrainers.export.loading import OnnxPolicy, SavedModelPolicy
    from tftrainers.runs import load_policy, run_behaviors
    from tftrainers.run_folder import CONFIG_FILE
    try:
        if teacher.endswith(".onnx"):
            if not os.path.isfile(teacher):
                raise ValueError(f"{teacher}: no such ONNX file")
            return _PolicyTeacher(OnnxPolicy(teacher, spec, deterministic=True), behavior_name)
        if os.path.isfile(os.path.join(teacher, CONFIG_FILE)):
            behaviors = run_behaviors(teacher)
            # The run's behavior of the same name, or its only one.
            source = behavior_name if behavior_name in behaviors or len(behaviors) != 1 \
                else behaviors[0]
            policy = load_policy(teacher, source, spec, deterministic=True, seed=seed)
            try:
                actor = policy.make_actor("onnxruntime", seed=seed)
            except Exception:  # pylint: disable=broad-except
                actor = policy.make_actor("tensorflow", seed=seed)  # conversion failed
            return _ActorTeacher(actor)
        if os.path.isdir(teacher):
            return _PolicyTeacher(SavedModelPolicy(teacher, spec, deterministic=True),
                                  behavior_name)
        raise ValueError(f"'{teacher}' is neither heuristic, a run folder (with "
                         f"{CONFIG_FILE}), a .onnx file nor a SavedModel folder")
    except FileNotFoundError as error:
        raise ConfigError(f"{key}: {error}") from None
    except (ValueError, CheckpointError) as error:
        raise ConfigError(f"{key}: {error}") from None
