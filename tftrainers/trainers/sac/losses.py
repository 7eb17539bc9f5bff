"""SAC's losses as pure functions of tensors (docs/trainers/sac.md#implementation-notes).

The layout is ML-Agents 1.x's: twin Q networks with one head per reward stream, a state
value network V and its Polyak-averaged target (no target Q networks), one learned entropy
coefficient (alpha) per discrete branch and one for all continuous actions::

    y_k      = r_k + gamma_k * (1 - done * use_done_k) * V_target_k(s')      q_target
    Q loss   = 0.5 * mean((Q_i,k(s, a) - y_k)^2), averaged over streams k     q_loss
    soft V   = min(Q1, Q2)(s, a ~ pi) - entropy_term                          soft_value
    V loss   = 0.5 * mean((V_k(s) - stop(soft V_k))^2)                        value_loss
    pi loss  = mean(entropy_term - min(Q1, Q2)(s, a ~ pi)), averaged over k   policy_loss
    entropy_term = alpha_c * sum_d log pi_c(a_d) + mean_b alpha_b sum_a pi_b(a) log pi_b(a)

Discrete actions are not Q inputs: a Q head gives one value per action of every branch, the
Q of the taken actions is the mean over branches of the chosen entries, and the policy's
expected Q is the mean over branches of sum_a pi_b(a) Q_b(a) (ML-Agents' form, exact, no
sampling). Continuous actions enter the Q networks as tanh(u) of the Gaussian sample u.

With memory a minibatch holds whole sequences whose steps past a trajectory's end are
padding: every mean above is then over the real steps only (``mask``; ML-Agents applies its
mask to the Q and V losses after they were already averaged, so padding counts there).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import tensorflow as tf

from tftrainers.networks.action_model import gaussian_log_prob
from tftrainers.rewards import masked_mean

#: Added inside log(1 - tanh(u)^2) so a saturated action keeps a finite log-probability.
SQUASH_EPSILON = 1e-6
#: ML-Agents' scale of a discrete branch's entropy target: 0.2 * ln(branch size).
DISCRETE_TARGET_SCALE = 0.2


def continuous_target_entropy(continuous_size: int) -> float:
    """ML-Agents' entropy target of the continuous actions: -1 per dimension."""
    return -1.0 * float(continuous_size)


def discrete_target_entropies(branches: Sequence[int]) -> list:
    """ML-Agents' entropy target of each discrete branch: 0.2 * ln(branch size)."""
    return [DISCRETE_TARGET_SCALE * math.log(n) for n in branches]


