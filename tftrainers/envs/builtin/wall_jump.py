"""WallJump: a 1-D track with a wall to climb, on the pattern of ML-Agents' WallJump, whose
wall height is an environment parameter (the task its curricula are made for).

Cells 0..15; the agent starts in cells 0..3, a wall stands in cell 8, the goal is cell 15.
Actions (one branch of 4): stay, left, right, jump. At the wall's face (cell 7) each jump
climbs 2/3 of a height unit; any other action there drops the agent to the ground, so a wall
of height h takes ceil(1.5 h) jumps in a row (12 for h = 8), then a step right over it (a
wall of height <= 0 is no wall). Reaching the goal gives +1 and ends the episode; every step
costs 0.005, and a fall from the wall 0.01 per jump fallen; 64 steps at most (interrupted).
Observation: one-hot cell (16), the jumps made at the face / 12, the wall height / 8. Best
return at height 8 from cell 0: 1 - 0.005 * (7 + 12 + 8) = 0.865.

A random policy climbs a wall of height 8 with probability 4^-12 per try at its face, and
what it learns from its tries is that climbing costs (the falls): PPO alone does not see the
goal (docs/guides/environment-parameters.md), while a curriculum that raises the wall from
[0, 2] to 8 teaches "climb while below the top" on low walls first, where the goal pays for
the falls. (Without the fall cost, PPO's value estimates of the unvisited higher levels drew
some runs up the wall without any reward: it solved height 8 alone.)

Env arg ``wall``: ``both`` (default: ``num_areas`` areas of each kind, two behaviors, as in
ML-Agents' WallJump, whose curriculum config then runs unchanged), ``big`` (behavior
``BigWallJump``, parameter ``big_wall_height``, default 8) or ``small`` (``SmallWallJump``,
``small_wall_height``, default 4).
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.base import ActionSpec, ActionTuple, BaseEnv, ObservationSpec
from tftrainers.envs.area_env import AreaEnv, parse_env_args
from tftrainers.envs.parameters import check_parameter_names

LENGTH = 16
WALL = 8
GOAL = LENGTH - 1
MAX_HEIGHT = 8.0  # observation scale of the wall height
JUMPS_PER_HEIGHT = 1.5  # a jump climbs 2/3 of a height unit
MAX_JUMPS = 12.0  # observation scale of the jumps made (a wall of height 8)
STEP_PENALTY = 0.005
FALL_PENALTY = 0.01  # per jump's height fallen
STAY, LEFT, RIGHT, JUMP = range(4)
WALLS = {"big": ("BigWallJump", "big_wall_height", 8.0),
         "small": ("SmallWallJump", "small_wall_height", 4.0)}


class WallJumpArea(AreaEnv):
    """The areas of one kind of wall (one behavior)."""

    name = "BigWallJump"
    agents_per_area = 1
    default_num_areas = 32
    max_episode_steps = 64
    env_arg_defaults = {"wall": ("big", "big", "small")}
    environment_parameter_defaults = {"big_wall_height": 8.0}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        wall = env_args.get("wall", "big")
        if wall in WALLS:  # the behavior and parameter names follow the wall (checked below)
            self.name, parameter, default = WALLS[wall]
            self.environment_parameter_defaults = {parameter: default}
        super().__init__(seed, num_areas, **env_args)
        self.parameter = next(iter(self.environment_parameter_defaults))
        self.position = np.zeros(self.n_agents, np.int64)
        self.level = np.zeros(self.n_agents, np.int64)
        self.climbs = np.zeros(self.n_agents, np.int64)  # jumps each agent's wall takes
        self._eye = np.eye(LENGTH, dtype=np.float32)

    def _env_id(self) -> str:
        return "builtin:WallJump"

    def observation_specs(self):
        return [ObservationSpec((LENGTH + 2,), "cell_level_height")]

    def action_spec(self):
        return ActionSpec.create_discrete([4])

    def _reset_agents(self, rows):
        self.position[rows] = self.rng.integers(0, 4, len(rows))
        self.level[rows] = 0
        height = self.parameter_values[self.parameter][rows]
        self.climbs[rows] = np.ceil(JUMPS_PER_HEIGHT * np.maximum(height, 0.0) - 1e-9
                                    ).astype(np.int64)

    def _act(self, rows, actions):
        action = actions.discrete[:, 0]
        position, level, climbs = self.position[rows], self.level[rows], self.climbs[rows]
        at_face = position == WALL - 1
        on_top = level >= climbs
        climb = at_face & (action == JUMP) & ~on_top
        # Right: blocked at the face of a wall not yet topped; left and right move.
        move = np.where(action == LEFT, -1, np.where(action == RIGHT, 1, 0))
        move = np.where(at_face & (action == RIGHT) & ~on_top, 0, move)
        position = np.clip(position + move, 0, GOAL)
        level = np.where(climb, level + 1, np.where(at_face & (action != JUMP), 0, level))
        level = np.where(position == WALL - 1, level, 0)  # off the face: on the ground
        # A fall costs by its height; going over the top (right, into the wall's cell) does not.
        fallen = np.where(position == WALL, 0, self.level[rows] - level)
        self.position[rows], self.level[rows] = position, level
        goal = position == GOAL
        reward = (np.where(goal, 1.0, 0.0) - STEP_PENALTY
                  - FALL_PENALTY * np.maximum(fallen, 0)).astype(np.float32)
        return reward, goal

    def _observe(self, rows):
        extra = np.stack([self.level[rows] / MAX_JUMPS,
                          self.parameter_values[self.parameter][rows] / MAX_HEIGHT], axis=1)
        return [np.concatenate([self._eye[self.position[rows]], extra.astype(np.float32)],
                               axis=1)]

    def _heuristic(self, rows):
        # Right to the wall, jump until on top, then right to the goal.
        at_face = self.position[rows] == WALL - 1
        climbing = at_face & (self.level[rows] < self.climbs[rows])
        discrete = np.where(climbing, JUMP, RIGHT).astype(np.int32)[:, None]
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete)


class WallJumpEnv(BaseEnv):
    """``builtin:WallJump``: the big-wall areas, the small-wall areas, or both (env arg
    ``wall``), each kind its own behavior (see the module docstring)."""

    name = "WallJump"
    default_num_areas = WallJumpArea.default_num_areas
    max_episode_steps = WallJumpArea.max_episode_steps
    env_arg_defaults = {"wall": ("both", "both", "big", "small")}

    @classmethod
    def _env_arg_defaults(cls):
        return {**cls.env_arg_defaults, "step_latency_ms": 0.0, "unity_steps": False}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        args = parse_env_args(self.name, env_args, self._env_arg_defaults())
        walls = ("big", "small") if args["wall"] == "both" else (args["wall"],)
        rest = {k: v for k, v in env_args.items() if k != "wall"}
        self.envs = {}
        for k, wall in enumerate(walls):
            env = WallJumpArea(seed + 1000 * k, num_areas, wall=wall, **rest)
            self.envs[env.name] = env

    def _env(self, behavior_name: str) -> WallJumpArea:
        if behavior_name not in self.envs:
            raise KeyError(f"{self!r} has no behavior '{behavior_name}'; its behaviors: "
                           f"{', '.join(self.envs)}")
        return self.envs[behavior_name]

    @property
    def behavior_specs(self):
        return {name: spec for env in self.envs.values()
                for name, spec in env.behavior_specs.items()}

    @property
    def environment_parameter_names(self):
        return tuple(n for env in self.envs.values() for n in env.environment_parameter_names)

    def set_environment_parameters(self, parameters) -> None:
        check_parameter_names("builtin:WallJump", self.environment_parameter_names, parameters)
        super().set_environment_parameters(parameters)
        for env in self.envs.values():
            env.set_environment_parameters({n: v for n, v in parameters.items()
                                            if n in env.environment_parameter_names})

    def reset(self) -> None:
        for env in self.envs.values():
            env.reset()

    def step(self) -> None:
        for env in self.envs.values():
            env.step()

    def get_steps(self, behavior_name):
        return self._env(behavior_name).get_steps(behavior_name)

    def set_actions(self, behavior_name, actions) -> None:
        self._env(behavior_name).set_actions(behavior_name, actions)

    def heuristic(self, behavior_name, decision_steps):
        return self._env(behavior_name).heuristic(behavior_name, decision_steps)

    def close(self) -> None:
        for env in self.envs.values():
            env.close()

    def __repr__(self) -> str:
        return f"builtin:WallJump({', '.join(map(repr, self.envs.values()))})"
