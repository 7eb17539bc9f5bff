"""Every ready config on several seeds: does each reach its target on every seed?

    python benchmarks/config_sweep.py [--configs Basic GridWorld sac/Basic ...]
                                      [--seeds 0 1 2 3 4] [--jobs 2] [--results-dir DIR]

A config is named by its file in configs/ppo/ (``Basic``) or, for another trainer's folder,
with the folder in front (``sac/Basic`` is configs/sac/Basic.yaml).
Each run is ``tftrainers-learn configs/ppo/NAME.yaml --seed S`` in its own process (wall
time and CPU seconds are that whole process's), then ``tftrainers-evaluate ENV --policy
RUN --episodes 100 --seed 1000+S`` (with the config's ``env_args``) scores the trained
policy (sampled actions, as it was trained, on env seeds it never trained on). The
Pyramids configs are scored as benchmarks/curiosity.py scores them: the share of episodes
that reach the goal. Prints one line per run as it finishes, then a table with every seed,
the minimum and the median against the target.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from curiosity import BIN, CONFIGS, pyramids_success, run

#: config -> (target, what the score is). Returns are mean episode rewards.
TARGETS = {
    "Basic": (0.9, "return"),
    "GridWorld": (0.8, "return"),
    "GridWorldGrid": (0.9, "return"),
    "Ball3D": (90.0, "return"),
    "Hallway": (0.7, "return"),
    "CartPole": (475.0, "return"),
    "Pyramids": (0.8, "success rate"),
    "PyramidsRND": (0.8, "success rate"),
    "MountainCarRND": (-180.0, "return; random play never reaches the flag: -200"),
    "sac/Basic": (0.9, "return"),
    "sac/PyramidsCuriosity": (0.8, "success rate"),
    "sac/GridWorldVisual": (0.8, "return"),
}


def config_path(name: str) -> str:
    """configs/ppo/NAME.yaml, or configs/FOLDER/NAME.yaml for ``FOLDER/NAME``."""
    folder, _, stem = name.rpartition("/")
    return os.path.join(CONFIGS, "..", folder or "ppo", f"{stem}.yaml")


def config_facts(name: str):
    """(env id, max_steps, env_args) of the config ``name`` (see config_path)."""
    with open(config_path(name)) as f:
        data = yaml.safe_load(f)
    (behavior,) = data["behaviors"].values()
    env = data["env_settings"]
    return env["env_path"], behavior["max_steps"], env.get("env_args") or {}


def run_timed(command) -> float:
    """Runs ``command`` and returns its CPU seconds (user + system, of that process alone:
    runs in parallel share the machine, so wall time alone says little)."""
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"failed: {' '.join(command)}\n{err.read().decode()[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def train_and_score(name: str, seed: int, results: str, episodes: int):
    env_id, _, env_args = config_facts(name)
    run_id = f"{name.replace('/', '-')}-{seed}"
    start = time.perf_counter()
    cpu = run_timed([os.path.join(BIN, "tftrainers-learn"), config_path(name), "--run-id",
                     run_id, "--force", "--results-dir", results, "--seed", str(seed)])
    seconds = time.perf_counter() - start
    out = run([os.path.join(BIN, "tftrainers-evaluate"), env_id, "--policy",
               os.path.join(results, run_id), "--episodes", str(episodes),
               "--seed", str(1000 + seed)]
              + (["--env-args"] + [f"{k}={v}" for k, v in env_args.items()] if env_args else []))
    result = json.loads(out.strip().splitlines()[-1])
    pyramids = name.rpartition("/")[2].startswith("Pyramids")
    score = pyramids_success(result) if pyramids else result["mean_reward"]
    target, _ = TARGETS[name]
    print(f"{name:21s} seed {seed}: {score:9.3f} (target {target:g}: "
          f"{'met' if score >= target else 'MISSED'}), trained in {seconds:.0f} s "
          f"(CPU {cpu:.0f} s)", flush=True)
    return name, seed, score, seconds, cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--results-dir", default=None, help="keep the runs here")
    args = parser.parse_args(argv)
    results = args.results_dir or os.path.join(
        tempfile.mkdtemp(prefix="tftrainers-sweep-"), "results")
    print(f"configs {', '.join(args.configs)}; seeds {args.seeds}; {args.episodes} evaluation "
          f"episodes each; {args.jobs} runs at a time; runs in {results}", flush=True)
    jobs = [(name, seed) for name in args.configs for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda job: train_and_score(*job, results, args.episodes), jobs))
    print()
    seeds = " | ".join(f"seed {s}" for s in args.seeds)
    print(f"| config | env | steps | {seeds} | min | median | target | seeds met | "
          f"wall time (median) | CPU (median) |")
    print("|---|---|---|" + "---|" * len(args.seeds) + "---|---|---|---|---|---|")
    all_met = True
    for name in args.configs:
        scores = [r[2] for r in rows if r[0] == name]
        seconds = [r[3] for r in rows if r[0] == name]
        cpu = [r[4] for r in rows if r[0] == name]
        target, kind = TARGETS[name]
        met = sum(score >= target for score in scores)
        all_met &= met == len(scores)
        env_id, steps, _ = config_facts(name)
        print(f"| {name} | {env_id} | {steps} | "
              + " | ".join(f"{s:.3g}" for s in scores)
              + f" | {min(scores):.3g} | {statistics.median(scores):.3g} | {target:g} "
                f"({kind}) | {met}/{len(scores)} | {statistics.median(seconds):.0f} s | "
                f"{statistics.median(cpu):.0f} s |")
    print(f"\nevery seed met its target: {'yes' if all_met else 'NO'}")
    return 0 if all_met else 1


if __name__ == "__main__":
    sys.exit(main())
