"""tftrainers-evaluate: the heuristics' returns, JSON output, and usage errors."""
import json

import pytest

from tftrainers.cli import evaluate_main


def run(capsys, *argv):
    code = evaluate_main(list(argv))
    out = capsys.readouterr().out.strip().splitlines()
    return code, [json.loads(line) for line in out]


@pytest.mark.parametrize("env_id,extra,low,high", [
    ("builtin:Basic", [], 0.92, 0.94),
    ("builtin:Ball3D", [], 95, 100.01),
    ("builtin:GridWorld", [], 0.8, 1.0),
    ("builtin:GridWorld", ["--env-args", "obs=visual"], 0.8, 1.0),
    ("builtin:Hallway", [], 0.9, 1.0),
])
def test_heuristics_reach_their_targets(capsys, env_id, extra, low, high):
    code, (result,) = run(capsys, env_id, "--policy", "heuristic", "--episodes", "20", *extra)
    assert code == 0 and result["episodes"] == 20
    assert low <= result["mean_reward"] <= high
    assert set(result) >= {"behavior", "episodes", "mean_reward", "std_reward"}


def test_random_policies_are_far_below(capsys):
    _, (ball,) = run(capsys, "builtin:Ball3D", "--policy", "random", "--episodes", "20")
    assert ball["mean_reward"] <= 10
    _, (cartpole,) = run(capsys, "gym:CartPole-v1", "--policy", "random", "--episodes", "30")
    assert 12 <= cartpole["mean_reward"] <= 35


def test_episode_quota_does_not_favour_short_episodes(capsys):
    # With many agents and few episodes, counting whoever finishes first would report
    # only short (failed) Ball3D episodes; each agent's first episode counts instead.
    _, (a,) = run(capsys, "builtin:Ball3D", "--policy", "random", "--episodes", "96",
                  "--num-areas", "8", "--seed", "1")
    assert a["episodes"] == 96


@pytest.mark.parametrize("argv,message", [
    (["builtin:Nope", "--policy", "random"], "unknown built-in env 'Nope'"),
    (["builtin:Basic", "--policy", "smart"], "unknown policy 'smart'; use heuristic"),
    (["builtin:Basic", "--policy", "random", "--env-args", "obs"], "--env-args takes key=value"),
    (["builtin:Basic", "--policy", "random", "--episodes", "0"], "--episodes must be >= 1"),
    (["gym:CartPole-v1", "--policy", "heuristic"], "has no heuristic policy"),
])
def test_usage_errors_exit_2_with_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_group_episodes_are_scored_by_their_group_reward(capsys):
    code, (result,) = run(capsys, "builtin:DungeonEscape", "--policy", "heuristic",
                          "--episodes", "20", "--num-areas", "4")
    assert code == 0 and result["mean_reward"] == 0.0
    assert result["group_episodes"] == 20 and result["mean_group_reward"] == 1.0
    _, (ball,) = run(capsys, "builtin:Ball3D", "--policy", "random", "--episodes", "12")
    assert "mean_group_reward" not in ball  # no groups, no group fields
