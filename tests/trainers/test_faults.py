"""A run survives bad data, a failing env and a non-finite update; checkpoints stay finite;
--resume falls back past damaged checkpoints and names changed settings."""
import errno
import json
import os
import shutil
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tftrainers.run_setup as run_setup
from tftrainers.checkpoint import Checkpointer, CheckpointError
from tftrainers.cli import evaluate_main, learn_main
from tftrainers.envs import make
from tftrainers.settings import load_run_options
from tftrainers.trainers.finite import NonFiniteUpdateError

from .helpers import drive, make_trainer, trainer_settings, variables

CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 8, num_layers: 1, normalize: true}
    max_steps: 600
    time_horizon: 8
    summary_freq: 10000
    checkpoint_interval: 200
    keep_checkpoints: 5
env_settings: {env_path: "builtin:Basic", seed: 0}
tf_settings: {jit_compile: false}
"""


def write_config(tmp_path, text=CONFIG, name="c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


class Faulty:
    """Wraps an env; from its ``at``-th step on, ``fault(decision_steps)`` spoils the data
    (or raises, as a crashing simulator does)."""

    def __init__(self, env, at, fault):
        self.env, self.at, self.fault, self.count = env, at, fault, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self):
        self.count += 1
        self.env.step()

    def get_steps(self, name):
        decision, terminal = self.env.get_steps(name)
        if self.count >= self.at and len(decision):
            self.fault(decision)
        return decision, terminal


def nan_observation(decision):
    decision.obs[0][1, 3] = np.nan


def inf_reward(decision):
    decision.reward[2] = np.inf


def huge_reward(decision):
    decision.reward[:] = 3e38  # finite; the returns are not


def crash(decision):
    raise RuntimeError("the simulator lost its physics scene")


def checkpoint_entries(run):
    return Checkpointer(os.path.join(run, "Basic", "checkpoints"), "Basic").checkpoints()


def all_finite(run):
    settings = trainer_settings("Basic", network_settings={"hidden_units": 8,
                                                           "num_layers": 1, "normalize": True})
    trainer = make_trainer(os.path.join(run, "probe"), make("builtin:Basic"), "Basic", settings,
                           jit_compile=False, act_runtime="tensorflow")
    for entry in checkpoint_entries(run):
        Checkpointer.restore(entry["path"], trainer.trackables())
        if any(not np.isfinite(value).all() for _, value in variables(trainer)
               if value.dtype.kind == "f"):
            return False
    return True


@pytest.mark.parametrize("fault,message", [
    (nan_observation, "builtin:Basic at env step 40: behavior 'Basic' (decision steps): "
                      "agent 1: observation 0 ('position') holds nan at element 3; "
                      "checkpoints saved: Basic at step "),
    (inf_reward, "builtin:Basic at env step 40: behavior 'Basic' (decision steps): agent 2: "
                 "reward is inf; checkpoints saved: Basic at step "),
    (crash, "builtin:Basic raised RuntimeError in get_steps() at env step 40: the simulator "
            "lost its physics scene (--debug shows its traceback); checkpoints saved: Basic at "
            "step "),
])
def test_bad_env_data_and_env_crashes_save_first_then_one_line(tmp_path, monkeypatch, capsys,
                                                               fault, message):
    make_env = run_setup.make_env
    monkeypatch.setattr(run_setup, "make_env", lambda o, s: Faulty(make_env(o, s), 40, fault))
    results = str(tmp_path / "results")
    assert learn_main([write_config(tmp_path), "--run-id", "r", "--results-dir", results]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"tftrainers-learn: error: {message}")
    run = os.path.join(results, "r")
    steps = [e["step"] for e in checkpoint_entries(run)]
    # The interval checkpoint at ~200 steps, and the one saved at the fault (40 env steps of
    # up to 8 agents).
    assert len(steps) == 2 and 200 < steps[-1] <= 320 and err.endswith(f"at step {steps[-1]}")
    assert all_finite(run)


def test_a_non_finite_update_is_undone_and_refused(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=8)
    env.reset()
    settings = trainer_settings("Basic", hyperparameters={"buffer_size": 64})
    trainer = make_trainer(tmp_path, env, "Basic", settings, jit_compile=False)
    drive(env, trainer, 20)
    assert trainer.updates >= 1
    before = variables(trainer)
    assert any("iterations" in name and value > 0 for name, value in before)
    faulty = Faulty(env, 0, huge_reward)
    refused = (r"^the update at step \d+ was refused: Losses/\w+ Loss is nan; the weights and "
               r"optimizer state from before it are kept")
    # (NumPy's overflow warnings on the way are silenced by the runner; here too.)
    with np.errstate(over="ignore", invalid="ignore"), \
            pytest.raises(NonFiniteUpdateError, match=refused):
        drive(faulty, trainer, 40)
    after = variables(trainer)
    assert [n for n, _ in before] == [n for n, _ in after]
    for (name, a), (_, b) in zip(before, after):  # weights, Adam moments and step count
        np.testing.assert_array_equal(a, b, err_msg=name)
    trainer.save()  # the weights before the refused update are finite, and saved
    assert Checkpointer.restore(trainer.checkpointer.latest(), trainer.trackables())


def test_a_refused_update_stops_the_run_with_one_line(tmp_path, monkeypatch, capsys):
    make_env = run_setup.make_env
    monkeypatch.setattr(run_setup, "make_env", lambda o, s: Faulty(make_env(o, s), 10, huge_reward))
    results = str(tmp_path / "results")
    assert learn_main([write_config(tmp_path), "--run-id", "r", "--results-dir", results]) == 1
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "RuntimeWarning" not in out + err
    assert "tftrainers-learn: error: Basic: the update at step " in err
    assert "was refused: Losses/" in err and "; checkpoints saved: Basic at step" in err
    assert all_finite(os.path.join(results, "r"))


class _Weights(tf.Module):
    def __init__(self, value):
        super().__init__()
        self.w = tf.Variable(value, name="w")


def test_a_checkpoint_with_non_finite_weights_is_never_written(tmp_path):
    checkpointer = Checkpointer(str(tmp_path), "B", keep=1)
    good = checkpointer.save(1, {"net": _Weights([1.0, 2.0])}, {"step": 1})
    with pytest.raises(CheckpointError, match=r"step 2 not saved: net/w:0 holds NaN or inf; "
                                              r"the last complete checkpoint is .*B-1$"):
        checkpointer.save(2, {"net": _Weights([1.0, np.nan])}, {"step": 2})
    assert checkpointer.latest() == good
    assert sorted(os.listdir(tmp_path)) == ["B-1", "checkpoint.json"]


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_last_checkpoint(
        tmp_path, monkeypatch, one_line_error):
    fsync, calls = os.fsync, []

    def full_after_the_first_save(fd):
        calls.append(fd)
        if len(calls) > 2:  # the first save fsyncs its state and the index
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        fsync(fd)
    monkeypatch.setattr("tftrainers.checkpoint.os.fsync", full_after_the_first_save)
    results = str(tmp_path / "results")
    err = one_line_error(learn_main, [write_config(tmp_path), "--run-id", "r", "--results-dir",
                                      results])
    directory = os.path.join(results, "r", "Basic", "checkpoints")
    (first,) = [e["step"] for e in checkpoint_entries(os.path.join(results, "r"))]
    assert "(No space left on device); the last complete checkpoint is " \
           f"{directory}/Basic-{first}" in err and f"{directory}: cannot write the " in err
    assert sorted(os.listdir(directory)) == [f"Basic-{first}", "checkpoint.json"]  # no temp


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run with checkpoints at about steps 200, 400 and 600."""
    root = tmp_path_factory.mktemp("finished")
    config = write_config(root)
    assert learn_main([config, "--run-id", "r", "--results-dir", str(root)]) == 0
    steps = [e["step"] for e in checkpoint_entries(str(root / "r"))]
    # Steps are counted as trajectories reach the trainer: up to 8 agents x 8 steps late.
    assert len(steps) == 3 and 200 <= steps[0] < 264 and 600 <= steps[2] < 664
    return root / "r"


