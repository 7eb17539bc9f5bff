"""PPO with ``shared_critic: true``: value heads on the policy's body (ML-Agents'
SharedActorCritic), trained by the one PPO loss."""
import os

import numpy as np
import pytest
import tensorflow as tf
import yaml

from tftrainers.checkpoint import Checkpointer
from tftrainers.cli import learn_main
from tftrainers.envs import make
from tftrainers.networks import SharedCritic
from tftrainers.processing import BufferKey
from tftrainers.trainers.ppo.optimizer import value_loss

from .helpers import drive, make_trainer, trainer_settings, variables
from .test_learning import CONFIGS, score

MEMORY = {"memory_size": 16, "sequence_length": 8}


def shared_trainer(tmp_path, memory=None, shared=True, hyperparameters=(), **overrides):
    env = make("builtin:Basic", seed=0, num_areas=8)
    env.reset()
    network = {"normalize": True, **({"memory": memory} if memory else {})}
    settings = trainer_settings("Basic", hyperparameters={"shared_critic": shared,
                                                          **dict(hyperparameters)},
                                network_settings=network, **overrides)
    return env, make_trainer(tmp_path, env, "Basic", settings)


def first_update_buffer(env, trainer):
    """Drives ``trainer`` until its first update and returns the buffer it trained on."""
    captured = []
    update = trainer.optimizer.update

    def keep(buffer, step, rng):
        captured.append(buffer)
        return update(buffer, step, rng)
    trainer.optimizer.update = keep
    while not captured:
        drive(env, trainer, 20)
    trainer.optimizer.update = update
    return captured[0]


@pytest.mark.parametrize("memory", [None, MEMORY], ids=["feedforward", "memory"])
def test_the_critic_is_value_heads_on_the_policy_body(tmp_path, memory):
    env, trainer = shared_trainer(
        tmp_path, memory, reward_signals={"extrinsic": {}, "curiosity": {"strength": 0.01}})
    actor, critic = trainer.policy.actor, trainer.optimizer.critic
    assert isinstance(critic, SharedCritic) and critic.body is actor.body
    # Its own variables are one Dense(1) per stream, nothing of the body's.
    assert sorted(v.path for v in critic.variables) == sorted(
        f"{s}_value/{w}" for s in ("extrinsic", "curiosity") for w in ("kernel", "bias"))
    assert not {id(v) for v in critic.variables} & {id(v) for v in actor.variables}
    # One Adam over actor + heads, each variable once.
    trained = trainer.optimizer.variables
    assert len({id(v) for v in trained}) == len(trained) == \
        len(actor.trainable_variables) + len(critic.trainable_variables)
    assert critic.memory_size == actor.memory_size == (16 if memory else 0)

    drive(env, trainer, 100)  # updates: the body, normalizer and heads move off their start
    assert trainer.updates >= 2
    rng = np.random.default_rng(0)
    obs = [rng.normal(size=(6, *o.shape)).astype(np.float32)
           for o in trainer.spec.observation_specs]
    encoding, _ = actor.body(obs)
    values, _ = critic(obs)
    for stream, head in zip(critic.stream_names, critic.value_heads(encoding).values()):
        np.testing.assert_allclose(values[stream], head, rtol=1e-6)
    if not memory:  # the values the trainer computes targets with (onnxruntime) agree
        for stream, v in trainer.optimizer.values(obs).items():
            np.testing.assert_allclose(v, values[stream], rtol=1e-4, atol=1e-5)


