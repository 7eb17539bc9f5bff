"""Checkpoints: Ctrl-C saves, --resume continues exactly, restore gives identical state."""
import csv
import json
import os
import textwrap

import numpy as np
import pytest

import tftrainers.run_setup as run_setup
from tftrainers.checkpoint import Checkpointer, CheckpointError
from tftrainers.cli import learn_main
from tftrainers.envs import make

from .helpers import SigintAfter, drive, make_trainer, manager_of, trainer_settings, variables

CONFIG = """
behaviors:
  Basic:
    trainer_type: ppo
    hyperparameters: {batch_size: 32, buffer_size: 128}
    network_settings: {hidden_units: 16, num_layers: 1, normalize: true}
    max_steps: 3000
    time_horizon: 8
    summary_freq: 500
    checkpoint_interval: 1000
    keep_checkpoints: 2
env_settings:
  env_path: builtin:Basic
  seed: 1
"""


def checkpoint_steps(results, behavior="Basic"):
    directory = os.path.join(results, "run", behavior, "checkpoints")
    return [e["step"] for e in Checkpointer(directory, behavior).checkpoints()]


def test_ctrl_c_saves_and_resume_finishes_at_max_steps(tmp_path, monkeypatch, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    results = str(tmp_path / "results")
    make_env = run_setup.make_env
    monkeypatch.setattr(run_setup, "make_env", lambda o, s: SigintAfter(make_env(o, s), 180))
    # 128 + SIGINT, after saving (the README's exit codes)
    assert learn_main([str(config), "--run-id", "run", "--results-dir", results]) == 130
    assert "Interrupted by SIGINT: checkpoints saved: Basic at step" in capsys.readouterr().out
    steps = checkpoint_steps(results)
    interrupted_at = steps[-1]
    assert 1000 < interrupted_at < 3000  # saved at Ctrl-C, between two intervals

    monkeypatch.setattr(run_setup, "make_env", make_env)
    assert learn_main([str(config), "--run-id", "run", "--results-dir", results,
                       "--resume"]) == 0
    steps = checkpoint_steps(results)
    assert len(steps) == 2  # keep_checkpoints
    assert 3000 <= steps[-1] < 3000 + 8  # never doubled: one env step past max_steps at most
    with open(os.path.join(results, "run", "run_logs", "Basic.csv")) as f:
        logged = [int(row["step"]) for row in csv.DictReader(f)]
    assert logged == sorted(logged) and logged[-1] >= 3000
    with open(os.path.join(results, "run", "Basic", "checkpoints", "checkpoint.json")) as f:
        assert json.load(f)["checkpoints"][-1]["name"] == f"Basic-{steps[-1]}"


def test_restore_gives_identical_weights_optimizer_normalizer_and_rng(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=8)
    env.reset()
    settings = trainer_settings("Basic", network_settings={"normalize": True})
    first = make_trainer(tmp_path, env, "Basic", settings, seed=0)
    drive(env, first, 120)  # several updates: Adam slots and normalizer are not initial
    first.save()
    saved = variables(first)
    assert any("iteration" in name and value > 0 for name, value in saved)

    second = make_trainer(tmp_path, env, "Basic", settings, seed=5)
    assert not all(np.array_equal(a, b) for (_, a), (_, b) in zip(saved, variables(second)))
    second.restore_latest()
    restored = variables(second)
    assert [n for n, _ in saved] == [n for n, _ in restored]
    for (name, a), (_, b) in zip(saved, restored):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert second.step == first.step
    second_actor = manager_of(second, env).actor
    assert second_actor.rng.bit_generator.state == first.managers[0].actor.rng.bit_generator.state
    assert second_actor.version == second.version >= first.version
    assert second.rng.bit_generator.state == first.rng.bit_generator.state


def test_initialize_from_copies_weights_and_starts_at_zero(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=8)
    env.reset()
    settings = trainer_settings("Basic")
    source = make_trainer(tmp_path / "src", env, "Basic", settings)
    drive(env, source, 60)
    source.save()
    target = make_trainer(tmp_path / "dst", env, "Basic", settings, seed=9)
    target.initialize_from(str(tmp_path / "src"))
    assert target.step == 0
    for a, b in zip(source.policy.actor.weights, target.policy.actor.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_corrupted_checkpoint_is_named(tmp_path):
    env = make("builtin:Basic", num_areas=2)
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"))
    path = trainer.save()
    for name in os.listdir(path):
        if name.startswith("ckpt.data"):
            with open(os.path.join(path, name), "wb") as f:
                f.write(b"garbage")
    with pytest.raises(CheckpointError, match=r"Basic-0: the checkpoint cannot be read"):
        make_trainer(tmp_path, env, "Basic", trainer_settings("Basic")).restore_latest()


def test_an_interrupted_save_leaves_the_previous_checkpoint_in_place(tmp_path, monkeypatch):
    env = make("builtin:Basic", num_areas=2)
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"))
    first = trainer.save()
    trainer.step = 100

    def crash(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("tftrainers.checkpoint.os.rename", crash)
    with pytest.raises(KeyboardInterrupt):
        trainer.save()
    assert trainer.checkpointer.latest() == first
    Checkpointer.restore(first, trainer.trackables())
