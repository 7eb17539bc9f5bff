"""AgentBuffer: a columnar store of experience, keyed by typed field names.

A trainer turns each :class:`~tftrainers.processing.trajectory.Trajectory` into fields
(``trajectory.to_fields()`` plus its advantages and returns), appends them to an update
buffer, and trains on shuffled minibatches::

    buffer = AgentBuffer(sequence_length=settings.memory.sequence_length)   # 1 without memory
    for trajectory in trajectories:
        fields = trajectory.to_fields()
        fields[BufferKey.ADVANTAGES] = advantages                   # [T]
        fields[stream_key(StreamField.RETURNS, "extrinsic")] = returns
        buffer.append(fields)
    if len(buffer) >= buffer_size:
        for _ in range(num_epoch):
            buffer.shuffle(rng=rng)
            for batch in buffer.minibatches(batch_size):
                optimizer.update(batch)                             # batch[BufferKey.MASK], ...
        buffer.reset()

Keys are :class:`BufferKey` members, or ``(ObsField, index)`` for the i-th observation,
or ``(StreamField, name)`` for per-reward-stream values (``"extrinsic"``, ``"curiosity"``).
Bare strings are refused, so a typo fails at the line that made it.

Recurrent policies (``sequence_length > 1``): each appended trajectory is cut into
sequences of ``sequence_length`` steps and its last, partial sequence is padded AT THE END
(zeros; 1 for ``ACTION_MASK`` so padded rows still have an allowed action). ``MASK`` is
1.0 on real steps and 0.0 on padding: losses and normalizer updates weigh by it. A
sequence thus always starts on a real step, and the LSTM state a sequence starts from is
the stored ``MEMORY`` of its first step, ``batch[BufferKey.MEMORY][::sequence_length]``.
Shuffling and minibatches move whole sequences, so that stays true.
"""
from __future__ import annotations

import enum
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

import numpy as np

__all__ = [
    "AgentBuffer",
    "BufferKey",
    "Key",
    "Minibatch",
    "ObsField",
    "StreamField",
    "key_name",
    "next_obs_key",
    "obs_key",
    "stream_key",
    "team_obs_key",
]


class _Key(enum.Enum):
    """An enum used as a dict key on the per-step path: hashed by identity (members are
    singletons compared by identity), not by Enum's Python-level hash of the name."""

    __hash__ = object.__hash__


class BufferKey(_Key):
    """Fields with one column for the whole behavior. Shapes are per step ([T, ...])."""

    CONTINUOUS_ACTION = "continuous_action"  # [T, c] float32, raw (pre-clip) Gaussian samples
    DISCRETE_ACTION = "discrete_action"  # [T, branches] int32
    CONTINUOUS_LOG_PROBS = "continuous_log_probs"  # [T, c] float32, per action dimension
    DISCRETE_LOG_PROBS = "discrete_log_probs"  # [T, branches] float32, per branch
    ACTION_MASK = "action_mask"  # [T, sum(branches)] float32, 1 = allowed (export's action_masks)
    ENVIRONMENT_REWARDS = "environment_rewards"  # [T] float32, reward for the action at step t
    GROUP_ID = "group_id"  # [T] int32, 0 = no group
    GROUP_REWARD = "group_reward"  # [T] float32
    DONE = "done"  # [T] float32, 1 on the last step of an episode that really ended
    MEMORY = "memory"  # [T, memory_size] float32, recurrent state the policy read at step t
    CRITIC_MEMORY = "critic_memory"  # [T, critic state] float32 at step t (POCA: value + baseline)
    MASK = "mask"  # [T] float32, 1 = real step, 0 = sequence padding
    ADVANTAGES = "advantages"  # [T] float32, advantage combined over reward streams
    # Groups (MA-POCA): K teammate slots per step, absent slots masked (K fixed per buffer).
    TEAM_CONTINUOUS_ACTION = "team_continuous_action"  # [T, K, c] float32 raw samples
    TEAM_DISCRETE_ACTION = "team_discrete_action"  # [T, K, branches] int32
    TEAM_MASK = "team_mask"  # [T, K] float32, 1 = the teammate slot holds a member present
    GROUPMATE_REWARDS = "groupmate_rewards"  # [T] float32, sum of the teammates' own rewards


