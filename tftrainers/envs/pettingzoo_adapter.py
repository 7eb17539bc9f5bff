"""PettingZoo adapter: ``pettingzoo:MODULE.ENV`` (parallel API), ``num_envs`` copies, groups.

``pettingzoo:mpe2.simple_spread_v3`` imports ``mpe2.simple_spread_v3`` and calls its
``parallel_env(**env_args)`` once per copy. Copy ``k`` is seeded with ``seed + k`` on its
first reset.

- Behaviors: agents whose names share the prefix before a trailing ``_N`` (PettingZoo's
  naming: ``agent_0``, ``agent_1``, ``adversary_0``) and have the same observation and
  action spaces form one behavior, named after the prefix (``agent``, ``adversary``).
  Agents of one prefix with different spaces form one behavior per kind of spaces, each
  named after its first agent (``agent_0``, ``agent_3``). A name without ``_N`` is its
  own prefix.
- Agent ids: agent ``j`` of a behavior in copy ``k`` has id ``k * n + j`` (``n`` agents
  of that behavior per copy).
- Groups: the agents of one copy form a group, ``group_id`` ``k + 1`` (every behavior of
  the copy). PettingZoo has no group reward: ``group_reward`` is 0 and each agent's
  reward is PettingZoo's reward for it.
- Episodes: an agent that terminates or is truncated before the others sends its
  terminal step (``interrupted`` when truncated and not terminated) and is absent after;
  when no agent of a copy is left, the copy resets: like every env here, its agents sit
  out one step and then ask for the first decision of the new episode.
- Spaces map exactly as the Gymnasium adapter maps them (the same converters): ``Box``,
  ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict`` and ``Tuple`` observations;
  ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Box`` and ``Tuple`` actions. No
  action masks are read.
- Environment parameters (docs/guides/environments-api.md#environment-parameters): a
  parallel env that declares ``environment_parameter_names`` (a tuple of str) and has
  ``set_environment_parameters(values: Mapping[str, float])`` gets, before each reset of a
  copy, one value drawn for that copy from each parameter's sampler.
"""
from __future__ import annotations

import importlib
import os
import re
from typing import Dict, List, Mapping, Tuple

import numpy as np

from tftrainers.envs.area_env import assemble_steps, ended_groups
from tftrainers.envs.base import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                                  TerminalSteps, validate_actions)
from tftrainers.envs.gym_adapter import _ActionConverter, _observation_parts

_NUMBERED = re.compile(r"^(.*)_(\d+)$")


def behavior_of_names(names, observation_space, action_space) -> Dict[str, List[str]]:
    """Behavior name -> agent names, by the prefix rule of the module docstring.

    ``observation_space`` and ``action_space``: agent name -> its space.
    """
    kinds: Dict[str, List[List[str]]] = {}
    for name in names:
        match = _NUMBERED.match(name)
        prefix = match.group(1) if match else name
        for members in kinds.setdefault(prefix, []):
            first = members[0]
            if (observation_space(first) == observation_space(name)
                    and action_space(first) == action_space(name)):
                members.append(name)
                break
        else:
            kinds[prefix].append([name])
    out = {}
    for prefix, groups in kinds.items():
        for members in groups:
            out[prefix if len(groups) == 1 else members[0]] = members
    return out


def _import_parallel_env(env_id: str):
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")  # pygame's banner on import
    try:
        import pettingzoo  # noqa: F401
    except ImportError as error:
        raise ImportError("pettingzoo: environments need pettingzoo: "
                          "pip install 'tftrainers[pettingzoo]'") from error
    try:
        module = importlib.import_module(env_id)
    except ImportError as error:
        raise ValueError(f"pettingzoo:{env_id}: cannot import module '{env_id}' ({error}); "
                         f"give MODULE.ENV, e.g. pettingzoo:mpe2.simple_spread_v3") from error
    if not callable(getattr(module, "parallel_env", None)):
        raise ValueError(f"pettingzoo:{env_id}: module '{env_id}' has no parallel_env(); "
                         f"only PettingZoo's parallel API is supported")
    return module.parallel_env


