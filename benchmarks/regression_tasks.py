"""ML-Agents' small regression tasks on many seeds: every variant, every seed, one table.

    python benchmarks/regression_tasks.py [--variants ppo_hybrid_2c1d ...] [--seeds 1337 0 1]
                                          [--jobs 2] [--json out.json]

The tasks and their configs are the test fixtures in ``tests/regression`` (ML-Agents'
``simple_test_envs.py`` envs, with the trainer settings its ``test_simple_rl.py`` and
``test_hybrid.py`` use). A run passes ML-Agents' criterion when the mean of the env's last
five final rewards exceeds 0.9 (each line also gives the mean of the last fifty and how many
of the last fifty and of the last hundred were below 0). Each run is its own process
(``--jobs`` at once); prints a line per run as it finishes, then the table: the figure of
every seed, and passes / runs.
For the group tasks it also prints the range of the critic's value estimates next to the
range of the lambda returns it regressed on.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))

DEFAULT_SEEDS = [1337, 0, 1, 2, 3]


def run_one(variant: str, seed: int) -> dict:
    """One training run in a child process; returns its result as a dict."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run([sys.executable, __file__, "--child", variant, str(seed)],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"variant": variant, "seed": seed, "error": (out.stderr.strip().splitlines()
                                                            or ["no output"])[-1]}
    return json.loads(lines[-1])


def child(variant: str, seed: int) -> None:
    from tftrainers.console import import_tensorflow
    import_tensorflow()
    import numpy as np
    from regression.harness import run_variant
    result = run_variant(variant, seed)
    last50 = result.final_rewards[-50:]
    print(json.dumps({"variant": variant, "seed": seed, "score": result.score,
                      "last50": float(sum(last50) / max(len(last50), 1)),
                      "wrong_in_last50": sum(1 for r in last50 if r < 0),
                      "wrong_in_last100": sum(1 for r in result.final_rewards[-100:] if r < 0),
                      "probe": result.probe,
                      "passed": result.passed, "episodes": len(result.final_rewards),
                      "steps": result.steps, "seconds": result.seconds,
                      "values": result.value_range, "returns": result.return_range,
                      "late_values": result.estimate_range(from_step=result.steps // 2),
                      "baselines": result.estimate_range("Policy/Extrinsic Baseline Estimate"),
                      "group_returns": result.group_returns and result.group_returns[-5:],
                      "leaver_bootstrap": (float(np.mean(result.leaver_bootstraps[-200:]))
                                           if result.leaver_bootstraps else None)}))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="*", default=None)
    parser.add_argument("--seeds", nargs="*", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write every result here")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    from regression.harness import VARIANTS
    names = args.variants or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    jobs = [(n, s) for n in names for s in args.seeds]
    results = []

    def report(job):
        result = run_one(*job)
        if "error" in result:
            print(f"{job[0]:36s} seed {job[1]:5d}  ERROR {result['error']}", flush=True)
        else:
            print(f"{job[0]:36s} seed {job[1]:5d}  {result['score']:7.3f}  "
                  f"{'pass' if result['passed'] else 'FAIL'}  {result['seconds']:6.1f}s  "
                  f"(last 50: {result['last50']:.3f}, {result['wrong_in_last50']} below 0; "
                  f"last 100: {result['wrong_in_last100']} below 0)",
                  flush=True)
        return result
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        results = list(pool.map(report, jobs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)

    print(f"\n{'variant':36s} " + " ".join(f"{s:>7d}" for s in args.seeds) + "   passed")
    total = passed = 0
    for name in names:
        row = [r for r in results if r["variant"] == name]
        cells = [("  error" if "error" in r else f"{r['score']:7.3f}" + ("" if r["passed"] else "*"))
                 for r in row]
        ok = sum(1 for r in row if r.get("passed"))
        total, passed = total + len(row), passed + ok
        print(f"{name:36s} " + " ".join(f"{c:>7s}" for c in cells) + f"   {ok}/{len(row)}")
    print(f"\n{passed} of {total} runs pass (* = below ML-Agents' 0.9)")
    group = [r for r in results if r.get("values") and r["variant"].startswith("poca_group")]
    if group:
        print("\ncritic estimates vs the lambda returns they regress on (min, max), group runs;"
              "\n'late': from the second half of training; a member collects at most 1.06:")
        for r in group:
            late = r["late_values"] or (float("nan"),) * 2
            print(f"{r['variant']:36s} seed {r['seed']:5d}  values "
                  f"[{r['values'][0]:6.2f}, {r['values'][1]:6.2f}]  late "
                  f"[{late[0]:6.2f}, {late[1]:6.2f}]  returns "
                  f"[{r['returns'][0]:6.2f}, {r['returns'][1]:6.2f}]  leavers' bootstrap "
                  f"{r.get('leaver_bootstrap') or float('nan'):5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
