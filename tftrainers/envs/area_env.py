"""Shared machinery of single-behavior environments: many agents, NumPy state.

Used by the built-in environments (agents in many training areas) and the Gymnasium
adapter (each env copy is an agent). A subclass keeps its state in arrays with one row
per agent (``num_areas * agents_per_area`` rows) and implements vectorised hooks::

    _reset_agents(rows)             -> None       new episodes for the agents in rows
    _act(rows, actions)             -> (reward, terminated) for the agents in rows
    _observe(rows)                  -> [obs arrays]
    _heuristic(rows)                -> ActionTuple (the teacher brain)
and optionally ``_action_mask(rows)`` and ``_truncated(rows)``.

This class owns everything else: step limits (``interrupted``), autoreset of agents whose
episode ended, validation of actions, and building Decision/TerminalSteps. Agent ids are
stable row numbers.

Two step conventions, both accepted by every consumer of the env API
(docs/dev/architecture.md#env-api): by
default an agent whose episode ended sits out the next step, then asks for its first
decision of the new episode (reward 0). Env arg ``unity_steps=true`` reports steps as Unity
does: the agent restarts at once and is in the terminal AND decision steps of the step it
ended, with the same id (in a group env, members that left early come back in the step
their group ends).

:class:`GroupAreaEnv` makes the agents of an area one group (MA-POCA): the area's
episode starts and ends for all of them together, members may leave early, and the
group reward goes to every member present. See its docstring.
"""
from __future__ import annotations

import abc
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from tftrainers.envs.base import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec,
                                  DecisionSteps, ObservationSpec, TerminalSteps,
                                  validate_actions)
from tftrainers.envs.checks import check_agent_memory
from tftrainers.envs.parameters import check_parameter_names


def assemble_steps(spec: BehaviorSpec, observe: Callable[[np.ndarray], List[np.ndarray]],
                   action_mask: Callable[[np.ndarray], List[np.ndarray]],
                   agent_ids: np.ndarray, group_ids: Optional[np.ndarray], acting: np.ndarray,
                   reward: np.ndarray, ending: np.ndarray, interrupted: np.ndarray,
                   restarting: np.ndarray, group_reward: Optional[np.ndarray] = None,
                   reset: Optional[Callable[[np.ndarray], None]] = None
                   ) -> Tuple[DecisionSteps, TerminalSteps, np.ndarray]:
    """The steps every agent sees after an env step: the bookkeeping all envs here share.

    Agents are rows of the env's arrays. The agents that acted either end (terminal
    steps with their final observation) or go on (decision steps); agents that started
    a new episode at this step (they sat it out) ask for their first decision with
    reward 0. Decision rows stay in row order.

    Args:
        spec: the behavior's spec (for empty terminal steps).
        observe: rows -> observation arrays; action_mask: rows -> masks per branch.
        agent_ids: [rows] int32 id of each row; group_ids: [rows] int32 or None (no groups).
        acting: [k] rows that acted, in row order; reward, ending, interrupted and
            group_reward (read only with group_ids; None: zeros) are [k], aligned with it.
        restarting: [r] rows that start a new episode at this step.
        reset: called with ``restarting`` once the terminal observations are taken, before
            the decision observations: for agents that end and restart in the same step
            (Unity's convention); None when the rows were reset before.

    Returns:
        (decision steps, terminal steps, decision rows [n] in row order).
    """
    grouped = group_ids is not None
    if grouped and group_reward is None:
        group_reward = np.zeros(len(acting), np.float32)
    if ending.any():
        end_rows = acting[ending]
        terminal = TerminalSteps(
            observe(end_rows), reward[ending], interrupted[ending], agent_ids[end_rows],
            group_ids[end_rows] if grouped else None,
            group_reward[ending] if grouped else None)
        continuing, reward = acting[~ending], reward[~ending]
        if grouped:
            group_reward = group_reward[~ending]
    else:
        terminal = TerminalSteps.empty(spec)
        continuing = acting
    if reset is not None and len(restarting):
        reset(restarting)
    if len(restarting):
        order = np.concatenate([continuing, restarting])
        sort = np.argsort(order, kind="stable")  # keep agents in row order
        rows = order[sort]
        zeros = np.zeros(len(restarting), np.float32)
        reward = np.concatenate([reward, zeros])[sort]
        if grouped:
            group_reward = np.concatenate([group_reward, zeros])[sort]
    else:
        rows = continuing
    decision = DecisionSteps(observe(rows), reward.astype(np.float32, copy=False),
                             agent_ids[rows], action_mask(rows),
                             group_ids[rows] if grouped else None,
                             group_reward.astype(np.float32, copy=False) if grouped else None)
    return decision, terminal, rows


