"""Built-in example environments: vectorised NumPy, many areas, each with a teacher heuristic."""
from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.builtin.ball3d import Ball3DEnv
from tftrainers.envs.builtin.basic import BasicEnv
from tftrainers.envs.builtin.basic_goal import BasicGoalEnv
from tftrainers.envs.builtin.dungeon_escape import DungeonEscapeEnv
from tftrainers.envs.builtin.gridworld import GridWorldEnv
from tftrainers.envs.builtin.hallway import HallwayEnv
from tftrainers.envs.builtin.pushblock_collab import PushBlockCollabEnv
from tftrainers.envs.builtin.pyramids import PyramidsEnv
from tftrainers.envs.builtin.soccer_twos import SoccerTwosEnv
from tftrainers.envs.builtin.sorter import SorterEnv
from tftrainers.envs.builtin.tennis import TennisEnv
from tftrainers.envs.builtin.wall_jump import WallJumpEnv

BUILTIN_ENVS = {cls.name: cls for cls in (Ball3DEnv, BasicEnv, BasicGoalEnv, DungeonEscapeEnv,
                                          GridWorldEnv, HallwayEnv, PushBlockCollabEnv,
                                          PyramidsEnv, SoccerTwosEnv, SorterEnv, TennisEnv,
                                          WallJumpEnv)}

__all__ = ["AreaEnv", "BUILTIN_ENVS", "Ball3DEnv", "BasicEnv", "BasicGoalEnv", "DungeonEscapeEnv",
           "GridWorldEnv", "HallwayEnv", "PushBlockCollabEnv", "PyramidsEnv", "SoccerTwosEnv",
           "SorterEnv", "TennisEnv", "WallJumpEnv"]
