"""Unity ML-Agents ``.demo`` files: read into arrays for a trainer, and written record by record.

    demos = load_demonstrations("configs/demos/GridWorld.demo", spec=env_spec)
    demos.obs[0]              # [N, 75] float32, the observation each action was taken from
    demos.discrete_actions    # [N, 1] int32
    demos.check_against(spec, "GridWorld")   # one-line DemonstrationError on a mismatch

The format (docs/dev/architecture.md#demo-format): a varint-length-delimited
``DemonstrationMetaProto`` at offset 0 in a
32-byte header region, ``BrainParametersProto`` at offset 33, then ``number_steps`` records of
``AgentInfoActionPairProto``; Unity leaves trailing bytes after them (a copy of the meta),
so reading stops after ``number_steps`` records.

A record holds an observation, the reward received since the previous record, whether the
episode ended (``done``, with ``max_step_reached`` for a step limit), the action mask, and an
action. Transitions are built as ML-Agents' loader builds them: observation and action of
record t, reward and done of record t+1, within one agent's episode. Which action a record
holds depends on who wrote it (``action_pairing``):

- ``"next_record"`` (files recorded in Unity): Unity writes a record before that step's
  decision, so its action field holds the action taken at the *previous* decision (zeros in
  an episode's first record). The action taken from observation t is the one in record t+1.
- ``"same_record"`` (files written by ``tftrainers-record``, marked by
  ``BrainParametersProto.recorded_by``): record t holds the action taken from observation t,
  so ML-Agents' own loader pairs them correctly too.
- ``"auto"`` (default): ``same_record`` for our files, ``next_record`` for all others.

Unlike ML-Agents' loader, the final record of an episode (done) starts no transition: its
observation is the last one, and pairing it with the next episode's first record is not a
step anyone took.

Visual observations are stored ``[C, H, W]`` by current Unity (dimension properties
NONE, TE, TE) and ``[H, W, C]`` by older Unity (TE, TE, NONE); either way they come out as
our HWC floats in [0, 1]: PNG pixels / 255, several PNGs per observation concatenated along
channels, regrouped by ``compressed_channel_mapping``. Files without dimension properties
(older Unity ``[H, W, C]``, ML-Agents' Python tools ``[C, H, W]``) do not say which: a PNG's
size tells when it can; otherwise the stored shape is read the way that gives the behavior's
shape (channels first if both do), or ``[H, W, C]`` when there is no behavior to match.
"""
from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from google.protobuf.message import DecodeError

from tftrainers.envs.base import (ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec,
                                  ObservationType)
from tftrainers.processing import demo_proto as proto

__all__ = ["DemonstrationError", "DemonstrationFile", "Demonstrations", "DemonstrationWriter",
           "PAIRINGS", "Records", "load_demonstrations", "read_demo_file", "RECORDER"]

SUPPORTED_API_VERSIONS = (0, 1)
API_VERSION = 1
META_DATA_BYTES = 32  # Unity's DemonstrationWriter.MetaDataBytes
BRAIN_PARAMETERS_OFFSET = META_DATA_BYTES + 1
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PAIRINGS = ("auto", "same_record", "next_record")


def _recorder() -> str:
    from importlib import metadata
    try:
        return f"tftrainers {metadata.version('tftrainers')}"
    except metadata.PackageNotFoundError:  # run from a source tree
        return "tftrainers"


RECORDER = _recorder()


class DemonstrationError(ValueError):
    """A ``.demo`` file that cannot be read or does not fit the behavior (one line, naming
    the file)."""


class Records(NamedTuple):
    """The records of a ``.demo`` file as arrays, one row per record, as the file holds them.

    obs: per observation, [R, *shape] float32 (visual HWC, in [0, 1]).
    reward: [R] float32, reward received since the agent's previous record.
    done: [R] bool, the episode ended at this record (its observation is the last).
    max_step_reached: [R] bool, ... because of a step limit.
    agent_id: [R] int32.
    action_mask: [R, sum(branches)] bool, True = masked (forbidden), as in the file.
    continuous: [R, c] float32, the record's continuous action field.
    discrete: [R, b] int32, the record's discrete action field.
    has_action: [R] bool, the record holds a full action (Unity may leave it empty).
    group_id: [R] int32; group_reward: [R] float32.
    """

    obs: List[np.ndarray]
    reward: np.ndarray
    done: np.ndarray
    max_step_reached: np.ndarray
    agent_id: np.ndarray
    action_mask: np.ndarray
    continuous: np.ndarray
    discrete: np.ndarray
    has_action: np.ndarray
    group_id: np.ndarray
    group_reward: np.ndarray

    def __len__(self) -> int:
        return len(self.reward)


