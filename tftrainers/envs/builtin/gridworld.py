"""GridWorld: reach the goal on a 5x5 grid without falling into the pit.

Agent, goal (+1) and pit (-1) start on three random distinct cells; goal and pit end the
episode; every step costs 0.01; 100 steps at most (interrupted). One branch of 5 actions
(stay, up, down, left, right) with action masks forbidding moves into the walls.
``env_args``: ``obs=vector`` (default: three one-hot 5x5 planes, agent / goal / pit,
flattened to 75), ``obs=visual`` (the same planes drawn as a 20x20x3 HWC image in [0, 1]) or
``obs=grid`` (the planes as a 5x5x3 image, one pixel a cell, as a grid sensor sees a board;
for ``vis_encode_type: match3``).
"""
from __future__ import annotations

import functools
from collections import deque

import numpy as np

from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationKind, ObservationSpec
from tftrainers.envs.area_env import AreaEnv

N = 5
CELLS = N * N
PIXELS_PER_CELL = 4
STEP_PENALTY = 0.01
# Row and column change of stay, up, down, left, right.
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])


@functools.lru_cache(maxsize=1)
def _distance_table() -> np.ndarray:
    """Shortest-path lengths avoiding the pit: [goal, pit, cell] (large where unreachable)."""
    table = np.full((CELLS, CELLS, CELLS), 10 * CELLS, np.int64)
    for goal in range(CELLS):
        for pit in range(CELLS):
            if pit == goal:
                continue
            dist = table[goal, pit]
            dist[goal] = 0
            queue = deque([goal])
            while queue:
                cell = queue.popleft()
                r, c = divmod(cell, N)
                for dr, dc in MOVES[1:]:
                    nr, nc = r + dr, c + dc
                    nxt = nr * N + nc
                    if 0 <= nr < N and 0 <= nc < N and nxt != pit and dist[nxt] > dist[cell] + 1:
                        dist[nxt] = dist[cell] + 1
                        queue.append(nxt)
    return table


class GridWorldEnv(AreaEnv):
    name = "GridWorld"
    agents_per_area = 1
    default_num_areas = 16
    max_episode_steps = 100
    env_arg_defaults = {"obs": ("vector", "vector", "visual", "grid")}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.agent = np.zeros((self.n_agents, 2), np.int64)
        self.goal = np.zeros((self.n_agents, 2), np.int64)
        self.pit = np.zeros((self.n_agents, 2), np.int64)

    def observation_specs(self):
        if self.args["obs"] == "visual":
            side = N * PIXELS_PER_CELL
            return [ObservationSpec((side, side, 3), "grid_image", ObservationKind.VISUAL)]
        if self.args["obs"] == "grid":
            return [ObservationSpec((N, N, 3), "grid_cells", ObservationKind.VISUAL)]
        return [ObservationSpec((3 * CELLS,), "grid")]

    def action_spec(self):
        return ActionSpec.create_discrete([len(MOVES)])

    def _reset_agents(self, rows):
        cells = self.rng.random((len(rows), CELLS)).argsort(axis=1)[:, :3]
        for array, column in ((self.agent, 0), (self.goal, 1), (self.pit, 2)):
            array[rows] = np.stack(divmod(cells[:, column], N), axis=1)

    def _act(self, rows, actions):
        move = MOVES[actions.discrete[:, 0]]
        # Masked moves into a wall leave the agent where it is.
        agent = np.clip(self.agent[rows] + move, 0, N - 1)
        self.agent[rows] = agent
        at_goal = np.all(agent == self.goal[rows], axis=1)
        at_pit = np.all(agent == self.pit[rows], axis=1)
        reward = (-STEP_PENALTY + 1.0 * at_goal - 1.0 * at_pit).astype(np.float32)
        return reward, at_goal | at_pit

    def _planes(self, rows) -> np.ndarray:
        """[k, N, N, 3] one-hot planes: agent, goal, pit."""
        planes = np.zeros((len(rows), N, N, 3), np.float32)
        index = np.arange(len(rows))
        for channel, array in enumerate((self.agent, self.goal, self.pit)):
            planes[index, array[rows, 0], array[rows, 1], channel] = 1.0
        return planes

    def _observe(self, rows):
        planes = self._planes(rows)
        if self.args["obs"] == "visual":
            image = planes.repeat(PIXELS_PER_CELL, axis=1).repeat(PIXELS_PER_CELL, axis=2)
            return [image]
        if self.args["obs"] == "grid":
            return [planes]
        return [planes.transpose(0, 3, 1, 2).reshape(len(rows), 3 * CELLS)]

    def _action_mask(self, rows):
        agent = self.agent[rows]
        target = agent[:, None, :] + MOVES[None, :, :]
        return [np.any((target < 0) | (target >= N), axis=2)]

    def _heuristic(self, rows):
        # Follow the shortest path around the pit.
        table = _distance_table()
        goal = self.goal[rows] @ np.array([N, 1])
        pit = self.pit[rows] @ np.array([N, 1])
        target = self.agent[rows][:, None, :] + MOVES[None, :, :]
        inside = np.all((target >= 0) & (target < N), axis=2)
        cell = np.clip(target, 0, N - 1) @ np.array([N, 1])
        dist = table[goal[:, None], pit[:, None], cell]
        dist = np.where(inside & (cell != pit[:, None]), dist, np.iinfo(np.int64).max)
        discrete = dist.argmin(axis=1).astype(np.int32)[:, None]
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete)
