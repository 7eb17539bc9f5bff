"""PPO alone vs PPO + curiosity vs PPO + RND on the sparse-reward built-in Pyramids.

    python benchmarks/curiosity.py [--seeds 0 1 2] [--max-steps N] [--jobs 2]

Each variant trains from configs/ppo/Pyramids.yaml (curiosity) or PyramidsRND.yaml (RND);
"PPO alone" is Pyramids.yaml with the curiosity signal removed, everything else equal. Every
run has the same step budget (the configs' max_steps unless --max-steps). Each trained
policy is then scored with ``tftrainers-evaluate --episodes 100`` (sampled actions, as it
was trained) on fresh env seeds. An episode's reward is 2 if it reached the goal minus
0.001 per step, so the success rate is exactly (mean reward + 0.001 * mean length) / 2.

Prints one line per run as it finishes, then a table: success rate and mean reward per
variant (mean over seeds, and each seed's).
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

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "configs", "ppo")
BIN = os.path.dirname(sys.executable)
STEP_PENALTY, GOAL_REWARD = 0.001, 2.0
TARGETS = {"ppo": ("<=", 0.3), "curiosity": (">=", 0.8), "rnd": (">=", 0.8)}


def variant_config(variant: str, workdir: str, max_steps: int | None) -> str:
    name = "PyramidsRND.yaml" if variant == "rnd" else "Pyramids.yaml"
    with open(os.path.join(CONFIGS, name)) as f:
        data = yaml.safe_load(f)
    behavior = data["behaviors"]["Pyramids"]
    if variant == "ppo":
        behavior["reward_signals"] = {"extrinsic": behavior["reward_signals"]["extrinsic"]}
    if max_steps:
        behavior["max_steps"] = max_steps
    path = os.path.join(workdir, f"{variant}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def pyramids_success(score: dict) -> float:
    """Share of evaluated Pyramids episodes that reached the goal, from the JSON line of
    ``tftrainers-evaluate``: (mean reward + penalty * mean length) / goal reward."""
    success = (score["mean_reward"] + STEP_PENALTY * score["mean_episode_length"]) / GOAL_REWARD
    return min(max(success, 0.0), 1.0)  # float32 sums: -1e-8 is 0


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-3000:]}")
    return result.stdout


def train_and_score(variant: str, seed: int, config: str, results: str, episodes: int):
    run_id = f"{variant}-{seed}"
    start = time.perf_counter()
    run([os.path.join(BIN, "tftrainers-learn"), config, "--run-id", run_id, "--force",
         "--results-dir", results, "--seed", str(seed)])
    minutes = (time.perf_counter() - start) / 60
    out = run([os.path.join(BIN, "tftrainers-evaluate"), "builtin:Pyramids", "--policy",
               os.path.join(results, run_id), "--episodes", str(episodes),
               "--seed", str(1000 + seed)])
    score = json.loads(out.strip().splitlines()[-1])
    success = pyramids_success(score)
    line = (f"{variant:9s} seed {seed}: success {success:.2f}, mean reward "
            f"{score['mean_reward']:+.3f}, trained in {minutes:.1f} min")
    print(line, flush=True)
    return variant, seed, success, score["mean_reward"], minutes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--max-steps", type=int, default=None,
                        help="step budget of every run (default: the configs' max_steps)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--results-dir", default=None, help="keep the runs here")
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="tftrainers-curiosity-")
    results = args.results_dir or os.path.join(workdir, "results")
    configs = {v: variant_config(v, workdir, args.max_steps) for v in args.variants}
    with open(configs[args.variants[0]]) as f:
        budget = yaml.safe_load(f)["behaviors"]["Pyramids"]["max_steps"]
    print(f"Pyramids, {budget} steps per run, seeds {args.seeds}, {args.episodes} "
          f"evaluation episodes each", flush=True)
    jobs = [(v, s) for v in args.variants for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda job: train_and_score(job[0], job[1], configs[job[0]],
                                                         results, args.episodes), jobs))
    print()
    print("| variant | success rate (mean) | per seed | mean reward | minutes/run | target |")
    print("|---|---|---|---|---|---|")
    met = True
    for variant in args.variants:
        mine = [r for r in rows if r[0] == variant]
        success = statistics.mean(r[2] for r in mine)
        op, bound = TARGETS[variant]
        ok = success <= bound if op == "<=" else success >= bound
        met &= ok
        print(f"| {'PPO alone' if variant == 'ppo' else 'PPO + ' + variant} | {success:.2f} | "
              f"{' '.join(f'{r[2]:.2f}' for r in mine)} | "
              f"{statistics.mean(r[3] for r in mine):+.3f} | "
              f"{statistics.mean(r[4] for r in mine):.1f} | {op} {bound} "
              f"{'met' if ok else 'MISSED'} |")
    print(f"\ntargets {'met' if met else 'missed'}")


if __name__ == "__main__":
    main()