def test_the_value_loss_alone_reaches_the_shared_body(tmp_path):
    env, trainer = shared_trainer(tmp_path)
    actor, critic = trainer.policy.actor, trainer.optimizer.critic
    obs = [np.random.default_rng(1).normal(size=(8, *o.shape)).astype(np.float32)
           for o in trainer.spec.observation_specs]
    returns, mask = tf.ones([8]), tf.ones([8])
    with tf.GradientTape() as tape:
        values, _ = critic(obs)
        loss = value_loss([values["extrinsic"]], [values["extrinsic"]], [returns], 0.2, mask)
    grads = tape.gradient(loss, actor.body.trainable_variables)
    assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in grads)


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "own critic"])
def test_an_update_with_no_advantage_moves_the_body_only_when_shared(tmp_path, shared):
    # Zero advantages and no entropy bonus: the value loss is the only term with a gradient,
    # so the action heads keep their weights and the body moves only if the critic reads it.
    hyperparameters = {"beta": 0.0, "beta_schedule": "constant"}
    buffer = first_update_buffer(*shared_trainer(tmp_path / "collect", shared=shared,
                                                 hyperparameters=hyperparameters))
    # A trainer that has not updated yet: no Adam momentum to move anything on its own.
    _, trainer = shared_trainer(tmp_path / "train", shared=shared,
                                hyperparameters=hyperparameters)
    buffer[BufferKey.ADVANTAGES] = np.zeros_like(buffer[BufferKey.ADVANTAGES])
    actor, critic = trainer.policy.actor, trainer.optimizer.critic
    body = [v.numpy().copy() for v in actor.body.trainable_variables]
    heads = [v.numpy().copy() for v in actor.action_model.trainable_variables]
    values = [v.numpy().copy() for v in critic.value_heads.trainable_variables]
    stats = trainer.optimizer.update(buffer, trainer.step, np.random.default_rng(0))
    assert stats["Losses/Policy Loss"] == 0.0 and stats["Losses/Value Loss"] > 0
    for before, v in zip(heads, actor.action_model.trainable_variables):
        np.testing.assert_array_equal(before, v.numpy())
    moved = [not np.array_equal(b, v.numpy())
             for b, v in zip(body, actor.body.trainable_variables)]
    assert all(moved) if shared else not any(moved)
    assert all(not np.array_equal(b, v.numpy())
               for b, v in zip(values, critic.value_heads.trainable_variables))


# --- through the CLI: learning, resume ----------------------------------------------------

def write_basic(tmp_path, name="shared.yaml", behavior=None, **hyperparameters):
    """configs/ppo/Basic.yaml with ``hyperparameters`` and ``behavior`` keys changed."""
    with open(os.path.join(CONFIGS, "Basic.yaml")) as f:
        data = yaml.safe_load(f)
    data["behaviors"]["Basic"]["hyperparameters"].update(hyperparameters)
    data["behaviors"]["Basic"].update(behavior or {})
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def train_shared(tmp_path, seed):
    config = write_basic(tmp_path, shared_critic=True, behavior={"max_steps": 15000})
    results = str(tmp_path / "results")
    assert learn_main([config, "--run-id", "run", "--results-dir", results,
                       "--seed", str(seed)]) == 0
    return os.path.join(results, "run")


def test_ppo_with_a_shared_critic_learns_basic(tmp_path):
    # The own critic's budget (test_learning): 15k steps of configs/ppo/Basic.yaml. Seeds
    # 0-4 score 0.848, 0.929, 0.923, 0.913, 0.905 (random -0.020).
    run = train_shared(tmp_path, seed=2)
    random, trained = score("builtin:Basic", "random"), score("builtin:Basic", run)
    assert trained >= 0.6 and trained >= random + 0.4, (trained, random)


def test_restore_gives_the_shared_body_and_heads_back(tmp_path):
    env, first = shared_trainer(tmp_path, MEMORY)
    drive(env, first, 80)
    first.save()
    _, second = shared_trainer(tmp_path, MEMORY)
    second.restore_latest()
    saved, restored = variables(first), variables(second)
    assert [n for n, _ in saved] == [n for n, _ in restored]
    assert any(n.startswith("critic/") for n, _ in saved)
    for (name, a), (_, b) in zip(saved, restored):
        np.testing.assert_array_equal(a, b, err_msg=name)


RESUME_CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 128, shared_critic: %s}
    network_settings:
      hidden_units: 16
      num_layers: 1
      memory: {memory_size: 16, sequence_length: 8}
    max_steps: %d
    time_horizon: 8
env_settings: {env_path: "builtin:Basic", seed: 1}
"""


def test_resume_continues_and_refuses_a_flipped_shared_critic(tmp_path, capsys):
    def config(shared, max_steps, name):
        path = tmp_path / name
        path.write_text(RESUME_CONFIG % ("true" if shared else "false", max_steps))
        return str(path)
    results = str(tmp_path / "results")
    base = ["--run-id", "r", "--results-dir", results]
    assert learn_main([config(True, 300, "a.yaml")] + base) == 0
    assert learn_main([config(True, 500, "b.yaml"), "--resume"] + base) == 0
    directory = os.path.join(results, "r", "Basic", "checkpoints")
    assert Checkpointer(directory, "Basic").checkpoints()[-1]["step"] >= 500
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        learn_main([config(False, 700, "c.yaml"), "--resume"] + base)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2
    assert err == (f"tftrainers-learn: error: {os.path.join(results, 'r')}: cannot resume "
                   f"behavior 'Basic': hyperparameters.shared_critic: the checkpoint has "
                   f"true, the config has false")
    # --initialize-from copies the policy only: its own critic starts fresh either way.
    assert learn_main([config(False, 100, "d.yaml"), "--run-id", "n", "--results-dir",
                       results, "--initialize-from", "r"]) == 0
