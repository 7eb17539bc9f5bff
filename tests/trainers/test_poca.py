"""MA-POCA: returns and baseline advantages by hand, credit after death learned, resume,
export and evaluation."""
import json
import os

import numpy as np
import pytest
import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import ActionSpec, ActionTuple, ObservationSpec, make
from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.processing import BufferKey, LogProbs, StreamField, Trajectory, stream_key
from tftrainers.settings import ConfigError

from .helpers import drive, make_trainer, manager_of, trainer_settings, variables

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "poca")


class Sacrifice(GroupAreaEnv):
    """Two agents; each step each may step forward (action 1). One that does leaves the
    group (dies); if exactly one did, the survivor's next step opens the door (action 0)
    for group reward 1. Both at once, or the survivor stepping forward too: nothing. Four
    steps at most. Only credit after death teaches the sacrifice: the one who dies never
    sees the reward it made possible."""

    name = "Sacrifice"
    agents_per_area = 2
    default_num_areas = 32
    max_episode_steps = 4

    def __init__(self, seed=0, num_areas=None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        a = self.num_areas
        self.alive = np.ones((a, 2), bool)
        self.clock = np.zeros(a, np.int64)
        self.episodes = np.zeros(a, np.int64)
        self.escapes = np.zeros(a, np.int64)

    def observation_specs(self):
        return [ObservationSpec((4,), "slot_clock_alone")]

    def action_spec(self):
        return ActionSpec.create_discrete([2])

    def _reset_agents(self, rows):
        areas = np.unique(rows // 2)
        self.alive[areas] = True
        self.clock[areas] = 0

    def _act_group(self, rows, actions):
        area, slot = np.divmod(rows, 2)
        step = np.zeros((self.num_areas, 2), bool)
        step[area, slot] = actions.discrete[:, 0] == 1
        acting = np.zeros(self.num_areas, bool)
        acting[area] = True
        alone = acting & (self.alive.sum(axis=1) == 1)
        escaped = alone & ~(step & self.alive).any(axis=1)
        self.clock[acting] += 1
        self.alive &= ~step
        nobody = acting & ~self.alive.any(axis=1)
        done = escaped | nobody | (alone & ~escaped)
        self.episodes += done
        self.escapes += escaped
        left = step[area, slot]
        return (np.zeros(len(rows), np.float32), escaped.astype(np.float32), left, done)

    def _observe(self, rows):
        area, slot = np.divmod(rows, 2)
        return [np.stack([slot == 0, slot == 1, self.clock[area] / 4.0,
                          self.alive[area].sum(axis=1) == 1], axis=1).astype(np.float32)]


def test_lambda_returns_and_baseline_advantages_by_hand(tmp_path):
    env = make("builtin:DungeonEscape", seed=0, num_areas=1)
    spec = env.behavior_specs["DungeonEscape"]
    settings = trainer_settings("DungeonEscape", trainer_type="poca",
                                hyperparameters={"lambd": 0.5},
                                reward_signals={"extrinsic": {"gamma": 0.5}})
    trainer = make_trainer(tmp_path, env, "DungeonEscape", settings, jit_compile=False)
    size = spec.observation_specs[0].shape[0]

    def trajectory(rewards, mates, group, done, group_done, agent):
        t = len(rewards)
        zeros = np.zeros((t, 0), np.float32)
        return Trajectory(
            obs=[np.zeros((t, size), np.float32)], next_obs=[np.zeros(size, np.float32)],
            actions=ActionTuple(zeros, np.zeros((t, 1), np.int32)),
            log_probs=LogProbs(zeros, np.zeros((t, 1), np.float32)),
            action_mask=np.ones((t, 5), np.float32), rewards=np.array(rewards, np.float32),
            values={}, memory=None, group_id=np.ones(t, np.int32),
            group_reward=np.array(group, np.float32), done=done, interrupted=False,
            agent_id=agent, teammate_obs=[np.zeros((t, 2, size), np.float32)],
            teammate_actions=ActionTuple(np.zeros((t, 2, 0), np.float32),
                                         np.zeros((t, 2, 1), np.int32)),
            teammate_mask=np.ones((t, 2), np.float32),
            groupmate_rewards=np.array(mates, np.float32),
            next_teammate_obs=[np.zeros((2, size), np.float32)],
            next_teammate_mask=np.ones(2, np.float32), group_done=group_done)

    # A member that died (its group goes on) and one whose group's episode ended.
    dead = trajectory([0, 0], [0, 0], [0, 0], done=True, group_done=False, agent=2)
    last = trajectory([1, 0], [0, 2], [0, 1], done=True, group_done=True, agent=0)
    critic_side = trainer.optimizer.critic_side
    critic_side.estimates = lambda batch: ({"extrinsic": np.array([1, 2, 1, 1], np.float32)},
                                         {"extrinsic": np.array([.5, .5, 0, 0], np.float32)})
    critic_side.group_value = lambda batch: {"extrinsic": np.array([4, 4], np.float32)}
    trainer.compute_targets([dead, last])
    # gamma = lambd = 0.5; G_t = r_t + gamma ((1 - lambd) V_{t+1} + lambd G_{t+1}).
    # Dead member: rewards 0, bootstrap V = 4 (its group goes on): G_1 = 0.5 * 4 = 2,
    # G_0 = 0.5 (0.5 * 2 + 0.5 * 2) = 1. Group ended: rewards own + mates' + group's =
    # [1, 3], no bootstrap: G_1 = 3, G_0 = 1 + 0.5 (0.5 * 1 + 0.5 * 3) = 2.
    buffer = trainer.buffer
    np.testing.assert_allclose(buffer[stream_key(StreamField.RETURNS, "extrinsic")], [1, 2, 2, 3])
    np.testing.assert_allclose(buffer[BufferKey.ADVANTAGES], [0.5, 1.5, 2, 3])  # G - b
    np.testing.assert_allclose(buffer[stream_key(StreamField.BASELINES, "extrinsic")],
                               [.5, .5, 0, 0])


@pytest.mark.parametrize("leaver_bootstrap, expected_obs, expected_mask", [
    ("group", [1, 4, 7], [[0, 1], [1, 1], [0, 0]]),  # ML-Agents': every member, itself too
    # The early leaver's V is its present teammate's alone; the others' are unchanged.
    ("remaining", [3, 4, 7], [[0, 0], [1, 1], [0, 0]]),
])
def test_what_a_leaver_bootstraps_from(tmp_path, leaver_bootstrap, expected_obs,
                                       expected_mask):
    env = make("builtin:DungeonEscape", seed=0, num_areas=1)
    spec = env.behavior_specs["DungeonEscape"]
    settings = trainer_settings("DungeonEscape", trainer_type="poca",
                                hyperparameters={"leaver_bootstrap": leaver_bootstrap},
                                reward_signals={"extrinsic": {"gamma": 0.5}})
    trainer = make_trainer(tmp_path, env, "DungeonEscape", settings, jit_compile=False)
    size = spec.observation_specs[0].shape[0]

    def trajectory(own, mates, mask, done, group_done, agent):
        zeros = np.zeros((1, 0), np.float32)
        return Trajectory(
            obs=[np.zeros((1, size), np.float32)], next_obs=[np.full(size, own, np.float32)],
            actions=ActionTuple(zeros, np.zeros((1, 1), np.int32)),
            log_probs=LogProbs(zeros, np.zeros((1, 1), np.float32)),
            action_mask=np.ones((1, 5), np.float32), rewards=np.zeros(1, np.float32),
            values={}, memory=None, group_id=np.ones(1, np.int32),
            group_reward=np.zeros(1, np.float32), done=done, interrupted=False,
            agent_id=agent, teammate_obs=[np.zeros((1, 2, size), np.float32)],
            teammate_actions=ActionTuple(np.zeros((1, 2, 0), np.float32),
                                         np.zeros((1, 2, 1), np.int32)),
            teammate_mask=np.ones((1, 2), np.float32), groupmate_rewards=np.zeros(1, np.float32),
            next_teammate_obs=[np.stack([np.full(size, m, np.float32) for m in mates])],
            next_teammate_mask=np.array(mask, np.float32), group_done=group_done)

    trajectories = [
        trajectory(1, [2, 3], [0, 1], done=True, group_done=False, agent=0),  # left early
        trajectory(4, [5, 6], [1, 1], done=False, group_done=False, agent=1),  # goes on
        trajectory(7, [8, 9], [0, 0], done=True, group_done=False, agent=2),  # left last
    ]
    seen = {}
    optimizer = trainer.optimizer.critic_side
    optimizer.estimates = lambda batch: ({"extrinsic": np.zeros(3, np.float32)},
                                         {"extrinsic": np.zeros(3, np.float32)})

    def group_value(batch):  # V of a group after the step: its first observation's value
        seen["obs"], seen["mask"] = batch.obs[0][:, 0].tolist(), batch.team_mask.tolist()
        return {"extrinsic": batch.obs[0][:, 0].astype(np.float32)}
    optimizer.group_value = group_value
    trainer.compute_targets(trajectories)
    assert seen == {"obs": expected_obs, "mask": expected_mask}
    # One step, no reward, no group end: G = gamma V(after) = 0.5 V.
    np.testing.assert_allclose(trainer.buffer[stream_key(StreamField.RETURNS, "extrinsic")],
                               0.5 * np.array(expected_obs))


@pytest.mark.parametrize("unity_steps", [False, True])
def test_poca_credits_the_sacrifice(tmp_path, unity_steps):
    # unity_steps: the dead member comes back in the step its group ends, as in Unity;
    # that step must still end the group's episode (no bootstrap into the next one).
    env = Sacrifice(seed=0, unity_steps=unity_steps)
    env.reset()
    settings = trainer_settings(
        "Sacrifice", trainer_type="poca",
        hyperparameters={"batch_size": 128, "buffer_size": 512, "learning_rate": 3e-3,
                         "num_epoch": 3, "learning_rate_schedule": "constant"},
        network_settings={"hidden_units": 32, "num_layers": 2},
        reward_signals={"extrinsic": {"gamma": 0.9}}, max_steps=14000, time_horizon=8)
    trainer = make_trainer(tmp_path, env, "Sacrifice", settings, jit_compile=False)
    random_env = Sacrifice(seed=1, unity_steps=unity_steps)
    random_env.reset()
    rng = np.random.default_rng(0)
    for _ in range(200):
        decision, _ = random_env.get_steps("Sacrifice")
        random_env.set_actions("Sacrifice", ActionTuple(
            np.zeros((len(decision), 0), np.float32),
            rng.integers(0, 2, (len(decision), 1)).astype(np.int32)))
        random_env.step()
    random = random_env.escapes.sum() / random_env.episodes.sum()
    # Group episodes that ended: by the env (areas it restarts, per env step) and by the
    # acting side (areas with group_done episode stats in a step).
    ends, seen, recorded = [], [0], [0]
    restart_next, record_episodes = env._restart_next, trainer.record_episodes
    manager = manager_of(trainer, env)
    manager_step = manager.step

    def env_counts(acting, ending):
        rows = restart_next(acting, ending)
        ends.append(len(rows) // 2)
        return rows

    def acting_side_counts(episodes):
        seen[0] += len(np.unique(episodes.agent_id[episodes.group_done] // 2))
        record_episodes(episodes)

    def counted_step(decision, terminal):
        recorded[0] += manager.recording
        return manager_step(decision, terminal)
    env._restart_next, trainer.record_episodes = env_counts, acting_side_counts
    manager.step = counted_step
    while not trainer.done:
        drive(env, trainer, 50)
    before = env.escapes.sum(), env.episodes.sum()
    drive(env, trainer, 100)  # the trained policy still samples: its own escape rate
    trained = (env.escapes.sum() - before[0]) / (env.episodes.sum() - before[1])
    assert trained >= 0.8 and trained >= random + 0.4, (trained, random)
    trainer.drain()
    # Recorded call i saw the steps of env step i (call 0: the reset).
    assert seen[0] == sum(ends[:recorded[0] - 1]) > 0  # every group end, each once


def test_restore_and_export(tmp_path):
    env = make("builtin:DungeonEscape", seed=0, num_areas=4)
    env.reset()
    settings = trainer_settings("DungeonEscape", trainer_type="poca",
                                network_settings={"hidden_units": 16, "normalize": True},
                                reward_signals={"extrinsic": {}, "curiosity": {"strength": 0.1}})
    first = make_trainer(tmp_path, env, "DungeonEscape", settings, seed=0, jit_compile=False)
    drive(env, first, 45)
    assert first.updates >= 2
    first.save()
    saved = variables(first)
    assert any("max_members" in name and value == 3 for name, value in saved)
    second = make_trainer(tmp_path, env, "DungeonEscape", settings, seed=5, jit_compile=False)
    second.restore_latest()
    restored = variables(second)
    assert [n for n, _ in saved] == [n for n, _ in restored]
    for (name, a), (_, b) in zip(saved, restored):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert second.rng.bit_generator.state == first.rng.bit_generator.state
    stats = first.last_update
    for name in ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Baseline Loss",
                 "Policy/Learning Rate", "Losses/Curiosity Forward Loss"):
        assert np.isfinite(stats[name]), name
    # The PPO diagnostics come out of POCA's update too (known answers: test_ppo_losses).
    assert stats["Policy/Approx KL"] >= 0.0 and 0.0 <= stats["Policy/Clip Fraction"] <= 1.0
    assert np.isfinite(stats["Losses/Explained Variance"])
    assert stats["Losses/Explained Variance"] <= 1.0


def test_learn_cli_exports_and_evaluates(tmp_path):
    with open(os.path.join(CONFIGS, "DungeonEscape.yaml")) as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["DungeonEscape"]
    behavior.update(max_steps=1100, summary_freq=1000)
    behavior["hyperparameters"].update(batch_size=256, buffer_size=512)
    path = tmp_path / "poca.yaml"
    path.write_text(yaml.safe_dump(config))
    results = str(tmp_path / "results")
    assert learn_main([str(path), "--run-id", "run", "--results-dir", results,
                       "--num-areas", "4"]) == 0
    run = os.path.join(results, "run")
    assert os.path.exists(os.path.join(run, "DungeonEscape.onnx"))
    assert os.listdir(os.path.join(run, "DungeonEscape", "saved_model"))
    with open(os.path.join(run, "run_logs", "DungeonEscape.csv")) as f:
        header = f.readline()
    for name in ("Environment/Group Cumulative Reward", "Policy/Extrinsic Baseline Estimate",
                 "Losses/Baseline Loss"):
        assert name in header
    env = make("builtin:DungeonEscape", seed=1, num_areas=4)
    (result,) = evaluate(env, make_policy(os.path.join(run, "DungeonEscape.onnx"), env),
                         episodes=8).values()
    assert "mean_group_reward" in result
    json.dumps(result)


def test_poca_refuses_odd_hidden_units(tmp_path):
    env = make("builtin:DungeonEscape", seed=0, num_areas=1)
    odd = trainer_settings("DungeonEscape", trainer_type="poca",
                           network_settings={"hidden_units": 30})
    with pytest.raises(ConfigError, match="hidden_units: 30 does not split into the critic's 4 "
                                          "attention heads; allowed: a multiple of 4"):
        make_trainer(tmp_path, env, "DungeonEscape", odd)


# ML-Agents' own poca config for its DungeonEscape example (config/poca/DungeonEscape.yaml).
MLAGENTS_DUNGEON_ESCAPE = """
behaviors:
  DungeonEscape:
    trainer_type: poca
    hyperparameters:
      batch_size: 1024
      buffer_size: 10240
      learning_rate: 0.0003
      beta: 0.01
      epsilon: 0.2
      lambd: 0.95
      num_epoch: 3
      learning_rate_schedule: constant
    network_settings:
      normalize: false
      hidden_units: 256
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 20000000
    time_horizon: 64
    summary_freq: 60000
"""


def test_mlagents_poca_config_loads_unchanged_with_its_defaults(tmp_path):
    from tftrainers.settings import POCASettings, load_run_options
    path = tmp_path / "DungeonEscape.yaml"
    path.write_text(MLAGENTS_DUNGEON_ESCAPE)
    settings = load_run_options(str(path)).behaviors["DungeonEscape"]
    assert settings.trainer_type == "poca" and settings.hyperparameters.beta == 0.01
    defaults = POCASettings()
    assert (defaults.beta, defaults.epsilon, defaults.lambd, defaults.num_epoch,
            defaults.batch_size, defaults.buffer_size, defaults.learning_rate) == (
        5e-3, 0.2, 0.95, 3, 1024, 10240, 3e-4)
    for name in ("DungeonEscape", "PushBlockCollab", "SimpleSpread"):
        options = load_run_options(os.path.join(CONFIGS, f"{name}.yaml"))
        assert {b.trainer_type for b in options.behaviors.values()} == {"poca"}
