"""Env workers against in-process stepping, side by side: steps per second of training.

    python benchmarks/workers.py [--rounds 1] [--ball3d-steps 36000] [--cartpole-steps 30000]
                                 [--no-updates]

Each variant is one ``tftrainers-learn`` run (its own process, ``--seed 0``); the variants
run one after another in each round, so the VM's drift falls on all of them alike. The
figure is the trainer's steps (agent steps received) over its ``Time Elapsed`` at the last
summary, start-up and TensorFlow import excluded, compile and updates included. With
``--no-updates`` the buffer is larger than the run, so nothing updates: the figure is then
what the env, the acting and the transport deliver (env-limited throughput).

- ``builtin:Ball3D`` with ``step_latency_ms=5`` (each env step of an instance takes 5 ms,
  as a game engine's frame; 12 agents an instance), ``configs/ppo/Ball3D.yaml``:
  inline 1 instance; inline 4 instances (stepped one after another); 1, 2 and 4 worker
  processes (one instance each).
- ``builtin:Ball3D`` with ``step_latency_ms=1``: 2 instances inline against 2 workers
  (where ``workers: auto`` draws its line).
- ``gym:CartPole-v1`` (a cheap env), ``configs/ppo/CartPole.yaml``: 4 instances inline (one
  env of 4 x 8 copies) against 4 worker processes of 8 copies each.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "configs", "ppo")
SUMMARY = re.compile(r"Step: (\d+)\. Time Elapsed: ([\d.]+) s")


def config_file(folder: str, name: str, max_steps: int, no_updates: bool = False,
                summaries: int = 3) -> str:
    with open(os.path.join(CONFIGS, name)) as fh:
        config = yaml.safe_load(fh)
    for behavior in config["behaviors"].values():
        if no_updates:
            behavior["hyperparameters"]["buffer_size"] = 10 * max_steps
        behavior["max_steps"] = max_steps
        behavior["summary_freq"] = max(max_steps // summaries, 1)
        behavior["checkpoint_interval"] = 10 * max_steps
    path = os.path.join(folder, f"{max_steps}-{name}")
    with open(path, "w") as fh:
        yaml.safe_dump(config, fh)
    return path


def run(config: str, results: str, env_args, num_envs: int, workers: str,
        run_id: str = "bench", seed: int = 0, ray: bool = False, steady: bool = False) -> float:
    """Steps per second of one run: at its last summary (start-up excluded), or with
    ``steady`` from its first summary to its last (starting the workers or a Ray cluster
    left out too). ``ray`` puts the workers on a local Ray (``--ray-address auto``)."""
    argv = [sys.executable, "-c", "from tftrainers.cli import learn; learn()", config,
            "--run-id", run_id, "--force", "--results-dir", results, "--seed", str(seed),
            "--num-envs", str(num_envs)]
    argv += ["--ray-address", "auto"] if ray else ["--workers", workers]
    if env_args:
        argv += ["--env-args", *env_args]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = SUMMARY.findall(out.stdout)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{out.stdout}\n{out.stderr}")
    (step0, time0), (step, elapsed) = found[0], found[-1]
    if steady and len(found) > 1:
        return (int(step) - int(step0)) / (float(elapsed) - float(time0))
    return int(step) / float(elapsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--ball3d-steps", type=int, default=36000)
    parser.add_argument("--cartpole-steps", type=int, default=30000)
    parser.add_argument("--no-updates", action="store_true",
                        help="a buffer larger than the run: stepping and acting only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ball = config_file(folder, "Ball3D.yaml", args.ball3d_steps, args.no_updates)
        cart = config_file(folder, "CartPole.yaml", args.cartpole_steps, args.no_updates)
        slow5, slow1 = ["step_latency_ms=5"], ["step_latency_ms=1"]
        variants = [
            ("Ball3D 5 ms", "inline, 1 instance", ball, slow5, 1, "inline"),
            ("Ball3D 5 ms", "inline, 4 instances", ball, slow5, 4, "inline"),
            ("Ball3D 5 ms", "1 worker process", ball, slow5, 1, "process"),
            ("Ball3D 5 ms", "2 worker processes", ball, slow5, 2, "process"),
            ("Ball3D 5 ms", "4 worker processes", ball, slow5, 4, "process"),
            ("Ball3D 1 ms", "inline, 2 instances", ball, slow1, 2, "inline"),
            ("Ball3D 1 ms", "2 worker processes", ball, slow1, 2, "process"),
            ("CartPole", "inline, 4 instances", cart, [], 4, "inline"),
            ("CartPole", "4 worker processes", cart, [], 4, "process"),
        ]
        figures = {v[:2]: [] for v in variants}
        for round_ in range(args.rounds):
            for env, label, config, env_args, n, workers in variants:
                rate = run(config, os.path.join(folder, "r"), env_args, n, workers)
                figures[(env, label)].append(rate)
                print(f"round {round_}: {env}, {label}: {rate:.0f} steps/s", flush=True)
    print(f"\n2 shared CPU cores (other jobs running); {args.rounds} round(s), every run "
          f"listed; ratio: mean over the first variant of the same env"
          f"{'; no updates' if args.no_updates else ''}.")
    print("| env | variant | steps/s (each run) | ratio |")
    print("|---|---|---|---|")
    base = {}
    for (env, label), rates in figures.items():
        mean = sum(rates) / len(rates)
        base.setdefault(env, mean)
        print(f"| {env} | {label} | {', '.join(f'{r:.0f}' for r in rates)} | "
              f"{mean / base[env]:.2f}x |")


if __name__ == "__main__":
    main()
