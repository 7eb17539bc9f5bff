"""The run folder: run ids are names, --force deletes only runs of ours, one process per
run (flock), unwritable results folders, and leftovers of killed runs."""
import errno
import os
import subprocess
import sys
import textwrap

import pytest

from tftrainers.cli import learn_main
from tftrainers.run_folder import LOCK_FILE, RunError, check_run_id

CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 8, num_layers: 1}
    max_steps: 200
    time_horizon: 8
    summary_freq: 1000
env_settings: {env_path: "builtin:Basic", seed: 0}
tf_settings: {jit_compile: false}
"""


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    return str(path)


@pytest.mark.parametrize("run_id,problem", [
    ("", "is empty"), (".", "is results_dir itself"), ("..", "is the folder above results_dir"),
    ("../x", "contains a path separator"), ("a/b", "contains a path separator"),
    ("a\\b", "contains a path separator"), ("/tmp/x", "is an absolute path"),
])
def test_unsafe_run_ids_are_refused_and_nothing_is_deleted(tmp_path, config, one_line_error,
                                                           run_id, problem):
    results = tmp_path / "results"
    (results / "other").mkdir(parents=True)
    (results / "other" / "configuration.yaml").write_text("x")
    err = one_line_error(learn_main, [config, "--run-id", run_id, "--results-dir", str(results),
                                      "--force"])
    assert f"run id {run_id!r} {problem}; allowed: a folder name inside results_dir" in err
    assert (results / "other" / "configuration.yaml").exists() and os.path.exists(config)


def test_check_run_id_accepts_names():
    assert check_run_id("ppo-3 (seed 1)") == "ppo-3 (seed 1)"
    with pytest.raises(RunError):
        check_run_id(None)


def test_force_deletes_only_runs_of_ours(tmp_path, config, one_line_error):
    results = tmp_path / "results"
    (results / "mine").mkdir(parents=True)
    (results / "mine" / "precious.txt").write_text("keep me")
    err = one_line_error(learn_main, [config, "--run-id", "mine", "--results-dir", str(results),
                                      "--force"])
    assert "--force deletes only a run folder of tftrainers (with configuration.yaml) or an " \
           "empty one; this folder holds precious.txt" in err
    assert (results / "mine" / "precious.txt").read_text() == "keep me"
    assert not (results / "mine" / LOCK_FILE).exists()  # nothing written into it either
    os.symlink(results / "mine", results / "link")
    assert "is a symbolic link" in one_line_error(
        learn_main, [config, "--run-id", "link", "--results-dir", str(results), "--force"])
    (results / "file").write_text("x")
    assert "exists and is not a folder" in one_line_error(
        learn_main, [config, "--run-id", "file", "--results-dir", str(results), "--force"])


def test_results_dir_that_cannot_be_written(tmp_path, config, one_line_error, monkeypatch):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    err = one_line_error(learn_main, [config, "--run-id", "r", "--results-dir",
                                      str(a_file / "results")])
    assert err.endswith(f"{a_file / 'results' / 'r'}: cannot create the run folder (Not a "
                        f"directory)")

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
    monkeypatch.setattr("tftrainers.run_folder.os.makedirs", read_only)
    err = one_line_error(learn_main, [config, "--run-id", "r", "--results-dir",
                                      str(tmp_path / "ro")])
    assert "cannot create the run folder (Read-only file system)" in err


HOLD_LOCK = """
import fcntl, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()} {socket.gethostname()}\\n".encode())
print("locked", flush=True)
time.sleep(120)
"""


def test_a_run_in_use_is_refused_naming_the_process_and_a_dead_ones_lock_is_taken_over(
        tmp_path, config, one_line_error):
    results = tmp_path / "results"
    assert learn_main([config, "--run-id", "r", "--results-dir", str(results)]) == 0
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(results / "r" / LOCK_FILE)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for flags in ([], ["--force"], ["--resume"]):
            err = one_line_error(learn_main, [config, "--run-id", "r", "--results-dir",
                                              str(results), *flags])
            assert err.endswith(f"the run is in use by process {holder.pid} on host "
                                f"{os.uname().nodename}; wait for it to end or stop it first")
        assert (results / "r" / "configuration.yaml").exists()  # --force deleted nothing
    finally:
        holder.kill()
        holder.wait()
    assert learn_main([config, "--run-id", "r", "--results-dir", str(results), "--force"]) == 0


def test_leftovers_of_killed_runs_are_removed_at_the_next_start(tmp_path, config, capsys):
    results = tmp_path / "results"
    assert learn_main([config, "--run-id", "r", "--results-dir", str(results)]) == 0
    run = results / "r"
    checkpoints = run / "Basic" / "checkpoints"
    kept = sorted(os.listdir(checkpoints))
    folders = [checkpoints / ".tmp-Basic-300-4242", checkpoints / "Basic-150",  # unindexed
               run / "Basic" / "saved_model.tmp-4242"]
    files = [checkpoints / "checkpoint.json.tmp-4242", run / "Basic" / ".tmp-x.onnx",
             run / "Basic.onnx.tmp-4242"]
    for path in folders:
        path.mkdir()
    for path in files:
        path.write_text("half")
    capsys.readouterr()
    # The run is finished: resuming it only opens it (and cleans it).
    assert learn_main([config, "--run-id", "r", "--results-dir", str(results), "--resume"]) == 0
    assert "[INFO] Removed 6 leftover(s) of an interrupted run" in capsys.readouterr().out
    assert sorted(os.listdir(checkpoints)) == kept
    assert not any(p.exists() for p in folders + files)
