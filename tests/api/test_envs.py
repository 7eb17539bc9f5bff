"""Envs given to tftrainers.train as objects, factories and python:MODULE:NAME ids: a
Gymnasium env object and a python: env each train to a clear learning result on a tiny
budget; a PettingZoo env object trains; bad objects are one line naming what is missing."""
import copy
import os
import sys

import gymnasium as gym
import pytest
from gymnasium import spaces
from mpe2 import simple_spread_v3  # the test extra has it

import tftrainers
from tftrainers.envs import check_env, make
from tests.api.envs import CONFIG, LINE_MODULE, GymLine, line_return, random_line_return

OPTIMAL = 1.0 - 3 * 0.05  # four steps right: three steps' cost, then +1


@pytest.fixture
def line_module(tmp_path, monkeypatch):
    """line_env.py in a fresh working directory (python: ids look there)."""
    (tmp_path / "line_env.py").write_text(LINE_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("line_env", None)


def config_for(name):
    config = copy.deepcopy(CONFIG)
    config["behaviors"][name] = config["behaviors"].pop("Line")
    return config


def test_a_python_env_id_trains_to_the_optimal_return(line_module):
    env = make("python:line_env:Line", seed=0, num_areas=4)
    check_env(env)  # the docs' env keeps the env API's rules
    env.close()
    run = tftrainers.train(CONFIG, "python:line_env:Line", run_id="line", seed=0, verbose=0,
                           num_areas=8, results_dir="results")
    trained = line_return(tftrainers.load_policy(run))
    # Random actions: 0.05 (seed 0, 200 episodes); the shortest walk: 0.85.
    assert random_line_return() < 0.2
    assert trained == pytest.approx(OPTIMAL), trained
    assert run.stats()["Environment/Cumulative Reward"][-1] > 0.5


def test_a_gymnasium_env_object_trains_to_the_optimal_return(tmp_path):
    run = tftrainers.train(config_for("GymLine"), GymLine(), run_id="gym", seed=0, verbose=0,
                           results_dir=str(tmp_path))
    assert run.behaviors == ["GymLine"]
    trained = line_return(tftrainers.load_policy(run))
    assert trained == pytest.approx(OPTIMAL), trained


def test_a_pettingzoo_env_object_and_a_vector_env_object_train(tmp_path):
    config = {"behaviors": {"agent": {"trainer_type": "ppo", "max_steps": 300,
                                      "summary_freq": 150, "time_horizon": 25,
                                      "hyperparameters": {"batch_size": 64,
                                                          "buffer_size": 150}}}}
    run = tftrainers.train(config, simple_spread_v3.parallel_env(max_cycles=25), run_id="spread",
                           verbose=0, results_dir=str(tmp_path))
    assert run.behaviors == ["agent"] and run.stats()["step"][-1] >= 300
    vector = gym.vector.SyncVectorEnv([GymLine for _ in range(4)])  # 4 copies: 4 agents
    config = config_for("GymLine")
    config["behaviors"]["GymLine"].update(max_steps=200, summary_freq=100)
    run = tftrainers.train(config, vector, run_id="vector", verbose=0,
                           results_dir=str(tmp_path))
    assert run.stats()["step"][-1] >= 200


def test_a_factory_makes_the_copies_an_object_cannot(tmp_path):
    made = []

    def factory():
        made.append(1)
        return GymLine()

    env = make(factory, seed=0, num_areas=3, num_envs=2)
    assert len(made) == 6  # num_envs x num_areas copies, one agent each
    env.reset()
    assert len(env.get_steps("GymLine")[0]) == 6
    env.close()
    with pytest.raises(tftrainers.TrainingError) as error:
        tftrainers.train(config_for("GymLine"), GymLine(), num_areas=4,
                         results_dir=str(tmp_path))
    assert str(error.value) == (
        "GymLine: an env object is one instance, and num_envs x num_areas asks for 4; pass a "
        "zero-argument factory instead (e.g. env=lambda: MyEnv()), called once per copy")
    # Env workers build their env in another process: a lambda cannot get there.
    with pytest.raises(tftrainers.TrainingError, match=r"env workers build their own env in "
                       r"another process, from an env id or a picklable factory"):
        tftrainers.train(config_for("GymLine"), lambda: GymLine(), num_envs=2,
                         workers="process", results_dir=str(tmp_path))
    assert not os.listdir(tmp_path)


class NoSpaces:
    def reset(self, seed=None):
        return None

    def step(self, action):
        return None


class TextObservations(gym.Env):
    observation_space = spaces.Text(5)
    action_space = spaces.Discrete(2)


BAD_MODULE = """
import gymnasium as gym
from gymnasium import spaces

class TextObs(gym.Env):
    observation_space = spaces.Text(5)
    action_space = spaces.Discrete(2)

def not_an_env():
    return 42

value = 3
"""


@pytest.mark.parametrize("env, message", [
    ("python:nowhere_module:Env", "python:nowhere_module:Env: cannot import module "
                                  "'nowhere_module' (No module named 'nowhere_module'); it is "
                                  "looked for in the working directory "),
    ("python:bad_env:Missing", "python:bad_env:Missing: module 'bad_env' has no 'Missing' (it "
                               "has TextObs, gym, not_an_env, spaces, value)"),
    ("python:bad_env", "env id 'python:bad_env': give python:MODULE:NAME"),
    ("python:bad_env:not_an_env", "python:bad_env:not_an_env returned: a int is not an "
                                  "environment: as the Gymnasium API it lacks "
                                  "observation_space, action_space, reset, step; allowed: "),
    ("python:bad_env:value", "python:bad_env:value: a int is not an environment"),
    ("python:bad_env:TextObs", "python:bad_env:TextObs: observation space Text("),
    (NoSpaces(), "NoSpaces: a NoSpaces is not an environment: as the Gymnasium API it lacks "
                 "observation_space, action_space; allowed: a BaseEnv subclass or instance, "),
])
def test_bad_env_objects_are_one_line_naming_what_is_missing(tmp_path, monkeypatch, env,
                                                             message):
    (tmp_path / "bad_env.py").write_text(BAD_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(tftrainers.TrainingError) as error:
        tftrainers.train(config_for("x"), env, results_dir=str(tmp_path / "results"))
    sys.modules.pop("bad_env", None)
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value)
    assert not os.path.exists(tmp_path / "results")


def test_the_command_line_takes_a_python_env_id(line_module, capsys):
    from tftrainers.cli import learn_main
    config = line_module / "line.yaml"
    config.write_text("behaviors:\n  Line: {max_steps: 100, summary_freq: 50}\n"
                      "env_settings: {env_path: 'python:line_env:Line', num_areas: 4}\n")
    assert learn_main([str(config), "--run-id", "cli"]) == 0
    assert "behaviors Line on python:line_env:Line" in capsys.readouterr().out
    assert tftrainers.Run(line_module / "results" / "cli").checkpoints["Line"] is not None
    with pytest.raises(SystemExit) as exit:  # a usage error: argparse's exit 2
        learn_main([str(config), "--run-id", "x", "--env", "python:line_env:Nope"])
    assert exit.value.code == 2
    assert capsys.readouterr().err.strip().startswith(
        "tftrainers-learn: error: python:line_env:Nope: module 'line_env' has no 'Nope'")
