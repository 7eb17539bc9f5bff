"""The two-team built-ins (Tennis, SoccerTwos): known answers, mirrored observations, and
tftrainers-evaluate --opponent."""
import json
import os
import textwrap

import numpy as np
import pytest

from tftrainers.cli import evaluate_main, learn_main
from tftrainers.envs import check_env, make

T0, T1 = "Tennis?team=0", "Tennis?team=1"
S0, S1 = "SoccerTwos?team=0", "SoccerTwos?team=1"


def still(env, name):
    """Zero actions for every agent of ``name`` that needs a decision."""
    decision, _ = env.get_steps(name)
    spec = env.behavior_specs[name].action_spec
    env.set_actions(name, spec.empty_action(len(decision)))


def step_until_end(env, names, limit=100):
    """Steps with zero actions until a terminal step; returns per behavior the rewards
    summed over the steps (decision and terminal) and the last terminal steps."""
    total = {n: 0.0 for n in names}
    for _ in range(limit):
        for n in names:
            still(env, n)
        env.step()
        ended = {}
        for n in names:
            decision, terminal = env.get_steps(n)
            total[n] += float(decision.reward.sum() + terminal.reward.sum())
            if len(terminal):
                ended[n] = terminal
        if ended:
            return total, ended
    raise AssertionError("no episode ended")


@pytest.mark.parametrize("env_id", ["builtin:Tennis", "builtin:SoccerTwos"])
@pytest.mark.parametrize("unity_steps", [False, True])
def test_games_pass_the_checker(env_id, unity_steps):
    env = make(env_id, seed=1, num_areas=3, unity_steps=unity_steps, max_steps=60)
    report = check_env(env, n_steps=300)
    assert len(report) == 2 and all(c["episodes"] > 0 for c in report.values())


def tennis_at(ball, velocity, last_hit, rackets=((-4.0, 1.0), (4.0, 1.0))):
    env = make("builtin:Tennis", num_areas=1)
    env.reset()
    env.ball[0], env.ball_velocity[0], env.last_hit[0] = ball, velocity, last_hit
    env.racket[0] = rackets
    return env


def test_tennis_a_hit_over_the_net_scores_0_1_and_the_unreturned_ball_ends_the_rally():
    # Team 0's racket stands under a falling ball that team 1 hit: it returns it.
    env = tennis_at((-4.0, 1.5), (0.0, -1.0), last_hit=1,
                    rackets=((-4.0, 1.0), (7.5, 1.0)))  # team 1 far from where it lands
    total, ended = step_until_end(env, [T0, T1])
    assert total[T0] == pytest.approx(0.1) and total[T1] == pytest.approx(-0.01)
    assert set(ended) == {T0, T1} and not ended[T0].interrupted.any()
    assert env.score.tolist() == [[1, 0]] and env.winner.tolist() == [0]
    env.step()  # both sit out one step, then a new rally starts
    assert all(len(env.get_steps(n)[0]) == 1 for n in (T0, T1))


@pytest.mark.parametrize("ball,velocity,loser", [
    ((3.0, 0.5), (0.0, -2.0), 1),   # lands in team 1's half: team 1 loses
    ((6.0, 2.0), (9.0, 0.0), 0),    # team 0's ball lands beyond team 1's baseline: out
    ((-0.5, 0.5), (5.0, 0.0), 0),   # team 0's ball meets the net
])
def test_tennis_rally_losers(ball, velocity, loser):
    env = tennis_at(ball, velocity, last_hit=0, rackets=((-7.5, 1.0), (7.5, 1.0))
                    if loser == 1 else ((-7.5, 1.0), (2.0, 1.0)))
    total, ended = step_until_end(env, [T0, T1])
    lost = T1 if loser == 1 else T0
    assert total[lost] == pytest.approx(-0.01)
    assert total[T0 if loser == 1 else T1] == pytest.approx(0.0)
    assert env.winner.tolist() == [1 - loser]


