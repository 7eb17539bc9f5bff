"""Absorbing-state GAIL: the absorbing steps D learns on (demonstrations and policy
minibatches), the GAIL stream's returns at a real end and at a step-limit end, and GAIL
alone on Basic reaching the far goal without ML-Agents' survival bias."""
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf
import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import ActionTuple, make
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.processing import LogProbs, StreamField, Trajectory, stream_key
from tftrainers.rewards import RewardBatch, create_reward_provider
from tftrainers.rewards.gail import EPSILON, dac_reward, discriminator_loss, expert_steps
from tftrainers.settings import GAILSettings, RunOptions

from trainers.helpers import make_trainer, trainer_settings

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BASIC_DEMO = os.path.join(ROOT, "configs", "demos", "Basic.demo")


def gail_settings(**kw):
    signal = {"demo_path": BASIC_DEMO, "network_settings": {"hidden_units": 16}, **kw}
    options = RunOptions.from_dict({"behaviors": {"B": {"reward_signals": {"gail": signal}}}})
    return options.settings_for("B").reward_signals["gail"]


def basic_provider(**kw):
    spec = make("builtin:Basic").behavior_specs["Basic"]
    return create_reward_provider("gail", spec, gail_settings(**kw), seed=0)


def test_default_is_on_and_off_is_ml_agents():
    assert GAILSettings(demo_path="x.demo").absorbing_state is True
    provider = basic_provider(absorbing_state=False)
    assert provider.absorbing is False and provider.ignore_done is False
    # ML-Agents' inputs: no absorbing flag among D's inputs.
    assert [s.name for s in provider.network.body.observation_specs] == ["position"]


