"""behavioral_cloning inside PPO: the rate schedule, the minibatch plan, sequences, and
the actor learning the demonstrations' actions."""
import os

import numpy as np
import pytest

from tftrainers.envs import make
from tftrainers.trainers.behavioral_cloning import (STAT, BCModule, cloning_learning_rate,
                                                    sequence_rows)
from tftrainers.trainers.policy import Policy

from rewards.test_reward_signals import Recorder
from trainers.helpers import drive, make_trainer, trainer_settings

DEMOS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "demos")


def test_the_rate_is_policy_rate_times_strength_decayed_linearly_over_steps():
    initial = 3e-4 * 0.5
    assert cloning_learning_rate(initial, 1000, 0) == pytest.approx(1.5e-4)
    assert cloning_learning_rate(initial, 1000, 250) == pytest.approx(
        (1.5e-4 - 1e-10) * 0.75 + 1e-10)
    assert cloning_learning_rate(initial, 1000, 1000) == pytest.approx(1e-10)
    assert cloning_learning_rate(initial, 1000, 5000) == pytest.approx(1e-10)
    assert cloning_learning_rate(initial, 0, 10 ** 9) == pytest.approx(1.5e-4)  # constant


def test_sequences_stay_inside_episodes_and_pad_at_the_end():
    rows, mask = sequence_rows(np.array([0, 0, 0, 1, 1]), 2)
    np.testing.assert_array_equal(rows, [0, 1, 2, 2, 3, 4])
    np.testing.assert_array_equal(mask, [1, 1, 1, 0, 1, 1])
    rows, mask = sequence_rows(np.array([0, 0, 1]), 1)
    np.testing.assert_array_equal(rows, [0, 1, 2])
    assert mask.all()


def basic_trainer(tmp_path, bc, recorder=None, **overrides):
    env = make("builtin:Basic", seed=0)
    env.reset()
    settings = trainer_settings(
        "Basic", behavioral_cloning={"demo_path": os.path.join(DEMOS, "Basic.demo"), **bc},
        hyperparameters={"batch_size": 32, "buffer_size": 128, "learning_rate": 3e-3},
        **overrides)
    return env, make_trainer(tmp_path, env, "Basic", settings,
                             writers=[recorder] if recorder else [])


def cloning_module(bc):
    """A BCModule on Basic's demos for a small policy (trainer's lr 3e-3, batch 32,
    num_epoch 2)."""
    settings = trainer_settings(
        "Basic", behavioral_cloning={"demo_path": os.path.join(DEMOS, "Basic.demo"), **bc})
    policy = Policy(make("builtin:Basic").behavior_specs["Basic"], settings.network_settings)
    return BCModule(policy, settings.behavioral_cloning, 3e-3, 32, 2)


def test_the_plan_has_num_epoch_passes_and_stops_at_the_floor():
    bc = cloning_module({"steps": 1000, "batch_size": 64, "num_epoch": 2,
                         "samples_per_update": 256})
    assert len(bc.demos) == 700
    # samples_per_update 256 = 4 minibatches of 64 per pass (of 10 the demos hold).
    assert bc.index_shape == (2 * 4, 64)
    plan = bc.plan(0, np.random.default_rng(0))
    assert plan.count == 8 and plan.learning_rate == pytest.approx(3e-3)
    for epoch in plan.index.reshape(2, -1):  # no step twice within a pass
        assert len(np.unique(epoch)) == len(epoch)
    assert bc.plan(500, np.random.default_rng(0)).learning_rate == pytest.approx(1.5e-3,
                                                                                rel=1e-6)
    stopped = bc.plan(1000, np.random.default_rng(0))
    assert stopped.count == 0 and stopped.index.shape == bc.index_shape
    # Defaults: the trainer's batch size and num_epoch, every minibatch of the demos.
    assert cloning_module({}).index_shape == (2 * (700 // 32), 32)


def agreement(trainer, demos):
    """Share of demo steps where the actor's most likely action is the demonstration's."""
    out = trainer.policy.actor.deterministic(demos.obs, demos.action_mask)
    return float((out["discrete_action"].numpy() == demos.discrete_actions).all(axis=1).mean())


def test_the_actor_learns_the_demonstrations_while_the_rate_lasts(tmp_path):
    recorder = Recorder()
    # No reward at all: whatever the actor learns of the demonstrations is cloning.
    env, trainer = basic_trainer(tmp_path, {"steps": 6000, "strength": 1.0}, recorder,
                                 reward_signals={"extrinsic": {"strength": 0.0}},
                                 max_steps=20000)
    demos = trainer.optimizer.bc.demos
    before = agreement(trainer, demos)
    losses = []
    while trainer.step < 5000:
        drive(env, trainer, 16)
        if STAT in trainer.last_update and (not losses or
                                            trainer.last_update[STAT] != losses[-1]):
            losses.append(trainer.last_update[STAT])
    after = agreement(trainer, demos)
    assert after >= 0.9 and after > before + 0.2, (before, after)
    assert losses[-1] < 0.5 * losses[0], losses
    assert STAT in recorder.names
    while trainer.step < 7000:  # past steps: cloning stops and so does its stat
        drive(env, trainer, 16)
    assert STAT not in trainer.last_update
    assert trainer.optimizer.update_fn.tracing_count == 1


def test_continuous_cloning_on_ball3d_lowers_the_error(tmp_path):
    env = make("builtin:Ball3D", seed=0, num_areas=1)
    env.reset()
    settings = trainer_settings(
        "Ball3D", behavioral_cloning={"demo_path": os.path.join(DEMOS, "Ball3D.demo"),
                                      "samples_per_update": 2048, "batch_size": 256},
        hyperparameters={"buffer_size": 256, "batch_size": 64, "learning_rate": 3e-3},
        max_steps=20000)
    trainer = make_trainer(tmp_path, env, "Ball3D", settings)
    losses = []
    while trainer.updates < 8:
        drive(env, trainer, 25)
        if trainer.last_update and (not losses or trainer.last_update[STAT] != losses[-1]):
            losses.append(trainer.last_update[STAT])
    assert losses[-1] < 0.6 * losses[0], losses
