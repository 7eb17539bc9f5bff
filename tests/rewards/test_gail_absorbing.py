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
from tftrainers.rewards.gail import EPSILON, discriminator_loss, expert_steps
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
    # From a .demo file: as many absorbing rows in the provider's expert set as real ends.
    provider = basic_provider()
    demo = provider.demos
    real_ends = int((demo.done & ~demo.interrupted).sum())
    assert real_ends > 0
    flags = provider._expert[-1].numpy()
    assert len(flags) == len(demo) + real_ends and flags.sum() == real_ends
    assert not flags[:len(demo)].any()
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
    inputs, weights = provider.policy_batch(batch)
    np.testing.assert_array_equal(weights.numpy(), [1, 1, 1, 1, 0, 2])  # 2 real ends
    np.testing.assert_array_equal(inputs[0].numpy()[:n], obs)
    np.testing.assert_array_equal(inputs[0].numpy()[n], np.zeros(20))
    np.testing.assert_array_equal(inputs[1].numpy()[:, 0], [0, 0, 0, 0, 0, 1])
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


@pytest.mark.parametrize("absorbing", [True, False])
def test_gail_returns_at_a_real_end_and_at_a_step_limit(tmp_path, absorbing):
    env = make("builtin:Basic", seed=0, num_areas=1)
    signal = {"demo_path": BASIC_DEMO, "gamma": 0.9, "strength": 2.0,
              "absorbing_state": absorbing, "network_settings": {"hidden_units": 16}}
    settings = trainer_settings("Basic", reward_signals={"gail": signal},
                                hyperparameters={"lambd": 1.0})
    trainer = make_trainer(tmp_path, env, "Basic", settings, jit_compile=False)
    provider = trainer.optimizer.reward_providers["gail"]
    # Known values: D = 0.75 on every step (reward log 4), 0.5 on the absorbing state
    # (log 2); the critic says 5 everywhere.
    provider._estimate_fn = lambda batch: tf.fill([len(batch.mask)], 0.75)
    provider._absorbing_fn = lambda: tf.constant(0.5)
    trainer.optimizer.critic_side.values = lambda obs: {
        "gail": np.full(len(obs[0]), 5.0, np.float32)}
    ended = basic_trajectory(2, done=True, interrupted=False)
    cut = basic_trajectory(2, done=False, interrupted=True)
    trainer.compute_targets([ended, cut])
    returns = trainer.buffer[stream_key(StreamField.RETURNS, "gail")]
    # A step pays strength (log 4 - log 2) with the absorbing state (0 after a real end:
    # the absorbing state's own reward, measured from itself); strength log 4 without,
    # and the stream stops at the end, as ML-Agents'.
    r = 2.0 * (math.log(4.0) - math.log(2.0)) if absorbing else 2.0 * math.log(4.0)
    # Real end: r + 0.9 r, r. Step limit: bootstrapped from V(next) = 5 either way.
    expected = [r + 0.9 * r, r, r + 0.9 * (r + 0.9 * 5.0), r + 0.9 * 5.0]
    np.testing.assert_allclose(returns, expected, rtol=1e-5)


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
