"""ML-Agents 1.1's own MA-POCA on our two-agent group task, to compare with ours seed by seed.

    $MLA_VENV/bin/python benchmarks/mlagents_group_task.py --seeds 0 1 2 [--way unity|builtin]
                                                           [--max-steps 3000] [--jobs 2]

Runs in the ML-Agents peer's venv (../shared/mlagents_peer/README.md; never tftrainers'),
from the project root; from another checkout, MLA_PEER=/path/to/mlagents_peer. The env is the test fixture ``tests/regression/simple_envs.py``
``GroupLineEnv`` (ML-Agents' MultiAgentEnvironment: two agents, one discrete branch, the goal
sign as the observation), seen through the peer's ``TFTrainersEnv`` wrapper, so both
trainers see the same steps. The trainer settings are those of ML-Agents'
``test_simple_poca``: its ``poca_dummy_config`` built in Python (learning rate 5e-3 with a
constant schedule, beta and epsilon with their linear default, batch 16, buffer 64, 1 x 32
units, max_steps 3000). Training is ML-Agents' own (TrainerFactory, TrainerController,
SimpleEnvManager), as its ``check_environment_trains``.

Prints one JSON line per seed (ML-Agents' criterion, the mean of the last five final
rewards; wrong-end finishes among the last 50 and 100; the range of the critic's value
estimates, all and from step 1,500 on, and of the lambda returns; the last policy entropy;
the mean V that the last 200 members finishing before their group bootstrapped from),
then a table. Each seed runs in its own process.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
#: the peer's folder (its wrapper and torch shim): $MLA_PEER, else ../shared/mlagents_peer
PEER = os.environ.get("MLA_PEER") or os.path.normpath(
    os.path.join(ROOT, "..", "shared", "mlagents_peer"))
LATE = 1500


def child(seed: int, way: str, max_steps: int) -> None:
    import tempfile

    import numpy as np
    sys.path[:0] = [PEER, ROOT, os.path.join(ROOT, "tests")]
    import mla_compat  # noqa: F401  (the peer's torch.onnx shim)
    from run_mlagents_on import TFTrainersEnv
    from regression.simple_envs import GroupLineEnv
    from mlagents.plugins.trainer_type import register_trainer_plugins
    from mlagents.trainers.environment_parameter_manager import EnvironmentParameterManager
    from mlagents.trainers.poca import optimizer_torch, trainer as poca_trainer
    from mlagents.trainers.settings import NetworkSettings, ScheduleType, TrainerSettings
    from mlagents.trainers.simple_env_manager import SimpleEnvManager
    from mlagents.trainers.stats import StatsReporter, StatsWriter
    from mlagents.trainers.trainer import TrainerFactory
    from mlagents.trainers.trainer_controller import TrainerController
    from mlagents_envs.side_channel.environment_parameters_channel import (
        EnvironmentParametersChannel)

    register_trainer_plugins()
    values, returns, entropy, leavers = [], [], [], []
    leaving = [False]  # whether the trajectory being processed is a member's that left early
    process = poca_trainer.POCATrainer._process_trajectory

    def recording_process(self, trajectory):
        leaving[0] = trajectory.done_reached and not trajectory.all_group_dones_reached
        try:
            return process(self, trajectory)
        finally:
            leaving[0] = False
    poca_trainer.POCATrainer._process_trajectory = recording_process
    # Record the critic's estimates and the lambda returns as ML-Agents' POCA trainer
    # computes them (wrapping its functions; training is unchanged).
    estimate = optimizer_torch.TorchPOCAOptimizer.get_trajectory_and_baseline_value_estimates

    def recording_estimate(self, *args, **kwargs):
        out = estimate(self, *args, **kwargs)
        v = out[0]["extrinsic"]
        values.append((self.policy.get_current_step(), float(v.min()), float(v.max())))
        if leaving[0]:  # the V it bootstraps from (its value_next)
            leavers.append(float(np.asarray(out[2]["extrinsic"]).ravel()[-1]))
        return out
    optimizer_torch.TorchPOCAOptimizer.get_trajectory_and_baseline_value_estimates = \
        recording_estimate
    lambda_return = poca_trainer.lambda_return

    def recording_lambda_return(*args, **kwargs):
        out = lambda_return(*args, **kwargs)
        returns.append((float(out.min()), float(out.max())))
        return out
    poca_trainer.lambda_return = recording_lambda_return

    class Entropy(StatsWriter):
        def write_stats(self, category, stats, step):
            if "Policy/Entropy" in stats and stats["Policy/Entropy"].num:
                entropy.append(float(stats["Policy/Entropy"].mean))

    config = TrainerSettings(
        trainer_type="poca",
        hyperparameters=optimizer_torch.POCASettings(
            learning_rate=5.0e-3, learning_rate_schedule=ScheduleType.CONSTANT,
            batch_size=16, buffer_size=64),
        network_settings=NetworkSettings(num_layers=1, hidden_units=32),
        summary_freq=500, max_steps=max_steps, threaded=False)
    env = GroupLineEnv(action_sizes=(0, 1), unity_steps=way == "unity", seed=seed, name="1D")
    StatsReporter.writers.clear()
    StatsReporter.add_writer(Entropy())
    with tempfile.TemporaryDirectory() as out:
        params = EnvironmentParameterManager()
        factory = TrainerFactory(trainer_config={"1D": config}, output_path=out,
                                 train_model=True, load_model=False, seed=seed,
                                 param_manager=params, multi_gpu=False)
        controller = TrainerController(trainer_factory=factory, output_path=out, run_id="id",
                                       param_manager=params, train=True, training_seed=seed)
        controller.start_learning(SimpleEnvManager(TFTrainersEnv(env),
                                                   EnvironmentParametersChannel()))
    final = np.asarray(env.final_rewards)
    late = [v for v in values if v[0] >= LATE]
    print(json.dumps({
        "seed": seed, "way": way, "score": float(final[-5:].mean()),
        "passed": bool(final[-5:].mean() > 0.9), "finishes": len(final),
        "wrong_in_last50": int((final[-50:] < 0).sum()),
        "wrong_in_last100": int((final[-100:] < 0).sum()),
        "values": [min(v[1] for v in values), max(v[2] for v in values)],
        "late_values": [min(v[1] for v in late), max(v[2] for v in late)] if late else None,
        "returns": [min(r[0] for r in returns), max(r[1] for r in returns)],
        "entropy": entropy[-1] if entropy else None,
        "leaver_bootstrap": float(np.mean(leavers[-200:])) if leavers else None}))


def run_one(seed: int, way: str, max_steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(seed), "--way", way,
                          "--max-steps", str(max_steps)], capture_output=True, text=True,
                         cwd=ROOT)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode or not lines:
        return {"seed": seed, "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=list(range(10)))
    parser.add_argument("--way", choices=("unity", "builtin"), default="unity",
                        help="how the env reports steps (GroupLineEnv's unity_steps)")
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.way, args.max_steps)
        return 0

    def report(seed):
        result = run_one(seed, args.way, args.max_steps)
        print(json.dumps(result), flush=True)
        return result
    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        results = list(pool.map(report, args.seeds))
    ok = [r for r in results if "error" not in r]
    print("\nseed   " + " ".join(f"{r['seed']:>7d}" for r in ok))
    print("score  " + " ".join(f"{r['score']:7.3f}" + ("" if r["passed"] else "*") for r in ok))
    print(f"ML-Agents POCA, reported the {args.way} way: {sum(r['passed'] for r in ok)} of "
          f"{len(results)} seeds pass (* = the last five average 0.9 or less)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
