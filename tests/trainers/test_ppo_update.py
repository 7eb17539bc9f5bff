"""The compiled act and update: traced once, minibatches, masks, memory, learning signal."""
import numpy as np
import pytest

from tftrainers.envs import make
from tftrainers.acting import bucket
from tftrainers.trainers.policy import Policy

from .helpers import drive, make_trainer, trainer_settings


def test_bucket_sizes():
    assert [bucket(n) for n in (0, 1, 2, 3, 5, 8, 9, 96)] == [1, 1, 2, 4, 8, 8, 16, 128]


def test_act_and_update_are_traced_once(tmp_path):
    env = make("builtin:GridWorld", seed=0, num_areas=6)
    env.reset()
    trainer = make_trainer(tmp_path, env, "GridWorld", trainer_settings("GridWorld"),
                           act_runtime="tensorflow")
    drive(env, trainer, 200)  # batches of varying size, several updates of varying length
    assert trainer.updates >= 3
    assert trainer.policy._tf_act.tracing_count == 1
    assert trainer.optimizer.update_fn.tracing_count == 1


def test_minibatch_index_whole_sequences_each_epoch(tmp_path):
    env = make("builtin:Hallway", num_areas=2)
    settings = trainer_settings("Hallway", hyperparameters={"batch_size": 8, "num_epoch": 3},
                                network_settings={"memory": {"sequence_length": 4,
                                                             "memory_size": 8}})
    trainer = make_trainer(tmp_path, env, "Hallway", settings)
    index, count = trainer.optimizer.minibatch_index(40, 64, np.random.default_rng(0))
    assert count == 3 * 5 and index.shape == (3 * 8, 8)
    for epoch in range(3):
        rows = index[epoch * 5:(epoch + 1) * 5]
        assert sorted(rows.ravel().tolist()) == list(range(40))  # each step once per pass
        starts = rows.reshape(-1, 4)
        assert np.all(starts % 4 == np.arange(4)) and np.all(np.diff(starts, axis=1) == 1)


def test_policy_never_picks_masked_actions_and_deterministic_picks_allowed():
    env = make("builtin:GridWorld", seed=1, num_areas=64)
    env.reset()
    decision, _ = env.get_steps("GridWorld")
    settings = trainer_settings("GridWorld")
    for deterministic in (False, True):
        policy = Policy(env.behavior_specs["GridWorld"], settings.network_settings,
                        seed=3, deterministic=deterministic)
        actor = policy.make_actor("tensorflow")
        for _ in range(30):
            _, actions = actor.act(decision)
            chosen = decision.action_mask[0][np.arange(64), actions.discrete[:, 0]]
            assert not chosen.any()


def test_continuous_env_actions_are_clipped_raw_samples_over_three():
    env = make("builtin:Ball3D", num_areas=2)
    env.reset()
    decision, _ = env.get_steps("Ball3D")
    policy = Policy(env.behavior_specs["Ball3D"], trainer_settings("Ball3D").network_settings)
    policy.actor.action_model.log_std.assign([2.0, 2.0])  # wide: many samples beyond +-3
    info, actions = policy.make_actor("onnxruntime").act(decision)
    np.testing.assert_allclose(actions.continuous,
                               np.clip(info.actions.continuous, -3, 3) / 3, atol=1e-6)
    assert np.abs(info.actions.continuous).max() > 3


def test_lstm_memory_is_carried_per_agent_and_reset_at_episode_end():
    env = make("builtin:Hallway", num_areas=3)
    env.reset()
    decision, _ = env.get_steps("Hallway")
    settings = trainer_settings("Hallway", network_settings={
        "memory": {"sequence_length": 4, "memory_size": 8}})
    policy = Policy(env.behavior_specs["Hallway"], settings.network_settings)
    actor = policy.make_actor("onnxruntime")
    first, _ = actor.act(decision)
    second, _ = actor.act(decision)
    assert np.all(first.memory == 0.0) and not np.allclose(second.memory, 0.0)
    actor.episode_ended(np.array([1]))
    third, _ = actor.act(decision)
    assert np.all(third.memory[1] == 0.0) and not np.allclose(third.memory[0], 0.0)


