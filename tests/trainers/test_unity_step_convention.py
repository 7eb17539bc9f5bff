"""Every trainer on Unity's step convention (env arg ``unity_steps=true``;
docs/dev/architecture.md#env-api): an
agent that ends restarts in the same step, listed in its terminal and decision steps with
the same id, and group members that left early come back in the step their group ends.
The built-ins' default convention (a finished agent sits out a step) is what the other
trainer tests run on; POCA's learning test runs on both (test_poca.py)."""
import csv
import os

import numpy as np
import pytest
import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import ActionSpec, ObservationSpec, make
from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.evaluate import RandomPolicy, evaluate
from tftrainers.stats import GROUP_CUMULATIVE_REWARD, StatsWriter

from .helpers import drive, make_trainer, trainer_settings

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BASIC_DEMO = os.path.join(ROOT, "configs", "demos", "Basic.demo")


def basic_return(policy_of_env, episodes=40):
    env = make("builtin:Basic", seed=11, unity_steps=True)
    return evaluate(env, policy_of_env(env), episodes=episodes)["Basic"]["mean_reward"]


def student(trainer):
    actor = trainer.policy.make_actor("tensorflow", seed=3)
    return lambda env: (lambda name, decision: actor.act(decision)[1])


def train_on_unity_basic(tmp_path, settings, env_steps=None):
    env = make("builtin:Basic", seed=0, unity_steps=True)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", settings, seed=0)
    if env_steps:
        drive(env, trainer, env_steps)
    while not trainer.done:
        drive(env, trainer, 100)
    return trainer


@pytest.fixture(scope="module")
def random_basic():
    return basic_return(lambda env: RandomPolicy(env, seed=0))


def ppo_basic(max_steps, reward_signals):
    # configs/ppo/Basic.yaml's hyperparameters.
    return trainer_settings(
        "Basic", hyperparameters={"batch_size": 32, "buffer_size": 256, "beta": 5e-3,
                                  "learning_rate": 3e-4, "num_epoch": 3},
        network_settings={"hidden_units": 20, "num_layers": 2}, reward_signals=reward_signals,
        max_steps=max_steps, time_horizon=64, summary_freq=5000)


def test_ppo_learns_basic(tmp_path, random_basic):
    trainer = train_on_unity_basic(tmp_path, ppo_basic(15000, {"extrinsic": {"gamma": 0.9}}))
    trained = basic_return(student(trainer))
    assert trained >= 0.6 and trained >= random_basic + 0.4, (trained, random_basic)


def test_gail_alone_learns_basic_from_the_demo(tmp_path, random_basic):
    gail = {"gamma": 0.9, "use_actions": True, "demo_path": BASIC_DEMO,
            "network_settings": {"hidden_units": 128}}
    trainer = train_on_unity_basic(tmp_path, ppo_basic(15000, {"gail": gail}))
    trained = basic_return(student(trainer))
    assert trained >= 0.6 and trained >= random_basic + 0.4, (trained, random_basic)


def test_bc_teacher_mode_learns_basic(tmp_path, random_basic):
    settings = trainer_settings(
        "Basic", trainer_type="bc",
        hyperparameters={"teacher": "heuristic", "batch_size": 64, "buffer_size": 4000,
                         "num_epoch": 3, "batches_per_epoch": 10, "learning_rate": 3.0e-3},
        network_settings={"hidden_units": 20, "num_layers": 2}, max_steps=2500,
        time_horizon=8, summary_freq=1000)
    trainer = train_on_unity_basic(tmp_path, settings, env_steps=400)
    assert trainer.labels > 1000
    assert basic_return(student(trainer)) > random_basic + 0.6


