"""Self-play (trainers/ghost): the league's known answers, the schedule, ELO per match,
episode-boundary swaps in the actor, bad settings, ML-Agents' files, the league in
checkpoints, and a two-team game learned against snapshots (tests/trainers/race_env.py)."""
import copy
import os

import numpy as np
import pytest

from tftrainers.acting import WeightUpdate
from tftrainers.acting.actor import Actor
from tftrainers.envs import ActionSpec, BehaviorSpec, DecisionSteps, ObservationSpec
from tftrainers.processing import EpisodeStats, TrajectoryQueue
from tftrainers.processing.trajectory import LogProbs, Trajectory
from tftrainers.envs.base import ActionTuple
from tftrainers.settings import (ConfigError, SelfPlaySettings, TrainerSettings,
                                 load_run_options)
from tftrainers.stats import SELF_PLAY_ELO
from tftrainers.trainers.ghost.league import League, elo_change, expected_score, match_result
from tftrainers.trainers.ghost.teams import check_self_play, self_play_teams
from tftrainers.trainers.ghost.trainer import GhostTrainer

# --------------------------------------------------------------------------- the league


def test_snapshots_fill_a_ring_of_window_with_the_learners_rating():
    league = League(window=3, initial_elo=1000.0, rng=np.random.default_rng(0))
    for k in range(5):
        league.elos[-1] = 1000.0 + k  # the learner's rating when snapshot k is taken
        league.save(np.full(2, k, np.float32))
    assert len(league) == 3 and league.count == 5
    # slots 0, 1, 2 took snapshots 0, 1, 2; then 3 replaced 0 and 4 replaced 1
    assert [int(s[0]) for s in league.snapshots] == [3, 4, 2]
    assert league.elos.tolist() == [1003.0, 1004.0, 1002.0, 1004.0]


def test_opponents_are_the_latest_with_the_ratio_else_a_snapshot():
    latest = np.full(2, -1.0, np.float32)
    league = League(window=4, initial_elo=1200.0, rng=np.random.default_rng(1))
    for k in range(4):
        league.save(np.full(2, k, np.float32))
    assert all(league.draw(latest, 1.0)[0] == -1 for _ in range(50))
    drawn = [league.draw(latest, 0.0)[0] for _ in range(400)]
    assert set(drawn) == {0, 1, 2, 3} and min(np.bincount(drawn)) > 60  # uniform
    mixed = [league.draw(latest, 0.5)[0] for _ in range(1000)]
    assert 430 < sum(i == -1 for i in mixed) < 570
    index, flat = league.draw(latest, 0.0)
    assert flat[0] == index


def test_elo_known_answers():
    assert expected_score(1200, 1200) == 0.5
    assert expected_score(1400, 1200) == pytest.approx(0.759747, abs=1e-6)
    # K = 1 as ML-Agents' code: a win at equal ratings is worth half a point
    assert elo_change(1200, 1200, 1.0) == 0.5
    assert elo_change(1400, 1200, 0.0) == pytest.approx(-0.759747, abs=1e-6)
    assert elo_change(1200, 1400, 0.5) == pytest.approx(0.259747, abs=1e-6)
    assert [match_result(r) for r in (2.0, 0.3, 0.0, -0.1)] == [1.0, 1.0, 0.5, 0.0]
    league = League(window=2, initial_elo=1200.0, rng=np.random.default_rng(0))
    league.save(np.zeros(1))
    assert league.record(1.0, 0) == 0.5
    assert league.elos.tolist() == [1199.5, 1200.0, 1200.5]
    league.record(1.0, -1)  # against the latest weights: its own rating, nothing moves
    assert league.elo == 1200.5


# ------------------------------------------------------------------- a GhostTrainer, no TF


class FakeManager:
    def __init__(self, name):
        self.behavior_name = name
        self.queue = TrajectoryQueue(name)
        self.updates = []

    def set_weights(self, update):
        self.updates.append(update)

    def stop_recording(self):
        pass

    def state(self):
        return None

    def set_state(self, state):
        pass