@dataclass(frozen=True)
class DemonstrationFile:
    """What one file's header says, and how its actions were paired."""

    path: str
    api_version: int
    name: str  # demonstration_name
    number_steps: int  # records, per the header
    number_episodes: int  # per the header (Unity counts one extra episode)
    mean_reward: float  # per the header
    behavior_name: str  # brain_name
    recorded_by: str  # "" unless written by tftrainers-record
    action_pairing: str  # "same_record" or "next_record"


@dataclass(frozen=True, eq=False)
class Demonstrations:
    """Transitions of one behavior from one or more ``.demo`` files, ready for a trainer.

    Transition i: the agent saw ``obs[k][i]`` (with ``action_mask[i]``), took the action
    ``continuous_actions[i]`` / ``discrete_actions[i]``, then received ``reward[i]`` and saw
    ``next_obs[k][i]``; ``done[i]`` says the episode ended there. Transitions of one episode
    are contiguous and in order; ``episode[i]`` numbers the episodes 0, 1, ... over all files.

    Attributes:
        source: the path given (a file or a folder).
        behavior_name: the brain name of the first file.
        spec: the BehaviorSpec the files imply (visual observations HWC).
        obs, next_obs: per observation spec, [N, *shape] float32.
        continuous_actions: [N, c] float32, in the env's [-1, 1] scale as recorded.
        discrete_actions: [N, b] int32.
        action_mask: [N, sum(branches)] float32, 1 = allowed (the policy's mask).
        reward: [N] float32.
        done: [N] bool, the episode ended after the step (really or at a step limit).
        interrupted: [N] bool, ... at a step limit (``max_step_reached``): bootstrap.
        episode: [N] int32; agent_id: [N] int32; group_id: [N] int32;
        group_reward: [N] float32.
        files: each file's header (``DemonstrationFile``).
    """

    source: str
    behavior_name: str
    spec: BehaviorSpec
    obs: List[np.ndarray]
    next_obs: List[np.ndarray]
    continuous_actions: np.ndarray
    discrete_actions: np.ndarray
    action_mask: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    interrupted: np.ndarray
    episode: np.ndarray
    agent_id: np.ndarray
    group_id: np.ndarray
    group_reward: np.ndarray
    files: Tuple[DemonstrationFile, ...]

    def __len__(self) -> int:
        return len(self.reward)

    @property
    def name(self) -> str:
        """The demonstration name (of the first file)."""
        return self.files[0].name

    @property
    def episode_start(self) -> np.ndarray:
        """[N] bool, the transition is the first of its episode."""
        start = np.ones(len(self), bool)
        start[1:] = self.episode[1:] != self.episode[:-1]
        return start

    @property
    def episode_returns(self) -> np.ndarray:
        """[E] float64, the return of every episode that ends in the data (in order)."""
        if not len(self):
            return np.zeros(0)
        sums = np.bincount(self.episode, weights=self.reward, minlength=self.episode[-1] + 1)
        last = np.ones(len(self), bool)
        last[:-1] = self.episode[1:] != self.episode[:-1]
        return sums[self.episode[last & self.done]]

    @property
    def num_episodes(self) -> int:
        """Episodes that end in the data."""
        return len(self.episode_returns)

    @property
    def mean_reward(self) -> float:
        """Mean return of the episodes that end in the data (nan without one)."""
        returns = self.episode_returns
        return float(returns.mean()) if len(returns) else float("nan")

    def check_against(self, spec: BehaviorSpec, behavior_name: str) -> None:
        """Checks that a behavior can learn from these demonstrations.

        Raises:
            DemonstrationError: one line naming the file, and the observation (index, names,
                both shapes) or both action specs that differ.
        """
        check_spec(self.source, self.spec, spec, f"behavior '{behavior_name}'")


def check_spec(source: str, demo_spec: BehaviorSpec, spec: BehaviorSpec, other: str) -> None:
    """Raises a DemonstrationError naming ``source`` unless ``demo_spec`` (read from it)
    fits ``spec`` (of ``other``, e.g. "behavior 'GridWorld'"). Shapes and actions must
    match; observation names need not (Unity's sensor names rarely match an env's)."""
    ours, theirs = demo_spec.observation_specs, spec.observation_specs
    if len(ours) != len(theirs):
        raise DemonstrationError(
            f"{source}: the demonstrations have {len(ours)} observation(s) "
            f"({_describe_obs(ours)}) but {other} has {len(theirs)} ({_describe_obs(theirs)})")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a.shape != b.shape:
            raise DemonstrationError(
                f"{source}: observation {i} is '{a.name}' {_shape(a.shape)} in the "
                f"demonstrations but '{b.name}' {_shape(b.shape)} in {other}")
        if a.observation_type != b.observation_type:
            raise DemonstrationError(
                f"{source}: observation {i} ('{a.name}') is a {a.observation_type.value} "
                f"observation in the demonstrations but a {b.observation_type.value} one in "
                f"{other}")
    if demo_spec.action_spec != spec.action_spec:
        raise DemonstrationError(
            f"{source}: the demonstrations' actions ({_describe_actions(demo_spec.action_spec)})"
            f" do not match {other}'s ({_describe_actions(spec.action_spec)})")


