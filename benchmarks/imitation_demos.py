"""Learning from demonstrations: GAIL and behavioral_cloning inside PPO (issue #14 item 7).

    python benchmarks/imitation_demos.py [--tasks pyramids gail ball3d] [--seeds 0 1 2]
                                         [--jobs 2] [--results-dir DIR]

Every run is a ``tftrainers-learn`` process on a config of ``configs/imitation`` (or its
plain-PPO peer), with the demonstrations of ``configs/demos`` (recorded from the built-in
heuristics by ``tftrainers-record``; see the README). Three comparisons:

- ``pyramids``: ``imitation/Pyramids.yaml`` (extrinsic + curiosity + GAIL + BC, 6 demo
  episodes) against ``ppo/Pyramids.yaml`` (extrinsic + curiosity). A checkpoint (and its
  .onnx) is written every ``--interval`` steps; each is scored in order with 50 sampled
  episodes until one reaches the goal in 80% of them: that step is the run's "steps to
  80%". Target: at least 3x fewer with the demonstrations.
- ``gail``: GAIL alone (no extrinsic reward) on GridWorld (``imitation/GridWorldGAIL.yaml``)
  and Basic (the same shape on ``ppo/Basic.yaml``'s hyperparameters); the trained policy is
  scored with 200 sampled episodes. Target: return >= 90% of the demonstrations' mean.
- ``ball3d``: ``imitation/Ball3DPretrain.yaml`` against ``ppo/Ball3D.yaml``: the first
  summary step whose mean return is >= 90 (the run's CSV log). Target: fewer with BC.

Prints a line per run as it finishes, then a table per comparison with every seed.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = os.path.join(ROOT, "configs")
BIN = os.path.dirname(sys.executable)
PYRAMIDS_GOAL, PYRAMIDS_STEP_PENALTY = 2.0, 0.001


def load(path):
    with open(os.path.join(CONFIGS, path)) as f:
        return yaml.safe_load(f)


def write(data, workdir, name):
    # Demo paths are relative to the repository (where the benchmark runs its commands).
    path = os.path.join(workdir, f"{name}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(data, f)
    return path


def behavior(data):
    return next(iter(data["behaviors"].values()))


def train(config, run_id, seed, results):
    start = time.perf_counter()
    result = subprocess.run([os.path.join(BIN, "tftrainers-learn"), config, "--run-id", run_id,
                             "--force", "--results-dir", results, "--seed", str(seed)],
                            capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0:
        sys.exit(f"failed: {run_id}\n{result.stderr[-3000:]}")
    return (time.perf_counter() - start) / 60


def score(env_id, policy, episodes, seed, env_args=None):
    """Mean return and episode length of ``policy`` (an .onnx or a run), sampled actions."""
    from tftrainers.envs import make
    from tftrainers.evaluate import evaluate, make_policy
    env = make(env_id, seed=seed, **(env_args or {}))
    try:
        out = next(iter(evaluate(env, make_policy(policy, env, seed=seed),
                                 episodes=episodes).values()))
    finally:
        env.close()
    return out["mean_reward"], out["mean_episode_length"]


# --- pyramids ------------------------------------------------------------------------------
def pyramids_configs(workdir, max_steps, interval):
    out = {}
    for variant, path in (("demos", "imitation/Pyramids.yaml"), ("curiosity", "ppo/Pyramids.yaml")):
        data = load(path)
        b = behavior(data)
        b.update(max_steps=max_steps, checkpoint_interval=interval,
                 keep_checkpoints=max_steps // interval + 2)
        out[variant] = write(data, workdir, f"pyramids-{variant}")
    return out


def steps_to_success(run_dir, seed, episodes=50, target=0.8):
    folder = os.path.join(run_dir, "Pyramids")
    models = sorted((int(m.group(1)), name) for name in os.listdir(folder)
                    for m in [re.fullmatch(r"Pyramids-(\d+)\.onnx", name)] if m)
    for step, name in models:
        reward, length = score("builtin:Pyramids", os.path.join(folder, name), episodes,
                               1000 + seed)
        success = (reward + PYRAMIDS_STEP_PENALTY * length) / PYRAMIDS_GOAL
        if success >= target:
            return step, success
    return None, None


def pyramids_job(variant, seed, config, results):
    run_id = f"pyramids-{variant}-{seed}"
    minutes = train(config, run_id, seed, results)
    step, success = steps_to_success(os.path.join(results, run_id), seed)
    print(f"pyramids {variant:9s} seed {seed}: 80% at {step} steps "
          f"({success if success is None else round(success, 2)}), {minutes:.1f} min",
          flush=True)
    return step, minutes


# --- gail alone ----------------------------------------------------------------------------
# Basic's GAIL signal (ppo/Basic.yaml's hyperparameters; no extrinsic reward).
BASIC_GAIL = {"gamma": 0.9, "strength": 1.0, "learning_rate": 3.0e-4, "use_actions": True,
              "network_settings": {"hidden_units": 128}, "demo_path": "configs/demos/Basic.demo"}


def gail_configs(workdir, max_steps):
    """{env: (config path, the config's env_args, its demo file)}."""
    out = {"GridWorld": load("imitation/GridWorldGAIL.yaml"), "Basic": load("ppo/Basic.yaml")}
    behavior(out["Basic"])["reward_signals"] = {"gail": dict(BASIC_GAIL)}
    configs = {}
    for env, data in out.items():
        if max_steps.get(env):
            behavior(data)["max_steps"] = max_steps[env]
        configs[env] = (write(data, workdir, f"gail-{env}"),
                        data.get("env_settings", {}).get("env_args") or {},
                        os.path.join(ROOT, behavior(data)["reward_signals"]["gail"]["demo_path"]))
    return configs


def gail_job(env, seed, config, results):
    path, env_args, _ = config
    run_id = f"gail-{env}-{seed}"
    minutes = train(path, run_id, seed, results)
    reward, _ = score(f"builtin:{env}", os.path.join(results, run_id), 200, 1000 + seed,
                      env_args)
    print(f"gail {env:9s} seed {seed}: return {reward:.3f}, {minutes:.1f} min", flush=True)
    return reward, minutes


# --- ball3d --------------------------------------------------------------------------------
def first_step_at(run_dir, name, bound):
    with open(os.path.join(run_dir, "run_logs", f"{name}.csv")) as f:
        for row in csv.DictReader(f):
            value = row.get("Environment/Cumulative Reward")
            if value and float(value) >= bound:
                return int(row["step"])
    return None


def ball3d_configs(workdir, max_steps):
    out = {}
    for variant, path in (("bc", "imitation/Ball3DPretrain.yaml"), ("ppo", "ppo/Ball3D.yaml")):
        data = load(path)
        if max_steps:
            behavior(data)["max_steps"] = max_steps
        out[variant] = write(data, workdir, f"ball3d-{variant}")
    return out


def ball3d_job(variant, seed, config, results):
    run_id = f"ball3d-{variant}-{seed}"
    minutes = train(config, run_id, seed, results)
    step = first_step_at(os.path.join(results, run_id), "Ball3D", 90.0)
    print(f"ball3d {variant:3s} seed {seed}: mean return >= 90 at {step} steps, "
          f"{minutes:.1f} min", flush=True)
    return step, minutes


def fmt(values):
    return ", ".join("never" if v is None else f"{v:g}" if isinstance(v, int) else f"{v:.3f}"
                     for v in values)


def mean_or_none(values):
    return None if any(v is None for v in values) else statistics.mean(values)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["pyramids", "gail", "ball3d"],
                        choices=["pyramids", "gail", "ball3d"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    parser.add_argument("--pyramids-steps", type=int, default=1_000_000)
    parser.add_argument("--pyramids-variants", nargs="+", default=["demos", "curiosity"],
                        choices=["demos", "curiosity"],
                        help="Pyramids variants to run (e.g. only demos after a config change "
                             "that leaves curiosity's runs as they were)")
    parser.add_argument("--interval", type=int, default=25_000,
                        help="Pyramids checkpoint (and scoring) interval")
    parser.add_argument("--gridworld-steps", type=int, default=None)
    parser.add_argument("--basic-steps", type=int, default=None)
    parser.add_argument("--ball3d-steps", type=int, default=None)
    parser.add_argument("--results-dir", default=None, help="keep the runs here")
    args = parser.parse_args(argv)
    from tftrainers.console import quiet_tensorflow
    quiet_tensorflow()  # the checkpoints are scored in this process: its start-up lines would
    # bury the figures
    workdir = tempfile.mkdtemp(prefix="tftrainers-imitation-")
    results = os.path.abspath(args.results_dir or os.path.join(workdir, "results"))
    makers = {}
    if "pyramids" in args.tasks:
        configs = {v: c for v, c in pyramids_configs(workdir, args.pyramids_steps,
                                                     args.interval).items()
                   if v in args.pyramids_variants}
        makers["pyramids"] = [("pyramids", v, s, lambda v=v, s=s: pyramids_job(
            v, s, configs[v], results)) for v in configs for s in args.seeds]
    if "gail" in args.tasks:
        gconfigs = gail_configs(workdir, {"GridWorld": args.gridworld_steps,
                                          "Basic": args.basic_steps})
        makers["gail"] = [("gail", e, s, lambda e=e, s=s: gail_job(e, s, gconfigs[e], results))
                          for e in gconfigs for s in args.seeds]
    if "ball3d" in args.tasks:
        bconfigs = ball3d_configs(workdir, args.ball3d_steps)
        makers["ball3d"] = [("ball3d", v, s, lambda v=v, s=s: ball3d_job(
            v, s, bconfigs[v], results)) for v in bconfigs for s in args.seeds]
    jobs = [job for task in args.tasks for job in makers[task]]  # in the order asked
    print(f"{len(jobs)} runs, seeds {args.seeds}, {args.jobs} at a time; results in {results}",
          flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda job: job[3](), jobs))
    rows = {(task, variant, seed): out for (task, variant, seed, _), out in zip(jobs, outcomes)}

    def per_seed(task, variant, i=0):
        return [rows[(task, variant, s)][i] for s in args.seeds]
    if "pyramids" in args.tasks:
        ran = args.pyramids_variants
        demos = per_seed("pyramids", "demos") if "demos" in ran else None
        alone = per_seed("pyramids", "curiosity") if "curiosity" in ran else None
        print("\n| Pyramids | steps to 80% success (mean) | per seed | minutes/run |")
        print("|---|---|---|---|")
        for label, variant, values in (("BC + GAIL + curiosity (6 demo episodes)", "demos", demos),
                                       ("curiosity alone", "curiosity", alone)):
            if values is None:
                continue
            m = mean_or_none(values)
            print(f"| {label} | {'not reached' if m is None else f'{m:,.0f}'} | {fmt(values)} | "
                  f"{statistics.mean(per_seed('pyramids', variant, 1)):.1f} |")
        m_demos = mean_or_none(demos) if demos else None
        m_alone = mean_or_none(alone) if alone else None
        if m_demos and m_alone:
            print(f"ratio {m_alone / m_demos:.1f}x (target >= 3x)")
    if "gail" in args.tasks:
        from tftrainers.processing.demonstrations import load_demonstrations
        print("\n| GAIL alone | return (mean) | per seed | demos' mean | ratio | target |")
        print("|---|---|---|---|---|---|")
        for env in ("GridWorld", "Basic"):
            demo_mean = load_demonstrations(gconfigs[env][2]).mean_reward
            values = per_seed("gail", env)
            m = statistics.mean(values)
            print(f"| {env} | {m:.3f} | {fmt(values)} | {demo_mean:.3f} | "
                  f"{m / demo_mean:.2f} | >= 0.90 {'met' if m >= 0.9 * demo_mean else 'MISSED'} |")
    if "ball3d" in args.tasks:
        print("\n| Ball3D | steps to mean return 90 (mean) | per seed | minutes/run |")
        print("|---|---|---|---|")
        for label, variant in (("PPO + behavioral_cloning", "bc"), ("PPO", "ppo")):
            values = per_seed("ball3d", variant)
            m = mean_or_none(values)
            print(f"| {label} | {'not reached' if m is None else f'{m:,.0f}'} | {fmt(values)} | "
                  f"{statistics.mean(per_seed('ball3d', variant, 1)):.1f} |")


if __name__ == "__main__":
    main()
