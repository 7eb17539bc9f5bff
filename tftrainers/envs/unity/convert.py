"""Unity's messages <-> our env API: behavior specs, decision / terminal steps, actions.

Observations arrive per agent as ``ObservationProto``: float data (vector ``[n]``, visual
``[C, H, W]`` in CHW order, variable-length ``[entities, size]``) or PNG bytes (8-bit RGB,
several PNGs concatenated for more than 3 channels, mapped to channels by
``compressed_channel_mapping``: -1 drops a channel, channels with the same index are
averaged). Ours are HWC for visual observations, so both are turned into ``[H, W, C]``
floats in [0, 1] here, once, batched over the agents of a behavior.
"""
from __future__ import annotations

import io
from typing import List, Optional, Sequence, Tuple

import numpy as np

from tftrainers.envs.base import (ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps,
                                  ObservationKind, ObservationSpec, ObservationType,
                                  TerminalSteps)
from tftrainers.envs.checks import EnvDataError
from tftrainers.envs.unity.communicator_objects.agent_action_pb2 import AgentActionProto
from tftrainers.envs.unity.communicator_objects.observation_pb2 import (ObservationProto,
                                                                        PNG)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: ``dimension_properties`` values (ML-Agents' DimensionProperty flags).
DIM_UNSPECIFIED, DIM_NONE, DIM_TRANSLATIONAL, DIM_VARIABLE_SIZE = 0, 1, 2, 4
_SUPPORTED = ("vector [size], visual [channels, height, width] and variable-length "
              "[entities, size] (dimension property 4) observations")


def observation_spec(obs: ObservationProto, index: int, behavior: str) -> ObservationSpec:
    """Our spec of one of Unity's observations (visual ``[C, H, W]`` -> ``[H, W, C]``).

    Raises:
        EnvDataError: a shape we cannot train on (naming the observation).
    """
    shape = tuple(int(d) for d in obs.shape)
    dims = tuple(int(d) for d in obs.dimension_properties)
    name = obs.name or f"obs_{index}"
    kind_of_type = (ObservationType.GOAL_SIGNAL if obs.observation_type == 1
                    else ObservationType.DEFAULT)
    if len(shape) == 1:
        kind, ours = ObservationKind.VECTOR, shape
    elif len(shape) == 3:
        kind, ours = ObservationKind.VISUAL, (shape[1], shape[2], shape[0])
    elif len(shape) == 2 and DIM_VARIABLE_SIZE in dims:
        kind, ours = ObservationKind.VARIABLE_LENGTH, shape
    else:
        raise EnvDataError(f"behavior '{behavior}': observation '{name}' has shape "
                           f"{list(shape)} with dimension properties {list(dims)}, which "
                           f"tftrainers cannot train on; it trains on {_SUPPORTED}")
    if min(ours) <= 0:
        raise EnvDataError(f"behavior '{behavior}': observation '{name}' has shape "
                           f"{list(shape)}; every dimension must be positive")
    return ObservationSpec(ours, name, kind, kind_of_type)


def action_spec(brain) -> ActionSpec:
    """``BrainParametersProto`` -> ActionSpec (the deprecated fields of older packages too)."""
    spec = brain.action_spec
    if spec.num_continuous_actions or spec.num_discrete_actions:
        return ActionSpec(int(spec.num_continuous_actions), tuple(spec.discrete_branch_sizes))
    sizes = tuple(brain.vector_action_size_deprecated)
    if brain.vector_action_space_type_deprecated == 1:
        return ActionSpec(int(sum(sizes)), ())
    return ActionSpec(0, sizes)


def behavior_spec(brain, first_info, behavior: str) -> BehaviorSpec:
    return BehaviorSpec(tuple(observation_spec(o, i, behavior)
                              for i, o in enumerate(first_info.observations)),
                        action_spec(brain))


def decode_png(data: bytes, channels: int, mapping: Sequence[int] = ()) -> np.ndarray:
    """One observation's PNG bytes -> ``[H, W, channels]`` float32 in [0, 1].

    Several PNGs may be concatenated (each 3 RGB channels); ``mapping`` says which of our
    channels each of theirs feeds (-1: none; several: averaged). Without a mapping, one
    channel is the mean of RGB and more channels are the first ones.
    """
    from PIL import Image
    parts = []
    start = 0
    while start < len(data):
        end = data.find(PNG_SIGNATURE, start + len(PNG_SIGNATURE))
        end = len(data) if end < 0 else end
        image = Image.open(io.BytesIO(data[start:end]))
        image.load()
        if image.mode != "RGB":
            image = image.convert("RGB")
        parts.append(np.asarray(image))
        start = end
    pixels = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=2)
    source = pixels.shape[2]
    if mapping and len(mapping) == source and list(mapping) != list(range(source)):
        weights = np.zeros((source, channels), np.float32)
        for i, target in enumerate(mapping):
            if 0 <= target < channels:
                weights[i, target] = 1.0
        counts = weights.sum(axis=0)
        weights /= np.maximum(counts, 1.0)
        return pixels.astype(np.float32) @ (weights / 255.0)
    if channels == 1 and source != 1:
        return pixels.astype(np.float32).mean(axis=2, keepdims=True) * (1.0 / 255.0)
    return pixels[:, :, :channels].astype(np.float32) * (1.0 / 255.0)


