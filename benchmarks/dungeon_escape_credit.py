"""DungeonEscape needs credit after death: independent PPO vs PPO with absorbing members.

    python benchmarks/dungeon_escape_credit.py [--seeds 0 1 2] [--max-steps 1000000]

Both variants train PPO on builtin:DungeonEscape with ``shared_reward=true`` (every member
also gets the group reward as its own), at the same step budget and settings:

- ``independent``: the env as it is. A member that slays the dragon leaves the group
  (terminal step, absent after), so its returns end at 0 and never include the escape.
- ``absorbing``: the same game, but a member that dies stays in the episode as an
  absorbing member (its actions ignored, nothing it does matters) and keeps receiving the
  group reward until the group's episode ends, so the escape it made possible reaches
  its returns. A stand-in for group credit (MA-POCA bootstraps a member that left from its
  group's later value); the class below lives only in this benchmark.

Each trained policy is scored on the unchanged env with ``tftrainers-evaluate
builtin:DungeonEscape --episodes 200``: the share of group episodes that escaped
(``mean_group_reward``). Every run is its own process; prints one line per run and a
table of every seed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml

BIN = os.path.dirname(sys.executable)
CONFIG = {
    "behaviors": {"DungeonEscape": {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 1024, "buffer_size": 10240, "learning_rate": 3.0e-4,
                            "beta": 5.0e-3, "epsilon": 0.2, "lambd": 0.95, "num_epoch": 3,
                            "learning_rate_schedule": "constant"},
        "network_settings": {"normalize": False, "hidden_units": 128, "num_layers": 2},
        "reward_signals": {"extrinsic": {"gamma": 0.99, "strength": 1.0}},
        "time_horizon": 64, "summary_freq": 100000}},
    "env_settings": {"env_args": {"shared_reward": True}},
}


def train_absorbing(argv) -> int:
    """In this process: registers the absorbing variant, then runs tftrainers-learn."""
    from tftrainers.cli import learn_main
    from tftrainers.envs import ActionTuple
    from tftrainers.envs.builtin import BUILTIN_ENVS
    from tftrainers.envs.builtin.dungeon_escape import AGENTS, DungeonEscapeEnv

    class AbsorbingDungeonEscape(DungeonEscapeEnv):
        def _act_group(self, rows, actions):
            area, slot = np.divmod(rows, AGENTS)
            alive = self.alive[area, slot]  # the dead stay, but take no part
            _, group_reward, _, done = super()._act_group(
                rows[alive], ActionTuple(actions.continuous[alive], actions.discrete[alive]))
            nobody = np.zeros(len(rows), bool)
            return np.zeros(len(rows), np.float32), group_reward, nobody, done

    BUILTIN_ENVS["DungeonEscapeAbsorbing"] = AbsorbingDungeonEscape
    return learn_main(argv)


def run(variant: str, seed: int, max_steps: int, workdir: str) -> float:
    config = json.loads(json.dumps(CONFIG))
    config["behaviors"]["DungeonEscape"]["max_steps"] = max_steps
    config["env_settings"]["env_path"] = ("builtin:DungeonEscape" if variant == "independent"
                                          else "builtin:DungeonEscapeAbsorbing")
    path = os.path.join(workdir, f"{variant}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(config, f)
    run_id = f"{variant}_{seed}"
    learn = ["--run-id", run_id, "--seed", str(seed), "--results-dir", workdir, "--force"]
    if variant == "independent":
        command = [os.path.join(BIN, "tftrainers-learn"), path, *learn]
    else:
        command = [sys.executable, os.path.abspath(__file__), "--train-absorbing", path, *learn]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(BIN, "tftrainers-evaluate"), "builtin:DungeonEscape",
                          "--policy", os.path.join(workdir, run_id), "--episodes", "200",
                          "--seed", str(seed)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["mean_group_reward"]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--train-absorbing":
        return train_absorbing(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--max-steps", type=int, default=1_000_000)
    args = parser.parse_args()
    results = {"independent": [], "absorbing": []}
    with tempfile.TemporaryDirectory() as workdir:
        for seed in args.seeds:
            for variant in results:
                escaped = run(variant, seed, args.max_steps, workdir)
                results[variant].append(escaped)
                print(f"{variant:12s} seed {seed}: escaped in {escaped:.3f} of 200 episodes",
                      flush=True)
    print(f"\n{'variant':12s} {'mean':>6s}  per seed ({args.max_steps} steps each)")
    for variant, values in results.items():
        print(f"{variant:12s} {np.mean(values):6.3f}  " + ", ".join(f"{v:.3f}" for v in values))
    return 0


if __name__ == "__main__":
    sys.exit(main())