def test_tennis_point_reward_makes_the_rally_zero_sum():
    env = make("builtin:Tennis", num_areas=1, point_reward=1.0)
    env.reset()
    env.ball[0], env.ball_velocity[0], env.last_hit[0] = (3.0, 0.5), (0.0, -2.0), 0
    env.racket[0] = ((-7.5, 1.0), (7.5, 1.0))
    total, _ = step_until_end(env, [T0, T1])
    assert total[T0] == pytest.approx(1.0) and total[T1] == pytest.approx(-1.01)


def test_tennis_observations_are_mirrored():
    env = make("builtin:Tennis", num_areas=2)
    env.reset()
    env.racket[0] = ((-3.0, 1.0), (5.0, 1.7))
    env.racket_velocity[0] = ((2.0, 0.0), (-1.0, 3.0))
    env.ball[0], env.ball_velocity[0] = (-2.0, 3.0), (4.0, -1.0)
    # Area 1 is area 0 seen from the other side: the teams swap and x flips.
    env.racket[1] = env.racket[0, ::-1] * (-1.0, 1.0)
    env.racket_velocity[1] = env.racket_velocity[0, ::-1] * (-1.0, 1.0)
    env.ball[1], env.ball_velocity[1] = env.ball[0] * (-1, 1), env.ball_velocity[0] * (-1, 1)
    zero, one = env._observe(np.array([0, 1]))[0], env._observe(np.array([3, 2]))[0]
    assert np.allclose(zero, one)
    assert zero[0, 0] == pytest.approx(-3.0 / 8) and zero[1, 0] == pytest.approx(-5.0 / 8)
    assert env.behavior_specs[T0] == env.behavior_specs[T1]


def soccer_with_ball(ball, velocity):
    env = make("builtin:SoccerTwos", num_areas=2)
    env.reset()
    env.position[:] = ((-4.0, 3.0), (-4.0, -3.0), (4.0, 3.0), (4.0, -3.0))
    env.ball[0], env.ball_velocity[0] = ball, velocity
    return env


@pytest.mark.parametrize("scorer", [0, 1])
def test_soccer_a_goal_ends_the_match_with_group_rewards_to_each_team(scorer):
    sign = 1.0 if scorer == 0 else -1.0
    env = soccer_with_ball((7.5 * sign, 0.3), (0.8 * sign, 0.0))
    for name in (S0, S1):
        still(env, name)
    env.step()
    steps = {n: env.get_steps(n) for n in (S0, S1)}
    winner, loser = (S0, S1) if scorer == 0 else (S1, S0)
    won, lost = steps[winner][1], steps[loser][1]
    assert won.agent_id.tolist() == ([0, 1] if scorer == 0 else [2, 3])
    assert np.allclose(won.group_reward, 1.0 - 1 / 400) and np.allclose(lost.group_reward, -1)
    assert not won.interrupted.any() and not lost.interrupted.any()
    assert np.all(won.reward == 0) and np.all(lost.reward == 0)
    assert env.score[0, scorer] == 1 and env.winner.tolist() == [scorer, -1]
    # The other area plays on.
    assert [len(steps[n][0]) for n in (S0, S1)] == [2, 2]


def test_soccer_field_size_env_args_move_the_goals_walls_and_kick_off():
    env = make("builtin:SoccerTwos", num_areas=2, seed=3, field_length=10, field_width=7)
    env.reset()
    # Kick-off: every player in its own half of the 10 x 7 field.
    assert np.all(np.abs(env.position[..., 1]) <= 3.5 - 1.0)
    assert np.all(env.position[:, :2, 0] < 0) and np.all(env.position[:, 2:, 0] > 0)
    assert np.all(np.abs(env.position[..., 0]) <= 5.0 - 0.4)
    env.position[:] = ((-3.0, 2.0), (-3.0, -2.0), (3.0, 2.0), (3.0, -2.0))
    env.ball[0], env.ball_velocity[0] = (4.6, 0.2), (0.8, 0.0)  # a goal at x = 5, not 8
    env.ball[1], env.ball_velocity[1] = (1.0, 3.0), (0.0, 0.8)  # off the side wall at 3.5
    for name in (S0, S1):
        still(env, name)
    env.step()
    assert env.score.tolist() == [[1, 0], [0, 0]]
    assert env.ball[1, 1] < 3.5 - 0.25 and env.ball_velocity[1, 1] < 0
    # Observations are scaled by half the length: the ball at x = 1 reads 1 / 5.
    assert np.isclose(env._observe(np.array([4]))[0][0, 4], 1.0 / 5.0)
    with pytest.raises(ValueError, match="field_length must be >= 6 and field_width >= 4, "
                                         "got 4 and 7"):
        make("builtin:SoccerTwos", field_length=4, field_width=7)


