"""Curiosity (ICM) and RND reward providers on their own: known answers and novelty."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from tftrainers.rewards import RewardBatch, create_reward_provider
from tftrainers.rewards.curiosity import (capped_reward, curiosity_loss, forward_errors,
                                          inverse_loss, onehot_branches)
from tftrainers.rewards.rnd import distillation_errors
from tftrainers.settings import CuriositySettings, NetworkSettings, RNDSettings

SPEC = BehaviorSpec((ObservationSpec((6,), "v"),), ActionSpec.create_discrete([3, 2]))
HYBRID = BehaviorSpec((ObservationSpec((6,), "v"),), ActionSpec(2, (3,)))


def t(x):
    return tf.constant(x, tf.float32)


def batch(obs, next_obs, discrete, continuous=None):
    n = len(obs)
    return RewardBatch(obs=(np.asarray(obs, np.float32),),
                       next_obs=(np.asarray(next_obs, np.float32),),
                       continuous_action=(np.zeros((n, 0), np.float32) if continuous is None
                                          else np.asarray(continuous, np.float32)),
                       discrete_action=np.asarray(discrete, np.int32),
                       environment_reward=np.zeros(n, np.float32),
                       done=np.zeros(n, np.float32), mask=np.ones(n, np.float32))


def tensors(b):
    return tf.nest.map_structure(tf.convert_to_tensor, b)


def curiosity(spec=SPEC, strength=0.02, **kw):
    settings = CuriositySettings(strength=strength,
                                 network_settings=NetworkSettings(hidden_units=16, num_layers=1),
                                 **kw)
    return create_reward_provider("curiosity", spec, settings)


def rnd(spec=SPEC, **kw):
    settings = RNDSettings(network_settings=NetworkSettings(hidden_units=16, num_layers=2), **kw)
    return create_reward_provider("rnd", spec, settings)


# --- known answers ------------------------------------------------------------------------
def test_forward_error_is_half_the_squared_distance():
    assert forward_errors(t([[1.0, 2.0], [0.0, 0.0]]), t([[0.0, 0.0], [0.0, 3.0]])).numpy() \
        == pytest.approx([2.5, 4.5])


def test_inverse_loss_squared_error_plus_cross_entropy_over_real_steps():
    predicted_continuous, continuous = t([[0.5], [9.0]]), t([[1.0], [0.0]])
    probs = t([[0.25, 0.75, 0.2, 0.8], [0.5, 0.5, 0.5, 0.5]])  # branches (2, 2)
    onehot = t([[0, 1, 1, 0], [1, 0, 1, 0]])
    mask = t([1.0, 0.0])  # the second step is padding
    expected = 0.25 + (-np.log(0.75) - np.log(0.2))
    assert float(inverse_loss(predicted_continuous, continuous, probs, onehot, mask)) \
        == pytest.approx(expected, rel=1e-5)


def test_curiosity_loss_weights_forward_and_inverse():
    assert float(curiosity_loss(t(1.0), t(2.0))) == pytest.approx(10 * (0.2 * 1 + 0.8 * 2))


def test_reward_is_capped_at_one_over_strength():
    assert capped_reward(np.array([0.5, 100.0]), 0.02).tolist() == pytest.approx([0.5, 50.0])
    assert capped_reward(np.array([3.0]), 0.0).tolist() == [3.0]  # strength 0: no cap


def test_the_cap_holds_in_the_provider():
    provider = curiosity(strength=0.5)
    b = batch(np.full((4, 6), 50.0), -np.full((4, 6), 50.0), [[0, 0]] * 4)
    provider.update_step(tensors(b))  # rewards are 0 until the first update
    raw = provider.network.errors(tensors(b)).numpy()
    assert raw.min() > 2.0  # far beyond the cap, so the cap is what is returned
    assert provider.evaluate(b).tolist() == [2.0] * 4


def test_onehot_per_branch():
    assert onehot_branches(tf.constant([[2, 0], [0, 1]]), (3, 2)).numpy().tolist() == [
        [0, 0, 1, 1, 0], [1, 0, 0, 0, 1]]


def test_untrained_inverse_model_with_zero_head_predicts_uniform_branches():
    provider = curiosity()
    head = provider.network.inverse_discrete
    head.kernel.assign(tf.zeros_like(head.kernel))
    head.bias.assign(tf.zeros_like(head.bias))
    rng = np.random.default_rng(0)
    b = tensors(batch(rng.normal(size=(5, 6)), rng.normal(size=(5, 6)), [[1, 0]] * 5))
    losses = provider.network.losses(b)
    assert float(losses["inverse"]) == pytest.approx(np.log(3) + np.log(2), rel=1e-5)
    errors = provider.network.errors(b).numpy()
    assert float(losses["forward"]) == pytest.approx(errors.mean(), rel=1e-5)


def test_hybrid_actions_feed_both_inverse_heads():
    provider = curiosity(HYBRID)
    rng = np.random.default_rng(1)
    b = tensors(batch(rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), [[2]] * 4,
                      continuous=rng.normal(size=(4, 2))))
    continuous, probs = provider.network.predict_action(provider.network.encode(b.obs),
                                                        provider.network.encode(b.next_obs))
    assert continuous.shape == (4, 2) and probs.shape == (4, 3)
    assert probs.numpy().sum(axis=1) == pytest.approx([1.0] * 4, rel=1e-5)
    stats = provider.update_step(b)
    assert set(stats) == {"Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss"}


def test_rnd_error_is_the_squared_distance_and_zero_for_a_perfect_predictor():
    assert distillation_errors(t([[1.0, 2.0]]), t([[0.0, 0.0]])).numpy() == pytest.approx([5.0])
    provider = rnd()
    for mine, theirs in zip(provider.predictor.variables, provider.target.variables):
        mine.assign(theirs)
    rng = np.random.default_rng(2)
    b = batch(rng.normal(size=(3, 6)), rng.normal(size=(3, 6)), [[0, 0]] * 3)
    assert provider.evaluate(b) == pytest.approx([0.0] * 3, abs=1e-10)


def test_rnd_trains_the_predictor_only():
    provider = rnd()
    target = [v.numpy().copy() for v in provider.target.variables]
    rng = np.random.default_rng(3)
    provider.update_step(tensors(batch(rng.normal(size=(8, 6)), rng.normal(size=(8, 6)),
                                       [[0, 0]] * 8)))
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(target, provider.target.variables))
    assert int(provider.optimizer.iterations.numpy()) == 1


def test_curiosity_reward_is_zero_until_the_first_update():
    provider = curiosity()
    rng = np.random.default_rng(4)
    b = batch(rng.normal(size=(3, 6)), rng.normal(size=(3, 6)), [[0, 1]] * 3)
    assert provider.evaluate(b).tolist() == [0.0] * 3
    provider.update_step(tensors(b))
    assert (provider.evaluate(b) > 0).all()


# --- novelty ------------------------------------------------------------------------------
@pytest.mark.parametrize("make_provider", [curiosity, rnd], ids=["curiosity", "rnd"])
def test_a_state_seen_over_and_over_loses_its_reward_and_a_new_one_keeps_it(make_provider):
    keras.utils.set_random_seed(0)
    # A faster learning rate than the defaults only shortens the test.
    provider = make_provider(learning_rate=3e-3)
    rng = np.random.default_rng(5)
    seen = batch(np.tile(rng.normal(size=(1, 6)), (32, 1)),
                 np.tile(rng.normal(size=(1, 6)), (32, 1)), [[1, 1]] * 32)
    new = batch(rng.normal(size=(1, 6)) * 2, rng.normal(size=(1, 6)) * 2, [[2, 0]])
    provider.update_step(tensors(seen))
    seen_before, new_before = provider.evaluate(seen)[0], provider.evaluate(new)[0]
    step = tf.function(provider.update_step, jit_compile=True)
    seen_t = tensors(seen)
    for _ in range(300):
        step(seen_t)
    seen_after, new_after = provider.evaluate(seen)[0], provider.evaluate(new)[0]
    assert seen_after < 0.05 * seen_before, (seen_before, seen_after)
    assert new_after > 0.3 * new_before and new_after > 10 * seen_after, (new_before, new_after)


@pytest.mark.parametrize("make_provider", [curiosity, rnd], ids=["curiosity", "rnd"])
def test_visual_and_vector_observations_are_both_encoded(make_provider):
    spec = BehaviorSpec((ObservationSpec((20, 20, 3), "camera", ObservationKind.VISUAL),
                         ObservationSpec((4,), "v")), ActionSpec.create_discrete([3]))
    provider = make_provider(spec)
    rng = np.random.default_rng(6)

    def obs(n):
        return (rng.random((n, 20, 20, 3), np.float32), rng.normal(size=(n, 4)).astype(np.float32))
    b = RewardBatch(obs=obs(5), next_obs=obs(5), continuous_action=np.zeros((5, 0), np.float32),
                    discrete_action=np.zeros((5, 1), np.int32),
                    environment_reward=np.zeros(5, np.float32), done=np.zeros(5, np.float32),
                    mask=np.ones(5, np.float32))
    provider.update_step(tensors(b))
    before = provider.evaluate(b)
    assert before.shape == (5,) and np.isfinite(before).all() and (before > 0).all()
    # A change in the image alone changes the reward: the camera is encoded.
    changed = b._replace(next_obs=(1.0 - b.next_obs[0], b.next_obs[1]))
    assert not np.allclose(provider.evaluate(changed), before)