def copy_of(finished, tmp_path):
    shutil.copytree(finished, tmp_path / "results" / "r")
    return tmp_path / "results" / "r"


def steps_of(run):
    return [e["step"] for e in checkpoint_entries(str(run))]


def garbage_data(path):
    for name in os.listdir(path):
        if name.startswith("ckpt.data"):
            (path / name).write_bytes(b"garbage")


def state_without_rng(path):
    state = json.loads((path / "state.json").read_text())
    del state["trainer_rng"]
    (path / "state.json").write_text(json.dumps(state))


@pytest.mark.parametrize("damage,reason", [
    (garbage_data, ": the checkpoint cannot be read"),
    (state_without_rng, "/state.json: incomplete, missing 'trainer_rng'"),
])
def test_resume_falls_back_to_the_newest_intact_checkpoint(finished, tmp_path, capsys, damage,
                                                            reason):
    run = copy_of(finished, tmp_path)
    first, second, newest = steps_of(run)
    checkpoints = run / "Basic" / "checkpoints"
    damage(checkpoints / f"Basic-{newest}")
    config = write_config(tmp_path, CONFIG.replace("max_steps: 600", "max_steps: 640"))
    capsys.readouterr()
    assert learn_main([config, "--run-id", "r", "--results-dir", str(run.parent),
                       "--resume"]) == 0
    out = capsys.readouterr().out
    line = [line for line in out.splitlines() if "[WARNING]" in line]
    assert len(line) == 1 and line[0].startswith(
        f"[WARNING] Basic: {checkpoints}/Basic-{newest}{reason}")
    assert line[0].endswith(f"; using the newest intact checkpoint {checkpoints}/Basic-{second} "
                            f"(step {second}); the damaged ones are set aside as *.damaged")
    assert (checkpoints / f"Basic-{newest}.damaged").is_dir()
    # From ~400 to 640: the interval checkpoint at ~600 and the final one, nothing between.
    steps = steps_of(run)
    assert steps[:2] == [first, second] and len(steps) == 4
    assert 600 <= steps[2] < 640 <= steps[3]


