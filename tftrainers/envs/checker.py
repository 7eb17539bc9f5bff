"""``check_env``: steps any BaseEnv with random actions and reports API violations.

Like Stable-Baselines3's env checker, for the ML-Agents-shaped API::

    from tftrainers.envs import make, check_env
    report = check_env(make("builtin:GridWorld"))   # raises EnvCheckError listing problems

Agents with a nonzero ``group_id`` are held to the group rules (docs/dev/architecture.md#env-api):
the group
reward is the same for every member present in a step; an agent keeps its group within
an episode; a member that leaves before its group stays absent until the group's
episode ends; and a group's episode ends with terminal steps for every member that was
still present. Both step conventions are accepted: an agent that ended may sit out a step,
or be in the terminal and decision steps of the same step (as Unity reports it).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from tftrainers.envs.agent_rows import EpisodesUnderWay
from tftrainers.envs.base import (ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                                  ObservationKind, TerminalSteps)


class EnvCheckError(AssertionError):
    """The environment broke the API; ``problems`` lists every violation found."""

    def __init__(self, problems: List[str]):
        self.problems = problems
        super().__init__("the environment breaks the tftrainers env API:\n  - " +
                         "\n  - ".join(problems))


def _check_array(problems, where, array, shape, kinds, finite=True):
    if not isinstance(array, np.ndarray):
        problems.append(f"{where}: expected a numpy array, got {type(array).__name__}")
        return
    if array.shape != shape:
        problems.append(f"{where}: expected shape {shape}, got {array.shape}")
    if not any(np.issubdtype(array.dtype, k) for k in kinds):
        problems.append(f"{where}: expected dtype {'/'.join(k.__name__ for k in kinds)}, "
                        f"got {array.dtype}")
    elif finite and np.issubdtype(array.dtype, np.floating) and not np.all(np.isfinite(array)):
        problems.append(f"{where}: holds NaN or inf")


def _check_steps(problems: List[str], where: str, steps, spec: BehaviorSpec,
                 terminal: bool) -> None:
    expected_type = TerminalSteps if terminal else DecisionSteps
    if not isinstance(steps, expected_type):
        problems.append(f"{where}: expected {expected_type.__name__}, got {type(steps).__name__}")
        return
    n = len(steps.agent_id)
    _check_array(problems, f"{where}.agent_id", steps.agent_id, (n,), [np.integer])
    if len(np.unique(steps.agent_id)) != n:
        problems.append(f"{where}.agent_id: an agent id appears twice")
    if len(steps.obs) != len(spec.observation_specs):
        problems.append(f"{where}.obs: the spec has {len(spec.observation_specs)} observations, "
                        f"got {len(steps.obs)}")
    for i, (obs, obs_spec) in enumerate(zip(steps.obs, spec.observation_specs)):
        name = f"{where}.obs[{i}] ('{obs_spec.name}')"
        _check_array(problems, name, obs, (n, *obs_spec.shape), [np.float32])
        if (obs_spec.kind == ObservationKind.VISUAL and isinstance(obs, np.ndarray) and obs.size
                and (obs.min() < 0.0 or obs.max() > 1.0)):
            problems.append(f"{name}: visual observations must lie in [0, 1], got "
                            f"[{obs.min():.3g}, {obs.max():.3g}]")
    _check_array(problems, f"{where}.reward", steps.reward, (n,), [np.floating])
    _check_array(problems, f"{where}.group_id", steps.group_id, (n,), [np.integer])
    _check_array(problems, f"{where}.group_reward", steps.group_reward, (n,), [np.floating])
    if terminal:
        _check_array(problems, f"{where}.interrupted", steps.interrupted, (n,), [np.bool_])
        return
    branches = spec.action_spec.discrete_branches
    if len(steps.action_mask) != len(branches):
        problems.append(f"{where}.action_mask: expected one mask per branch ({len(branches)}), "
                        f"got {len(steps.action_mask)}")
        return
    for b, (mask, size) in enumerate(zip(steps.action_mask, branches)):
        _check_array(problems, f"{where}.action_mask[{b}]", mask, (n, size), [np.bool_])
        if isinstance(mask, np.ndarray) and mask.shape == (n, size) and np.any(mask.all(axis=1)):
            problems.append(f"{where}.action_mask[{b}]: every action of the branch is masked "
                            f"for some agent")


def check_env(env: BaseEnv, n_steps: int = 300, seed: int = 0) -> Dict[str, Dict[str, int]]:
    """Resets and steps ``env`` with random (mask-respecting) actions, checking the API.

    Args:
        env: any BaseEnv.
        n_steps: env steps to take.
        seed: seed of the random actions.

    Returns:
        Per behavior: ``{"decisions": ..., "episodes": ..., "interrupted": ...}`` counts.

    Raises:
        EnvCheckError: listing every violation found (at most 20).
    """
    problems: List[str] = []
    rng = np.random.default_rng(seed)
    specs = env.behavior_specs
    if not specs:
        raise EnvCheckError(["behavior_specs is empty"])
    for name, spec in specs.items():
        if not isinstance(spec, BehaviorSpec):
            problems.append(f"behavior_specs['{name}']: expected a BehaviorSpec, "
                            f"got {type(spec).__name__}")
    if problems:
        raise EnvCheckError(problems)
    report = {name: {"decisions": 0, "episodes": 0, "interrupted": 0} for name in specs}
    groups = {name: _GroupRules() for name in specs}
    env.reset()
    for t in range(n_steps + 1):
        for name, spec in specs.items():
            decision, terminal = env.get_steps(name)
            where = f"step {t}, '{name}'"
            _check_steps(problems, f"{where} decision_steps", decision, spec, terminal=False)
            _check_steps(problems, f"{where} terminal_steps", terminal, spec, terminal=True)
            if problems:
                break
            groups[name].check(problems, where, decision, terminal)
            report[name]["decisions"] += len(decision)
            report[name]["episodes"] += len(terminal)
            report[name]["interrupted"] += int(np.sum(terminal.interrupted))
            if t == 0:
                _check_action_validation(problems, env, name, spec, len(decision))
            actions = spec.action_spec.random_action(len(decision), rng, decision.action_mask)
            env.set_actions(name, actions)
        if len(problems) >= 20 or (problems and t > 0):
            break
        if t < n_steps:
            env.step()
    if problems:
        raise EnvCheckError(problems[:20])
    return report


def _check_action_validation(problems, env, name, spec, n):
    """set_actions must refuse actions of the wrong shape."""
    wrong = ActionTuple(np.zeros((n + 1, spec.action_spec.continuous_size), np.float32),
                        np.zeros((n + 1, spec.action_spec.discrete_size), np.int32))
    try:
        env.set_actions(name, wrong)
    except ValueError:
        return
    problems.append(f"'{name}': set_actions accepted actions for {n + 1} agents when {n} "
                    f"asked for a decision")


class _GroupRules:
    """Tracks one behavior's groups across steps to check the group rules."""

    def __init__(self):
        self.group_of: Dict[int, int] = {}  # agent in an episode -> its group id
        self.present: Dict[int, set] = {}  # group -> members in the last decision steps
        self.departed: Dict[int, int] = {}  # member that left early -> its group
        self.under_way = EpisodesUnderWay()

    def check(self, problems: List[str], where: str, decision: DecisionSteps,
              terminal: TerminalSteps) -> None:
        # Decisions that start an episode belong to the group's next episode (Unity lists
        # them in the step the last one ended): only the others keep a group going.
        going_on = self.under_way.continuing(decision.agent_id, terminal.agent_id)
        ids = np.concatenate([terminal.agent_id, decision.agent_id[going_on]])
        gids = np.concatenate([terminal.group_id, decision.group_id[going_on]])
        rewards = np.concatenate([terminal.group_reward,
                                  decision.group_reward[going_on]]).tolist()
        seen_reward: Dict[int, float] = {}
        for agent, group, reward in zip(ids.astype(np.int64).tolist(),
                                        gids.astype(np.int64).tolist(), rewards):
            if agent in self.group_of and self.group_of[agent] != group:
                problems.append(f"{where}: agent {agent} changed group_id from "
                                f"{self.group_of[agent]} to {group} within an episode")
            if group and seen_reward.setdefault(group, reward) != reward:
                problems.append(f"{where}: members of group {group} got different group "
                                f"rewards ({seen_reward[group]} and {reward}) in one step")
        deciding: Dict[int, set] = {}  # every member in the decision steps
        continuing: set = set()  # groups with a member going on with its episode
        for agent, group, on in zip(decision.agent_id.tolist(), decision.group_id.tolist(),
                                    going_on.tolist()):
            if group:
                deciding.setdefault(group, set()).add(agent)
                if on:
                    continuing.add(group)
        ending: Dict[int, set] = {}
        for agent, group in zip(terminal.agent_id.tolist(), terminal.group_id.tolist()):
            self.group_of.pop(agent, None)
            if group:
                ending.setdefault(group, set()).add(agent)
        ended = set(ending) - continuing
        for agent, group in zip(decision.agent_id.tolist(), decision.group_id.tolist()):
            self.group_of[agent] = group
            if group and group not in ended and self.departed.get(agent) == group:
                problems.append(f"{where}: agent {agent} left group {group} before it and "
                                f"is back in decision steps before the group's episode ended")
        for group, members in ending.items():
            if group in continuing:  # the group goes on: these members left it early
                for agent in members:
                    self.departed[agent] = group
                continue
            # The group's episode ended: every member present until now ends with it.
            missing = self.present.get(group, set()) - members
            if missing:
                problems.append(f"{where}: group {group}'s episode ended without terminal steps "
                                f"for members {sorted(missing)[:5]} that were present")
            for agent in [a for a, g in self.departed.items() if g == group]:
                del self.departed[agent]
        self.present = deciding