def test_soccer_ball_touch_rewards_the_player_that_touches_the_ball():
    env = make("builtin:SoccerTwos", num_areas=2)
    env.set_environment_parameters({"ball_touch": 0.5})
    env.reset()
    env.position[:] = ((-4.0, 3.0), (-4.0, -3.0), (4.0, 3.0), (4.0, -3.0))
    env.ball[:], env.ball_velocity[:] = (0.0, 0.0), 0.0
    env.ball[1] = (4.0, -2.6)  # area 1: member 3 (team 1's second) touches it
    for name in (S0, S1):
        still(env, name)
    env.step()
    zero, one = env.get_steps(S0)[0], env.get_steps(S1)[0]
    assert np.allclose(zero.reward, 0.0)
    assert one.agent_id.tolist() == [2, 3, 6, 7]
    assert np.allclose(one.reward, [0.0, 0.0, 0.0, 0.1])
    assert np.allclose(one.group_reward, 0.0)


def test_soccer_groups_are_teams_and_the_time_limit_interrupts():
    env = make("builtin:SoccerTwos", num_areas=2, max_steps=3)
    env.reset()
    zero, one = env.get_steps(S0)[0], env.get_steps(S1)[0]
    assert zero.group_id.tolist() == [1, 1, 3, 3] and one.group_id.tolist() == [2, 2, 4, 4]
    env.ball[:] = 0.0
    env.position[:] = ((-4.0, 3.0), (-4.0, -3.0), (4.0, 3.0), (4.0, -3.0))
    _, ended = step_until_end(env, [S0, S1], limit=3)
    assert all(t.interrupted.all() and len(t) == 4 for t in ended.values())


def test_soccer_observations_are_mirrored():
    env = make("builtin:SoccerTwos", num_areas=2)
    env.reset()
    rng = np.random.default_rng(0)
    env.position[0] = rng.uniform(-4, 4, (4, 2))
    env.heading[0] = rng.uniform(-3, 3, 4)
    env.ball[0], env.ball_velocity[0] = (1.0, -2.0), (0.3, 0.1)
    # Area 1: area 0 turned half a turn, the teams swapped.
    env.position[1] = -env.position[0, [2, 3, 0, 1]]
    env.heading[1] = env.heading[0, [2, 3, 0, 1]] + np.pi
    env.ball[1], env.ball_velocity[1] = -env.ball[0], -env.ball_velocity[0]
    zero = env._observe(np.array([0, 1, 2, 3]))[0]
    one = env._observe(np.array([6, 7, 4, 5]))[0]
    assert np.allclose(zero, one, atol=1e-6)


def test_heuristics_beat_random_players():
    for env_id, team in (("builtin:Tennis", T1), ("builtin:SoccerTwos", S1)):
        env = make(env_id, seed=2, num_areas=8)
        env.reset()
        rng = np.random.default_rng(0)
        for _ in range(300):
            for name, spec in env.behavior_specs.items():
                decision, _ = env.get_steps(name)
                env.set_actions(name, env.heuristic(name, decision) if name == team else
                                spec.action_spec.random_action(len(decision), rng))
            env.step()
        # Tennis: 72 rallies to 16 (random wins when the heuristic misjudges a ball);
        # SoccerTwos: 18 goals to 0.
        won, lost = env.score[:, 1].sum(), env.score[:, 0].sum()
        assert won >= 15 and won >= 3 * lost, env_id