class Relay(GroupAreaEnv):
    """Two members an area. Member 0 leaves (dies) after its first step, whatever it does;
    member 1's second step ends the group's episode, with group reward 1 if it chose action
    1. Every group end thus has a member that left early: with ``unity_steps`` it is back,
    with its old id, in the decision steps of the step its group ends."""

    name = "Relay"
    agents_per_area = 2
    default_num_areas = 8
    max_episode_steps = 10

    def __init__(self, seed=0, num_areas=None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.clock = np.zeros(self.num_areas, np.int64)

    def observation_specs(self):
        return [ObservationSpec((3,), "slot_clock")]

    def action_spec(self):
        return ActionSpec.create_discrete([2])

    def _reset_agents(self, rows):
        self.clock[np.unique(rows // 2)] = 0

    def _act_group(self, rows, actions):
        area, slot = np.divmod(rows, 2)
        self.clock[np.unique(area)] += 1
        done = np.zeros(self.num_areas, bool)
        done[area] = self.clock[area] == 2
        group_reward = np.zeros(self.num_areas, np.float32)
        last = done[area] & (slot == 1)
        group_reward[area[last]] = actions.discrete[last, 0] == 1
        return np.zeros(len(rows), np.float32), group_reward, slot == 0, done

    def _observe(self, rows):
        area, slot = np.divmod(rows, 2)
        return [np.stack([slot == 0, slot == 1, self.clock[area] / 2.0], axis=1).astype(
            np.float32)]


class Summaries(StatsWriter):
    def __init__(self):
        self.written = []

    def write(self, category, step, summaries, steps_per_second, elapsed):
        self.written.append(summaries)


@pytest.mark.parametrize("unity_steps", [False, True])
def test_poca_reports_every_group_end_in_every_summary_and_learns(tmp_path, unity_steps):
    env = Relay(seed=0, unity_steps=unity_steps)
    env.reset()
    settings = trainer_settings(
        "Relay", trainer_type="poca",
        hyperparameters={"batch_size": 64, "buffer_size": 256, "learning_rate": 3e-3,
                         "learning_rate_schedule": "constant"},
        network_settings={"hidden_units": 16, "num_layers": 1},
        reward_signals={"extrinsic": {"gamma": 0.9}}, max_steps=3000, time_horizon=8,
        summary_freq=300)
    summaries = Summaries()
    trainer = make_trainer(tmp_path, env, "Relay", settings, writers=[summaries],
                           jit_compile=False)
    while not trainer.done:
        drive(env, trainer, 50)
    # Every summary that saw episodes end (all but the final, empty one) saw group ends.
    ended = [w for w in summaries.written if "Environment/Cumulative Reward" in w]
    assert len(ended) >= 9
    for written in ended:
        # About 100 episode ends a summary: each group episode is two (the member that
        # left early and the one that ends the group) and one group end; a summary may
        # cut the 8 areas' episodes between their two ends.
        episodes = written["Environment/Cumulative Reward"]
        group = written.get(GROUP_CUMULATIVE_REWARD)
        assert group is not None and abs(2 * group.count - episodes.count) <= 2 * 8
        assert 0.0 <= group.mean <= 1.0
    assert ended[-1][GROUP_CUMULATIVE_REWARD].mean >= 0.9  # learned: member 1 picks 1


@pytest.mark.parametrize("workers", ["inline", "process"])
def test_a_poca_run_on_unity_steps_reports_the_group_reward(tmp_path, workers):
    # End to end, in the learner's process and in env worker processes: DungeonEscape
    # ends every area's episode within 100 env steps, so every summary (1,200 agent steps:
    # 4 areas of 3 members) sees group ends.
    with open(os.path.join(ROOT, "configs", "poca", "DungeonEscape.yaml")) as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["DungeonEscape"]
    behavior.update(max_steps=6000, summary_freq=1200)
    behavior["hyperparameters"].update(batch_size=256, buffer_size=1024)
    config.setdefault("env_settings", {})["env_args"] = {"unity_steps": True}
    path = tmp_path / "poca.yaml"
    path.write_text(yaml.safe_dump(config))
    results = str(tmp_path / "results")
    num_envs = ["--num-envs", "2", "--num-areas", "2"] if workers == "process" else [
        "--num-areas", "4"]
    assert learn_main([str(path), "--run-id", "run", "--results-dir", results,
                       "--workers", workers, *num_envs]) == 0
    with open(os.path.join(results, "run", "run_logs", "DungeonEscape.csv")) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 3
    group = [row.get("Environment/Group Cumulative Reward") for row in rows]
    assert all(g not in (None, "") for g in group), group
    assert all(0.0 <= float(g) <= 1.0 for g in group)  # one escape at most per episode