class ObsField(_Key):
    """Per-observation fields; the key is ``(ObsField, observation index)``."""

    OBS = "obs"  # [T, *shape], observation the action at step t was chosen from
    NEXT_OBS = "next_obs"  # [T, *shape], observation after step t (curiosity, RND)
    TEAM_OBS = "team_obs"  # [T, K, *shape], the teammates' observations at step t (MA-POCA)


class StreamField(_Key):
    """Per-reward-stream fields; the key is ``(StreamField, stream name)``."""

    REWARDS = "rewards"  # [T] reward of the stream (extrinsic is ENVIRONMENT_REWARDS * strength)
    VALUES = "values"  # [T] value estimates the policy produced while acting
    RETURNS = "returns"  # [T] value targets
    ADVANTAGES = "advantages"  # [T] advantages of the stream
    BASELINES = "baselines"  # [T] MA-POCA counterfactual baselines


Key = Union[BufferKey, Tuple[ObsField, int], Tuple[StreamField, str]]
Minibatch = Dict[Key, np.ndarray]

# Padding values other than 0: an all-masked row would make the masked softmax degenerate.
_PAD_VALUES: Dict[Key, float] = {BufferKey.ACTION_MASK: 1.0}


def obs_key(index: int) -> Tuple[ObsField, int]:
    """Key of observation ``index`` (the order of ``BehaviorSpec.observation_specs``)."""
    return ObsField.OBS, int(index)


def next_obs_key(index: int) -> Tuple[ObsField, int]:
    """Key of the observation after each step, for observation ``index``."""
    return ObsField.NEXT_OBS, int(index)


def team_obs_key(index: int) -> Tuple[ObsField, int]:
    """Key of the teammates' observation ``index`` at each step ([T, K, *shape])."""
    return ObsField.TEAM_OBS, int(index)


def stream_key(field: StreamField, name: str) -> Tuple[StreamField, str]:
    """Key of ``field`` for reward stream ``name`` (e.g. ``"extrinsic"``)."""
    return field, str(name)


def _check_key(key) -> Key:
    if isinstance(key, BufferKey):
        return key
    if isinstance(key, tuple) and len(key) == 2:
        field, sub = key
        if isinstance(field, ObsField) and isinstance(sub, (int, np.integer)) and sub >= 0:
            return field, int(sub)
        if isinstance(field, StreamField) and isinstance(sub, str) and sub:
            return key
    raise KeyError(f"AgentBuffer keys are BufferKey members, (ObsField, index) or "
                   f"(StreamField, stream name); got {key!r}")


def key_name(key: Key) -> str:
    """Readable name of a key, for messages and stats: ``obs_0``, ``returns/extrinsic``."""
    if isinstance(key, BufferKey):
        return key.value
    field, sub = key
    return f"{field.value}_{sub}" if isinstance(field, ObsField) else f"{field.value}/{sub}"


