"""Basic: a 1-D corridor with a small goal on the left and a large goal on the right.

Positions 0..19, start at 10; actions (one branch of 3): stay, left, right. Reaching
position 7 gives +0.1 and reaching 17 gives +1.0, both ending the episode; every step
costs 0.01; 100 steps at most (interrupted). Observation: one-hot position. The best
return is 1.0 - 7 * 0.01 = 0.93 (walk right seven times).

Environment parameter ``large_goal_distance`` (default 7): cells from the start to the large
goal, rounded and kept in 1..9 (read at each episode start).
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.area_env import AreaEnv

SIZE = 20
START = 10
SMALL_GOAL, LARGE_GOAL = 7, 17
SMALL_REWARD, LARGE_REWARD = 0.1, 1.0
STEP_PENALTY = 0.01
MOVES = np.array([0, -1, 1])  # stay, left, right


class BasicEnv(AreaEnv):
    name = "Basic"
    agents_per_area = 1
    default_num_areas = 8
    max_episode_steps = 100
    environment_parameter_defaults = {"large_goal_distance": float(LARGE_GOAL - START)}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.position = np.full(self.n_agents, START, np.int64)
        self.large_goal = np.full(self.n_agents, LARGE_GOAL, np.int64)
        self._eye = np.eye(SIZE, dtype=np.float32)

    def observation_specs(self):
        return [ObservationSpec((SIZE,), "position")]

    def action_spec(self):
        return ActionSpec.create_discrete([3])

    def _reset_agents(self, rows):
        self.position[rows] = START
        distance = np.rint(self.parameter_values["large_goal_distance"][rows])
        self.large_goal[rows] = START + np.clip(distance, 1, SIZE - 1 - START).astype(np.int64)

    def _act(self, rows, actions):
        position = np.clip(self.position[rows] + MOVES[actions.discrete[:, 0]], 0, SIZE - 1)
        self.position[rows] = position
        small, large = position == SMALL_GOAL, position == self.large_goal[rows]
        reward = (-STEP_PENALTY + SMALL_REWARD * small + LARGE_REWARD * large).astype(np.float32)
        return reward, small | large

    def _observe(self, rows):
        return [self._eye[self.position[rows]]]

    def _heuristic(self, rows):
        discrete = np.full((len(rows), 1), 2, np.int32)  # always right, to the large goal
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete)
