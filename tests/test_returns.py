"""Known-answer tests for tftrainers.returns (hand-computed, like SB3's test_gae.py)."""
import numpy as np
import pytest

from tftrainers import returns as R

# The 3-step example used throughout: gamma 0.9, lambd 0.8.
REWARDS = np.array([1.0, 2.0, 3.0], np.float32)
VALUES = np.array([0.5, 1.0, 1.5], np.float32)
GAMMA, LAMBD = 0.9, 0.8


def test_discounted_returns_constant_reward_gamma_one_counts_remaining_steps():
    np.testing.assert_allclose(R.discounted_returns(np.ones(5), 1.0), [5, 4, 3, 2, 1])


def test_discounted_returns_by_hand():
    # G2 = 3, G1 = 2 + 0.9 * 3 = 4.7, G0 = 1 + 0.9 * 4.7 = 5.23
    np.testing.assert_allclose(R.discounted_returns(REWARDS, GAMMA), [5.23, 4.7, 3.0], rtol=1e-6)
    # bootstrap 10: G2 = 3 + 9 = 12, G1 = 2 + 10.8 = 12.8, G0 = 1 + 11.52 = 12.52
    np.testing.assert_allclose(R.discounted_returns(REWARDS, GAMMA, bootstrap_value=10.0),
                               [12.52, 12.8, 12.0], rtol=1e-6)


def test_discounted_returns_float32_and_empty():
    out = R.discounted_returns(np.ones(3, np.float64), 0.5)
    assert out.dtype == np.float32
    assert R.discounted_returns(np.zeros(0), 0.9).shape == (0,)


def test_gae_constant_reward_gamma_one_lambda_one():
    T = 6
    adv = R.gae(np.ones(T), np.zeros(T), next_value=0.0, gamma=1.0, lambd=1.0)
    np.testing.assert_allclose(adv, T - np.arange(T))
    # With a constant value v the advantage is the remaining sum minus v.
    adv = R.gae(np.ones(T), np.full(T, 2.0), next_value=0.0, gamma=1.0, lambd=1.0)
    np.testing.assert_allclose(adv, T - np.arange(T) - 2.0)


