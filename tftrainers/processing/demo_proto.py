"""The protobuf messages of Unity ML-Agents' ``.demo`` files (package ``communicator_objects``).

Our own definitions with ML-Agents' field numbers (docs/dev/architecture.md#demo-format), built at
import from a
``FileDescriptorProto`` with the protobuf runtime that ships with TensorFlow: no ``protoc``
at install time and no ``mlagents-envs`` dependency. They live in a private descriptor pool,
so they never clash with ML-Agents' generated classes if both are imported in one process.

Enums of the original ``.proto`` files are int32 fields here (the same varint on the wire):
``vector_action_space_type_deprecated`` 0 discrete / 1 continuous, ``compression_type``
0 none / 1 PNG, ``observation_type`` 0 default / 1 goal signal.

One field is ours: ``BrainParametersProto.recorded_by`` (number 1000, unused by ML-Agents),
which ``tftrainers-record`` sets to ``"tftrainers <version>"``. Readers that do not know it
(ML-Agents' own) skip it as an unknown field; ours uses it to pair each record's
observation with its own action (see ``demonstrations``).
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "communicator_objects"
RECORDED_BY_FIELD = 1000

# Dimension properties (ML-Agents' DimensionPropertyProto) and compression types.
DIM_UNSPECIFIED, DIM_NONE, DIM_TRANSLATIONAL_EQUIVARIANCE, DIM_VARIABLE_SIZE = 0, 1, 2, 4
COMPRESSION_NONE, COMPRESSION_PNG = 0, 1
SPACE_TYPE_DISCRETE, SPACE_TYPE_CONTINUOUS = 0, 1
# Observation types (ML-Agents' ObservationTypeProto; 2 and 3 are its deprecated ones).
OBSERVATION_TYPE_DEFAULT, OBSERVATION_TYPE_GOAL_SIGNAL = 0, 1

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"int32": _F.TYPE_INT32, "float": _F.TYPE_FLOAT, "bool": _F.TYPE_BOOL,
            "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES}

# message name -> [(field name, number, type or message name, repeated, oneof index)];
# a nested message (Outer.Inner) comes after its outer message.
_MESSAGES = {
    "DemonstrationMetaProto": [
        ("api_version", 1, "int32", False, None),
        ("demonstration_name", 2, "string", False, None),
        ("number_steps", 3, "int32", False, None),
        ("number_episodes", 4, "int32", False, None),
        ("mean_reward", 5, "float", False, None),
    ],
    "ActionSpecProto": [
        ("num_continuous_actions", 1, "int32", False, None),
        ("num_discrete_actions", 2, "int32", False, None),
        ("discrete_branch_sizes", 3, "int32", True, None),
        ("action_descriptions", 4, "string", True, None),
    ],
    "BrainParametersProto": [
        ("vector_action_size_deprecated", 3, "int32", True, None),
        ("vector_action_descriptions_deprecated", 5, "string", True, None),
        ("vector_action_space_type_deprecated", 6, "int32", False, None),
        ("brain_name", 7, "string", False, None),
        ("is_training", 8, "bool", False, None),
        ("action_spec", 9, "ActionSpecProto", False, None),
        ("recorded_by", RECORDED_BY_FIELD, "string", False, None),
    ],
    "ObservationProto": [
        ("shape", 1, "int32", True, None),
        ("compression_type", 2, "int32", False, None),
        ("compressed_data", 3, "bytes", False, 0),
        ("float_data", 4, "ObservationProto.FloatData", False, 0),
        ("compressed_channel_mapping", 5, "int32", True, None),
        ("dimension_properties", 6, "int32", True, None),
        ("observation_type", 7, "int32", False, None),
        ("name", 8, "string", False, None),
    ],
    "ObservationProto.FloatData": [
        ("data", 1, "float", True, None),
    ],
    "AgentInfoProto": [
        ("reward", 7, "float", False, None),
        ("done", 8, "bool", False, None),
        ("max_step_reached", 9, "bool", False, None),
        ("id", 10, "int32", False, None),
        ("action_mask", 11, "bool", True, None),
        ("observations", 13, "ObservationProto", True, None),
        ("group_id", 14, "int32", False, None),
        ("group_reward", 15, "float", False, None),
    ],
    "AgentActionProto": [
        ("vector_actions_deprecated", 1, "float", True, None),
        ("value", 4, "float", False, None),
        ("continuous_actions", 6, "float", True, None),
        ("discrete_actions", 7, "int32", True, None),
    ],
    "AgentInfoActionPairProto": [
        ("agent_info", 1, "AgentInfoProto", False, None),
        ("action_info", 2, "AgentActionProto", False, None),
    ],
}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="tftrainers/communicator_objects/demonstrations.proto", package=PACKAGE,
        syntax="proto3")
    messages = {}
    for full_name, fields in _MESSAGES.items():
        outer, _, inner = full_name.partition(".")
        if inner:
            message = messages[outer].nested_type.add(name=inner)
        else:
            message = messages[outer] = file.message_type.add(name=outer)
        for name, number, kind, repeated, oneof in fields:
            field = message.field.add(name=name, number=number, label=(
                _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL))
            if kind in _SCALARS:
                field.type = _SCALARS[kind]
            else:
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{PACKAGE}.{kind}"
            if oneof is not None:
                if not message.oneof_decl:
                    message.oneof_decl.add(name="observation_data")
                field.oneof_index = oneof
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())


def _message_class(name: str):
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))


DemonstrationMetaProto = _message_class("DemonstrationMetaProto")
ActionSpecProto = _message_class("ActionSpecProto")
BrainParametersProto = _message_class("BrainParametersProto")
ObservationProto = _message_class("ObservationProto")
AgentInfoProto = _message_class("AgentInfoProto")
AgentActionProto = _message_class("AgentActionProto")
AgentInfoActionPairProto = _message_class("AgentInfoActionPairProto")

__all__ = ["ActionSpecProto", "AgentActionProto", "AgentInfoActionPairProto", "AgentInfoProto",
           "BrainParametersProto", "DemonstrationMetaProto", "ObservationProto"]
