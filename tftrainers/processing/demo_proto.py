"""The protobuf messages of Unity ML-Agents' ``.demo`` files (package ``communicator_objects``).

The same messages Unity players send over ML-Agents' protocol: one definition, our own
``.proto`` files with ML-Agents' field numbers (docs/dev/architecture.md#demo-format) and the
code generated from them, in ``tftrainers/envs/unity/communicator_objects`` (no ``protoc``
at install time and no ``mlagents-envs`` dependency).

One field is ours: ``BrainParametersProto.recorded_by`` (number 1000, unused by ML-Agents),
which ``tftrainers-record`` sets to ``"tftrainers <version>"``. Readers that do not know it
(ML-Agents' own) skip it as an unknown field; ours uses it to pair each record's
observation with its own action (see ``demonstrations``).
"""
from __future__ import annotations

from tftrainers.envs.unity.communicator_objects.agent_info_action_pair_pb2 import (
    AgentInfoActionPairProto)
from tftrainers.envs.unity.communicator_objects.agent_action_pb2 import AgentActionProto
from tftrainers.envs.unity.communicator_objects.agent_info_pb2 import AgentInfoProto
from tftrainers.envs.unity.communicator_objects.brain_parameters_pb2 import (
    ActionSpecProto, BrainParametersProto)
from tftrainers.envs.unity.communicator_objects.demonstration_meta_pb2 import (
    DemonstrationMetaProto)
from tftrainers.envs.unity.communicator_objects.observation_pb2 import ObservationProto

PACKAGE = "communicator_objects"
RECORDED_BY_FIELD = 1000

# Dimension properties (ML-Agents' DimensionPropertyProto) and compression types.
DIM_UNSPECIFIED, DIM_NONE, DIM_TRANSLATIONAL_EQUIVARIANCE, DIM_VARIABLE_SIZE = 0, 1, 2, 4
COMPRESSION_NONE, COMPRESSION_PNG = 0, 1
SPACE_TYPE_DISCRETE, SPACE_TYPE_CONTINUOUS = 0, 1
# Observation types (ML-Agents' ObservationTypeProto; 2 and 3 are its deprecated ones).
OBSERVATION_TYPE_DEFAULT, OBSERVATION_TYPE_GOAL_SIGNAL = 0, 1

__all__ = ["ActionSpecProto", "AgentActionProto", "AgentInfoActionPairProto", "AgentInfoProto",
           "BrainParametersProto", "DemonstrationMetaProto", "ObservationProto"]
