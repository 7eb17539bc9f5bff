"""SAC side by side in one run: ours against ML-Agents 1.1's SAC and our PPO on Ball3D, and
against Stable-Baselines3's SAC on gym Pendulum-v1.

    python benchmarks/sac.py [--parts mla sb3 ppo] [--seeds 0 1 2 3 4] [--out DIR]
        [--mla-python /tmp/mla-venv/bin/python] [--mla-peer ../shared/mlagents_peer]

Parts (each seed runs its sides one after the other, never at once; the side that goes first
alternates with the seed, to spread the machine's drift over both):

- ``mla``: ``configs/sac/Ball3D.yaml`` (ML-Agents' own 3DBall SAC config) trained by
  ``tftrainers-learn`` and by ML-Agents 1.1 (``run_mlagents_on.py`` of the ML-Agents peer, in
  its own venv) on the built-in Ball3D: agent steps, wall seconds and CPU seconds (the
  training process's user + system, its threads included) to the first summary with a mean
  return >= ``--target`` (90); the process is stopped there. ``--summary-freq`` (4000) and
  ``--cap`` (the most steps tried) are written into a copy of the config for both sides.
- ``ppo``: the same measure for our PPO with ``configs/ppo/Ball3D.yaml`` beside our SAC (our
  SAC's runs of ``mla`` are reused when both parts run).
- ``sb3``: ``configs/sac/Pendulum.yaml`` (rl-zoo's SAC hyperparameters for Pendulum-v1: 20k
  steps, lr 1e-3, the rest SB3's defaults) trained by ``tftrainers-learn`` and by SB3's SAC
  with the same hyperparameters; each trained policy is then evaluated deterministically on
  ``--episodes`` (10) episodes (ours: ``tftrainers-evaluate --deterministic``; SB3:
  ``evaluate_policy``), seed 1000 + S, not timed. Steps/s is the whole training process's
  (imports included): steps / wall seconds.

Writes OUT/results.json (every run, with its command) and OUT/table.md; prints one line per
run. CPU seconds are given beside wall time because the machine is shared.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAC_BALL3D = os.path.join(ROOT, "configs", "sac", "Ball3D.yaml")
PPO_BALL3D = os.path.join(ROOT, "configs", "ppo", "Ball3D.yaml")
SAC_PENDULUM = os.path.join(ROOT, "configs", "sac", "Pendulum.yaml")
SUMMARY = re.compile(r"\[INFO\] (\S+)\. Step: (\d+)\. Time Elapsed: ([\d.]+) s\. "
                     r"Mean Reward: ([-\d.e+naif]+)\.")

# SB3 imports torch.utils.tensorboard, which imports TensorFlow when it is installed (it is
# here: tftrainers needs it), a cost SB3 would not pay in its own environment.
NO_TENSORFLOW = "import sys; sys.modules['tensorflow'] = None\n"

SB3_TRAIN = NO_TENSORFLOW + """
import sys
from stable_baselines3 import SAC
steps, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# rl-zoo hyperparams/sac.yml, Pendulum-v1: n_timesteps 20000, MlpPolicy, learning_rate 1e-3.
model = SAC("MlpPolicy", "Pendulum-v1", learning_rate=1e-3, seed=seed, device="cpu", verbose=0)
model.learn(total_timesteps=steps)
model.save(path)
"""

SB3_EVALUATE = NO_TENSORFLOW + """
import json, sys
import gymnasium
from stable_baselines3 import SAC
from stable_baselines3.common.evaluation import evaluate_policy
model = SAC.load(sys.argv[1], device="cpu")
env = gymnasium.make("Pendulum-v1")
env.reset(seed=int(sys.argv[3]))
mean, std = evaluate_policy(model, env, n_eval_episodes=int(sys.argv[2]), deterministic=True)
print(json.dumps({"mean_reward": float(mean), "std_reward": float(std)}))
"""


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def run(command, log_path, target=None):
    """Runs ``command`` from the project root, its output to ``log_path``; with ``target``,
    stops it at the first summary line whose mean return is >= target. Returns wall s, the
    process's CPU s (user + system), the CPU s other processes used meanwhile, the exit code,
    the summaries seen [(step, mean)] and the step the target was reached at (or None)."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    busy, start = busy_seconds(), time.perf_counter()
    reached, summaries = None, []
    with open(log_path, "w") as log:
        p = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        for line in p.stdout:
            log.write(line)
            log.flush()
            m = SUMMARY.search(line)
            if m:
                summaries.append((int(m.group(2)), float(m.group(4))))
                if target is not None and summaries[-1][1] >= target:
                    reached = summaries[-1][0]
                    break
        wall = time.perf_counter() - start
        if reached is not None:
            # CPU to the target, then SIGINT: tftrainers saves and writes its timers.json
            # (where the time went); anything still running a minute later is killed.
            cpu, others = process_cpu(p.pid), busy_seconds() - busy
            os.killpg(p.pid, signal.SIGINT)
            rest = threading.Thread(target=lambda: log.writelines(p.stdout), daemon=True)
            rest.start()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:  # ML-Agents' run goes on after a SIGINT
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            rest.join()
            code = 0
        else:
            _, status, usage = os.wait4(p.pid, 0)
            cpu, others = usage.ru_utime + usage.ru_stime, busy_seconds() - busy
            code = os.waitstatus_to_exitcode(status)
        p.stdout.close()
    return dict(cmd=" ".join(command), log=log_path, wall_s=round(wall, 1), cpu_s=round(cpu, 1),
                others_cpu_s=round(max(others - cpu, 0.0), 1), rc=code,
                summaries=summaries, reached=reached)


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (all its threads, and its children
    that ended), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def last_json(path):
    for line in reversed(open(path).read().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"no result line in {path}")