class FakeStats:
    def __init__(self):
        self.values = []

    def add_stat(self, key, value):
        self.values.append((key, value))


class FakeTrainer:
    """What a GhostTrainer uses of the trainer it wraps: counts the steps it drains."""

    def __init__(self, max_steps=10**6, **self_play):
        self.settings = TrainerSettings(max_steps=max_steps,
                                        self_play=SelfPlaySettings(**self_play))
        self.seed, self.step, self.version = 0, 0, 0
        self.managers, self.checkpoint_parts, self.received = [], {}, []
        self.stats = FakeStats()

    done = property(lambda self: self.step >= self.settings.max_steps)

    def acting_weights(self):
        return np.zeros(3, np.float32)

    def subscribe(self, manager):
        self.managers.append(manager)
        manager.set_weights(WeightUpdate(self.version, self.acting_weights()))

    def advance(self):
        for manager in self.managers:
            for item in manager.queue.drain():
                self.received.append(item)
                if isinstance(item, Trajectory):
                    self.step += len(item)


def trajectory(agent_id, length=4, done=False, reward=0.0, group=0, group_reward=0.0):
    return Trajectory(
        obs=[np.zeros((length, 1), np.float32)], next_obs=[np.zeros(1, np.float32)],
        actions=ActionTuple(np.zeros((length, 0), np.float32), np.zeros((length, 1), np.int32)),
        log_probs=LogProbs(np.zeros((length, 0), np.float32), np.zeros((length, 1), np.float32)),
        action_mask=np.ones((length, 2), np.float32),
        rewards=np.r_[np.zeros(length - 1), reward].astype(np.float32), values={}, memory=None,
        group_id=np.full(length, group, np.int32),
        group_reward=np.r_[np.zeros(length - 1), group_reward].astype(np.float32),
        done=done, interrupted=False, agent_id=agent_id, group_done=done)


def episode(*agent_ids):
    n = len(agent_ids)
    return EpisodeStats(np.array(agent_ids, np.int64), np.zeros(n, np.float32),
                        np.zeros(n, np.float32), np.full(n, 4), np.zeros(n, bool),
                        np.ones(n, bool))


def ghost(**self_play):
    wrapped = FakeTrainer(**self_play)
    trainer = GhostTrainer(wrapped, {0: "Race?team=0", 1: "Race?team=1"})
    managers = [FakeManager("Race?team=0"), FakeManager("Race?team=1")]
    for manager in managers:
        trainer.subscribe(manager)
    return trainer, wrapped, managers


def test_teams_come_from_the_behavior_names():
    sp, plain = TrainerSettings(self_play=SelfPlaySettings()), TrainerSettings()
    settings = {"Race?team=0": sp, "Race?team=1": sp, "Goalie": sp, "Ball": plain}
    assert self_play_teams(settings) == {"Race": {0: "Race?team=0", 1: "Race?team=1"},
                                         "Goalie": {0: "Goalie"}}


def test_snapshot_swap_and_team_change_schedule():
    """save_steps 10 (trainer steps), swap_steps 15 (ghost steps), team_change 40: each
    advance drains a 4-step trajectory of each team."""
    trainer, wrapped, (team0, team1) = ghost(save_steps=10, swap_steps=15, team_change=40,
                                             window=3, play_against_latest_model_ratio=0.0)
    events = []
    for k in range(1, 16):
        for manager in (team0, team1):
            manager.queue.put(trajectory(agent_id=0))
        before = (len(team0.updates), len(team1.updates), trainer.league.count)
        trainer.advance()
        for name, manager, n in (("team0", team0, before[0]), ("team1", team1, before[1])):
            for update in manager.updates[n:]:
                events.append((k, name, "swap" if update.at_episode_start else "learner"))
        if trainer.league.count > before[2]:
            events.append((k, "snapshot"))
    # steps of the learning team: 4k; ghost steps (the other team's): 4k.
    # snapshots when step - last > 10: k = 3 (12), 6, 9; swaps when ghost - last > 15:
    # k = 4 (16), 8 (32); the team changes when step - last > 40: k = 11 (44): team 0 is
    # an opponent (a swap) and team 1 learns (the learner's weights at once). Team 1's
    # episode began before it learned: not trained on, so the trainer's step stays 44 (no
    # more snapshots) while ghost steps go on: the next swap at 44 + 16 = 60, k = 15.
    assert events == [(3, "snapshot"), (4, "team1", "swap"), (6, "snapshot"),
                      (8, "team1", "swap"), (9, "snapshot"), (11, "team0", "swap"),
                      (11, "team1", "learner"), (15, "team0", "swap")]
    assert trainer.learning_team == 1 and trainer.league.count == 4 and len(trainer.league) == 3
    assert wrapped.step == 44 and trainer.ghost_step == 60
    assert [u.version for u in team1.updates] == [1, 2, 3, 4]  # per team, growing


