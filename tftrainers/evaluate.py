"""Runs a policy for whole episodes and measures its return: the one way to score a policy.

    env = make("builtin:Ball3D", seed=0)
    results = evaluate(env, make_policy("heuristic", env), episodes=20)
    # {"Ball3D": {"behavior": "Ball3D", "episodes": 20, "mean_reward": ..., "std_reward": ...}}

A policy is any ``policy(behavior_name, decision_steps) -> ActionTuple``; policies with
memory also get ``policy.episode_ended(behavior_name, agent_ids)``.

Agents in groups (nonzero ``group_id``) are scored per group too: ``mean_group_reward``
is the mean over group episodes of the group rewards the group received (counted once per
step, whoever of its members was present), over ``episodes`` group episodes.

In a game of two teams (behaviors ``NAME?team=0`` and ``NAME?team=1``), ``evaluate_matches``
plays one policy against another and counts wins, draws and losses::

    env = make("builtin:Tennis", seed=0)
    result = evaluate_matches(env, make_policy("random", env), make_policy("heuristic", env),
                              matches=100)   # {"wins": ..., "draws": ..., "losses": ...}
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Dict, List

import numpy as np

from tftrainers.envs import ActionTuple, BaseEnv, DecisionSteps
from tftrainers.envs.agent_rows import AgentRows, EpisodesUnderWay
from tftrainers.envs.checks import check_steps

Policy = Callable[[str, DecisionSteps], ActionTuple]
POLICY_HELP = ("heuristic (the env's teacher), random, a run folder results/RUN (its latest "
               "checkpoint), an exported PATH.onnx (onnxruntime), PATH.keras (Keras), "
               "PATH.tflite (LiteRT) or a SavedModel folder PATH/saved_model[/VERSION] "
               "(TensorFlow)")


class RandomPolicy:
    """Uniform random actions that respect action masks."""

    def __init__(self, env: BaseEnv, seed: int = 0):
        self.specs = env.behavior_specs
        self.rng = np.random.default_rng(seed)

    def __call__(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        return self.specs[behavior_name].action_spec.random_action(
            len(decision_steps), self.rng, decision_steps.action_mask)


class CheckpointPolicy:
    """The policies of a training run's latest checkpoints, one per behavior of the env."""

    def __init__(self, run_dir: str, env: BaseEnv, seed: int = 0, deterministic: bool = False):
        from tftrainers.runs import load_policy

        def warn(line):
            print(line, file=sys.stderr)
        # The newest complete checkpoint, also while the run trains (and prunes).
        self.actors = {name: load_policy(run_dir, _run_behavior(run_dir, name), spec,
                                         deterministic, seed,
                                         log=warn).make_actor("tensorflow", seed=seed)
                       for name, spec in env.behavior_specs.items()}

    def __call__(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        return self.actors[behavior_name].act(decision_steps)[1]

    def episode_ended(self, behavior_name: str, agent_ids: np.ndarray) -> None:
        self.actors[behavior_name].episode_ended(agent_ids)


class ExportedPolicy:
    """An exported model (ONNX, .keras, TFLite or SavedModel) acting for the env's single
    behavior."""

    def __init__(self, path: str, env: BaseEnv, deterministic: bool = False):
        from tftrainers.console import stderr_without
        from tftrainers.export import exported_policy
        specs = set(env.behavior_specs.values())
        if len(specs) != 1:  # the teams of a game (NAME?team=N) share theirs
            raise ValueError(f"{path}: an exported model acts for one behavior spec; the env "
                             f"has {', '.join(env.behavior_specs)}, with different specs")
        (spec,) = specs
        try:
            # LiteRT announces its CPU delegate on stderr at load, once per interpreter.
            with stderr_without(lambda line: line.startswith("INFO: Created TensorFlow Lite")):
                self.model = exported_policy(path, spec, deterministic)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") if not str(error).startswith(path) else error

    def __call__(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        return self.model(behavior_name, decision_steps)

    def episode_ended(self, behavior_name: str, agent_ids: np.ndarray) -> None:
        self.model.episode_ended(behavior_name, agent_ids)


def _run_behavior(run_dir: str, name: str) -> str:
    """The run's behavior that acts for the env's behavior ``name``: the same name, else
    for a team's behavior (``NAME?team=N``) the run's ``NAME`` (a self-play run trains
    one policy for every team) or its ``NAME?team=0``."""
    from tftrainers.runs import run_behaviors
    from tftrainers.envs.unity.convert import behavior_base_name
    behaviors = run_behaviors(run_dir)
    base = behavior_base_name(name)
    for candidate in (name, base, f"{base}?team=0"):
        if candidate in behaviors:
            return candidate
    return name  # load_policy names what the run has


def make_policy(name: str, env: BaseEnv, seed: int = 0, deterministic: bool = False,
                what: str = "policy") -> Policy:
    """Resolves ``--policy`` (or ``--opponent``, named by ``what`` in errors): heuristic,
    random, a run folder, or an exported model."""
    if name == "heuristic":
        return env.heuristic
    if name == "random":
        return RandomPolicy(env, seed)
    if name.endswith((".onnx", ".keras", ".tflite")):
        if not os.path.isfile(name):
            kind = {"onnx": "ONNX", "keras": ".keras", "tflite": "TFLite"}[name.rsplit(".", 1)[1]]
            raise ValueError(f"{name}: no such {kind} file")
        return ExportedPolicy(name, env, deterministic)
    if os.path.isfile(os.path.join(name, "configuration.yaml")):
        return CheckpointPolicy(name, env, seed, deterministic)
    if os.path.isdir(name):
        try:
            return ExportedPolicy(name, env, deterministic)
        except FileNotFoundError:
            raise ValueError(f"{name}: no model in this folder: neither a training run "
                             f"(configuration.yaml) nor a SavedModel (saved_model.pb in it or "
                             f"in a numbered version folder)") from None
    raise ValueError(f"unknown {what} '{name}'; use {POLICY_HELP}")


class EpisodeTally:
    """Episode returns of one behavior, counting each agent's first ``quota`` episodes.

    Counting only the first episodes finished (whoever finishes them) would favour short
    episodes; a fixed quota per agent, set when the agents first appear, does not. Agents
    that appear later (an env that gives each episode a new id, as ML-Agents' test envs and
    agents spawned by a game do) take over the quota an agent left behind when it has not
    been seen for ``VACANT_AFTER`` steps: one episode each as they finish.
    """

    #: Steps an agent with quota left may go unseen before a later agent may take it over
    #: (more than any decision period between an agent's steps).
    VACANT_AFTER = 50

    def __init__(self, episodes: int):
        self.episodes = episodes
        self.rows = AgentRows()
        self.quota = np.zeros(0, np.int64)
        self.running_return = np.zeros(0)
        self.running_length = np.zeros(0, np.int64)
        self.last_seen = np.zeros(0, np.int64)
        self.late = np.zeros(0, bool)
        self.step = 0
        self.returns: List[float] = []
        self.lengths: List[int] = []

    def _grow(self, rows: np.ndarray) -> None:
        n = len(self.rows)
        if n > len(self.quota):
            first = len(self.quota) == 0
            extra = n - len(self.quota)
            quota = np.zeros(extra, np.int64)
            if first:  # spread the episodes over the agents present at the start
                quota = self.episodes // extra + (np.arange(extra) < self.episodes % extra)
            self.quota = np.concatenate([self.quota, quota])
            self.running_return = np.concatenate([self.running_return, np.zeros(extra)])
            self.running_length = np.concatenate([self.running_length,
                                                  np.zeros(extra, np.int64)])
            self.last_seen = np.concatenate([self.last_seen, np.full(extra, self.step)])
            self.late = np.concatenate([self.late, np.full(extra, not first)])
        self.last_seen[rows] = self.step

    def _counted(self, rows: np.ndarray) -> np.ndarray:
        """Which of the episodes ending for ``rows`` count (taking a unit of their quota, or
        of a vacant one for an agent that appeared late)."""
        counted = self.quota[rows] > 0
        self.quota[rows] -= counted
        for i in np.flatnonzero(~counted & self.late[rows]):
            vacant = (self.quota > 0) & (self.last_seen < self.step - self.VACANT_AFTER)
            if not vacant.any():
                break
            self.quota[np.argmax(np.where(vacant, self.quota, 0))] -= 1
            counted[i] = True
        return counted

    def add(self, decision, terminal) -> np.ndarray:
        """Tallies a step; returns [len(terminal)] bool, which ended episodes counted."""
        self.step += 1
        counted = np.zeros(0, bool)
        if len(terminal):
            rows = self.rows.rows(terminal.agent_id)
            self._grow(rows)
            total = self.running_return[rows] + terminal.reward
            counted = self._counted(rows)
            self.returns.extend(total[counted].tolist())
            self.lengths.extend(self.running_length[rows][counted].tolist())
            self.running_return[rows] = 0.0
            self.running_length[rows] = 0
        if len(decision):
            rows = self.rows.rows(decision.agent_id)
            self._grow(rows)
            self.running_return[rows] += decision.reward
            self.running_length[rows] += 1
        return counted

    @property
    def done(self) -> bool:
        return len(self.returns) >= self.episodes


class _GroupTally(EpisodeTally):
    """Group episode returns of one behavior, each group's first ``quota`` episodes.

    A group's reward is counted once per step. Its episode ends in a step where some of
    its members have terminal steps and none goes on with its episode (a member that
    leaves early ends while the others go on). Decisions that start an episode count for
    neither: with Unity's step convention the members of an ended group, those that left
    early too, are back in the decision steps of the step it ended.
    """

    def __init__(self, episodes: int):
        super().__init__(episodes)
        self.under_way = EpisodesUnderWay()

    def add(self, decision, terminal) -> None:
        self.step += 1
        going_on = self.under_way.continuing(decision.agent_id, terminal.agent_id)
        # Terminal steps first: their group reward is the ending episode's.
        ids = np.concatenate([terminal.group_id, decision.group_id[going_on]])
        present = ids != 0
        if not present.any():
            return
        rewards = np.concatenate([terminal.group_reward,
                                  decision.group_reward[going_on]])[present]
        groups, first = np.unique(ids[present], return_index=True)
        rows = self.rows.rows(groups)
        self._grow(rows)
        self.running_return[rows] += rewards[first]
        self.running_length[rows] += 1
        ended = np.setdiff1d(terminal.group_id[terminal.group_id != 0],
                             decision.group_id[going_on])
        if len(ended):
            rows = self.rows.rows(ended)
            counted = self._counted(rows)
            self.returns.extend(self.running_return[rows][counted].tolist())
            self.lengths.extend(self.running_length[rows][counted].tolist())
            self.running_return[rows] = 0.0
            self.running_length[rows] = 0

    @property
    def done(self) -> bool:  # no groups seen: nothing to wait for
        return len(self.rows) == 0 or super().done


def evaluate(env: BaseEnv, policy: Policy, episodes: int = 10,
             max_env_steps: int = 1_000_000) -> Dict[str, Dict[str, float]]:
    """Runs ``policy`` until every behavior has finished ``episodes`` episodes.

    Returns:
        Per behavior: ``behavior``, ``episodes``, ``mean_reward``, ``std_reward``,
        ``mean_episode_length``; for agents in groups also ``group_episodes``,
        ``mean_group_reward`` and ``std_group_reward``.

    Raises:
        RuntimeError: when ``max_env_steps`` pass before that.
        tftrainers.envs.checks.EnvDataError: the env sent NaN/inf or misshapen data.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    tallies = {name: EpisodeTally(episodes) for name in env.behavior_specs}
    group_tallies = {name: _GroupTally(episodes) for name in env.behavior_specs}
    specs = env.behavior_specs
    env.reset()
    for _ in range(max_env_steps):
        for name, tally in tallies.items():
            decision, terminal = env.get_steps(name)
            check_steps(name, specs[name], decision, terminal)
            tally.add(decision, terminal)
            group_tallies[name].add(decision, terminal)
            if len(terminal) and hasattr(policy, "episode_ended"):
                policy.episode_ended(name, terminal.agent_id)
            if len(decision):
                env.set_actions(name, policy(name, decision))
        if all(t.done for t in tallies.values()) and all(
                t.done for t in group_tallies.values()):
            break
        env.step()
    else:
        short = [n for n, t in tallies.items() if not (t.done and group_tallies[n].done)]
        raise RuntimeError(f"evaluation stopped after {max_env_steps} env steps before "
                           f"{episodes} episodes of {', '.join(short)} ended")
    results = {}
    for name, tally in tallies.items():
        returns = np.asarray(tally.returns[:episodes])
        results[name] = {"behavior": name, "episodes": len(returns),
                         "mean_reward": float(returns.mean()), "std_reward": float(returns.std()),
                         "mean_episode_length": float(np.mean(tally.lengths[:episodes]))}
        group_returns = np.asarray(group_tallies[name].returns[:episodes])
        if len(group_returns):
            results[name].update(group_episodes=len(group_returns),
                                 mean_group_reward=float(group_returns.mean()),
                                 std_group_reward=float(group_returns.std()))
    return results


def team_behaviors(env: BaseEnv) -> List[str]:
    """The behaviors ``NAME?team=0`` and ``NAME?team=1`` of a two-team game, in team order.

    Raises:
        ValueError: one line, when the env is not a game of two teams that pairs its
            agents into matches (``match_of``, as the built-ins Tennis and SoccerTwos do).
    """
    from tftrainers.envs.unity.convert import behavior_base_name, behavior_team
    names = list(env.behavior_specs)
    teams = {behavior_team(n): n for n in names}
    bases = {behavior_base_name(n) for n in names}
    if len(names) != 2 or set(teams) != {0, 1} or len(bases) != 1:
        raise ValueError(f"--opponent needs a game of two teams (behaviors NAME?team=0 and "
                         f"NAME?team=1, e.g. builtin:Tennis, builtin:SoccerTwos); the env has "
                         f"{', '.join(names)}")
    if not hasattr(env, "match_of"):
        raise ValueError(f"--opponent needs an env that pairs its teams' agents into matches "
                         f"(match_of, as the built-ins Tennis and SoccerTwos); "
                         f"{type(env).__name__} does not")
    return [teams[0], teams[1]]


class _MatchTally:
    """Outcomes of the matches of one pass, each area's first ``quota`` ones (as
    ``EpisodeTally``: counting whichever matches end first would favour short ones).

    A match is one episode of an area, or with ``first_to`` > 1 the episodes of an area
    until a team has won ``first_to`` of them (an episode cut by the step limit scores for
    neither)."""

    def __init__(self, matches: int, side: int, first_to: int = 1):
        self.matches, self.side, self.first_to = matches, side, first_to
        self.points = np.zeros((0, 2), np.int64)  # episodes won in the match under way
        self.rows = AgentRows()
        self.quota = np.zeros(0, np.int64)
        self.running = np.zeros((0, 2))  # the match's return so far, per team
        self.final = np.zeros((0, 2))  # the last step's reward per team (when it ended)
        self.ended = np.zeros((0, 2), bool)
        self.interrupted = np.zeros(0, bool)
        self.outcomes: List[int] = []  # +1 win, 0 draw, -1 loss, for team ``side``
        self.returns: List[float] = []

    def _rows(self, match_ids: np.ndarray) -> np.ndarray:
        rows = self.rows.rows(match_ids)
        extra = len(self.rows) - len(self.quota)
        if extra > 0:
            quota = np.zeros(extra, np.int64)
            if not len(self.quota):  # spread the matches over those under way at the start
                quota = self.matches // extra + (np.arange(extra) < self.matches % extra)
            self.quota = np.concatenate([self.quota, quota])
            self.running = np.concatenate([self.running, np.zeros((extra, 2))])
            self.final = np.concatenate([self.final, np.zeros((extra, 2))])
            self.ended = np.concatenate([self.ended, np.zeros((extra, 2), bool)])
            self.interrupted = np.concatenate([self.interrupted, np.zeros(extra, bool)])
            self.points = np.concatenate([self.points, np.zeros((extra, 2), np.int64)])
        return rows

    def _add(self, team: int, match_ids: np.ndarray, value: np.ndarray) -> np.ndarray:
        """Adds the mean over each match's members of ``value``; returns the match rows
        and that mean."""
        rows = self._rows(match_ids)
        unique, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
        mean = np.zeros(len(unique))
        np.add.at(mean, inverse, value)
        mean /= counts
        self.running[unique, team] += mean
        return unique, mean

    def add(self, team: int, match_ids_decision, decision, match_ids_terminal, terminal):
        if len(terminal):
            rows, final = self._add(team, match_ids_terminal,
                                    terminal.reward + terminal.group_reward)
            self.final[rows, team] = final
            self.ended[rows, team] = True
            interrupted = np.zeros(len(rows), bool)
            np.logical_or.at(interrupted, np.searchsorted(rows, self.rows.rows(
                match_ids_terminal)), terminal.interrupted)
            self.interrupted[rows] |= interrupted
        if len(decision):
            self._add(team, match_ids_decision, decision.reward + decision.group_reward)

    def close_matches(self) -> None:
        """Scores the matches whose two teams have ended their episodes."""
        over = np.flatnonzero(self.ended.all(axis=1))
        if not len(over):
            return
        me, other = self.final[over, self.side], self.final[over, 1 - self.side]
        episode = np.where(self.interrupted[over], 0, np.sign(me - other)).astype(np.int64)
        self.ended[over] = False
        self.interrupted[over] = False
        if self.first_to > 1:
            self.points[over, self.side] += episode > 0
            self.points[over, 1 - self.side] += episode < 0
            over = over[self.points[over].max(axis=1) >= self.first_to]
            episode = np.sign(self.points[over, self.side] - self.points[over, 1 - self.side])
            self.points[over] = 0
        counted = self.quota[over] > 0
        self.outcomes.extend(episode[counted].tolist())
        self.returns.extend(self.running[over, self.side][counted].tolist())
        self.quota[over] -= counted
        self.running[over] = 0.0

    @property
    def done(self) -> bool:
        return len(self.outcomes) >= self.matches


def evaluate_matches(env: BaseEnv, policy: Policy, opponent: Policy, matches: int = 10,
                     first_to: int = 1, max_env_steps: int = 1_000_000) -> Dict[str, object]:
    """Plays ``matches`` matches of ``policy`` against ``opponent`` in a two-team game.

    ``policy`` plays team 0 and ``opponent`` team 1 in the first half of the matches (the
    odd one included), then the sides swap (the env is reset between the halves). A match
    is an episode of one area (``env.match_of``); its outcome compares the two teams'
    final rewards (the last step's reward plus group reward, averaged over a team's
    members): the higher wins, equal ones and a match cut by the step limit are a draw.
    ML-Agents' self-play reads the sign of one team's final reward instead, which needs a
    zero-sum game; comparing the teams also scores games whose loser alone is penalised
    (Tennis: -0.01 for the rally's loser, 0 for its winner). With ``first_to`` N > 1 a
    match is the episodes of an area until a team has won N of them (first to 5 rallies);
    an episode cut by the step limit scores for neither.

    Returns:
        ``behavior`` (the game's name), ``matches``, ``first_to``, ``wins``, ``draws``,
        ``losses``, their rates, ``mean_return`` and ``std_return`` (the policy's team's
        return per match, the mean over its members of reward plus group reward) and
        ``sides``: the counts per side (``team=0``, ``team=1``) as ``[wins, draws, losses]``.

    Raises:
        ValueError: the env is not a two-team game (``team_behaviors``).
        RuntimeError: when ``max_env_steps`` pass before the matches end.
    """
    if matches < 1:
        raise ValueError(f"matches must be >= 1, got {matches}")
    if first_to < 1:
        raise ValueError(f"first_to must be >= 1, got {first_to}")
    names = team_behaviors(env)
    specs = env.behavior_specs
    tallies = []
    for side, count in ((0, (matches + 1) // 2), (1, matches // 2)):
        if not count:
            continue
        players = {names[side]: policy, names[1 - side]: opponent}
        tally = _MatchTally(count, side, first_to)
        env.reset()
        for _ in range(max_env_steps):
            for team, name in enumerate(names):
                decision, terminal = env.get_steps(name)
                check_steps(name, specs[name], decision, terminal)
                tally.add(team, env.match_of(name, decision.agent_id), decision,
                          env.match_of(name, terminal.agent_id), terminal)
                player = players[name]
                if len(terminal) and hasattr(player, "episode_ended"):
                    player.episode_ended(name, terminal.agent_id)
                if len(decision):
                    env.set_actions(name, player(name, decision))
            tally.close_matches()
            if tally.done:
                break
            env.step()
        else:
            raise RuntimeError(f"evaluation stopped after {max_env_steps} env steps before "
                               f"{count} matches ended")
        tallies.append(tally)
    outcomes = np.concatenate([np.asarray(t.outcomes[:t.matches], np.int64) for t in tallies])
    returns = np.concatenate([np.asarray(t.returns[:t.matches]) for t in tallies])
    counts = {key: int((outcomes == value).sum())
              for key, value in (("wins", 1), ("draws", 0), ("losses", -1))}
    from tftrainers.envs.unity.convert import behavior_base_name
    result: Dict[str, object] = {"behavior": behavior_base_name(names[0]),
                                 "matches": len(outcomes), "first_to": first_to, **counts}
    result.update({f"{key[:-1] if key != 'losses' else 'loss'}_rate": value / len(outcomes)
                   for key, value in counts.items()})
    result.update(mean_return=float(returns.mean()), std_return=float(returns.std()),
                  sides={f"team={t.side}": [t.outcomes[:t.matches].count(v) for v in (1, 0, -1)]
                         for t in tallies})
    return result
