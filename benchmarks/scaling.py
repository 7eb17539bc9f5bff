"""Env workers scale with the instances of a slow env: Ball3D at 5 ms a step, 1 to 8 workers.

    python benchmarks/scaling.py [--parts throughput layout learning] [--rounds 1]
                                 [--steps-per-worker 24000] [--seeds 0 1 2]
                                 [--learn-steps 240000] [--layout-seconds 20]

Three parts, each printed as a table with every run:

- ``throughput``: ``tftrainers-learn configs/ppo/Ball3D.yaml --env-args step_latency_ms=5``
  (each step of an instance takes 5 ms, as a game engine's frame; 12 agents an instance)
  with 1, 2, 4 and 8 worker processes, 4 Ray actors on a local Ray, and one instance
  stepped in the learner's process. Steps per second of training (updates included): the
  trainer's steps from its first summary to its last over the ``Time Elapsed`` between them
  (so starting the workers or a Ray cluster is left out; 6 summaries a run). Each run takes
  ``steps-per-worker x workers`` steps, so every run holds several PPO updates.
  Targets (issue 16): 8 workers >= 6x one worker; Ray at 4 workers >= 80% of 4 processes.
- ``layout``: where acting happens, without learning. Our workers (acting inside each
  worker with the ONNX act call, trajectories sent to the learner) against ML-Agents'
  layout rebuilt from our parts (workers only step their env; the main process receives
  each worker's steps and calls the policy for that worker, one worker after another, as
  ML-Agents' ``SubprocessEnvManager`` does), on Ball3D at 5 ms and on CartPole (cheap,
  8 copies a worker), 4 workers each. Agent steps per second and the main process's CPU
  use over ``layout-seconds`` s of wall time.
- ``learning``: the return a fixed step budget reaches (``tftrainers-evaluate``, 24
  episodes, actions sampled as in training) in the learner's process (no latency), with 8
  worker processes and with 4 Ray actors (5 ms), on each seed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from workers import config_file, run

BIN = os.path.dirname(sys.executable)
LATENCY = ["step_latency_ms=5"]


# --- throughput ---------------------------------------------------------------------------
def throughput(args, folder: str) -> None:
    variants = [("1 instance in the learner's process", 1, "inline", False)]
    variants += [(f"{n} worker process{'es' if n > 1 else ''}", n, "process", False)
                 for n in (1, 2, 4, 8)]
    variants += [("4 Ray actors (local Ray)", 4, "process", True)]
    rates = {label: [] for label, *_ in variants}
    for round_ in range(args.rounds):
        for label, n, workers, ray in variants:
            steps = args.steps_per_worker * n
            config = config_file(folder, "Ball3D.yaml", steps, summaries=6)
            rate = run(config, os.path.join(folder, "r"), LATENCY, n, workers, ray=ray,
                       steady=True)
            rates[label].append(rate)
            print(f"throughput round {round_}: {label}: {rate:.0f} steps/s", flush=True)
    mean = {label: statistics.mean(r) for label, r in rates.items()}
    one = mean["1 worker process"]
    print(f"\nBall3D, step_latency_ms=5 (12 agents an instance), updates included; "
          f"{args.rounds} round(s), every run listed; speed-up over 1 worker process.")
    print("| variant | steps/s (each run) | speed-up |")
    print("|---|---|---|")
    for label, r in rates.items():
        print(f"| {label} | {', '.join(f'{x:.0f}' for x in r)} | {mean[label] / one:.2f}x |")
    print(f"8 workers / 1 worker: {mean['8 worker processes'] / one:.2f}x (target >= 6x); "
          f"Ray / processes at 4: "
          f"{mean['4 Ray actors (local Ray)'] / mean['4 worker processes']:.0%} "
          f"(target >= 80%)\n", flush=True)


# --- layout -------------------------------------------------------------------------------
def _stepping_worker(conn, env_id: str, env_args: dict, num_areas, seed: int) -> None:
    """ML-Agents' env worker: steps its env, sends every behavior's steps, waits for the
    actions the main process chose."""
    from tftrainers.envs import make
    env = make(env_id, seed=seed, num_areas=num_areas, **env_args)
    env.reset()
    names = list(env.behavior_specs)
    try:
        while True:
            conn.send([env.get_steps(name) for name in names])
            actions = conn.recv()
            if actions is None:
                return
            for name, action in zip(names, actions):
                if action is not None:
                    env.set_actions(name, action)
            env.step()
    except (EOFError, OSError, KeyboardInterrupt):
        pass
    finally:
        env.close()


def _acting_parts(env_id: str, env_args: dict, num_areas):
    """Per behavior: (spec, OnnxProgram, flat weights) of a fresh PPO policy."""
    from tftrainers.console import quiet_tensorflow
    from tftrainers.envs import make
    from tftrainers.settings import NetworkSettings
    env = make(env_id, seed=0, num_areas=num_areas, **env_args)
    specs = dict(env.behavior_specs)
    env.close()
    quiet_tensorflow()
    from tftrainers.trainers.policy import Policy
    parts = {}
    for name, spec in specs.items():
        policy = Policy(spec, NetworkSettings(normalize=True, hidden_units=128, num_layers=2))
        parts[name] = (spec, policy.onnx_program(), policy.flat_weights())
    return parts


def timed(step, seconds: float, warmup: float = 3.0) -> tuple:
    """Calls ``step()`` (it returns the agent steps it saw) for ``warmup`` s, then for
    ``seconds`` s; returns (agent steps per second, the main process's CPU share) over the
    second part."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup:
        step()
    steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        steps += step()
    elapsed = time.perf_counter() - start
    return steps / elapsed, (time.process_time() - cpu) / elapsed


def mlagents_layout(env_id: str, env_args: dict, num_areas, num_envs: int, seconds: float,
                    parts) -> tuple:
    """(agent steps/s, main process CPU share) of ML-Agents' layout."""
    from multiprocessing.connection import wait
    from tftrainers.acting.actor import Actor
    from tftrainers.acting.agent_manager import AgentManager
    from tftrainers.acting.onnx_program import OnnxRunner
    context = multiprocessing.get_context("spawn")
    pipes, processes, managers = [], [], []
    for k in range(num_envs):
        mine, theirs = context.Pipe()
        process = context.Process(target=_stepping_worker, daemon=True,
                                  args=(theirs, env_id, env_args, num_areas, 100 + k))
        process.start()
        pipes.append(mine)
        processes.append(process)
        managers.append({name: AgentManager(name, spec, Actor(spec, 0, OnnxRunner(
            program, flat), seed=k), time_horizon=1000) for name, (spec, program, flat)
            in parts.items()})
    def serve_ready_workers() -> int:
        steps = 0
        for conn in wait(pipes):  # the workers that are ready, one after another
            k = pipes.index(conn)
            actions = []
            for manager, (decision, terminal) in zip(managers[k].values(), conn.recv()):
                action = manager.step(decision, terminal)
                actions.append(action if len(decision) else None)
                steps += len(decision)
                manager.queue.drain()  # the trainer's side: nothing to learn here
            conn.send(actions)
        return steps
    try:
        return timed(serve_ready_workers, seconds)
    finally:
        for conn in pipes:
            try:
                conn.send(None)
            except OSError:
                pass
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()


def our_layout(env_id: str, env_args: dict, num_areas, num_envs: int, seconds: float,
               parts) -> tuple:
    """(agent steps/s, main process CPU share) of our workers, acting inside."""
    from tftrainers.acting.actor import WeightUpdate
    from tftrainers.acting.worker_pool import ProcessLauncher, WorkerPool
    from tftrainers.acting.workers import BehaviorSetup
    from tftrainers.processing import Trajectory
    behaviors = {name: BehaviorSetup(spec, 0, program, 1000, 0, WeightUpdate(0, flat))
                 for name, (spec, program, flat) in parts.items()}
    pool = WorkerPool(ProcessLauncher(), env_id, env_args, num_areas, num_envs, seed=0,
                      behaviors=behaviors, log=lambda line: None)
    def drain_what_arrived() -> int:
        pool.check()
        steps = sum(len(item) for managers in pool.managers.values() for manager in managers
                    for item in manager.queue.drain() if type(item) is Trajectory)
        pool.wait(0.05)
        return steps
    pool.start()
    try:
        return timed(drain_what_arrived, seconds)
    finally:
        pool.close()


def layout(args, folder: str) -> None:
    cases = [("Ball3D 5 ms", "builtin:Ball3D", {"step_latency_ms": 5}, None),
             ("CartPole", "gym:CartPole-v1", {}, 8)]
    rows = []
    for label, env_id, env_args, areas in cases:
        parts = _acting_parts(env_id, env_args, areas)
        for round_ in range(args.rounds):
            for name, fn in (("ML-Agents' layout: acting in the main process, per worker",
                              mlagents_layout),
                             ("ours: acting inside each worker", our_layout)):
                rate, cpu = fn(env_id, env_args, areas, 4, args.layout_seconds, parts)
                rows.append((label, name, rate, cpu))
                print(f"layout round {round_}: {label}, {name}: {rate:.0f} agent steps/s, "
                      f"main process {cpu:.0%} of a core", flush=True)
    print(f"\nWhere acting happens, 4 workers, no learning ({args.layout_seconds:g} s each, "
          f"after 3 s of warm-up); trajectory steps for ours (they end every time_horizon "
          f"or episode, so a few are still in flight at the end).")
    print("| env | layout | agent steps/s | main process CPU |")
    print("|---|---|---|---|")
    for label, name, rate, cpu in rows:
        print(f"| {label} | {name} | {rate:.0f} | {cpu:.0%} of a core |")
    print(flush=True)


# --- learning -----------------------------------------------------------------------------
def learning(args, folder: str) -> None:
    config = config_file(folder, "Ball3D.yaml", args.learn_steps)
    variants = [("in process, no latency", 1, "inline", (), False),
                ("8 worker processes, 5 ms", 8, "process", LATENCY, False),
                ("4 Ray actors, 5 ms", 4, "process", LATENCY, True)]
    scores = {label: [] for label, *_ in variants}
    results = os.path.join(folder, "learn")
    for seed in args.seeds:
        for label, n, workers, env_args, ray in variants:
            run_id = f"s{seed}-{n}-{workers}-{ray}"
            rate = run(config, results, env_args, n, workers, run_id=run_id, seed=seed,
                       ray=ray, steady=True)
            out = subprocess.run(
                [os.path.join(BIN, "tftrainers-evaluate"), "builtin:Ball3D", "--policy",
                 os.path.join(results, run_id), "--episodes", "24", "--seed",
                 str(1000 + seed)], capture_output=True, text=True, check=True)
            score = json.loads(out.stdout.strip().splitlines()[-1])["mean_reward"]
            scores[label].append(score)
            print(f"learning seed {seed}: {label}: return {score:.1f} ({rate:.0f} steps/s)",
                  flush=True)
    print(f"\nBall3D return after {args.learn_steps} steps (tftrainers-evaluate, 24 episodes, "
          f"env seeds 1000+seed), every seed listed.")
    print("| variant | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean |")
    print("|---|" + "---|" * (len(args.seeds) + 1))
    for label, values in scores.items():
        print(f"| {label} | " + " | ".join(f"{v:.1f}" for v in values)
              + f" | {np.mean(values):.1f} |")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["throughput", "layout", "learning"],
                        choices=["throughput", "layout", "learning"])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps-per-worker", type=int, default=24000)
    parser.add_argument("--layout-seconds", type=float, default=20.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--learn-steps", type=int, default=240000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for part in args.parts:
            globals()[part](args, folder)


if __name__ == "__main__":
    main()
