"""GAIL: loss terms against hand-computed values, the discriminator against the demos,
VAIL's dual update, and the reward signal inside the PPO trainer."""
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs import ActionTuple, make
from tftrainers.processing.demonstrations import DemonstrationError
from tftrainers.rewards import RewardBatch, create_reward_provider
from tftrainers.rewards.gail import (EPSILON, VAIL_ALPHA, VAIL_INFORMATION, Z_SIZE,
                                     discriminator_loss, gail_reward, gradient_penalty, vail_kl)
from tftrainers.settings import GAILSettings, RunOptions

from trainers.helpers import drive, make_trainer, trainer_settings, variables
from .test_reward_signals import Recorder

DEMOS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "demos")
GRIDWORLD_DEMO = os.path.join(DEMOS, "GridWorld.demo")


def gail_settings(**kw):
    signal = {"demo_path": GRIDWORLD_DEMO, "network_settings": {"hidden_units": 32}, **kw}
    options = RunOptions.from_dict({"behaviors": {"B": {"reward_signals": {"gail": signal}}}})
    return options.settings_for("B").reward_signals["gail"]


def test_discriminator_loss_is_the_binary_cross_entropy_over_real_steps():
    expert = tf.constant([0.9, 0.5])
    policy = tf.constant([0.2, 0.6, 0.99])
    mask = tf.constant([1.0, 1.0, 0.0])  # the third policy step is padding
    expected = -((math.log(0.9 + EPSILON) + math.log(0.5 + EPSILON)) / 2 +
                 (math.log(0.8 + EPSILON) + math.log(0.4 + EPSILON)) / 2)
    assert float(discriminator_loss(expert, policy, mask)) == pytest.approx(expected, rel=1e-6)
    # A perfect discriminator's loss is 0 (up to eps), a coin's is 2 log 2.
    assert float(discriminator_loss(tf.ones(2), tf.zeros(2), tf.ones(2))) == pytest.approx(
        0.0, abs=1e-6)
    assert float(discriminator_loss(tf.fill([2], 0.5), tf.fill([2], 0.5), tf.ones(2))) == \
        pytest.approx(2 * math.log(2), rel=1e-6)


def test_gradient_penalty_is_the_squared_distance_of_the_norm_from_one():
    # One step's gradient (3, 4) has norm 5 -> (5 - 1)^2 = 16; a zero gradient -> ~1.
    one = gradient_penalty([tf.constant([[3.0, 4.0], [0.0, 0.0]])])
    assert float(one) == pytest.approx((16.0 + (math.sqrt(EPSILON) - 1) ** 2) / 2, rel=1e-5)
    # The norm is over every input of a step together (vector 3 and image 4 -> 5).
    two = gradient_penalty([tf.constant([[3.0]]), tf.constant([[[[4.0]]]])])
    assert float(two) == pytest.approx(16.0, rel=1e-5)
    # A unit gradient costs nothing.
    assert float(gradient_penalty([tf.constant([[0.6, 0.8]])])) == pytest.approx(0.0, abs=1e-6)


def test_reward_is_minus_log_of_one_minus_d():
    np.testing.assert_allclose(gail_reward(np.array([0.0, 0.5, 0.75])),
                               [0.0, math.log(2.0), math.log(4.0)], rtol=1e-5)
    assert np.isfinite(gail_reward(np.array([1.0]))).all()  # capped by eps, not infinite


def test_vail_kl_is_zero_for_a_standard_normal_and_grows_with_the_mean():
    sigma = tf.ones([4])
    zeros = tf.zeros([2, 4])
    assert float(vail_kl(sigma, zeros, zeros)) == pytest.approx(0.0, abs=1e-6)
    # Each dimension: -(1 + 0 - 0.5 * 1 - 0 - 1) = 0.5; four dimensions.
    assert float(vail_kl(sigma, tf.ones([2, 4]), zeros)) == pytest.approx(2.0, rel=1e-6)


