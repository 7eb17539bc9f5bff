"""Action heads: a Gaussian for continuous actions, categoricals for discrete branches.

Mirrors ML-Agents' ``ActionModel`` (hybrid actions allowed)::

    model = ActionModel(encoding_size, action_spec)
    sample = model.sample(encoding, masks)           # acting: ActionSample
    env_continuous = model.env_actions(sample.continuous)   # clip(x, -3, 3) / 3
    evaluation = model.evaluate(encoding, masks, Actions(stored_cont, stored_disc))  # PPO

Masks are ``[B, sum(discrete_branches)]`` float32 with 1 = allowed (the exported
``action_masks``); ``allowed_action_mask`` converts the env's per-branch bool masks
(True = masked). Masked logits are ``logits * mask - 1e8 * (1 - mask)``, so a masked
action has probability exactly 0 and is never sampled.

Log probabilities are kept per continuous dimension and per discrete branch because the
PPO ratio is taken per dimension / branch (ML-Agents ``ActionLogProbs.flatten()``).
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional

import keras
import tensorflow as tf

from tftrainers.envs.base import ActionSpec, allowed_action_mask  # noqa: F401 (re-export)
from tftrainers.networks.layers import kaiming_normal, track_layers

_LOG_2PI = math.log(2.0 * math.pi)
MASKED_LOGIT = 1e8


class Actions(NamedTuple):
    """Actions as tensors: continuous [B, c] float32 (raw, before clipping), discrete
    [B, branches] int32."""

    continuous: tf.Tensor
    discrete: tf.Tensor


class ActionSample(NamedTuple):
    """Sampled actions with their log-probabilities and entropies.

    continuous: [B, c] raw Gaussian sample (before ``env_actions``).
    discrete: [B, branches] int32.
    log_probs_continuous: [B, c] log density of each dimension.
    log_probs_discrete: [B, branches] log probability of each branch's action.
    entropy_continuous: [B, c] entropy of each dimension's Gaussian.
    entropy_discrete: [B, branches] entropy of each branch's masked categorical.
    """

    continuous: tf.Tensor
    discrete: tf.Tensor
    log_probs_continuous: tf.Tensor
    log_probs_discrete: tf.Tensor
    entropy_continuous: tf.Tensor
    entropy_discrete: tf.Tensor

    @property
    def entropy(self) -> tf.Tensor:
        """[B] total entropy, combined as in ``total_entropy``."""
        return total_entropy(self.entropy_continuous, self.entropy_discrete)


class ActionNoise(NamedTuple):
    """Noise for sampling supplied from outside the graph (so a NumPy RNG drives it).

    gaussian: [B, c] float32 standard normal draws for the continuous actions.
    uniform: [B, sum(branches)] float32 draws in (0, 1) for Gumbel-max sampling.
    """

    gaussian: tf.Tensor
    uniform: tf.Tensor


class ActionEvaluation(NamedTuple):
    """Log-probabilities and entropy of given actions (unpacks as a 3-tuple).

    log_probs_continuous: [B, c]; log_probs_discrete: [B, branches]; entropy: [B].
    """

    log_probs_continuous: tf.Tensor
    log_probs_discrete: tf.Tensor
    entropy: tf.Tensor


def total_entropy(entropy_continuous: tf.Tensor, entropy_discrete: tf.Tensor) -> tf.Tensor:
    """[B] entropy as ML-Agents reports and regularises it: the *mean* over continuous
    dimensions (one Gaussian distribution) plus the *sum* over discrete branches (one
    categorical each). ``beta`` defaults are tuned to this scale."""
    # Only the parts that exist: onnxruntime reduces a zero-width tensor to no rows at all.
    parts = []
    if entropy_discrete.shape[-1]:
        parts.append(tf.reduce_sum(entropy_discrete, axis=-1))
    if entropy_continuous.shape[-1]:
        parts.append(tf.reduce_mean(entropy_continuous, axis=-1))
    if not parts:
        return tf.zeros(tf.shape(entropy_discrete)[:1], entropy_discrete.dtype)
    return tf.add_n(parts)


def gaussian_log_prob(x: tf.Tensor, mean: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """Per-dimension log density of N(mean, exp(log_std)^2) at x; all [B, c]."""
    z = (x - mean) * tf.exp(-log_std)
    return -0.5 * tf.square(z) - log_std - 0.5 * _LOG_2PI


def gaussian_entropy(log_std: tf.Tensor) -> tf.Tensor:
    """Per-dimension entropy 0.5 * log(2 pi e sigma^2) = 0.5 * (log(2 pi) + 1) + log_std."""
    return 0.5 * (_LOG_2PI + 1.0) + log_std


def apply_mask(logits: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """``logits * mask - 1e8 * (1 - mask)`` with mask 1 = allowed, as ML-Agents exports it."""
    return logits * mask - MASKED_LOGIT * (1.0 - mask)


class ActionModel(keras.layers.Layer):
    """Gaussian and categorical heads over an encoding.

    Continuous: mean = Dense(encoding) (small init, as ML-Agents' kernel gain 0.2), log std a
    trainable, state-independent vector initialised to 0. Discrete: one logits Dense per
    branch (kernel gain 0.1).

    Args:
        encoding_size: size of the encoding the heads read.
        action_spec: continuous size and discrete branches (either or both).
    """

    def __init__(self, encoding_size: int, action_spec: ActionSpec, name: str | None = None,
                 **kwargs):
        super().__init__(name=name, **kwargs)
        self.encoding_size = int(encoding_size)
        self.action_spec = action_spec
        self.continuous_size = action_spec.continuous_size
        self.discrete_branches = tuple(action_spec.discrete_branches)

        self.mean = None
        self.log_std = None
        if self.continuous_size:
            self.mean = keras.layers.Dense(self.continuous_size,
                                           kernel_initializer=kaiming_normal(0.2),
                                           name="mean")
            self.mean.build((None, self.encoding_size))
            self.log_std = self._make_log_std()
        branch_heads = []
        for i, size in enumerate(self.discrete_branches):
            head = keras.layers.Dense(size, kernel_initializer=kaiming_normal(0.1),
                                      name=f"branch_{i}")
            head.build((None, self.encoding_size))
            branch_heads.append(head)
        self.branch_heads = track_layers(self, "branch", branch_heads)
        self.built = True

    def _make_log_std(self):
        """A trainable, state-independent log std vector initialised to 0 (PPO's)."""
        return self.add_weight(shape=(self.continuous_size,), initializer="zeros",
                               trainable=True, name="log_std")

    def call(self, encoding: tf.Tensor, masks: Optional[tf.Tensor] = None) -> ActionSample:
        return self.sample(encoding, masks)

    # -- distribution parameters -------------------------------------------------------

    def _gaussian(self, encoding: tf.Tensor):
        mean = self.mean(encoding)
        # Broadcast to [B, c] so per-dimension outputs have the batch dimension.
        log_std = tf.zeros_like(mean) + self.log_std
        return mean, log_std

    def masked_logits(self, encoding: tf.Tensor, masks: Optional[tf.Tensor]) -> List[tf.Tensor]:
        """One [B, branch_size] masked logits tensor per branch."""
        logits = [head(encoding) for head in self.branch_heads]
        if masks is None:
            return logits
        masks = tf.cast(masks, logits[0].dtype)
        branch_masks = tf.split(masks, list(self.discrete_branches), axis=-1)
        return [apply_mask(l, m) for l, m in zip(logits, branch_masks)]

    def _empty(self, encoding: tf.Tensor, dtype=tf.float32) -> tf.Tensor:
        return tf.zeros(tf.stack([tf.shape(encoding)[0], 0]), dtype)

    # -- public API ------------------------------------------------------------------------

    def sample(self, encoding: tf.Tensor, masks: Optional[tf.Tensor] = None,
               noise: Optional[ActionNoise] = None) -> ActionSample:
        """Samples actions in the graph.

        Args:
            encoding: [B, encoding_size] float32.
            masks: [B, sum(branches)] float32, 1 = allowed; None allows every action.
            noise: given noise (training, so that a checkpointed RNG makes rollouts
                repeatable), or None to draw it in the graph (``tf.random``; what the
                exported models do).

        Returns:
            ActionSample (see its fields for shapes).
        """
        if self.continuous_size:
            mean, log_std = self._gaussian(encoding)
            eps = tf.random.normal(tf.shape(mean)) if noise is None else noise.gaussian
            continuous = mean + tf.exp(log_std) * eps
            log_probs_continuous = gaussian_log_prob(continuous, mean, log_std)
            entropy_continuous = gaussian_entropy(log_std)
        else:
            continuous = log_probs_continuous = entropy_continuous = self._empty(encoding)

        if self.discrete_branches:
            actions, log_probs, entropies = [], [], []
            branch_uniform = (tf.split(noise.uniform, list(self.discrete_branches), axis=-1)
                              if noise is not None else [None] * len(self.discrete_branches))
            for logits, uniform in zip(self.masked_logits(encoding, masks), branch_uniform):
                if uniform is None:
                    # tf.random.categorical converts to ONNX Multinomial.
                    action = tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]
                else:  # Gumbel-max: argmax(logits + Gumbel noise) ~ softmax(logits)
                    gumbel = -tf.math.log(-tf.math.log(uniform))
                    action = tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32)
                log_softmax = tf.nn.log_softmax(logits, axis=-1)
                actions.append(action)
                log_probs.append(_pick(log_softmax, action))
                entropies.append(_categorical_entropy(log_softmax))
            discrete = tf.stack(actions, axis=-1)
            log_probs_discrete = tf.stack(log_probs, axis=-1)
            entropy_discrete = tf.stack(entropies, axis=-1)
        else:
            discrete = self._empty(encoding, tf.int32)
            log_probs_discrete = entropy_discrete = self._empty(encoding)
        return ActionSample(continuous, discrete, log_probs_continuous, log_probs_discrete,
                            entropy_continuous, entropy_discrete)

    def deterministic(self, encoding: tf.Tensor, masks: Optional[tf.Tensor] = None) -> Actions:
        """The most likely actions: the Gaussian mean [B, c] (raw) and the argmax of the
        masked logits [B, branches] int32."""
        continuous = self.mean(encoding) if self.continuous_size else self._empty(encoding)
        if self.discrete_branches:
            discrete = tf.stack([tf.argmax(logits, axis=-1, output_type=tf.int32)
                                 for logits in self.masked_logits(encoding, masks)], axis=-1)
        else:
            discrete = self._empty(encoding, tf.int32)
        return Actions(continuous, discrete)

    def evaluate(self, encoding: tf.Tensor, masks: Optional[tf.Tensor],
                 actions: Actions) -> ActionEvaluation:
        """Log-probabilities and entropy of stored actions (differentiable; the PPO update).

        Args:
            encoding: [B, encoding_size] float32.
            masks: [B, sum(branches)] float32, 1 = allowed, or None.
            actions: Actions(continuous [B, c] raw, discrete [B, branches] int).

        Returns:
            ActionEvaluation(log_probs_continuous [B, c], log_probs_discrete [B, branches],
            entropy [B]).
        """
        continuous, discrete = actions
        if self.continuous_size:
            mean, log_std = self._gaussian(encoding)
            log_probs_continuous = gaussian_log_prob(tf.cast(continuous, mean.dtype), mean,
                                                     log_std)
            entropy_continuous = gaussian_entropy(log_std)
        else:
            log_probs_continuous = entropy_continuous = self._empty(encoding)
        if self.discrete_branches:
            discrete = tf.cast(discrete, tf.int32)
            log_probs, entropies = [], []
            for i, logits in enumerate(self.masked_logits(encoding, masks)):
                log_softmax = tf.nn.log_softmax(logits, axis=-1)
                log_probs.append(_pick(log_softmax, discrete[:, i]))
                entropies.append(_categorical_entropy(log_softmax))
            log_probs_discrete = tf.stack(log_probs, axis=-1)
            entropy_discrete = tf.stack(entropies, axis=-1)
        else:
            log_probs_discrete = entropy_discrete = self._empty(encoding)
        return ActionEvaluation(log_probs_continuous, log_probs_discrete,
                                total_entropy(entropy_continuous, entropy_discrete))

    @staticmethod
    def env_actions(raw_continuous: tf.Tensor) -> tf.Tensor:
        """What the env receives (and ONNX exports): ``clip(x, -3, 3) / 3`` in [-1, 1]."""
        return tf.clip_by_value(raw_continuous, -3.0, 3.0) / 3.0