def _observation_batch(infos: Sequence, index: int, spec: ObservationSpec,
                       behavior: str) -> np.ndarray:
    n = len(infos)
    if n == 0:
        return np.zeros((0, *spec.shape), np.float32)
    first = infos[0].observations[index]
    if spec.kind is ObservationKind.VISUAL and first.compression_type == PNG:
        h, w, c = spec.shape
        out = np.empty((n, h, w, c), np.float32)
        for row, info in enumerate(infos):
            obs = info.observations[index]
            image = decode_png(obs.compressed_data, c, obs.compressed_channel_mapping)
            if image.shape != (h, w, c):
                raise EnvDataError(f"behavior '{behavior}': agent {info.id}'s observation "
                                   f"'{spec.name}' decodes to {list(image.shape)} (HWC), "
                                   f"expected {[h, w, c]}")
            out[row] = image
        return out
    size = int(np.prod(spec.shape))
    # The packed floats of each agent, as they came (their serialized bytes after the tag
    # and length): one frombuffer instead of a Python float per value.
    parts = [_packed_floats(info.observations[index].float_data) for info in infos]
    if any(len(part) != 4 * size for part in parts):
        for info, part in zip(infos, parts):
            if len(part) != 4 * size:
                raise EnvDataError(f"behavior '{behavior}': agent {info.id}'s observation "
                                   f"'{spec.name}' has {len(part) // 4} values, its spec "
                                   f"{list(spec.shape)} needs {size}")
    flat = np.frombuffer(bytearray(b"".join(parts)), "<f4").reshape(n, size)  # writable
    if spec.kind is ObservationKind.VISUAL:
        h, w, c = spec.shape
        return np.ascontiguousarray(flat.reshape(n, c, h, w).transpose(0, 2, 3, 1))
    return flat.reshape(n, *spec.shape)


def _packed_floats(float_data) -> bytes:
    """The little-endian float32 values of a ``FloatData`` message (field 1, packed)."""
    data = float_data.SerializeToString()
    if not data:
        return b""
    i = 1  # after the tag byte: the varint length
    while data[i] & 0x80:
        i += 1
    return data[i + 1:]


def _masks(infos: Sequence, branches: Tuple[int, ...], behavior: str) -> List[np.ndarray]:
    n, total = len(infos), int(sum(branches))
    flat = np.zeros((n, total), bool)
    for row, info in enumerate(infos):
        mask = info.action_mask
        if len(mask):
            if len(mask) != total:
                raise EnvDataError(f"behavior '{behavior}': agent {info.id} sent an action "
                                   f"mask of {len(mask)} values, its branches {list(branches)} "
                                   f"need {total}")
            flat[row] = mask
    return np.split(flat, np.cumsum(branches)[:-1], axis=1) if branches else []


def steps_from_infos(infos: Sequence, spec: BehaviorSpec,
                     behavior: str) -> Tuple[DecisionSteps, TerminalSteps]:
    """One behavior's ``AgentInfoProto`` list -> (DecisionSteps, TerminalSteps), each in the
    order of the list (the order actions go back in)."""
    expected = len(spec.observation_specs)
    rows = [(info.done, len(info.observations)) for info in infos]
    if any(count != expected for _, count in rows):
        info = next(i for i, (_, c) in zip(infos, rows) if c != expected)
        raise EnvDataError(f"behavior '{behavior}': agent {info.id} sent "
                           f"{len(info.observations)} observations, its spec has {expected}")
    if any(done for done, _ in rows):
        done = [info for info, (d, _) in zip(infos, rows) if d]
        live = [info for info, (d, _) in zip(infos, rows) if not d]
    else:
        done, live = [], list(infos)

    def common(group):
        obs = [_observation_batch(group, i, o, behavior)
               for i, o in enumerate(spec.observation_specs)]
        fields = [(info.reward, info.id, info.group_id, info.group_reward) for info in group]
        reward = np.array([f[0] for f in fields], np.float32)
        agent_id = np.array([f[1] for f in fields], np.int32)
        group_id = np.array([f[2] for f in fields], np.int32)
        group_reward = np.array([f[3] for f in fields], np.float32)
        return obs, reward, agent_id, group_id, group_reward

    obs, reward, agent_id, group_id, group_reward = common(live)
    branches = spec.action_spec.discrete_branches
    masks = _masks(live, branches, behavior) if branches else []
    decision = DecisionSteps(obs, reward, agent_id, masks, group_id, group_reward)
    if done:
        obs, reward, agent_id, group_id, group_reward = common(done)
        interrupted = np.array([info.max_step_reached for info in done], bool)
        terminal = TerminalSteps(obs, reward, interrupted, agent_id, group_id, group_reward)
    else:
        terminal = TerminalSteps.empty(spec)
    return decision, terminal


def action_protos(actions: ActionTuple) -> List[AgentActionProto]:
    """One ``AgentActionProto`` per row, in the rows' order."""
    continuous, discrete = actions.continuous.tolist(), actions.discrete.tolist()
    return [AgentActionProto(continuous_actions=c, discrete_actions=d)
            for c, d in zip(continuous, discrete)]


def behavior_team(name: str) -> Optional[int]:
    """The team of a fully qualified behavior name ``Name?team=N`` (None without one)."""
    _, _, query = name.partition("?")
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "team" and value.lstrip("-").isdigit():
            return int(value)
    return None


def behavior_base_name(name: str) -> str:
    """``Name?team=N`` -> ``Name`` (how ML-Agents finds a behavior's settings)."""
    return name.split("?", 1)[0]


__all__ = ["PNG_SIGNATURE", "action_protos", "action_spec", "behavior_base_name",
           "behavior_spec", "behavior_team", "decode_png", "observation_spec",
           "steps_from_infos"]