def test_demonstrations_get_one_absorbing_step_after_each_real_end():
    # Two episodes end for real (steps 1 and 4), one is cut by a step limit (step 2).
    demos = SimpleNamespace(
        obs=[np.arange(1, 11, dtype=np.float32).reshape(5, 2)],
        next_obs=[np.full((5, 2), 7.0, np.float32)],
        continuous_actions=np.full((5, 1), 0.5, np.float32),
        discrete_actions=np.array([[2], [1], [0], [1], [2]], np.int32),
        done=np.array([False, True, True, False, True]),
        interrupted=np.array([False, False, True, False, False]))
    steps = expert_steps(demos, next_obs=True, absorbing=True)
    np.testing.assert_array_equal(steps.absorbing, [0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(steps.done, [0, 1, 0, 0, 1, 0, 0])  # real ends only
    np.testing.assert_array_equal(steps.obs[0][:5], demos.obs[0])
    np.testing.assert_array_equal(steps.obs[0][5:], np.zeros((2, 2)))
    np.testing.assert_array_equal(steps.next_obs[0][5:], np.zeros((2, 2)))
    np.testing.assert_array_equal(steps.continuous[5:], np.zeros((2, 1)))
    np.testing.assert_array_equal(steps.discrete[:, 0], [2, 1, 0, 1, 2, -1, -1])
    off = expert_steps(demos, next_obs=False, absorbing=False)
    assert len(off.done) == 5 and not off.absorbing.any() and off.next_obs == []
    # With terminal states (a D of states alone): the states the real ends left the
    # episodes in (their next observations) come before the absorbing steps.
    demos.next_obs = [np.arange(11, 21, dtype=np.float32).reshape(5, 2)]
    terminal = expert_steps(demos, next_obs=False, absorbing=True, terminal=True)
    np.testing.assert_array_equal(terminal.obs[0][5:7], [[13, 14], [19, 20]])
    np.testing.assert_array_equal(terminal.obs[0][7:], np.zeros((2, 2)))
    np.testing.assert_array_equal(terminal.absorbing, [0, 0, 0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(terminal.done, [0, 1, 0, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(terminal.discrete[5:, 0], [-1, -1, -1, -1])
    # From a .demo file: as many terminal and absorbing rows in the provider's expert set
    # as real ends (the terminal ones: the far goal, where the heuristic ends).
    provider = basic_provider()
    demo = provider.demos
    real_ends = int((demo.done & ~demo.interrupted).sum())
    assert real_ends > 0 and provider.terminal_states and provider.needs_next_obs
    flags = provider._expert[-1].numpy()
    assert len(flags) == len(demo) + 2 * real_ends and flags.sum() == real_ends
    assert not flags[:len(demo) + real_ends].any()
    finals = provider._expert[0].numpy()[len(demo):len(demo) + real_ends]
    np.testing.assert_array_equal(finals, demo.next_obs[0][demo.done & ~demo.interrupted])
    assert set(np.argmax(finals, axis=1)) == {17}
    # With actions or next observations D sees the end already: no terminal rows.
    with_actions = basic_provider(use_actions=True)
    assert not with_actions.terminal_states and not with_actions.needs_next_obs
    assert len(with_actions._expert[-1].numpy()) == len(demo) + real_ends
    with_next = basic_provider(use_next_obs=True)
    assert not with_next.terminal_states and with_next.needs_next_obs
    assert len(with_next._expert[-1].numpy()) == len(demo) + real_ends
    # An absorbing step's discrete action one-hots to zeros, its done flag is 0.
    inputs = provider.network.absorbing_inputs(2)
    assert [x.shape.as_list() for x in inputs] == [[2, 20], [2, 1]]
    with_actions = basic_provider(use_actions=True).network.absorbing_inputs(1)
    np.testing.assert_array_equal(with_actions[1].numpy(), [[0, 0, 0, 0]])  # 3 + done
    np.testing.assert_array_equal(with_actions[2].numpy(), [[1]])


def test_policy_minibatch_gets_one_weighted_absorbing_step_for_its_real_ends():
    provider = basic_provider()
    n = 5
    obs = np.eye(20, dtype=np.float32)[[3, 4, 5, 6, 7]]
    batch = RewardBatch(obs=(obs,), next_obs=(obs,),
                        continuous_action=np.zeros((n, 0), np.float32),
                        discrete_action=np.zeros((n, 1), np.int32),
                        environment_reward=np.zeros(n, np.float32),
                        done=np.array([0, 1, 0, 1, 1], np.float32),
                        mask=np.array([1, 1, 1, 1, 0], np.float32))  # the last is padding
    batch = tf.nest.map_structure(tf.constant, batch)
    batch = batch._replace(next_obs=(tf.constant(np.roll(obs, 1, axis=1)),))
    inputs, weights = provider.policy_batch(batch)
    # The steps, the states the real ends left (one row a step, weight done x mask), then
    # the absorbing step weighted by the 2 real ends.
    np.testing.assert_array_equal(weights.numpy(), [1, 1, 1, 1, 0, 0, 1, 0, 1, 0, 2])
    np.testing.assert_array_equal(inputs[0].numpy()[:n], obs)
    np.testing.assert_array_equal(inputs[0].numpy()[n:2 * n], np.roll(obs, 1, axis=1))
    np.testing.assert_array_equal(inputs[0].numpy()[2 * n], np.zeros(20))
    np.testing.assert_array_equal(inputs[1].numpy()[:, 0], [0] * (2 * n) + [1])
    # With actions: the steps and the absorbing step only.
    _, weights = basic_provider(use_actions=True).policy_batch(batch)
    np.testing.assert_array_equal(weights.numpy(), [1, 1, 1, 1, 0, 2])
    weights = tf.constant([1, 1, 1, 1, 0, 2], tf.float32)
    # The loss counts the absorbing step as two policy steps:
    # -(mean log D(expert) + (sum_real log(1 - D(p)) + 2 log(1 - D(abs))) / (4 + 2)).
    policy = tf.constant([0.2, 0.4, 0.6, 0.1, 0.9, 0.7])
    expert = tf.constant([0.8, 0.5])
    expected = -((math.log(0.8 + EPSILON) + math.log(0.5 + EPSILON)) / 2 +
                 (math.log(0.8) + math.log(0.6) + math.log(0.4) + math.log(0.9)
                  + 2 * math.log(0.3)) / 6)
    assert float(discriminator_loss(expert, policy, weights)) == pytest.approx(expected,
                                                                                rel=1e-5)
    # One update step runs on it (the expert side drawn as large, absorbing rows included).
    stats = provider.update_step(batch)
    assert np.isfinite(float(stats["Losses/GAIL Loss"]))
    # Without absorbing_state: the steps alone.
    _, plain = basic_provider(absorbing_state=False).policy_batch(batch)
    np.testing.assert_array_equal(plain.numpy(), [1, 1, 1, 1, 0])


def test_dac_reward_is_the_logit_of_d():
    # DAC's form with absorbing states: as negative for "policy" as positive for "expert"
    # (ML-Agents' -log(1 - D) is never negative), finite at D = 0 and 1.
    np.testing.assert_allclose(dac_reward(np.array([0.25, 0.5, 0.75, 0.9])),
                               [-math.log(3.0), 0.0, math.log(3.0), math.log(9.0)], atol=1e-5)
    assert np.isfinite(dac_reward(np.array([0.0, 1.0]))).all()


def test_an_untrained_discriminator_pays_nothing_for_ending_or_going_on():
    # With absorbing states D starts at 0.5 on every input, the absorbing state included, so
    # the first rewards are exactly 0 (logit 0.5 - r_abs, r_abs = logit 0.5 = 0): the untrained
    # D's random preference for ending (or not) is not the first lesson. With ML-Agents'
    # gain-0.2 start it was: seeds 0 and 3 of the note rated the absorbing state above the
    # mean step at step 0 (0.510, 0.504) and went to the near goal, seeds 1, 2, 4 below.
    provider = basic_provider()
    obs = np.eye(20, dtype=np.float32)
    n = len(obs)
    batch = RewardBatch(obs=(obs,), next_obs=(obs,),
                        continuous_action=np.zeros((n, 0), np.float32),
                        discrete_action=np.zeros((n, 1), np.int32),
                        environment_reward=np.zeros(n, np.float32),
                        done=np.zeros(n, np.float32), mask=np.ones(n, np.float32))
    assert provider.absorbing_reward() == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_array_equal(provider.evaluate(batch), np.zeros(n, np.float32))
    # ML-Agents' start without absorbing states, or with actions (D is not of states alone):
    # D differs from state to state.
    plain = basic_provider(absorbing_state=False).evaluate(batch)
    assert np.ptp(plain) > 1e-3 and np.all(np.abs(plain - math.log(2.0)) < 0.2)
    with_actions = basic_provider(use_actions=True)
    assert not with_actions.network.states_alone and provider.network.states_alone
    assert np.ptp(with_actions.evaluate(batch)) > 1e-3
    # ... and there the reward stays ML-Agents' -log(1 - D), measured from the absorbing
    # state's: -log(1 - D(abs)) is its r_abs.
    d_abs = float(with_actions._absorbing_fn().numpy())
    assert with_actions.absorbing_reward() == pytest.approx(-math.log(1.0 - d_abs), rel=1e-5)


def basic_trajectory(length, done, interrupted):
    zeros = np.zeros((length, 0), np.float32)
    return Trajectory(
        obs=[np.eye(20, dtype=np.float32)[10 + np.arange(length)]],
        next_obs=[np.eye(20, dtype=np.float32)[10 + length]],
        actions=ActionTuple(zeros, np.full((length, 1), 2, np.int32)),
        log_probs=LogProbs(zeros, np.zeros((length, 1), np.float32)),
        action_mask=np.ones((length, 3), np.float32), rewards=np.zeros(length, np.float32),
        values={}, memory=None, group_id=np.zeros(length, np.int32),
        group_reward=np.zeros(length, np.float32), done=done, interrupted=interrupted,
        agent_id=0)


@pytest.mark.parametrize("absorbing, use_actions", [(True, False), (True, True),
                                                    (False, False)])
def test_gail_returns_at_a_real_end_and_at_a_step_limit(tmp_path, absorbing, use_actions):
    env = make("builtin:Basic", seed=0, num_areas=1)
    signal = {"demo_path": BASIC_DEMO, "gamma": 0.9, "strength": 2.0,
              "absorbing_state": absorbing, "use_actions": use_actions,
              "network_settings": {"hidden_units": 16}}
    settings = trainer_settings("Basic", reward_signals={"gail": signal},
                                hyperparameters={"lambd": 1.0})
    trainer = make_trainer(tmp_path, env, "Basic", settings, jit_compile=False)
    provider = trainer.optimizer.reward_providers["gail"]
    # Known values: D = 0.75 on every step, 0.9 on the state a real end leaves, 0.5 on the
    # absorbing state (DAC's rewards log 3, log 9, 0; ML-Agents' -log(1 - D): log 4 and
    # log 2); the critic says 5 everywhere.
    states_alone = absorbing and not use_actions
    assert provider.terminal_states is states_alone

    def estimates(batch):
        steps = tf.fill([len(batch.mask)], 0.75)
        return tf.stack([steps, tf.fill([len(batch.mask)], 0.9)]) if states_alone else steps
    provider._estimate_fn = estimates
    provider._absorbing_fn = lambda: tf.constant(0.5)
    trainer.optimizer.critic_side.values = lambda obs: {
        "gail": np.full(len(obs[0]), 5.0, np.float32)}
    ended = basic_trajectory(2, done=True, interrupted=False)
    cut = basic_trajectory(2, done=False, interrupted=True)
    trainer.compute_targets([ended, cut])
    returns = trainer.buffer[stream_key(StreamField.RETURNS, "gail")]
    # A D of states alone: a step pays strength (log 3 - 0), measured from the absorbing
    # state's reward (so 0 after a real end: the absorbing state's own reward, measured
    # from itself), and the real end's step gamma strength (log 9 - 0) more for the state
    # it left. With actions: strength (log 4 - log 2), no terminal state. Without absorbing
    # states: strength log 4, and the stream stops at the end, as ML-Agents'.
    r = 2.0 * {(True, False): math.log(3.0), (True, True): math.log(2.0),
               (False, False): math.log(4.0)}[(absorbing, use_actions)]
    last = r + 0.9 * 2.0 * math.log(9.0) if states_alone else r
    # Real end: r + 0.9 last, last. Step limit: bootstrapped from V(next) = 5 either way.
    expected = [r + 0.9 * last, last, r + 0.9 * (r + 0.9 * 5.0), r + 0.9 * 5.0]
    np.testing.assert_allclose(returns, expected, rtol=1e-5)


def test_bootstrap_ends_keeps_the_rule_before_absorbing_states(tmp_path):
    # bootstrap_ends (with absorbing_state: false): a real end bootstraps from the critic's
    # value of the final observation like a step limit, and D has no absorbing input.
    env = make("builtin:Basic", seed=0, num_areas=1)
    signal = {"demo_path": BASIC_DEMO, "gamma": 0.9, "strength": 2.0,
              "absorbing_state": False, "bootstrap_ends": True,
              "network_settings": {"hidden_units": 16}}
    settings = trainer_settings("Basic", reward_signals={"gail": signal},
                                hyperparameters={"lambd": 1.0})
    trainer = make_trainer(tmp_path, env, "Basic", settings, jit_compile=False)
    provider = trainer.optimizer.reward_providers["gail"]
    assert provider.ignore_done is True and not provider.absorbing
    assert [s.name for s in provider.network.body.observation_specs] == ["position"]
    provider._estimate_fn = lambda batch: tf.fill([len(batch.mask)], 0.75)
    trainer.optimizer.critic_side.values = lambda obs: {"gail": np.full(len(obs[0]), 5.0, np.float32)}
    trainer.compute_targets([basic_trajectory(2, done=True, interrupted=False),
                             basic_trajectory(2, done=False, interrupted=True)])
    returns = trainer.buffer[stream_key(StreamField.RETURNS, "gail")]
    r = 2.0 * math.log(4.0)
    np.testing.assert_allclose(returns, [r + 0.9 * (r + 0.9 * 5.0), r + 0.9 * 5.0] * 2,
                               rtol=1e-5)
    assert basic_provider(absorbing_state=False).ignore_done is False  # ML-Agents: stops


def test_bootstrap_ends_with_absorbing_states_is_one_clear_line():
    with pytest.raises(ValueError) as error:
        gail_settings(bootstrap_ends=True)  # absorbing_state is on by default
    message = str(error.value)
    assert "\n" not in message.strip()
    assert "reward_signals.gail.bootstrap_ends" in message
    assert "at most one of bootstrap_ends, absorbing_state" in message


def basic_success(policy, seed=7):
    env = make("builtin:Basic", seed=seed)
    (result,) = evaluate(env, make_policy(policy, env, seed=seed), episodes=100).values()
    return result["mean_reward"]


def test_gail_alone_without_actions_reaches_the_far_goal_on_basic(tmp_path):
    # ML-Agents' GAIL defaults (use_actions false, gamma 0.99, strength 1) on the plain
    # ppo/Basic.yaml, no env reward. Stopped at ends, the always-positive reward paid for
    # staying away from both goals (-0.84 over 100 episodes); with the absorbing state
    # the policy walks to the +1 goal as the heuristic's demonstrations (0.93).
    with open(os.path.join(ROOT, "configs", "ppo", "Basic.yaml")) as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["Basic"]
    behavior["reward_signals"] = {"gail": {"gamma": 0.99, "strength": 1.0,
                                           "use_actions": False, "demo_path": BASIC_DEMO}}
    behavior["summary_freq"] = 10000
    path = tmp_path / "basic_gail.yaml"
    path.write_text(yaml.safe_dump(config))
    assert learn_main([str(path), "--run-id", "gail", "--results-dir", str(tmp_path),
                       "--seed", "1"]) in (0, None)
    assert basic_success("random") < 0.2  # random walks end at the near +0.1 goal too
    assert basic_success(str(tmp_path / "gail")) >= 0.9 * 0.93