class AgentBuffer:
    """Columnar experience store; every field has the same number of steps.

    Appended chunks are concatenated lazily, on the first read after an append, so
    appending many trajectories costs one copy per field, not one per trajectory.

    Args:
        sequence_length: steps per training sequence; > 1 for recurrent policies, whose
            trajectories are split and end-padded on :meth:`append` (module docstring).
    """

    def __init__(self, sequence_length: int = 1):
        if int(sequence_length) < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        self._sequence_length = int(sequence_length)
        self._chunks: Dict[Key, List[np.ndarray]] = {}
        self._length = 0

    # ------------------------------------------------------------------ reading

    @property
    def sequence_length(self) -> int:
        return self._sequence_length

    def __len__(self) -> int:
        """Number of stored steps, padding included (a multiple of ``sequence_length``)."""
        return self._length

    @property
    def num_sequences(self) -> int:
        return self._length // self._sequence_length

    def keys(self) -> List[Key]:
        return list(self._chunks)

    def __contains__(self, key) -> bool:
        return key in self._chunks

    def __getitem__(self, key: Key) -> np.ndarray:
        """The whole field, ``[len(self), ...]``."""
        try:
            chunks = self._chunks[key]
        except KeyError:
            raise KeyError(f"AgentBuffer has no field {key_name(_check_key(key))}; it has "
                           f"{sorted(key_name(k) for k in self._chunks)}") from None
        if len(chunks) > 1:
            chunks[:] = [np.concatenate(chunks, axis=0)]
        return chunks[0]

    def __repr__(self) -> str:
        return (f"AgentBuffer(steps={self._length}, sequence_length={self._sequence_length}, "
                f"fields={sorted(key_name(k) for k in self._chunks)})")

    # ------------------------------------------------------------------ writing

    def __setitem__(self, key: Key, value) -> None:
        """Sets (or replaces) a whole field, e.g. normalised advantages over the buffer.

        Raises:
            ValueError: if the buffer has fields and ``value`` has not ``len(self)`` steps.
        """
        key = _check_key(key)
        value = np.asarray(value)
        if value.ndim == 0:
            raise ValueError(f"field {key_name(key)}: expected an array [steps, ...], got a "
                             f"scalar")
        if self._chunks and len(value) != self._length:
            raise ValueError(f"field {key_name(key)}: the buffer holds {self._length} steps, "
                             f"got {len(value)}")
        if not self._chunks:
            if len(value) % self._sequence_length:
                raise ValueError(f"field {key_name(key)}: {len(value)} steps is not a multiple "
                                 f"of sequence_length {self._sequence_length}")
            self._length = len(value)
        self._chunks[key] = [value]

    def append(self, fields: Mapping[Key, np.ndarray]) -> None:
        """Appends one trajectory's steps (all fields ``[T, ...]``), padding sequences.

        Adds ``MASK`` (1 per real step) unless ``fields`` has it. Once the buffer holds
        data, every append must carry the same fields.

        Raises:
            KeyError: for a key that is not typed, or fields that differ from the buffer's.
            ValueError: if the fields have different step counts or trailing shapes.
        """
        arrays = {_check_key(k): np.asarray(v) for k, v in fields.items()}
        if not arrays:
            return
        lengths = {key_name(k): (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
        steps = set(lengths.values())
        if len(steps) != 1 or None in steps:
            raise ValueError(f"every field of a trajectory needs the same number of steps on "
                             f"axis 0, got {lengths}")
        n = steps.pop()
        if n == 0:
            return
        if BufferKey.MASK not in arrays:
            arrays[BufferKey.MASK] = np.ones(n, np.float32)
        if self._chunks and set(arrays) != set(self._chunks):
            missing = sorted(key_name(k) for k in set(self._chunks) - set(arrays))
            extra = sorted(key_name(k) for k in set(arrays) - set(self._chunks))
            raise KeyError(f"appended fields differ from the buffer's: missing {missing}, "
                           f"unexpected {extra}")
        for key, array in arrays.items():
            if self._chunks:
                have = self._chunks[key][0]
                if have.shape[1:] != array.shape[1:]:
                    raise ValueError(f"field {key_name(key)}: the buffer holds steps of shape "
                                     f"{have.shape[1:]}, got {array.shape[1:]}")
        pad = -n % self._sequence_length
        for key, array in arrays.items():
            if pad:
                fill = 0.0 if key is BufferKey.MASK else _PAD_VALUES.get(key, 0)
                array = np.concatenate(
                    [array, np.full((pad, *array.shape[1:]), fill, array.dtype)], axis=0)
            self._chunks.setdefault(key, []).append(array)
        self._length += n + pad

    def extend(self, other: "AgentBuffer") -> None:
        """Appends another buffer's steps as they are (already sequenced and padded)."""
        if other._sequence_length != self._sequence_length:
            raise ValueError(f"cannot extend a buffer of sequence_length "
                             f"{self._sequence_length} with one of {other._sequence_length}")
        if not len(other):
            return
        if self._chunks and set(other._chunks) != set(self._chunks):
            raise KeyError("the buffers have different fields: "
                           f"{sorted(key_name(k) for k in self._chunks)} and "
                           f"{sorted(key_name(k) for k in other._chunks)}")
        for key in other._chunks:
            self._chunks.setdefault(key, []).append(other[key])
        self._length += len(other)

    def reset(self) -> None:
        """Removes every field and step."""
        self._chunks.clear()
        self._length = 0

    def truncate(self, max_length: int, sequence_length: Optional[int] = None) -> None:
        """Keeps only the newest steps, at most ``max_length`` rounded down to whole sequences."""
        seq = self._check_sequence_length(sequence_length)
        keep = (int(max_length) // seq) * seq
        if self._length <= keep:
            return
        for key in self._chunks:
            # Copy so the dropped steps can be freed.
            self._chunks[key] = [self[key][self._length - keep:].copy()]
        self._length = keep

    # ------------------------------------------------------------------ training

    def _check_sequence_length(self, sequence_length: Optional[int]) -> int:
        if sequence_length is not None and int(sequence_length) != self._sequence_length:
            raise ValueError(f"this buffer was filled with sequence_length "
                             f"{self._sequence_length}, got {sequence_length}")
        return self._sequence_length

    def _sequence_index(self, sequences: np.ndarray) -> np.ndarray:
        """Step indices of whole sequences, in order: [len(sequences) * sequence_length]."""
        seq = self._sequence_length
        return (sequences[:, None] * seq + np.arange(seq)[None, :]).reshape(-1)

    def shuffle(self, sequence_length: Optional[int] = None,
                rng: Optional[np.random.Generator] = None) -> None:
        """Shuffles the steps in place, moving whole sequences when ``sequence_length > 1``.

        Args:
            sequence_length: None or the buffer's own (checked, for callers that pass it).
            rng: source of the permutation; pass the trainer's to keep runs reproducible.
        """
        self._check_sequence_length(sequence_length)
        if self._length == 0:
            return
        rng = np.random.default_rng() if rng is None else rng
        order = rng.permutation(self.num_sequences)
        index = order if self._sequence_length == 1 else self._sequence_index(order)
        for key in self._chunks:
            self._chunks[key] = [self[key][index]]

    def minibatch(self, start: int, end: int) -> Minibatch:
        """Steps ``[start, end)`` of every field (views, valid until the buffer changes)."""
        return {key: self[key][start:end] for key in self._chunks}

    def minibatches(self, batch_size: int, sequence_length: Optional[int] = None,
                    drop_remainder: bool = True) -> Iterator[Minibatch]:
        """Consecutive minibatches of whole sequences, in the buffer's current order.

        Shuffle first for SGD. The batch size is rounded down to a multiple of
        ``sequence_length`` (as ML-Agents does), so a batch holds
        ``batch_size // sequence_length`` sequences of contiguous steps; reshape a field to
        ``[sequences, sequence_length, ...]`` for an RNN.

        Args:
            batch_size: steps per minibatch, >= sequence_length.
            sequence_length: None or the buffer's own (checked).
            drop_remainder: skip the last, smaller batch, so a compiled update sees one
                shape (ML-Agents drops it too).

        Yields:
            ``{key: [batch, ...] array}`` views into the buffer.
        """
        seq = self._check_sequence_length(sequence_length)
        if batch_size < seq:
            raise ValueError(f"batch_size {batch_size} is smaller than sequence_length {seq}")
        batch_size = batch_size - batch_size % seq
        arrays = {key: self[key] for key in self._chunks}
        stop = self._length - self._length % batch_size if drop_remainder else self._length
        for start in range(0, stop, batch_size):
            yield {key: array[start:start + batch_size] for key, array in arrays.items()}

    def sample_minibatch(self, batch_size: int, rng: np.random.Generator) -> Minibatch:
        """A minibatch of whole sequences drawn uniformly with replacement (copies).

        For behavioral cloning from demonstrations, where passes need not be epochs.
        """
        if self._length == 0:
            raise ValueError("cannot sample from an empty AgentBuffer")
        n_seq = max(int(batch_size) // self._sequence_length, 1)
        index = self._sequence_index(rng.integers(0, self.num_sequences, n_seq))
        return {key: self[key][index] for key in self._chunks}
