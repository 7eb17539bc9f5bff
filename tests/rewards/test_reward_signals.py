"""Reward signals inside the PPO trainer: streams, stats, checkpoints, exploration."""
import numpy as np
import pytest

from tftrainers.cli import learn_main
from tftrainers.envs import make
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.processing import StreamField, stream_key
from tftrainers.stats import StatsWriter

from trainers.helpers import drive, make_trainer, manager_of, trainer_settings, variables
from .corridor import CorridorEnv

INTRINSIC = {"extrinsic": {"gamma": 0.99},
             "curiosity": {"strength": 0.05, "gamma": 0.9,
                           "network_settings": {"hidden_units": 16}},
             "rnd": {"strength": 0.1, "network_settings": {"hidden_units": 16}}}


class Recorder(StatsWriter):
    def __init__(self):
        self.names = set()

    def write(self, category, step, summaries, steps_per_second, elapsed):
        self.names.update(summaries)


def test_streams_have_their_value_heads_stats_and_ml_agents_names(tmp_path):
    env = make("builtin:Pyramids", seed=0, num_areas=4, size=8, sight=8)
    env.reset()
    recorder = Recorder()
    trainer = make_trainer(tmp_path, env, "Pyramids",
                           trainer_settings("Pyramids", reward_signals=INTRINSIC),
                           writers=[recorder])
    assert trainer.optimizer.critic.stream_names == ("extrinsic", "curiosity", "rnd")
    drive(env, trainer, 700)
    assert trainer.updates >= 3
    assert {"Policy/Curiosity Reward", "Policy/Curiosity Value Estimate",
            "Losses/Curiosity Forward Loss", "Losses/Curiosity Inverse Loss",
            "Policy/Rnd Reward", "Policy/Rnd Value Estimate", "Losses/RND Loss",
            "Policy/Extrinsic Reward", "Policy/Extrinsic Value Estimate",
            "Losses/Policy Loss", "Losses/Value Loss"} <= recorder.names, recorder.names
    assert trainer.optimizer.update_fn.tracing_count == 1  # reward models in the one update


def test_novelty_streams_bootstrap_through_episode_ends_and_extrinsic_does_not(tmp_path):
    env = CorridorEnv(seed=0, num_areas=1, length=3)
    env.reset()
    settings = trainer_settings("Corridor", reward_signals=INTRINSIC,
                                hyperparameters={"lambd": 1.0})
    trainer = make_trainer(tmp_path, env, "Corridor", settings)
    # Known values: every stream's reward is 1 a step, the critic says 5 everywhere.
    for provider in trainer.reward_providers.values():
        provider.evaluate = lambda batch: np.ones(len(batch.mask), np.float32)
    streams = trainer.optimizer.streams
    trainer.optimizer.critic_side.values = lambda obs: {
        s: np.full(len(obs[0]), 5.0, np.float32) for s in streams}
    manager = manager_of(trainer, env)
    for _ in range(2):  # right, right: the end, a real terminal after 2 steps
        decision, terminal = env.get_steps("Corridor")
        manager.step(decision, terminal)  # records the step
        env.set_actions("Corridor", env.heuristic("Corridor", decision))
        env.step()
    manager.step(*env.get_steps("Corridor"))
    (trajectory,) = trainer.drain()
    assert trajectory.done and len(trajectory) == 2
    trainer.compute_targets([trajectory])
    returns = {s: trainer.buffer[stream_key(StreamField.RETURNS, s)] for s in streams}
    # extrinsic (gamma .99, strength 1): 1 + .99 * 1, then 1 (value 0 after the end)
    assert returns["extrinsic"] == pytest.approx([1.99, 1.0])
    # curiosity (gamma .9, strength .05): .05 + .9 (.05 + .9 * 5), then .05 + .9 * 5
    assert returns["curiosity"] == pytest.approx([0.05 + 0.9 * (0.05 + 4.5), 0.05 + 4.5])
    assert returns["rnd"] == pytest.approx([0.1 + 0.99 * (0.1 + 4.95), 0.1 + 4.95])


def test_checkpoints_hold_the_reward_models_and_their_optimizers(tmp_path):
    env = make("builtin:Pyramids", seed=0, num_areas=4, size=8, sight=8)
    env.reset()
    settings = trainer_settings("Pyramids", reward_signals=INTRINSIC)
    first = make_trainer(tmp_path, env, "Pyramids", settings)
    drive(env, first, 200)
    first.save()
    saved = variables(first)
    names = [n for n, _ in saved]
    assert any(n.startswith("curiosity_network/") for n in names)
    assert any(n.startswith("rnd_predictor/") for n in names)
    assert any(n.startswith("rnd_target/") for n in names)
    assert any(n.startswith("curiosity_optimizer/") and "iteration" in n and v > 0
               for n, v in saved)
    second = make_trainer(tmp_path, env, "Pyramids", settings, seed=4)
    second.restore_latest()
    restored = variables(second)
    assert names == [n for n, _ in restored]
    for (name, a), (_, b) in zip(saved, restored):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_an_unknown_signal_is_one_line_naming_the_known_ones(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("behaviors:\n  Basic:\n    trainer_type: ppo\n    reward_signals:\n"
                      "      curiousity: {strength: 0.1}\n")
    with pytest.raises(SystemExit) as exit_info:
        learn_main([str(config), "--env", "builtin:Basic", "--dry-run"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "reward_signals.curiousity: unknown key; allowed: extrinsic, curiosity, rnd" in err


def corridor_success(policy_name, env_seed=5):
    env = CorridorEnv(seed=env_seed, num_areas=8)
    (result,) = evaluate(env, make_policy(policy_name, env, seed=1), episodes=40).values()
    return result["mean_reward"]  # 1 per episode that reached the end


@pytest.mark.parametrize("signal", ["curiosity", "rnd"])
def test_novelty_finds_a_reward_random_play_never_gets(tmp_path, signal):
    assert corridor_success("random") <= 0.05
    env = CorridorEnv(seed=0, num_areas=8)
    env.reset()
    signals = {"extrinsic": {"gamma": 0.99},
               signal: {**INTRINSIC[signal], "learning_rate": 1e-3}}
    settings = trainer_settings(
        "Corridor", reward_signals=signals, max_steps=40000, time_horizon=40,
        hyperparameters={"batch_size": 64, "buffer_size": 512, "num_epoch": 3,
                         "learning_rate": 3e-3, "beta": 1e-2},
        network_settings={"hidden_units": 32, "num_layers": 1})
    trainer = make_trainer(tmp_path, env, "Corridor", settings)
    drive(env, trainer, 5000)
    trainer.save()
    assert corridor_success(str(tmp_path / "Corridor.onnx")) >= 0.8
