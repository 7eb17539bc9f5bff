"""PushBlockCollab: three agents push blocks of weights 1, 2 and 3 into a goal zone together.

ML-Agents' Cooperative Push Block on a grid. Each area is a ``size`` x ``size`` room
(env arg, default 13) holding a group of 3 agents and blocks (env arg ``blocks``, default
``1,1,2,2,3,3``: two of each weight, as ML-Agents' area). A block of weight ``w`` covers
``w`` x ``w`` cells and moves one cell only when at least ``w`` agents push it in the
same direction in the same step (an agent pushes by moving into one of its cells); it
stops at walls, other blocks and agents in its way. The goal zone is the 2 rows along
the north wall: a block that touches it is scored, leaves the room, and the group
receives its weight as group reward (so a perfect episode makes 12). Every step costs the
group ``0.5 / max_steps`` (ML-Agents' hurry-up penalty, at most 0.5 an episode). The
episode ends when every block is in, or after ``max_steps`` steps (default 300;
interrupted). Blocks start below the goal zone in separate column bands, each with a free
row beneath it to push from, and at least one column stays free, so that every free cell
can be reached; agents start on free cells.

Observations are local, like ML-Agents' grid sensor (one channel per tag): the
(2 * ``view`` + 1)-cell square around the agent (env arg ``view``, default 4, so 9 x 9)
with 6 channels: outside the room, goal zone, agent (teammates, and the agent itself at
the centre), block of weight 1, 2 and 3; then the agent's own row and column, scaled to
[0, 1]. One branch of 5 actions: stay, up, down, left, right (moves on the grid; turning
would only add a heading to remember).

The heuristic (the group teacher) knows where everything is: it takes the block nearest
the goal, sends the members it needs to the cells under it (the others out of its way),
and pushes north when they are all in place. Agents walk around blocks by breadth-first
distance over the room.
"""
from __future__ import annotations

from itertools import permutations

import numpy as np

from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec

MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # stay, up, down, left, right
UP = 1
AGENTS = 3
GOAL_ROWS = 2
PENALTY_PER_EPISODE = 0.5
CHANNELS = 6  # outside, goal, agent, block weight 1, 2, 3
# Every way to give up to 3 cells to 3 distinct agents: cell j -> agent perm[j].
ASSIGNMENTS = np.array(list(permutations(range(AGENTS))))


def _parse_blocks(text: str) -> np.ndarray:
    try:
        weights = np.array([int(w) for w in str(text).split(",")], np.int64)
    except ValueError:
        weights = np.zeros(0, np.int64)
    if not len(weights) or weights.min() < 1 or weights.max() > AGENTS:
        raise ValueError(f"builtin:PushBlockCollab: env arg blocks={text!r} must list block "
                         f"weights 1..{AGENTS} separated by commas, e.g. '1,1,2,2,3,3'")
    return weights


