"""Known answers for each PPO loss term, the schedules and the minibatch index."""
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.trainers.ppo.optimizer import masked_mean, policy_loss, value_loss
from tftrainers.trainers.schedules import decayed_value


def t(x):
    return tf.constant(x, tf.float32)


def test_masked_mean_ignores_padding():
    assert float(masked_mean(t([1.0, 3.0, 100.0]), t([1, 1, 0]))) == pytest.approx(2.0)
    assert float(masked_mean(t([5.0]), t([0.0]))) == 0.0  # no real step: no NaN


def test_policy_loss_known_answer():
    # Two steps, two action dimensions. Ratios: exp(0.5)=1.6487 (clipped to 1.2 when A>0),
    # exp(-0.5)=0.6065 (clipped to 0.8), 1 and 1.
    log_probs = t([[0.5, -0.5], [0.0, 0.0]])
    old = t([[0.0, 0.0], [0.0, 0.0]])
    adv = t([2.0, -1.0])
    loss = float(policy_loss(log_probs, old, adv, t(0.2), t([1, 1])))
    r1, r2 = np.exp(0.5), np.exp(-0.5)
    step1 = min(r1 * 2, 1.2 * 2) + min(r2 * 2, 0.8 * 2)  # = 2.4 + 1.2131
    step2 = -1.0 + -1.0
    # ML-Agents' masked mean runs over the steps and the dimensions: 4 terms here.
    assert loss == pytest.approx(-(step1 + step2) / 4, rel=1e-5)


def test_policy_loss_negative_advantage_takes_the_pessimistic_side():
    # A < 0 and ratio 0.5: min(0.5 * -1, 0.8 * -1) = -0.8, so the loss is 0.8.
    loss = policy_loss(t([[np.log(0.5)]]), t([[0.0]]), t([-1.0]), t(0.2), t([1.0]))
    assert float(loss) == pytest.approx(0.8, rel=1e-5)


def test_value_loss_clipped_and_unclipped():
    values, old, returns = [t([1.0, 0.0])], [t([0.0, 0.0])], [t([2.0, 0.1])]
    # Step 1: unclipped (2-1)^2 = 1; clipped value 0.2 -> (2-0.2)^2 = 3.24; max = 3.24.
    # Step 2: (0.1-0)^2 = 0.01 both ways.
    clipped = float(value_loss(values, old, returns, t(0.2), t([1, 1])))
    assert clipped == pytest.approx((3.24 + 0.01) / 2, rel=1e-5)
    plain = float(value_loss(values, old, returns, t(0.2), t([1, 1]), clip=False))
    assert plain == pytest.approx((1.0 + 0.01) / 2, rel=1e-5)


def test_value_loss_averages_streams():
    loss = value_loss([t([1.0]), t([0.0])], [t([1.0]), t([0.0])], [t([2.0]), t([2.0])],
                      t(10.0), t([1.0]))
    assert float(loss) == pytest.approx((1.0 + 4.0) / 2)


def test_schedules_decay_linearly_to_ml_agents_floors():
    assert decayed_value("linear", 3e-4, 1e-10, 0, 1000) == pytest.approx(3e-4)
    assert decayed_value("linear", 3e-4, 1e-10, 500, 1000) == pytest.approx(1.5e-4 + 0.5e-10)
    assert decayed_value("linear", 0.2, 0.1, 1000, 1000) == pytest.approx(0.1)
    assert decayed_value("linear", 0.2, 0.1, 5000, 1000) == pytest.approx(0.1)
    assert decayed_value("constant", 0.2, 0.1, 900, 1000) == 0.2
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        decayed_value("cosine", 0.2, 0.1, 1, 2)


