"""Bad env data ends a run with one line, the same in-process and in env workers."""
import os
import subprocess
import sys
import textwrap

import pytest

ENV = "gym:acting.misshapen_envs:Misshapen-v0"
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 16, buffer_size: 32, num_epoch: 1}
  network_settings: {hidden_units: 8, num_layers: 1}
  max_steps: 200
  time_horizon: 8
  summary_freq: 100
env_settings:
  workers: WORKERS
  num_envs: NUM_ENVS
"""


def learn(tmp_path, workers: str, num_envs: int, **env_args):
    """The installed ``tftrainers-learn`` on the misshapen env: (exit code, stdout, stderr)."""
    config = tmp_path / f"{workers}.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace("WORKERS", workers)
                      .replace("NUM_ENVS", str(num_envs)))
    command = os.path.join(os.path.dirname(sys.executable), "tftrainers-learn")
    env = dict(os.environ, PYTHONPATH=TESTS)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user runs it: the command sets its own
    done = subprocess.run(
        [command, str(config), "--run-id", workers, "--results-dir", str(tmp_path / "r"),
         "--env", ENV, "--env-args", *[f"{k}={v}" for k, v in env_args.items()]],
        capture_output=True, text=True, env=env, timeout=600)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("kind, observation, received, expected", [
    ("vector", "observation 0 ('obs')", "[5]", "[4]"),
    # as many values as expected: only a check of the shape itself catches it
    ("image", "observation 0 ('obs')", "[3, 24, 24]", "[24, 24, 3]"),
    # the space prints on several lines; the message must not carry that
    ("dict", "observation 1 ('obs.pos')", "[17]", "[16]"),
])
def test_a_misshapen_observation_stops_the_run_with_one_line_in_process_and_in_workers(
        tmp_path, kind, observation, received, expected):
    lines = {}
    for workers, num_envs in (("inline", 1), ("process", 2)):
        code, out, err = learn(tmp_path, workers, num_envs, kind=kind, at_step=5)
        assert "Traceback" not in out + err, err
        assert code == 1, err  # the env's data, not a usage problem (2)
        assert len(err.strip().splitlines()) == 1, err
        line = err.strip()
        # bad data is not retried: a fresh env would send it again
        assert "restarted" not in out, out
        prefix = (f"tftrainers-learn: error: {ENV} at env step 4: behavior "
                  f"'{ENV[4:]}' ({ENV}): agent 0: {observation} from the env has shape "
                  f"{received}, its observation space has {expected}; ")
        assert line.startswith(prefix), line
        lines[workers] = line[:len(prefix)]
    assert lines["inline"] == lines["process"]
