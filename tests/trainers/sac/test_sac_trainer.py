"""SACTrainer: the update schedule, stats, export contract, resume, bad settings."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.cli import learn_main
from tftrainers.envs import make
from tftrainers.export.loading import OnnxPolicy
from tftrainers.settings import ConfigError, RunOptions
from tftrainers.trainers.registry import create_trainer
from tests.trainers.helpers import drive, variables


def sac_settings(name, hyperparameters=None, **behavior):
    data = {"trainer_type": "sac",
            "hyperparameters": {"batch_size": 16, "buffer_size": 2000, "steps_per_update": 4,
                                **(hyperparameters or {})},
            "network_settings": {"hidden_units": 16, "num_layers": 1, "normalize": True},
            "max_steps": 5000, "time_horizon": 8, "summary_freq": 200, **behavior}
    return RunOptions.from_dict({"behaviors": {name: data}}).settings_for(name)


def env_of(env_id, num_areas=1):
    env = make(env_id, seed=0, num_areas=num_areas)
    env.reset()
    return env


def trainer_for(tmp_path, env, name, settings, **kwargs):
    # No XLA: a compile per test costs more than these few steps gain from it.
    return create_trainer(name, env.behavior_specs[name], settings, str(tmp_path), seed=0,
                          jit_compile=False, **kwargs)


@pytest.mark.parametrize("env_id,name,coeffs", [
    ("builtin:Basic", "Basic", ["Policy/Discrete Entropy Coeff"]),
    ("builtin:Ball3D", "Ball3D", ["Policy/Continuous Entropy Coeff"]),
])
def test_gradient_steps_follow_steps_per_update_and_stats_are_reported(
        tmp_path, env_id, name, coeffs):
    env = env_of(env_id, 2)
    settings = sac_settings(name, {"buffer_init_steps": 40})
    trainer = trainer_for(tmp_path, env, name, settings)
    drive(env, trainer, 60)
    # one gradient step per 4 agent steps after the first 40 (ML-Agents' schedule)
    assert trainer.gradient_steps == int((trainer.step - 40) / 4) > 0
    assert trainer.version >= 1  # the acting side got new weights
    names = {"Losses/Policy Loss", "Losses/Value Loss", "Losses/Q1 Loss", "Losses/Q2 Loss",
             "Policy/Learning Rate", *coeffs}
    assert set(trainer.last_update) == names
    assert all(np.isfinite(v) for v in trainer.last_update.values())
    env.close()


@pytest.mark.parametrize("signal,stats", [
    ("curiosity", ["Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss"]),
    ("rnd", ["Losses/RND Loss"]),
])
def test_learned_reward_signals_step_and_score_sampled_batches(tmp_path, signal, stats):
    env = env_of("builtin:Basic", 2)
    settings = sac_settings("Basic", {"reward_signal_steps_per_update": 8},
                            reward_signals={"extrinsic": {}, signal: {"strength": 0.1}})
    trainer = trainer_for(tmp_path, env, "Basic", settings)
    drive(env, trainer, 80)
    provider = trainer.optimizer.reward_providers[signal]
    # half as many reward-model steps as gradient steps (8 vs 4 agent steps each)
    assert provider.optimizer.iterations.numpy() == int(trainer.step / 8)
    assert trainer.gradient_steps == int(trainer.step / 4)
    assert set(stats) <= set(trainer.last_update)
    assert all(np.isfinite(trainer.last_update[s]) for s in stats)
    env.close()


def test_update_graph_has_no_slice_bounded_by_a_tensor(tmp_path):
    """XLA compiles the update once per input shape, and again for every value of an input
    that must be a constant, such as the bound of a slice: ``reward_update[:steps]`` made
    each new number of steps compile the whole update anew (3 s of CPU each on Ball3D's
    sizes, most of a Ball3D run's CPU)."""
    from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationSpec
    spec = BehaviorSpec([ObservationSpec((3,), "v")], ActionSpec(2, (3,)))
    trainer = create_trainer("H", spec, sac_settings("H"), str(tmp_path), jit_compile=False)
    graph = trainer.optimizer._update.concrete.graph
    slices = [op for op in graph.get_operations() if op.type == "StridedSlice"]
    bounded = [op.name for op in slices for bound in op.inputs[1:] if bound.op.type != "Const"]
    assert slices and not bounded, bounded


def test_hybrid_actions_update(tmp_path):
    from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationSpec
    from tftrainers.trainers.sac.optimizer import SACBatch
    spec = BehaviorSpec([ObservationSpec((3,), "v")], ActionSpec(2, (3, 2)))
    trainer = create_trainer("H", spec, sac_settings("H"), str(tmp_path), jit_compile=False)
    k, b = 3, 5
    rng = np.random.default_rng(0)
    batch = SACBatch(obs=(rng.normal(size=(k, b, 3)).astype(np.float32),),
                     next_obs=(rng.normal(size=(k, b, 3)).astype(np.float32),),
                     continuous=rng.normal(size=(k, b, 2)).astype(np.float32),
                     discrete=rng.integers(0, 2, size=(k, b, 2)).astype(np.int32),
                     action_mask=np.ones((k, b, 5), np.float32),
                     rewards=rng.normal(size=(k, b, 1)).astype(np.float32),
                     done=np.zeros((k, b), np.float32),
                     reward_update=np.zeros(k, np.float32), mask=np.ones((k, b), np.float32),
                     memory=np.zeros((k, b, 0), np.float32),
                     critic_memory=np.zeros((k, b, 0), np.float32))
    before = trainer.optimizer.value_adam.iterations.numpy()
    stats = trainer.optimizer.update(batch, 3e-4)
    assert trainer.optimizer.value_adam.iterations.numpy() == before + k  # K steps, one call
    assert {"Policy/Continuous Entropy Coeff", "Policy/Discrete Entropy Coeff"} <= set(stats)


def test_masked_actions_are_never_taken_by_the_sac_policy(tmp_path):
    from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationSpec
    spec = BehaviorSpec([ObservationSpec((3,), "v")], ActionSpec(0, (4,)))
    trainer = create_trainer("M", spec, sac_settings("M"), str(tmp_path), jit_compile=False)
    obs = [tf.random.normal([500, 3])]
    masks = tf.constant([[1.0, 0.0, 1.0, 0.0]] * 500)
    out = trainer.policy.actor(obs, masks)
    assert set(out["discrete_action"].numpy()[:, 0].tolist()) <= {0, 2}


def test_exported_deterministic_action_is_tanh_of_the_mean(tmp_path):
    env = env_of("builtin:Ball3D", 1)
    settings = sac_settings("Ball3D", {"batch_size": 8})
    trainer = trainer_for(tmp_path, env, "Ball3D", settings)
    drive(env, trainer, 30)
    path = trainer.save()
    assert path is not None
    onnx = os.path.join(str(tmp_path), "Ball3D.onnx")
    assert os.path.exists(onnx)
    decision, _ = env.get_steps("Ball3D")
    obs = decision.obs
    actor = trainer.policy.actor
    encoding, _ = actor.body([tf.constant(o) for o in obs])
    expected = np.tanh(actor.action_model.mean(encoding).numpy())
    policy = OnnxPolicy(onnx, env.behavior_specs["Ball3D"], deterministic=True)
    np.testing.assert_allclose(policy("Ball3D", decision).continuous, expected, atol=1e-5)
    assert np.abs(expected).max() < 1.0
    env.close()


CONFIG = """
behaviors:
  Basic:
    trainer_type: sac
    hyperparameters: {{batch_size: 16, buffer_size: 4000, steps_per_update: 4,
                      save_replay_buffer: {save}}}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: {max_steps}
    time_horizon: 8
    summary_freq: 400
    checkpoint_interval: 400
env_settings:
  env_path: builtin:Basic
  seed: 1
tf_settings: {{jit_compile: false}}
"""


@pytest.mark.parametrize("save", [True, False])
def test_resume_with_and_without_a_saved_buffer(tmp_path, capsys, save):
    results = str(tmp_path / "results")
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG.format(save=str(save).lower(), max_steps=800))
    assert learn_main([str(config), "--run-id", "run", "--results-dir", results]) == 0
    behavior = os.path.join(results, "run", "Basic")
    buffers = sorted(f for f in os.listdir(behavior) if f.startswith("replay_buffer-"))
    assert len(buffers) == (1 if save else 0)  # only the latest checkpoint's
    config.write_text(CONFIG.format(save=str(save).lower(), max_steps=1600))
    seen = {}
    from tftrainers.trainers.sac import trainer as sac_trainer
    original = sac_trainer.SACTrainer.restore_state

    def spy(self, state):
        original(self, state)
        seen["step"], seen["steps"], seen["buffer"] = (self.step, self.gradient_steps,
                                                       len(self.buffer))
    sac_trainer.SACTrainer.restore_state = spy
    try:
        assert learn_main([str(config), "--run-id", "run", "--results-dir", results,
                           "--resume"]) == 0
    finally:
        sac_trainer.SACTrainer.restore_state = original
    out = capsys.readouterr().out
    # No catch-up: the gradient steps owed at the restored step count as done.
    assert seen["steps"] == int(seen["step"] / 4) and seen["step"] >= 800
    if save:
        assert seen["buffer"] > 700 and "replay buffer restored" in out
    else:
        assert seen["buffer"] == 0


