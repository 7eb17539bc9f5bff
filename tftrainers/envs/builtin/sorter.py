"""Sorter: visit a variable number of numbered tiles in ascending order (after ML-Agents'
Sorter example, on a line).

Cells 0..10, the agent starts at 5; 1 to 4 tiles (as many as drawn at each episode start),
numbered 1..k, lie on distinct other cells. One branch of 3 actions: stay, left, right.
Stepping onto the tile with the lowest number left gives +1 and removes it; stepping onto
any other tile does nothing; every step costs 0.01; the episode ends when every tile is
visited, or after 60 steps (interrupted). Observations: the agent's position
((cell - 5) / 5, a vector of 1) and the tiles as a variable-length observation (Unity's
`BufferSensor`) of 4 entities x 5 features: one-hot number (4) and offset from the agent
((tile - cell) / 10). Tiles sit in random rows; absent tiles (never drawn or already
visited) are all-zero rows. The network embeds the tiles, attends over the present ones
and pools them (ML-Agents' entity embedding and residual self-attention), so it must find
the lowest number among a varying set. The heuristic walks to the next tile; a random
policy visits few.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationKind, ObservationSpec

CELLS = 11
START = 5
MAX_TILES = 4
STEP_PENALTY = 0.01
MOVES = np.array([0, -1, 1])  # stay, left, right
ABSENT = -1


class SorterEnv(AreaEnv):
    name = "Sorter"
    agents_per_area = 1
    default_num_areas = 16
    max_episode_steps = 60

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.position = np.full(self.n_agents, START, np.int64)
        # [agent, row]: the tile's cell and number (1..k), ABSENT when the row is empty.
        self.tile_cell = np.full((self.n_agents, MAX_TILES), ABSENT, np.int64)
        self.tile_number = np.full((self.n_agents, MAX_TILES), ABSENT, np.int64)
        self._number_eye = np.eye(MAX_TILES, dtype=np.float32)

    def observation_specs(self):
        return [ObservationSpec((1,), "position"),
                ObservationSpec((MAX_TILES, MAX_TILES + 1), "tiles",
                                ObservationKind.VARIABLE_LENGTH)]

    def action_spec(self):
        return ActionSpec.create_discrete([3])

    def _reset_agents(self, rows):
        n = len(rows)
        self.position[rows] = START
        counts = self.rng.integers(1, MAX_TILES + 1, n)
        others = np.delete(np.arange(CELLS), START)
        # Distinct cells: the first MAX_TILES of a random permutation of the other cells.
        cells = np.argsort(self.rng.random((n, len(others))), axis=1)[:, :MAX_TILES]
        slot = np.argsort(self.rng.random((n, MAX_TILES)), axis=1)  # random rows
        present = np.arange(MAX_TILES)[None, :] < counts[:, None]
        cell = np.where(present, others[cells], ABSENT)
        number = np.where(present, np.arange(1, MAX_TILES + 1)[None, :], ABSENT)
        order = np.argsort(slot, axis=1)
        self.tile_cell[rows] = np.take_along_axis(cell, order, axis=1)
        self.tile_number[rows] = np.take_along_axis(number, order, axis=1)

    def _next_row(self, rows):
        """Per agent, the row of the lowest-numbered tile left (-1 when none)."""
        numbers = np.where(self.tile_number[rows] == ABSENT, MAX_TILES + 1,
                           self.tile_number[rows])
        best = np.argmin(numbers, axis=1)
        return np.where(numbers.min(axis=1) > MAX_TILES, -1, best)

    def _act(self, rows, actions):
        position = np.clip(self.position[rows] + MOVES[actions.discrete[:, 0]], 0, CELLS - 1)
        self.position[rows] = position
        nxt = self._next_row(rows)
        next_cell = self.tile_cell[rows, np.maximum(nxt, 0)]
        hit = (nxt >= 0) & (next_cell == position)
        hit_rows = rows[hit]
        self.tile_cell[hit_rows, nxt[hit]] = ABSENT
        self.tile_number[hit_rows, nxt[hit]] = ABSENT
        done = (self.tile_number[rows] == ABSENT).all(axis=1)
        reward = (-STEP_PENALTY + 1.0 * hit).astype(np.float32)
        return reward, done

    def _observe(self, rows):
        position = ((self.position[rows] - START) / START).astype(np.float32)[:, None]
        number = self.tile_number[rows]
        present = number != ABSENT
        onehot = self._number_eye[np.maximum(number - 1, 0)] * present[..., None]
        offset = (self.tile_cell[rows] - self.position[rows][:, None]) / 10.0
        tiles = np.concatenate([onehot, (offset * present)[..., None]], axis=2)
        return [position, tiles.astype(np.float32)]

    def _heuristic(self, rows):
        nxt = self._next_row(rows)
        target = self.tile_cell[rows, np.maximum(nxt, 0)]
        towards = np.where(nxt >= 0, np.sign(target - self.position[rows]), 0)
        discrete = np.where(towards < 0, 1, np.where(towards > 0, 2, 0)).astype(np.int32)
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete[:, None])