def variant(config, out, name, **trainer_keys):
    """A copy of ``config`` with ``trainer_keys`` set in every behavior."""
    with open(config) as f:
        data = yaml.safe_load(f)
    for behavior in data["behaviors"].values():
        behavior.update(trainer_keys)
    path = os.path.join(out, name)
    with open(path, "w") as f:
        yaml.safe_dump(data, f, sort_keys=False)
    return path


def tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def to_target(side, config, seed, args):
    """One training of ``side`` (ours / mlagents) to the target; its result row."""
    run_id = f"{side}_{os.path.basename(config).split('.')[0]}_{seed}"
    runs = os.path.join(args.out, "runs")
    if side == "mlagents":
        command = [args.mla_python, os.path.join(args.mla_peer, "run_mlagents_on.py"), config,
                   "--run-id", run_id, "--results-dir", runs, "--seed", str(seed), "--force"]
    else:
        command = [tool("tftrainers-learn"), config, "--run-id", run_id, "--results-dir", runs,
                   "--seed", str(seed), "--force"]
    row = run(command, os.path.join(args.out, run_id + ".log"), target=args.target)
    row.update(side=side, seed=seed, config=config)
    print(f"  {run_id}: {args.target} reached at step {row['reached']} | wall "
          f"{row['wall_s']} s cpu {row['cpu_s']} s (others' cpu {row['others_cpu_s']} s)",
          flush=True)
    return row


def ball3d(args, sides, rows):
    """Ball3D to the target for each side in ``sides``: [(label, config, side)]."""
    for i, seed in enumerate(args.seeds):
        order = sides if i % 2 == 0 else sides[::-1]
        for label, config, side in order:
            row = to_target(side, config, seed, args)
            row["label"] = label
            rows.append(row)
            save(rows, args)


def pendulum(args, rows):
    config = variant(SAC_PENDULUM, args.out, "Pendulum.yaml", max_steps=args.pendulum_steps,
                     summary_freq=2000, checkpoint_interval=args.pendulum_steps)
    runs = os.path.join(args.out, "runs")
    for i, seed in enumerate(args.seeds):
        for side in (("ours", "sb3") if i % 2 == 0 else ("sb3", "ours")):
            run_id = f"{side}_pendulum_{seed}"
            log = os.path.join(args.out, run_id + ".log")
            if side == "sb3":
                path = os.path.join(runs, run_id)
                row = run([sys.executable, "-c", SB3_TRAIN, str(args.pendulum_steps), str(seed),
                           path], log)
                evaluate = [sys.executable, "-c", SB3_EVALUATE, path + ".zip",
                            str(args.episodes), str(1000 + seed)]
                row["cmd"] = (f"SB3 SAC('MlpPolicy', 'Pendulum-v1', learning_rate=1e-3, "
                              f"seed={seed}).learn({args.pendulum_steps})")
            else:
                row = run([tool("tftrainers-learn"), config, "--run-id", run_id, "--results-dir",
                           runs, "--seed", str(seed), "--force"], log)
                evaluate = [tool("tftrainers-evaluate"), "gym:Pendulum-v1", "--policy",
                            os.path.join(runs, run_id), "--episodes", str(args.episodes),
                            "--deterministic", "--seed", str(1000 + seed)]
            if row["rc"] != 0:
                raise SystemExit(f"failed: {row['cmd']} (see {log})")
            eval_log = os.path.join(args.out, run_id + ".eval.log")
            run(evaluate, eval_log)
            row.update(side=side, seed=seed, steps=args.pendulum_steps,
                       steps_per_s=round(args.pendulum_steps / row["wall_s"], 1),
                       eval_return=round(last_json(eval_log)["mean_reward"], 1),
                       eval_cmd=" ".join(evaluate))
            print(f"  {run_id}: return {row['eval_return']} ({args.episodes} episodes, "
                  f"deterministic) | {row['steps_per_s']} steps/s | wall {row['wall_s']} s cpu "
                  f"{row['cpu_s']} s (others' cpu {row['others_cpu_s']} s)", flush=True)
            rows.append(row)
            save(rows, args)


