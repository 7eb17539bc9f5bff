"""Self-play: train a configs/selfplay/ config on given seeds, then score each final policy.

    python benchmarks/selfplay.py --env Tennis|SoccerTwos [--seeds 0 1 2] [--max-steps N]
                                  [--matches 64] [--results-dir DIR] [--score-only]

For each seed it trains ``configs/selfplay/<env>.yaml`` (``--max-steps`` overrides the
config's budget) into ``DIR/<env>_s<seed>`` and then, with ``tftrainers-evaluate`` and
``--seed 1000+S``:

- reads ``Self-play/ELO`` over training from ``run_logs/<env>.csv`` (first and last summary,
  its maximum; "rises": the last is above both the first summary and ``initial_elo``);
- plays the run (its newest checkpoint) against the env's scripted heuristic: Tennis in
  first-to-5 matches of rallies (``--first-to 5``), SoccerTwos in matches of one kick-off to
  a goal (a match cut by the time limit is a draw);
- plays it against an early snapshot of the same run: the ``.onnx`` of the run's first
  checkpoint (``<env>/<env>-<step>.onnx``, the smallest step; the config keeps enough
  checkpoints for it to survive), in the same kind of matches.

The win rate is wins / matches (draws count as not won). ``--score-only`` scores runs
already in DIR (trained by an earlier call, or by ``tftrainers-learn`` with the same config,
run id and seed) without training. Every run is its own process; prints one line per seed
(training wall and CPU time included) and a table of every seed, marked against the
targets (Tennis: >= 70% against the heuristic and >= 80% against the early snapshot;
SoccerTwos: >= 70% against the heuristic; ELO rises).
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import resource
import subprocess
import sys
import time

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.path.dirname(sys.executable)
GAMES = {
    # env: (first_to, target against the heuristic, target against the early snapshot)
    "Tennis": (5, 0.70, 0.80),
    "SoccerTwos": (1, 0.70, None),
}


def config_of(env: str, max_steps: int | None, workdir: str) -> tuple[str, dict]:
    path = os.path.join(ROOT, "configs", "selfplay", f"{env}.yaml")
    with open(path) as f:
        config = yaml.safe_load(f)
    if max_steps is not None:
        config["behaviors"][env]["max_steps"] = max_steps
        path = os.path.join(workdir, f"{env}.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
    return path, config


def train(env: str, config_path: str, seed: int, workdir: str) -> tuple[float, float]:
    """Trains one seed; returns (wall time, CPU time of the training process) in s."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([os.path.join(BIN, "tftrainers-learn"), config_path,
                    "--run-id", f"{env}_s{seed}", "--seed", str(seed),
                    "--results-dir", workdir, "--force"], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def elo_curve(run: str, env: str) -> list[tuple[int, float]]:
    with open(os.path.join(run, "run_logs", f"{env}.csv")) as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["Self-play/ELO"])) for r in rows if r.get("Self-play/ELO")]


def early_snapshot(run: str, env: str) -> str:
    files = glob.glob(os.path.join(run, env, f"{env}-*.onnx"))
    if not files:
        raise SystemExit(f"{run}: no checkpoint .onnx under {env}/ to play as the early snapshot")
    return min(files, key=lambda p: int(re.search(r"-(\d+)\.onnx$", p).group(1)))


def matches(env: str, run: str, opponent: str, matches_n: int, seed: int, env_args: dict,
            first_to: int) -> dict:
    command = [os.path.join(BIN, "tftrainers-evaluate"), f"builtin:{env}", "--policy", run,
               "--opponent", opponent, "--episodes", str(matches_n), "--seed", str(seed)]
    if first_to > 1:
        command += ["--first-to", str(first_to)]
    if env_args:
        command += ["--env-args", *(f"{k}={v}" for k, v in env_args.items())]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=sorted(GAMES), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--matches", type=int, default=64)
    parser.add_argument("--results-dir", default=os.path.join(ROOT, "results", "selfplay"))
    parser.add_argument("--score-only", action="store_true",
                        help="score the runs already in --results-dir, do not train")
    args = parser.parse_args()
    env = args.env
    first_to, heuristic_target, snapshot_target = GAMES[env]
    os.makedirs(args.results_dir, exist_ok=True)
    config_path, config = config_of(env, args.max_steps, args.results_dir)
    env_args = dict((config.get("env_settings") or {}).get("env_args") or {})
    initial_elo = float(config["behaviors"][env]["self_play"].get("initial_elo", 1200.0))
    rows = []
    for seed in args.seeds:
        run = os.path.join(args.results_dir, f"{env}_s{seed}")
        wall = cpu = float("nan")
        if not args.score_only:
            wall, cpu = train(env, config_path, seed, args.results_dir)
        curve = elo_curve(run, env)
        elo_first, elo_last = curve[0][1], curve[-1][1]
        elo_max = max(e for _, e in curve)
        rises = elo_last > max(elo_first, initial_elo)
        vs_heuristic = matches(env, run, "heuristic", args.matches, 1000 + seed, env_args,
                               first_to)
        snapshot = early_snapshot(run, env)
        vs_snapshot = matches(env, run, snapshot, args.matches, 1000 + seed, env_args, first_to)
        row = {"seed": seed, "steps": curve[-1][0], "train_wall_s": round(wall, 1),
               "train_cpu_s": round(cpu, 1), "elo_first": round(elo_first, 1),
               "elo_last": round(elo_last, 1), "elo_max": round(elo_max, 1), "elo_rises": rises,
               "vs_heuristic": [vs_heuristic[k] for k in ("wins", "draws", "losses")],
               "win_rate_heuristic": vs_heuristic["win_rate"],
               "early_snapshot": os.path.basename(snapshot),
               "vs_snapshot": [vs_snapshot[k] for k in ("wins", "draws", "losses")],
               "win_rate_snapshot": vs_snapshot["win_rate"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    unit = "first-to-5 matches" if first_to > 1 else "matches"
    print(f"\n{env}: win rates in {args.matches} {unit} each (wins/draws/losses)")
    print("| seed | steps | ELO first -> last (max) | rises | vs heuristic | vs early snapshot |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        h_ok = "ok" if r["win_rate_heuristic"] >= heuristic_target else "MISSED"
        s_ok = ("" if snapshot_target is None else
                " ok" if r["win_rate_snapshot"] >= snapshot_target else " MISSED")
        print(f"| {r['seed']} | {r['steps']} | {r['elo_first']} -> {r['elo_last']} "
              f"({r['elo_max']}) | {'yes' if r['elo_rises'] else 'NO'} | "
              f"{r['win_rate_heuristic']:.3f} {tuple(r['vs_heuristic'])} {h_ok} | "
              f"{r['win_rate_snapshot']:.3f} {tuple(r['vs_snapshot'])}{s_ok} "
              f"({r['early_snapshot']}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
