"""Hallway: remember a cue seen once, walk a corridor, enter the matching goal.

The corridor has ``length`` cells (env arg, default 8); each episode starts at cell 0
with a cue (one of two symbols) that is visible in the first observation only. At the
far end the agent enters the left or the right goal: the one matching the cue gives +1,
the other -0.1; both end the episode. Every other step costs 1 / 300; 300 steps at most
(interrupted). These are ML-Agents' Hallway rewards (right goal +1, wrong goal -0.1, both
set with ``SetReward``, so the goal step pays exactly that; -1/MaxStep a step): any goal
reached by the direct route (at worst -0.1 - (length - 1) / 300) beats running out the
time limit (-1), so a policy that cannot yet read the cue learns to guess, not to stop.
(With a wrong goal as costly as the right one is worth, standing still until the limit
beat guessing and some seeds learned to stop moving: docs/experiments/2026-11-25-hallway-reward.md.)
One branch of 5 actions: stay, forward, back, enter left goal, enter right
goal (the last two do nothing before the far end). Observation: one-hot cell (length)
then the cue one-hot (2; zeros after the first step).

A policy without memory sees the same observations whichever the cue once it has left
cell 0, so the best it can do is guess: about 0.45 - (length - 1) / 300, against the
heuristic's 1 - (length - 1) / 300.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.area_env import AreaEnv

RIGHT_GOAL_REWARD = 1.0
WRONG_GOAL_REWARD = -0.1
STAY, FORWARD, BACK, LEFT_GOAL, RIGHT_GOAL = range(5)


class HallwayEnv(AreaEnv):
    name = "Hallway"
    agents_per_area = 1
    default_num_areas = 16
    max_episode_steps = 300
    env_arg_defaults = {"length": 8}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.length = self.args["length"]
        if self.length < 2:
            raise ValueError(f"builtin:Hallway: env arg length must be >= 2, got {self.length}")
        self.cell = np.zeros(self.n_agents, np.int64)
        self.cue = np.zeros(self.n_agents, np.int64)  # 0: the left goal is right, 1: the right
        self._eye = np.eye(self.length, dtype=np.float32)

    def observation_specs(self):
        return [ObservationSpec((self.args["length"] + 2,), "cell_and_cue")]

    def action_spec(self):
        return ActionSpec.create_discrete([5])

    def _reset_agents(self, rows):
        self.cell[rows] = 0
        self.cue[rows] = self.rng.integers(0, 2, len(rows))

    def _act(self, rows, actions):
        action = actions.discrete[:, 0]
        cell = self.cell[rows]
        cell = np.clip(cell + (action == FORWARD) - (action == BACK), 0, self.length - 1)
        self.cell[rows] = cell
        at_end = cell == self.length - 1
        entered = at_end & ((action == LEFT_GOAL) | (action == RIGHT_GOAL))
        correct = (action - LEFT_GOAL) == self.cue[rows]
        # A goal replaces the step's penalty, as ML-Agents' SetReward does.
        reward = np.where(entered, np.where(correct, RIGHT_GOAL_REWARD, WRONG_GOAL_REWARD),
                          -1.0 / self.max_episode_steps)
        return reward.astype(np.float32), entered

    def _observe(self, rows):
        first = self._episode_steps[rows] == 0
        cue = np.zeros((len(rows), 2), np.float32)
        cue[first, self.cue[rows][first]] = 1.0
        return [np.concatenate([self._eye[self.cell[rows]], cue], axis=1)]

    def _heuristic(self, rows):
        # The teacher reads the cue from the env's state, as Unity's Heuristic() may.
        at_end = self.cell[rows] == self.length - 1
        action = np.where(at_end, LEFT_GOAL + self.cue[rows], FORWARD).astype(np.int32)
        return ActionTuple(np.zeros((len(rows), 0), np.float32), action[:, None])
