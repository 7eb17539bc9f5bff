"""Every kind of policy trains: visual, LSTM, hybrid actions, several behaviors, --num-envs."""
import os
import textwrap

import numpy as np
import pytest

import tftrainers.run_setup as run_setup
from tftrainers.cli import learn_main
from tftrainers.envs import ActionSpec, BaseEnv, make
from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ObservationSpec

from .helpers import drive, make_trainer, trainer_settings


def updated(trainer):
    return trainer.updates >= 2 and all(np.isfinite(v) for v in trainer.last_update.values())


@pytest.mark.parametrize("env_id,env_args,network", [
    ("builtin:GridWorld", {"obs": "visual"}, {"vis_encode_type": "simple"}),
    ("builtin:GridWorld", {"obs": "visual"}, {"vis_encode_type": "resnet"}),
    ("builtin:GridWorld", {"obs": "grid"}, {"vis_encode_type": "match3"}),
    ("builtin:Hallway", {}, {"memory": {"sequence_length": 8, "memory_size": 16}}),
    ("builtin:Ball3D", {}, {"normalize": True}),
])
def test_policies_train(tmp_path, env_id, env_args, network):
    env = make(env_id, seed=0, num_areas=4, **env_args)
    env.reset()
    name = env_id.split(":")[1]
    trainer = make_trainer(tmp_path, env, name, trainer_settings(name, network_settings=network))
    drive(env, trainer, 80)
    assert updated(trainer), trainer.last_update
    assert trainer.optimizer.update_fn.tracing_count == 1


class HybridReach(AreaEnv):
    """Move a point on a line (continuous) and press the right one of 3 buttons (discrete)."""

    name = "Hybrid"
    agents_per_area = 4
    max_episode_steps = 10

    def __init__(self, seed=0, num_areas=None):
        super().__init__(seed, num_areas)
        self.position = np.zeros(self.n_agents)
        self.button = np.zeros(self.n_agents, np.int64)

    def observation_specs(self):
        return [ObservationSpec((4,), "position_and_button")]

    def action_spec(self):
        return ActionSpec(1, (3,))

    def _reset_agents(self, rows):
        self.position[rows] = self.rng.uniform(-1, 1, len(rows))
        self.button[rows] = self.rng.integers(0, 3, len(rows))

    def _act(self, rows, actions):
        self.position[rows] += 0.3 * actions.continuous[:, 0]
        reward = -np.abs(self.position[rows]) + (actions.discrete[:, 0] == self.button[rows])
        return reward.astype(np.float32), np.zeros(len(rows), bool)

    def _observe(self, rows):
        return [np.column_stack([self.position[rows], np.eye(3)[self.button[rows]]]).astype(
            np.float32)]


def test_hybrid_actions_train(tmp_path):
    env = HybridReach(num_areas=2)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Hybrid", trainer_settings("Hybrid"))
    drive(env, trainer, 80)
    assert updated(trainer)
    info, actions = trainer.managers[0].actor.act(env.get_steps("Hybrid")[0])
    assert actions.continuous.shape == (8, 1) and actions.discrete.shape == (8, 1)
    assert info.log_probs.continuous.shape == (8, 1) and info.log_probs.discrete.shape == (8, 1)


class TwoBehaviors(BaseEnv):
    """Basic and GridWorld side by side: two behaviors in one environment."""

    def __init__(self, seed=0):
        self.envs = {"Basic": make("builtin:Basic", seed=seed, num_areas=2),
                     "GridWorld": make("builtin:GridWorld", seed=seed, num_areas=2)}

    @property
    def behavior_specs(self):
        return {name: env.behavior_specs[name] for name, env in self.envs.items()}

    def reset(self):
        for env in self.envs.values():
            env.reset()

    def step(self):
        for env in self.envs.values():
            env.step()

    def get_steps(self, name):
        return self.envs[name].get_steps(name)

    def set_actions(self, name, actions):
        self.envs[name].set_actions(name, actions)


CONFIG = """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 32, buffer_size: 64, num_epoch: 1}
  network_settings: {hidden_units: 16, num_layers: 1}
  max_steps: 600
  time_horizon: 8
  summary_freq: 300
behaviors:
  Basic:
    max_steps: 400
env_settings:
  env_path: builtin:Basic
"""


def test_two_behaviors_and_several_env_instances(tmp_path, monkeypatch, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    results = str(tmp_path / "r")
    from tftrainers.envs.multi_env import MultiEnv
    monkeypatch.setattr(run_setup, "make_env", lambda options, seed: MultiEnv(
        [TwoBehaviors(seed + 1000 * k) for k in range(options.env_settings.num_envs)]))
    assert learn_main([str(config), "--run-id", "two", "--results-dir", results,
                       "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert "[INFO] Basic. Step: " in out and "[INFO] GridWorld. Step: " in out
    for name, max_steps in (("Basic", 400), ("GridWorld", 600)):
        checkpoints = os.listdir(os.path.join(results, "two", name, "checkpoints"))
        step = max(int(c.split("-")[-1]) for c in checkpoints if c.startswith(name))
        # Each behavior counts its own steps, as trajectories reach its trainer: at most one
        # time horizon (8) of each of its 4 agents (2 instances x 2 areas) past max_steps.
        assert max_steps <= step < max_steps + 4 * 8


def test_inference_runs_a_trained_policy_without_training(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace("max_steps: 400", "max_steps: 200"))
    results = str(tmp_path / "r")
    assert learn_main([str(config), "--run-id", "a", "--results-dir", results,
                       "--env", "builtin:Basic"]) == 0
    checkpoint_dir = os.path.join(results, "a", "Basic", "checkpoints")
    before = sorted(os.listdir(checkpoint_dir))
    assert learn_main([str(config), "--run-id", "a", "--results-dir", results,
                       "--env", "builtin:Basic", "--inference", "--resume"]) == 0
    assert sorted(os.listdir(checkpoint_dir)) == before  # nothing trained, nothing saved


def test_threaded_updates_run_beside_the_env_loop(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=8)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic", threaded=True))
    drive(env, trainer, 120)
    path = trainer.save()  # waits for an update still running
    assert trainer._update_thread is None and updated(trainer)
    assert os.path.isdir(path)
