"""Issue 32's speed set, ours only, in one table: wall time, throughput, peak memory.

    python benchmarks/speed.py            # the whole set (about 5 minutes on 2 idle cores)
    python benchmarks/speed.py --quick    # the same rows on short budgets (about 1.5 minutes)
    python benchmarks/speed.py --only startup workers

Rows (each a ``tftrainers-learn`` process of its own, ``--seed 0``, one after another):

- ``ball3d``: configs/ppo/Ball3D.yaml (ML-Agents' 3DBall config) on builtin:Ball3D, 500k
  steps, whole-process wall time and the last summary's mean return.
- ``basic``: configs/ppo/Basic.yaml (ML-Agents' Basic config, time_horizon 64), 30k steps.
- ``cartpole``: configs/ppo/CartPole.yaml (rl-zoo's hyperparameters, as
  ``benchmarks/ppo_vs_sb3.py``'s side of ours), 100k steps: whole-process steps/s.
- ``startup``: Ball3D inline; seconds from the process's start (the command) to the end
  of its first env step, and its phases from ``run_logs/timers.json`` when the run wrote
  one (runs older than the timers have none).
- ``workers``: Ball3D at 5 ms a step (``step_latency_ms=5``), 200k steps, 8 worker
  processes against 1: whole-process wall time of each and the speed-up, and the seconds
  from the first to the last worker connecting (8 workers).

Every row reports the learner process's CPU seconds (user + system, all its threads; on a
shared machine they drift less than wall time) and its peak resident memory
(``ru_maxrss``); worker processes are not included in either. ``--quick`` runs each row on a tenth of its steps (the
startup row is the same). The first env step and the worker connections are seen by a
few lines run before the command's own (``PROBE``), which work on every version of
tftrainers: the same script measures a checkout before a change and after it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "configs", "ppo")
SUMMARY = re.compile(r"Step: (\d+)\. Time Elapsed: ([\d.]+) s\. Mean Reward: (-?\d+(?:\.\d+)?)")

#: Run before ``tftrainers-learn``'s code in the measured process: notes when its first
#: env step ends and when each env worker connects (seconds since the process started,
#: and the process's CPU seconds so far) in the file named by $SPEED_PROBE, one JSON line
#: per event.
PROBE = r"""
import json, os, time
def _since_start():
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - ticks / os.sysconf("SC_CLK_TCK")
def _note(kind):
    with open(os.environ["SPEED_PROBE"], "a") as f:
        f.write(json.dumps({"event": kind, "t": _since_start(), "cpu": time.process_time()})
                + "\n")
import multiprocessing.connection as _mc
_accept = _mc.Listener.accept
def _accept_noted(self):
    conn = _accept(self)
    _note("worker connected")
    return conn
_mc.Listener.accept = _accept_noted
import tftrainers.acting as _acting
_step_env = _acting.step_env
_first = []
def _step_noted(env, managers):
    _step_env(env, managers)
    if not _first:
        _first.append(1)
        _note("first env step")
