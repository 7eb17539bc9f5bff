"""Unity builds and the Unity Editor over ML-Agents' own gRPC protocol (API 1.5.0).

    from tftrainers.envs.unity import UnityEnv
    env = UnityEnv("Builds/Game", no_graphics=True)     # or UnityEnv() for the Editor

``communicator_objects/`` holds our own ``.proto`` files (ML-Agents' package, message names
and field numbers) and the Python code generated from them, regenerated from the
repository's root with (``pip install grpcio-tools``, the ``proto`` extra):

    python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. \\
        tftrainers/envs/unity/communicator_objects/*.proto
    # then delete the empty *_pb2_grpc.py files of protos without a service

Modules: ``communicator`` (the gRPC server the player calls), ``launcher`` (finding and
starting a build), ``convert`` (messages <-> our steps and specs), ``side_channels``,
``env`` (``UnityEnv``), ``options`` (run settings -> ``UnityEnv`` arguments).
"""
from __future__ import annotations

import os
from typing import Optional

#: Env id prefixes that are not Unity builds.
_OTHER_KINDS = ("builtin", "gym", "pettingzoo", "python")


def is_unity_env_id(env_id: Optional[str]) -> bool:
    """True for a build path and for no env at all (the Editor); False for ``builtin:``,
    ``gym:``, ``pettingzoo:`` and ``python:`` ids."""
    if not env_id:
        return True
    kind, sep, _ = str(env_id).partition(":")
    if sep and (kind in _OTHER_KINDS or (kind.isidentifier() and len(kind) > 1
                                         and not os.path.exists(env_id))):
        return False
    return True


def __getattr__(name):  # the heavy modules (grpc, protobuf) load when first used
    if name in ("UnityEnv",):
        from tftrainers.envs.unity.env import UnityEnv
        return UnityEnv
    if name in ("SideChannel", "IncomingMessage", "OutgoingMessage", "StatsSideChannel",
                "EngineConfigurationChannel", "EnvironmentParametersChannel", "RawBytesChannel",
                "StatsAggregationMethod", "EnvironmentStats"):
        from tftrainers.envs.unity import side_channels
        return getattr(side_channels, name)
    raise AttributeError(name)


__all__ = ["EngineConfigurationChannel", "EnvironmentParametersChannel", "EnvironmentStats",
           "IncomingMessage", "OutgoingMessage", "RawBytesChannel", "SideChannel",
           "StatsAggregationMethod", "StatsSideChannel", "UnityEnv", "is_unity_env_id"]