def test_advantages_are_normalised_over_real_steps_with_a_floor_on_the_scale():
    from tftrainers.trainers.on_policy import ADVANTAGE_SCALE_FLOOR, normalized_advantages
    adv = np.array([1.0, 2.0, 3.0, 50.0], np.float32)
    mask = np.array([1, 1, 1, 0], np.float32)
    std = np.std([1.0, 2.0, 3.0])
    np.testing.assert_allclose(normalized_advantages(adv, mask),
                               [-1 / std, 0.0, 1 / std, 0.0], rtol=1e-5)
    # A solved task: the advantages are float rounding noise. Scaled by the floor, not
    # blown up to unit size.
    noise = np.array([1e-8, -1e-8, 2e-8, -2e-8], np.float32)
    out = normalized_advantages(noise, np.ones(4, np.float32))
    np.testing.assert_allclose(out, noise / ADVANTAGE_SCALE_FLOOR, rtol=1e-4)
    assert np.abs(out).max() < 1e-3
    assert not normalized_advantages(adv, np.zeros(4, np.float32)).any()  # no real step


def test_advantage_scale_floor_keeps_a_solved_buffers_rare_mistake_in_reward_units():
    """A solved buffer: every episode as the critic predicted but one wrong goal (-1.1 at its
    goal step). Divided by the buffer's spread that one step becomes a ~30-sigma advantage;
    with a floor of 0.5 (hyperparameters.advantage_scale_floor) it stays -1.1 / 0.5."""
    from tftrainers.trainers.on_policy import normalized_advantages
    adv = np.zeros(1024, np.float32)
    adv[7] = -1.1
    mask = np.ones(1024, np.float32)
    spread = normalized_advantages(adv, mask)
    assert spread[7] < -30
    floored = normalized_advantages(adv, mask, 0.5)
    np.testing.assert_allclose(floored[7], (-1.1 + 1.1 / 1024) / 0.5, rtol=1e-5)
    # Real learning signal (a spread above the floor) is scaled as before.
    wide = np.random.default_rng(0).normal(0, 2.0, 1024).astype(np.float32)
    np.testing.assert_allclose(normalized_advantages(wide, mask, 0.5),
                               normalized_advantages(wide, mask), rtol=1e-6)


def test_ratio_diagnostics_known_answer():
    from tftrainers.trainers.ppo.optimizer import ratio_diagnostics
    # Step 1: ratios e^0.5 = 1.65 and e^-0.5 = 0.61, both outside [0.8, 1.2]; the whole
    # action's ratio is e^0 = 1, so it adds nothing to the KL. Step 2: ratios e^0.1 = 1.105
    # and 1, inside; whole-action log ratio 0.1, KL term e^0.1 - 1 - 0.1. Step 3 is padding.
    log_probs = t([[0.5, -0.5], [0.1, 0.0], [9.0, 9.0]])
    old = t([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    kl, clip = ratio_diagnostics(log_probs, old, t(0.2), t([1, 1, 0]))
    assert float(kl) == pytest.approx((np.exp(0.1) - 1.1) / 2, rel=1e-4)
    assert float(clip) == pytest.approx(0.5)
    kl, clip = ratio_diagnostics(log_probs, old, t(0.2), t([1, 0, 0]))
    assert float(kl) == pytest.approx(0.0, abs=1e-7) and float(clip) == pytest.approx(1.0)
    # A ratio of 1 everywhere: nothing clipped, no divergence.
    kl, clip = ratio_diagnostics(old, old, t(0.2), t([1, 1, 1]))
    assert float(kl) == 0.0 and float(clip) == 0.0


def test_explained_variance_known_answer():
    from tftrainers.trainers.ppo.optimizer import explained_variance
    returns, mask = t([1.0, 2.0, 3.0, 4.0, 50.0]), t([1, 1, 1, 1, 0])  # the 50 is padding
    assert float(explained_variance([returns], [returns], mask)) == pytest.approx(1.0)
    assert float(explained_variance([t([2.5] * 5)], [returns], mask)) == pytest.approx(0.0)
    # G - V = [0, 0, 0, -1]: variance 0.1875 against Var(G) = 1.25 -> 1 - 0.15.
    values = t([1.0, 2.0, 3.0, 5.0, 0.0])
    assert float(explained_variance([values], [returns], mask)) == pytest.approx(0.85, rel=1e-5)
    # A stream whose returns never vary counts as 0; streams are averaged.
    flat = t([1.0, 1.0, 1.0, 1.0, 1.0])
    both = explained_variance([values, t([0.0] * 5)], [returns, flat], mask)
    assert float(both) == pytest.approx(0.425, rel=1e-5)
