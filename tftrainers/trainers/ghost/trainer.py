"""GhostTrainer: self-play around a PPO or POCA trainer (ML-Agents' GhostTrainer, better).

    trainer = GhostTrainer(create_trainer("Race", spec, settings, run_dir),
                           {0: "Race?team=0", 1: "Race?team=1"})
    for behavior in trainer.team_behaviors:           # one acting side per team
        manager = trainer.create_agent_manager(env, behavior)
        trainer.subscribe(manager)
    while not trainer.done:
        step_env(env, managers)
        trainer.advance()

One team learns at a time; the others act with frozen weights. What the wrapped trainer
sees is the learning team only: its trajectories and episode stats (so its steps, stats
and curriculum measures are the learning team's), relayed through one acting side
(``_LearningSide``); the frozen teams' trajectories are counted (ghost steps) and dropped.
The schedule (DESIGN §12; comparisons strict as ML-Agents'): a snapshot of the learner every
``save_steps`` trainer steps into a ring of ``window``; the learning team changes every
``team_change`` trainer steps (round robin over every self-play behavior's teams, one
learning in the whole run: ``GhostController``); opponents are drawn every ``swap_steps``
ghost steps and at each team change: the latest weights with probability
``play_against_latest_model_ratio``, else a snapshot.

Beyond ML-Agents:
- an opponent's new weights act only for episodes that begin after they arrive (each
  agent keeps the weights its episode began with: ``Actor(pin_episodes=True)``), so no
  match has two opponents and its result is credited to the one it was played against;
- a team change needs no env reset: the new learning team takes the learner's weights at
  once, and its episodes then running (begun by an opponent's weights) are not trained on
  nor counted; it works the same in env workers;
- ELO counts matches, not agents: the members of one group finish one match;
- the league (snapshots, their ratings, the learner's, the opponents, the learning team,
  the schedule's counters) is part of every checkpoint, so ``--resume`` continues it.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from tftrainers.acting import AgentManager, WeightUpdate
from tftrainers.processing import EpisodeStats, Trajectory
from tftrainers.stats import SELF_PLAY_ELO
from tftrainers.trainers.ghost.league import League, elo_change, match_result

#: The name of the league in a checkpoint (its state.json key and variables).
LEAGUE = "self_play"


class _LearningSide:
    """The wrapped trainer's one acting side: what the learning team acted (relayed by the
    GhostTrainer) in, the learner's weights out."""

    def __init__(self, ghost: "GhostTrainer"):
        self.ghost = ghost
        self.items: list = []
        self.queue = self

    def drain(self) -> list:
        items, self.items = self.items, []
        return items

    def set_weights(self, update: WeightUpdate) -> None:
        self.ghost._learner_weights(update.flat)

    def stop_recording(self) -> None:
        for _, manager in self.ghost.managers:
            manager.stop_recording()

    def state(self) -> None:
        """The teams' acting states ride in the league (``GhostTrainer.state``)."""
        return None

    def set_state(self, state) -> None:
        """Nothing: see ``state``."""


class _LeagueCheckpoint:
    """The league as a checkpoint part of the wrapped trainer (``Trainer.checkpoint_parts``):
    the weights in a variable, the rest in state.json."""

    def __init__(self, ghost: "GhostTrainer"):
        self.ghost = ghost
        self._module = None

    def trackables(self) -> dict:
        ghost = self.ghost
        if self._module is None:
            import tensorflow as tf
            self._module = tf.Module(name="self_play")
            rows = ghost.league.window + len(ghost.teams)
            self._module.weights = tf.Variable(
                tf.zeros([rows, len(ghost.latest)], tf.float32), trainable=False,
                name="league_weights")
        return {f"{LEAGUE}_league": self._module}

    def state(self) -> dict:
        ghost = self.ghost
        rows = [s if s is not None else np.zeros_like(ghost.latest)
                for s in ghost.league.snapshots]
        rows += [ghost.opponent_flat[team] for team in ghost.teams]
        self.trackables()
        self._module.weights.assign(np.stack(rows).astype(np.float32))
        return {**ghost.league.state(), "learning_team": ghost.learning_team,
                "opponents": {str(t): i for t, i in ghost.opponent_index.items()},
                "team_versions": {str(t): v for t, v in ghost.team_versions.items()},
                "ghost_step": ghost.ghost_step, "last_save": ghost.last_save,
                "last_swap": ghost.last_swap, "last_team_change": ghost.last_team_change,
                "acting": [manager.state() for _, manager in ghost.managers]}

    def restore_state(self, state: Optional[dict]) -> None:
        if state is None:  # a checkpoint of a run without self-play: a new league
            return
        ghost = self.ghost
        rows = np.asarray(self._module.weights)
        window = ghost.league.window
        ghost.league.restore(state, rows[:window])
        learning = state["learning_team"]
        ghost.learning_team = None if learning is None else int(learning)
        ghost.opponent_index = {int(t): int(i) for t, i in state["opponents"].items()}
        ghost.team_versions = {int(t): int(v) for t, v in state["team_versions"].items()}
        for k, team in enumerate(ghost.teams):
            ghost.opponent_flat[team] = np.array(rows[window + k], np.float32)
        for key in ("ghost_step", "last_save", "last_swap", "last_team_change"):
            setattr(ghost, key, int(state[key]))
        ghost._acting_states = list(state.get("acting") or [])
        for team in ghost.teams:
            if team != ghost.learning_team:
                ghost._send(team, ghost.opponent_flat[team], at_episode_start=True)


