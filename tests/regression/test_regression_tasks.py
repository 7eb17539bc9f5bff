"""ML-Agents' regression tasks as learning tests: ML-Agents' own pass criterion, a few seeds.

Each test trains on one of ML-Agents' small envs with the settings its test uses and
asserts what ML-Agents' ``check_environment_trains`` asserts: the mean of the env's last
five final rewards exceeds 0.9 (a failed or half-failed episode among the last five is
enough to miss it); the POCA group tests hold the same bar over the last fifty (see there
why). Only the cheapest variants run here (about 1.5 minutes in all on 2 cores);
``benchmarks/regression_tasks.py`` runs every variant on many seeds.
"""
import pytest

from .harness import run_variant
from .simple_envs import last_mean, passes


def check_trains(variant, seed, last=5):
    result = run_variant(variant, seed)
    tail = [round(r, 3) for r in result.final_rewards[-last:]]
    assert passes(result.final_rewards, last=last), (
        f"{variant}, seed {seed}: the last {last} final rewards {tail} average "
        f"{last_mean(result.final_rewards, last):.3f}; the criterion is > 0.9")
    return result


@pytest.mark.parametrize("variant,seed", [
    ("ppo_continuous", 1337), ("ppo_continuous", 0),
    ("ppo_discrete", 1337), ("ppo_discrete", 0),
    ("ppo_visual_discrete", 1337),  # the goal only in an image
    ("ppo_memory_discrete", 1337),  # the goal shown for 3 steps: the LSTM must keep it
])
def test_ppo_trains_on_the_line(variant, seed):
    check_trains(variant, seed)


@pytest.mark.parametrize("seed", [1337, 1])
def test_ppo_trains_with_hybrid_actions(seed):
    # 1 continuous dimension and 1 discrete branch, both of which must reach the goal's end.
    check_trains("ppo_hybrid_1c1d", seed)


@pytest.mark.parametrize("variant", ["poca_group_discrete", "poca_group_discrete_builtin_steps"])
def test_poca_trains_a_group_reported_either_way(variant):
    # Two agents must both reach the goal. The Unity way: the group reward comes on the last
    # one's terminal step, which also starts the next episode for both with their old ids;
    # the built-in way: the group sits out a step first.
    # ML-Agents' last five are a coin toss here, for ML-Agents' own POCA too: one wrong-end
    # finish among the last five misses it (ML-Agents 1.1: 8 of 10 seeds; ours 9 of 10 with
    # ML-Agents' leaver bootstrap, seed 1337 among the misses both ways at the merge of
    # 2026-11-26; docs/experiments/2026-11-25-poca-group-task.md). The last fifty hold the
    # same bar without the coin: one wrong finish in fifty averages 1.02.
    result = check_trains(variant, 1337, last=50)
    # The critic regresses on lambda returns: once past its first updates its estimates stay
    # within the returns (a member collects at most the group's 1.06; with the default
    # "remaining" bootstrap a leaver's return is built on the last member's value, so the
    # returns reach 1.1-1.3 and V follows them: 1.25 on the built-in way here); two episodes
    # merged into one trajectory would double that. (The critic's start scale, whose
    # usual-scale form overshot to 1.14-1.42, has known-answer tests of its own.)
    late = result.estimate_range(from_step=result.steps // 2)
    assert late[1] < 1.5 and late[1] <= result.return_range[1] + 0.1, (late,
                                                                        result.return_range)
