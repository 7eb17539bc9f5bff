"""Which goal the optimal discriminator's GAIL reward favours on Basic, at the start.

    python benchmarks/gail_optimal_d.py [--episodes 30000] [--seed 0]

GAIL alone (no env reward) on the built-in Basic: the heuristic's demonstrations walk from
cell 10 to the +1 goal at 17 in 7 steps; the untrained policy walks at random (stay, left,
right) until the +0.1 goal at 7, the +1 goal or the 100-step limit. For such a policy the
best possible discriminator is D*(x) = p_E(x) / (p_E(x) + p_pi(x)) over D's rows x (the
steps' states, with absorbing states one absorbing row per real end, and with terminal
rows one row of the state each real end left), estimated here from simulated random
episodes. The table is the undiscounted GAIL return of the two direct paths under D*,
measured from the absorbing state's reward as the trainer pays it: 3 steps to the near
goal (10, 9, 8) and 7 to the far one (10 .. 16), plus with terminal rows the state the end
left (7 or 17). Whichever is higher is what the first updates teach when D is good.
"""
from __future__ import annotations

import argparse

import numpy as np

START, NEAR, FAR, LIMIT, SIZE = 10, 7, 17, 100, 20


def random_walks(episodes: int, seed: int):
    """State visits, terminal cells and episode lengths of the random policy."""
    rng = np.random.default_rng(seed)
    visits, finals, lengths = np.zeros(SIZE), np.zeros(SIZE), []
    for _ in range(episodes):
        cell, t = START, 0
        while True:
            visits[cell] += 1
            t += 1
            cell += rng.choice([0, -1, 1])
            if cell in (NEAR, FAR):
                finals[cell] += 1
                break
            if t == LIMIT:
                break
        lengths.append(t)
    return visits, finals, np.array(lengths)


def path_returns(visits, finals, terminal: bool, form: str):
    """(r_abs, near-goal return, far-goal return) under D* for the random policy."""
    ends = finals.sum()
    rows = visits.sum() + ends * (2 if terminal else 1)
    expert_rows = 7 + 1 + (1 if terminal else 0)
    policy = visits / rows
    expert = np.zeros(SIZE)
    expert[START:FAR] = 1.0 / expert_rows

    def reward(p_e, p_pi):
        d = np.clip(p_e / (p_e + p_pi) if p_e + p_pi > 0 else 0.5, 1e-7, 1 - 1e-7)
        return -np.log(1 - d) if form == "-log(1-D)" else np.log(d) - np.log(1 - d)
    r_abs = reward(1.0 / expert_rows, ends / rows)
    step = {s: reward(expert[s], policy[s]) - r_abs for s in range(NEAR + 1, FAR)}
    near = sum(step[s] for s in (10, 9, 8))
    far = sum(step[s] for s in range(START, FAR))
    if terminal:
        near += reward(0.0, finals[NEAR] / rows) - r_abs
        far += reward(1.0 / expert_rows, finals[FAR] / rows) - r_abs
    return r_abs, near, far


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    visits, finals, lengths = random_walks(args.episodes, args.seed)
    ends = finals.sum()
    print(f"random policy: {lengths.mean():.1f} steps an episode, {ends / len(lengths):.3f} "
          f"real ends an episode, {finals[NEAR] / ends:.2f} of them at the near goal")
    print("| D's rows | reward | r_abs | near goal (3 steps) | far goal (7 steps) |")
    print("|---|---|---|---|---|")
    for terminal in (False, True):
        for form in ("-log(1-D)", "logit"):
            r_abs, near, far = path_returns(visits, finals, terminal, form)
            rows = "steps, absorbing" + (", terminal" if terminal else "")
            print(f"| {rows} | {form} | {r_abs:.2f} | {near:.2f} | {far:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
