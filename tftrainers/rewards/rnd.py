"""Random network distillation (RND; Burda et al. 2018), as ML-Agents uses it.

A target network with random, frozen weights and a predictor of the same shape both embed
the observation an action led to. The predictor is trained to match the target on what
the agent sees, so its error, the reward, stays high only on rarely seen observations:

    reward = ||predictor(s') - target(s')||^2        loss = masked mean of that error

Both networks are a NetworkBody (``network_settings``) followed by a linear layer of the
same width, as in the RND paper. ML-Agents ends both in the body's swish; a predictor unit
whose pre-activation falls where swish is flat then never matches its target, leaving a
floor under the error that no amount of familiarity removes.
"""
from __future__ import annotations

from typing import Dict, Sequence

import keras
import numpy as np
import tensorflow as tf

from tftrainers.envs import BehaviorSpec
from tftrainers.networks import NetworkBody
from tftrainers.networks.layers import kaiming_normal
from tftrainers.rewards.base import RewardBatch, RewardProvider, masked_mean, reward_signature
from tftrainers.settings import NetworkSettings, RNDSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction


def distillation_errors(prediction: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """Squared error summed over features, per step: [B, k] x2 -> [B]."""
    return tf.reduce_sum(tf.square(prediction - target), axis=1)


class RNDNetwork(keras.Model):
    """Observations -> NetworkBody -> linear features ([B, hidden_units])."""

    def __init__(self, spec: BehaviorSpec, ns: NetworkSettings, **kwargs):
        super().__init__(**kwargs)
        self.body = NetworkBody(spec.observation_specs, ns.hidden_units, ns.num_layers,
                                ns.normalize, ns.vis_encode_type, memory_size=0, name="body",
                                goal_conditioning=ns.goal_conditioning_type,
                                encoder=ns.encoder)
        self.head = keras.layers.Dense(ns.hidden_units, kernel_initializer=kaiming_normal(1.0),
                                       name="features")
        self.head.build((None, self.body.encoding_size))
        self.built = True

    def call(self, obs: Sequence[tf.Tensor]) -> tf.Tensor:
        return self.head(self.body(list(obs))[0])

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        self.body.update_normalization(obs)


class RNDRewardProvider(RewardProvider):
    """RND reward stream; its Adam optimizer steps once per policy minibatch."""

    stat_name = "Rnd"  # ML-Agents capitalises the signal's name: Policy/Rnd Reward
    ignore_done = True
    needs_next_obs = True
    update_stat_names = ("Losses/RND Loss",)

    def __init__(self, name: str, spec: BehaviorSpec, settings: RNDSettings, seed: int = 0,
                 env_actions=None):
        super().__init__(name, spec, settings, seed, env_actions)
        ns = settings.network_settings

        def body(label):
            return RNDNetwork(spec, ns, name=label)
        self.target = body("rnd_target")
        self.target.trainable = False
        self.predictor = body("rnd_predictor")
        self.optimizer = FusedAdam(self.predictor.trainable_variables, settings.learning_rate,
                                   epsilon=1e-8, name=f"{name}_adam")
        self._errors_fn = CompiledFunction(self._errors, [reward_signature(spec)],
                                           jit_compile=False)
        self._normalize = ns.normalize

    def _errors(self, batch: RewardBatch) -> tf.Tensor:
        target = tf.stop_gradient(self.target(list(batch.next_obs)))
        return distillation_errors(self.predictor(list(batch.next_obs)), target)

    def evaluate(self, batch: RewardBatch) -> np.ndarray:
        return self._errors_fn(batch).numpy().astype(np.float32)

    def update_step(self, batch: RewardBatch) -> Dict[str, tf.Tensor]:
        variables = self.predictor.trainable_variables
        with tf.GradientTape() as tape:
            loss = masked_mean(self._errors(batch), batch.mask)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return {"Losses/RND Loss": loss}

    def update_normalization(self, next_obs: Sequence[np.ndarray]) -> None:
        # Both networks see the same normalised input, so the target's map stays fixed
        # relative to it.
        if self._normalize and len(next_obs[0]):
            obs = [tf.constant(o) for o in next_obs]
            self.target.update_normalization(obs)
            self.predictor.update_normalization(obs)

    def trackables(self) -> Dict[str, object]:
        return {f"{self.name}_target": self.target, f"{self.name}_predictor": self.predictor,
                f"{self.name}_optimizer": self.optimizer}
