"""Known answers of the behavioral cloning losses (hand-computed values)."""
import math

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.trainers.cloning_loss import (StudentDistribution, TeacherActions, agreement,
                                              cloning_loss, continuous_cloning_loss,
                                              discrete_cloning_loss)


def _log_softmax(row):
    row = np.asarray(row, np.float64)
    return row - np.log(np.exp(row - row.max()).sum()) - row.max()


def test_discrete_cross_entropy_per_branch_averaged():
    logits = [tf.constant([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]), tf.constant([[2.0, -1.0],
                                                                           [0.5, 0.5]])]
    actions = tf.constant([[2, 1], [0, 0]])
    loss = discrete_cloning_loss(logits, None, actions, tf.ones(2))
    b0 = -(_log_softmax([1, 2, 3])[2] + math.log(1 / 3)) / 2
    b1 = -(_log_softmax([2, -1])[1] + math.log(0.5)) / 2
    assert float(loss) == pytest.approx((b0 + b1) / 2, rel=1e-5)


def test_masked_actions_leave_the_softmax_and_masked_labels_count_nothing():
    logits = [tf.constant([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])]
    masks = tf.constant([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # action 2 masked
    # Row 0: label 1 among the allowed {0, 1}; row 1: the masked action 2 as label.
    loss = discrete_cloning_loss(logits, masks, tf.constant([[1], [2]]), tf.ones(2))
    assert float(loss) == pytest.approx(-_log_softmax([1, 2])[1], rel=1e-5)
    # Padding rows (loss mask 0) count nothing either.
    loss = discrete_cloning_loss(logits, masks, tf.constant([[1], [0]]), tf.constant([1.0, 0.0]))
    assert float(loss) == pytest.approx(-_log_softmax([1, 2])[1], rel=1e-5)


def test_continuous_losses_against_the_pre_clip_teacher_action():
    mean = tf.constant([[0.0, 1.5], [3.0, -3.0]])
    log_std = tf.constant([[0.0, math.log(2.0)], [0.0, math.log(2.0)]])
    teacher = tf.constant([[0.5, 0.5], [1.0, -0.5]])  # pre-clip targets 1.5, 1.5, 3, -1.5
    mask = tf.ones(2)
    mse = continuous_cloning_loss(mean, log_std, teacher, mask, "mse")
    assert float(mse) == pytest.approx((1.5 ** 2 + 0 + 0 + 1.5 ** 2) / 4, rel=1e-6)

    def nll(x, m, s):
        return 0.5 * ((x - m) / s) ** 2 + math.log(s) + 0.5 * math.log(2 * math.pi)
    expected = (nll(1.5, 0, 1) + nll(1.5, 1.5, 2) + nll(3, 3, 1) + nll(-1.5, -3, 2)) / 4
    ll = continuous_cloning_loss(mean, log_std, teacher, mask, "log_likelihood")
    assert float(ll) == pytest.approx(expected, rel=1e-5)
    noise = tf.constant([[1.0, 0.5], [0.0, -1.0]])  # samples 1, 2.5, 3, -5
    sampled = continuous_cloning_loss(mean, log_std, teacher, mask, "sampled_mse", noise)
    assert float(sampled) == pytest.approx((0.25 + 1.0 + 0.0 + 3.5 ** 2) / 4, rel=1e-6)
    # Padding does not count.
    half = continuous_cloning_loss(mean, log_std, teacher, tf.constant([1.0, 0.0]), "mse")
    assert float(half) == pytest.approx(1.5 ** 2 / 2, rel=1e-6)
    with pytest.raises(ValueError, match="allowed log_likelihood, mse, sampled_mse"):
        continuous_cloning_loss(mean, log_std, teacher, mask, "huber")


def test_hybrid_loss_adds_both_parts_and_agreement():
    student = StudentDistribution(
        mean=tf.constant([[3.0], [0.0]]), log_std=tf.zeros((2, 1)),
        logits=[tf.constant([[0.0, 5.0], [5.0, 0.0]])], masks=tf.constant([[1.0, 1.0],
                                                                          [0.0, 1.0]]))
    teacher = TeacherActions(tf.constant([[1.0], [0.5]]), tf.constant([[1], [1]]))
    mask = tf.ones(2)
    total = cloning_loss(student, teacher, mask, continuous="mse")
    expected_c = (0.0 + 1.5 ** 2) / 2
    # Row 1: action 0 is masked, so the only allowed action (the label) has p = 1.
    expected_d = (-_log_softmax([0, 5])[1] + 0.0) / 2
    assert float(total) == pytest.approx(expected_c + expected_d, rel=1e-5)
    same, difference = agreement(student, teacher, mask)
    # Row 0 argmax 1 = label; row 1 the mask turns argmax 0 into 1 = label.
    assert float(same) == pytest.approx(1.0)
    assert float(difference) == pytest.approx((0.0 + 0.5) / 2)


def test_gradient_moves_the_student_towards_the_teacher():
    logits = tf.Variable([[0.0, 0.0, 0.0]])
    with tf.GradientTape() as tape:
        loss = discrete_cloning_loss([logits], None, tf.constant([[1]]), tf.ones(1))
    grad = tape.gradient(loss, logits).numpy()[0]
    # d/dz of -log softmax(z)[1] = softmax(z) - onehot(1)
    np.testing.assert_allclose(grad, [1 / 3, 1 / 3 - 1, 1 / 3], rtol=1e-5)