def grid_distances(targets: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Breadth-first distances to the nearest target cell, vectorised over grids.

    targets, free: [n, H, W] bool (targets need not be free). Returns [n, H, W] float64,
    inf where no target can be reached (moves: 4 neighbours, through free cells only).
    """
    distance = np.where(targets, 0.0, np.inf)
    passable = free | targets
    for _ in range(targets.shape[1] * targets.shape[2]):
        best = distance.copy()
        best[:, 1:] = np.minimum(best[:, 1:], distance[:, :-1] + 1)
        best[:, :-1] = np.minimum(best[:, :-1], distance[:, 1:] + 1)
        best[:, :, 1:] = np.minimum(best[:, :, 1:], distance[:, :, :-1] + 1)
        best[:, :, :-1] = np.minimum(best[:, :, :-1], distance[:, :, 1:] + 1)
        best = np.where(passable, best, np.inf)
        if np.array_equal(best, distance):
            break
        distance = best
    return distance


class PushBlockCollabEnv(GroupAreaEnv):
    name = "PushBlockCollab"
    agents_per_area = AGENTS
    default_num_areas = 16
    max_episode_steps = 300
    env_arg_defaults = {"size": 13, "view": 4, "blocks": "1,1,2,2,3,3", "max_steps": 300}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.size, self.view = self.args["size"], self.args["view"]
        self.max_episode_steps = self.args["max_steps"]
        self.weights = _parse_blocks(self.args["blocks"])
        if self.max_episode_steps < 1:
            raise ValueError(f"builtin:PushBlockCollab: env arg max_steps must be >= 1, got "
                             f"{self.max_episode_steps}")
        if self.view < 1:
            raise ValueError(f"builtin:PushBlockCollab: env arg view must be >= 1, got "
                             f"{self.view}")
        smallest = max(self.weights.sum() + 1, GOAL_ROWS + 2 + self.weights.max())
        if self.size < smallest:
            raise ValueError(
                f"builtin:PushBlockCollab: env arg size={self.size} is too small for blocks "
                f"{self.args['blocks']}; it needs >= {smallest} (the blocks side by side with "
                f"a free column, and a free row above and below the largest)")
        self.penalty = PENALTY_PER_EPISODE / self.max_episode_steps
        a, b = self.num_areas, len(self.weights)
        self.agent = np.zeros((a, AGENTS, 2), np.int64)
        self.block = np.zeros((a, b, 2), np.int64)  # top-left cell of each block
        self.active = np.ones((a, b), bool)  # not scored yet
        # The cells of every block, as offsets from its top-left cell.
        self._cell_block = np.concatenate([np.full(w * w, i) for i, w in enumerate(self.weights)])
        self._cell_offset = np.concatenate(
            [np.stack(np.divmod(np.arange(w * w), w), axis=1) for w in self.weights])

    def observation_specs(self):
        side = 2 * self.args["view"] + 1
        return [ObservationSpec((CHANNELS * side * side + 2,), "grid_view_and_position")]

    def action_spec(self):
        return ActionSpec.create_discrete([len(MOVES)])

    # --- state helpers ----------------------------------------------------------
    def block_grid(self, areas: np.ndarray | None = None) -> np.ndarray:
        """[n, size, size] int64: index of the block on each cell, -1 for none."""
        areas = np.arange(self.num_areas) if areas is None else areas
        grid = np.full((len(areas), self.size, self.size), -1, np.int64)
        cells = self.block[areas][:, self._cell_block] + self._cell_offset  # [n, C, 2]
        on = self.active[areas][:, self._cell_block]
        index = np.broadcast_to(np.arange(len(areas))[:, None], on.shape)
        grid[index[on], cells[on][:, 0], cells[on][:, 1]] = np.broadcast_to(
            self._cell_block, on.shape)[on]
        return grid

    # --- episodes -------------------------------------------------------------
    def _reset_agents(self, rows):
        areas = np.unique(self._area_of[rows])
        n, size, rng, w = len(areas), self.size, self.rng, self.weights
        b = len(w)
        # Blocks in random order left to right, the spare columns spread between them.
        order = np.argsort(rng.random((n, b)), axis=1)
        gaps = rng.multinomial(size - w.sum(), np.full(b + 1, 1.0 / (b + 1)), size=n)[:, :b]
        left_in_order = np.cumsum(gaps + np.concatenate(
            [np.zeros((n, 1), np.int64), w[order][:, :-1]], axis=1), axis=1)
        left = np.empty((n, b), np.int64)
        np.put_along_axis(left, order, left_in_order, axis=1)
        # A free row between the block and the goal zone, and one beneath it.
        top = GOAL_ROWS + 1 + np.floor(rng.random((n, b)) * (size - w - GOAL_ROWS - 1)).astype(
            np.int64)
        self.block[areas] = np.stack([top, left], axis=2)
        self.active[areas] = True
        free = self.block_grid(areas).reshape(n, -1) < 0
        priority = np.where(free, rng.random((n, size * size)), np.inf)
        pick = np.argsort(priority, axis=1)[:, :AGENTS]
        self.agent[areas] = np.stack(np.divmod(pick, size), axis=2)

    # --- dynamics -------------------------------------------------------------
    def _act_group(self, rows, actions):
        a_count, size, b_count = self.num_areas, self.size, len(self.weights)
        area, slot = np.divmod(rows, AGENTS)
        move = np.zeros((a_count, AGENTS), np.int64)  # areas sitting out stay still
        move[area, slot] = actions.discrete[:, 0]
        target = self.agent + MOVES[move]
        inside = np.all((target >= 0) & (target < size), axis=2)
        tr, tc = np.clip(target[..., 0], 0, size - 1), np.clip(target[..., 1], 0, size - 1)
        index = np.arange(a_count)[:, None]
        grid = self.block_grid()
        hit = np.where(inside & (move > 0), grid[index, tr, tc], -1)  # [A, K] block pushed

        # Pushers per block and direction; a block moves when exactly one direction has
        # at least its weight of pushers and its new cells are free.
        counts = np.zeros((a_count, b_count, len(MOVES)), np.int64)
        pushing = hit >= 0
        np.add.at(counts, (np.broadcast_to(index, hit.shape)[pushing], hit[pushing],
                           move[pushing]), 1)
        strong = counts >= self.weights[None, :, None]
        direction = np.argmax(strong, axis=2)
        moving = self.active & (strong.sum(axis=2) == 1)
        agents_on = np.zeros((a_count, size, size), bool)
        agents_on[index, self.agent[..., 0], self.agent[..., 1]] = True
        for b in range(b_count):  # few blocks: each one vectorised over the areas
            who = np.flatnonzero(moving[:, b])
            if not len(who):
                continue
            offsets = self._cell_offset[self._cell_block == b]
            new_top_left = self.block[who, b] + MOVES[direction[who, b]]
            cells = new_top_left[:, None, :] + offsets[None]  # [n, w*w, 2]
            ok = np.all((cells >= 0) & (cells < size), axis=(1, 2))
            cr, cc = np.clip(cells[..., 0], 0, size - 1), np.clip(cells[..., 1], 0, size - 1)
            there = grid[who[:, None], cr, cc]
            ok &= np.all((there < 0) | (there == b), axis=1)
            ok &= ~np.any(agents_on[who[:, None], cr, cc], axis=1)
            who, cr, cc = who[ok], cr[ok], cc[ok]
            old = self.block[who, b][:, None, :] + offsets[None]
            grid[who[:, None], old[..., 0], old[..., 1]] = -1
            grid[who[:, None], cr, cc] = b
            self.block[who, b] = new_top_left[ok]

        # Agents step onto free cells; one after another (twice, so that an agent can
        # follow a teammate that moved out of its way).
        free = inside & (move > 0)
        moved = np.zeros((a_count, AGENTS), bool)
        for _ in range(2):
            for k in range(AGENTS):
                go = free[:, k] & ~moved[:, k]
                go[go] = (grid[go, tr[go, k], tc[go, k]] < 0) & ~agents_on[go, tr[go, k],
                                                                            tc[go, k]]
                if not go.any():
                    continue
                old = self.agent[go, k]
                agents_on[go, old[:, 0], old[:, 1]] = False
                agents_on[go, tr[go, k], tc[go, k]] = True
                self.agent[go, k] = target[go, k]
                moved[go, k] = True

        scored = self.active & (self.block[..., 0] < GOAL_ROWS)
        self.active &= ~scored
        group_reward = (scored * self.weights[None]).sum(axis=1) - self.penalty
        done = ~self.active.any(axis=1)
        return (np.zeros(len(rows), np.float32), group_reward.astype(np.float32),
                np.zeros(len(rows), bool), done)

    # --- observations ---------------------------------------------------------
    def _planes(self, areas: np.ndarray) -> np.ndarray:
        """[n, CHANNELS, size + 2 view, size + 2 view] float32, the room padded by view."""
        v, size, n = self.view, self.size, len(areas)
        planes = np.zeros((n, CHANNELS, size + 2 * v, size + 2 * v), np.float32)
        planes[:, 0] = 1.0
        planes[:, 0, v:v + size, v:v + size] = 0.0
        planes[:, 1, v:v + GOAL_ROWS, v:v + size] = 1.0
        index = np.arange(n)[:, None]
        agent = self.agent[areas]
        planes[index, 2, agent[..., 0] + v, agent[..., 1] + v] = 1.0
        grid = self.block_grid(areas)
        on = grid >= 0
        i, r, c = np.nonzero(on)
        planes[i, 2 + self.weights[grid[on]], r + v, c + v] = 1.0
        return planes

    def _observe(self, rows):
        areas, inverse = np.unique(self._area_of[rows], return_inverse=True)
        planes = self._planes(areas)
        side = 2 * self.view + 1
        me = self.agent[self._area_of[rows], rows % AGENTS]
        span = np.arange(side)
        r = (me[:, 0:1] + span)[:, None, :, None]
        c = (me[:, 1:2] + span)[:, None, None, :]
        window = planes[inverse[:, None, None, None], np.arange(CHANNELS)[None, :, None, None],
                        r, c]
        position = me.astype(np.float32) / (self.size - 1)
        return [np.concatenate([window.reshape(len(rows), CHANNELS * side * side), position],
                               axis=1)]

    # --- the teacher ----------------------------------------------------------
    def _heuristic(self, rows):
        a_count, size = self.num_areas, self.size
        index = np.arange(a_count)
        grid = self.block_grid()
        # The block nearest the goal zone (its way north is then free of other blocks).
        order = np.where(self.active, self.block[..., 0] * size + self.block[..., 1], size * size)
        target_block = np.argmin(order, axis=1)
        has_block = self.active.any(axis=1)
        weight = self.weights[target_block]
        corner = self.block[index, target_block]
        # Cells under the block, in order: pushers of cell j stand at (top + w, left + j).
        j = np.arange(AGENTS)
        spot = np.stack([np.broadcast_to((corner[:, 0] + weight)[:, None], (a_count, AGENTS)),
                         corner[:, 1:2] + j], axis=2)  # [A, 3 cells, 2]
        needed = j[None] < weight[:, None]
        # Give the needed cells to the members nearest them.
        gap = np.abs(self.agent[:, :, None, :] - spot[:, None, :, :]).sum(axis=3)  # [A, K, J]
        # Squared: two short walks rather than one long one (and no crossing paths).
        cost = (gap[:, ASSIGNMENTS, j] ** 2 * needed[:, None, :]).sum(axis=2)  # [A, perms]
        plan = ASSIGNMENTS[np.argmin(cost, axis=1)]  # [A, J]: agent of cell j
        role = np.full((a_count, AGENTS), -1)  # the cell each member pushes from, -1: none
        for cell in range(AGENTS):
            use = needed[:, cell]
            role[index[use], plan[use, cell]] = cell
        pusher = role >= 0
        in_place = pusher & np.all(self.agent == spot[index[:, None], np.maximum(role, 0)],
                                   axis=2)
        push_now = has_block & ((in_place | ~pusher).all(axis=1)) & (
            in_place.sum(axis=1) >= weight)

        # Where each member walks: pushers to their cell; the others off the block's
        # column band below the goal zone (out of its way and off the pushing cells).
        columns = np.arange(size)
        band = ((columns[None] >= corner[:, 1:2]) &
                (columns[None] < (corner[:, 1] + weight)[:, None]))  # [A, size]
        rows_all = np.arange(size)
        targets = np.zeros((a_count, AGENTS, size, size), bool)
        away = ~band[:, None, :] & (rows_all[None, :, None] >= GOAL_ROWS)
        targets[:] = away[:, None]
        p_area, p_agent = np.nonzero(pusher)
        cell_of = spot[p_area, role[p_area, p_agent]]
        targets[p_area, p_agent] = False
        targets[p_area, p_agent, cell_of[:, 0], cell_of[:, 1]] = True
        # Distances around blocks and teammates; where teammates close every way, around
        # blocks only (the teammates move on).
        free = np.broadcast_to((grid < 0)[:, None], targets.shape).copy()
        mate = np.ones((AGENTS, AGENTS), bool) & ~np.eye(AGENTS, dtype=bool)
        for k in range(AGENTS):
            for other in np.flatnonzero(mate[k]):
                free[index, k, self.agent[:, other, 0], self.agent[:, other, 1]] = False
        distance = grid_distances(targets.reshape(-1, size, size),
                                  free.reshape(-1, size, size)).reshape(targets.shape)
        here = self.agent
        stuck = ~np.isfinite(distance[index[:, None], j[None], here[..., 0], here[..., 1]])
        if stuck.any():
            loose = grid_distances(targets[stuck], np.broadcast_to(
                (grid < 0)[:, None], targets.shape)[stuck])
            distance[stuck] = loose
        padded = np.pad(distance, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.inf)
        options = np.stack([padded[index[:, None], j[None], here[..., 0] + 1 + dr,
                                   here[..., 1] + 1 + dc] for dr, dc in MOVES], axis=2)
        action = np.argmin(options, axis=2)  # stay (0) first on ties
        action[push_now[:, None] & pusher] = UP
        action[~has_block] = 0
        area, slot = np.divmod(rows, AGENTS)
        return ActionTuple(np.zeros((len(rows), 0), np.float32),
                           action[area, slot].astype(np.int32)[:, None])
