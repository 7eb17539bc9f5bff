"""SAC with demonstrations: GAIL's reward on SAC's sampled batches and its action scale,
behavioral cloning of the squashed policy, and GAIL alone learning Basic."""
import os

import numpy as np
import tensorflow as tf
import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import make
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.networks.action_model import SquashedActionModel
from tftrainers.rewards import RewardBatch, create_reward_provider
from tftrainers.rewards.gail import EPSILON
from tftrainers.settings import NetworkSettings, RunOptions
from tftrainers.trainers.cloning_loss import (SQUASH_BOUND, TeacherActions, cloning_loss,
                                              student_distribution)
from tftrainers.trainers.policy import Policy
from tests.trainers.helpers import drive, make_trainer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
DEMOS = os.path.join(ROOT, "configs", "demos")


def sac_settings(name, **behavior):
    data = {"trainer_type": "sac",
            "hyperparameters": {"batch_size": 16, "buffer_size": 2000, "steps_per_update": 4},
            "network_settings": {"hidden_units": 16, "num_layers": 1, "normalize": True},
            "max_steps": 5000, "time_horizon": 8, "summary_freq": 200}
    for key, value in behavior.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return RunOptions.from_dict({"behaviors": {name: data}}).settings_for(name)


def gail_signal(demo, **kw):
    return {"gail": {"demo_path": os.path.join(DEMOS, demo),
                     "network_settings": {"hidden_units": 16}, **kw}}


def env_of(env_id, num_areas=1):
    env = make(env_id, seed=0, num_areas=num_areas)
    env.reset()
    return env


def test_gail_judges_sac_actions_in_the_demonstrations_scale():
    # The demos hold env actions in [-1, 1]; SAC stores the pre-tanh sample u and PPO the
    # pre-clip x. For the demonstrations' own actions a (u = atanh(a), x = 3a) D must see
    # the same input, and so give the same reward, whichever trainer asks.
    spec = make("builtin:Ball3D").behavior_specs["Ball3D"]
    settings = sac_settings("Ball3D", reward_signals=gail_signal(
        "Ball3D.demo", use_actions=True)).reward_signals["gail"]
    sac = create_reward_provider("gail", spec, settings, seed=0,
                                 env_actions=SquashedActionModel.env_actions)
    ppo = create_reward_provider("gail", spec, settings, seed=0)
    for a, b in zip(ppo.network.variables, sac.network.variables):
        b.assign(a)
    demos = sac.demos
    a = np.clip(np.asarray(demos.continuous_actions[:64], np.float32), -0.99, 0.99)
    n = len(a)

    def batch(raw):
        return RewardBatch(obs=tuple(o[:n] for o in demos.obs),
                           next_obs=tuple(o[:n] for o in demos.next_obs),
                           continuous_action=raw, discrete_action=np.zeros((n, 0), np.int32),
                           environment_reward=np.zeros(n, np.float32),
                           done=np.zeros(n, np.float32), mask=np.ones(n, np.float32))
    sac_inputs = sac._policy_inputs(batch(np.arctanh(a)))
    np.testing.assert_allclose(sac_inputs[-2][:, :2], a, atol=1e-5)  # the action part
    np.testing.assert_allclose(sac.evaluate(batch(np.arctanh(a))),
                               ppo.evaluate(batch(3.0 * a)), atol=1e-5)
    # PPO's scale on SAC's samples would have judged tanh(u)... as clip(u, -3, 3) / 3.
    assert not np.allclose(ppo.evaluate(batch(np.arctanh(a))), sac.evaluate(
        batch(np.arctanh(a))), atol=1e-3)


