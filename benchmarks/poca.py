"""MA-POCA vs independent PPO on cooperative groups, at the same step budget, every seed.

    python benchmarks/poca.py [--envs DungeonEscape PushBlockCollab SimpleSpread]
                              [--seeds 0 1 2] [--max-steps N ...] [--episodes 200]
                              [--trainers poca ppo] [--leaver-bootstrap group|remaining]

For each env, both trainers run ``configs/poca/<env>.yaml`` unchanged but for the trainer:

- ``poca``: the config as it is (group reward, teammates' rewards and credit after death
  through the group's value);
- ``poca --leaver-bootstrap remaining``: the config with ``hyperparameters.leaver_bootstrap``
  set (what a member that finished before its group bootstraps from);
- ``ppo``: ``trainer_type: ppo``, each agent trained as its own agent of one behavior. On
  the built-ins it is given the group reward as its own (env arg ``shared_reward=true``);
  on simple_spread each agent's PettingZoo reward already holds the shared part.

Each trained policy is scored on the unchanged env with ``tftrainers-evaluate --episodes
N`` (sampling, as it trained): DungeonEscape by the share of group episodes that escaped,
PushBlockCollab by the mean group return (``mean_group_reward``), simple_spread by the
return summed over its 3 agents (3 x ``mean_reward``; see the README for the reward
convention next to EPyMARL's MAPPO figure). Every run is its own process; prints one
line per run (with its wall time) and a table of every seed. ``--results-dir DIR`` keeps the
runs (``DIR/<env>_<trainer>_<seed>``, e.g. for ``tftrainers-plot``); by default they are
deleted at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import yaml

from tftrainers.settings import LEAVER_BOOTSTRAPS

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.dirname(sys.executable)
ENVS = {
    # env: (config, env id, score name, how to score an evaluation result)
    "DungeonEscape": ("DungeonEscape.yaml", "builtin:DungeonEscape", "escape rate",
                      lambda r: r["mean_group_reward"]),
    "PushBlockCollab": ("PushBlockCollab.yaml", "builtin:PushBlockCollab", "group return",
                        lambda r: r["mean_group_reward"]),
    "SimpleSpread": ("SimpleSpread.yaml", "pettingzoo:mpe2.simple_spread_v3",
                     "return summed over 3 agents", lambda r: 3 * r["mean_reward"]),
}


def run(env: str, trainer: str, seed: int, max_steps: int, episodes: int,
        workdir: str, summary_freq: int = None, leaver_bootstrap: str = None) -> tuple:
    """Trains one variant and scores it; returns (score, training wall time in s)."""
    config_name, env_id, _, score = ENVS[env]
    with open(os.path.join(ROOT, "configs", "poca", config_name)) as f:
        config = yaml.safe_load(f)
    (behavior,) = config["behaviors"].values()
    behavior["trainer_type"] = trainer
    behavior["max_steps"] = max_steps
    if summary_freq:
        behavior["summary_freq"] = summary_freq
    if leaver_bootstrap and trainer == "poca":
        behavior.setdefault("hyperparameters", {})["leaver_bootstrap"] = leaver_bootstrap
    env_settings = config.setdefault("env_settings", {})
    env_args = dict(env_settings.get("env_args") or {})
    if trainer == "ppo" and env_id.startswith("builtin:"):
        env_args["shared_reward"] = True
    env_settings["env_args"] = env_args
    path = os.path.join(workdir, f"{env}_{trainer}_{seed}.yaml")  # runs may share workdir
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    run_id = f"{env}_{trainer}_{seed}"
    start = time.perf_counter()
    subprocess.run([os.path.join(BIN, "tftrainers-learn"), path, "--run-id", run_id,
                    "--seed", str(seed), "--results-dir", workdir, "--force"],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    evaluate = [os.path.join(BIN, "tftrainers-evaluate"), env_id, "--policy",
                os.path.join(workdir, run_id), "--episodes", str(episodes), "--seed", str(seed)]
    plain_args = {k: v for k, v in env_args.items() if k != "shared_reward"}
    if plain_args:
        evaluate += ["--env-args", *(f"{k}={v}" for k, v in plain_args.items())]
    out = subprocess.run(evaluate, check=True, capture_output=True, text=True)
    return float(score(json.loads(out.stdout.strip().splitlines()[-1]))), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, nargs="+", default=None,
                        help="steps per run, one per env (default: each config's max_steps)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--trainers", nargs="+", default=["poca", "ppo"],
                        choices=["poca", "ppo"], help="(to run parts in parallel processes)")
    parser.add_argument("--summary-freq", type=int, default=None,
                        help="steps between summaries (CSV rows; default: the config's)")
    parser.add_argument("--leaver-bootstrap", default=None, choices=LEAVER_BOOTSTRAPS,
                        help="POCA's hyperparameters.leaver_bootstrap (default: the config's)")
    parser.add_argument("--results-dir", default=None,
                        help="keep the runs here (default: a temporary folder, deleted)")
    args = parser.parse_args()
    if args.max_steps is not None and len(args.max_steps) != len(args.envs):
        parser.error(f"--max-steps: give one per env ({len(args.envs)}), got "
                     f"{len(args.max_steps)}")
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.results_dir or scratch
        os.makedirs(workdir, exist_ok=True)
        for k, env in enumerate(args.envs):
            if args.max_steps is None:
                with open(os.path.join(ROOT, "configs", "poca", ENVS[env][0])) as f:
                    (behavior,) = yaml.safe_load(f)["behaviors"].values()
                steps = int(behavior["max_steps"])
            else:
                steps = args.max_steps[k]
            for trainer in args.trainers:
                scores, walls = [], []
                for seed in args.seeds:
                    value, wall = run(env, trainer, seed, steps, args.episodes, workdir,
                                      args.summary_freq, args.leaver_bootstrap)
                    scores.append(value)
                    walls.append(wall)
                    print(f"{env:15s} {trainer:4s} seed {seed}: {ENVS[env][2]} {value:.3f} "
                          f"({steps} steps, {wall:.0f} s)", flush=True)
                rows.append((env, trainer, steps, scores, walls))
    print(f"\n{'env':15s} {'trainer':7s} {'steps':>8s} {'mean':>8s}  per seed "
          f"{args.seeds} (wall s)")
    for env, trainer, steps, scores, walls in rows:
        print(f"{env:15s} {trainer:7s} {steps:8d} {np.mean(scores):8.3f}  "
              + ", ".join(f"{s:.3f}" for s in scores)
              + "  (" + ", ".join(f"{w:.0f}" for w in walls) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
