"""tftrainers-learn on a Unity build (the stand-in player): Basic learns on the budget it has
in process, the game's stats reach the CSV, and ML-Agents' own configuration file resolves
against a build path and trains against it."""
import csv
import os

import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import make
from tftrainers.evaluate import evaluate, make_policy

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def config(tmp_path, source, **behavior_overrides):
    with open(source) as f:
        data = yaml.safe_load(f)
    (behavior,) = data["behaviors"].values()
    for key, value in behavior_overrides.items():
        section, _, name = key.partition("__")
        if name:
            behavior[section][name] = value
        else:
            behavior[key] = value
    path = tmp_path / os.path.basename(source)
    path.write_text(yaml.safe_dump(data))
    return str(path)


def score(policy, episodes=40):
    env = make("builtin:Basic", seed=11)
    (result,) = evaluate(env, make_policy(policy, env, seed=3), episodes=episodes).values()
    return result["mean_reward"]


def test_basic_learns_through_the_player_on_the_in_process_budget(tmp_path, build, port, capsys):
    # The budget of tests/trainers/test_learning.py::test_ppo_learns_basic (15k steps).
    path = build("--env", "builtin:Basic", "--stats")
    results = str(tmp_path / "results")
    assert learn_main([config(tmp_path, os.path.join(ROOT, "configs", "ppo", "Basic.yaml"),
                              max_steps=15000),
                       "--env", path, "--run-id", "run", "--results-dir", results,
                       "--seed", "2", "--base-port", str(port), "--no-graphics",
                       "--time-scale", "1"]) == 0
    run = os.path.join(results, "run")
    trained, random = score(run), score("random")
    assert trained >= 0.6 and trained >= random + 0.4, (trained, random)
    with open(os.path.join(run, "run_logs", "Basic.csv")) as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["Standin/Basic Terminals"]) >= 10  # a SUM over the period
    assert 0.0 < float(rows[-1]["Standin/Basic Final Reward"]) <= 1.0  # an AVERAGE
    log = open(os.path.join(run, "run_logs", "Player-0.log")).read()
    assert "'-nographics', '-batchmode'" in log and "'time_scale': 1.0" in log
    assert "[NOTE]" not in capsys.readouterr().err  # engine settings act on a player


def test_ml_agents_configuration_resolves_against_a_build_and_trains(tmp_path, build, port,
                                                                     capsys):
    path = build("--env", "builtin:Ball3D")
    source = config(tmp_path, os.path.join(ROOT, "tests", "data", "mlagents_configuration.yaml"),
                    max_steps=1200, summary_freq=600, hyperparameters__buffer_size=600,
                    time_horizon=64)
    results = str(tmp_path / "results")
    common = ["--env", path, "--results-dir", results, "--base-port", str(port)]
    assert learn_main([source, *common, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    resolved = yaml.safe_load(out)
    assert resolved["env_settings"]["env_path"] == path
    assert resolved["engine_settings"]["time_scale"] == 20.0
    assert "engine_settings" not in err and "base_port" not in err  # they act here
    assert learn_main([source, *common, "--run-id", "ball"]) == 0
    run = os.path.join(results, "ball")
    assert os.path.exists(os.path.join(run, "Ball3D.onnx"))
    log = open(os.path.join(run, "run_logs", "Player-0.log")).read()
    assert ("engine configuration {'resolution': (84, 84), 'quality_level': 5, 'time_scale': "
            "20.0, 'target_frame_rate': -1, 'capture_frame_rate': 60}") in log
    assert "'-nographics', '-batchmode'" in log  # the file's no_graphics: true