def test_trajectories_of_an_episode_begun_before_the_team_learned_are_dropped():
    trainer, wrapped, (team0, team1) = ghost(save_steps=100, swap_steps=100, team_change=3)
    team0.queue.put(trajectory(agent_id=0))
    trainer.advance()  # 4 > 3: team 1 learns
    assert trainer.learning_team == 1
    team1.queue.put(trajectory(agent_id=7))                       # its episode began before
    team1.queue.put(trajectory(agent_id=7, done=True, reward=1.0))
    team1.queue.put(episode(7))                                  # ... and ends here
    team1.queue.put(trajectory(agent_id=7))                       # a new one: the learner's
    received = len(wrapped.received)
    trainer.advance()
    new = wrapped.received[received:]
    assert [type(i).__name__ for i in new] == ["Trajectory"] and wrapped.step == 8
    assert not [v for k, v in wrapped.stats.values if k == SELF_PLAY_ELO]  # not rated


def test_elo_per_match_two_teams_and_a_group_of_two():
    trainer, wrapped, (team0, team1) = ghost(save_steps=10**5, swap_steps=10**5,
                                             team_change=10**5)
    team0.queue.put(trajectory(agent_id=0, done=True, reward=1.0))   # a win vs snapshot 0
    trainer.advance()
    assert trainer.elo == 1200.5 and trainer.league.elos[0] == 1199.5
    team0.queue.put(trajectory(agent_id=1, done=True, reward=-1.0))  # a loss
    trainer.advance()
    # E = 1 / (1 + 10^((1199.5 - 1200.5) / 400)) = 0.5014390
    assert trainer.elo == pytest.approx(1200.5 - 0.5014390, abs=1e-6)
    before = trainer.elo
    # two members of one group finish one match (group reward +1): it counts once
    team0.queue.put(trajectory(agent_id=2, done=True, group=5, group_reward=1.0))
    team0.queue.put(trajectory(agent_id=3, done=True, group=5, group_reward=1.0))
    trainer.advance()
    opponent = 1200.0 - 0.5 + 0.5014390
    assert trainer.elo == pytest.approx(before + 1 - expected_score(before, opponent),
                                        abs=1e-6)
    elos = [v for k, v in wrapped.stats.values if k == SELF_PLAY_ELO]
    assert len(elos) == 3 and elos[-1] == trainer.elo
    # the opponent team's trajectories are not rated nor trained on
    team1.queue.put(trajectory(agent_id=0, done=True, reward=1.0))
    steps = wrapped.step
    trainer.advance()
    assert wrapped.step == steps and trainer.ghost_step == 4