def ended_groups(acting_groups: np.ndarray, ending: np.ndarray) -> np.ndarray:
    """Groups whose every acting member ended in this step: [g] sorted group indices.

    acting_groups: [k] group index of each agent that acted; ending: [k] bool.
    """
    if not ending.any():
        return np.zeros(0, acting_groups.dtype)
    return np.setdiff1d(acting_groups[ending], acting_groups[~ending])


class AreaEnv(BaseEnv):
    """Base of the vectorised built-in environments (see the module docstring)."""

    name: str = ""
    agents_per_area: int = 1
    default_num_areas: int = 1
    max_episode_steps: int = 100
    # env arg -> default, or (default, choice, ...) for a fixed set of choices
    env_arg_defaults: Mapping[str, Any] = {}
    #: Environment parameters the env reads -> the value it uses when the run sets none.
    #: A sampler set for one (``set_environment_parameters``) is drawn once per area at
    #: each reset of the area, before ``_reset_agents``; the env reads the value of row r
    #: as ``self.parameter_values[name][r]`` (the same for every agent of an area).
    environment_parameter_defaults: Mapping[str, float] = {}
    # The env's own per-agent state besides observations (a generous guess for the memory
    # check: a few float64 vectors).
    state_bytes_per_agent: int = 256

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        self.args = parse_env_args(self.name, env_args, self._env_arg_defaults())
        num_areas = self.default_num_areas if num_areas is None else int(num_areas)
        if num_areas < 1:
            raise ValueError(f"{self.name}: num_areas must be >= 1, got {num_areas}")
        self.num_areas = num_areas
        self.n_agents = num_areas * self.agents_per_area
        if self.args.get("step_latency_ms", 0.0) < 0:
            raise ValueError(f"{self._env_id()}: env arg step_latency_ms must be >= 0, got "
                             f"{self.args['step_latency_ms']}")
        self._latency_s = self.args.get("step_latency_ms", 0.0) / 1000.0
        self.rng = np.random.default_rng(seed)
        self._spec = BehaviorSpec(tuple(self.observation_specs()), self.action_spec())
        check_agent_memory(self._env_id(), self.n_agents, self._spec.observation_specs,
                           self.state_bytes_per_agent, count=num_areas)
        self._all_rows = np.arange(self.n_agents)
        self._agent_ids = self._all_rows.astype(np.int32)
        self._episode_steps = np.zeros(self.n_agents, np.int64)
        self._ended = np.zeros(self.n_agents, bool)  # terminal in the last step: reset next
        self._actions: ActionTuple | None = None
        self._decision_rows = self._all_rows
        self._steps: Tuple[DecisionSteps, TerminalSteps] | None = None
        self._group_ids: np.ndarray | None = None  # [rows] int32 when agents form groups
        self.parameter_values: Dict[str, np.ndarray] = {
            name: np.full(self.n_agents, float(value))
            for name, value in self.environment_parameter_defaults.items()}

    @classmethod
    def _env_arg_defaults(cls) -> Mapping[str, Any]:
        # step_latency_ms: every step() of this instance takes at least that long, as a game
        # engine's frame does (a slow env to measure worker processes with; 0: as fast as
        # NumPy goes).
        # unity_steps: report steps as Unity does (see the module docstring), so every
        # trainer can be tested on both conventions.
        return {**cls.env_arg_defaults, "step_latency_ms": 0.0, "unity_steps": False}

    # --- to implement -------------------------------------------------------
    @abc.abstractmethod
    def observation_specs(self) -> List[ObservationSpec]:
        """The observations every agent receives."""

    @abc.abstractmethod
    def action_spec(self) -> ActionSpec:
        """The actions every agent takes."""

    @abc.abstractmethod
    def _reset_agents(self, rows: np.ndarray) -> None:
        """Starts new episodes for the agents in ``rows`` [k] int."""

    @abc.abstractmethod
    def _act(self, rows: np.ndarray, actions: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        """Applies ``actions`` (one row per entry of ``rows``).

        Returns:
            reward [k] float32 and terminated [k] bool (a real end of the episode).
        """

    @abc.abstractmethod
    def _observe(self, rows: np.ndarray) -> List[np.ndarray]:
        """Observations of the agents in ``rows``, one float32 array per spec."""

    def _heuristic(self, rows: np.ndarray) -> ActionTuple:
        """The teacher's actions for the agents in ``rows`` (envs without one raise)."""
        return BaseEnv.heuristic(self, self.name, None)

    def _truncated(self, rows: np.ndarray) -> np.ndarray:
        """Whose episode is cut now (checked after ``_act``; a real end takes precedence)."""
        return self._episode_steps[rows] >= self.max_episode_steps

    def _action_mask(self, rows: np.ndarray) -> List[np.ndarray]:
        return [np.zeros((len(rows), b), bool) for b in self._spec.action_spec.discrete_branches]

    def _restart_next(self, acting: np.ndarray, ending: np.ndarray) -> np.ndarray:
        """Rows that start a new episode at the next step: here, every agent that ended."""
        return acting[ending]

    def _group_reward(self, acting: np.ndarray) -> np.ndarray | None:
        """[k] group reward of the agents that acted in this step (None: no groups)."""
        return None

    # --- BaseEnv ------------------------------------------------------------
    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {self.name: self._spec}

    @property
    def environment_parameter_names(self) -> Tuple[str, ...]:
        return tuple(self.environment_parameter_defaults)

    def set_environment_parameters(self, parameters) -> None:
        check_parameter_names(self._env_id(), self.environment_parameter_names, parameters)
        super().set_environment_parameters(parameters)

    def reset(self) -> None:
        self._draw_parameters(self._all_rows)
        self._reset_agents(self._all_rows)
        self._episode_steps[:] = 0
        self._ended[:] = False
        self._actions = None
        nobody = np.zeros(0, np.int64)
        decision, terminal, self._decision_rows = self._assemble(
            nobody, np.zeros(0, np.float32), np.zeros(0, bool), np.zeros(0, bool),
            self._all_rows, None)
        self._steps = (decision, terminal)

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        self._check_name(behavior_name)
        if self._steps is None:
            raise RuntimeError(f"{self!r}: call reset() before get_steps()")
        return self._steps

    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        self._check_name(behavior_name)
        self._actions = validate_actions(behavior_name, self._spec.action_spec, actions,
                                         len(self._decision_rows))

    def step(self) -> None:
        if self._steps is None:
            raise RuntimeError(f"{self!r}: call reset() before step()")
        if self._latency_s:
            deadline = time.perf_counter() + self._latency_s
        acting = self._decision_rows
        actions = self._actions
        if actions is None:  # like ML-Agents: agents without actions get zero actions
            actions = self._spec.action_spec.empty_action(len(acting))
        self._actions = None

        # Agents whose episode ended in the last step start a new one now; they sit this
        # step out and ask for their first decision of the new episode.
        restarting = np.flatnonzero(self._ended)
        if len(restarting):
            self._restart(restarting)

        reward, terminated = self._act(acting, actions)
        self._episode_steps[acting] += 1
        interrupted = ~terminated & self._truncated(acting)
        ending = terminated | interrupted
        self._ended[:] = False
        reset = None
        if self.args["unity_steps"]:  # restart now, after the terminal observations
            restarting, reset = self._restart_next(acting, ending), self._restart
        else:
            self._ended[self._restart_next(acting, ending)] = True
        decision, terminal, self._decision_rows = self._assemble(
            acting, reward, ending, interrupted, restarting, self._group_reward(acting), reset)
        self._steps = (decision, terminal)
        if self._latency_s:
            remaining = deadline - time.perf_counter()
            if remaining > 0:
                time.sleep(remaining)

    def heuristic(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        self._check_name(behavior_name)
        return self._heuristic(np.asarray(decision_steps.agent_id, np.int64))

    # --- helpers ------------------------------------------------------------
    def _restart(self, rows: np.ndarray) -> None:
        self._draw_parameters(rows)
        self._reset_agents(rows)
        self._episode_steps[rows] = 0

    def _draw_parameters(self, rows: np.ndarray) -> None:
        """A fresh value of every sampled parameter for each area of ``rows`` (a reset)."""
        samplers = getattr(self, "_environment_parameters", None)
        if not samplers or not len(rows):
            return
        areas, inverse = np.unique(np.asarray(rows) // self.agents_per_area,
                                   return_inverse=True)
        for name, sampler in samplers.items():
            values = self.parameter_values.setdefault(name, np.full(self.n_agents, np.nan))
            values[rows] = sampler.sample(len(areas))[inverse]

    def _assemble(self, acting, reward, ending, interrupted, restarting, group_reward,
                  reset=None):
        return assemble_steps(self._spec, self._observe, self._action_mask, self._agent_ids,
                              self._group_ids, acting, reward, ending, interrupted, restarting,
                              group_reward, reset)

    def _check_name(self, behavior_name: str) -> None:
        if behavior_name != self.name:
            raise KeyError(f"{self!r} has no behavior '{behavior_name}'; "
                           f"its behavior is '{self.name}'")

    def _env_id(self) -> str:
        return f"builtin:{self.name}"

    def __repr__(self) -> str:
        return f"builtin:{self.name}(num_areas={self.num_areas}, agents={self.n_agents})"


def parse_env_args(env_name: str, given: Mapping[str, Any],
                   allowed: Mapping[str, Any]) -> Dict[str, Any]:
    """Checks ``env_args`` of a built-in env against its allowed args and their types.

    ``allowed`` maps each arg to its default; a given value must have the default's
    type (ints are fine for floats) or, when the default is a tuple
    ``(default, choice_1, choice_2, ...)``, be one of the choices.
    """
    out = {}
    for key, default in allowed.items():
        out[key] = default[0] if isinstance(default, tuple) else default
    for key, value in given.items():
        if key not in allowed:
            names = ", ".join(sorted(allowed)) or "none"
            raise ValueError(f"builtin:{env_name}: unknown env arg '{key}'; allowed: {names}")
        default = allowed[key]
        if isinstance(default, tuple):
            if value not in default[1:]:
                raise ValueError(f"builtin:{env_name}: env arg {key}={value!r} is not allowed; "
                                 f"allowed: {', '.join(map(str, default[1:]))}")
        elif isinstance(default, bool) or isinstance(value, bool):
            if type(value) is not type(default):
                raise ValueError(f"builtin:{env_name}: env arg {key}={value!r} must be "
                                 f"{type(default).__name__}")
        elif isinstance(default, int):
            if not isinstance(value, int):
                raise ValueError(f"builtin:{env_name}: env arg {key}={value!r} must be an int")
        elif isinstance(default, float):
            if not isinstance(value, (int, float)):
                raise ValueError(f"builtin:{env_name}: env arg {key}={value!r} must be a number")
            value = float(value)
        out[key] = value
    return out


class GroupAreaEnv(AreaEnv):
    """Areas whose agents form one group each (MA-POCA's groups), vectorised over areas.

    The group rules of the env API (docs/dev/architecture.md#env-api), which ``check_env`` checks:

    - every member of area ``a`` has ``group_id`` ``a + 1``: nonzero, unique per area and
      the same across its episodes, like a Unity ``SimpleMultiAgentGroup``;
    - an area's episode starts for all its members together;
    - a member that leaves before its group (dies) sends its terminal step then (a real
      end) and is absent from the steps after, until its area's next episode;
    - the group's episode ends with terminal steps for the members still present, all in
      the same step: a real end, or ``interrupted`` when the step limit cut it; then, as
      any agent here, every member sits out one step and the area starts anew (with
      ``unity_steps=true``, as Unity: the area starts anew in that same step, and every
      member, those that left early too, is in its decision steps with its old id);
    - ``group_reward`` is what the group received in the step, reported to every member
      present (in decision or terminal steps); ``reward`` holds individual rewards only.
      Env arg ``shared_reward=true`` also adds the group reward to each member's own
      reward, for independent learners (PPO reads only ``reward``); a group trainer
      (POCA) must not use it, as it would count the group reward twice.

    A subclass implements ``_act_group`` instead of ``_act``, and ``_reset_agents``
    always receives every member of the areas to reset. The members of one area are
    rows ``a * agents_per_area + k``.
    """

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self._area_of = self._all_rows // self.agents_per_area
        self._group_ids = (self._area_of + 1).astype(np.int32)
        self._step_group_reward = np.zeros(0, np.float32)

    @classmethod
    def _env_arg_defaults(cls) -> Mapping[str, Any]:
        return {**super()._env_arg_defaults(), "shared_reward": False}

    @abc.abstractmethod
    def _act_group(self, rows: np.ndarray, actions: ActionTuple
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Applies ``actions`` of the members in ``rows`` (the members present in areas
        that are mid-episode; other areas must not change).

        Returns:
            reward [k] individual rewards, group_reward [num_areas] (read for the areas
            that acted), left [k] bool: the member leaves its group now (dies), and
            done [num_areas] bool: the group's episode really ended.
        """

    def _act(self, rows, actions):
        reward, group_reward, left, done = self._act_group(rows, actions)
        area = self._area_of[rows]
        self._step_group_reward = np.asarray(group_reward, np.float32)[area]
        reward = np.asarray(reward, np.float32)
        if self.args["shared_reward"]:
            reward = reward + self._step_group_reward
        return reward, left | done[area]

    def _group_reward(self, acting):
        return self._step_group_reward

    def _restart_next(self, acting, ending):
        # A group's episode ends (and its area restarts) when no member present goes on.
        return self.rows_of_areas(ended_groups(self._area_of[acting], ending))

    def rows_of_areas(self, areas: np.ndarray) -> np.ndarray:
        """Every member row of ``areas`` [m]: [m * agents_per_area]."""
        k = self.agents_per_area
        return (np.asarray(areas, np.int64)[:, None] * k + np.arange(k)).reshape(-1)