def matches(capsys, *argv):
    assert evaluate_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_opponent_counts_wins_draws_and_losses_on_both_sides(capsys):
    result = matches(capsys, "builtin:Tennis", "--policy", "heuristic", "--opponent", "random",
                     "--episodes", "21", "--num-areas", "4")
    assert result["matches"] == 21 == result["wins"] + result["draws"] + result["losses"]
    assert result["wins"] >= 15 and result["win_rate"] == result["wins"] / 21
    assert result["sides"]["team=0"][0] + result["sides"]["team=1"][0] == result["wins"]
    assert sum(result["sides"]["team=0"]) == 11 and sum(result["sides"]["team=1"]) == 10
    mirror = matches(capsys, "builtin:Tennis", "--policy", "random", "--opponent", "heuristic",
                     "--episodes", "21", "--num-areas", "4")
    assert mirror["losses"] >= 15 and mirror["mean_return"] < result["mean_return"]


CONFIG = """
behaviors:
  Tennis:
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 8, num_layers: 1}
    max_steps: 128
    time_horizon: 16
    reward_signals: {extrinsic: {gamma: 0.99}}
env_settings: {env_path: "builtin:Tennis", seed: 1, num_areas: 2}
"""


def test_opponent_from_a_run_and_its_onnx_export(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    run = str(tmp_path / "r")
    result = matches(capsys, "builtin:Tennis", "--policy", run, "--opponent", "heuristic",
                     "--episodes", "4", "--num-areas", "2")
    assert result["matches"] == 4 and result["losses"] >= 2  # barely trained
    onnx = os.path.join(run, "Tennis?team=0.onnx")
    result = matches(capsys, "builtin:Tennis", "--policy", "heuristic", "--opponent", onnx,
                     "--episodes", "4", "--num-areas", "2")
    assert result["matches"] == 4 and result["wins"] >= 2


@pytest.mark.parametrize("argv,message", [
    (["builtin:Tennis", "--policy", "random", "--opponent", "best"],
     "error: unknown opponent 'best'; use heuristic"),
    (["builtin:Tennis", "--policy", "random", "--opponent", "missing.onnx"],
     "error: --opponent missing.onnx: no such ONNX file"),
    (["builtin:Basic", "--policy", "random", "--opponent", "heuristic"],
     "--opponent needs a game of two teams (behaviors NAME?team=0 and NAME?team=1"),
    (["builtin:SoccerTwos", "--policy", "random", "--opponent", "heuristic", "--episodes",
      "0"], "--episodes must be >= 1"),
])
def test_bad_opponents_are_one_line_with_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_first_to_counts_episodes_until_a_team_has_won_enough():
    from tftrainers.envs import DecisionSteps, TerminalSteps
    from tftrainers.evaluate import _MatchTally
    tally = _MatchTally(matches=1, side=0, first_to=2)
    nobody = DecisionSteps([], np.zeros(0, np.float32), np.zeros(0, np.int32), [])
    none = np.zeros(0, np.int64)
    # (team 0's final reward, team 1's, interrupted): lost, cut by the limit, won, won.
    for r0, r1, cut in ((-0.01, 0.0, False), (0.1, 0.1, True), (0.0, -0.01, False),
                        (0.0, -0.01, False)):
        for team, reward in ((0, r0), (1, r1)):
            end = TerminalSteps([], np.array([reward], np.float32), np.array([cut]),
                                np.array([team], np.int32))
            tally.add(team, none, nobody, np.array([7]), end)
        tally.close_matches()
        assert tally.done == (r1 == -0.01 and tally.points.sum() == 0)
    assert tally.outcomes == [1]
    assert tally.returns == pytest.approx([0.09])


def test_first_to_from_the_command_line(capsys):
    result = matches(capsys, "builtin:Tennis", "--policy", "heuristic", "--opponent", "random",
                     "--first-to", "3", "--episodes", "8", "--num-areas", "4")
    assert result["first_to"] == 3 and result["matches"] == 8 and result["wins"] >= 7
    assert result["draws"] == 0  # a cut rally scores for neither: a match always ends
    for argv, message in ((["--opponent", "random", "--first-to", "0"], "--first-to must be >= 1"),
                          (["--first-to", "3"], "--first-to counts matches against an --opponent")):
        with pytest.raises(SystemExit) as exit_info:
            evaluate_main(["builtin:Tennis", "--policy", "heuristic", *argv])
        err = capsys.readouterr().err.strip()
        assert exit_info.value.code == 2 and message in err and len(err.splitlines()) == 1
