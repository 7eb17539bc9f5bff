"""What a GAIL run on the built-in GridWorld learned: its discriminator and its pit entries.

    python benchmarks/gail_probe.py RUN [RUN ...] [--layouts 400] [--env-steps 3000]

For each ``tftrainers-learn`` run folder of a ``gail`` config on ``builtin:GridWorld``
(``obs=vector`` or ``obs=grid``), from its newest checkpoint:

- ``D goal / D pit``: the discriminator's mean estimate (1 = expert) of stepping into the
  goal and of stepping into the pit (done = 1), over random layouts with the agent next to
  that cell. An expert never steps into the pit, so a discriminator that learned the task
  rates that step far lower.
- ``blocked: D pit / D other``: layouts where the pit lies between the agent and the goal
  in a straight line: the move into the pit against the other legal moves.
- ``V pit - V before`` / ``V goal - V before``: the critic's GAIL value of the board after
  the step into the pit (the goal) less its value of the board before, mean and standard
  deviation over the same layouts. The GAIL stream bootstraps a real end from the value of
  the terminal board, which the critic never trains on.
- ``pit share``: of the episodes the trained policy (sampled actions) ends in
  ``--env-steps`` steps of 16 areas, the share that end in the pit, and how many of those
  pits lay on a shortest (Manhattan) way to the goal.

The README's GAIL section quotes these figures.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tftrainers.console import quiet_tensorflow  # noqa: E402

BEHAVIOR = "GridWorld"


def planes(agent, goal, pit, shape=(75,)) -> np.ndarray:
    """The env's observation of a layout: agent / goal / pit one-hot 5x5 planes, flattened
    (``obs=vector``, shape (75,)) or channels last (``obs=grid``, shape (5, 5, 3))."""
    x = np.zeros((3, 5, 5), np.float32)
    for channel, (r, c) in enumerate((agent, goal, pit)):
        x[channel, r, c] = 1.0
    if tuple(shape) == (5, 5, 3):
        return x.transpose(1, 2, 0)
    return x.reshape(-1)


class Layouts:
    """Layouts (agent, goal, pit cells) and a move from each, observed as ``spec`` sees
    them: the observation before the move and the one after it."""

    def __init__(self):
        self.cells, self.moves = [], []

    def add(self, agent, goal, pit, move):
        self.cells.append((np.array(agent), np.array(goal), np.array(pit)))
        self.moves.append(int(move))

    def observations(self, shape):
        from tftrainers.envs.builtin.gridworld import MOVES, N
        before, after = [], []
        for (agent, goal, pit), move in zip(self.cells, self.moves):
            before.append(planes(agent, goal, pit, shape))
            after.append(planes(np.clip(agent + MOVES[move], 0, N - 1), goal, pit, shape))
        return np.stack(before), np.stack(after), np.array(self.moves, np.int32)


def adjacent_layouts(rng, n, into):
    """n layouts with the agent next to the goal (into="goal") or the pit; the move into it."""
    from tftrainers.envs.builtin.gridworld import MOVES, N
    layouts = Layouts()
    while len(layouts.moves) < n:
        agent, goal, pit = (np.array(divmod(int(c), N)) for c in rng.permutation(N * N)[:3])
        target = goal if into == "goal" else pit
        step = target - agent
        if np.abs(step).sum() != 1:
            continue
        layouts.add(agent, goal, pit, np.flatnonzero((MOVES == step).all(axis=1))[0])
    return layouts


def blocked_layouts(rng, n):
    """n layouts agent - pit - goal in a straight line; every legal move from each."""
    from tftrainers.envs.builtin.gridworld import MOVES, N
    layouts, into_pit = Layouts(), []
    while len(layouts.moves) < n * 3:
        agent = rng.integers(0, N, 2)
        step = MOVES[rng.integers(1, len(MOVES))]
        pit, goal = agent + step, agent + 2 * step
        if not ((goal >= 0) & (goal < N)).all():
            continue
        for move in range(1, len(MOVES)):
            target = agent + MOVES[move]
            if ((target >= 0) & (target < N)).all():
                layouts.add(agent, goal, pit, move)
                into_pit.append(bool((target == pit).all()))
    return layouts, np.array(into_pit)


def trained_models(run):
    """The run's GAIL discriminator (as its reward provider) and critic, from its newest
    checkpoint (no memory: the GAIL runs here have none)."""
    from tftrainers.checkpoint import Checkpointer
    from tftrainers.networks.critics import Critic
    from tftrainers.rewards.gail import GAILRewardProvider
    from tftrainers.runs import read_behavior_spec, recorded_settings
    spec = read_behavior_spec(run, BEHAVIOR)
    settings = recorded_settings(run, BEHAVIOR)
    if "gail" not in settings.reward_signals:
        sys.exit(f"{run}: the run has no gail reward signal")
    cwd = os.getcwd()
    os.chdir(ROOT)  # the config's demo_path is relative to where the run was started
    try:
        provider = GAILRewardProvider("gail", spec, settings.reward_signals["gail"])
    finally:
        os.chdir(cwd)
    ns = settings.network_settings
    critic = Critic(spec.observation_specs, list(settings.reward_signals), ns.hidden_units,
                    ns.num_layers, ns.normalize, ns.vis_encode_type)
    Checkpointer(os.path.join(run, BEHAVIOR, "checkpoints"), BEHAVIOR).restore_newest(
        {**provider.trackables(), "critic": critic})
    return provider, critic


def value_step(critic, layouts, shape):
    """The critic's GAIL value after each layout's move less its value before."""
    before, after, _ = layouts.observations(shape)
    values = [critic([x])[0]["gail"].numpy() for x in (before, after)]
    return values[1] - values[0]


def estimate(provider, layouts, done):
    from tftrainers.rewards.base import RewardBatch
    obs, next_obs, moves = layouts.observations(provider.spec.observation_specs[0].shape)
    n = len(obs)
    batch = RewardBatch(obs=(obs,), next_obs=(next_obs,),
                        continuous_action=np.zeros((n, 0), np.float32),
                        discrete_action=moves[:, None], environment_reward=np.zeros(n, np.float32),
                        done=np.asarray(done, np.float32), mask=np.ones(n, np.float32))
    return provider._estimate_fn(batch).numpy()


def pit_share(run, env_steps, seed, obs="vector"):
    """(pit ends / all ends, pit ends on a shortest way / pit ends) of the sampled policy."""
    from tftrainers.envs import make
    from tftrainers.envs.builtin.gridworld import MOVES, N
    from tftrainers.evaluate import make_policy
    env = make("builtin:GridWorld", seed=seed, obs=obs)
    env.reset()
    policy = make_policy(run, env, seed=seed)
    goal_ends = pit_ends = on_way = 0
    for _ in range(env_steps):
        decision, _ = env.get_steps(BEHAVIOR)
        rows = np.asarray(decision.agent_id, np.int64)
        agent, goal, pit = env.agent[rows].copy(), env.goal[rows].copy(), env.pit[rows].copy()
        actions = policy(BEHAVIOR, decision)
        env.set_actions(BEHAVIOR, actions)
        env.step()
        target = np.clip(agent + MOVES[actions.discrete[:, 0]], 0, N - 1)
        into_pit = (target == pit).all(axis=1)
        goal_ends += int((target == goal).all(axis=1).sum())
        pit_ends += int(into_pit.sum())
        way = np.abs(agent - pit).sum(1) + np.abs(pit - goal).sum(1) == np.abs(agent - goal).sum(1)
        on_way += int((into_pit & way).sum())
    env.close()
    return pit_ends / max(goal_ends + pit_ends, 1), on_way / max(pit_ends, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run folders (results/RUN)")
    parser.add_argument("--layouts", type=int, default=400)
    parser.add_argument("--env-steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quiet_tensorflow()
    from tftrainers.checkpoint import CheckpointError
    models = {}
    for run in args.runs:  # every folder is checked before any figure is printed
        try:
            models[run] = trained_models(run)
        except (CheckpointError, ValueError) as error:
            sys.exit(f"gail_probe.py: {error}")
    print("| run | D goal | D pit | blocked: D pit | blocked: D other | V pit - V before "
          "| V goal - V before | pit share of ends | of those on a shortest way |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run, (provider, critic) in models.items():
        rng = np.random.default_rng(args.seed)
        shape = provider.spec.observation_specs[0].shape
        into_goal = adjacent_layouts(rng, args.layouts, "goal")
        into_pit = adjacent_layouts(rng, args.layouts, "pit")
        goal = estimate(provider, into_goal, np.ones(args.layouts))
        pit = estimate(provider, into_pit, np.ones(args.layouts))
        v_goal, v_pit = value_step(critic, into_goal, shape), value_step(critic, into_pit, shape)
        layouts, blocked_pit = blocked_layouts(rng, args.layouts)
        blocked = estimate(provider, layouts, blocked_pit)
        grid = tuple(shape) == (5, 5, 3)
        share, way = pit_share(run, args.env_steps, args.seed, "grid" if grid else "vector")
        print(f"| {run} | {goal.mean():.3f} | {pit.mean():.3f} "
              f"| {blocked[blocked_pit].mean():.3f} | {blocked[~blocked_pit].mean():.3f} "
              f"| {v_pit.mean():.2f} +- {v_pit.std():.2f} "
              f"| {v_goal.mean():.2f} +- {v_goal.std():.2f} "
              f"| {share:.3f} | {way:.2f} |", flush=True)


if __name__ == "__main__":
    main()