class _Behavior:
    """One behavior's agents over all copies: rows ``copy * per_copy + j``."""

    def __init__(self, env_id: str, names: List[str], parallel, num_copies: int):
        self.names = names
        self.per_copy = len(names)
        self.index = {name: j for j, name in enumerate(names)}
        first = names[0]
        try:
            self.obs_parts = _observation_parts(parallel.observation_space(first), "obs")
            self.action = _ActionConverter(parallel.action_space(first))
        except ValueError as error:
            raise ValueError(f"{env_id}: agent '{first}': "
                             f"{str(error).removeprefix('gym: ')}") from error
        self.spec = BehaviorSpec(tuple(spec for spec, _ in self.obs_parts),
                                 ActionSpec(self.action.continuous_size,
                                            tuple(self.action.branches)))
        rows = num_copies * self.per_copy
        self.agent_ids = np.arange(rows, dtype=np.int32)
        self.group_ids = (np.arange(rows) // self.per_copy + 1).astype(np.int32)
        self.latest = [np.zeros((rows, *spec.shape), np.float32) for spec, _ in self.obs_parts]
        self.reward = np.zeros(rows, np.float32)
        self.terminated = np.zeros(rows, bool)
        self.truncated = np.zeros(rows, bool)
        self.decision_rows = np.zeros(0, np.int64)
        self.actions: ActionTuple | None = None
        self.steps: Tuple[DecisionSteps, TerminalSteps] | None = None

    def store(self, row: int, raw_obs) -> None:
        for latest, (_, convert) in zip(self.latest, self.obs_parts):
            latest[row] = convert(raw_obs)

    def observe(self, rows: np.ndarray) -> List[np.ndarray]:
        return [latest[rows] for latest in self.latest]

    def no_masks(self, rows: np.ndarray) -> List[np.ndarray]:
        return [np.zeros((len(rows), b), bool) for b in self.spec.action_spec.discrete_branches]

    def assemble(self, acting, ending, interrupted, restarting) -> None:
        reward = self.reward[acting]
        decision, terminal, self.decision_rows = assemble_steps(
            self.spec, self.observe, self.no_masks, self.agent_ids, self.group_ids, acting,
            reward, ending, interrupted, restarting, np.zeros(len(acting), np.float32))
        self.steps = (decision, terminal)


class PettingZooEnv(BaseEnv):
    """``num_envs`` copies of a PettingZoo parallel env (see the module docstring)."""

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0, instances=None,
                 label=None, **env_args):
        """``instances``: parallel env objects to use as the copies instead of making
        ``num_envs`` (``label`` then names the env in messages)."""
        if not instances and int(num_envs) < 1:
            raise ValueError(f"pettingzoo:{env_id}: num_areas must be >= 1, got {num_envs}")
        self.env_id = env_id
        self._label = label or f"pettingzoo:{env_id}"
        if instances:
            self.envs = list(instances)
        else:
            make = _import_parallel_env(env_id)
            try:
                self.envs = [make(**env_args) for _ in range(int(num_envs))]
            except TypeError as error:  # an unknown keyword argument
                raise ValueError(f"pettingzoo:{env_id}: bad env args {env_args}: {error}") \
                    from error
        first = self.envs[0]
        names = list(first.possible_agents)
        self._behaviors: Dict[str, _Behavior] = {
            name: _Behavior(self._label, members, first, len(self.envs))
            for name, members in behavior_of_names(names, first.observation_space,
                                                   first.action_space).items()}
        # agent name -> (behavior, index within the behavior's agents of a copy)
        self._where = {agent: (b, b.index[agent]) for b in self._behaviors.values()
                       for agent in b.names}
        self._seed = seed
        self._seeded = np.zeros(len(self.envs), bool)
        self._live: List[set] = [set() for _ in self.envs]  # agents in each copy's episode
        self._restart = np.zeros(0, np.int64)  # copies that start anew at the next step
        self._reset_called = False

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {name: b.spec for name, b in self._behaviors.items()}

    def _behavior(self, name: str) -> _Behavior:
        if name not in self._behaviors:
            raise KeyError(f"{self!r} has no behavior '{name}'; its behaviors: "
                           f"{', '.join(self._behaviors)}")
        return self._behaviors[name]

    @property
    def environment_parameter_names(self):
        return tuple(getattr(self.envs[0], "environment_parameter_names", ()))

    def _reset_copies(self, copies) -> Dict[_Behavior, List[int]]:
        """Resets ``copies``; returns, per behavior, the rows of their agents."""
        started: Dict[_Behavior, List[int]] = {b: [] for b in self._behaviors.values()}
        samplers = self.environment_parameters
        for k in copies:
            if samplers:  # one value per copy, drawn at its reset
                self.envs[k].set_environment_parameters(
                    {name: float(s.sample(1)[0]) for name, s in samplers.items()})
            seed = None if self._seeded[k] else self._seed + int(k)
            self._seeded[k] = True
            observations, _ = self.envs[k].reset(seed=seed)
            self._live[k] = set(observations)
            for agent, raw in observations.items():
                behavior, j = self._where[agent]
                row = k * behavior.per_copy + j
                behavior.store(row, raw)
                started[behavior].append(row)
        return started

    def reset(self) -> None:
        started = self._reset_copies(range(len(self.envs)))
        nobody = np.zeros(0, np.int64)
        for behavior, rows in started.items():
            behavior.actions = None
            behavior.assemble(nobody, np.zeros(0, bool), np.zeros(0, bool),
                              np.sort(np.asarray(rows, np.int64)))
        self._restart = nobody
        self._reset_called = True

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        behavior = self._behavior(behavior_name)
        if not self._reset_called:
            raise RuntimeError(f"{self!r}: call reset() before get_steps()")
        return behavior.steps

    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        behavior = self._behavior(behavior_name)
        behavior.actions = validate_actions(behavior_name, behavior.spec.action_spec, actions,
                                            len(behavior.decision_rows))

    def step(self) -> None:
        if not self._reset_called:
            raise RuntimeError(f"{self!r}: call reset() before step()")
        # Copies whose episode ended in the last step start anew; they sit this step out.
        started = self._reset_copies(self._restart.tolist())
        commands: List[Dict[str, object]] = [{} for _ in self.envs]
        acting: Dict[_Behavior, np.ndarray] = {}
        for behavior in self._behaviors.values():
            rows = acting[behavior] = behavior.decision_rows
            actions = behavior.actions
            if actions is None:  # like ML-Agents: agents without actions get zero actions
                actions = behavior.spec.action_spec.empty_action(len(rows))
            behavior.actions = None
            env_actions = behavior.action.rows(actions.continuous, actions.discrete)
            for row, action in zip(rows.tolist(), env_actions):
                k, j = divmod(row, behavior.per_copy)
                commands[k][behavior.names[j]] = action
            behavior.terminated[rows] = False
            behavior.truncated[rows] = False
            behavior.reward[rows] = 0.0
        joined: Dict[_Behavior, List[int]] = {b: [] for b in self._behaviors.values()}
        for k, command in enumerate(commands):
            if not command:
                continue
            observations, rewards, terminations, truncations, _ = self.envs[k].step(command)
            for agent, raw in observations.items():
                behavior, j = self._where[agent]
                row = k * behavior.per_copy + j
                behavior.store(row, raw)
                behavior.reward[row] = rewards.get(agent, 0.0)
                behavior.terminated[row] = terminations.get(agent, False)
                behavior.truncated[row] = truncations.get(agent, False)
                if agent not in command:  # an agent that joined mid-episode
                    joined[behavior].append(row)
            self._live[k] = set(self.envs[k].agents)
            for agent in command:  # an agent that left without a word has ended
                behavior, j = self._where[agent]
                row = k * behavior.per_copy + j
                if agent not in self._live[k] and not (behavior.terminated[row] or
                                                        behavior.truncated[row]):
                    behavior.terminated[row] = True
        copy_of, ends = [], []
        for behavior, rows in acting.items():
            ending = behavior.terminated[rows] | behavior.truncated[rows]
            copy_of.append(rows // behavior.per_copy)
            ends.append(ending)
            restarting = np.sort(np.asarray(started[behavior] + joined[behavior], np.int64))
            behavior.assemble(rows, ending, behavior.truncated[rows] & ~behavior.terminated[rows],
                              restarting)
        self._restart = ended_groups(np.concatenate(copy_of), np.concatenate(ends)).astype(
            np.int64)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def __repr__(self) -> str:
        return f"{self._label}(num_envs={len(self.envs)})"
