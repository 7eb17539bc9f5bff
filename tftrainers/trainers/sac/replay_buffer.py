"""The SAC replay buffer: transitions on preallocated ring arrays, observations stored once.

    buffer = ReplayBuffer.for_spec(spec, capacity=50000)
    buffer.add_trajectory(trajectory)              # T transitions + 1 row for its next obs
    rows = buffer.sample(batch_size, rng)          # uniform over stored transitions
    batch = buffer.batch(rows)                     # Transitions: obs, next obs, actions...
    buffer.save(path); buffer.load(path)           # atomic .npz, no pickle

A trajectory of T steps takes T + 1 consecutive rows: row t holds the observation the agent
acted from, its action and reward; the next observation of row t is the observation of row
t + 1, and the extra last row holds the trajectory's ``next_obs`` (it is not a transition:
``valid`` 0, never sampled). Observations are therefore stored once, where ML-Agents'
buffer keeps every observation twice (as ``obs`` and ``next_obs``; its users ran out of
memory with images, ML-Agents #4601). Visual observations are stored as uint8 (``x * 255``:
Unity's, our built-ins' and Gymnasium's uint8 images arrive as 8-bit levels scaled to
[0, 1]), a quarter of float32; an image observation that is not such levels switches its
column to float32 the first time one arrives, so nothing is ever rounded.

With memory (``network_settings.memory``) each row also keeps the policy's recurrent state
read at that step (``memory``, as ML-Agents' buffer) and the value network's
(``critic_memory``), the steps left in its trajectory from it on (``remaining``) and whether
it starts a training sequence (``sequence_start``: steps 0, L, 2L, ... of its trajectory,
L = ``sequence_length``, ML-Agents' sequence-aligned chunks)::

    starts = buffer.sample_sequences(batch_size // L, rng)   # uniform over sequence starts
    batch = buffer.sequences(starts)     # [n * L] rows, mask, memories at the starts

A sequence is the L rows from its start; the steps past its trajectory's last are padding
(``mask`` 0, zeros, every action allowed), so a sequence never crosses a trajectory's end,
and the LSTMs start from the memories stored at its first step.

The ring replaces the oldest rows first. A transition's next row was written after it in
the same ``add_trajectory``, so it is overwritten only after the transition itself: every
row still marked ``valid`` has its next observation. (ML-Agents instead truncates its buffer
to the newest 80% when it is full.)
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from tftrainers.envs.base import ObservationKind
from tftrainers.processing import Trajectory

#: Version of the saved buffer's layout.
FORMAT_VERSION = 1


class Transitions(NamedTuple):
    """A batch of sampled transitions, [n, ...] each.

    obs, next_obs: per observation spec [n, *shape] float32.
    continuous: [n, c] float32 raw (pre-tanh) actions; discrete: [n, branches] int32.
    action_mask: [n, sum(branches)] float32, 1 = allowed (what the policy saw at obs).
    reward: [n] float32, the environment's reward plus the group reward.
    done: [n] float32, 1 when the episode really ended after the step (not interrupted).
    mask: [n] float32, 1 = a real step, 0 = sequence padding (None: all real).
    memory, critic_memory: [n / L, memory_size] float32, the policy's and the value
        network's recurrent state at the first step of each sequence (None without memory).
    """

    obs: Tuple[np.ndarray, ...]
    next_obs: Tuple[np.ndarray, ...]
    continuous: np.ndarray
    discrete: np.ndarray
    action_mask: np.ndarray
    reward: np.ndarray
    done: np.ndarray
    mask: Optional[np.ndarray] = None
    memory: Optional[np.ndarray] = None
    critic_memory: Optional[np.ndarray] = None


class ReplayBuffer:
    """Transitions of one behavior (see the module doc).

    Args:
        capacity: rows (transitions plus one row per stored trajectory).
        obs_shapes: per observation, its shape.
        visual: per observation, stored as uint8 images.
        continuous_size, discrete_branches: the action spec.
        memory_size: the policy's (and the value network's) recurrent state size, 0 without
            memory.
        sequence_length: steps per training sequence (with memory).
    """

    def __init__(self, capacity: int, obs_shapes: Sequence[Tuple[int, ...]],
                 visual: Sequence[bool], continuous_size: int,
                 discrete_branches: Sequence[int], memory_size: int = 0,
                 sequence_length: int = 1):
        if capacity < 2:
            raise ValueError(f"a replay buffer needs at least 2 rows, got {capacity}")
        if sequence_length < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
        self.capacity = int(capacity)
        self.visual = tuple(bool(v) for v in visual)
        self.obs = [np.zeros((self.capacity, *shape), np.uint8 if v else np.float32)
                    for shape, v in zip(obs_shapes, self.visual)]
        self.continuous = np.zeros((self.capacity, continuous_size), np.float32)
        self.discrete = np.zeros((self.capacity, len(discrete_branches)), np.int32)
        self.action_mask = np.zeros((self.capacity, int(sum(discrete_branches))), np.bool_)
        self.reward = np.zeros(self.capacity, np.float32)
        self.done = np.zeros(self.capacity, np.bool_)
        self.valid = np.zeros(self.capacity, np.bool_)
        self.memory_size = int(memory_size)
        self.sequence_length = int(sequence_length)
        if self.memory_size:
            self.memory = np.zeros((self.capacity, self.memory_size), np.float32)
            self.critic_memory = np.zeros((self.capacity, self.memory_size), np.float32)
            self.remaining = np.zeros(self.capacity, np.int32)
            self.sequence_start = np.zeros(self.capacity, np.bool_)
        self.position = 0  # the next row written (the oldest once full)
        self.size = 0  # rows written, at most capacity
        self.transitions = 0  # valid rows

    @classmethod
    def for_spec(cls, spec, capacity: int, memory_size: int = 0,
                 sequence_length: int = 1) -> "ReplayBuffer":
        """A buffer for a ``BehaviorSpec`` (and the policy's memory, if any)."""
        specs = spec.observation_specs
        return cls(capacity, [o.shape for o in specs],
                   [o.kind == ObservationKind.VISUAL for o in specs],
                   spec.action_spec.continuous_size, spec.action_spec.discrete_branches,
                   memory_size, sequence_length)

    # --- memory -------------------------------------------------------------------------
    def columns(self) -> Dict[str, np.ndarray]:
        """Every stored array by the name it is saved under."""
        out = {f"obs_{i}": o for i, o in enumerate(self.obs)}
        out.update(continuous=self.continuous, discrete=self.discrete,
                   action_mask=self.action_mask, reward=self.reward, done=self.done,
                   valid=self.valid)
        if self.memory_size:
            out.update(memory=self.memory, critic_memory=self.critic_memory,
                       remaining=self.remaining, sequence_start=self.sequence_start)
        return out

    def arrays(self):
        return list(self.columns().values())

    @property
    def nbytes(self) -> int:
        """Bytes the buffer's arrays take."""
        return int(sum(a.nbytes for a in self.arrays()))

    @property
    def bytes_per_row(self) -> int:
        return self.nbytes // self.capacity

    # --- writing ------------------------------------------------------------------------
    def add_trajectory(self, trajectory: Trajectory,
                       critic_memory: Optional[np.ndarray] = None) -> None:
        """Appends a trajectory's T transitions and the row of its next observation.

        Extrinsic rewards are the environment's plus the group's (as ML-Agents). ``done``
        is set on the last step only when the episode really ended: an interrupted episode
        (step limit) and a time-horizon cut bootstrap from the next observation.

        Args:
            critic_memory: with memory, [T, memory_size] the value network's state at each
                step (``trajectory.memory`` holds the policy's).
        """
        n = len(trajectory)
        if n == 0:
            return
        keep = min(n, self.capacity - 1)  # a longer trajectory keeps its newest steps
        start = n - keep
        rows = (self.position + np.arange(keep + 1)) % self.capacity
        for i, o in enumerate(trajectory.obs):
            self._put_obs(i, rows[:-1], o[start:])
            self._put_obs(i, rows[-1:], trajectory.next_obs[i][None])
        steps, tail = rows[:-1], rows[-1]
        actions = trajectory.actions
        self.continuous[steps] = actions.continuous[start:]
        self.discrete[steps] = actions.discrete[start:]
        self.action_mask[steps] = trajectory.action_mask[start:] > 0.5
        self.reward[steps] = trajectory.rewards[start:] + trajectory.group_reward[start:]
        self.done[steps] = False
        self.done[steps[-1]] = bool(trajectory.done)
        # Rows overwritten now stop being transitions; the new ones start.
        self.transitions -= int(self.valid[rows].sum())
        self.valid[steps] = True
        self.valid[tail] = False
        self.reward[tail] = 0.0
        self.done[tail] = False
        if self.memory_size:
            self.memory[steps] = trajectory.memory[start:]
            self.critic_memory[steps] = critic_memory[start:]
            offset = np.arange(keep)
            self.remaining[steps] = keep - offset
            self.sequence_start[steps] = offset % self.sequence_length == 0
            self.remaining[tail] = 0
            self.sequence_start[tail] = False
        self.transitions += keep
        self.position = int((self.position + keep + 1) % self.capacity)
        self.size = min(self.capacity, self.size + keep + 1)

    def _put_obs(self, index: int, rows: np.ndarray, values: np.ndarray) -> None:
        if self.visual[index]:
            levels = np.rint(values * 255.0)
            if levels.min() < 0 or levels.max() > 255 or not np.allclose(
                    levels * np.float32(1.0 / 255.0), values, rtol=0, atol=1e-6):
                self._store_as_float(index)  # not an 8-bit image: keep every value
            else:
                values = levels
        self.obs[index][rows] = values

    def _store_as_float(self, index: int) -> None:
        """From now on observation ``index`` is kept as float32 (what was stored as uint8
        is converted exactly)."""
        self.obs[index] = self.obs[index].astype(np.float32) * np.float32(1.0 / 255.0)
        visual = list(self.visual)
        visual[index] = False
        self.visual = tuple(visual)

    def _get_obs(self, index: int, rows: np.ndarray) -> np.ndarray:
        values = self.obs[index][rows]
        if self.visual[index]:
            return values.astype(np.float32) * np.float32(1.0 / 255.0)
        return values

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        """Transitions stored (rows that can be sampled)."""
        return self.transitions

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` rows drawn uniformly, with replacement, from the stored transitions."""
        if self.transitions == 0:
            raise ValueError("cannot sample an empty replay buffer")
        out = np.empty(0, np.int64)
        while len(out) < n:
            # Invalid rows (one per trajectory) are rare: draw a little more, keep the valid.
            draw = rng.integers(0, self.size, size=int((n - len(out)) * 1.25) + 8)
            out = np.concatenate([out, draw[self.valid[draw]]])
        return out[:n]

    def batch(self, rows: np.ndarray) -> Transitions:
        """The transitions at ``rows`` (from ``sample``)."""
        following = (rows + 1) % self.capacity
        return Transitions(
            obs=tuple(self._get_obs(i, rows) for i in range(len(self.obs))),
            next_obs=tuple(self._get_obs(i, following) for i in range(len(self.obs))),
            continuous=self.continuous[rows], discrete=self.discrete[rows],
            action_mask=self.action_mask[rows].astype(np.float32),
            reward=self.reward[rows], done=self.done[rows].astype(np.float32))

    def sample_sequences(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` sequence starts drawn uniformly, with replacement, from the stored ones
        (with memory)."""
        starts = np.flatnonzero(self.valid[:self.size] & self.sequence_start[:self.size])
        if not len(starts):
            raise ValueError("cannot sample an empty replay buffer")
        return starts[rng.integers(0, len(starts), size=n)]

    def sequences(self, starts: np.ndarray) -> Transitions:
        """The ``sequence_length`` steps from each of ``starts`` (from
        ``sample_sequences``), [len(starts) * L] rows in order; steps past the end of a
        trajectory are padding (``mask`` 0: zero observations, actions and rewards, every
        action allowed), and the memories are those stored at each start."""
        length = self.sequence_length
        rows = ((starts[:, None] + np.arange(length)[None, :]) % self.capacity).reshape(-1)
        mask = (np.arange(length)[None, :] < self.remaining[starts][:, None]).reshape(-1)
        t = self.batch(rows)

        def real(x, fill=0.0):
            keep = mask.reshape(-1, *([1] * (x.ndim - 1)))
            return np.where(keep, x, np.asarray(fill, x.dtype))
        return Transitions(
            obs=tuple(real(o) for o in t.obs), next_obs=tuple(real(o) for o in t.next_obs),
            continuous=real(t.continuous), discrete=real(t.discrete),
            action_mask=real(t.action_mask, 1.0), reward=real(t.reward), done=real(t.done),
            mask=mask.astype(np.float32), memory=self.memory[starts],
            critic_memory=self.critic_memory[starts])

    # --- saving -------------------------------------------------------------------------
    def save(self, path: str) -> str:
        """Writes the buffer to ``path`` (.npz, uncompressed) atomically: a temporary file
        renamed into place, so a reader never sees half a buffer."""
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".npz", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, version=np.int64(FORMAT_VERSION),
                         counters=np.array([self.capacity, self.position, self.size,
                                            self.transitions], np.int64),
                         **self.columns())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
        return path

    def load(self, path: str) -> None:
        """Restores what ``save`` wrote, into a buffer of the same layout (the rows are
        kept when the capacity changed, the newest first).

        Raises:
            ValueError: one line naming the file and what does not match.
        """
        with np.load(path, allow_pickle=False) as data:
            if int(data["version"]) != FORMAT_VERSION:
                raise ValueError(f"{path}: replay buffer format {int(data['version'])}, "
                                 f"this version reads {FORMAT_VERSION}")
            capacity, position, size, _ = (int(x) for x in data["counters"])
            arrays = {k: data[k] for k in data.files if k not in ("version", "counters")}
        for i in range(len(self.obs)):  # a column the saved buffer had to keep as floats
            saved = arrays.get(f"obs_{i}")
            if self.visual[i] and saved is not None and saved.dtype == np.float32:
                self._store_as_float(i)
        mine = self.columns()
        if set(arrays) != set(mine):
            raise ValueError(f"{path}: the saved replay buffer has fields "
                             f"{sorted(arrays)}, this behavior needs {sorted(mine)}")
        for key, array in arrays.items():
            if array.shape[1:] != mine[key].shape[1:] or array.dtype != mine[key].dtype:
                raise ValueError(f"{path}: {key} is {array.dtype}{list(array.shape[1:])} "
                                 f"per row, this behavior needs "
                                 f"{mine[key].dtype}{list(mine[key].shape[1:])}")
        # Oldest to newest, then the newest that fit.
        order = (np.arange(size) + (position if size == capacity else 0)) % capacity
        order = order[-self.capacity:]
        count = len(order)
        # The newest row is always a trajectory's last row (not a transition), so every
        # kept transition keeps its next row.
        for key, target in mine.items():
            target[:count] = arrays[key][order]
            target[count:] = 0
        self.position = count % self.capacity
        self.size = count
        self.transitions = int(self.valid[:count].sum())
