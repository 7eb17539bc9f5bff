"""tftrainers-learn: dry run, and every config/run error as one line with exit code 2."""
import os
import textwrap

import pytest
import yaml

from tftrainers.cli import learn_main

BASIC = """
behaviors:
  Basic:
    trainer_type: ppo
    hyperparameters: {batch_size: 32, buffer_size: 128}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 400
    time_horizon: 8
    summary_freq: 200
env_settings:
  env_path: builtin:Basic
"""

GRIDWORLD_DEMO = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "demos",
                              "GridWorld.demo")


def write(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def fails(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        learn_main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


def test_dry_run_prints_the_resolved_configuration(tmp_path, capsys):
    config = write(tmp_path, BASIC)
    assert learn_main([config, "--dry-run", "--env-args", "obs=visual", "--seed", "3",
                       "--env", "builtin:GridWorld"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["env_settings"] == {**resolved["env_settings"], "env_path": "builtin:GridWorld",
                                        "env_args": {"obs": "visual"}, "seed": 3}
    hp = resolved["behaviors"]["Basic"]["hyperparameters"]
    assert hp["batch_size"] == 32 and hp["learning_rate"] == 3e-4  # ML-Agents' default


@pytest.mark.parametrize("text,message", [
    (BASIC.replace("batch_size: 32", "batch_sise: 32"),
     "behaviors.Basic.hyperparameters.batch_sise: unknown key"),
    (BASIC.replace("max_steps: 400", "max_steps: lots"), "behaviors.Basic.max_steps"),
    (BASIC.replace("batch_size: 32", "batch_size: -4"), "behaviors.Basic.hyperparameters.batch_size"),
    (BASIC.replace("trainer_type: ppo", "trainer_type: td3"), "trainer_type"),
    (BASIC.replace("Basic:\n", "Walker:\n", 1), "Basic"),
    (BASIC.replace("{}", "").replace(
        "network_settings:", "reward_signals: {gail: {demo_path: x.demo}}\n    network_settings:"),
     "x.demo: no such .demo file or folder"),
    (BASIC.replace("{}", "").replace(
        "network_settings:", f"reward_signals: {{gail: {{demo_path: {GRIDWORLD_DEMO}}}}}"
                             "\n    network_settings:"),
     "GridWorld.demo: observation 0 is"),
])
def test_config_errors(tmp_path, capsys, text, message):
    err = fails(capsys, [write(tmp_path, text), "--results-dir", str(tmp_path / "r")])
    assert message in err and "Traceback" not in err


def test_missing_config_file(tmp_path, capsys):
    assert "no such config file" in fails(capsys, [str(tmp_path / "nope.yaml")])


def test_unknown_env_and_bad_env_args(tmp_path, capsys):
    config = write(tmp_path, BASIC)
    results = str(tmp_path / "r")
    assert "unknown built-in env 'Basik'" in fails(
        capsys, [config, "--env", "builtin:Basik", "--results-dir", results])
    assert "unknown env arg 'obs'" in fails(
        capsys, [config, "--env-args", "obs=visual", "--results-dir", results, "--force"])


def test_existing_run_needs_resume_or_force_and_resume_needs_a_run(tmp_path, capsys):
    config = write(tmp_path, BASIC)
    results = str(tmp_path / "r")
    assert "no run to resume" in fails(capsys, [config, "--run-id", "a", "--resume",
                                                "--results-dir", results])
    assert learn_main([config, "--run-id", "a", "--results-dir", results]) == 0
    err = fails(capsys, [config, "--run-id", "a", "--results-dir", results])
    assert "a run with id 'a' exists; use --resume" in err
    assert "not allowed with" in fails(capsys, [config, "--resume", "--force"])
    assert learn_main([config, "--run-id", "a", "--results-dir", results, "--force"]) == 0
