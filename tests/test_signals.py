"""Real processes: SIGTERM/SIGINT mid-run and during start-up, a second signal during the
save, a second process on a run in use, and reading a run's checkpoints while it trains."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tftrainers.checkpoint import Checkpointer
from tftrainers.cli import learn_main
from tftrainers.runs import load_policy

BIN = os.path.dirname(sys.executable)
CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 8, num_layers: 1}
    max_steps: 100000000
    time_horizon: 8
    summary_freq: 1000
    checkpoint_interval: 300
    keep_checkpoints: 1
env_settings: {env_path: "builtin:Basic", seed: 0}
tf_settings: {jit_compile: false}
"""


def learn_command():
    path = os.path.join(BIN, "tftrainers-learn")
    if not os.path.exists(path):
        pytest.skip("tftrainers-learn is not installed next to this Python")
    return path


def wait_for(condition, timeout=120.0, process=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the process ended early ({process.returncode})")
        time.sleep(0.02)
    raise AssertionError("timed out")


def start(tmp_path, run_id, argv=None, script=None):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    results = tmp_path / "results"
    out, err = open(tmp_path / f"{run_id}.out", "w"), open(tmp_path / f"{run_id}.err", "w")
    args = [str(config), "--run-id", run_id, "--results-dir", str(results), *(argv or [])]
    command = [sys.executable, "-c", script, *args] if script else [learn_command(), *args]
    process = subprocess.Popen(command, stdout=out, stderr=err, env={
        **os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return process, config, results / run_id


def outputs(tmp_path, run_id):
    return ((tmp_path / f"{run_id}.out").read_text(), (tmp_path / f"{run_id}.err").read_text())


def latest_step(run):
    entries = Checkpointer(str(run / "Basic" / "checkpoints"), "Basic").checkpoints()
    return entries[-1]["step"] if entries else None


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    """A run that trains until SIGTERM, saving (and pruning) every 300 steps."""
    tmp_path = tmp_path_factory.mktemp("training")
    process, config, run = start(tmp_path, "r")
    wait_for(lambda: (latest_step(run) or 0) >= 600, process=process)
    yield process, config, run, tmp_path
    if process.poll() is None:
        process.kill()
        process.wait()


def test_reading_a_run_while_it_trains_always_gets_a_complete_checkpoint(training):
    # Every save prunes the checkpoint before it (keep_checkpoints: 1), so a reader that
    # took the newest from the index often finds it half deleted (2-3 in 600 reads failed
    # before restore_newest read the index again).
    process, _, run, _ = training
    policy, step = load_policy(str(run), "Basic", with_step=True)
    checkpointer = Checkpointer(str(run / "Basic" / "checkpoints"), "Basic")
    steps, reads = {step}, 0
    # Until the reads have spanned a few saves (each save also exports ONNX and a
    # SavedModel: seconds apart on a loaded machine).
    end = time.monotonic() + 120
    while time.monotonic() < end and (len(steps) < 3 or reads < 20):
        entry, _, skipped = checkpointer.restore_newest(policy.trackables())
        steps.add(entry["step"])
        reads += 1
        assert not skipped
    assert process.poll() is None and len(steps) >= 3 and reads >= 20


def test_a_second_process_on_a_run_in_use_is_refused(training, one_line_error):
    process, config, run, _ = training
    for flags in ([], ["--force"], ["--resume"]):
        err = one_line_error(learn_main, [str(config), "--run-id", "r", "--results-dir",
                                          str(run.parent), *flags])
        assert f"the run is in use by process {process.pid}" in err
    assert process.poll() is None


def test_sigterm_mid_run_saves_and_exits_143(training):
    process, _, run, tmp_path = training
    before = latest_step(run)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 143
    out, err = outputs(tmp_path, "r")
    saved = latest_step(run)
    assert f"[INFO] Interrupted by SIGTERM: checkpoints saved: Basic at step {saved}; " \
           f"continue with --resume." in out
    assert saved >= before and "Traceback" not in err
    with open(run / "Basic" / "checkpoints" / f"Basic-{saved}" / "state.json") as f:
        assert json.load(f)["step"] == saved


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_start_up_is_one_line(tmp_path, signum):
    process, _, run = start(tmp_path, "s")
    wait_for(lambda: (run / "configuration.yaml").exists(), process=process)
    process.send_signal(signum)  # TensorFlow is still importing
    assert process.wait(timeout=60) == 128 + signum
    _, err = outputs(tmp_path, "s")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    name = signal.Signals(signum).name
    assert err.strip().splitlines()[-1] == \
        f"tftrainers-learn: interrupted by {name} before training started; nothing to save"


SLOW_SAVE = """
import sys, time
import tensorflow as tf
from tftrainers import signals
from tftrainers.trainers.on_policy import OnPolicyTrainer

def requested():
    return signals._active is not None and signals._active.requested

trainer_save = OnPolicyTrainer.save
def save(self):
    if requested():  # the save after the signal writes, even right after an interval save
        self._saved_step = -1
    return trainer_save(self)
OnPolicyTrainer.save = save

write = tf.train.Checkpoint.write
def slow_write(self, prefix, *args, **kwargs):
    out = write(self, prefix, *args, **kwargs)
    if requested():  # mid-save: written under its temporary name, not renamed yet
        open(sys.argv[1] + ".saving", "w").close()
        time.sleep(60)
    return out
tf.train.Checkpoint.write = slow_write

sys.argv = ["tftrainers-learn"] + sys.argv[1:]
from tftrainers.cli import learn
learn()
"""


def test_a_second_signal_during_the_save_exits_at_once_and_keeps_the_last_checkpoint(tmp_path):
    process, config, run = start(tmp_path, "d", script=SLOW_SAVE)
    wait_for(lambda: (latest_step(run) or 0) >= 300, process=process)
    process.send_signal(signal.SIGINT)
    wait_for(lambda: os.path.exists(f"{config}.saving"), timeout=60, process=process)
    kept = latest_step(run)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 130
    assert time.monotonic() - started < 10  # not after the 60 s save
    _, err = outputs(tmp_path, "d")
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == \
        "tftrainers-learn: SIGINT again: stopped at once; the last complete checkpoint is kept"
    assert latest_step(run) == kept
    _, step = load_policy(str(run), "Basic", with_step=True)
    assert step == kept
    assert any(name.startswith(".tmp-") for name in os.listdir(run / "Basic" / "checkpoints"))


# SIGINT at a chosen moment of start-up, counted in audit events after the command's
# handlers are installed: the ``n``-th module imported (TensorFlow's, Keras', the envs'), the
# ``n``-th ``sys._getframe`` (called inside TensorFlow's and Keras' functions: mid-function
# moments), the ``n``-th rename of a temporary file (``write_atomically`` of
# configuration.yaml and behavior_spec.json); and one moment in time. The handler runs in
# the hook, so the signal lands just before the call that raised the event.
AT_MOMENT = """
import os, signal, sys
from tftrainers import signals

event_name, prefix, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = [0]

def hook(event, args):
    if seen[0] >= at or event != event_name or signals._active is None:
        return
    if prefix and prefix not in str(args[0]):
        return
    seen[0] += 1
    if seen[0] == at:
        os.kill(os.getpid(), signal.SIGINT)

sys.addaudithook(hook)
sys.argv = ["tftrainers-learn"] + sys.argv[4:]
from tftrainers.cli import learn
learn()
"""

START_UP_CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 256}
    network_settings: {hidden_units: 20, num_layers: 2}
    max_steps: 100000000
    time_horizon: 64
    summary_freq: 2000
env_settings: {env_path: "builtin:Basic"}
"""

START_UP_MOMENTS = [("import", "", n) for n in (1, 200, 900, 1800, 2600)] \
    + [("sys._getframe", "", n) for n in (3000, 7000)] \
    + [("os.rename", ".tmp-", 1), ("os.rename", ".tmp-", 2), ("time", "", 2)]


def half_written(run):
    """Temporary files, checkpoint folders the index does not list or that are incomplete."""
    found = [os.path.join(root, name) for root, dirs, files in os.walk(run)
             for name in dirs + files if ".tmp-" in name]
    checkpoints = run / "Basic" / "checkpoints"
    if checkpoints.exists():
        listed = {os.path.basename(e["path"]) for e in
                  Checkpointer(str(checkpoints), "Basic").checkpoints()}
        on_disk = {name for name in os.listdir(checkpoints) if name != "checkpoint.json"}
        found += sorted(listed ^ on_disk)
        found += [name for name in listed if not (checkpoints / name / "state.json").exists()]
    return found


@pytest.mark.parametrize("event,prefix,at", START_UP_MOMENTS,
                         ids=[f"{e}-{p or 'any'}-{n}" for e, p, n in START_UP_MOMENTS])
def test_ctrl_c_at_any_moment_of_start_up_is_one_line_and_exit_130(tmp_path, event, prefix, at):
    # 1 in 8 Ctrl-C in the first seconds once ended with a traceback: raised inside an
    # import it left TensorFlow half-built (an ``ApiDefMap.__del__`` traceback), inside
    # ``write_atomically`` a temporary file in the run folder.
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(START_UP_CONFIG))
    run = tmp_path / "results" / "s"
    args = [str(config), "--run-id", "s", "--results-dir", str(run.parent)]
    out, err = open(tmp_path / "out", "w"), open(tmp_path / "err", "w")
    moment = [] if event == "time" else [event, prefix, str(at)]
    command = [learn_command(), *args] if event == "time" else \
        [sys.executable, "-c", AT_MOMENT, *moment, *args]
    process = subprocess.Popen(command, stdout=out, stderr=err,
                               env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        # A moment the start-up never reaches (fewer imports here) ends as a late Ctrl-C.
        code = process.wait(timeout=at if event == "time" else 40)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
    if "[INFO] Interrupted by SIGINT: checkpoints saved: Basic at step" not in out:
        assert err.strip().splitlines() == [
            "tftrainers-learn: interrupted by SIGINT before training started; nothing to save"]
    assert half_written(run) == []