def _shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _describe_obs(specs: Sequence[ObservationSpec]) -> str:
    return ", ".join(f"'{o.name}' {_shape(o.shape)}" for o in specs) or "none"


def _describe_actions(spec: ActionSpec) -> str:
    return (f"{spec.continuous_size} continuous, discrete branches "
            f"{_shape(spec.discrete_branches)}")


# --- reading --------------------------------------------------------------------------------
def _read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    """A varint32 at ``pos`` -> (value, position after it); ValueError past the end."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("ends inside a length prefix")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise ValueError("bad length prefix")


def _demo_files(path: str) -> List[str]:
    if os.path.isdir(path):
        files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".demo")
                       and os.path.isfile(os.path.join(path, n)))
        if not files:
            raise DemonstrationError(f"{path}: the folder holds no .demo files")
        return files
    if os.path.isfile(path):
        return [path]
    raise DemonstrationError(f"{path}: no such .demo file or folder")


def read_demo_file(path: str, action_pairing: str = "auto",
                   target: Optional[BehaviorSpec] = None, other: Optional[str] = None
                   ) -> Tuple[DemonstrationFile, BehaviorSpec, Records]:
    """Reads one ``.demo`` file as it is: its header, the spec it implies, its records.

    Args:
        target: the spec the file is meant for; it decides how a visual observation
            without dimension properties is read (see the module doc), nothing else.
        other: whose spec ``target`` is, for the error message (default: the file's
            behavior).

    Raises:
        DemonstrationError: not a demo file, truncated, unsupported api_version, records
            that disagree with the first one, a visual observation without dimension
            properties that ``target`` has in neither layout.
    """
    if action_pairing not in PAIRINGS:
        raise ValueError(f"action_pairing must be one of {', '.join(PAIRINGS)}, "
                         f"got '{action_pairing}'")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise DemonstrationError(f"{path}: cannot read it ({error.strerror})") from error

    def fail(message: str) -> DemonstrationError:
        return DemonstrationError(f"{path}: {message}")

    if not data:
        raise fail("not a .demo file (it is empty)")
    not_demo = ("not a .demo file (no DemonstrationMetaProto header and "
                "BrainParametersProto at offset 33)")
    try:
        size, pos = _read_varint(data, 0)
        if pos + size > BRAIN_PARAMETERS_OFFSET or BRAIN_PARAMETERS_OFFSET >= len(data):
            raise ValueError("no header")
        meta = proto.DemonstrationMetaProto.FromString(data[pos:pos + size])
    except (ValueError, DecodeError) as error:
        raise fail(not_demo) from error
    if meta.api_version not in SUPPORTED_API_VERSIONS:
        raise fail(f"unsupported api_version {meta.api_version}; supported: "
                   f"{', '.join(map(str, SUPPORTED_API_VERSIONS))}")
    try:
        if meta.number_steps < 0:
            raise ValueError("negative number_steps")
        size, pos = _read_varint(data, BRAIN_PARAMETERS_OFFSET)
        if pos + size > len(data):
            raise ValueError("no brain parameters")
        brain = proto.BrainParametersProto.FromString(data[pos:pos + size])
        action_spec = _action_spec(brain)
    except (ValueError, DecodeError) as error:
        raise fail(not_demo) from error
    pos += size
    pairs = []
    # Unity rewrites the header when it closes the file; a file it never closed says 0
    # steps: then read every record to the end, as ML-Agents does.
    expected = meta.number_steps or None
    while (len(pairs) < expected) if expected else (pos < len(data)):
        if pos >= len(data):
            raise fail(f"truncated: the header says {expected} records, the file holds "
                       f"{len(pairs)}")
        try:
            size, start = _read_varint(data, pos)
            if start + size > len(data):
                raise ValueError("short")
            pairs.append(proto.AgentInfoActionPairProto.FromString(data[start:start + size]))
        except (ValueError, DecodeError) as error:
            raise fail(f"truncated or damaged at record {len(pairs)} (byte {pos}); the "
                       f"header says {expected or 'an unknown number of'} records") from error
        pos = start + size
    if not pairs:
        raise fail("holds no records")
    pairing = action_pairing
    if pairing == "auto":
        pairing = "same_record" if brain.recorded_by.startswith("tftrainers") else "next_record"
    info = DemonstrationFile(path, int(meta.api_version), meta.demonstration_name,
                             int(meta.number_steps), int(meta.number_episodes),
                             float(meta.mean_reward), brain.brain_name, brain.recorded_by,
                             pairing)
    obs_specs, layouts = _observation_specs(
        path, pairs[0].agent_info, target, other or f"behavior '{brain.brain_name}'")
    spec = BehaviorSpec(obs_specs, action_spec)
    return info, spec, _records(path, pairs, spec, layouts)


def _action_spec(brain) -> ActionSpec:
    new = brain.action_spec
    if new.num_continuous_actions or len(new.discrete_branch_sizes):
        return ActionSpec(new.num_continuous_actions, tuple(new.discrete_branch_sizes))
    # Files from before ActionSpecProto (communicator < 1.3) have only the deprecated fields.
    sizes = tuple(brain.vector_action_size_deprecated)
    if not sizes:
        raise ValueError("no action spec")
    if brain.vector_action_space_type_deprecated == proto.SPACE_TYPE_CONTINUOUS:
        return ActionSpec(sizes[0], ())
    return ActionSpec(0, sizes)


def _visual_layout(obs) -> Tuple[str, bool]:
    """How a rank-3 observation stores its shape: ("chw" or "hwc", whether the file says
    so). When it does not, the layout given is the one to read without a behavior."""
    dims = tuple(obs.dimension_properties)
    if len(dims) == 3 and dims[0] == proto.DIM_NONE and dims[2] != proto.DIM_NONE:
        return "chw", True
    if len(dims) == 3 and dims[2] == proto.DIM_NONE and dims[0] != proto.DIM_NONE:
        return "hwc", True
    if obs.compression_type == proto.COMPRESSION_PNG and obs.compressed_data:
        # No dimension properties: the first PNG's size tells, unless H == W == C.
        height, width = _png_size(obs.compressed_data)
        first = tuple(obs.shape[1:]) == (height, width)
        last = tuple(obs.shape[:2]) == (height, width)
        if first != last:
            return ("chw" if first else "hwc"), True
        if first:
            return "chw", False
    return "hwc", False  # Unity before dimension properties sent [H, W, C]


def _matching_layout(path: str, index: int, name: str, shape: Tuple[int, ...],
                     target: Optional[BehaviorSpec], other: str) -> Optional[str]:
    """The layout that reads a visual observation of unknown layout as ``target`` has it:
    None when ``target`` has no visual observation there (check_spec names that).

    Raises:
        DemonstrationError: neither layout gives ``target``'s shape.
    """
    specs = target.observation_specs if target is not None else ()
    if index >= len(specs) or len(specs[index].shape) != 3:
        return None
    want = tuple(specs[index].shape)
    channels_first = (shape[1], shape[2], shape[0])
    if want == channels_first:  # also when both fit: current Unity and ML-Agents store CHW
        return "chw"
    if want == shape:
        return "hwc"
    raise DemonstrationError(
        f"{path}: observation {index} ('{name}') is stored {_shape(shape)} without dimension "
        f"properties, and neither channels first ({_shape(channels_first)}) nor channels "
        f"last ({_shape(shape)}) is the {_shape(want)} of '{specs[index].name}' in {other}")


def _png_size(data: bytes) -> Tuple[int, int]:
    if not data.startswith(PNG_SIGNATURE) or len(data) < 24:
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return height, width


_OBSERVATION_TYPES = {proto.OBSERVATION_TYPE_DEFAULT: ObservationType.DEFAULT,
                      proto.OBSERVATION_TYPE_GOAL_SIGNAL: ObservationType.GOAL_SIGNAL}


def _observation_specs(path: str, agent_info, target: Optional[BehaviorSpec], other: str
                       ) -> Tuple[List[ObservationSpec], List[str]]:
    specs, layouts = [], []
    for i, obs in enumerate(agent_info.observations):
        shape = tuple(obs.shape)
        name = obs.name or f"obs_{i}"
        try:
            obs_type = _OBSERVATION_TYPES.get(obs.observation_type)
            if obs_type is None:
                raise ValueError(f"observation_type {obs.observation_type} is not one we train "
                                 f"on (0 default, 1 goal signal)")
            if len(shape) == 3:
                layout, known = _visual_layout(obs)
                if not known:
                    layout = _matching_layout(path, i, name, shape, target, other) or layout
                hwc = (shape[1], shape[2], shape[0]) if layout == "chw" else shape
                specs.append(ObservationSpec(hwc, name, ObservationKind.VISUAL, obs_type))
            elif len(shape) == 2:
                layout = "vector"
                specs.append(ObservationSpec(shape, name, ObservationKind.VARIABLE_LENGTH,
                                             obs_type))
            else:
                layout = "vector"
                specs.append(ObservationSpec(shape, name, ObservationKind.VECTOR, obs_type))
        except DemonstrationError:
            raise  # one line naming the file already
        except ValueError as error:
            raise DemonstrationError(f"{path}: observation {i} ('{name}') has shape "
                                     f"{_shape(shape)}: {error}") from error
        layouts.append(layout)
    if not specs:
        raise DemonstrationError(f"{path}: its first record has no observations")
    return specs, layouts


def _records(path: str, pairs, spec: BehaviorSpec, layouts: List[str]) -> Records:
    n = len(pairs)
    action_spec = spec.action_spec
    c, b = action_spec.continuous_size, action_spec.discrete_size
    mask_size = int(sum(action_spec.discrete_branches))
    infos = [p.agent_info for p in pairs]
    for r, info in enumerate(infos):
        if len(info.observations) != len(spec.observation_specs):
            raise DemonstrationError(
                f"{path}: record {r} has {len(info.observations)} observation(s), the first "
                f"record {len(spec.observation_specs)}")
    obs = []
    for i, (obs_spec, layout) in enumerate(zip(spec.observation_specs, layouts)):
        protos = [info.observations[i] for info in infos]
        obs.append(_observation_array(path, i, obs_spec, layout, protos))
    reward = np.array([info.reward for info in infos], np.float32)
    done = np.array([info.done for info in infos], bool)
    max_step = np.array([info.max_step_reached for info in infos], bool)
    agent_id = np.array([info.id for info in infos], np.int32)
    group_id = np.array([info.group_id for info in infos], np.int32)
    group_reward = np.array([info.group_reward for info in infos], np.float32)
    action_mask = np.zeros((n, mask_size), bool)
    for r, info in enumerate(infos):
        if len(info.action_mask):  # empty: every action allowed
            if len(info.action_mask) != mask_size:
                raise DemonstrationError(
                    f"{path}: record {r} has an action mask of {len(info.action_mask)} "
                    f"entries; discrete branches {_shape(action_spec.discrete_branches)} need "
                    f"{mask_size}")
            action_mask[r] = info.action_mask
    continuous = np.zeros((n, c), np.float32)
    discrete = np.zeros((n, b), np.int32)
    has_action = np.zeros(n, bool)
    for r, pair in enumerate(pairs):
        action = pair.action_info
        cont, disc = action.continuous_actions, action.discrete_actions
        if not len(cont) and not len(disc):
            old = action.vector_actions_deprecated
            cont, disc = old[:c], old[c:]
        if len(cont) == c and len(disc) == b:
            has_action[r] = True
            if c:
                continuous[r] = cont
            if b:
                discrete[r] = disc
    return Records(obs, reward, done, max_step, agent_id, action_mask, continuous, discrete,
                   has_action, group_id, group_reward)


def _observation_array(path: str, index: int, obs_spec: ObservationSpec, layout: str,
                       protos) -> np.ndarray:
    shape = tuple(protos[0].shape)
    out = np.empty((len(protos), *obs_spec.shape), np.float32)
    for r, o in enumerate(protos):
        if tuple(o.shape) != shape:
            raise DemonstrationError(
                f"{path}: record {r} has observation {index} ('{obs_spec.name}') of shape "
                f"{_shape(o.shape)}, the first record {_shape(shape)}")
        try:
            if o.compression_type == proto.COMPRESSION_PNG:
                if obs_spec.kind != ObservationKind.VISUAL:
                    raise ValueError("PNG data for a non-visual observation")
                out[r] = _decode_png_observation(o.compressed_data, obs_spec.shape,
                                                 list(o.compressed_channel_mapping))
            else:
                values = np.asarray(o.float_data.data, np.float32)
                if values.size != out[r].size:
                    raise ValueError(f"{values.size} values for shape {_shape(shape)}")
                values = values.reshape(shape)
                out[r] = values.transpose(1, 2, 0) if layout == "chw" else values
        except (ValueError, OSError) as error:
            raise DemonstrationError(f"{path}: record {r}, observation {index} "
                                     f"('{obs_spec.name}'): {error}") from error
    if not np.all(np.isfinite(out)):
        raise DemonstrationError(f"{path}: observation {index} ('{obs_spec.name}') has NaN "
                                 f"or infinite values")
    return out


def _split_pngs(data: bytes) -> List[bytes]:
    """Concatenated PNGs -> one bytes object per PNG (walking the chunks to each IEND)."""
    images, pos = [], 0
    while pos < len(data):
        if data[pos:pos + 8] != PNG_SIGNATURE:
            raise ValueError(f"compressed data is not PNG at byte {pos}")
        start, pos = pos, pos + 8
        while True:
            if pos + 8 > len(data):
                raise ValueError("truncated PNG data")
            length, kind = struct.unpack(">I4s", data[pos:pos + 8])
            pos += 12 + length
            if kind == b"IEND":
                break
        if pos > len(data):
            raise ValueError("truncated PNG data")
        images.append(data[start:pos])
    return images


def _decode_png_observation(data: bytes, hwc_shape: Tuple[int, int, int],
                            mapping: List[int]) -> np.ndarray:
    """PNG bytes (one or more images) -> [H, W, C] float32 in [0, 1]."""
    from PIL import Image

    height, width, channels = hwc_shape
    planes = []
    for png in _split_pngs(data):
        with Image.open(io.BytesIO(png)) as image:
            if image.mode not in ("L", "LA", "RGB", "RGBA"):
                image = image.convert("RGBA" if "A" in image.mode else "RGB")
            array = np.asarray(image)
        if array.ndim == 2:
            array = array[:, :, None]
        if array.shape[:2] != (height, width):
            raise ValueError(f"a PNG of {array.shape[0]}x{array.shape[1]} pixels for an "
                             f"observation of {height}x{width}")
        planes.append(array.astype(np.float32) / 255.0)
    stacked = np.concatenate(planes, axis=2)
    if mapping:
        if len(mapping) != stacked.shape[2]:
            raise ValueError(f"compressed_channel_mapping has {len(mapping)} entries for "
                             f"{stacked.shape[2]} PNG channels")
        mapping = np.asarray(mapping)
        if sorted(set(mapping[mapping >= 0].tolist())) != list(range(channels)):
            raise ValueError(f"compressed_channel_mapping {mapping.tolist()} does not map "
                             f"onto channels 0..{channels - 1}")
        return np.stack([stacked[:, :, mapping == k].mean(axis=2) for k in range(channels)],
                        axis=2)
    if channels == 1:  # a grayscale camera: the mean of the first image's colours
        return planes[0].mean(axis=2, keepdims=True)
    if stacked.shape[2] < channels:
        raise ValueError(f"the PNGs hold {stacked.shape[2]} channels for {channels}")
    return stacked[:, :, :channels]


def _transitions(records: Records, pairing: str, path: str) -> Dict[str, np.ndarray]:
    """Pairs records into transitions within each agent's episode (see the module doc)."""
    n = len(records)
    done, agent = records.done, records.agent_id
    # An episode ends at a done record; a change of agent id also separates episodes.
    follows = np.zeros(n, bool)  # record r+1 continues record r's episode
    follows[:-1] = ~done[:-1] & (agent[1:] == agent[:-1])
    start = np.flatnonzero(follows)
    nxt = start + 1
    act = start if pairing == "same_record" else nxt
    missing = act[~records.has_action[act]]
    if len(missing):
        raise DemonstrationError(
            f"{path}: record {int(missing[0])} holds no action of the behavior's size "
            f"(an action is needed from it)")
    segment = np.cumsum(np.concatenate([[0], ~follows[:-1]]))  # episode number per record
    return {
        "obs_rows": start, "next_rows": nxt, "action_rows": act,
        "segment": segment[start],
    }


