"""The acting side of a behavior: actor and critic networks behind one compiled call.

    policy = Policy(behavior_spec, settings.network_settings, ["extrinsic"], seed=0)
    info, env_actions = policy.act(decision_steps)     # one compiled call for all agents
    env.set_actions(name, env_actions)
    policy.episode_ended(terminal_steps.agent_id)      # clears those agents' LSTM memory

Sampling noise comes from a NumPy generator (``policy.rng``) whose state goes into the
checkpoint, so a resumed run draws the same actions an uninterrupted one would have.
Per-agent recurrent memory lives in one array indexed by dense agent rows.

The act call is XLA-compiled by default: a small policy then costs about 100 us a step
instead of 500 (per-op executor overhead dominates such graphs). XLA compiles once per
input shape, so batches are padded to a power of two (``bucket``), never shrinking.
``use_onnxruntime()`` moves the act call and the critic to onnxruntime instead
(``onnx_function``), which costs less again inside an env loop; the weights are then
snapshots, taken again on the first call after ``weights_changed()``.
"""
from __future__ import annotations

import threading
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.envs import ActionTuple, BehaviorSpec, DecisionSteps
from tftrainers.envs.agent_rows import AgentMemories
from tftrainers.networks import Critic, PolicyNetwork
from tftrainers.networks.action_model import ActionNoise
from tftrainers.processing import ActionInfo, LogProbs
from tftrainers.settings import NetworkSettings
from tftrainers.trainers.compiled import CompiledFunction
from tftrainers.trainers.onnx_function import OnnxFunction


