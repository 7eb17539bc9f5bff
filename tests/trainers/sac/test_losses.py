"""Known answers of SAC's loss terms (hand-computed)."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.trainers.sac import losses as L


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_q_target_zeroes_the_bootstrap_only_on_real_ends():
    r = tf.constant([1.0, 0.5, -1.0])
    done = tf.constant([0.0, 1.0, 0.0])  # an interrupted step arrives with done 0
    v = tf.constant([2.0, 3.0, 4.0])
    close(L.q_target(r, done, v, 0.9, use_done=True), [1 + 0.9 * 2, 0.5, -1 + 0.9 * 4])
    # curiosity / RND streams bootstrap through ends
    close(L.q_target(r, done, v, 0.9, use_done=False), [2.8, 0.5 + 2.7, 2.6])


def test_taken_and_expected_q_per_branch():
    # two branches of sizes 2 and 3
    q = tf.constant([[1.0, 2.0, 10.0, 20.0, 30.0]])
    close(L.taken_q(q, tf.constant([[1, 2]]), (2, 3)), [(2.0 + 30.0) / 2])
    probs = [tf.constant([[0.25, 0.75]]), tf.constant([[0.5, 0.5, 0.0]])]
    close(L.expected_q(q, probs, (2, 3)), [(0.25 + 1.5 + 5.0 + 10.0) / 2])
    close(L.taken_q(tf.constant([[4.0]]), tf.zeros([1, 0], tf.int32), ()), [4.0])


def test_squashed_log_prob_is_the_density_of_tanh_of_a_gaussian():
    u = tf.constant([[0.3, -1.2]])
    mean, log_std = tf.constant([[0.1, -1.0]]), tf.constant([[math.log(0.5), 0.0]])
    expected = 0.0
    for x, m, s in [(0.3, 0.1, 0.5), (-1.2, -1.0, 1.0)]:
        gauss = -0.5 * ((x - m) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi)
        expected += gauss - math.log(1 - math.tanh(x) ** 2 + 1e-6)
    close(L.squashed_log_prob(u, mean, log_std), [expected])
    # and it integrates to 1 over the action a = tanh(u) in (-1, 1)
    a = np.linspace(-0.9999, 0.9999, 200001)
    uu = np.arctanh(a)[:, None].astype(np.float32)
    density = np.exp(L.squashed_log_prob(tf.constant(uu), tf.zeros_like(uu),
                                         tf.zeros_like(uu)).numpy())
    assert abs(np.trapezoid(density, a) - 1.0) < 2e-3


def test_value_target_is_min_of_twin_q_minus_alpha_log_pi():
    # continuous: alpha 0.5, log pi = -1.5 -> soft value = min(3, 2) - 0.5 * -1.5 = 2.75
    ent = L.entropy_term(tf.constant([-1.5]), tf.constant(0.5), [], [], [])
    close(L.soft_value(tf.constant([3.0]), tf.constant([2.0]), ent), [2.75])
    # discrete, two branches with alphas 0.1 and 0.2:
    probs = [tf.constant([[0.5, 0.5]]), tf.constant([[1.0, 0.0, 0.0]])]
    logs = [tf.math.log(p + 1e-30) for p in probs]
    ent = L.entropy_term(None, tf.constant(1.0), probs, logs, [tf.constant(0.1),
                                                                tf.constant(0.2)])
    close(ent, [(0.1 * math.log(0.5) + 0.0) / 2])
    close(L.soft_value(tf.constant([1.0]), tf.constant([4.0]), ent),
          [1.0 - 0.05 * math.log(0.5)])
    # hybrid: both parts, each with its own sign-consistent term (not ML-Agents' 1.1 sign)
    ent = L.entropy_term(tf.constant([2.0]), tf.constant(0.5), probs[:1], logs[:1],
                         [tf.constant(0.1)])
    close(ent, [1.0 + 0.1 * math.log(0.5)])


def test_q_value_and_policy_losses():
    close(L.q_loss(tf.constant([1.0, 3.0]), tf.constant([2.0, 1.0])), 0.5 * (1 + 4) / 2)
    close(L.value_loss(tf.constant([0.0]), tf.constant([2.0])), 2.0)
    close(L.policy_loss(tf.constant([1.0, 2.0]), tf.constant([0.5, -0.5])), (-0.5 - 2.5) / 2)
    # the target is stopped: no gradient reaches it
    target = tf.Variable([2.0])
    with tf.GradientTape() as tape:
        loss = L.q_loss(tf.constant([1.0]), target)
    assert tape.gradient(loss, target) is None


def test_entropy_coefficient_loss_and_targets():
    assert L.continuous_target_entropy(2) == -2.0
    close(L.discrete_target_entropies((3, 2)), [0.2 * math.log(3), 0.2 * math.log(2)])
    log_alpha = tf.Variable(math.log(0.5))
    entropy = tf.constant([1.0, 3.0])  # mean 2, target -2: entropy too high -> alpha falls
    with tf.GradientTape() as tape:
        loss = L.entropy_coefficient_loss(log_alpha, entropy, -2.0)
    close(loss, math.log(0.5) * 4.0)
    assert tape.gradient(loss, log_alpha).numpy() == pytest.approx(4.0)  # descent lowers it
    with tf.GradientTape() as tape:
        loss = L.entropy_coefficient_loss(log_alpha, tf.constant([0.1]), 0.6)
    assert tape.gradient(loss, log_alpha).numpy() == pytest.approx(-0.5)  # below: rises


def test_soft_update_with_tau():
    target, source = tf.Variable([0.0, 10.0]), tf.Variable([1.0, 0.0])
    L.soft_update([target], [source], 0.1)
    close(target, [0.1, 9.0])
    L.soft_update([target], [source], 1.0)
    close(target, [1.0, 0.0])