class GhostTrainer:
    """Self-play around ``wrapped`` (a PPO or POCA trainer of the behaviors' base name).

    Everything not defined here is the wrapped trainer's (``step``, ``done``, ``save``,
    ``stats``...): the runner drives a GhostTrainer as any trainer.

    Args:
        wrapped: the trainer of the learning team (its ``settings.self_play`` is the
            schedule).
        team_behaviors: team id -> the env behavior of that team (``Name?team=N``).
        controller: the run's ``GhostController`` when several behaviors play self-play
            (an asymmetric game); None: this trainer's teams take turns on their own.
    """

    _OWN = frozenset(("wrapped", "sp", "teams", "team_behaviors", "managers", "league",
                      "controller", "latest", "learning_team", "opponent_index", "opponent_flat",
                      "team_versions", "team_updates", "ghost_step", "last_save",
                      "last_swap", "last_team_change", "_side", "_clean", "_opponent_of",
                      "_ended", "_acting_states", "_team_of"))

    def __init__(self, wrapped, team_behaviors: Dict[int, str],
                 controller: Optional["GhostController"] = None):
        self.wrapped = wrapped
        self.sp = wrapped.settings.self_play
        self.teams: List[int] = sorted(team_behaviors)
        self.team_behaviors: List[str] = [team_behaviors[t] for t in self.teams]
        self._team_of = {team_behaviors[t]: t for t in self.teams}
        self.managers: List[Tuple[int, object]] = []  # (team, acting side)
        rng = np.random.default_rng(np.random.SeedSequence([int(wrapped.seed), 0x5e1f]))
        self.league = League(self.sp.window, self.sp.initial_elo, rng)
        self.controller = controller or GhostController()
        # The team of this behavior that learns; None while another behavior's does.
        self.learning_team: Optional[int] = self.controller.subscribe(self)
        self.team_versions = {t: 0 for t in self.teams}
        self.team_updates: Dict[int, WeightUpdate] = {}
        self.ghost_step = self.last_save = self.last_swap = self.last_team_change = 0
        self._clean: Optional[set] = None  # None: every learning agent's episode is the learner's
        self._opponent_of: Dict[tuple, int] = {}  # learning agent -> opponent of its episode
        self._ended: List[tuple] = []
        self._acting_states: List[dict] = []
        self.latest = np.asarray(wrapped.acting_weights(), np.float32)
        # As ML-Agents: a snapshot of the first weights; the opponents start with them.
        self.league.save(self.latest)
        self.opponent_index = {t: 0 for t in self.teams if t != self.learning_team}
        self.opponent_flat = {t: self.latest for t in self.teams}
        self._side = _LearningSide(self)
        wrapped.subscribe(self._side)  # sends the learner's weights to the learning team
        for team in self.teams:
            if team != self.learning_team:
                self._send(team, self.latest, at_episode_start=True)
        wrapped.checkpoint_parts[LEAGUE] = _LeagueCheckpoint(self)

    def __getattr__(self, name):
        return getattr(self.__dict__["wrapped"], name)

    def __setattr__(self, name, value):
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:  # the run's hooks (reward_buffer, run_state) are the wrapped trainer's
            setattr(self.wrapped, name, value)

    @property
    def elo(self) -> float:
        """The learner's current rating."""
        return self.league.elo

    def initialize_from(self, run_dir: str) -> None:
        """``--initialize-from``: the league starts from the copied weights (its first
        snapshot and the opponents' weights)."""
        self.wrapped.initialize_from(run_dir)  # publishes them: ``latest``
        self.league.snapshots[0] = np.array(self.latest, copy=True)
        for team in self.teams:
            self.opponent_flat[team] = self.latest
            if team != self.learning_team:
                self._send(team, self.latest, at_episode_start=True)

    # --- the acting side ------------------------------------------------------------------
    def create_agent_manager(self, env, behavior: str) -> AgentManager:
        """The acting side of team ``behavior``: the wrapped trainer's act graph, its own
        noise, each agent acting with the weights its episode began with."""
        team = self._team_of[behavior]
        actor = self.wrapped.create_actor()
        actor.rng = np.random.default_rng(self._team_seed(team))
        actor.pin_episodes, actor.version = True, 0  # weights come with ``subscribe``
        return AgentManager(behavior, self.wrapped.spec, actor,
                            self.wrapped.settings.time_horizon)

    def acting_setups(self) -> dict:
        """What env workers need to act for every team (``Trainer.acting_setup`` per team).

        No steps-per-version budget: a worker that waited for the learner's next weights
        could wait for ever after a team change, when the learning team's episodes then
        running are not trained on (long episodes would use up the budget); trajectories of
        weights two versions old are still dropped by the pool."""
        setup = self.wrapped.acting_setup()
        return {behavior: setup._replace(seed=self._team_seed(team),
                                         update=self.team_updates[team], pin_episodes=True,
                                         steps_per_version=0)
                for team, behavior in zip(self.teams, self.team_behaviors)}

    def _team_seed(self, team: int) -> int:
        return int(np.random.SeedSequence([int(self.wrapped.seed), int(team) + 1])
                   .generate_state(1)[0] & 0x7FFFFFFF)

    def subscribe(self, manager) -> None:
        """Takes ``manager`` (an acting side of one team's behavior) from now on."""
        team = self._team_of[manager.behavior_name]
        index = len(self.managers)
        self.managers.append((team, manager))
        manager.set_weights(self.team_updates[team])
        if index < len(self._acting_states) and self._acting_states[index]:
            manager.set_state(self._acting_states[index])
        if self.wrapped.done:
            manager.stop_recording()

    def _send(self, team: int, flat: np.ndarray, at_episode_start: bool) -> None:
        self.team_versions[team] += 1
        update = WeightUpdate(self.team_versions[team], flat, at_episode_start)
        self.team_updates[team] = update
        for t, manager in self.managers:
            if t == team:
                manager.set_weights(update)

    def _learner_weights(self, flat: np.ndarray) -> None:
        """The wrapped trainer published: the learning team acts with them at once."""
        self.latest = np.asarray(flat, np.float32)
        if self.learning_team is not None:
            self._send(self.learning_team, self.latest, at_episode_start=False)

    # --- the loop -------------------------------------------------------------------------
    def advance(self) -> None:
        """Relays the learning team's experience, lets the wrapped trainer learn, then
        snapshots, changes the learning team and swaps opponents when due."""
        wrapped = self.wrapped
        if not wrapped.done:
            self._collect()
        wrapped.advance()
        if wrapped.done:
            if self.learning_team is not None:
                self.controller.change()  # another behavior's turn, if one goes on
            return
        sp = self.sp
        if (self.learning_team is not None and self.controller.teams > 1
                and wrapped.step - self.last_team_change > sp.team_change):
            self.controller.change()  # every behavior's opponents are drawn again
        if wrapped.step - self.last_save > sp.save_steps:
            self.league.save(self.latest)
            self.last_save = wrapped.step
        if self.ghost_step - self.last_swap > sp.swap_steps:
            self._swap()
        for key in self._ended:  # their next episode plays the opponent drawn by now
            self._opponent_of[key] = self._current_opponent()
        self._ended = []

    def _current_opponent(self) -> int:
        """The opponent ELO rates against (with several opponent teams, the last drawn, as
        ML-Agents: ELO is meant for two teams)."""
        opponents = [i for t, i in sorted(self.opponent_index.items())
                     if t != self.learning_team]
        return opponents[-1] if opponents else -1

    def _collect(self) -> None:
        """Moves the learning team's queue items to the wrapped trainer's side queue, each
        through this wrapper's handler for its kind (``_COLLECT``; kinds without one pass
        as they are); the frozen teams' items are counted as ghost steps and dropped."""
        learning = self.learning_team
        for k, (team, manager) in enumerate(self.managers):
            items = manager.queue.drain()
            if team != learning:  # frozen: counted, not trained on
                self.ghost_step += sum(len(i) for i in items if isinstance(i, Trajectory))
                continue
            matches = set()
            for item in items:
                handler = self._COLLECT.get(type(item))
                item = handler(self, k, item, matches) if handler else item
                if item is not None:
                    self._side.items.append(item)

    def _collect_trajectory(self, k: int, item: Trajectory, matches: set):
        key = (k, int(item.agent_id))
        if self._clean is not None and key not in self._clean:
            return None  # its episode began before this team learned
        if item.done and (item.group_done or not item.group_id[-1]):
            group = int(item.group_id[-1])
            match = (k, "group", group) if group else key
            if match not in matches:  # a group plays one match
                matches.add(match)
                self._rate(key, float(item.rewards[-1] + item.group_reward[-1]))
        return item

    def _collect_episodes(self, k: int, item: EpisodeStats, matches: set):
        keys = [(k, a) for a in item.agent_id.tolist()]
        self._ended.extend(keys)
        if self._clean is not None:
            keep = np.array([key in self._clean for key in keys], bool)
            self._clean.update(keys)
            if not keep.all():
                item = EpisodeStats(*(field[keep] for field in item))
                if not len(item):
                    return None
        return item

    _COLLECT = {Trajectory: _collect_trajectory, EpisodeStats: _collect_episodes}

    def _rate(self, key: tuple, final_reward: float) -> None:
        result = match_result(final_reward)
        opposing = self._opposing()
        if opposing is None:
            self.league.record(result, self._opponent_of.get(key, self._current_opponent()))
        else:  # an asymmetric game: the opponent is a snapshot of the other behavior
            slot = opposing._current_opponent()
            change = elo_change(self.league.elo, opposing.league.elos[slot], result)
            self.league.elos[-1] += change
            opposing.league.elos[slot] -= change
        self.wrapped.stats.add_stat(SELF_PLAY_ELO, self.league.elo)

    def _opposing(self) -> Optional["GhostTrainer"]:
        """The other behavior's trainer when this one has no opponent team of its own."""
        if any(team != self.learning_team for team in self.teams):
            return None
        return next((g for g, _ in self.controller.order if g is not self), None)

    def set_learning_team(self, team: Optional[int]) -> None:
        """The controller's choice (None: another behavior learns). The new learning team
        acts with the learner's weights at once, and its running episodes (begun by an
        opponent's weights) are neither trained on nor counted; the former one becomes an
        opponent. Every opponent team draws new weights (ML-Agents swaps on a change)."""
        old = self.learning_team
        if old is not None and old != team:
            self.opponent_index[old] = -1
            self.opponent_flat[old] = self.latest
        self.learning_team = team
        self.last_team_change = self.wrapped.step
        if team is not None and team != old:
            self.opponent_index.pop(team, None)
            self._clean, self._opponent_of, self._ended = set(), {}, []
            self._send(team, self.latest, at_episode_start=False)
        self._swap()

    def _swap(self) -> None:
        for team in self.teams:
            if team == self.learning_team:
                continue
            index, flat = self.league.draw(self.latest, self.sp.play_against_latest_model_ratio)
            self.opponent_index[team] = index
            self.opponent_flat[team] = flat
            self._send(team, flat, at_episode_start=True)
        self.last_swap = self.ghost_step


