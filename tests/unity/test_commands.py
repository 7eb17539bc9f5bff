"""Builds in the other commands: evaluate and record, --resume with a changed spec, the
Editor."""
import json
import os
import re
import subprocess
import sys

import yaml

from tftrainers.cli import evaluate_main, learn_main, record_main
from tftrainers.envs.unity import UnityEnv
from tftrainers.processing.demonstrations import load_demonstrations

from .conftest import ROOT, STANDIN

BASIC = """
behaviors:
  {name}:
    trainer_type: ppo
    hyperparameters: {{batch_size: 32, buffer_size: 256}}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: {max_steps}
    time_horizon: 64
    summary_freq: 1000
"""


def write_config(tmp_path, name="Basic", max_steps=600):
    path = tmp_path / f"{name}.yaml"
    path.write_text(BASIC.format(name=name, max_steps=max_steps))
    return str(path)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def player_pids(run_logs, last_only=False):
    """The pids of the players that wrote into run_logs (each log's last one: with workers,
    worker 0's player appends to the log of the player that gave the specs)."""
    pids = []
    for name in sorted(os.listdir(run_logs)):
        if name.startswith("Player-"):
            found = [int(p) for p in re.findall(r"pid (\d+)", open(run_logs / name).read())]
            pids += found[-1:] if last_only else found
    return pids


def test_evaluate_and_record_a_build(tmp_path, build, port, capsys):
    path = build("--env", "builtin:GridWorld")
    flags = ["--policy", "random", "--base-port", str(port), "--seed", "1"]
    assert evaluate_main([path, *flags, "--episodes", "4"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["behavior"] == "GridWorld" and result["episodes"] == 4
    demo = str(tmp_path / "grid.demo")
    assert record_main([path, *flags, "--episodes", "3", "--output", demo]) == 0
    demos = load_demonstrations(demo)
    assert demos.behavior_name == "GridWorld" and int(demos.episode.max()) == 2
    assert demos.spec.action_spec.discrete_branches == (5,)


def test_resume_on_a_build_whose_spec_changed_is_one_line(tmp_path, build, port,
                                                          one_line_error):
    results = str(tmp_path / "results")
    common = ["--results-dir", results, "--run-id", "grid", "--base-port", str(port)]
    vector = build("--env", "builtin:GridWorld", folder="V")
    assert learn_main([write_config(tmp_path, "GridWorld", 300), "--env", vector, *common]) == 0
    grid = build("--env", "builtin:GridWorld?obs=grid", folder="G")
    err = one_line_error(learn_main, [write_config(tmp_path, "GridWorld", 600), "--env", grid,
                                      *common, "--resume"])
    assert "cannot resume behavior 'GridWorld'" in err and "grid" in err, err


def test_the_editor_listens_and_asks_for_play(tmp_path, port, capsys):
    lines = []
    player = subprocess.Popen([sys.executable, STANDIN, "--mlagents-port", str(port)],
                              env={**os.environ, "PYTHONPATH": ROOT})
    try:
        env = UnityEnv(None, base_port=port, log=lines.append, timeout_wait=30)
        assert list(env.behavior_specs) == ["Basic"] and env.process is None
        env.close()
        assert player.wait(10) == 0
    finally:
        player.kill()
    assert lines == [f"[INFO] Listening on port {port}: press Play in the Unity Editor to "
                     f"start training."]
    # no env anywhere is the Editor, on 5004 (ML-Agents' port) unless told otherwise
    assert learn_main([write_config(tmp_path), "--dry-run"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["env_settings"]["env_path"] is None
    from tftrainers.envs.unity.options import unity_env_args
    from tftrainers.settings import load_run_options
    options = load_run_options(write_config(tmp_path))
    assert unity_env_args(options, None)["base_port"] == 5004
    options.env_settings.base_port = 6000
    assert unity_env_args(options, None)["base_port"] == 6000
