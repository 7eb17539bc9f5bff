"""The learner's policy: the actor network and the act graph the acting side runs.

    policy = Policy(behavior_spec, settings.network_settings, seed=0)
    actor = policy.make_actor(seed=0)          # acting side (tftrainers.acting.Actor)
    ...optimizer updates policy.actor's variables...
    actor.set_weights(WeightUpdate(version, policy.flat_weights()))

The policy is what export needs (docs/dev/architecture.md#acting-and-learning): the critic and the
reward providers belong to
the optimizer. Acting runs the packed act graph (``acting.ActLayout``): converted once to
ONNX with the actor's variables as inputs and run by onnxruntime on the acting side, which
then needs no TensorFlow and takes the learner's weights as one flat vector
(``tf_utils.onnx_function``); or, with ``act_runtime: tensorflow``, XLA-compiled here, in
the learner's process (batches padded to a power of two: XLA compiles once per shape).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import tensorflow as tf

from tftrainers.acting import ActLayout, Actor, OnnxRunner, WeightUpdate
from tftrainers.envs import BehaviorSpec
from tftrainers.networks import PolicyNetwork
from tftrainers.networks.action_model import ActionNoise
from tftrainers.settings import NetworkSettings
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.tf_utils.onnx_function import convert_to_onnx, flat_values


def obs_signature(spec: BehaviorSpec) -> List[tf.TensorSpec]:
    return [tf.TensorSpec([None, *o.shape], tf.float32, name=f"obs_{i}")
            for i, o in enumerate(spec.observation_specs)]


def unflatten_obs(parts, spec: BehaviorSpec):
    """Flat [B, size] columns -> observations in their spec shapes (the first
    ``len(observation_specs)`` of ``parts``)."""
    return [tf.reshape(p, [-1, *o.shape]) for p, o in zip(parts, spec.observation_specs)]


class Policy:
    """The actor (PolicyNetwork) of one behavior and its act graph.

    Args:
        spec: the behavior's spec.
        network_settings: ML-Agents ``network_settings`` of the behavior.
        seed: not used by the network's initialisation (Keras' global seed is); kept for
            the acting side's noise (``make_actor``).
        deterministic: the act graph takes the most likely actions (inference with
            ``network_settings.deterministic``).
        jit_compile: XLA-compile the TensorFlow act call.
        tanh_squash: SAC's squashed Gaussian (env actions tanh of the sample) instead of
            PPO's clipped one.
    """

    def __init__(self, spec: BehaviorSpec, network_settings: NetworkSettings, seed: int = 0,
                 deterministic: bool = False, jit_compile: bool = True,
                 tanh_squash: bool = False):
        ns = network_settings
        self.spec = spec
        self.network_settings = ns
        self.memory_size = ns.memory.memory_size if ns.memory else 0
        self.sequence_length = ns.memory.sequence_length if ns.memory else 1
        self.deterministic = deterministic
        self.seed = seed
        self.actor = PolicyNetwork(spec, ns.hidden_units, ns.num_layers, ns.normalize,
                                   ns.vis_encode_type, self.memory_size,
                                   goal_conditioning=ns.goal_conditioning_type,
                                   encoder=ns.encoder, tanh_squash=tanh_squash)
        self.tanh_squash = bool(tanh_squash)
        self.layout = ActLayout(spec, self.memory_size)
        self._jit_compile = jit_compile
        self._tf_act = None  # traced on first use
        self._read_flat = None
        self._normalize_fn = (tf.function(self.actor.update_normalization,
                                          input_signature=[obs_signature(spec)], autograph=False)
                              if ns.normalize else None)

    # --- the act graph ---------------------------------------------------------------------
    def act_packed(self, packed):
        """The act call: packed inputs [n, layout.width] -> packed outputs (``ActLayout``)."""
        parts = tf.split(packed, self.layout.split_sizes(), axis=1)
        obs = unflatten_obs(parts, self.spec)
        masks, memory, gaussian, uniform = parts[len(obs):]
        memory_in = memory if self.memory_size else None
        if self.deterministic:
            out = dict(self.actor.deterministic(obs, masks, memory_in))
            zeros = tf.zeros_like(out["continuous_action"])
            out["log_probs_continuous"] = zeros
            out["log_probs_discrete"] = tf.zeros_like(tf.cast(out["discrete_action"], tf.float32))
            out["entropy"] = tf.zeros(tf.shape(masks)[:1])
        else:
            out = self.actor(obs, masks, memory_in, noise=ActionNoise(gaussian, uniform))
        columns = [out["entropy"][:, None] if name == "entropy" else tf.cast(out[name], tf.float32)
                   for name in ActLayout.OUTPUTS]
        return tf.concat(columns, axis=1)

    @property
    def variables(self) -> list:
        """Every variable of the actor (weights, log std, normalizer statistics), in the
        fixed order of the flat weight vector."""
        return list(self.actor.variables)

    def onnx_program(self):
        """The act graph converted to ONNX with the actor's variables as inputs.

        Raises:
            tftrainers.tf_utils.onnx_function.OnnxExportError: the graph did not convert.
        """
        return convert_to_onnx(self.act_packed, self.layout.width, self.variables)

    def flat_weights(self) -> np.ndarray:
        """The actor's variables, flattened and concatenated (the acting side's weights)."""
        if self._read_flat is None:
            self._read_flat = flat_values(self.variables)
        return self._read_flat()

    def tf_act_function(self) -> CompiledFunction:
        """The act call compiled in TensorFlow (reads the live variables)."""
        if self._tf_act is None:
            self._tf_act = CompiledFunction(
                self.act_packed, [tf.TensorSpec([None, self.layout.width], tf.float32)],
                jit_compile=self._jit_compile)
        return self._tf_act

    def make_actor(self, runtime: str = "onnxruntime", seed: int = None, version: int = 0,
                   program=None) -> Actor:
        """An acting policy with the current weights.

        Args:
            runtime: "onnxruntime" (the ONNX program; no TensorFlow on the acting side) or
                "tensorflow" (the compiled act call of this process).
            program: the ONNX program if already converted.

        Raises:
            ImportError, OnnxExportError: with "onnxruntime", when it cannot run.
        """
        seed = self.seed if seed is None else seed
        if runtime == "onnxruntime":
            runner = OnnxRunner(program or self.onnx_program(), self.flat_weights())
            return Actor(self.spec, self.memory_size, runner, seed=seed, version=version)
        function = self.tf_act_function()
        return Actor(self.spec, self.memory_size, lambda packed: function(packed).numpy(),
                     seed=seed, pad_to_bucket=True, version=version)

    def weight_update(self, version: int) -> WeightUpdate:
        return WeightUpdate(version, self.flat_weights())

    # --- learning-side helpers ------------------------------------------------------------
    def update_normalization(self, obs: List[np.ndarray]) -> None:
        """Adds observations to the running statistics of the actor's normalizer."""
        if self._normalize_fn is not None and len(obs[0]):
            self._normalize_fn(obs)

    def trackables(self) -> Dict[str, tf.Module]:
        """What a checkpoint holds of the policy (weights and normalizer)."""
        return {"actor": self.actor}
