"""Shared machinery of single-behavior environments: many agents, NumPy state.

Used by the built-in environments (agents in many training areas) and the Gymnasium
adapter (each env copy is an agent). A subclass keeps its state in arrays with one row
per agent (``num_areas * agents_per_area`` rows) and implements vectorised hooks::

    _reset_agents(rows)             -> None       new episodes for the agents in rows
    _act(rows, actions)             -> (reward, terminated) for the agents in rows
    _observe(rows)                  -> [obs arrays]
    _heuristic(rows)                -> ActionTuple (the teacher brain)
and optionally ``_action_mask(rows)`` and ``_truncated(rows)``.

This class owns everything else: step limits (``interrupted``), next-step autoreset of
agents whose episode ended, validation of actions, and building Decision/TerminalSteps.
Agent ids are stable row numbers.
"""
from __future__ import annotations

import abc
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from tftrainers.envs.base import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec,
                                  DecisionSteps, ObservationSpec, TerminalSteps,
                                  validate_actions)
from tftrainers.envs.checks import check_agent_memory


class AreaEnv(BaseEnv):
    """Base of the vectorised built-in environments (see the module docstring)."""

    name: str = ""
    agents_per_area: int = 1
    default_num_areas: int = 1
    max_episode_steps: int = 100
    # env arg -> default, or (default, choice, ...) for a fixed set of choices
    env_arg_defaults: Mapping[str, Any] = {}
    # The env's own per-agent state besides observations (a generous guess for the memory
    # check: a few float64 vectors).
    state_bytes_per_agent: int = 256

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        self.args = parse_env_args(self.name, env_args, self.env_arg_defaults)
        num_areas = self.default_num_areas if num_areas is None else int(num_areas)
        if num_areas < 1:
            raise ValueError(f"{self.name}: num_areas must be >= 1, got {num_areas}")
        self.num_areas = num_areas
        self.n_agents = num_areas * self.agents_per_area
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

    # --- BaseEnv ------------------------------------------------------------
    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {self.name: self._spec}

    def reset(self) -> None:
        self._reset_agents(self._all_rows)
        self._episode_steps[:] = 0
        self._ended[:] = False
        self._actions = None
        self._decision_rows = self._all_rows
        self._steps = (self._decision_steps(self._all_rows, np.zeros(self.n_agents, np.float32)),
                       TerminalSteps.empty(self._spec))

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
        acting = self._decision_rows
        actions = self._actions
        if actions is None:  # like ML-Agents: agents without actions get zero actions
            actions = self._spec.action_spec.empty_action(len(acting))
        self._actions = None

        # Agents whose episode ended in the last step start a new one now; they sit this
        # step out and ask for their first decision of the new episode.
        restarting = np.flatnonzero(self._ended)
        if len(restarting):
            self._reset_agents(restarting)
            self._episode_steps[restarting] = 0

        reward, terminated = self._act(acting, actions)
        self._episode_steps[acting] += 1
        interrupted = ~terminated & self._truncated(acting)
        ending = terminated | interrupted
        self._ended[:] = False
        self._ended[acting[ending]] = True

        if ending.any():
            end_rows = acting[ending]
            terminal = TerminalSteps(self._observe(end_rows), reward[ending],
                                     interrupted[ending], self._agent_ids[end_rows])
            continuing = acting[~ending]
            cont_reward = reward[~ending]
        else:
            terminal = TerminalSteps.empty(self._spec)
            continuing, cont_reward = acting, reward
        if len(restarting):
            order = np.concatenate([continuing, restarting])
            rewards = np.concatenate([cont_reward, np.zeros(len(restarting), np.float32)])
            sort = np.argsort(order, kind="stable")  # keep agents in row order
            decision_rows, rewards = order[sort], rewards[sort]
        else:
            decision_rows, rewards = continuing, cont_reward
        self._decision_rows = decision_rows
        self._steps = (self._decision_steps(decision_rows, rewards), terminal)

    def heuristic(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        self._check_name(behavior_name)
        return self._heuristic(np.asarray(decision_steps.agent_id, np.int64))

    # --- helpers ------------------------------------------------------------
    def _decision_steps(self, rows: np.ndarray, reward: np.ndarray) -> DecisionSteps:
        return DecisionSteps(self._observe(rows), reward.astype(np.float32, copy=False),
                             self._agent_ids[rows], self._action_mask(rows))

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
