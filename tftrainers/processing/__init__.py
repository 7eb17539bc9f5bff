"""Experience pipeline on arrays: env steps -> Trajectory -> AgentBuffer -> minibatches.

See ``agent_processor`` for the loop that feeds it and ``buffer`` for training use.
"""
from tftrainers.processing.agent_processor import (ActionInfo, AgentProcessor, EpisodeStats,
                                                   TrajectoryQueue)
from tftrainers.processing.buffer import (AgentBuffer, BufferKey, Key, Minibatch, ObsField,
                                          StreamField, key_name, next_obs_key, obs_key,
                                          stream_key, team_obs_key)
from tftrainers.processing.trajectory import LogProbs, Trajectory, allowed_action_mask

__all__ = [
    "ActionInfo", "AgentBuffer", "AgentProcessor", "BufferKey", "EpisodeStats", "Key",
    "LogProbs", "Minibatch", "ObsField", "StreamField", "Trajectory", "TrajectoryQueue",
    "allowed_action_mask", "key_name", "next_obs_key", "obs_key", "stream_key", "team_obs_key",
]