class SquashedActionModel(ActionModel):
    """The action model of SAC (ML-Agents' ``tanh_squash`` and ``conditional_sigma``): the
    log std is a Dense head of the encoding, clipped to [-20, 2], and the env receives
    ``tanh`` of the Gaussian sample (deterministic: of the mean) instead of
    ``clip(x, -3, 3) / 3``. Samples, log-probabilities and entropies stay those of the
    Gaussian before the squash (the SAC update adds the tanh correction); discrete
    branches are ActionModel's."""

    #: Bounds of the state-dependent log std (ML-Agents' and the SAC paper's).
    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def _make_log_std(self):
        head = keras.layers.Dense(self.continuous_size, kernel_initializer=kaiming_normal(0.2),
                                  name="log_std")
        head.build((None, self.encoding_size))
        return head

    def _gaussian(self, encoding: tf.Tensor):
        mean = self.mean(encoding)
        log_std = tf.clip_by_value(self.log_std(encoding), self.LOG_STD_MIN, self.LOG_STD_MAX)
        return mean, log_std

    @staticmethod
    def env_actions(raw_continuous: tf.Tensor) -> tf.Tensor:
        """What the env receives (and ONNX exports): ``tanh(x)`` in (-1, 1)."""
        return tf.tanh(raw_continuous)


def _pick(log_softmax: tf.Tensor, action: tf.Tensor) -> tf.Tensor:
    """log_softmax[b, action[b]]; a one-hot product rather than a batched gather, which is
    simpler to export and to differentiate."""
    depth = log_softmax.shape[-1]
    return tf.reduce_sum(tf.one_hot(action, depth, dtype=log_softmax.dtype) * log_softmax,
                         axis=-1)


def _categorical_entropy(log_softmax: tf.Tensor) -> tf.Tensor:
    """-sum p log p over the last axis; masked entries have p = 0 and a finite log p
    (about -1e8), so they add exactly 0."""
    return -tf.reduce_sum(tf.exp(log_softmax) * log_softmax, axis=-1)
