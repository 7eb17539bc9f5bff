"""The acting side (docs/dev/architecture.md#acting-and-learning): per behavior an AgentManager
(AgentProcessor + acting policy +
agent memories) turns env steps into trajectories on a queue and takes the learner's weights
back as a flat vector with a version. No TensorFlow here, so acting can run anywhere.
"""
from tftrainers.acting.actor import ActLayout, Actor, WeightUpdate, bucket, pad_rows
from tftrainers.acting.agent_manager import (ActingStats, AgentManager, EnvCallError,
                                             call_env, env_error_line, step_env)
from tftrainers.acting.imitation import ImitationManager, Labelled, TeacherEpisodes
from tftrainers.acting.onnx_program import OnnxProgram, OnnxRunner, WeightInput

__all__ = ["ActLayout", "ActingStats", "Actor", "AgentManager", "EnvCallError", "ImitationManager",
           "Labelled", "OnnxProgram", "OnnxRunner", "TeacherEpisodes", "WeightInput",
           "WeightUpdate", "bucket", "call_env", "env_error_line", "pad_rows", "step_env"]
