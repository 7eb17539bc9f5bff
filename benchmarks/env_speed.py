"""Agent-steps per second of each built-in env with random actions, next to gymnasium.

    python benchmarks/env_speed.py [--seconds 3]

The peer is gymnasium's SyncVectorEnv of CartPole-v1 (its random actions drawn the same
way); our own gym adapter over the same CartPole is shown too, and the PettingZoo adapter
over simple_spread (16 copies of 3 agents; pip install -e ".[pettingzoo]"). Each loop runs the full
API round trip: get_steps, random actions (mask-respecting), set_actions, step.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from tftrainers.envs import make


def ours(env_id: str, num_areas: int, seconds: float, **env_args):
    """(agent-steps per wall second, per CPU second of this process)."""
    env = make(env_id, seed=0, num_areas=num_areas, **env_args)
    specs = env.behavior_specs  # the games have one behavior a team
    rng = np.random.default_rng(0)
    env.reset()
    agent_steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            for name, spec in specs.items():
                decision, _ = env.get_steps(name)
                env.set_actions(name, spec.action_spec.random_action(len(decision), rng,
                                                                     decision.action_mask))
                agent_steps += len(decision)
            env.step()
    return (agent_steps / (time.perf_counter() - start),
            agent_steps / (time.process_time() - cpu))


def gymnasium_sync(num_envs: int, seconds: float) -> float:
    import gymnasium
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * num_envs)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    agent_steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            envs.step(rng.integers(0, 2, num_envs))
            agent_steps += num_envs
    return agent_steps / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = parser.parse_args()
    peer = gymnasium_sync(8, args.seconds)
    rows = [("builtin:Basic", 8, {}), ("builtin:GridWorld", 16, {}),
            ("builtin:GridWorld", 16, {"obs": "visual"}), ("builtin:Ball3D", 8, {}),
            ("builtin:Hallway", 16, {}), ("builtin:Pyramids", 16, {}),
            ("builtin:DungeonEscape", 16, {}), ("builtin:PushBlockCollab", 16, {}),
            ("builtin:Tennis", 16, {}), ("builtin:SoccerTwos", 16, {}),
            ("gym:CartPole-v1", 8, {}), ("pettingzoo:mpe2.simple_spread_v3", 16, {})]
    # Wall-time rates suffer from other processes on the machine; the CPU-second rate of
    # this process does less (ours only: gymnasium's is the wall-time peer).
    print(f"{'env':34s} {'agents':>6s} {'agent-steps/s':>14s} {'vs gymnasium':>13s} "
          f"{'per CPU second':>14s}")
    print(f"{'gymnasium SyncVectorEnv CartPole-v1':34s} {8:6d} {peer:14,.0f} {1.0:12.2f}x")
    for env_id, areas, env_args in rows:
        env = make(env_id, num_areas=areas, **env_args)
        env.reset()
        n = sum(len(env.get_steps(name)[0]) for name in env.behavior_specs)
        label = env_id + "".join(f" {k}={v}" for k, v in env_args.items())
        rate, cpu_rate = ours(env_id, areas, args.seconds, **env_args)
        print(f"{label:34s} {n:6d} {rate:14,.0f} {rate / peer:12.2f}x {cpu_rate:14,.0f}")


if __name__ == "__main__":
    main()