def basic_buffer(tmp_path, num_epoch, returns_offset=None):
    """A Basic trainer and a buffer of 64 steps acted by its policy, where "right" had
    advantage +1 and the other actions -1 (returns: the values plus ``returns_offset``)."""
    from tftrainers.processing import (AgentBuffer, BufferKey, StreamField, next_obs_key,
                                       obs_key, stream_key)
    env = make("builtin:Basic", seed=0, num_areas=64)
    env.reset()
    settings = trainer_settings("Basic", hyperparameters={
        "batch_size": 64, "buffer_size": 64, "num_epoch": num_epoch, "learning_rate": 1e-2},
        max_steps=10**6)
    trainer = make_trainer(tmp_path, env, "Basic", settings)
    decision, _ = env.get_steps("Basic")
    info, _ = trainer.create_actor().act(decision)
    values = trainer.optimizer.values(decision.obs)["extrinsic"]
    right = info.actions.discrete[:, 0] == 2
    returns = values if returns_offset is None else values + returns_offset
    buffer = AgentBuffer()
    buffer.append({
        obs_key(0): decision.obs[0], next_obs_key(0): decision.obs[0],
        BufferKey.CONTINUOUS_ACTION: info.actions.continuous,
        BufferKey.DISCRETE_ACTION: info.actions.discrete,
        BufferKey.CONTINUOUS_LOG_PROBS: info.log_probs.continuous,
        BufferKey.DISCRETE_LOG_PROBS: info.log_probs.discrete,
        BufferKey.ACTION_MASK: np.ones((64, 3), np.float32),
        BufferKey.ENVIRONMENT_REWARDS: np.zeros(64, np.float32),
        BufferKey.GROUP_ID: np.zeros(64, np.int32), BufferKey.GROUP_REWARD: np.zeros(64, np.float32),
        BufferKey.DONE: np.zeros(64, np.float32),
        BufferKey.ADVANTAGES: np.where(right, 1.0, -1.0).astype(np.float32),
        stream_key(StreamField.VALUES, "extrinsic"): values,
        stream_key(StreamField.RETURNS, "extrinsic"): returns.astype(np.float32),
    })
    return trainer, buffer, decision, values, returns


def test_an_update_raises_the_probability_of_advantageous_actions(tmp_path):
    # One compiled update on a buffer where "right" had advantage +1 and the other actions
    # -1: afterwards "right" must be likelier in that state.
    trainer, buffer, decision, _, _ = basic_buffer(tmp_path, num_epoch=4)

    def p_right():
        actor = trainer.policy.actor
        logits = actor.action_model.masked_logits(actor.body([decision.obs[0][:1]])[0],
                                                  None)[0].numpy()[0]
        p = np.exp(logits - logits.max())
        return p[2] / p.sum()
    before = p_right()
    stats = trainer.optimizer.update(buffer, 0, np.random.default_rng(0))
    assert p_right() > before + 0.05
    assert stats["Policy/Learning Rate"] == pytest.approx(1e-2)
    assert np.isfinite(stats["Losses/Policy Loss"]) and np.isfinite(stats["Losses/Value Loss"])


def test_update_diagnostics_known_answers(tmp_path):
    # One minibatch: its diagnostics are taken before its gradient step, on the weights
    # that acted, so every ratio is 1: KL 0, nothing clipped. Explained variance: returns
    # = values + an offset whose variance against the returns' is known.
    offset = np.linspace(-1.0, 1.0, 64).astype(np.float32)
    trainer, buffer, _, values, returns = basic_buffer(tmp_path, 1, offset)
    stats = trainer.optimizer.update(buffer, 0, np.random.default_rng(0))
    assert stats["Policy/Approx KL"] == pytest.approx(0.0, abs=1e-6)
    assert stats["Policy/Clip Fraction"] == 0.0
    expected = 1.0 - np.var(returns - values) / np.var(returns)
    assert stats["Losses/Explained Variance"] == pytest.approx(expected, rel=1e-4, abs=1e-5)
    # Eight more passes at a learning rate of 1e-2 move the policy away from the one that
    # acted: the later minibatches see ratios off 1.
    trainer, buffer, _, _, _ = basic_buffer(tmp_path / "b", 8)
    stats = trainer.optimizer.update(buffer, 0, np.random.default_rng(0))
    assert stats["Policy/Approx KL"] > 1e-4
    assert 0.0 < stats["Policy/Clip Fraction"] <= 1.0
    assert stats["Losses/Explained Variance"] == 1.0  # returns = values: all explained
