"""Two-team built-ins: one vectorised area env seen as the behaviors ``NAME?team=0`` and
``NAME?team=1`` (ML-Agents' names for the teams of a self-play game).

Both teams share one behavior spec: each team observes the field in its own frame
(mirrored), so one policy can play either side. Every agent of an area (a match) starts
and ends its episode with the others, both teams together. :class:`TeamEnvMixin` goes in
front of :class:`~tftrainers.envs.area_env.AreaEnv` or ``GroupAreaEnv``: the area env
steps every agent at once, as one behavior, and the mixin hands each team its rows::

    class Tennis(TeamEnvMixin, AreaEnv):
        agents_per_area = 2          # row 2a: team 0, row 2a + 1: team 1
        def team_of_rows(self, rows): return rows % 2

``match_of(behavior_name, agent_ids)`` names the match (area) of each agent, which is how
``tftrainers-evaluate --opponent`` pairs the two teams' episodes into matches.
"""
from __future__ import annotations

from typing import List, Mapping, Tuple

import numpy as np

from tftrainers.envs.base import (ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps,
                                  validate_actions)

TEAMS = 2


def _select(steps, keep: np.ndarray):
    """The rows ``keep`` [n] bool of decision or terminal steps."""
    if isinstance(steps, TerminalSteps):
        return TerminalSteps([o[keep] for o in steps.obs], steps.reward[keep],
                             steps.interrupted[keep], steps.agent_id[keep],
                             steps.group_id[keep], steps.group_reward[keep])
    return DecisionSteps([o[keep] for o in steps.obs], steps.reward[keep], steps.agent_id[keep],
                         [m[keep] for m in steps.action_mask], steps.group_id[keep],
                         steps.group_reward[keep])


class TeamEnvMixin:
    """Splits an area env's agents into the behaviors ``NAME?team=0`` and ``NAME?team=1``.

    Agent ids are the area env's rows (unique across both teams, and so are group ids).
    A team whose actions were not set acts with zero actions, as any agent here.
    """

    def team_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """[k] team (0 or 1) of each row."""
        raise NotImplementedError

    def match_of(self, behavior_name: str, agent_ids: np.ndarray) -> np.ndarray:
        """[k] the match (area) each agent plays in: agents of both teams with the same
        number play each other."""
        self._team_index(behavior_name)
        return np.asarray(agent_ids, np.int64) // self.agents_per_area

    def team_names(self) -> List[str]:
        return [f"{self.name}?team={t}" for t in range(TEAMS)]

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return {name: self._spec for name in self.team_names()}

    def _team_index(self, behavior_name: str) -> int:
        names = self.team_names()
        if behavior_name not in names:
            raise KeyError(f"{self!r} has no behavior '{behavior_name}'; its behaviors are "
                           f"{', '.join(names)}")
        return names.index(behavior_name)

    def _check_name(self, behavior_name: str) -> None:
        self._team_index(behavior_name)

    def reset(self) -> None:
        super().reset()
        self._split_steps()

    def step(self) -> None:
        if self._steps is None:
            raise RuntimeError(f"{self!r}: call reset() before step()")
        rows = self._decision_rows
        team = self.team_of_rows(rows)
        spec = self._spec.action_spec
        actions = spec.empty_action(len(rows))
        for t, given in self._team_actions.items():
            where = team == t
            actions.continuous[where] = given.continuous
            actions.discrete[where] = given.discrete
        self._actions = actions if self._team_actions else None
        super().step()
        self._split_steps()

    def _split_steps(self) -> None:
        decision, terminal = self._steps
        d_team = self.team_of_rows(np.asarray(decision.agent_id, np.int64))
        t_team = self.team_of_rows(np.asarray(terminal.agent_id, np.int64))
        self._team_steps: List[Tuple[DecisionSteps, TerminalSteps]] = [
            (_select(decision, d_team == t), _select(terminal, t_team == t))
            for t in range(TEAMS)]
        self._team_counts = [int((d_team == t).sum()) for t in range(TEAMS)]
        self._team_actions = {}

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        team = self._team_index(behavior_name)
        if self._steps is None:
            raise RuntimeError(f"{self!r}: call reset() before get_steps()")
        return self._team_steps[team]

    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        team = self._team_index(behavior_name)
        self._team_actions[team] = validate_actions(behavior_name, self._spec.action_spec,
                                                    actions, self._team_counts[team])

    def heuristic(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        self._team_index(behavior_name)
        return self._heuristic(np.asarray(decision_steps.agent_id, np.int64))
