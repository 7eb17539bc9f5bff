"""Env workers: faults are survived, trajectories never mix envs, no process is left behind."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tftrainers.acting.workers import worker_seed
from tftrainers.cli import learn_main

FAULTY = "gym:acting.faulty_envs:Faulty-v0"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 32, buffer_size: 64, num_epoch: 1}
  network_settings: {hidden_units: 8, num_layers: 1}
  max_steps: 400
  time_horizon: 16
  summary_freq: 200
env_settings:
  env_path: builtin:Basic
  num_envs: 2
  workers: process
"""


def _live_processes(field: int, value: int):
    """Pids of live (not zombie) processes whose /proc stat field ``field`` (counted after
    the command name: 1 parent pid, 3 session id) equals ``value``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[field]) == value and fields[0] != "Z":
                out.append(int(entry))
    return out


def children(pid=None):
    """Pids of the live processes whose parent is ``pid`` (default: this process)."""
    return _live_processes(1, os.getpid() if pid is None else pid)


def in_session(sid):
    """Pids of live processes of session ``sid``."""
    return _live_processes(3, sid)


@pytest.fixture
def run(tmp_path, monkeypatch):
    """``run(*args, fault=..., **env_args)``: learn_main on the faulty env in 2 worker
    processes; returns (exit code, trajectories the trainer received). Asserts no child
    process is left."""
    from tftrainers.trainers.ppo.trainer import PPOTrainer
    received = []
    original = PPOTrainer.process_trajectories

    def record(self, trajectories):
        received.extend(trajectories)
        original(self, trajectories)
    monkeypatch.setattr(PPOTrainer, "process_trajectories", record)
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    before = set(children())

    def go(*args, **env_args):
        env_args.setdefault("once", str(tmp_path / "fault.once"))
        argv = [str(config), "--run-id", "w", "--force", "--results-dir",
                str(tmp_path / "r"), "--env", FAULTY, "--env-args",
                *[f"{k}={v}" for k, v in env_args.items()], *args]
        code = learn_main(argv)
        deadline = time.time() + 5
        while set(children()) - before and time.time() < deadline:
            time.sleep(0.1)
        assert set(children()) - before == set(), "a worker process outlived the run"
        return code, received
    return go


def assert_unmixed(trajectories):
    """Each trajectory is consecutive steps of one episode of one env instance."""
    assert trajectories
    owners = {}
    for t in trajectories:
        token, step = t.obs[0][:, 0], np.round(t.obs[0][:, 1] * 100).astype(int)
        assert np.all(token == token[0]), "a trajectory mixes env instances"
        assert np.all(np.diff(step) == 1), "a trajectory mixes episodes"
        owners.setdefault(t.agent_id, set()).add(float(token[0]))
    # an agent id is never reused by the instance of another worker start
    assert all(len(tokens) == 1 for tokens in owners.values())


def test_a_worker_whose_env_raises_is_restarted_and_the_run_finishes(run, tmp_path, capsys):
    # Long enough that the restarted worker's trajectories reach the trainer before the
    # healthy worker alone ends the run.
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace("max_steps: 400", "max_steps: 4000"))
    code, trajectories = run(fault="raise", at_step=25)
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if "restarted" in line]
    assert len(lines) == 1, out
    assert re.search(r"\[WARNING\] env worker \d \(worker process\): gym:acting.faulty_envs:"
                     r"Faulty-v0 raised RuntimeError in step\(\) at env step \d+: the engine "
                     r"lost its device; restarted with a fresh env and seed \d+", lines[0])
    assert "(restart 1 of 5)" in lines[0]
    assert_unmixed(trajectories)
    # the restarted worker's agents have ids of their own start (serial 2)
    assert {t.agent_id >> 32 for t in trajectories} >= {0, 1, 2}


def test_a_crashed_worker_is_restarted(run, capsys):
    code, trajectories = run(fault="crash", at_step=25)
    assert code == 0
    out = capsys.readouterr().out
    assert "its process was killed by SIGKILL; restarted" in out
    assert_unmixed(trajectories)


def test_a_hung_worker_times_out_and_is_restarted(run, tmp_path, capsys):
    # Long enough that the healthy worker cannot finish the run before the hung one's
    # timeout (2 s) is noticed.
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace("max_steps: 400", "max_steps: 10000"))
    code, _ = run("--timeout-wait", "2", fault="hang", at_step=25)
    assert code == 0
    out = capsys.readouterr().out
    assert "did not answer within 2 s (env_settings.timeout_wait); restarted" in out


def test_too_many_restarts_save_and_stop_with_one_line(run, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG) + "  max_worker_restarts: 1\n")
    code, _ = run(fault="raise", at_step=25, once="")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "failed 2 times, more than env_settings.max_worker_restarts (1)" \
        in err[0] and "checkpoints saved" in err[0], err


def test_worker_seeds_are_distinct_and_reproducible():
    seeds = [worker_seed(7, index, serial) for index in range(4) for serial in range(4)]
    assert len(set(seeds)) == len(seeds)
    assert seeds == [worker_seed(7, index, serial) for index in range(4) for serial in range(4)]
    assert worker_seed(8, 0, 0) != worker_seed(7, 0, 0)


def test_eight_workers_starting_at_once_all_connect_and_send():
    """All workers connect at the same moment; none may be left hanging in its handshake
    (a listen backlog of 1 left the third and later waiting for timeout_wait)."""
    from tftrainers.acting.actor import WeightUpdate
    from tftrainers.acting.worker_pool import ProcessLauncher, WorkerPool
    from tftrainers.acting.workers import BehaviorSetup
    from tftrainers.envs import make
    from tftrainers.processing import Trajectory
    from tftrainers.settings import NetworkSettings
    from tftrainers.trainers.policy import Policy
    with make("builtin:Basic") as env:
        spec = env.behavior_specs["Basic"]
    policy = Policy(spec, NetworkSettings(hidden_units=8, num_layers=1))
    setup = BehaviorSetup(spec, 0, policy.onnx_program(), 16, 0,
                          WeightUpdate(0, policy.flat_weights()))
    notes = []
    pool = WorkerPool(ProcessLauncher(), "builtin:Basic", {}, None, num_envs=8, seed=0,
                      behaviors={"Basic": setup}, timeout_wait=600, log=notes.append)
    pool.start()
    sent = set()
    try:
        deadline = time.monotonic() + 90
        while len(sent) < 8 and time.monotonic() < deadline:
            pool.check()
            for manager in pool.managers["Basic"]:
                if any(type(item) is Trajectory for item in manager.queue.drain()):
                    sent.add(manager.index)
            pool.wait(0.1)
    finally:
        pool.close()
    assert sent == set(range(8)), f"workers {sorted(set(range(8)) - sent)} sent nothing"
    assert notes == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_every_worker_and_save(tmp_path, signum):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace("max_steps: 400", "max_steps: 10000000"))
    # Its own session, as a shell job: Ctrl-C goes to the whole process group.
    process = subprocess.Popen(
        [sys.executable, "-c", "from tftrainers.cli import learn; learn()", str(config),
         "--run-id", "s", "--results-dir", str(tmp_path / "r"), "--env-args",
         "step_latency_ms=5"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True)
    try:
        for line in process.stdout:
            if line.startswith("[INFO] Env workers:"):
                break
        deadline = time.time() + 60
        while len(in_session(process.pid)) < 3 and time.time() < deadline:
            time.sleep(0.2)
        assert len(in_session(process.pid)) >= 3  # the learner and its 2 workers
        time.sleep(1.0)
        if signum == signal.SIGINT:
            os.killpg(process.pid, signum)  # what a terminal's Ctrl-C does
        else:
            os.kill(process.pid, signum)  # what docker stop does
        out = process.stdout.read()
        assert process.wait(60) == 128 + signum, out
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert f"Interrupted by {signal.Signals(signum).name}: checkpoints saved" in out
    assert in_session(process.pid) == []


@pytest.mark.ray
def test_a_short_ray_run_trains_basic_to_its_target(tmp_path, capsys):
    pytest.importorskip("ray")
    from tftrainers.cli import evaluate_main
    results = str(tmp_path / "r")
    assert learn_main([os.path.join(ROOT, "configs/ppo/Basic.yaml"), "--run-id", "ray",
                       "--results-dir", results, "--num-envs", "2", "--ray-address", "auto",
                       "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "[INFO] Env workers: 2 x Ray actor, one builtin:Basic instance each" in out
    assert evaluate_main(["builtin:Basic", "--policy", os.path.join(results, "ray"),
                          "--episodes", "50", "--seed", "5"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["mean_reward"] >= 0.9  # the config's target (random play: about 0.1)
    import ray
    assert not ray.is_initialized()  # the local cluster this run started is shut down
