"""Pyramids: press a switch, then reach the pyramid it makes appear (sparse reward).

A square room of ``size`` x ``size`` cells (env arg, default 64) holds the agent and a
switch, both at random. Stepping onto the switch turns it on and makes the goal (the
pyramid) appear on a random cell at least ``size // 2`` away from the agent. Reaching the
goal gives +2 and ends the episode; every step costs 0.001; 1000 steps at most
(interrupted). One branch of 5 actions: stay, up, down, left, right.

Observations are egocentric, like ML-Agents' ray sensors: for each of 8 sectors around the
agent, how close the wall is along the sector's centre ray, and how close the switch and
the goal are if they lie in that sector within ``sight`` cells (env arg, default 64: rays
as long as the room; 0 when farther away); then whether the switch is on. Positions are
never handed to the agent. The reward is sparse: random play reaches the goal in about
none of 400 episodes at the default size (4% at size 24, 0.75% at 40), and nothing but
the goal is rewarded, so PPO alone finds nothing to learn from.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.builtin.sensors import SECTORS, sector_proximity, wall_closeness

GOAL_REWARD = 2.0
STEP_PENALTY = 0.001
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # stay, up, down, left, right


class PyramidsEnv(AreaEnv):
    name = "Pyramids"
    agents_per_area = 1
    default_num_areas = 16
    max_episode_steps = 1000
    env_arg_defaults = {"size": 64, "sight": 64}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.size = self.args["size"]
        self.sight = self.args["sight"]
        if self.size < 6:
            raise ValueError(f"builtin:Pyramids: env arg size must be >= 6, got {self.size}")
        if self.sight < 1:
            raise ValueError(f"builtin:Pyramids: env arg sight must be >= 1, got {self.sight}")
        self.agent = np.zeros((self.n_agents, 2), np.int64)
        self.switch = np.zeros((self.n_agents, 2), np.int64)
        self.goal = np.full((self.n_agents, 2), -1, np.int64)  # -1: not there yet
        self.switch_on = np.zeros(self.n_agents, bool)

    def observation_specs(self):
        return [ObservationSpec((3 * SECTORS + 1,), "sectors_and_switch")]

    def action_spec(self):
        return ActionSpec.create_discrete([len(MOVES)])

    def _random_cells(self, k: int) -> np.ndarray:
        return self.rng.integers(0, self.size, (k, 2))

    def _reset_agents(self, rows):
        self.agent[rows] = self._random_cells(len(rows))
        switch = self._random_cells(len(rows))
        same = np.all(switch == self.agent[rows], axis=1)
        switch[same] = (switch[same] + self.size // 2) % self.size  # never under the agent
        self.switch[rows] = switch
        self.goal[rows] = -1
        self.switch_on[rows] = False

    def _place_goals(self, rows: np.ndarray) -> None:
        """Goals at random cells at least size // 2 (Chebyshev) from the agent."""
        pending = rows
        while len(pending):
            cells = self._random_cells(len(pending))
            far = np.max(np.abs(cells - self.agent[pending]), axis=1) >= self.size // 2
            self.goal[pending[far]] = cells[far]
            pending = pending[~far]

    def _act(self, rows, actions):
        agent = np.clip(self.agent[rows] + MOVES[actions.discrete[:, 0]], 0, self.size - 1)
        self.agent[rows] = agent
        pressed = ~self.switch_on[rows] & np.all(agent == self.switch[rows], axis=1)
        if pressed.any():
            self.switch_on[rows[pressed]] = True
            self._place_goals(rows[pressed])
        reached = self.switch_on[rows] & np.all(agent == self.goal[rows], axis=1)
        reward = (-STEP_PENALTY + GOAL_REWARD * reached).astype(np.float32)
        return reward, reached

    def _observe(self, rows):
        agent = self.agent[rows]
        walls = wall_closeness(agent, self.size)
        switch = sector_proximity(agent, self.switch[rows], ~self.switch_on[rows], self.sight)
        goal = sector_proximity(agent, self.goal[rows], self.switch_on[rows], self.sight)
        on = self.switch_on[rows].astype(np.float32)[:, None]
        return [np.concatenate([walls, switch, goal, on], axis=1)]

    def _heuristic(self, rows):
        # The teacher knows where things are: walk to the switch, then to the goal.
        target = np.where(self.switch_on[rows][:, None], self.goal[rows], self.switch[rows])
        delta = target - self.agent[rows]
        vertical = np.where(delta[:, 0] < 0, 1, 2)
        horizontal = np.where(delta[:, 1] < 0, 3, 4)
        action = np.where(delta[:, 0] != 0, vertical, np.where(delta[:, 1] != 0, horizontal, 0))
        return ActionTuple(np.zeros((len(rows), 0), np.float32),
                           action.astype(np.int32)[:, None])