def random_steps(env_name, demo_spec, steps, seed=1):
    """Steps of a uniformly random policy in ``env_name``, as a RewardBatch."""
    env = make(env_name, seed=seed)
    env.reset()
    name = next(iter(env.behavior_specs))
    rng = np.random.default_rng(seed)
    obs, actions = [], []
    while sum(len(o) for o in obs) < steps:
        decision, _ = env.get_steps(name)
        n = len(decision)
        if n:
            branch = demo_spec.action_spec.discrete_branches[0]
            action = rng.integers(0, branch, size=(n, 1)).astype(np.int32)
            obs.append(decision.obs[0])
            actions.append(action)
            env.set_actions(name, ActionTuple(np.zeros((n, 0), np.float32), action))
        env.step()
    obs = np.concatenate(obs)[:steps]
    return RewardBatch(obs=(obs,), next_obs=(obs,),
                       continuous_action=np.zeros((steps, 0), np.float32),
                       discrete_action=np.concatenate(actions)[:steps],
                       environment_reward=np.zeros(steps, np.float32),
                       done=np.zeros(steps, np.float32), mask=np.ones(steps, np.float32))


def expert_steps(provider):
    demos = provider.demos
    n = len(demos)
    return RewardBatch(obs=tuple(demos.obs), next_obs=tuple(demos.next_obs),
                       # Demo actions are env scale; the provider takes raw samples and
                       # scales them: x3 makes the round trip exact (none here).
                       continuous_action=np.asarray(demos.continuous_actions) * 3.0,
                       discrete_action=demos.discrete_actions,
                       environment_reward=demos.reward,
                       done=(demos.done & ~demos.interrupted).astype(np.float32),
                       mask=np.ones(n, np.float32))


@pytest.mark.parametrize("use_actions,use_vail", [(True, False), (False, True)])
def test_the_discriminator_separates_expert_from_random_steps(use_actions, use_vail):
    keras.utils.set_random_seed(0)  # the discriminator's initial weights
    provider = create_reward_provider(
        "gail", make("builtin:GridWorld").behavior_specs["GridWorld"],
        # absorbing_state off: rewards as ML-Agents' -log(1 - D), not measured from the
        # absorbing state's, so that they compare as ratios (test_gail_absorbing.py has it).
        gail_settings(use_actions=use_actions, use_vail=use_vail, learning_rate=1e-3,
                      absorbing_state=False), seed=3)
    random = random_steps("builtin:GridWorld", provider.spec, 4000)
    expert = expert_steps(provider)
    before = provider.evaluate(random).mean(), provider.evaluate(expert).mean()
    step = tf.function(provider.update_step, autograph=False)
    for i in range(300):
        rows = np.random.default_rng(i).integers(0, 4000, 128)
        stats = step(tf.nest.map_structure(lambda x: tf.constant(x[rows]), random))
    random_reward, expert_reward = provider.evaluate(random).mean(), provider.evaluate(expert).mean()
    # Untrained, both score about log 2 (D = 0.5). Random play visits many of the expert's
    # states and the gradient penalty keeps D smooth, so the gap opens steadily, not at once.
    assert before[0] == pytest.approx(math.log(2), abs=0.2)
    assert before[1] == pytest.approx(math.log(2), abs=0.2)
    # VAIL's bottleneck (and its noise in training) slows the split down.
    margin = 1.15 if use_vail else 1.3
    assert expert_reward > margin * random_reward and random_reward < before[0], (
        before, random_reward, expert_reward)
    assert float(stats["Policy/GAIL Expert Estimate"]) > float(
        stats["Policy/GAIL Policy Estimate"])
    if use_vail:
        assert float(stats["Policy/GAIL Beta"]) >= 0.0
        assert provider.network.z_mu.units == Z_SIZE


