"""The trainer base's contracts (docs/dev/architecture.md#trainer-base): the queue protocol
(one ``receive``, a table of kinds per trainer class), the context, the batch types."""
import dataclasses

import numpy as np
import pytest

from tests.trainers.helpers import make_trainer, trainer_settings
from tftrainers.acting import ActingStats, Labelled, TeacherEpisodes
from tftrainers.envs import make
from tftrainers.envs.unity.side_channels import EnvironmentStats
from tftrainers.processing import EpisodeStats, Trajectory
from tftrainers.trainers.base import Trainer, receives
from tftrainers.trainers.bc.trainer import BCTrainer
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.poca.optimizer import POCABatch
from tftrainers.trainers.ppo.trainer import PPOTrainer
from tftrainers.trainers.ppo.update import PPOBatch
from tftrainers.trainers.registry import create_trainer

BASE_KINDS = {Trajectory, EpisodeStats, ActingStats, EnvironmentStats}


def test_each_trainer_class_has_its_table_of_kinds():
    assert set(Trainer.handlers) == set(PPOTrainer.handlers) == BASE_KINDS
    assert set(BCTrainer.handlers) == BASE_KINDS | {Labelled, TeacherEpisodes}
    assert BCTrainer.handlers[Labelled] == "take_labelled"

    class Counting(PPOTrainer):  # a subclass replaces one handler, keeps the others
        @receives(EpisodeStats)
        def count_episodes(self, episodes):
            return None
    assert Counting.handlers[EpisodeStats] == "count_episodes"
    assert Counting.handlers[Trajectory] == "take_trajectory"
    assert PPOTrainer.handlers[EpisodeStats] == "record_episodes"  # the base's untouched


def test_receive_records_stats_returns_trajectories_and_names_an_unknown_kind(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=2)
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"), seed=5,
                           jit_compile=False)
    assert (trainer.seed, trainer.run_dir, trainer.context.seed) == (5, str(tmp_path), 5)
    episodes = EpisodeStats(agent_id=np.array([1, 2]),
                            cumulative_reward=np.array([0.5, 1.5], np.float32),
                            group_cumulative_reward=np.zeros(2, np.float32),
                            episode_length=np.array([3, 4]), interrupted=np.zeros(2, bool),
                            group_done=np.ones(2, bool))
    assert trainer.receive(episodes) is None
    assert list(trainer.reward_buffer) == [1.5]  # maxlen 1 until a curriculum sizes it
    assert trainer.receive(ActingStats(2.0, 4)) is None
    assert (trainer._entropy_sum, trainer._entropy_steps) == (2.0, 4)
    with pytest.raises(TypeError, match=r"^Basic: PPOTrainer receives no TeacherEpisodes; it "
                                        r"receives ActingStats, EnvironmentStats, "
                                        r"EpisodeStats, Trajectory$"):
        trainer.receive(TeacherEpisodes(episodes))


def test_the_context_is_frozen_and_create_trainer_keeps_the_old_call(tmp_path):
    context = TrainerContext(str(tmp_path), seed=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.seed = 4
    env = make("builtin:Basic", seed=0, num_areas=2)
    settings = trainer_settings("Basic")
    spec = env.behavior_specs["Basic"]
    old = create_trainer("Basic", spec, settings, str(tmp_path), seed=3, jit_compile=False)
    assert old.context == TrainerContext(str(tmp_path), seed=3, jit_compile=False)
    with pytest.raises(TypeError, match="seed belong in the TrainerContext"):
        create_trainer("Basic", spec, settings, context, seed=3)


def test_batches_are_declared_types():
    assert POCABatch._fields[:len(PPOBatch._fields)] == PPOBatch._fields
    assert POCABatch._fields[len(PPOBatch._fields):] == (
        "team_obs", "team_continuous_action", "team_discrete_action", "team_mask",
        "old_baselines")
    assert object not in POCABatch.__annotations__.values()