def load_demonstrations(path: str, spec: Optional[BehaviorSpec] = None,
                        behavior_name: Optional[str] = None,
                        action_pairing: str = "auto") -> Demonstrations:
    """Reads a ``.demo`` file, or every ``*.demo`` file of a folder (in name order).

    Args:
        path: a file or a folder.
        spec: when given, the files must fit it (``Demonstrations.check_against``).
        behavior_name: the behavior's name, for the error messages (default: the files').
        action_pairing: ``auto``, ``same_record`` or ``next_record`` (see the module doc).

    Raises:
        DemonstrationError: a missing path, a file that is not a demo, truncated, of an
            unsupported api_version, or files that disagree with each other or with ``spec``
            (one line naming the file).
    """
    parts = []
    first_spec = first_info = None
    for file in _demo_files(path):
        if spec is not None:
            name = behavior_name or (first_info.behavior_name if first_info else None)
            target, other = spec, (f"behavior '{name}'" if name else None)
        else:  # the files of a folder must agree with the first
            target = first_spec
            other = f"the first file {first_info.path}" if first_info else None
        info, file_spec, records = read_demo_file(file, action_pairing, target, other)
        if first_spec is None:
            first_spec, first_info = file_spec, info
        else:
            check_spec(file, file_spec, first_spec, f"the first file {first_info.path}")
        parts.append((info, records, _transitions(records, info.action_pairing, file)))
    demos_spec = first_spec
    if spec is not None:
        check_spec(path, demos_spec, spec,
                   f"behavior '{behavior_name or first_info.behavior_name}'")
    fields: Dict[str, List[np.ndarray]] = {k: [] for k in (
        "continuous", "discrete", "mask", "reward", "done", "interrupted", "episode",
        "agent_id", "group_id", "group_reward")}
    obs = [[] for _ in demos_spec.observation_specs]
    next_obs = [[] for _ in demos_spec.observation_specs]
    episodes = 0
    for info, records, t in parts:
        rows, nxt, act = t["obs_rows"], t["next_rows"], t["action_rows"]
        for k in range(len(obs)):
            obs[k].append(records.obs[k][rows])
            next_obs[k].append(records.obs[k][nxt])
        fields["continuous"].append(records.continuous[act])
        fields["discrete"].append(records.discrete[act])
        fields["mask"].append(1.0 - records.action_mask[rows].astype(np.float32))
        fields["reward"].append(records.reward[nxt])
        fields["done"].append(records.done[nxt])
        fields["interrupted"].append(records.max_step_reached[nxt] & records.done[nxt])
        _, episode = np.unique(t["segment"], return_inverse=True)
        fields["episode"].append((episode + episodes).astype(np.int32))
        episodes += int(episode.max()) + 1 if len(episode) else 0
        fields["agent_id"].append(records.agent_id[rows])
        fields["group_id"].append(records.group_id[rows])
        fields["group_reward"].append(records.group_reward[nxt])
    cat = {k: np.concatenate(v) for k, v in fields.items()}
    if not len(cat["reward"]):
        raise DemonstrationError(f"{path}: holds no transitions (no two records of one "
                                 f"episode)")
    return Demonstrations(
        source=path, behavior_name=first_info.behavior_name, spec=demos_spec,
        obs=[np.concatenate(o) for o in obs], next_obs=[np.concatenate(o) for o in next_obs],
        continuous_actions=cat["continuous"], discrete_actions=cat["discrete"],
        action_mask=cat["mask"].astype(np.float32), reward=cat["reward"], done=cat["done"],
        interrupted=cat["interrupted"], episode=cat["episode"], agent_id=cat["agent_id"],
        group_id=cat["group_id"], group_reward=cat["group_reward"],
        files=tuple(info for info, _, _ in parts))


