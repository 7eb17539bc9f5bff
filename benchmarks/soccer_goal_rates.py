"""SoccerTwos: how often a kick-off ends in a goal, for scripted and random teams.

    python benchmarks/soccer_goal_rates.py [--field-length 16] [--field-width 10]
                                           [--areas 64] [--steps 4000] [--seed 0]

Plays team 0 against team 1 on ``builtin:SoccerTwos`` for each pair of random, still
(zero actions) and heuristic teams, ``--steps`` steps of ``--areas`` fields, and prints per
pair the kick-offs played and the share won by each team and drawn (cut by the 400-step
limit). How sparse the goal reward is for an untrained policy, and how strong the heuristic
team is (docs/benchmarks/selfplay.md).
"""
from __future__ import annotations

import argparse

import numpy as np

from tftrainers.envs.base import ActionTuple
from tftrainers.envs.builtin.soccer_twos import SoccerTwosEnv

PAIRS = [("random", "random"), ("random", "still"), ("heuristic", "random"),
         ("heuristic", "still"), ("heuristic", "heuristic")]


def play(kinds, areas: int, steps: int, seed: int, **env_args) -> np.ndarray:
    """[team 0 goals, team 1 goals, draws] over the kick-offs that ended."""
    env = SoccerTwosEnv(seed=seed, num_areas=areas, **env_args)
    env.reset()
    rng = np.random.default_rng(seed)
    names = env.team_names()
    counts = np.zeros(3, np.int64)
    for _ in range(steps):
        for kind, name in zip(kinds, names):
            decision, _ = env.get_steps(name)
            n = len(decision)
            if kind == "heuristic":
                actions = env.heuristic(name, decision)
            else:
                discrete = (rng.integers(0, 3, (n, 3)) if kind == "random"
                            else np.zeros((n, 3), np.int64))
                actions = ActionTuple(np.zeros((n, 0), np.float32), discrete.astype(np.int32))
            env.set_actions(name, actions)
        env.step()
        _, terminal = env.get_steps(names[0])
        first = np.unique(terminal.agent_id // 4, return_index=True)[1]  # one row a field
        reward = terminal.group_reward[first]
        counts += [(reward > 0).sum(), (reward < 0).sum(), (reward == 0).sum()]
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--field-length", type=float, default=16.0)
    parser.add_argument("--field-width", type=float, default=10.0)
    parser.add_argument("--areas", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for kinds in PAIRS:
        goals0, goals1, draws = play(kinds, args.areas, args.steps, args.seed,
                                     field_length=args.field_length,
                                     field_width=args.field_width)
        total = max(goals0 + goals1 + draws, 1)
        print(f"{kinds[0]:>9} vs {kinds[1]:<9}: {total} kick-offs, team 0 won "
              f"{goals0 / total:.3f}, team 1 won {goals1 / total:.3f}, drawn {draws / total:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
