"""BasicGoal: Basic's corridor with two goals, the one to reach given as a goal signal.

Positions 0..20, start at 10, goals at 5 and 15; one branch of 3 actions: stay, left,
right. Each episode one of the two goals is the target, drawn at random and sent as a
one-hot goal-signal observation (`observation_type: GOAL_SIGNAL`, as a Unity
`VectorSensor` of type goal signal sends it): reaching the target gives +1, reaching the
other goal -1, both ending the episode; every step costs 0.01; 100 steps at most
(interrupted). Observations: one-hot position (21) and the goal (2). The best return is
1.0 - 5 * 0.01 = 0.95; a policy that does not read the goal averages at most -0.05
(half its episodes end at the wrong goal). With `goal_conditioning_type: hyper` (the
default) the goal makes the weights of the network's last hidden layer.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec, ObservationType

SIZE = 21
START = 10
GOALS = np.array([5, 15])  # the goal signal's one-hot index -> position
STEP_PENALTY = 0.01
MOVES = np.array([0, -1, 1])  # stay, left, right


class BasicGoalEnv(AreaEnv):
    name = "BasicGoal"
    agents_per_area = 1
    default_num_areas = 8
    max_episode_steps = 100

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.position = np.full(self.n_agents, START, np.int64)
        self.goal = np.zeros(self.n_agents, np.int64)
        self._eye = np.eye(SIZE, dtype=np.float32)
        self._goal_eye = np.eye(len(GOALS), dtype=np.float32)

    def observation_specs(self):
        return [ObservationSpec((SIZE,), "position"),
                ObservationSpec((len(GOALS),), "goal",
                                observation_type=ObservationType.GOAL_SIGNAL)]

    def action_spec(self):
        return ActionSpec.create_discrete([3])

    def _reset_agents(self, rows):
        self.position[rows] = START
        self.goal[rows] = self.rng.integers(0, len(GOALS), len(rows))

    def _act(self, rows, actions):
        position = np.clip(self.position[rows] + MOVES[actions.discrete[:, 0]], 0, SIZE - 1)
        self.position[rows] = position
        target = position == GOALS[self.goal[rows]]
        wrong = position == GOALS[1 - self.goal[rows]]
        reward = (-STEP_PENALTY + 1.0 * target - 1.0 * wrong).astype(np.float32)
        return reward, target | wrong

    def _observe(self, rows):
        return [self._eye[self.position[rows]], self._goal_eye[self.goal[rows]]]

    def _heuristic(self, rows):
        towards = np.sign(GOALS[self.goal[rows]] - self.position[rows])
        discrete = np.where(towards < 0, 1, np.where(towards > 0, 2, 0)).astype(np.int32)
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete[:, None])
