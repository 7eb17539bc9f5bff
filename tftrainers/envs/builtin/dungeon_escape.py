"""DungeonEscape: one agent must die slaying the dragon so that another can escape with its key.

ML-Agents' DungeonEscape on a grid. Each area is a ``size`` x ``size`` room (env arg,
default 7) holding a group of 3 agents, a dragon and a door on the north wall. The
dragon walks along a row, one cell every ``dragon_period`` steps (env arg, default 3),
from one side wall towards its portal on the other; if it reaches the portal it escapes
and the episode ends (a real end, no reward). An agent that touches the dragon (steps on
its cell, or the dragon steps on the agent's) slays it and dies: that agent leaves the
group (its terminal step now, absent after) and the dragon drops a key where it was. An
agent that steps on the key carries it; carried to the door, it opens the dungeon: group
reward +1 and the episode ends. There is no other reward. 100 steps at most
(``max_steps``; interrupted). Agents may share cells.

Observations are ray-like (as ML-Agents' ray perception sensor, tags per kind): for each
of 8 sectors around the agent, how close the wall is along the sector's centre ray and how
close the nearest teammate, the dragon, the key on the floor, the door and the dragon's
portal are in that sector (0 when nothing is there); then whether the agent carries the
key and whether a teammate does. One branch of 5 actions: stay, up, down, left, right.

Why only group credit solves it: the agent that slays the dragon ends its episode with
no reward and never sees the escape it made possible. A learner that credits each agent
with its own returns (independent PPO, even given the group reward) learns that touching
the dragon ends its returns at 0 while staying alive keeps the value of a later escape,
so it learns to avoid the dragon, and without a slain dragon nobody escapes. MA-POCA
bootstraps a member that left from its group's later value, so the sacrifice is credited.
Agents spawn off the dragon's row, so the dragon only meets an agent that walks into its
way; random play slays it in some episodes and escapes in few (see the README).

The heuristic escapes every time: the agent that can meet the dragon on its path soonest
goes there and waits, then the nearest survivor takes the key to the door (the teacher
knows where everything is).
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.builtin.sensors import SECTORS, sector_proximity, wall_closeness

ESCAPE_REWARD = 1.0
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])  # stay, up, down, left, right
AGENTS = 3


class DungeonEscapeEnv(GroupAreaEnv):
    name = "DungeonEscape"
    agents_per_area = AGENTS
    default_num_areas = 16
    max_episode_steps = 100
    env_arg_defaults = {"size": 7, "dragon_period": 3, "max_steps": 100}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.size = self.args["size"]
        self.dragon_period = self.args["dragon_period"]
        self.max_episode_steps = self.args["max_steps"]
        for key, value, low in (("size", self.size, 4), ("dragon_period", self.dragon_period, 1),
                                ("max_steps", self.max_episode_steps, 1)):
            if value < low:
                raise ValueError(f"builtin:DungeonEscape: env arg {key} must be >= {low}, "
                                 f"got {value}")
        a = self.num_areas
        self.agent = np.zeros((a, AGENTS, 2), np.int64)
        self.alive = np.ones((a, AGENTS), bool)
        self.dragon = np.zeros((a, 2), np.int64)
        self.dragon_alive = np.ones(a, bool)
        self.dragon_step = np.zeros(a, np.int64)  # +1: walks east, -1: west
        self.portal = np.zeros((a, 2), np.int64)
        self.door = np.zeros((a, 2), np.int64)
        self.key = np.zeros((a, 2), np.int64)
        self.key_on_floor = np.zeros(a, bool)
        self.holder = np.full(a, -1, np.int64)  # member carrying the key, -1: nobody
        self.clock = np.zeros(a, np.int64)  # steps of the area's episode

    def observation_specs(self):
        return [ObservationSpec((6 * SECTORS + 2,), "rays_and_key")]

    def action_spec(self):
        return ActionSpec.create_discrete([len(MOVES)])

    # --- episodes -------------------------------------------------------------
    def _reset_agents(self, rows):
        areas = np.unique(self._area_of[rows])
        n, size, rng = len(areas), self.size, self.rng
        self.door[areas] = np.stack([np.zeros(n, np.int64), rng.integers(0, size, n)], axis=1)
        row = rng.integers(size // 2, size, n)  # the dragon walks in the southern half
        east = rng.random(n) < 0.5
        self.dragon_step[areas] = np.where(east, 1, -1)
        self.dragon[areas] = np.stack([row, np.where(east, 0, size - 1)], axis=1)
        self.portal[areas] = np.stack([row, np.where(east, size - 1, 0)], axis=1)
        # Agents on distinct cells off the dragon's row: the dragon meets only those
        # that walk into its way.
        cells = np.arange(size * size)
        priority = rng.random((n, size * size))
        priority[(cells[None] // size) == row[:, None]] = np.inf
        pick = np.argsort(priority, axis=1)[:, :AGENTS]
        self.agent[areas] = np.stack(np.divmod(pick, size), axis=2)
        self.alive[areas] = True
        self.dragon_alive[areas] = True
        self.key_on_floor[areas] = False
        self.holder[areas] = -1
        self.clock[areas] = 0

    # --- dynamics -------------------------------------------------------------
    def _act_group(self, rows, actions):
        a_count = self.num_areas
        area, slot = np.divmod(rows, AGENTS)
        move = np.zeros((a_count, AGENTS), np.int64)
        move[area, slot] = actions.discrete[:, 0]
        acting = np.zeros((a_count, AGENTS), bool)
        acting[area, slot] = True
        areas = np.unique(area)
        self.clock[areas] += 1

        # Agents move first (the room's walls stop them; agents may share cells) ...
        self.agent = np.where(acting[..., None],
                              np.clip(self.agent + MOVES[move], 0, self.size - 1), self.agent)
        live = acting & self.alive
        on_dragon = live & self.dragon_alive[:, None] & np.all(
            self.agent == self.dragon[:, None], axis=2)
        # ... then the dragon, every dragon_period steps, unless slain already.
        walks = np.zeros(a_count, bool)
        walks[areas] = self.dragon_alive[areas] & ~on_dragon[areas].any(axis=1) & (
            self.clock[areas] % self.dragon_period == 0)
        self.dragon[walks, 1] += self.dragon_step[walks]
        on_dragon |= live & walks[:, None] & np.all(self.agent == self.dragon[:, None], axis=2)

        slain = on_dragon.any(axis=1)
        self.dragon_alive &= ~slain
        self.key[slain] = self.dragon[slain]
        self.key_on_floor |= slain
        self.alive &= ~on_dragon
        dragon_escaped = walks & ~slain & np.all(self.dragon == self.portal, axis=1)
        self.dragon_alive &= ~dragon_escaped

        # The first survivor on the key picks it up; the carrier at the door escapes.
        on_key = self.alive & self.key_on_floor[:, None] & np.all(
            self.agent == self.key[:, None], axis=2)
        picked = on_key.any(axis=1)
        self.holder[picked] = np.argmax(on_key[picked], axis=1)
        self.key_on_floor &= ~picked
        has_holder = self.holder >= 0
        carrier = self.agent[np.arange(a_count), np.maximum(self.holder, 0)]
        escaped = has_holder & np.all(carrier == self.door, axis=1)

        group_reward = np.where(escaped, ESCAPE_REWARD, 0.0).astype(np.float32)
        left = on_dragon[area, slot]
        return (np.zeros(len(rows), np.float32), group_reward, left, escaped | dragon_escaped)

    # --- observations ---------------------------------------------------------
    def _observe(self, rows):
        area, slot = np.divmod(rows, AGENTS)
        me = self.agent[area, slot]
        sight = self.size
        parts = [wall_closeness(me, self.size)]
        mates = np.zeros((len(rows), SECTORS), np.float32)
        for other in range(1, AGENTS):  # the two teammates: nearest per sector
            mate = (slot + other) % AGENTS
            mates = np.maximum(mates, sector_proximity(me, self.agent[area, mate],
                                                       self.alive[area, mate], sight))
        parts.append(mates)
        dragon_alive = self.dragon_alive[area]
        parts.append(sector_proximity(me, self.dragon[area], dragon_alive, sight))
        parts.append(sector_proximity(me, self.key[area], self.key_on_floor[area], sight))
        parts.append(sector_proximity(me, self.door[area], np.ones(len(rows), bool), sight))
        parts.append(sector_proximity(me, self.portal[area], dragon_alive, sight))
        holder = self.holder[area]
        parts.append(np.stack([holder == slot, (holder >= 0) & (holder != slot)],
                              axis=1).astype(np.float32))
        return [np.concatenate(parts, axis=1)]

    # --- the teacher ----------------------------------------------------------
    def _heuristic(self, rows):
        a_count, size = self.num_areas, self.size
        target = self.agent.copy()  # default: stay where you are
        # Dragon alive: the member who can reach the dragon's path soonest before the
        # dragon does goes to that cell and waits there.
        hunting = self.dragon_alive
        if hunting.any():
            ahead = np.arange(1, size)  # cells ahead of the dragon on its row
            column = self.dragon[:, 1:2] + self.dragon_step[:, None] * ahead[None]  # [A, L]
            on_path = (column >= 0) & (column < size)
            # The dragon moves at the clock's multiples of dragon_period.
            arrival = ((self.clock[:, None] // self.dragon_period + ahead[None]) *
                       self.dragon_period - self.clock[:, None])  # [A, L] steps from now
            distance = (np.abs(self.agent[:, :, None, 0] - self.dragon[:, None, None, 0]) +
                        np.abs(self.agent[:, :, None, 1] - column[:, None, :]))  # [A, K, L]
            feasible = (on_path[:, None, :] & self.alive[:, :, None] &
                        (distance <= arrival[:, None, :]))
            # Earliest meeting first, the shorter walk on ties.
            score = np.where(feasible, arrival[:, None, :] * 4 * size + distance, np.inf)
            flat = score.reshape(a_count, -1)
            best = np.argmin(flat, axis=1)
            hunter, cell = np.divmod(best, len(ahead))
            found = hunting & np.isfinite(flat[np.arange(a_count), best])
            # No meeting point (never from a fresh episode): the nearest chases the dragon.
            chase = hunting & ~found
            if chase.any():
                gap = np.abs(self.agent - self.dragon[:, None]).sum(axis=2)
                hunter[chase] = np.argmin(np.where(self.alive, gap, np.inf), axis=1)[chase]
            goal = np.where(found[:, None],
                            np.stack([self.dragon[:, 0], column[np.arange(a_count), cell]], 1),
                            self.dragon)
            who = np.flatnonzero(hunting)
            target[who, hunter[who]] = goal[who]
        # Key on the floor: the nearest survivor fetches it. Key carried: to the door.
        fetch = self.key_on_floor
        if fetch.any():
            gap = np.abs(self.agent - self.key[:, None]).sum(axis=2)
            fetcher = np.argmin(np.where(self.alive, gap, np.inf), axis=1)
            who = np.flatnonzero(fetch)
            target[who, fetcher[who]] = self.key[who]
        carry = self.holder >= 0
        who = np.flatnonzero(carry)
        target[who, self.holder[who]] = self.door[who]
        area, slot = np.divmod(rows, AGENTS)
        delta = target[area, slot] - self.agent[area, slot]
        vertical = np.where(delta[:, 0] < 0, 1, 2)
        horizontal = np.where(delta[:, 1] < 0, 3, 4)
        action = np.where(delta[:, 0] != 0, vertical, np.where(delta[:, 1] != 0, horizontal, 0))
        return ActionTuple(np.zeros((len(rows), 0), np.float32),
                           action.astype(np.int32)[:, None])
