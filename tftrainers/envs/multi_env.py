"""Several env instances stepped together as one BaseEnv.

For instances that cannot be one env: built-in and gym envs vectorise, so ``--num-envs``
builds them as one env with more areas (``envs.make``), which steps without the per-step
concatenation here. Their agents of a behavior are concatenated, so one compiled policy
call serves them all.
Agent id ``a`` of instance ``k`` becomes ``a * num_envs + k`` (group ids likewise, 0 stays
0), so ids stay unique and ints.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from tftrainers.envs.base import ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps, TerminalSteps


def _merge_ids(ids: Sequence[np.ndarray], n: int) -> np.ndarray:
    return np.concatenate([np.asarray(a, np.int64) * n + k for k, a in enumerate(ids)]).astype(
        np.int32)


def _merge_groups(groups: Sequence[np.ndarray], n: int) -> np.ndarray:
    return np.concatenate([np.where(g == 0, 0, np.asarray(g, np.int64) * n + k)
                           for k, g in enumerate(groups)]).astype(np.int32)


class MultiEnv(BaseEnv):
    """``envs`` (same behaviors and specs) as one environment."""

    def __init__(self, envs: Sequence[BaseEnv]):
        self.envs = list(envs)
        specs = self.envs[0].behavior_specs
        for env in self.envs[1:]:
            if dict(env.behavior_specs) != dict(specs):
                raise ValueError("MultiEnv: every instance must have the same behaviors and specs")
        self._specs = dict(specs)
        self._counts: Dict[str, List[int]] = {}

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return self._specs

    @property
    def environment_parameter_names(self):
        return tuple(self.envs[0].environment_parameter_names)

    def set_environment_parameters(self, parameters) -> None:
        """Every instance gets them, instance ``k`` with its own sampler seeds."""
        from tftrainers.envs.parameters import for_worker
        for k, env in enumerate(self.envs):
            env.set_environment_parameters(for_worker(parameters, k))

    def reset(self) -> None:
        for env in self.envs:
            env.reset()

    def step(self) -> None:
        for env in self.envs:
            env.step()

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        parts = [env.get_steps(behavior_name) for env in self.envs]
        n = len(self.envs)
        decisions = [d for d, _ in parts]
        terminals = [t for _, t in parts]
        self._counts[behavior_name] = [len(d) for d in decisions]
        decision = DecisionSteps(
            [np.concatenate(o) for o in zip(*(d.obs for d in decisions))],
            np.concatenate([d.reward for d in decisions]),
            _merge_ids([d.agent_id for d in decisions], n),
            [np.concatenate(m) for m in zip(*(d.action_mask for d in decisions))],
            _merge_groups([d.group_id for d in decisions], n),
            np.concatenate([d.group_reward for d in decisions]))
        terminal = TerminalSteps(
            [np.concatenate(o) for o in zip(*(t.obs for t in terminals))],
            np.concatenate([t.reward for t in terminals]),
            np.concatenate([t.interrupted for t in terminals]),
            _merge_ids([t.agent_id for t in terminals], n),
            _merge_groups([t.group_id for t in terminals], n),
            np.concatenate([t.group_reward for t in terminals]))
        return decision, terminal

    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        counts = self._counts.get(behavior_name)
        if counts is None:
            raise RuntimeError(f"MultiEnv: get_steps('{behavior_name}') before set_actions")
        total = sum(counts)
        for part, array in (("continuous", actions.continuous), ("discrete", actions.discrete)):
            if np.shape(array)[:1] != (total,):
                raise ValueError(f"set_actions('{behavior_name}'): expected {part} actions for "
                                 f"{total} agents, got shape {np.shape(array)}")
        bounds = np.cumsum([0] + counts)
        for env, lo, hi in zip(self.envs, bounds[:-1], bounds[1:]):
            env.set_actions(behavior_name, ActionTuple(actions.continuous[lo:hi],
                                                       actions.discrete[lo:hi]))

    def heuristic(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        n = len(self.envs)
        instance = np.asarray(decision_steps.agent_id) % n
        out = ActionTuple(*(np.zeros((len(decision_steps), s), dtype) for s, dtype in (
            (self._specs[behavior_name].action_spec.continuous_size, np.float32),
            (self._specs[behavior_name].action_spec.discrete_size, np.int32))))
        for k, env in enumerate(self.envs):
            rows = np.flatnonzero(instance == k)
            if len(rows):
                sub = DecisionSteps([o[rows] for o in decision_steps.obs],
                                    decision_steps.reward[rows],
                                    (decision_steps.agent_id[rows] // n).astype(np.int32),
                                    [m[rows] for m in decision_steps.action_mask])
                part = env.heuristic(behavior_name, sub)
                out.continuous[rows], out.discrete[rows] = part.continuous, part.discrete
        return out

    def pop_environment_stats(self):
        """What the instances' games reported (Unity's stats channel), merged; None: none."""
        merged = {}
        for env in self.envs:
            stats = env.pop_environment_stats() if hasattr(env, "pop_environment_stats") else None
            for key, values in (stats.values.items() if stats is not None else ()):
                merged.setdefault(key, []).extend(values)
        if not merged:
            return None
        from tftrainers.envs.unity.side_channels import EnvironmentStats
        return EnvironmentStats(merged)

    def close(self) -> None:
        for env in self.envs:
            env.close()