class GhostController:
    """Which behavior's team learns, across a run's GhostTrainers (ML-Agents'
    GhostController): the teams in the order they subscribed (each trainer's in team
    order), the first learning first, then round robin, one at a time; the learning
    trainer asks for the change when its ``team_change`` steps are up."""

    def __init__(self):
        self.order: List[Tuple["GhostTrainer", int]] = []
        self.at = 0

    @property
    def teams(self) -> int:
        return len(self.order)

    def subscribe(self, ghost: "GhostTrainer") -> Optional[int]:
        """Adds ``ghost``'s teams; returns its learning team (None: another's learns)."""
        first = not self.order
        self.order += [(ghost, team) for team in ghost.teams]
        return ghost.teams[0] if first else None

    def change(self) -> None:
        """The next team (round robin) of a trainer not yet done learns."""
        for step in range(1, len(self.order) + 1):
            at = (self.at + step) % len(self.order)
            if not self.order[at][0].done:
                if at != self.at:
                    self.at = at
                    self._tell()
                return

    def _tell(self) -> None:
        learner, team = self.order[self.at]
        for ghost in dict.fromkeys(g for g, _ in self.order):
            ghost.set_learning_team(team if ghost is learner else None)

    def restored(self) -> None:
        """After ``--resume``: the first team a restored checkpoint says learns goes on
        learning (the others are told they do not)."""
        for k, (ghost, team) in enumerate(self.order):
            if ghost.learning_team == team:
                self.at = k
                break
        learner, team = self.order[self.at]
        for ghost in dict.fromkeys(g for g, _ in self.order):
            if ghost.learning_team != (team if ghost is learner else None):
                ghost.set_learning_team(team if ghost is learner else None)


__all__ = ["GhostController", "GhostTrainer", "LEAGUE"]