@pytest.mark.parametrize("use_next_obs", [False, True])
def test_use_next_obs_tells_steps_apart_by_where_they_led(use_next_obs):
    # "Policy" steps are the expert's own observations, actions and done flags, each led to
    # another step's next observation: only a discriminator that sees it can tell them apart.
    keras.utils.set_random_seed(0)
    provider = create_reward_provider(
        "gail", make("builtin:GridWorld").behavior_specs["GridWorld"],
        gail_settings(use_actions=True, use_next_obs=use_next_obs, learning_rate=3e-3,
                      network_settings={"hidden_units": 64}), seed=3)
    assert provider.needs_next_obs is use_next_obs
    expert = expert_steps(provider)
    n = len(provider.demos)
    shuffled = np.random.default_rng(5).permutation(n)
    led_elsewhere = expert._replace(next_obs=tuple(o[shuffled] for o in expert.next_obs))
    step = tf.function(provider.update_step, autograph=False)
    for i in range(600):
        rows = np.random.default_rng(i).integers(0, n, 128)
        step(tf.nest.map_structure(lambda x: tf.constant(x[rows]), led_elsewhere))
    expert_reward = provider.evaluate(expert)
    other_reward = provider.evaluate(led_elsewhere)
    if use_next_obs:  # seed 0: about 1.76 against 0.20 (untrained: both log 2)
        assert expert_reward.mean() > 2.0 * other_reward.mean(), (expert_reward.mean(),
                                                                   other_reward.mean())
    else:  # the same inputs, so the same rewards, however long it trains
        np.testing.assert_array_equal(expert_reward, other_reward)


def test_vail_beta_takes_the_dual_step_and_never_goes_below_zero():
    provider = create_reward_provider(
        "gail", make("builtin:GridWorld").behavior_specs["GridWorld"],
        gail_settings(use_vail=True), seed=0)
    batch = tf.nest.map_structure(tf.constant, random_steps("builtin:GridWorld",
                                                            provider.spec, 64))
    stats = provider.update_step(batch)
    kl = float(stats["Losses/GAIL KL Loss"])
    assert float(stats["Policy/GAIL Beta"]) == pytest.approx(
        max(0.0, VAIL_ALPHA * (kl - VAIL_INFORMATION)), rel=1e-5, abs=1e-9)
    provider.network.beta.assign(0.0)
    provider.network.z_mu.kernel.assign(tf.zeros_like(provider.network.z_mu.kernel))
    provider.network.z_mu.bias.assign(tf.zeros_like(provider.network.z_mu.bias))
    stats = provider.update_step(batch)  # KL ~0 < 0.5: beta would go negative
    assert float(stats["Policy/GAIL Beta"]) == 0.0


def test_demonstrations_that_do_not_fit_the_behavior_are_named():
    spec = make("builtin:Basic").behavior_specs["Basic"]
    with pytest.raises(DemonstrationError, match=r"GridWorld\.demo: observation 0 is"):
        create_reward_provider("gail", spec, gail_settings(), seed=0)


@pytest.mark.parametrize("use_next_obs", [False, True])
def test_gail_in_the_trainer_stats_one_compiled_update_and_checkpoints(tmp_path, use_next_obs):
    env = make("builtin:GridWorld", seed=0, num_areas=4)
    env.reset()
    recorder = Recorder()
    signals = {"gail": {"demo_path": GRIDWORLD_DEMO, "use_actions": True,
                        "use_next_obs": use_next_obs, "network_settings": {"hidden_units": 16}}}
    settings = trainer_settings("GridWorld", reward_signals=signals)
    trainer = make_trainer(tmp_path, env, "GridWorld", settings, writers=[recorder])
    drive(env, trainer, 200)
    trainer.save()
    assert trainer.updates >= 3
    assert {"Policy/GAIL Reward", "Policy/GAIL Value Estimate", "Losses/GAIL Loss",
            "Policy/GAIL Policy Estimate", "Policy/GAIL Expert Estimate"} <= recorder.names
    assert trainer.optimizer.update_fn.tracing_count == 1  # the discriminator in the update
    saved = variables(trainer)
    names = [n for n, _ in saved]
    assert any(n.startswith("gail_network/") for n in names)
    assert any(n.startswith("gail_optimizer/") and "iteration" in n and v > 0 for n, v in saved)
    assert any(n.startswith("gail_draws/") and v > 0 for n, v in saved)
    second = make_trainer(tmp_path, env, "GridWorld", settings, seed=4)
    second.restore_latest()
    for (name, a), (_, b) in zip(saved, variables(second)):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_settings_defaults_are_ml_agents():
    s = GAILSettings(demo_path="x.demo")
    assert (s.strength, s.gamma, s.learning_rate, s.use_actions, s.use_vail) == (
        1.0, 0.99, 3e-4, False, False)
    assert s.use_next_obs is False  # the tftrainers extension is off: ML-Agents' inputs
    assert (s.network_settings.hidden_units, s.network_settings.num_layers) == (128, 2)