def test_gail_reward_is_recomputed_on_each_sampled_batch_and_d_trains_in_the_loop(tmp_path):
    env = env_of("builtin:Ball3D")
    settings = sac_settings(
        "Ball3D", hyperparameters={"reward_signal_steps_per_update": 8},
        reward_signals={"extrinsic": {},
                        **gail_signal("Ball3D.demo", use_actions=True, strength=0.5)})
    trainer = make_trainer(tmp_path, env, "Ball3D", settings, jit_compile=False)
    drive(env, trainer, 20)  # 12 agents
    provider = trainer.optimizer.reward_providers["gail"]
    # D takes one step per 8 agent steps, inside the compiled update (SAC: one per 4).
    assert provider.optimizer.iterations.numpy() == int(trainer.step / 8) > 0
    assert trainer.gradient_steps == int(trainer.step / 4)
    state = trainer.rng.bit_generator.state
    flags = np.zeros(16, np.float32)
    first = trainer._sample(16, flags)
    # The batch's GAIL column is D's reward of its rows now, strength applied: with
    # absorbing states (the default) -log(1 - D (1 - eps)) minus the absorbing state's.
    trainer.rng.bit_generator.state = state  # the same rows again
    rows = trainer.buffer.sample(16 * 16, trainer.rng)
    t = trainer.buffer.batch(rows)
    d = provider.network.estimate(provider.network.inputs_of(
        t.obs, np.tanh(t.continuous), t.discrete, t.done, t.next_obs))[0].numpy()
    d_abs = provider.network.estimate(provider.network.absorbing_inputs(1))[0].numpy()[0]
    expected = (-np.log(1 - d * (1 - EPSILON)) + np.log(1 - d_abs * (1 - EPSILON))) * 0.5
    gail = list(trainer.optimizer.reward_providers).index("gail")
    np.testing.assert_allclose(first.rewards[..., gail].reshape(-1), expected, rtol=1e-4,
                               atol=1e-5)
    # Another update changes D: the same rows are scored anew.
    trainer.optimizer.update(first, 1e-3, steps=16)  # flags 0: D does not step
    trainer.optimizer.update(trainer._sample(16, np.ones(16, np.float32)), 1e-3, steps=16)
    trainer.rng.bit_generator.state = state
    again = trainer._sample(16, flags)
    np.testing.assert_array_equal(again.obs[0], first.obs[0])
    assert not np.allclose(again.rewards[..., gail], first.rewards[..., gail])
    env.close()


def test_cloning_loss_of_the_squashed_policy_is_in_the_env_scale():
    spec = make("builtin:Ball3D").behavior_specs["Ball3D"]
    policy = Policy(spec, NetworkSettings(hidden_units=8, num_layers=1), tanh_squash=True)
    rng = np.random.default_rng(0)
    obs = [rng.normal(size=(6, 8)).astype(np.float32)]
    teacher = np.array([[1.0, -1.0], [0.5, 0.0], [-0.2, 0.9], [0, 0], [0.3, -0.3],
                        [-1.0, 1.0]], np.float32)
    noise = rng.normal(size=(6, 2)).astype(np.float32)
    mask = np.array([1, 1, 1, 1, 1, 0], np.float32)
    student = student_distribution(policy.actor, obs, tf.zeros([6, 0]))
    assert student.squashed
    mean, log_std = student.mean.numpy(), student.log_std.numpy()
    # log std is SAC's state-dependent head, not PPO's single vector
    assert not np.allclose(log_std, log_std[:1])
    actions = TeacherActions(tf.constant(teacher), tf.zeros([6, 0], tf.int32))

    def real_mean(per_step):
        return (per_step * mask).sum() / mask.sum()
    sampled = cloning_loss(student, actions, mask, "sampled_mse", noise).numpy()
    expected = real_mean(np.mean((np.tanh(mean + np.exp(log_std) * noise) - teacher) ** 2, 1))
    np.testing.assert_allclose(sampled, expected, rtol=1e-5)
    mse = cloning_loss(student, actions, mask, "mse").numpy()
    np.testing.assert_allclose(mse, real_mean(np.mean((np.tanh(mean) - teacher) ** 2, 1)),
                               rtol=1e-5)
    u = np.arctanh(np.clip(teacher, -SQUASH_BOUND, SQUASH_BOUND))
    log_n = -0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    likelihood = cloning_loss(student, actions, mask, "log_likelihood").numpy()
    np.testing.assert_allclose(likelihood, real_mean(-np.mean(log_n, 1)), rtol=1e-4)


