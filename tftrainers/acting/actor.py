"""The acting policy of a trained behavior: one packed call per env step for all its agents.

    actor = Actor(spec, memory_size, OnnxRunner(program, weights), seed=0)
    info, env_actions = actor.act(decision_steps)   # ActionInfo for the AgentProcessor
    env.set_actions(name, env_actions)
    actor.episode_ended(terminal_steps.agent_id)    # forgets those agents' memory
    actor.set_weights(WeightUpdate(version, flat))  # after each update of the learner

The call takes one packed float32 matrix and returns one (``ActLayout``): converting and
unpacking a dozen small tensors a step costs more than the graph. Sampling noise comes from
a NumPy generator whose state a checkpoint keeps (``state``), so a resumed run draws the
same actions an uninterrupted one would have; per-agent recurrent memory lives in one array
indexed by dense agent rows. No TensorFlow here: the call is an ``OnnxRunner`` (or, in the
learner's process only, a compiled TensorFlow function).
"""
from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Tuple

import numpy as np

from tftrainers.envs.agent_rows import AgentMemories, AgentRows
from tftrainers.envs.base import ActionTuple, BehaviorSpec, DecisionSteps
from tftrainers.processing import ActionInfo, LogProbs


def bucket(n: int) -> int:
    """The padded batch size for ``n`` rows: the next power of two (at least 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def pad_rows(array: np.ndarray, rows: int, value: float = 0.0) -> np.ndarray:
    """``array`` [n, ...] padded with ``value`` to [rows, ...]."""
    if len(array) == rows:
        return array
    pad = np.full((rows - len(array), *array.shape[1:]), value, array.dtype)
    return np.concatenate([array, pad])


class WeightUpdate(NamedTuple):
    """The learner's weights for the acting side: one flat vector (the variables in their
    fixed order, flattened) and a version that grows with every publication.

    ``at_episode_start``: the weights act only for episodes that begin after they arrive;
    an agent in the middle of an episode goes on with the weights it began with (a
    self-play opponent swapped at episode boundaries, ``trainers/ghost``). Only an actor
    made with ``pin_episodes`` keeps several weights; others take every update at once.
    """

    version: int
    flat: np.ndarray
    at_episode_start: bool = False


class ActLayout:
    """Columns of the packed act input and output of a behavior.

    Input: each observation flattened, the allowed-action mask [sum(branches)], the memory
    read [memory_size], Gaussian noise [c] and Gumbel uniforms [sum(branches)].
    Output: ``OUTPUTS`` in order (raw and env continuous actions, discrete actions, log
    probs, entropy, new memory).
    """

    OUTPUTS = ("continuous_action", "env_continuous_action", "discrete_action",
               "log_probs_continuous", "log_probs_discrete", "entropy", "memory")

    def __init__(self, spec: BehaviorSpec, memory_size: int):
        action_spec = spec.action_spec
        self.continuous_size = c = action_spec.continuous_size
        self.branches = action_spec.discrete_branches
        self.mask_size = int(sum(self.branches))
        self.memory_size = int(memory_size)
        self.obs_sizes = [int(np.prod(o.shape)) for o in spec.observation_specs]
        sizes = self.obs_sizes + [self.mask_size, self.memory_size, c, self.mask_size]
        self.in_offsets = np.cumsum([0] + sizes)
        b = action_spec.discrete_size
        widths = dict(zip(self.OUTPUTS, (c, c, b, c, b, 1, self.memory_size)))
        self.out_slices: Dict[str, slice] = {}
        start = 0
        for name in self.OUTPUTS:
            self.out_slices[name] = slice(start, start + widths[name])
            start += widths[name]

    @property
    def width(self) -> int:
        return int(self.in_offsets[-1])

    def split_sizes(self):
        """Widths of the input's parts, for ``tf.split`` on the learner's side."""
        return np.diff(self.in_offsets).tolist()


class Actor:
    """Acts for every agent of one behavior with one call.

    Args:
        spec: the behavior's spec.
        memory_size: the policy's recurrent state size (0 without memory).
        run: ``run(packed [n, width]) -> [n, outputs]`` float32; an ``OnnxRunner`` or any
            callable. If it has ``set_weights(flat)``, published weights go to it.
        seed: seeds the sampling noise.
        pad_to_bucket: pad batches to a power of two that never shrinks (an XLA-compiled
            TensorFlow call compiles once per shape; onnxruntime takes any batch).
        version: the version of the weights ``run`` starts with.
        pin_episodes: each agent acts with the weights its episode began with, for
            updates sent ``at_episode_start`` (a self-play team): the act call then runs
            once per set of weights in use, each batched over its agents. Such an actor
            starts at ``version`` 0 and gets its first weights with ``set_weights``.
    """

    def __init__(self, spec: BehaviorSpec, memory_size: int,
                 run: Callable[[np.ndarray], np.ndarray], seed: int = 0,
                 pad_to_bucket: bool = False, version: int = 0, pin_episodes: bool = False):
        self.spec = spec
        self.layout = ActLayout(spec, memory_size)
        self.memory_size = int(memory_size)
        self.run = run
        self.rng = np.random.default_rng(seed)
        self.version = int(version)
        self._pad = pad_to_bucket
        self._rows = 1  # with padding: batches grow to the largest bucket seen
        self._memories = AgentMemories(self.memory_size)
        self.last_entropy = np.zeros(0, np.float32)
        self.pin_episodes = bool(pin_episodes)
        # With pin_episodes: the weights each agent's episode acts with, by dense agent row
        # (-1: no episode running, it takes the newest weights at its next act), and every
        # weight vector some agent still acts with, by version.
        self._pin_rows = AgentRows()
        self._pins = np.zeros(0, np.int64)
        self._flats: Dict[int, np.ndarray] = {}
        self._run_version = self.version  # the weights ``run`` holds now
        #: [n] the weight version each agent of the last act call acted with (pin_episodes).
        self.last_versions = np.zeros(0, np.int64)

    # --- weights and state ---------------------------------------------------------------
    def set_weights(self, update: WeightUpdate) -> None:
        """Takes published weights newer than the ones in use (older ones are ignored)."""
        if update.version <= self.version:
            return
        if self.pin_episodes:
            if update.at_episode_start:  # running episodes go on with theirs
                live = set(self._pins[self._pins >= 0].tolist())
                self._flats = {v: f for v, f in self._flats.items() if v in live}
            else:  # every agent takes them now
                self._pins[self._pins >= 0] = update.version
                self._flats = {}
            self._flats[int(update.version)] = update.flat
        setter = getattr(self.run, "set_weights", None)
        if setter is not None:
            setter(update.flat)
        self.version = self._run_version = int(update.version)

    def state(self) -> dict:
        """What a checkpoint keeps of the acting side (the noise generator)."""
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]

    # --- acting ----------------------------------------------------------------------------
    def act(self, decision_steps: DecisionSteps) -> Tuple[ActionInfo, ActionTuple]:
        """Actions for every agent in ``decision_steps``.

        Returns:
            ActionInfo (raw actions, log probs and the memory read: what the AgentProcessor
            records) and the ActionTuple the env receives.
        """
        n = len(decision_steps)
        layout = self.layout
        size = n
        if self._pad:
            # One XLA compile for the usual batch: agents sitting a step out shrink n, and
            # padding up to the largest batch seen costs less than compiling another shape.
            self._rows = size = max(bucket(n), self._rows)
        packed = np.zeros((size, layout.width), np.float32)
        at = layout.in_offsets
        k = len(layout.obs_sizes)
        for i, o in enumerate(decision_steps.obs):
            packed[:n, at[i]:at[i + 1]] = o.reshape(n, -1)
        memory = None
        if self.memory_size:
            rows, memory = self._memories.read(decision_steps.agent_id)
            packed[:n, at[k + 1]:at[k + 2]] = memory
        if layout.continuous_size:  # Gaussian noise first, then uniforms: the replay order
            packed[:n, at[k + 2]:at[k + 3]] = self.rng.standard_normal(
                (n, layout.continuous_size), np.float32)
        if layout.mask_size:
            packed[:n, at[k]:at[k + 1]] = decision_steps.allowed_mask(layout.branches)
            # Gumbel-max needs u in (0, 1): keep away from both ends in float32.
            np.clip(self.rng.random((n, layout.mask_size), np.float32), 1e-10, 1 - 1e-7,
                    out=packed[:n, at[k + 3]:at[k + 4]])
            if size > n:  # padding rows: every action allowed, any u
                packed[n:, at[k]:at[k + 1]] = 1.0
                packed[n:, at[k + 3]:at[k + 4]] = 0.5
        if self.pin_episodes:
            out = self._run_pinned(decision_steps.agent_id, packed[:n])
        else:
            out = self.run(packed)
        if size > n:
            out = out[:n]
        get = {name: out[:, cut] for name, cut in layout.out_slices.items()}
        if self.memory_size:
            self._memories.write(rows, get["memory"])
        discrete = get["discrete_action"].astype(np.int32)
        info = ActionInfo(
            agent_id=decision_steps.agent_id,
            actions=ActionTuple(get["continuous_action"], discrete),
            log_probs=LogProbs(get["log_probs_continuous"], get["log_probs_discrete"]),
            values={},  # the critic runs on the learner, once per update
            memory=memory)
        self.last_entropy = get["entropy"][:, 0]
        return info, ActionTuple(get["env_continuous_action"], discrete)

    def _run_pinned(self, agent_id: np.ndarray, packed: np.ndarray) -> np.ndarray:
        """``run`` once per weight version in use, each over the rows of its agents."""
        rows = self._pin_rows.rows(agent_id)
        if len(self._pin_rows) > len(self._pins):
            grown = np.full(2 * len(self._pin_rows), -1, np.int64)
            grown[:len(self._pins)] = self._pins
            self._pins = grown
        pins = self._pins[rows]
        starting = pins < 0
        if starting.any():  # an episode begins: the newest weights, until it ends
            pins[starting] = self.version
            self._pins[rows[starting]] = self.version
        self.last_versions = pins
        versions = np.unique(pins)
        if len(versions) == 1 and versions[0] == self._run_version:
            return self.run(packed)
        out = None
        for version in versions:
            self._use(int(version))
            at = np.flatnonzero(pins == version)
            result = self.run(packed[at])
            if out is None:
                out = np.zeros((len(packed), result.shape[1]), result.dtype)
            out[at] = result
        return out

    def _use(self, version: int) -> None:
        if version != self._run_version:
            self.run.set_weights(self._flats[version])
            self._run_version = version

    def episode_ended(self, agent_ids: np.ndarray) -> None:
        """Forgets the recurrent memory of agents whose episode ended (and, with
        ``pin_episodes``, the weights their episode acted with)."""
        if self.memory_size and len(agent_ids):
            self._memories.forget(agent_ids)
        if self.pin_episodes and len(agent_ids) and len(self._pins):
            rows = self._pin_rows.rows(agent_ids)
            known = rows < len(self._pins)
            self._pins[rows[known]] = -1

