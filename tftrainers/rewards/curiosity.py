"""Curiosity: the intrinsic curiosity module (ICM; Pathak et al. 2017), as ML-Agents uses it.

An encoder phi maps observations to features. The inverse model predicts the action taken
from (phi(s), phi(s')); the forward model predicts phi(s') from (phi(s), a). Training the
encoder through the inverse model keeps in phi what the agent's actions influence. The
reward is the forward model's error, 0.5 * ||f(phi(s), a) - phi(s')||^2: high where the
agent has rarely been, falling as a transition becomes familiar.

    loss   = 10 * (0.2 * forward_loss + 0.8 * inverse_loss)       (both masked means)
    reward = min(0.5 * ||f(phi(s), a) - phi(s')||^2, 1 / strength)   (the trainer * strength)

Before the first update the reward is 0 (an untrained model's error is noise).
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import keras
import numpy as np
import tensorflow as tf

from tftrainers.envs import BehaviorSpec
from tftrainers.networks import NetworkBody
from tftrainers.networks.layers import kaiming_normal, swish
from tftrainers.rewards.base import RewardBatch, RewardProvider, masked_mean, reward_signature
from tftrainers.settings import CuriositySettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction

HIDDEN = 256  # width of the inverse and forward models' hidden layer, as in ML-Agents
EPSILON = 1e-10
FORWARD_WEIGHT, INVERSE_WEIGHT, LOSS_SCALE = 0.2, 0.8, 10.0


def forward_errors(predicted: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """0.5 * squared error summed over features, per step: [B, k] x2 -> [B]."""
    return 0.5 * tf.reduce_sum(tf.square(target - predicted), axis=1)


def inverse_loss(predicted_continuous: tf.Tensor, continuous: tf.Tensor,
                 predicted_probs: tf.Tensor, discrete_onehot: tf.Tensor,
                 mask: tf.Tensor) -> tf.Tensor:
    """Squared error on continuous actions plus cross-entropy on discrete branches, each
    summed per step and averaged over real steps. Empty parts contribute 0."""
    squared = tf.reduce_sum(tf.square(continuous - predicted_continuous), axis=1)
    cross_entropy = tf.reduce_sum(-tf.math.log(predicted_probs + EPSILON) * discrete_onehot,
                                  axis=1)
    loss = tf.constant(0.0)
    if continuous.shape[1]:
        loss += masked_mean(squared, mask)
    if discrete_onehot.shape[1]:
        loss += masked_mean(cross_entropy, mask)
    return loss


def curiosity_loss(forward: tf.Tensor, inverse: tf.Tensor) -> tf.Tensor:
    return LOSS_SCALE * (FORWARD_WEIGHT * forward + INVERSE_WEIGHT * inverse)


def capped_reward(errors: np.ndarray, strength: float) -> np.ndarray:
    """Forward errors capped at 1 / strength, so a step never earns more than 1."""
    if strength <= 0:
        return np.asarray(errors, np.float32)
    return np.minimum(errors, 1.0 / strength).astype(np.float32)


def onehot_branches(discrete: tf.Tensor, branches: Sequence[int]) -> tf.Tensor:
    """[B, branches] int -> [B, sum(branches)] one-hot per branch, concatenated."""
    parts = [tf.one_hot(discrete[:, i], size) for i, size in enumerate(branches)]
    return tf.concat(parts, axis=1) if parts else tf.zeros([tf.shape(discrete)[0], 0])


class CuriosityNetwork(keras.Model):
    """Encoder phi, inverse model and forward model of one behavior."""

    def __init__(self, spec: BehaviorSpec, settings: CuriositySettings, **kwargs):
        super().__init__(**kwargs)
        ns = settings.network_settings
        action_spec = spec.action_spec
        self.branches = tuple(int(b) for b in action_spec.discrete_branches)
        self.continuous_size = int(action_spec.continuous_size)
        # No memory: curiosity looks at single transitions (ML-Agents drops it too).
        self.encoder = NetworkBody(spec.observation_specs, ns.hidden_units, ns.num_layers,
                                   ns.normalize, ns.vis_encode_type, memory_size=0,
                                   name="state_encoder",
                                   goal_conditioning=ns.goal_conditioning_type,
                                   encoder=ns.encoder)
        features = self.encoder.encoding_size
        action_size = self.continuous_size + sum(self.branches)

        def dense(units, inputs, name):
            layer = keras.layers.Dense(units, kernel_initializer=kaiming_normal(1.0), name=name)
            layer.build((None, inputs))
            return layer
        self.inverse_hidden = dense(HIDDEN, 2 * features, "inverse_hidden")
        # Heads only for the action kinds the behavior has (a Dense of 0 units fails).
        self.inverse_continuous = (dense(self.continuous_size, HIDDEN, "inverse_continuous")
                                   if self.continuous_size else None)
        self.inverse_discrete = (dense(sum(self.branches), HIDDEN, "inverse_discrete")
                                 if self.branches else None)
        self.forward_hidden = dense(HIDDEN, features + action_size, "forward_hidden")
        self.forward_out = dense(features, HIDDEN, "forward_out")
        self.built = True

    def encode(self, obs: Sequence[tf.Tensor]) -> tf.Tensor:
        return self.encoder(list(obs))[0]

    def flat_actions(self, continuous: tf.Tensor, discrete: tf.Tensor) -> tf.Tensor:
        return tf.concat([continuous, onehot_branches(discrete, self.branches)], axis=1)

    def predict_action(self, state: tf.Tensor, next_state: tf.Tensor):
        """(continuous prediction [B, c], per-branch softmax probabilities [B, sum])."""
        hidden = swish(self.inverse_hidden(tf.concat([state, next_state], axis=1)))
        rows = tf.shape(hidden)[0]
        continuous = (self.inverse_continuous(hidden) if self.inverse_continuous is not None
                      else tf.zeros([rows, 0]))
        if self.inverse_discrete is None:
            return continuous, tf.zeros([rows, 0])
        logits = tf.split(self.inverse_discrete(hidden), list(self.branches), axis=1)
        return continuous, tf.concat([tf.nn.softmax(part) for part in logits], axis=1)

    def predict_next_state(self, state: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        hidden = swish(self.forward_hidden(tf.concat([state, actions], axis=1)))
        return self.forward_out(hidden)

    def _encode_and_predict(self, batch: RewardBatch):
        """phi(s), phi(s') and the forward errors [B] of a batch."""
        state, next_state = self.encode(batch.obs), self.encode(batch.next_obs)
        actions = self.flat_actions(batch.continuous_action, batch.discrete_action)
        return state, next_state, forward_errors(self.predict_next_state(state, actions),
                                                 next_state)

    def errors(self, batch: RewardBatch) -> tf.Tensor:
        """Per-step forward errors [B] (the uncapped reward)."""
        return self._encode_and_predict(batch)[2]

    def losses(self, batch: RewardBatch) -> Dict[str, tf.Tensor]:
        state, next_state, errors = self._encode_and_predict(batch)
        continuous, probs = self.predict_action(state, next_state)
        inverse = inverse_loss(continuous, batch.continuous_action, probs,
                               onehot_branches(batch.discrete_action, self.branches), batch.mask)
        return {"forward": masked_mean(errors, batch.mask), "inverse": inverse}


class CuriosityRewardProvider(RewardProvider):
    """ICM reward stream; its Adam optimizer steps once per policy minibatch."""

    stat_name = "Curiosity"
    ignore_done = True
    needs_next_obs = True
    update_stat_names = ("Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss")

    def __init__(self, name: str, spec: BehaviorSpec, settings: CuriositySettings, seed: int = 0,
                 env_actions=None):
        super().__init__(name, spec, settings, seed, env_actions)
        self.network = CuriosityNetwork(spec, settings, name="curiosity")
        self.optimizer = FusedAdam(self.network.trainable_variables, settings.learning_rate,
                                   epsilon=1e-8, name=f"{name}_adam")
        # Scoring runs once per update on thousands of steps: not worth an XLA compile per size.
        self._errors_fn = CompiledFunction(self.network.errors, [reward_signature(spec)],
                                           jit_compile=False)
        self._normalize = settings.network_settings.normalize

    def evaluate(self, batch: RewardBatch) -> np.ndarray:
        if int(self.optimizer.iterations.numpy()) == 0:  # not trained yet (checkpointed)
            return np.zeros(len(batch.mask), np.float32)
        return capped_reward(self._errors_fn(batch).numpy(), self.strength)

    def update_step(self, batch: RewardBatch) -> Dict[str, tf.Tensor]:
        variables = self.network.trainable_variables
        with tf.GradientTape() as tape:
            losses = self.network.losses(batch)
            loss = curiosity_loss(losses["forward"], losses["inverse"])
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return {"Losses/Curiosity Forward Loss": losses["forward"],
                "Losses/Curiosity Inverse Loss": losses["inverse"]}

    def update_normalization(self, next_obs: Sequence[np.ndarray]) -> None:
        if self._normalize and len(next_obs[0]):
            self.network.encoder.update_normalization([tf.constant(o) for o in next_obs])

    def trackables(self) -> Dict[str, object]:
        return {f"{self.name}_network": self.network, f"{self.name}_optimizer": self.optimizer}


__all__: List[str] = ["CuriosityNetwork", "CuriosityRewardProvider", "capped_reward",
                      "curiosity_loss", "forward_errors", "inverse_loss", "onehot_branches"]