def test_a_replay_buffer_larger_than_memory_is_refused_in_one_line(tmp_path, monkeypatch):
    from tftrainers.trainers.sac import trainer as sac_trainer
    monkeypatch.setattr(sac_trainer, "available_memory", lambda: 10**6)
    env = env_of("builtin:Basic", 1)
    with pytest.raises(ConfigError, match=r"^behaviors.Basic.hyperparameters.buffer_size: "
                                          r"200000 transitions of \d+ bytes need [\d.]+ GB, "
                                          r"more than the 0.0 GB of memory available"):
        trainer_for(tmp_path, env, "Basic", sac_settings("Basic", {"buffer_size": 200000}))
    env.close()


def test_checkpoint_restores_every_variable(tmp_path):
    env = env_of("builtin:Basic", 1)
    settings = sac_settings("Basic")
    trainer = trainer_for(tmp_path, env, "Basic", settings)
    drive(env, trainer, 80)
    trainer.save()
    saved = variables(trainer)
    other = trainer_for(tmp_path / "b", env, "Basic", settings)
    other.checkpointer = trainer.checkpointer
    other.restore_latest()
    for (name, a), (_, b) in zip(saved, variables(other)):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert other.step == trainer.step
    env.close()


def test_keras_export_rebuilds_the_squashed_policy():
    from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationSpec
    from tftrainers.export.keras_export import keras_model
    from tftrainers.settings import NetworkSettings
    from tftrainers.trainers.policy import Policy
    spec = BehaviorSpec([ObservationSpec((3,), "v")], ActionSpec(2, ()))
    policy = Policy(spec, NetworkSettings(hidden_units=8, num_layers=1), tanh_squash=True)
    x = (np.random.default_rng(0).normal(size=(5, 3)) * 3).astype(np.float32)
    out = keras_model(policy)({"obs_0": x})
    encoding, _ = policy.actor.body([tf.constant(x)])
    expected = np.tanh(policy.actor.action_model.mean(encoding).numpy())
    np.testing.assert_allclose(out["deterministic_continuous_actions"], expected, atol=1e-5)