def test_one_team_learns_at_a_time_across_behaviors():
    """An asymmetric game: Striker?team=0 against Goalie?team=1, two trainers, one
    controller; the first learns first, and hands over after its team_change steps."""
    from tftrainers.trainers.ghost.trainer import GhostController
    controller = GhostController()
    sides = {}
    for name, team in (("Striker", 0), ("Goalie", 1)):
        wrapped = FakeTrainer(save_steps=100, swap_steps=100, team_change=10)
        trainer = GhostTrainer(wrapped, {team: f"{name}?team={team}"}, controller)
        manager = FakeManager(f"{name}?team={team}")
        trainer.subscribe(manager)
        sides[name] = (trainer, wrapped, manager)
    striker, goalie = sides["Striker"][0], sides["Goalie"][0]
    assert (striker.learning_team, goalie.learning_team) == (0, None)
    learned = []
    for k in range(8):
        for trainer, wrapped, manager in sides.values():
            manager.queue.put(trajectory(agent_id=0, length=4, done=True))
            manager.queue.put(episode(0))
        for trainer, _, _ in sides.values():
            trainer.advance()
        learned.append((sides["Striker"][1].step, sides["Goalie"][1].step))
    # Striker learns until 12 > 10 steps, then Goalie (its episode then running began as
    # an opponent: dropped), then Striker again (the same) after Goalie's 12 steps.
    assert learned == [(4, 0), (8, 0), (12, 0), (12, 4), (12, 8), (12, 12), (12, 12),
                       (16, 12)]
    assert (striker.learning_team, goalie.learning_team) == (0, None)
    # while one did not learn it was an opponent: its steps were ghost steps
    assert striker.ghost_step == 3 * 4 and goalie.ghost_step == 4 * 4
    # a match is rated against the other behavior's snapshot it played
    sides["Striker"][2].queue.put(trajectory(agent_id=0, done=True, reward=1.0))
    striker.advance()
    slot = goalie._current_opponent()
    assert striker.elo == 1200.5 and goalie.league.elos[slot] == 1199.5


def test_a_behavior_that_is_done_hands_the_turn_over():
    from tftrainers.trainers.ghost.trainer import GhostController
    controller = GhostController()
    sides = []
    for name, team, max_steps in (("Striker", 0, 8), ("Goalie", 1, 10**6)):
        wrapped = FakeTrainer(max_steps=max_steps, save_steps=100, swap_steps=100,
                              team_change=100)
        trainer = GhostTrainer(wrapped, {team: f"{name}?team={team}"}, controller)
        trainer.subscribe(FakeManager(f"{name}?team={team}"))
        sides.append(trainer)
    striker, goalie = sides
    for _ in range(2):
        striker.managers[0][1].queue.put(trajectory(agent_id=0))
        striker.advance()
    assert striker.done and (striker.learning_team, goalie.learning_team) == (None, 1)


# --------------------------------------------------------------- the actor, two policies


class RunByWeights:
    """An act call whose discrete action is the first weight: shows which weights acted."""

    def __init__(self):
        self.flat = np.zeros(1, np.float32)
        self.calls = []

    def set_weights(self, flat):
        self.flat = flat

    def __call__(self, packed):
        self.calls.append(len(packed))
        out = np.zeros((len(packed), 3), np.float32)  # discrete action, log prob, entropy
        out[:, 0] = self.flat[0]
        return out


def test_an_opponent_swap_acts_only_for_episodes_that_begin_after_it():
    spec = BehaviorSpec((ObservationSpec((1,), "x"),), ActionSpec.create_discrete((9,)))
    run = RunByWeights()
    actor = Actor(spec, 0, run, pin_episodes=True)
    actor.set_weights(WeightUpdate(1, np.array([1.0], np.float32), True))

    def act(*ids):
        ids = np.array(ids, np.int32)
        steps = DecisionSteps([np.zeros((len(ids), 1), np.float32)],
                              np.zeros(len(ids), np.float32), ids, [np.zeros((len(ids), 9), bool)])
        return actor.act(steps)[1].discrete[:, 0].tolist()

    assert act(0, 1, 2) == [1, 1, 1]
    actor.set_weights(WeightUpdate(2, np.array([2.0], np.float32), True))  # a swap
    assert act(0, 1, 2) == [1, 1, 1]            # mid-episode: no change
    actor.episode_ended(np.array([1]))
    run.calls.clear()
    assert act(0, 1, 2, 3) == [1, 2, 1, 2]      # 1 began again, 3 is new
    assert sorted(run.calls) == [2, 2]          # one call per weights, batched
    assert actor.last_versions.tolist() == [1, 2, 1, 2]
    actor.episode_ended(np.array([0, 2]))
    assert act(0, 1, 2, 3) == [2, 2, 2, 2]
    # the learner's own updates (not at_episode_start) act at once for every agent
    actor.set_weights(WeightUpdate(3, np.array([3.0], np.float32), False))
    assert act(0, 1, 2, 3) == [3, 3, 3, 3]