_acting.step_env = _step_noted
from tftrainers.cli import learn
learn()
"""


def config_file(folder: str, name: str, max_steps: int) -> str:
    """``configs/ppo/<name>`` with ``max_steps`` (summaries every tenth of it, no
    checkpoint but the final one)."""
    with open(os.path.join(CONFIGS, name)) as fh:
        config = yaml.safe_load(fh)
    for behavior in config["behaviors"].values():
        behavior["summary_freq"] = min(behavior.get("summary_freq", 50000),
                                       max(max_steps // 10, 1))
        behavior["max_steps"] = max_steps
        behavior["checkpoint_interval"] = 10 * max_steps
    path = os.path.join(folder, f"{max_steps}-{name}")
    with open(path, "w") as fh:
        yaml.safe_dump(config, fh)
    return path


def learn(config: str, folder: str, run_id: str, *args: str) -> dict:
    """One ``tftrainers-learn`` process: wall seconds, peak RSS (MB), the last summary
    (step, mean return), the probe's events and the run's timers.json (if written)."""
    probe = os.path.join(folder, f"{run_id}.probe")
    out_path = os.path.join(folder, f"{run_id}.out")
    argv = [sys.executable, "-c", PROBE, config, "--run-id", run_id, "--force",
            "--results-dir", folder, "--seed", "0", *args]
    env = dict(os.environ, SPEED_PROBE=probe, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    with open(out_path, "w") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as fh:
        text = fh.read()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[3:])} failed ({process.returncode}):\n{text[-3000:]}")
    found = SUMMARY.findall(text)
    events = []
    if os.path.exists(probe):
        with open(probe) as fh:
            events = [json.loads(line) for line in fh]
    timers = None
    timers_path = os.path.join(folder, run_id, "run_logs", "timers.json")
    if os.path.exists(timers_path):
        with open(timers_path) as fh:
            timers = json.load(fh)
    return {"seconds": seconds, "rss_mb": usage.ru_maxrss / 1024,
            "cpu": usage.ru_utime + usage.ru_stime,
            "step": int(found[-1][0]) if found else 0,
            "return": float(found[-1][2]) if found else float("nan"),
            "first_step": next((e["t"] for e in events if e["event"] == "first env step"),
                               None),
            "first_step_cpu": next((e["cpu"] for e in events
                                    if e["event"] == "first env step"), None),
            "connected": [e["t"] for e in events if e["event"] == "worker connected"],
            "timers": timers}


def row(name: str, what: str, result: dict, figure: str) -> tuple:
    return (name, what, f"{result['seconds']:.1f}", f"{result['cpu']:.1f}", figure,
            f"{result['rss_mb']:.0f}")


def bench_ball3d(folder, scale):
    steps = int(500_000 * scale)
    r = learn(config_file(folder, "Ball3D.yaml", steps), folder, "ball3d")
    return [row("ball3d", f"Ball3D.yaml {steps // 1000}k", r, f"return {r['return']:.1f}")]


def bench_basic(folder, scale):
    steps = int(30_000 * scale)
    r = learn(config_file(folder, "Basic.yaml", steps), folder, "basic")
    return [row("basic", f"Basic.yaml {steps // 1000}k", r, f"return {r['return']:.3f}")]


def bench_cartpole(folder, scale):
    steps = int(100_000 * scale)
    r = learn(config_file(folder, "CartPole.yaml", steps), folder, "cartpole")
    return [row("cartpole", f"CartPole.yaml {steps // 1000}k", r,
                f"{r['step'] / r['seconds']:,.0f} steps/s, return {r['return']:.0f}")]


def _phases(timers) -> str:
    if not timers:
        return ""
    start = timers["children"].get("start-up", {})
    parts = sorted(start.get("children", {}).items(), key=lambda kv: -kv[1]["total"])[:3]
    return " (" + ", ".join(f"{k} {v['total']:.1f}" for k, v in parts) + ")"


def bench_startup(folder, scale):
    r = learn(config_file(folder, "Ball3D.yaml", 2000), folder, "startup")
    return [row("startup", "Ball3D: command to first env step", r,
                f"{r['first_step']:.2f} s ({r['first_step_cpu']:.2f} s CPU)"
                f"{_phases(r['timers'])}")]


def bench_workers(folder, scale):
    steps = int(200_000 * scale)
    config = config_file(folder, "Ball3D.yaml", steps)
    rows, seconds = [], {}
    for n in (8, 1):
        r = learn(config, folder, f"workers{n}", "--num-envs", str(n), "--workers", "process",
                  "--env-args", "step_latency_ms=5")
        seconds[n] = r["seconds"]
        connected = r["connected"]
        spread = (f", connections {max(connected) - min(connected):.2f} s first to last"
                  if n > 1 and connected else "")
        rows.append(row("workers", f"Ball3D 5 ms/step {steps // 1000}k, {n} worker(s)", r,
                        f"{r['step'] / r['seconds']:,.0f} steps/s{spread}"))
    rows.append(("workers", "8 workers against 1 (wall time)", "", "",
                 f"{seconds[1] / seconds[8]:.2f}x", ""))
    return rows


BENCHES = {"ball3d": bench_ball3d, "basic": bench_basic, "cartpole": bench_cartpole,
           "startup": bench_startup, "workers": bench_workers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each row's steps")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHES), default=list(BENCHES),
                        help="the rows to run")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.only:
            rows.extend(BENCHES[name](folder, scale))
            print(f"{name}: done", file=sys.stderr, flush=True)
    header = ("row", "what", "wall s", "CPU s", "figure", "peak RSS MB")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"{sys.executable}")


if __name__ == "__main__":
    main()
