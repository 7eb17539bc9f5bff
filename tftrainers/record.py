"""Records demonstrations: a policy plays whole episodes, written to a Unity ``.demo`` file.

    env = make("builtin:GridWorld", seed=0)
    summary = record(env, make_policy("heuristic", env), "GridWorld.demo", episodes=50)
    # RecordSummary(behavior='GridWorld', episodes=50, steps=..., mean_reward=..., ...)

Episodes are chosen as ``tftrainers-evaluate`` counts them (each agent's first episodes, a
quota per agent), so the recorded mean return is the policy's evaluated return under the
same seed, not one biased to short episodes. Every area steps at once: the records of the
episodes in progress sit in one set of growing arrays (a row per record), and an agent's
episode is written, contiguously, when it ends.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional

import numpy as np

from tftrainers.envs import BaseEnv, BehaviorSpec
from tftrainers.evaluate import EpisodeTally, Policy
from tftrainers.processing.demonstrations import DemonstrationWriter, Records


class RecordSummary(NamedTuple):
    behavior: str
    episodes: int
    steps: int  # decisions: records less the episodes' final records
    records: int
    mean_reward: float
    path: str


class _OpenEpisodes:
    """Records of the episodes in progress: columns of growing arrays, an episode id a row."""

    def __init__(self, spec: BehaviorSpec):
        action_spec = spec.action_spec
        self.size = 0
        self.columns: Dict[str, np.ndarray] = {
            "episode": np.zeros(0, np.int64),
            "reward": np.zeros(0, np.float32),
            "done": np.zeros(0, bool),
            "max_step_reached": np.zeros(0, bool),
            "agent_id": np.zeros(0, np.int32),
            "action_mask": np.zeros((0, int(sum(action_spec.discrete_branches))), bool),
            "continuous": np.zeros((0, action_spec.continuous_size), np.float32),
            "discrete": np.zeros((0, action_spec.discrete_size), np.int32),
            "group_id": np.zeros(0, np.int32),
            "group_reward": np.zeros(0, np.float32),
        }
        for i, o in enumerate(spec.observation_specs):
            self.columns[f"obs{i}"] = np.zeros((0, *o.shape), np.float32)
        self.num_obs = len(spec.observation_specs)

    def append(self, **values: np.ndarray) -> None:
        n = len(values["episode"])
        if not n:
            return
        end = self.size + n
        for key, column in self.columns.items():
            if end > len(column):  # grow by doubling
                grown = np.zeros((max(end, 2 * len(column)), *column.shape[1:]), column.dtype)
                grown[:self.size] = column[:self.size]
                self.columns[key] = column = grown
            column[self.size:end] = values[key]
        self.size = end

    def pop(self, episodes: np.ndarray, keep: np.ndarray) -> List[Records]:
        """Removes ``episodes``; returns the records of those with ``keep``, in order."""
        if not len(episodes):
            return []
        ids = self.columns["episode"][:self.size]
        ending = np.isin(ids, episodes)
        out = []
        for episode in episodes[keep]:
            rows = np.flatnonzero(ids == episode)
            c = {k: v[rows] for k, v in self.columns.items()}
            out.append(Records([c[f"obs{i}"] for i in range(self.num_obs)], c["reward"],
                               c["done"], c["max_step_reached"], c["agent_id"],
                               c["action_mask"], c["continuous"], c["discrete"],
                               np.ones(len(rows), bool), c["group_id"], c["group_reward"]))
        remaining = np.flatnonzero(~ending)
        for key, column in self.columns.items():
            column[:len(remaining)] = column[remaining]
        self.size = len(remaining)
        return out


def record(env: BaseEnv, policy: Policy, path: str, episodes: int,
           behavior_name: Optional[str] = None, demonstration_name: Optional[str] = None,
           max_env_steps: int = 1_000_000) -> RecordSummary:
    """Runs ``policy`` until ``episodes`` whole episodes of one behavior are written to ``path``.

    Args:
        env: the environment (reset here).
        policy: ``policy(behavior_name, decision_steps) -> ActionTuple`` (as evaluate's),
            acting for every behavior of the env.
        path: the ``.demo`` file to write (replaced if it exists; written under a
            temporary name, so an interrupted recording leaves no file).
        episodes: episodes to record.
        behavior_name: the behavior to record; None for the env's only behavior.
        demonstration_name: the header's name (default: the file name without .demo).

    Raises:
        ValueError: an unknown behavior, or none given for an env with several.
        RuntimeError: ``max_env_steps`` passed before enough episodes ended.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    names = list(env.behavior_specs)
    if behavior_name is None:
        if len(names) != 1:
            raise ValueError(f"the env has behaviors {', '.join(names)}; a .demo file holds "
                             f"one: choose it with --behavior")
        behavior_name = names[0]
    elif behavior_name not in names:
        raise ValueError(f"the env has no behavior '{behavior_name}'; it has "
                         f"{', '.join(names)}")
    spec = env.behavior_specs[behavior_name]
    branches = spec.action_spec.discrete_branches
    tally = EpisodeTally(episodes)
    open_episodes = _OpenEpisodes(spec)
    episode_of_row = np.zeros(0, np.int64)  # per agent row: its recorded episode, or -1
    next_episode = 0
    with DemonstrationWriter(path, behavior_name, spec, demonstration_name) as writer:
        env.reset()
        for _ in range(max_env_steps):
            for name in names:
                decision, terminal = env.get_steps(name)
                if name != behavior_name:
                    if len(terminal) and hasattr(policy, "episode_ended"):
                        policy.episode_ended(name, terminal.agent_id)
                    if len(decision):
                        env.set_actions(name, policy(name, decision))
                    continue
                counted = tally.add(decision, terminal)
                if len(tally.rows) > len(episode_of_row):
                    episode_of_row = np.concatenate([episode_of_row, np.full(
                        len(tally.rows) - len(episode_of_row), -1, np.int64)])
                if len(terminal):
                    rows = tally.rows.rows(terminal.agent_id)
                    ended = episode_of_row[rows]
                    recorded = ended >= 0
                    n = int(recorded.sum())
                    open_episodes.append(
                        episode=ended[recorded], reward=terminal.reward[recorded],
                        done=np.ones(n, bool), max_step_reached=terminal.interrupted[recorded],
                        agent_id=terminal.agent_id[recorded],
                        action_mask=np.zeros((n, int(sum(branches))), bool),
                        continuous=np.zeros((n, spec.action_spec.continuous_size), np.float32),
                        discrete=np.zeros((n, len(branches)), np.int32),
                        group_id=terminal.group_id[recorded],
                        group_reward=terminal.group_reward[recorded],
                        **{f"obs{i}": o[recorded] for i, o in enumerate(terminal.obs)})
                    for episode_records in open_episodes.pop(ended[recorded],
                                                             counted[recorded]):
                        writer.write_episode(episode_records)
                    episode_of_row[rows] = -1
                    if hasattr(policy, "episode_ended"):
                        policy.episode_ended(name, terminal.agent_id)
                if len(decision):
                    actions = policy(name, decision)
                    env.set_actions(name, actions)
                    rows = tally.rows.rows(decision.agent_id)
                    wanted = tally.quota[rows] > 0
                    starting = wanted & (episode_of_row[rows] < 0)
                    count = int(starting.sum())
                    episode_of_row[rows[starting]] = next_episode + np.arange(count)
                    next_episode += count
                    masked = (decision.allowed_mask(branches) < 0.5 if branches
                              else np.zeros((len(decision), 0), bool))
                    open_episodes.append(
                        episode=episode_of_row[rows[wanted]], reward=decision.reward[wanted],
                        done=np.zeros(int(wanted.sum()), bool),
                        max_step_reached=np.zeros(int(wanted.sum()), bool),
                        agent_id=decision.agent_id[wanted], action_mask=masked[wanted],
                        continuous=np.asarray(actions.continuous, np.float32)[wanted],
                        discrete=np.asarray(actions.discrete, np.int32)[wanted],
                        group_id=decision.group_id[wanted],
                        group_reward=decision.group_reward[wanted],
                        **{f"obs{i}": o[wanted] for i, o in enumerate(decision.obs)})
            if tally.done:
                break
            env.step()
        else:
            raise RuntimeError(f"recording stopped after {max_env_steps} env steps before "
                               f"{episodes} episodes of {behavior_name} ended")
        returns = np.asarray(tally.returns[:episodes])
        return RecordSummary(behavior_name, writer.number_episodes,
                             writer.number_steps - writer.number_episodes,
                             writer.number_steps, float(returns.mean()), path)
