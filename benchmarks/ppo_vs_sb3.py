"""tftrainers PPO vs Stable-Baselines3 PPO on gym:CartPole-v1, side by side in one run.

    pip install -e ".[bench]"      # the peer: stable-baselines3 and torch, benchmark only
    python benchmarks/ppo_vs_sb3.py [--steps 100000] [--seeds 0 1 2]

Both sides use rl-zoo's CartPole hyperparameters: 8 envs x 32 steps, batch 256, lambda 0.8,
gamma 0.98, 20 epochs, lr 1e-3 linear, clip 0.2 linear, no entropy bonus, 64x64 networks
(ours: configs/ppo/CartPole.yaml). Each training runs in its own process; steps/s is the
whole process (imports included): steps / wall seconds. Each trained policy is then
evaluated deterministically for 20 episodes (not timed).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "configs", "ppo", "CartPole.yaml")

# SB3 imports torch.utils.tensorboard, which imports TensorFlow whenever it is installed (it
# is here: tftrainers needs it). That costs SB3 ~2.7 s per process that it would not pay
# in its own environment, so its processes run with TensorFlow blocked.
NO_TENSORFLOW = "import sys; sys.modules['tensorflow'] = None\n"

SB3_TRAIN = NO_TENSORFLOW + """
import sys
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
steps, seed, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
linear = lambda start: (lambda progress: progress * start)
env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
            n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2),
            policy_kwargs=dict(net_arch=[64, 64]), seed=seed, device="cpu", verbose=0)
model.learn(total_timesteps=steps)
model.save(path)
"""

SB3_EVALUATE = NO_TENSORFLOW + """
import json, sys
import gymnasium
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
model = PPO.load(sys.argv[1], device="cpu")
env = gymnasium.make("CartPole-v1")
env.reset(seed=12345)
mean, std = evaluate_policy(model, env, n_eval_episodes=20, deterministic=True)
print(json.dumps({"mean_reward": float(mean), "std_reward": float(std)}))
"""


def timed(command):
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def run_sb3(steps, seed, workdir):
    path = os.path.join(workdir, f"sb3_{seed}")
    seconds, _ = timed([sys.executable, "-c", SB3_TRAIN, str(steps), str(seed), path])
    _, out = timed([sys.executable, "-c", SB3_EVALUATE, path + ".zip"])
    return steps / seconds, last_json(out)["mean_reward"]


def compile_bytecode():
    """Starts our side from compiled bytecode, as SB3's already is: pip compiles the .py files
    of an installed package, but an editable install is compiled on import, which this VM
    (PYTHONDONTWRITEBYTECODE=1) redoes in every process (~0.1 s of each run)."""
    import compileall
    import importlib.util
    for folder in importlib.util.find_spec("tftrainers").submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


def run_ours(steps, seed, workdir, config):
    bin_dir = os.path.dirname(sys.executable)
    learn = os.path.join(bin_dir, "tftrainers-learn")
    evaluate = os.path.join(bin_dir, "tftrainers-evaluate")
    run_id = f"ours_{seed}"
    seconds, out = timed([learn, config, "--run-id", run_id, "--results-dir", workdir,
                          "--seed", str(seed), "--force"])
    trained = int(out.strip().split("Step: ")[-1].split(".")[0]) if "Step: " in out else steps
    _, out = timed([evaluate, "gym:CartPole-v1", "--policy", os.path.join(workdir, run_id),
                    "--episodes", "20", "--deterministic", "--seed", "12345"])
    return trained / seconds, last_json(out)["mean_reward"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="one training per side per seed; the VM's speed drifts between "
                             "runs, so the ratio is of mean steps/s over all seeds")
    parser.add_argument("--config", default=CONFIG, help="our side's config (CartPole.yaml)")
    parser.add_argument("--steps", type=int, default=100_000,
                        help="training steps (ours: max_steps of the config)")
    args = parser.parse_args()
    if args.steps != 100_000:
        sys.exit("--steps other than 100000 needs a config with that max_steps")
    compile_bytecode()
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for i, seed in enumerate(args.seeds):
            # Alternating which side goes first spreads the VM's drift over both sides.
            if i % 2 == 0:
                sb3_rate, sb3_return = run_sb3(args.steps, seed, workdir)
                ours_rate, ours_return = run_ours(args.steps, seed, workdir, args.config)
            else:
                ours_rate, ours_return = run_ours(args.steps, seed, workdir, args.config)
                sb3_rate, sb3_return = run_sb3(args.steps, seed, workdir)
            rows.append((seed, ours_rate, ours_return, sb3_rate, sb3_return))
            print(f"seed {seed}: tftrainers {ours_rate:,.0f} steps/s return {ours_return:.1f} | "
                  f"SB3 {sb3_rate:,.0f} steps/s return {sb3_return:.1f} | "
                  f"ratio {ours_rate / sb3_rate:.2f}x", flush=True)
    n = len(rows)
    ours = sum(r[1] for r in rows) / n
    sb3 = sum(r[3] for r in rows) / n
    print(f"\nPPO on CartPole-v1, {args.steps} steps, {n} seed(s), whole-process steps/s")
    print(f"{'':12s} {'steps/s':>10s} {'eval return (mean over seeds)':>31s}")
    print(f"{'tftrainers':12s} {ours:10,.0f} {sum(r[2] for r in rows) / n:31.1f}")
    print(f"{'SB3':12s} {sb3:10,.0f} {sum(r[4] for r in rows) / n:31.1f}")
    print(f"ratio (tftrainers / SB3): {ours / sb3:.2f}x")


if __name__ == "__main__":
    main()