def squashed_log_prob(u: tf.Tensor, mean: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """[B] log density of the action tanh(u) where u ~ N(mean, exp(log_std)^2), summed
    over dimensions: the Gaussian's minus log(1 - tanh(u)^2) (the Jacobian of tanh)."""
    a = tf.tanh(u)
    per_dim = gaussian_log_prob(u, mean, log_std) - tf.math.log(1.0 - tf.square(a)
                                                                + SQUASH_EPSILON)
    return tf.reduce_sum(per_dim, axis=-1)


def q_target(reward: tf.Tensor, done: tf.Tensor, next_value: tf.Tensor, gamma: float,
             use_done: bool) -> tf.Tensor:
    """[B] one stream's Q target r + gamma * (1 - done) * V_target(s').

    ``done`` is 1 only when the episode really ended after the step (an interrupted
    episode bootstraps); ``use_done`` False (curiosity, RND: novelty does not stop when an
    episode does) bootstraps through ends too.
    """
    cont = 1.0 - done if use_done else tf.ones_like(done)
    return reward + gamma * cont * next_value


def taken_q(q: tf.Tensor, discrete: tf.Tensor, branches: Sequence[int]) -> tf.Tensor:
    """[B] Q of the taken actions. ``q``: [B, 1] without discrete actions, else
    [B, sum(branches)] one value per action of every branch; ``discrete`` [B, branches]:
    the mean over branches of the chosen action's value."""
    if not branches:
        return q[:, 0]
    parts = tf.split(q, list(branches), axis=-1)
    picked = [tf.reduce_sum(part * tf.one_hot(discrete[:, i], n, dtype=q.dtype), axis=-1)
              for i, (part, n) in enumerate(zip(parts, branches))]
    return tf.add_n(picked) / float(len(branches))


def expected_q(q: tf.Tensor, probs: Sequence[tf.Tensor], branches: Sequence[int]) -> tf.Tensor:
    """[B] the policy's expected Q: ``q[:, 0]`` without discrete actions, else the mean
    over branches of sum_a pi_b(a) Q_b(a) (``probs``: one [B, n_b] per branch)."""
    if not branches:
        return q[:, 0]
    parts = tf.split(q, list(branches), axis=-1)
    return tf.add_n([tf.reduce_sum(p * part, axis=-1) for p, part in zip(probs, parts)]) \
        / float(len(branches))


def entropy_term(log_prob_continuous: Optional[tf.Tensor], alpha_continuous: tf.Tensor,
                 probs: Sequence[tf.Tensor], log_probs: Sequence[tf.Tensor],
                 alpha_discrete: Sequence[tf.Tensor]) -> tf.Tensor:
    """[B] alpha_c * log pi_c (summed over dims) + mean_b alpha_b sum_a pi_b(a) log pi_b(a):
    minus the entropy bonus of the soft value. Either part may be absent (None / no
    branches)."""
    parts = []
    if log_prob_continuous is not None:
        parts.append(alpha_continuous * log_prob_continuous)
    if probs:
        parts.append(tf.add_n([a * tf.reduce_sum(p * lp, axis=-1) for a, p, lp in
                               zip(alpha_discrete, probs, log_probs)]) / float(len(probs)))
    if not parts:
        raise ValueError("a policy needs continuous or discrete actions")
    return tf.add_n(parts)


def soft_value(q1_expected: tf.Tensor, q2_expected: tf.Tensor, entropy: tf.Tensor) -> tf.Tensor:
    """[B] min(Q1, Q2) of the policy's actions minus the entropy term: the value target
    (stopped) and, negated, the policy's objective."""
    return tf.minimum(q1_expected, q2_expected) - entropy


def _mean(x: tf.Tensor, mask: Optional[tf.Tensor]) -> tf.Tensor:
    """Mean over the batch, or over the real steps (``mask`` [B] 1) when given."""
    return tf.reduce_mean(x) if mask is None else masked_mean(x, mask)


def q_loss(q: tf.Tensor, target: tf.Tensor, mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """0.5 * mean squared error of Q against its (stopped) target."""
    return 0.5 * _mean(tf.square(q - tf.stop_gradient(target)), mask)


def value_loss(value: tf.Tensor, target: tf.Tensor,
               mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """0.5 * mean squared error of V(s) against the (stopped) soft value."""
    return 0.5 * _mean(tf.square(value - tf.stop_gradient(target)), mask)


def policy_loss(q_expected: tf.Tensor, entropy: tf.Tensor,
                mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """mean(entropy term - Q of the policy's actions): minimised, it maximises the soft
    value. ``q_expected`` carries the gradient through the policy's actions (continuous)
    and probabilities (discrete); the Q networks are not updated by it."""
    return _mean(entropy - q_expected, mask)


def entropy_coefficient_loss(log_alpha: tf.Tensor, entropy: tf.Tensor, target: float,
                             mask: Optional[tf.Tensor] = None) -> tf.Tensor:
    """mean(log_alpha * stop(entropy - target)): alpha falls while the policy's entropy
    is above its target and rises while below. ``entropy``: [B] per step (continuous:
    -log pi summed over dims; a discrete branch: -sum_a pi(a) log pi(a)). The gradient is
    taken in log alpha (Haarnoja et al. 2018; ML-Agents multiplies by alpha instead, the
    same fixed point)."""
    return _mean(log_alpha * tf.stop_gradient(entropy - target), mask)


def soft_update(targets: Sequence[tf.Variable], sources: Sequence[tf.Variable],
                tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, variable by variable."""
    for target, source in zip(targets, sources):
        target.assign(tau * source + (1.0 - tau) * target)