def bucket(n: int) -> int:
    """The padded batch size for ``n`` rows: the next power of two (at least 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def pad_rows(array: np.ndarray, rows: int, value: float = 0.0) -> np.ndarray:
    """``array`` [n, ...] padded with ``value`` to [rows, ...]."""
    if len(array) == rows:
        return array
    pad = np.full((rows - len(array), *array.shape[1:]), value, array.dtype)
    return np.concatenate([array, pad])


def obs_signature(spec: BehaviorSpec) -> List[tf.TensorSpec]:
    return [tf.TensorSpec([None, *o.shape], tf.float32, name=f"obs_{i}")
            for i, o in enumerate(spec.observation_specs)]


class Policy:
    """Actor (PolicyNetwork) and critic (value heads per reward stream) of one behavior.

    Args:
        spec: the behavior's spec.
        network_settings: ML-Agents ``network_settings`` (memory applies to the actor; the
            critic sees the current observation only).
        stream_names: reward streams, one value head each.
        seed: seeds the sampling noise.
        deterministic: act with the most likely actions (inference with
            ``network_settings.deterministic``).
        jit_compile: XLA-compile the act and value calls.
    """

    def __init__(self, spec: BehaviorSpec, network_settings: NetworkSettings,
                 stream_names: Sequence[str], seed: int = 0, deterministic: bool = False,
                 jit_compile: bool = True):
        ns = network_settings
        self.spec = spec
        self.stream_names = tuple(stream_names)
        self.memory_size = ns.memory.memory_size if ns.memory else 0
        self.sequence_length = ns.memory.sequence_length if ns.memory else 1
        self.deterministic = deterministic
        self.actor = PolicyNetwork(spec, ns.hidden_units, ns.num_layers, ns.normalize,
                                   ns.vis_encode_type, self.memory_size)
        self.critic = Critic(spec.observation_specs, self.stream_names, ns.hidden_units,
                             ns.num_layers, ns.normalize, ns.vis_encode_type, memory_size=0)
        self.rng = np.random.default_rng(seed)
        self._memories = AgentMemories(self.memory_size)
        action_spec = spec.action_spec
        self._c = action_spec.continuous_size
        self._branches = action_spec.discrete_branches
        self._mask_size = int(sum(self._branches))
        obs = obs_signature(spec)
        # The act call takes one packed float32 matrix and returns one: converting and
        # unpacking a dozen small tensors a step costs more than the XLA-compiled graph.
        self._obs_sizes = [int(np.prod(o.shape)) for o in spec.observation_specs]
        in_sizes = self._obs_sizes + [self._mask_size, self.memory_size, self._c,
                                      self._mask_size]
        self._in_offsets = np.cumsum([0] + in_sizes)
        b = action_spec.discrete_size
        out_sizes = {"continuous_action": self._c, "env_continuous_action": self._c,
                     "discrete_action": b, "log_probs_continuous": self._c,
                     "log_probs_discrete": b, "entropy": 1, "memory": self.memory_size}
        self._out_slices = {}
        start = 0
        for name, width in out_sizes.items():
            self._out_slices[name] = slice(start, start + width)
            start += width
        self._jit_compile = jit_compile
        self._tf_act: Optional[CompiledFunction] = None  # traced on first use
        self._onnx_act: Optional[OnnxFunction] = None
        self._onnx_values: Optional[OnnxFunction] = None
        self._weights_stale = False  # read every variable before the next onnxruntime call
        self._fresh_weights: Dict[int, np.ndarray] = {}  # or just take these (by id)
        self._weights_lock = threading.Lock()
        self._tf_values: Optional[CompiledFunction] = None  # traced on first use
        self._act_rows = 1  # act batches are padded to the largest bucket seen
        self._normalize_fn = tf.function(self._update_normalization, input_signature=[obs]) \
            if ns.normalize else None

    # --- act runtimes -----------------------------------------------------------------------
    @property
    def act_runtime(self) -> str:
        """Where the act call runs: "onnxruntime" or "tensorflow"."""
        return "onnxruntime" if self._onnx_act is not None else "tensorflow"

    def use_onnxruntime(self) -> None:
        """Runs the act call in onnxruntime from now on (the graph converted once).

        Raises:
            ImportError: onnxruntime is not installed.
            tftrainers.export.onnx_export.OnnxExportError: the policy did not convert.
        """
        self._onnx_act = OnnxFunction(self._act_packed, int(self._in_offsets[-1]),
                                      self.actor.variables)
        self._onnx_values = OnnxFunction(self._values_packed, sum(self._obs_sizes),
                                         self.critic.variables)
        self._weights_stale = False

    def _refresh_if_stale(self) -> None:
        if not (self._weights_stale or self._fresh_weights):
            return
        with self._weights_lock:  # a threaded update may hand over weights meanwhile
            stale, fresh = self._weights_stale, self._fresh_weights
            self._weights_stale, self._fresh_weights = False, {}
        for function in (self._onnx_act, self._onnx_values):
            function.refresh(None if stale else fresh)

    def weights_changed(self, values: Optional[Mapping[int, np.ndarray]] = None) -> None:
        """Call after the actor's or critic's variables changed outside this class (an
        optimizer step, a restore): the onnxruntime calls take a fresh snapshot before their
        next use. ``values`` (NumPy arrays by variable ``id``), when they cover every
        variable that changed, spare reading them back from TensorFlow."""
        with self._weights_lock:
            if values is None:
                self._weights_stale, self._fresh_weights = True, {}
            elif not self._weights_stale:
                self._fresh_weights = {**self._fresh_weights, **values}

    def _tf_values_fn(self) -> CompiledFunction:
        if self._tf_values is None:
            # Values are computed once per update for many trajectories: not worth an XLA
            # compile per batch size.
            self._tf_values = CompiledFunction(self._values, [obs_signature(self.spec)],
                                               jit_compile=False)
        return self._tf_values

    def _tf_act_fn(self) -> CompiledFunction:
        if self._tf_act is None:
            self._tf_act = CompiledFunction(
                self._act_packed, [tf.TensorSpec([None, int(self._in_offsets[-1])], tf.float32)],
                jit_compile=self._jit_compile)
        return self._tf_act

    # --- compiled -------------------------------------------------------------------------
    def _act_packed(self, packed):
        parts = tf.split(packed, np.diff(self._in_offsets).tolist(), axis=1)
        obs = self._unflatten_obs(parts)
        masks, memory, gaussian, uniform = parts[len(obs):]
        out = self._act(obs, masks, memory, gaussian, uniform)
        columns = [out["entropy"][:, None] if name == "entropy" else tf.cast(out[name], tf.float32)
                   for name in self._out_slices]
        return tf.concat(columns, axis=1)

    def _act(self, obs, masks, memory, gaussian, uniform):
        memory_in = memory if self.memory_size else None
        if self.deterministic:
            out = dict(self.actor.deterministic(obs, masks, memory_in))
            zeros = tf.zeros_like(out["continuous_action"])
            out["log_probs_continuous"] = zeros
            out["log_probs_discrete"] = tf.zeros_like(tf.cast(out["discrete_action"], tf.float32))
            out["entropy"] = tf.zeros(tf.shape(masks)[:1])
        else:
            out = self.actor(obs, masks, memory_in, noise=ActionNoise(gaussian, uniform))
        return out

    def _values(self, obs):
        values, _ = self.critic(obs)
        return values

    def _unflatten_obs(self, parts):
        """Flat [B, size] columns of a packed matrix -> observations in their spec shapes
        (the first ``len(observation_specs)`` of ``parts``)."""
        return [tf.reshape(p, [-1, *o.shape]) for p, o in zip(parts, self.spec.observation_specs)]

    def _values_packed(self, packed):
        values = self._values(self._unflatten_obs(tf.split(packed, self._obs_sizes, axis=1)))
        return tf.stack([values[name] for name in self.stream_names], axis=1)

    def _update_normalization(self, obs):
        self.actor.update_normalization(obs)
        self.critic.update_normalization(obs)
        return tf.constant(0)

    # --- Python side ------------------------------------------------------------------------
    def act(self, decision_steps: DecisionSteps) -> Tuple[ActionInfo, ActionTuple]:
        """Actions for every agent in ``decision_steps``.

        Returns:
            ActionInfo (raw actions, log probs and the memory read: what the AgentProcessor
            records) and the ActionTuple the env receives. Value estimates are not computed
            here: as in ML-Agents, the critic evaluates whole trajectories before an update.
        """
        n = len(decision_steps)
        onnx_act = self._onnx_act
        if onnx_act is not None:
            size = n  # onnxruntime takes any batch size as it is
            self._refresh_if_stale()
        else:
            # One XLA compile for the usual batch: agents sitting a step out shrink n, and
            # padding up to the largest batch seen costs less than compiling another shape.
            self._act_rows = size = max(bucket(n), self._act_rows)
        packed = np.zeros((size, self._in_offsets[-1]), np.float32)
        at = self._in_offsets
        k = len(self._obs_sizes)
        for i, o in enumerate(decision_steps.obs):
            packed[:n, at[i]:at[i + 1]] = o.reshape(n, -1)
        if self.memory_size:
            rows, memory = self._memories.read(decision_steps.agent_id)
            packed[:n, at[k + 1]:at[k + 2]] = memory
        if self._c:  # Gaussian noise first, then the uniforms: the order a checkpoint replays
            packed[:n, at[k + 2]:at[k + 3]] = self.rng.standard_normal((n, self._c), np.float32)
        if self._mask_size:
            packed[:n, at[k]:at[k + 1]] = decision_steps.allowed_mask(self._branches)
            # Gumbel-max needs u in (0, 1): keep away from both ends in float32.
            np.clip(self.rng.random((n, self._mask_size), np.float32), 1e-10, 1 - 1e-7,
                    out=packed[:n, at[k + 3]:at[k + 4]])
            if size > n:  # padding rows: every action allowed, any u
                packed[n:, at[k]:at[k + 1]] = 1.0
                packed[n:, at[k + 3]:at[k + 4]] = 0.5
        out = (onnx_act(packed) if onnx_act is not None
               else self._tf_act_fn()(packed).numpy()[:n])
        get = {name: out[:, cut] for name, cut in self._out_slices.items()}
        if self.memory_size:
            self._memories.write(rows, get["memory"])
        discrete = get["discrete_action"].astype(np.int32)
        info = ActionInfo(
            agent_id=decision_steps.agent_id,
            actions=ActionTuple(get["continuous_action"], discrete),
            log_probs=LogProbs(get["log_probs_continuous"], get["log_probs_discrete"]),
            values={},  # the critic runs once per update over whole trajectories
            memory=memory if self.memory_size else None)
        self.last_entropy = get["entropy"][:, 0]
        return info, ActionTuple(get["env_continuous_action"], discrete)

    def episode_ended(self, agent_ids: np.ndarray) -> None:
        """Forgets the recurrent memory of agents whose episode ended."""
        if self.memory_size:
            self._memories.forget(agent_ids)

    def values(self, obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic values {stream: [n]} of a batch of observations."""
        if self._onnx_values is None:
            return {k: v.numpy() for k, v in self._tf_values_fn()(obs).items()}
        self._refresh_if_stale()
        n = len(obs[0])
        packed = np.concatenate([o.reshape(n, -1) for o in obs], axis=1, dtype=np.float32)
        out = self._onnx_values(packed)
        return {name: out[:, i] for i, name in enumerate(self.stream_names)}

    def update_normalization(self, obs: List[np.ndarray]) -> None:
        """Adds observations to the running statistics of actor and critic normalizers."""
        if self._normalize_fn is not None and len(obs[0]):
            self._normalize_fn(obs)
            self.weights_changed()

    def trackables(self) -> Dict[str, tf.Module]:
        """What a checkpoint holds of the policy (weights and normalizers)."""
        return {"actor": self.actor, "critic": self.critic}

    def rng_state(self) -> dict:
        return self.rng.bit_generator.state

    def set_rng_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state