def test_gae_by_hand_bootstrap():
    # next_value 2.0 (interrupted / time_horizon cut):
    # delta2 = 3 + 0.9*2.0 - 1.5 = 3.3; delta1 = 2 + 0.9*1.5 - 1.0 = 2.35;
    # delta0 = 1 + 0.9*1.0 - 0.5 = 1.4
    # A2 = 3.3; A1 = 2.35 + 0.72*3.3 = 4.726; A0 = 1.4 + 0.72*4.726 = 4.80272
    adv = R.gae(REWARDS, VALUES, next_value=2.0, gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(adv, [4.80272, 4.726, 3.3], rtol=1e-6)
    assert adv.dtype == np.float32


def test_gae_by_hand_terminal():
    # next_value 0 (the episode really ended): delta2 = 3 - 1.5 = 1.5
    # A2 = 1.5; A1 = 2.35 + 0.72*1.5 = 3.43; A0 = 1.4 + 0.72*3.43 = 3.8696
    adv = R.gae(REWARDS, VALUES, next_value=0.0, gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(adv, [3.8696, 3.43, 1.5], rtol=1e-6)


def test_gae_bootstrap_differs_from_terminal_by_discounted_next_value():
    boot = R.gae(REWARDS, VALUES, 2.0, GAMMA, LAMBD)
    term = R.gae(REWARDS, VALUES, 0.0, GAMMA, LAMBD)
    # next_value enters delta_{T-1} only, then decays by gamma*lambd per step back.
    expected = GAMMA * 2.0 * (GAMMA * LAMBD) ** np.arange(2, -1, -1)
    np.testing.assert_allclose(boot - term, expected, rtol=1e-5)


@pytest.mark.parametrize("next_value", [0.0, 2.0])
def test_gae_lambda_one_is_discounted_return_minus_value(next_value):
    adv = R.gae(REWARDS, VALUES, next_value, GAMMA, 1.0)
    ret = R.discounted_returns(REWARDS, GAMMA, bootstrap_value=next_value)
    np.testing.assert_allclose(adv, ret - VALUES, rtol=1e-6)


@pytest.mark.parametrize("next_value", [0.0, 2.0])
def test_gae_lambda_zero_is_one_step_td_error(next_value):
    adv = R.gae(REWARDS, VALUES, next_value, GAMMA, 0.0)
    v_next = np.array([1.0, 1.5, next_value])
    np.testing.assert_allclose(adv, REWARDS + GAMMA * v_next - VALUES, rtol=1e-6)


def test_lambda_returns_by_hand():
    # G2 = 3 + 0.9*(0.2*2 + 0.8*2) = 4.8
    # G1 = 2 + 0.9*(0.2*1.5 + 0.8*4.8) = 5.726
    # G0 = 1 + 0.9*(0.2*1.0 + 0.8*5.726) = 5.30272
    ret = R.lambda_returns(REWARDS, VALUES, next_value=2.0, gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(ret, [5.30272, 5.726, 4.8], rtol=1e-6)
    # Terminal: G2 = 3; G1 = 2 + 0.9*(0.3 + 2.4) = 4.43; G0 = 1 + 0.9*(0.2 + 3.544) = 4.3696
    ret = R.lambda_returns(REWARDS, VALUES, next_value=0.0, gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(ret, [4.3696, 4.43, 3.0], rtol=1e-6)


@pytest.mark.parametrize("next_value", [0.0, 2.0])
def test_lambda_returns_lambda_one_is_bootstrapped_discounted_return(next_value):
    np.testing.assert_allclose(R.lambda_returns(REWARDS, VALUES, next_value, GAMMA, 1.0),
                               R.discounted_returns(REWARDS, GAMMA, next_value), rtol=1e-6)


@pytest.mark.parametrize("next_value", [0.0, 2.0])
def test_lambda_returns_lambda_zero_is_one_step_target(next_value):
    v_next = np.array([1.0, 1.5, next_value])
    np.testing.assert_allclose(R.lambda_returns(REWARDS, VALUES, next_value, GAMMA, 0.0),
                               REWARDS + GAMMA * v_next, rtol=1e-6)


def test_lambda_returns_equal_gae_plus_values():
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=20), rng.normal(size=20)
    np.testing.assert_allclose(R.lambda_returns(r, v, 0.7, 0.99, 0.95),
                               R.gae(r, v, 0.7, 0.99, 0.95) + v.astype(np.float32),
                               rtol=1e-5, atol=1e-5)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="gamma"):
        R.gae(REWARDS, VALUES, 0.0, 1.5, 0.9)
    with pytest.raises(ValueError, match="lambd"):
        R.lambda_returns(REWARDS, VALUES, 0.0, 0.9, -0.1)
    with pytest.raises(ValueError, match="same shape"):
        R.gae(REWARDS, VALUES[:2], 0.0, 0.9, 0.9)
    with pytest.raises(ValueError, match=r"\[T\]"):
        R.discounted_returns(np.ones((2, 2)), 0.9)


# ----------------------------------------------------------------------------- batched


def _random_batch(seed=1):
    rng = np.random.default_rng(seed)
    lengths = np.array([5, 1, 0, 3, 5])
    rewards = [rng.normal(size=n) for n in lengths]
    values = [rng.normal(size=n) for n in lengths]
    boot = rng.normal(size=len(lengths))
    return rewards, values, boot, lengths


def test_pad_and_unpad_batch_round_trip():
    matrix, lengths = R.pad_batch([np.array([1.0, 2.0]), np.array([]), np.array([3.0])])
    np.testing.assert_array_equal(matrix, [[1, 2], [0, 0], [3, 0]])
    np.testing.assert_array_equal(lengths, [2, 0, 1])
    np.testing.assert_array_equal(R.unpad_batch(matrix, lengths), [1, 2, 3])
    assert [len(a) for a in R.split_batch(matrix, lengths)] == [2, 0, 1]


def test_batched_versions_match_single_trajectory_versions():
    rewards, values, boot, lengths = _random_batch()
    r, _ = R.pad_batch(rewards)
    v, _ = R.pad_batch(values)
    # Garbage after each row's length must not leak into the results.
    pad = np.arange(r.shape[1])[None, :] >= lengths[:, None]
    r[pad], v[pad] = 123.0, -77.0
    adv = R.batched_gae(r, v, boot, lengths, gamma=0.95, lambd=0.9)
    lam = R.batched_lambda_returns(r, v, boot, lengths, gamma=0.95, lambd=0.9)
    ret = R.batched_discounted_returns(r, 0.95, boot, lengths)
    for i, n in enumerate(lengths):
        np.testing.assert_allclose(adv[i, :n], R.gae(rewards[i], values[i], boot[i], 0.95, 0.9),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lam[i, :n],
                                   R.lambda_returns(rewards[i], values[i], boot[i], 0.95, 0.9),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ret[i, :n], R.discounted_returns(rewards[i], 0.95, boot[i]),
                                   rtol=1e-5, atol=1e-6)
    for out in (adv, lam, ret):
        assert out.dtype == np.float32
        assert np.all(out[pad] == 0.0)


def test_batched_by_hand_and_full_rows_by_default():
    r = np.stack([REWARDS, REWARDS])
    v = np.stack([VALUES, VALUES])
    adv = R.batched_gae(r, v, [2.0, 0.0], gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(adv, [[4.80272, 4.726, 3.3], [3.8696, 3.43, 1.5]], rtol=1e-6)
    lam = R.batched_lambda_returns(r, v, 2.0, gamma=GAMMA, lambd=LAMBD)
    np.testing.assert_allclose(lam, [[5.30272, 5.726, 4.8]] * 2, rtol=1e-6)


def test_batched_bad_lengths():
    with pytest.raises(ValueError, match="lengths"):
        R.batched_gae(np.zeros((2, 3)), np.zeros((2, 3)), 0.0, [1, 4], gamma=0.9, lambd=0.9)
    with pytest.raises(ValueError, match="values"):
        R.batched_gae(np.zeros((2, 3)), np.zeros((2, 2)), 0.0, gamma=0.9, lambd=0.9)