# --- writing --------------------------------------------------------------------------------
def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(message) -> bytes:
    data = message.SerializeToString()
    return _encode_varint(len(data)) + data


def _encode_pngs(chw: np.ndarray) -> Tuple[bytes, List[int]]:
    """[C, H, W] values in [0, 1] -> concatenated RGB PNGs (3 channels each, the last one
    zero-padded) and the compressed channel mapping (-1 for padding), as Unity stacks them."""
    from PIL import Image

    channels = chw.shape[0]
    pixels = np.rint(chw * 255.0).astype(np.uint8)
    padded = (-channels) % 3
    if padded:
        pixels = np.concatenate([pixels, np.zeros((padded, *pixels.shape[1:]), np.uint8)])
    out = io.BytesIO()
    for k in range(0, len(pixels), 3):
        Image.fromarray(np.ascontiguousarray(pixels[k:k + 3].transpose(1, 2, 0)),
                        "RGB").save(out, format="PNG")
    return out.getvalue(), list(range(channels)) + [-1] * padded


class DemonstrationWriter:
    """Writes a ``.demo`` file that Unity ML-Agents' loader and ours read alike.

        with DemonstrationWriter("expert.demo", "GridWorld", spec) as writer:
            writer.write_episode(records)   # one agent's whole episode, record by record
        # closed: the header holds number_steps, number_episodes and mean_reward

    Every field of docs/dev/architecture.md#demo-format is written: the meta header (api_version 1)
    in the 32-byte
    header region, ``BrainParametersProto`` with the action spec and the deprecated action
    fields (size and space type, for files of one action type), and per record the agent
    info (reward, done, max_step_reached, id, action mask, observations, group id and
    reward) and the action (``continuous_actions`` / ``discrete_actions`` and
    ``vector_actions_deprecated``: continuous then discrete values). Vector observations are
    ``float_data``; visual ones ``[C, H, W]`` PNGs (compression_type 1, 8 bits a channel, as
    Unity's cameras; values outside [0, 1] are kept exactly as ``float_data`` instead).
    Record t holds the action taken from observation t (``recorded_by`` marks the file so),
    an episode's final record zeros. The file is written under a temporary name and renamed
    into place by ``close()``.
    """

    def __init__(self, path: str, behavior_name: str, spec: BehaviorSpec,
                 demonstration_name: Optional[str] = None):
        self.path = path
        self.spec = spec
        self.demonstration_name = (demonstration_name if demonstration_name is not None
                                   else os.path.splitext(os.path.basename(path))[0])
        self.number_steps = 0
        self.number_episodes = 0
        self.total_reward = 0.0
        self._tmp = f"{path}.tmp"
        self._file: Optional[BinaryIO] = open(self._tmp, "wb")
        action_spec = spec.action_spec
        brain = proto.BrainParametersProto(brain_name=behavior_name, is_training=False,
                                           recorded_by=RECORDER)
        brain.action_spec.num_continuous_actions = action_spec.continuous_size
        brain.action_spec.num_discrete_actions = action_spec.discrete_size
        brain.action_spec.discrete_branch_sizes.extend(action_spec.discrete_branches)
        # Readers from before ActionSpecProto know one action type per behavior.
        if action_spec.continuous_size and not action_spec.discrete_size:
            brain.vector_action_size_deprecated.append(action_spec.continuous_size)
            brain.vector_action_space_type_deprecated = proto.SPACE_TYPE_CONTINUOUS
        elif action_spec.discrete_size and not action_spec.continuous_size:
            brain.vector_action_size_deprecated.extend(action_spec.discrete_branches)
            brain.vector_action_space_type_deprecated = proto.SPACE_TYPE_DISCRETE
        self._file.write(b"\0" * BRAIN_PARAMETERS_OFFSET)
        self._file.write(_delimited(brain))
        self._dims = []
        self._types = [proto.OBSERVATION_TYPE_GOAL_SIGNAL
                       if o.observation_type == ObservationType.GOAL_SIGNAL
                       else proto.OBSERVATION_TYPE_DEFAULT for o in spec.observation_specs]
        for o in spec.observation_specs:
            self._dims.append({ObservationKind.VECTOR: [proto.DIM_NONE],
                               ObservationKind.VISUAL: [proto.DIM_NONE,
                                                        proto.DIM_TRANSLATIONAL_EQUIVARIANCE,
                                                        proto.DIM_TRANSLATIONAL_EQUIVARIANCE],
                               ObservationKind.VARIABLE_LENGTH: [proto.DIM_VARIABLE_SIZE,
                                                                 proto.DIM_NONE]}[o.kind])

    def write_episode(self, records: Records) -> None:
        """Appends one agent's episode: ``records`` in file form, the last one ``done``."""
        if self._file is None:
            raise ValueError(f"{self.path}: the writer is closed")
        n = len(records)
        action_spec = self.spec.action_spec
        visual = [o.kind == ObservationKind.VISUAL for o in self.spec.observation_specs]
        # Whole columns to Python lists at once: far faster than element by element.
        reward = records.reward.tolist()
        done = records.done.tolist()
        max_step = records.max_step_reached.tolist()
        agent_id = records.agent_id.tolist()
        group_id = records.group_id.tolist()
        group_reward = records.group_reward.tolist()
        mask = records.action_mask.tolist() if action_spec.discrete_size else None
        continuous = records.continuous.tolist()
        discrete = records.discrete.tolist()
        vectors = [None if v else o.reshape(n, -1).tolist()
                   for o, v in zip(records.obs, visual)]
        chunks = []
        for r in range(n):
            pair = proto.AgentInfoActionPairProto()
            info = pair.agent_info
            info.reward = reward[r]
            info.done = done[r]
            info.max_step_reached = max_step[r]
            info.id = agent_id[r]
            info.group_id = group_id[r]
            info.group_reward = group_reward[r]
            if mask is not None and any(mask[r]):  # no mask: every action allowed
                info.action_mask.extend(mask[r])
            for k, obs_spec in enumerate(self.spec.observation_specs):
                o = info.observations.add()
                o.name = obs_spec.name
                o.dimension_properties.extend(self._dims[k])
                if self._types[k]:  # 0 (default) is protobuf's unset value
                    o.observation_type = self._types[k]
                if visual[k]:
                    chw = records.obs[k][r].transpose(2, 0, 1)
                    o.shape.extend(chw.shape)
                    if np.all((chw >= 0.0) & (chw <= 1.0)):
                        o.compression_type = proto.COMPRESSION_PNG
                        o.compressed_data, mapping = _encode_pngs(chw)
                        o.compressed_channel_mapping.extend(mapping)
                    else:
                        o.float_data.data.extend(chw.reshape(-1).tolist())
                else:
                    o.shape.extend(obs_spec.shape)
                    o.float_data.data.extend(vectors[k][r])
            action = pair.action_info
            action.continuous_actions.extend(continuous[r])
            action.discrete_actions.extend(discrete[r])
            action.vector_actions_deprecated.extend(continuous[r] + discrete[r])
            chunks.append(_delimited(pair))
        self._file.write(b"".join(chunks))
        self.number_steps += n
        self.number_episodes += 1
        self.total_reward += float(records.reward.sum())

    def close(self) -> None:
        """Writes the header and moves the file into place."""
        if self._file is None:
            return
        mean = self.total_reward / self.number_episodes if self.number_episodes else 0.0
        meta = proto.DemonstrationMetaProto(
            api_version=API_VERSION, number_steps=self.number_steps,
            number_episodes=self.number_episodes, mean_reward=mean)
        name = self.demonstration_name
        while True:  # the name is cut to fit the header region
            meta.demonstration_name = name
            header = _delimited(meta)
            if len(header) <= META_DATA_BYTES or not name:
                break
            name = name[:-1]
        self._file.seek(0)
        self._file.write(header)
        self._file.close()
        self._file = None
        try:
            os.replace(self._tmp, self.path)
        except OSError:
            os.remove(self._tmp)
            raise

    def abort(self) -> None:
        """Drops the file being written."""
        if self._file is not None:
            self._file.close()
            self._file = None
            os.remove(self._tmp)

    def __enter__(self) -> "DemonstrationWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