# ------------------------------------------------------------------------------ settings

TENNIS = """
behaviors:
  Tennis:
    trainer_type: ppo
    hyperparameters:
      batch_size: 2048
      buffer_size: 20480
      learning_rate: 0.0003
      beta: 0.005
      epsilon: 0.2
      lambd: 0.95
      num_epoch: 3
      learning_rate_schedule: constant
    network_settings:
      normalize: true
      hidden_units: 256
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 50000000
    time_horizon: 1000
    summary_freq: 10000
    threaded: true
    self_play:
      save_steps: 50000
      team_change: 100000
      swap_steps: 2000
      window: 10
      play_against_latest_model_ratio: 0.5
      initial_elo: 1200.0
"""

# ML-Agents' config/poca/SoccerTwos.yaml
SOCCER_TWOS = (TENNIS.replace("Tennis:", "SoccerTwos:").replace("ppo", "poca")
               .replace("normalize: true", "normalize: false").replace("256", "512")
               .replace("threaded: true", "threaded: false")
               .replace("team_change: 100000", "team_change: 200000"))


@pytest.mark.parametrize("text,name,team_change", [(TENNIS, "Tennis", 100000),
                                                   (SOCCER_TWOS, "SoccerTwos", 200000)])
def test_mlagents_self_play_files_resolve_without_a_note(tmp_path, text, name, team_change):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    options = load_run_options(str(path))
    assert not [n for n in options.notes if "self_play" in n]
    settings = {f"{name}?team={t}": options.settings_for(f"{name}?team={t}") for t in (0, 1)}
    sp = settings[f"{name}?team=0"].self_play
    assert (sp.save_steps, sp.team_change, sp.swap_steps, sp.window,
            sp.play_against_latest_model_ratio, sp.initial_elo) == (
                50000, team_change, 2000, 10, 0.5, 1200.0)
    spec = BehaviorSpec((ObservationSpec((3,), "x"),), ActionSpec.create_discrete((3,)))
    check_self_play(settings, dict.fromkeys(settings, spec), "onnxruntime")
    assert self_play_teams(settings) == {name: {0: f"{name}?team=0", 1: f"{name}?team=1"}}