def test_resume_with_no_readable_checkpoint_is_one_line(finished, tmp_path, capsys):
    run = copy_of(finished, tmp_path)
    for entry in checkpoint_entries(str(run)):
        garbage_data(type(run)(entry["path"]))
    with pytest.raises(SystemExit) as exit_info:
        learn_main([write_config(tmp_path), "--run-id", "r", "--results-dir", str(run.parent),
                    "--resume"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "no checkpoint of 'Basic' can be read; the newest: " in err
    assert f"Basic-{steps_of(run)[-1]}: the checkpoint cannot be read" in err
    assert "WARNING" not in out + err
    assert not any(name.endswith(".damaged") for name in os.listdir(run / "Basic" / "checkpoints"))


def test_a_resumed_run_writes_no_extra_checkpoint(finished, tmp_path):
    run = copy_of(finished, tmp_path)
    before = steps_of(run)  # the last one saved at an interval (~600)
    config = write_config(tmp_path, CONFIG.replace("max_steps: 600", "max_steps: 680"))
    assert learn_main([config, "--run-id", "r", "--results-dir", str(run.parent),
                       "--resume"]) == 0
    steps = steps_of(run)  # the next interval is 800: only the final checkpoint is new
    assert steps[:3] == before and len(steps) == 4 and 680 <= steps[3] < 690


def test_changed_network_settings_and_observations_are_named(finished, tmp_path, capsys,
                                                              one_line_error):
    run = copy_of(finished, tmp_path)
    wider = write_config(tmp_path, CONFIG.replace("hidden_units: 8", "hidden_units: 64"), "w.yaml")
    results = str(run.parent)
    for argv, message in [
        ([wider, "--run-id", "r", "--resume"],
         f"{run}: cannot resume behavior 'Basic': network_settings.hidden_units: the "
         f"checkpoint has 8, the config has 64"),
        ([wider, "--run-id", "n", "--initialize-from", "r"],
         f"{run}: cannot initialize from behavior 'Basic': network_settings.hidden_units: the "
         f"checkpoint has 8, the config has 64"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            learn_main(argv + ["--results-dir", results])
        out, err = capsys.readouterr()
        assert exit_info.value.code == 2 and err.strip() == f"tftrainers-learn: error: {message}"
        assert "WARNING" not in out
    spec = json.loads((run / "Basic" / "behavior_spec.json").read_text())
    spec["observations"][0]["shape"] = [21]  # a run of an env with another observation size
    (run / "Basic" / "behavior_spec.json").write_text(json.dumps(spec))
    err = one_line_error(learn_main, [write_config(tmp_path), "--run-id", "m",
                                      "--initialize-from", "r", "--results-dir", results])
    assert err.endswith("cannot initialize from behavior 'Basic': observation 0 ('position'): "
                        "the checkpoint has vector shape [21], the environment has vector shape "
                        "[20]")


def test_a_deleted_index_reads_the_checkpoint_folders_and_a_resume_indexes_them_again(
        finished, tmp_path, capsys):
    run = copy_of(finished, tmp_path)
    steps = steps_of(run)
    checkpoints = run / "Basic" / "checkpoints"
    (checkpoints / "checkpoint.json").unlink()  # every folder intact
    found = (f"[WARNING] Basic: {checkpoints}/checkpoint.json: missing; the checkpoints were "
             f"found from their folders; using the newest intact checkpoint "
             f"{checkpoints}/Basic-{steps[-1]} (step {steps[-1]})")
    capsys.readouterr()
    assert evaluate_main(["builtin:Basic", "--policy", str(run), "--episodes", "1"]) == 0
    assert found in capsys.readouterr().err.splitlines()
    config = write_config(tmp_path, CONFIG.replace("max_steps: 600", "max_steps: 680"))
    assert learn_main([config, "--run-id", "n", "--results-dir", str(run.parent),
                       "--initialize-from", "r"]) == 0
    assert found in capsys.readouterr().out.splitlines()
    assert learn_main([config, "--run-id", "r", "--results-dir", str(run.parent),
                       "--resume"]) == 0
    assert f"{found}; checkpoint.json is written again" in capsys.readouterr().out.splitlines()
    # None of the folders was taken for a leftover; the next save pruned nothing.
    assert steps_of(run)[:3] == steps and len(steps_of(run)) == 4 and steps_of(run)[3] >= 680


def test_a_resume_records_the_settings_it_trains_with_and_a_refused_one_changes_nothing(
        finished, tmp_path, capsys, one_line_error):
    run = copy_of(finished, tmp_path)
    recorded = (run / "configuration.yaml").read_text()
    results = str(run.parent)
    wider = write_config(tmp_path, CONFIG.replace("hidden_units: 8", "hidden_units: 64")
                         .replace("max_steps: 600", "max_steps: 680"), "w.yaml")
    err = one_line_error(learn_main, [wider, "--run-id", "r", "--results-dir", results,
                                      "--resume"])
    assert "network_settings.hidden_units: the checkpoint has 8, the config has 64" in err
    assert (run / "configuration.yaml").read_text() == recorded
    longer = write_config(tmp_path, CONFIG.replace("max_steps: 600", "max_steps: 680"))
    assert learn_main([longer, "--run-id", "r", "--results-dir", results, "--resume"]) == 0
    assert "[INFO] configuration.yaml updated for this resume: behaviors.Basic.max_steps " \
           "600 -> 680" in capsys.readouterr().out.splitlines()
    assert load_run_options(str(run / "configuration.yaml")).settings_for("Basic").max_steps \
        == 680 <= steps_of(run)[-1]