def save(rows, args):
    """OUT/results.json and OUT/table.md, rewritten after every run."""
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table(rows, args))


def table(results, args):
    lines = []
    ball = [r for r in results if r.get("label")]
    if ball:
        lines += [f"Ball3D: agent steps, wall s and CPU s to the first summary with a mean "
                  f"return >= {args.target} (summary every {args.summary_freq} steps)", "",
                  "| side | seed | steps to target | wall s | CPU s | others' CPU s |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {r['label']} | {r['seed']} | {r['reached'] or 'not by ' + str(args.cap)} | "
                  f"{r['wall_s']} | {r['cpu_s']} | {r['others_cpu_s']} |" for r in ball]
        lines.append("")
    pend = [r for r in results if "eval_return" in r]
    if pend:
        lines += [f"Pendulum-v1: {args.pendulum_steps} steps, deterministic return on "
                  f"{args.episodes} episodes, whole-process steps/s", "",
                  "| side | seed | return | steps/s | wall s | CPU s | others' CPU s |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['side']} | {r['seed']} | {r['eval_return']} | {r['steps_per_s']} | "
                  f"{r['wall_s']} | {r['cpu_s']} | {r['others_cpu_s']} |" for r in pend]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=("mla", "ppo", "sb3"),
                        default=["mla", "ppo", "sb3"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--target", type=float, default=90.0,
                        help="Ball3D: the mean return to reach (default 90)")
    parser.add_argument("--summary-freq", type=int, default=4000,
                        help="Ball3D: steps between summaries, both sides (default 4000)")
    parser.add_argument("--cap", type=int, default=200_000,
                        help="Ball3D SAC: most agent steps tried (default 200000, the config's)")
    parser.add_argument("--ppo-cap", type=int, default=500_000,
                        help="Ball3D PPO: most agent steps tried (default 500000, the config's)")
    parser.add_argument("--pendulum-steps", type=int, default=20_000)
    parser.add_argument("--episodes", type=int, default=10,
                        help="Pendulum: evaluation episodes (default 10)")
    parser.add_argument("--mla-python", default=os.path.join(
        os.environ.get("MLA_VENV", "/tmp/mla-venv"), "bin", "python"),
        help="the ML-Agents venv's python (default $MLA_VENV/bin/python, /tmp/mla-venv)")
    parser.add_argument("--mla-peer", default=os.environ.get(
        "MLA_PEER", os.path.join(ROOT, "..", "shared", "mlagents_peer")),
        help="the folder of run_mlagents_on.py (default $MLA_PEER, ../shared/mlagents_peer)")
    parser.add_argument("--out", default=None, help="results folder (default: a temporary one)")
    args = parser.parse_args()
    args.out = os.path.abspath(args.out or tempfile.mkdtemp(prefix="sac_bench_"))
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    if "mla" in args.parts and not os.path.exists(args.mla_python):
        parser.exit(2, f"--mla-python: {args.mla_python} does not exist; build the ML-Agents "
                       f"venv first (mlagents_peer/setup.sh) or leave out --parts mla\n")
    sac = variant(SAC_BALL3D, args.out, "Ball3D_sac.yaml", max_steps=args.cap,
                  summary_freq=args.summary_freq)
    ppo = variant(PPO_BALL3D, args.out, "Ball3D_ppo.yaml", max_steps=args.ppo_cap,
                  summary_freq=args.summary_freq)
    sides = []
    if "mla" in args.parts or "ppo" in args.parts:
        sides.append(("tftrainers SAC", sac, "ours"))
    if "mla" in args.parts:
        sides.append(("ML-Agents SAC", sac, "mlagents"))
    if "ppo" in args.parts:
        sides.append(("tftrainers PPO", ppo, "ours"))
    results = []
    print(f"results in {args.out}", flush=True)
    if sides:
        ball3d(args, sides, results)
    if "sb3" in args.parts:
        pendulum(args, results)
    print("\n" + table(results, args))


if __name__ == "__main__":
    main()