@pytest.mark.parametrize("text", [TENNIS, SOCCER_TWOS])
def test_mlagents_self_play_files_dry_run_without_a_note(tmp_path, capsys, text):
    from tftrainers.cli import learn_main
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert learn_main([str(path), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "self_play:" in out and "[NOTE]" not in err and "self_play" not in err


@pytest.mark.parametrize("text,env_id,name", [(TENNIS, "builtin:Tennis", "Tennis"),
                                               (SOCCER_TWOS, "builtin:SoccerTwos", "SoccerTwos")])
def test_mlagents_self_play_files_resolve_against_the_builtins(tmp_path, capsys, text, env_id,
                                                               name):
    """ML-Agents' Tennis and SoccerTwos files, unchanged, on our built-ins: the env's own
    behavior names find the file's settings, its two teams are one self-play league, its
    real specs pass the self-play checks, and --dry-run with --env has no [NOTE]."""
    from tftrainers.cli import learn_main
    from tftrainers.envs import make
    path = tmp_path / "c.yaml"
    path.write_text(text)
    options = load_run_options(str(path))
    with make(env_id, seed=0, num_areas=1) as env:
        specs = dict(env.behavior_specs)
    assert sorted(specs) == [f"{name}?team=0", f"{name}?team=1"]
    settings = {n: options.settings_for(n) for n in specs}
    assert all(s.self_play is not None for s in settings.values())
    check_self_play(settings, specs, options.tf_settings.act_runtime)
    assert self_play_teams(settings) == {name: {0: f"{name}?team=0", 1: f"{name}?team=1"}}
    assert learn_main([str(path), "--env", env_id, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert f"env_path: {env_id}" in out and "self_play:" in out
    assert "[NOTE]" not in err and "self_play" not in err


@pytest.mark.parametrize("line,expected", [
    ("play_against_latest_model_ratio: 1.5", "self_play.play_against_latest_model_ratio: "),
    ("play_against_latest_model_ratio: -0.1", "self_play.play_against_latest_model_ratio: "),
    ("window: 0", "self_play.window: "),
    ("save_steps: -5", "self_play.save_steps: "),
    ("swap_steps: 0", "self_play.swap_steps: "),
    ("team_change: -1", "self_play.team_change: "),
])
def test_bad_self_play_values_are_one_line(tmp_path, line, expected):
    path = tmp_path / "c.yaml"
    path.write_text(f"behaviors:\n  Race:\n    self_play:\n      {line}\n")
    with pytest.raises(ConfigError) as info:
        load_run_options(str(path))
    message = str(info.value)
    assert "\n" not in message and expected in message
    assert line.split(": ")[1] in message and "allowed" in message


def test_what_self_play_needs_is_checked_in_one_line():
    sp = TrainerSettings(self_play=SelfPlaySettings())
    spec = BehaviorSpec((ObservationSpec((3,), "x"),), ActionSpec.create_discrete((3,)))
    other = BehaviorSpec((ObservationSpec((4,), "x"),), ActionSpec.create_discrete((3,)))
    teams = {"Race?team=0": sp, "Race?team=1": sp}
    with pytest.raises(ConfigError, match=r"tf_settings.act_runtime: tensorflow cannot act "
                                          r"for behaviors.Race.self_play"):
        check_self_play(teams, dict.fromkeys(teams, spec), "tensorflow")
    with pytest.raises(ConfigError, match=r"Race\?team=1 differs from Race\?team=0"):
        check_self_play(teams, {"Race?team=0": spec, "Race?team=1": other}, "onnxruntime")
    bc = TrainerSettings(trainer_type="bc", self_play=SelfPlaySettings())
    with pytest.raises(ConfigError, match=r"behaviors.Race.self_play: not available with "
                                          r"trainer_type bc; allowed with: ppo, poca"):
        check_self_play({"Race?team=0": bc}, {"Race?team=0": spec}, "onnxruntime")


# ------------------------------------------------------------------ with TensorFlow: runs


def test_self_play_beats_a_random_opponent_and_swaps_only_between_episodes(tmp_path,
                                                                          monkeypatch):
    import tftrainers
    from tftrainers.acting import AgentManager
    from tests.trainers.race_env import CONFIG, Race, race_results, random_policy
    flags, seen = {}, {}  # (behavior, version) -> at_episode_start; acting log per behavior
    set_weights, step = AgentManager.set_weights, AgentManager.step

    def recording_set_weights(self, update):
        flags[(self.behavior_name, update.version)] = update.at_episode_start
        set_weights(self, update)

    def recording_step(self, decision, terminal):
        actions = step(self, decision, terminal)
        log = seen.setdefault(self.behavior_name, [])
        log.append((terminal.agent_id.copy(), decision.agent_id.copy(),
                    self.actor.last_versions.copy() if len(decision) else None))
        return actions
    monkeypatch.setattr(AgentManager, "set_weights", recording_set_weights)
    monkeypatch.setattr(AgentManager, "step", recording_step)
    run = tftrainers.train(copy.deepcopy(CONFIG), env=lambda: Race(seed=3, num_areas=16),
                           run_id="race", results_dir=str(tmp_path), seed=3, verbose=0)
    elo = np.asarray(run.stats("Race", as_frame=False)[SELF_PLAY_ELO])
    assert len(elo) >= 2 and elo[-1] > 1200.0 + 20  # rated matches, the learner improving
    # Every agent acts with the weights its episode began with, unless its team is
    # learning (the learner's updates act at once); swaps did happen between episodes.
    swaps_between = 0
    for behavior, log in seen.items():
        running = {}
        for ended, ids, versions in log:
            for a in ended.tolist():
                running.pop(a, None)
            if versions is None:
                continue
            for a, v in zip(ids.tolist(), versions.tolist()):
                if a in running and running[a] != v:
                    assert not flags[(behavior, v)], (behavior, a, running[a], v)
                elif a not in running and flags.get((behavior, v)):
                    swaps_between += 1
                running[a] = v
    assert swaps_between > 0
    policy = tftrainers.load_policy(os.path.join(run.path, "Race.onnx"))
    wins, draws, losses = race_results(policy, random_policy(1))
    base_wins, _, base_losses = race_results(random_policy(2), random_policy(1))
    assert wins >= 0.8 * 400 and losses <= 0.05 * 400, (wins, draws, losses)
    assert base_wins < 0.5 * 400  # random against random: no such margin


@pytest.mark.parametrize("trainer_type", ["ppo", "poca"])
def test_the_league_is_restored_on_resume(tmp_path, trainer_type):
    from tftrainers.trainers.registry import create_trainer
    from tests.trainers.race_env import CONFIG, Race
    settings_dict = copy.deepcopy(CONFIG)["behaviors"]["Race"]
    settings_dict["trainer_type"] = trainer_type
    path = tmp_path / "c.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"behaviors": {"Race": settings_dict}}))
    settings = load_run_options(str(path)).settings_for("Race?team=0")
    spec = Race().spec
    teams = {0: "Race?team=0", 1: "Race?team=1"}

    def make():
        wrapped = create_trainer("Race", spec, settings, str(tmp_path / "run"), seed=5)
        return GhostTrainer(wrapped, teams)

    first = make()
    rng = np.random.default_rng(0)
    for k in range(7):  # a ring of 5: snapshots 5, 6 replaced 0, 1
        first._learner_weights(rng.normal(size=len(first.latest)).astype(np.float32))
        first.league.save(first.latest)
        first.league.record(float(k % 2), k % 5)
    first.controller.change()
    first._swap()
    first.ghost_step, first.last_swap = 1234, 1200
    first.wrapped.step = 1500
    first.save()
    second = make()
    assert second.league.count == 1 and second.learning_team == 0
    second.restore_latest()
    assert second.league.count == 8 and second.learning_team == 1
    assert np.array_equal(second.league.elos, first.league.elos)
    for a, b in zip(first.league.snapshots, second.league.snapshots):
        assert np.array_equal(a, b)
    assert second.opponent_index == first.opponent_index
    assert np.array_equal(second.opponent_flat[0], first.opponent_flat[0])
    assert (second.ghost_step, second.last_swap, second.last_team_change) == (1234, 1200, 0)
    assert np.array_equal(second.latest, first.wrapped.acting_weights())  # the policy's
    # the draws go on as the first league's would have
    assert second.league.draw(second.latest, 0.5)[0] == first.league.draw(first.latest, 0.5)[0]


def test_opponents_act_inside_env_workers(tmp_path):
    import tftrainers
    from tests.trainers.race_env import CONFIG
    config = copy.deepcopy(CONFIG)
    config["behaviors"]["Race"].update(max_steps=700, summary_freq=600)
    config["behaviors"]["Race"]["self_play"].update(save_steps=300, swap_steps=200)
    config["env_settings"] = {"env_path": "python:tests.trainers.race_env:Race",
                              "num_envs": 2, "workers": "process"}
    run = tftrainers.train(config, run_id="race_workers", results_dir=str(tmp_path),
                           seed=4, verbose=0)
    elo = np.asarray(run.stats("Race", as_frame=False)[SELF_PLAY_ELO])
    assert len(elo) >= 1 and np.isfinite(elo).all()
    import json
    with open(os.path.join(run.checkpoints["Race"], "state.json")) as f:
        league = json.load(f)["self_play"]
    # the opponents' steps came from the workers (counted, not trained on), and the
    # learner's steps past save_steps took a snapshot
    assert league["count"] >= 2 and league["ghost_step"] > 0
