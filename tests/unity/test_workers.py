"""Unity players in env workers (num_envs players on base_port + worker id, restarted after a
crash) and SIGTERM closing every player, inline and in workers: no process left behind."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tftrainers.cli import learn_main

from .conftest import ROOT
from .test_commands import alive, player_pids, write_config


def test_players_in_env_workers_restart_after_a_crash(tmp_path, build, port, capsys):
    path = build("--env", "builtin:Basic", "--crash-after", "40", "--crash-once",
                 str(tmp_path / "crashed"))
    results = str(tmp_path / "results")
    assert learn_main([write_config(tmp_path, max_steps=1500), "--env", path, "--num-envs", "2",
                       "--workers", "process", "--results-dir", results, "--run-id", "w",
                       "--base-port", str(port)]) == 0
    out = capsys.readouterr().out
    assert "[INFO] Env workers: 2 x worker process" in out
    assert re.search(r"\[INFO\] Env workers: \d+ env steps, 1 restart\.", out), out
    run_logs = tmp_path / "results" / "w" / "run_logs"
    assert sorted(n for n in os.listdir(run_logs) if n.startswith("Player")) == [
        "Player-0.log", "Player-1.log"]
    ports = set()
    for name in ("Player-0.log", "Player-1.log"):
        ports |= set(re.findall(r"'--mlagents-port', '(\d+)'", open(run_logs / name).read()))
    assert ports == {str(port), str(port + 1)}  # base_port + worker id
    assert not any(alive(pid) for pid in player_pids(run_logs))


@pytest.mark.parametrize("workers", ["inline", "process"])
def test_sigterm_closes_every_player(tmp_path, build, port, workers):
    path = build("--env", "builtin:Basic")
    results = tmp_path / "results"
    command = [sys.executable, "-c", "from tftrainers.cli import learn; learn()",
               write_config(tmp_path, max_steps=10**7), "--env", path, "--results-dir",
               str(results), "--run-id", "t", "--base-port", str(port), "--workers", workers,
               "--num-envs", "2" if workers == "process" else "1"]
    learner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": ROOT}, text=True)
    run_logs = results / "t" / "run_logs"
    expected = 2 if workers == "process" else 1
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            if run_logs.is_dir() and len(player_pids(run_logs, last_only=True)) >= expected:
                text = "".join(open(run_logs / n).read() for n in os.listdir(run_logs)
                               if n.startswith("Player"))
                if text.count("handshake") >= expected:
                    break
            assert learner.poll() is None, learner.communicate()
            time.sleep(0.5)
        time.sleep(1.5)  # training
        pids = player_pids(run_logs, last_only=True)
        assert len(pids) == expected and all(alive(p) for p in pids)
        learner.send_signal(signal.SIGTERM)
        out, err = learner.communicate(timeout=60)
    finally:
        if learner.poll() is None:
            learner.kill()
    assert learner.returncode == 143, err
    time.sleep(0.5)
    assert not any(alive(pid) for pid in pids), (pids, err)