def test_behavioral_cloning_steps_after_the_sac_update_until_its_steps_run_out(tmp_path):
    env = env_of("builtin:Ball3D")
    bc = {"demo_path": os.path.join(DEMOS, "Ball3D.demo"), "strength": 1.0, "steps": 150,
          "samples_per_update": 32}
    settings = sac_settings("Ball3D", behavioral_cloning=bc)
    trainer = make_trainer(tmp_path, env, "Ball3D", settings, jit_compile=False)
    drive(env, trainer, 10)  # 12 agents: 120 steps, cloning after each update
    bc_steps = int(trainer.optimizer.bc.optimizer.iterations.numpy())
    # 32 samples of batch 16 per pass, 3 passes (SAC has no num_epoch: ML-Agents' 3)
    assert bc_steps > 0 and bc_steps % 6 == 0
    assert "Losses/Pretraining Loss" in trainer.last_update
    drive(env, trainer, 10)  # past steps 150: the rate reached its floor, cloning stopped
    assert trainer.step > 150
    stopped = int(trainer.optimizer.bc.optimizer.iterations.numpy())
    drive(env, trainer, 5)
    assert int(trainer.optimizer.bc.optimizer.iterations.numpy()) == stopped
    env.close()


def test_behavioral_cloning_brings_the_squashed_policy_to_the_demonstrations(tmp_path):
    env = env_of("builtin:Ball3D")
    bc = {"demo_path": os.path.join(DEMOS, "Ball3D.demo"), "strength": 10.0,
          "batch_size": 256, "samples_per_update": 1024}
    trainer = make_trainer(tmp_path, env, "Ball3D", sac_settings("Ball3D",
                           behavioral_cloning=bc), jit_compile=False)
    demos, optimizer = trainer.optimizer.bc.demos, trainer.optimizer
    teacher = TeacherActions(np.asarray(demos.continuous_actions, np.float32),
                             tf.zeros([len(demos), 0], tf.int32))
    everything = np.ones(len(demos), np.float32)

    def error():  # of the deterministic action tanh(mean), over every demonstration step
        student = student_distribution(trainer.policy.actor, demos.obs,
                                       tf.zeros([len(demos), 0]))
        return float(cloning_loss(student, teacher, everything, "mse").numpy())
    before = error()
    rng = np.random.default_rng(0)
    for _ in range(40):  # 40 clonings of 3 passes over 1024 steps, lr 3e-4 x 10
        optimizer.clone(optimizer.bc.plan(0, rng))
    # 0.0105 -> 0.0039 (seed 0): below the demonstrations' own variance (0.0091), so the
    # policy follows the observations, not only their mean action.
    assert error() < 0.5 * before, (before, error())
    env.close()


def basic_success(policy, seed=7):
    env = make("builtin:Basic", seed=seed)
    (result,) = evaluate(env, make_policy(policy, env, seed=seed), episodes=100).values()
    return result["mean_reward"]


def test_sac_with_gail_alone_walks_to_the_far_goal_on_basic(tmp_path):
    # No extrinsic reward: GAIL's defaults (no actions, absorbing states) from the
    # heuristic's demonstrations, on ML-Agents' Basic SAC config with one gradient and one
    # discriminator step per agent step and lr 1e-3 (as the extrinsic Basic test); seed 2
    # returned 0.818 at 1k steps and 0.930 (the demonstrations') at 2k and 3k.
    with open(os.path.join(ROOT, "configs", "sac", "Basic.yaml")) as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["Basic"]
    behavior["hyperparameters"].update(steps_per_update=1.0, learning_rate=1e-3,
                                       reward_signal_steps_per_update=1.0)
    behavior["reward_signals"] = {"gail": {"gamma": 0.99, "strength": 1.0,
                                           "demo_path": os.path.join(DEMOS, "Basic.demo")}}
    behavior.update(max_steps=2000, summary_freq=2000)
    config["tf_settings"] = {"jit_compile": False}
    path = tmp_path / "basic_sac_gail.yaml"
    path.write_text(yaml.safe_dump(config))
    assert learn_main([str(path), "--run-id", "gail", "--results-dir", str(tmp_path),
                       "--seed", "2"]) == 0
    random = basic_success("random")
    trained = basic_success(str(tmp_path / "gail"))
    assert trained >= 0.6 and trained >= random + 0.4, (trained, random)
