"""What the run's safety checks cost on the CartPole benchmark config, side by side.

    python benchmarks/reliability_cost.py [--reps 3] [--steps 100000]

Three measurements, all in one process:

1. The boundary check alone (``envs.checks.check_steps``, run by each AgentManager once per
   env step): its time on real ``gym:CartPole-v1`` steps of 8 copies (as the config runs
   them), next to the training loop's time per env step.
2. The compiled update of the config with and without the non-finite guard (two trainers,
   calls alternating on the same buffer).
3. The training loop of ``configs/ppo/CartPole.yaml`` with the boundary check and the update
   guard, and with both patched out, alternating A, B, B, A, ... so the VM's drift falls on
   both sides. Only the loop is timed, not the start-up. Runs differ by up to 10% on a
   shared VM: this one needs many runs to see 1%.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "configs", "ppo", "CartPole.yaml")


def check_cost(n_steps: int = 4000, repeats: int = 7) -> float:
    """Microseconds of check_steps per env step on CartPole steps of 8 copies."""
    import numpy as np
    from tftrainers.envs import make
    from tftrainers.envs.checks import check_steps
    env = make("gym:CartPole-v1", seed=0, num_areas=8)
    name = "CartPole-v1"
    spec = env.behavior_specs[name]
    rng = np.random.default_rng(0)
    env.reset()
    steps = []
    for _ in range(n_steps):
        decision, terminal = env.get_steps(name)
        steps.append((decision, terminal))
        env.set_actions(name, spec.action_spec.random_action(len(decision), rng))
        env.step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for decision, terminal in steps:
            check_steps(name, spec, decision, terminal)
        times.append((time.perf_counter() - start) / len(steps))
    return statistics.median(times) * 1e6


class _Timed:
    """Stands in for runner._loop: runs ``self.loop`` and times it."""

    def __init__(self, loop):
        self.loop = loop
        self.seconds = self.env_steps = 0

    def __call__(self, env, managers, trainers, stop, env_id=""):
        count = {"steps": 0}
        step = env.step

        def counted_step():
            count["steps"] += 1
            step()
        env.step = counted_step
        start = time.perf_counter()
        try:
            return self.loop(env, managers, trainers, stop, env_id)
        finally:
            self.seconds = time.perf_counter() - start
            self.env_steps = count["steps"]
            env.step = step


def set_checks(enabled: bool, saved={}):
    """Patches the boundary check and the update guard out (or back in)."""
    import tensorflow as tf
    from tftrainers.acting import agent_manager
    from tftrainers.trainers.finite import FiniteGuard
    if not saved:
        saved.update(check=agent_manager.check_steps, snapshot=FiniteGuard.snapshot,
                     restore=FiniteGuard.restore_unless_finite)
    if enabled:
        agent_manager.check_steps = saved["check"]
        FiniteGuard.snapshot, FiniteGuard.restore_unless_finite = \
            saved["snapshot"], saved["restore"]
    else:
        agent_manager.check_steps = lambda *args: None
        FiniteGuard.snapshot = lambda self: []
        FiniteGuard.restore_unless_finite = lambda self, saved_, tensors: tf.constant(True)


def update_cost(workdir: str, calls: int = 100) -> dict:
    """Milliseconds per compiled update of the CartPole config, guard on and off."""
    import numpy as np
    from tftrainers.envs import make
    from tftrainers.settings import load_run_options
    from tftrainers.trainers.context import TrainerContext
    from tftrainers.trainers.registry import create_trainer
    options = load_run_options(CONFIG)
    name, settings = next(iter(options.behaviors.items()))
    env = make("gym:CartPole-v1", seed=0, num_areas=8)
    trainers = {}
    for enabled in (True, False):
        set_checks(enabled)
        trainers[enabled] = create_trainer(name, env.behavior_specs[name], settings,
                                           TrainerContext(os.path.join(workdir, f"u{enabled}"),
                                                          seed=0))
    set_checks(True)
    captured = {}
    update = trainers[True].optimizer.update

    def capture(buffer, step, rng):
        captured["buffer"] = buffer
        return update(buffer, step, rng)
    trainers[True].optimizer.update = capture
    manager = trainers[True].create_agent_manager(env)
    trainers[True].subscribe(manager)
    env.reset()
    while "buffer" not in captured:
        decision, terminal = env.get_steps(name)
        actions = manager.step(decision, terminal)
        if len(decision):
            env.set_actions(name, actions)
        env.step()
        trainers[True].advance()
    trainers[True].optimizer.update = update
    times = {True: [], False: []}
    for i in range(2 * calls):
        enabled = i % 4 in (0, 3)
        optimizer = trainers[enabled].optimizer
        start = time.perf_counter()
        optimizer.update(captured["buffer"], 0, np.random.default_rng(i))
        times[enabled].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def loop_cost(reps: int, steps: int, workdir: str):
    from tftrainers import runner
    from tftrainers.settings import load_run_options
    loop = runner._loop
    timed = _Timed(loop)
    runner._loop = timed
    results = {True: [], False: []}
    order = [True, False, False, True] * ((reps + 1) // 2)
    for i, enabled in enumerate(order[:2 * reps]):
        set_checks(enabled)
        options = load_run_options(CONFIG, {"run_id": f"r{i}", "results_dir": workdir,
                                            "seed": i // 2})
        for settings in options.behaviors.values():
            settings.max_steps = steps
        runner.run_training(options, log=lambda *a: None)
        per_step = timed.seconds / timed.env_steps * 1e6
        results[enabled].append(per_step)
        print(f"  run {i}: {'checked  ' if enabled else 'unchecked'} {per_step:7.1f} us per env step "
              f"({timed.env_steps} env steps, {timed.seconds:.1f} s)", flush=True)
    set_checks(True)
    runner._loop = loop
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="runs per variant")
    parser.add_argument("--steps", type=int, default=100_000, help="agent steps per run")
    args = parser.parse_args()
    from tftrainers.console import quiet_tensorflow
    quiet_tensorflow()  # TensorFlow's start-up lines would bury the figures
    micro = check_cost()
    print(f"check_steps on CartPole (8 copies): {micro:.2f} us per env step", flush=True)
    with tempfile.TemporaryDirectory() as workdir:
        update = update_cost(workdir)
        print(f"update (256 steps, 20 epochs), median: guard on {update[True]:.2f} ms, off "
              f"{update[False]:.2f} ms", flush=True)
        results = loop_cost(args.reps, args.steps, workdir)
    on, off = statistics.mean(results[True]), statistics.mean(results[False])
    print(f"\nloop per env step, mean of {args.reps} runs each: checked {on:.1f} us, "
          f"unchecked {off:.1f} us: {100 * (on / off - 1):+.1f}%")
    print(f"check_steps alone: {micro:.2f} us = {100 * micro / off:.2f}% of the loop's env step")
    # One update per buffer_size / 8 agents = 32 env steps on this config.
    guard = (update[True] - update[False]) * 1e3 / 32
    print(f"update guard: {guard:.2f} us per env step = {100 * guard / off:.2f}%")


if __name__ == "__main__":
    sys.exit(main())
