"""The console is ours alone: every line the installed commands print on a fresh install is
one of our formats, and errors, usage mistakes and --dry-run answer without TensorFlow.

The commands run as a user runs them (subprocesses of the installed scripts) with the
environment a fresh shell has: no TF_CPP_MIN_LOG_LEVEL (the test suite sets one).
"""
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tftrainers.console import cpp_log_severity, stderr_without

BIN = os.path.dirname(sys.executable)
CONFIG = """
behaviors:
  Basic:
    trainer_type: ppo
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 300
    summary_freq: 100
env_settings:
  env_path: builtin:Basic
"""
# Our formats: ML-Agents-style tagged lines, argparse-style errors, evaluate's summary.
OURS = re.compile(r"\[(INFO|NOTE|WARNING)\] |tftrainers-(learn|evaluate|export): error: "
                  r"|\S+: \d+ episodes, mean reward -?\d")
IMPORT_TIME = "import time:"


def command(name, *args, import_times=False):
    path = os.path.join(BIN, name)
    if not os.path.exists(path):
        pytest.skip(f"{name} is not installed next to this Python")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if import_times:
        env["PYTHONPROFILEIMPORTTIME"] = "1"
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=600, env=env)


def assert_ours(lines, stream):
    strangers = [line for line in lines if not OURS.match(line)]
    assert not strangers, f"lines on {stream} that are not ours: {strangers}"


def imported_modules(stderr):
    """Module names from -X importtime lines, and the other lines."""
    modules, rest = set(), []
    for line in stderr.splitlines():
        if line.startswith(IMPORT_TIME):
            modules.add(line.rsplit("|", 1)[-1].strip())
        else:
            rest.append(line)
    return modules, rest


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("console")
    config = folder / "basic.yaml"
    config.write_text(CONFIG)
    done = command("tftrainers-learn", str(config), "--run-id", "r", "--results-dir",
                   str(folder), "--seed", "0")
    return folder, done


def test_a_short_training_run_prints_only_our_lines(trained_run):
    _, done = trained_run
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert_ours(lines, "stdout")
    assert any("latest checkpoint" in line for line in lines)


def test_evaluate_prints_only_its_summary_and_json(trained_run):
    folder, _ = trained_run
    done = command("tftrainers-evaluate", "builtin:Basic", "--policy", str(folder / "r"),
                   "--episodes", "3")
    assert done.returncode == 0, done.stderr
    assert_ours(done.stderr.splitlines(), "stderr")
    assert [json.loads(line)["episodes"] for line in done.stdout.splitlines()] == [3]


def test_export_prints_only_the_paths_it_wrote(trained_run):
    folder, _ = trained_run
    done = command("tftrainers-export", str(folder / "r"), "--output", str(folder / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    paths = done.stdout.splitlines()
    assert len(paths) == 3 and all(os.path.exists(p) for p in paths)


@pytest.mark.parametrize("name, args, message", [
    ("tftrainers-learn", ["missing.yaml"], "missing.yaml: no such config file"),
    ("tftrainers-learn", ["{config}", "--env", "builtin:Nope"], "unknown built-in env 'Nope'"),
    ("tftrainers-learn", ["{config}", "--num-envs", "0"], "env_settings.num_envs: 0 is out of"),
    ("tftrainers-learn", ["{config}", "--bogus"], "unrecognized arguments: --bogus"),
    ("tftrainers-evaluate", ["builtin:Basic", "--policy", "nonsense"],
     "unknown policy 'nonsense'"),
    ("tftrainers-export", ["{folder}/no-run"], "not a training run"),
    ("tftrainers-export", ["{folder}/no-run", "--opset", "99"], "--opset 99 is not supported"),
])
def test_errors_answer_in_one_line_without_tensorflow(tmp_path, name, args, message):
    config = tmp_path / "basic.yaml"
    config.write_text(CONFIG)
    args = [a.format(config=config, folder=tmp_path) for a in args]
    done = command(name, *args, import_times=True)
    modules, lines = imported_modules(done.stderr)
    assert done.returncode == 2, done.stderr
    assert "tensorflow" not in modules and "keras" not in modules
    assert len(lines) == 1 and message in lines[0], lines
    assert_ours(lines, "stderr")
    assert done.stdout == ""


@pytest.mark.parametrize("name, args", [
    ("tftrainers-export", ["{run}"]),
    ("tftrainers-evaluate", ["builtin:Basic", "--policy", "{run}"]),
])
def test_a_run_without_checkpoints_is_refused_without_tensorflow(tmp_path, name, args):
    from tftrainers.envs import make
    from tftrainers.runs import write_behavior_spec
    run = tmp_path / "run"
    run.mkdir()
    (run / "configuration.yaml").write_text(CONFIG)
    write_behavior_spec(str(run / "Basic"), make("builtin:Basic").behavior_specs["Basic"])
    done = command(name, *[a.format(run=run) for a in args], import_times=True)
    modules, lines = imported_modules(done.stderr)
    assert done.returncode == 2, done.stderr
    assert "tensorflow" not in modules
    assert len(lines) == 1 and "no checkpoint of behavior 'Basic'" in lines[0], lines


def test_dry_run_of_an_ml_agents_configuration_answers_without_tensorflow(tmp_path):
    source = os.path.join(os.path.dirname(__file__), "data", "mlagents_configuration.yaml")
    done = command("tftrainers-learn", source, "--env", "builtin:Ball3D", "--dry-run",
                   import_times=True)
    modules, lines = imported_modules(done.stderr)
    assert done.returncode == 0, done.stderr
    assert "tensorflow" not in modules
    assert_ours(lines, "stderr")
    # (goal_conditioning_type acts now; the Unity notes: see the configuration reference)
    assert len(lines) == 5 and all(line.startswith("[NOTE] ") for line in lines)
    assert yaml.safe_load(done.stdout)["env_settings"]["env_path"] == "builtin:Ball3D"


# ------------------------------------------------------------------- the stderr filter


@pytest.mark.parametrize("line, severity", [
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
     0),
    ("I0000 00:00:1795426352.155532    8480 cudart_stub.cc:31] Could not find cuda drivers",
     0),
    ("E0000 00:00:1795426376.559925    8692 cuda_platform.cc:52] failed call to cuInit", 2),
    ("W0612 10:01:02.000001 12 x.cc:9] a warning", 1),
    ("2025-01-01 12:00:00.123456: I tensorflow/core/util/port.cc:153] oneDNN custom ops", 0),
    ("[INFO] Basic. Step: 100.", None),
    ("Traceback (most recent call last):", None),
])
def test_cpp_log_lines_are_recognised_with_their_severity(line, severity):
    assert cpp_log_severity(line) == severity


def test_stderr_filter_drops_only_what_it_is_told_to(capfd):
    with stderr_without(lambda line: cpp_log_severity(line) == 0):
        os.write(2, b"I0000 00:00:1795426352.155532    8480 stub.cc:31] drop me\n"
                    b"keep me\nE0000 00:00:1795426376.559925 8692 p.cc:52] and me\n")
    assert capfd.readouterr().err == ("keep me\nE0000 00:00:1795426376.559925 8692 p.cc:52] "
                                      "and me\n")
