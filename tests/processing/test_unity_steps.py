"""Steps as Unity reports them, through AgentProcessor, with hand-computed trajectories.

Unity's convention (docs/dev/architecture.md#env-api): an agent whose episode ends and whose next
one begins in
the same step is in that step's terminal AND decision steps with the same id; members of
a group that finished early come back, with their old ids, in the decision steps of the
step their group ends; the group reward arrives with the last member's terminal step.

The script (group 1 = agents 0, 1, 2; agent 7 has no group):

    call 0  decide 0 1 2 7
    call 1  decide 0 1 2 7
    call 2  end 2 (dies), end 7          decide 0 1 7 (7 restarted)
    call 3  end 1 (dies)                 decide 0 7
    call 4  end 0 (group ends, +1.0)     decide 0 1 2 7 (0 restarted, 1 and 2 back)
    call 5                               decide 0 1 2 7
    end_episodes()

Decision observations are [id, k] at call k, terminal ones [id, k + 0.5], so a terminal
observation can never be mistaken for the restart observation of the same call. The first
decision of a new episode carries reward 99 and group reward 5, which belong to no action
and must be dropped.
"""
import numpy as np
import pytest

from tftrainers.envs.base import (ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps,
                                  ObservationSpec, TerminalSteps)
from tftrainers.processing import ActionInfo, AgentProcessor, LogProbs

SPEC = BehaviorSpec((ObservationSpec((2,), "vec"),), ActionSpec(1, (3,)))
GROUP = {0: 1, 1: 1, 2: 1}
GROUP_WIN = 1.0  # the group reward, on agent 0's terminal step at call 4


def reward(i, k):
    return 10.0 * i + k


def decision(ids, k, restarting=()):
    ids = list(ids)
    return DecisionSteps(
        [np.array([[i, k] for i in ids], np.float32).reshape(len(ids), 2)],
        np.array([99.0 if i in restarting else reward(i, k) for i in ids], np.float32),
        np.array(ids, np.int32), [np.zeros((len(ids), 3), bool)],
        np.array([GROUP.get(i, 0) for i in ids], np.int32),
        np.array([5.0 if i in restarting else 0.0 for i in ids], np.float32))


def terminal(ids, k, group_reward=0.0):
    ids = list(ids)
    return TerminalSteps(
        [np.array([[i, k + 0.5] for i in ids], np.float32).reshape(len(ids), 2)],
        np.array([reward(i, k) for i in ids], np.float32), np.zeros(len(ids), bool),
        np.array(ids, np.int32), np.array([GROUP.get(i, 0) for i in ids], np.int32),
        np.full(len(ids), group_reward, np.float32))


def nobody_ends():
    return TerminalSteps.empty(SPEC)


def info(ids, k):
    ids = np.array(ids, np.int32)
    n = len(ids)
    return ActionInfo(ids, ActionTuple((ids + 0.1 * k)[:, None].astype(np.float32),
                                       np.zeros((n, 1), np.int32)),
                      LogProbs(np.zeros((n, 1), np.float32), np.zeros((n, 1), np.float32)),
                      {})


def run_script():
    """(trajectories emitted after each call, episode stats after each call)."""
    p = AgentProcessor(SPEC, time_horizon=100)
    script = [
        (decision([0, 1, 2, 7], 0), nobody_ends(), None),
        (decision([0, 1, 2, 7], 1), nobody_ends(), info([0, 1, 2, 7], 0)),
        (decision([0, 1, 7], 2, restarting=[7]), terminal([2, 7], 2), info([0, 1, 2, 7], 1)),
        (decision([0, 7], 3), terminal([1], 3), info([0, 1, 7], 2)),
        (decision([0, 1, 2, 7], 4, restarting=[0, 1, 2]), terminal([0], 4, GROUP_WIN),
         info([0, 7], 3)),
        (decision([0, 1, 2, 7], 5), nobody_ends(), info([0, 1, 2, 7], 4)),
    ]
    emitted, stats = [], []
    for ds, ts, action_info in script:
        p.add_experiences(ds, ts, action_info)
        emitted.append({t.agent_id: t for t in p.pop_trajectories()})
        stats.append(p.pop_episode_stats())
    p.end_episodes()
    emitted.append({t.agent_id: t for t in p.pop_trajectories()})
    return emitted, stats


def obs_at(i, ks):
    return np.array([[i, k] for k in ks], np.float32)


def test_the_group_ends_when_its_last_member_ends_though_early_finishers_are_back():
    emitted, _ = run_script()
    last = emitted[4][0]  # agent 0, the last member, ends the group's episode at call 4
    assert set(emitted[4]) == {0}
    assert last.done and last.group_done and not last.interrupted
    np.testing.assert_array_equal(last.obs[0], obs_at(0, [0, 1, 2, 3]))
    np.testing.assert_array_equal(last.next_obs[0], [0, 4.5])  # terminal, not the restart
    np.testing.assert_array_equal(last.rewards, [1, 2, 3, 4])
    np.testing.assert_array_equal(last.group_reward, [0, 0, 0, GROUP_WIN])
    # Nobody ends with it: no teammates after its last step (the returning 1 and 2 are in
    # the group's next episode and must not be bootstrapped from).
    np.testing.assert_array_equal(last.next_teammate_mask, [0, 0])
    np.testing.assert_array_equal(last.next_teammate_obs[0], np.zeros((2, 2)))
    np.testing.assert_array_equal(last.teammate_mask, [[1, 1], [1, 1], [1, 0], [0, 0]])
    np.testing.assert_array_equal(last.groupmate_rewards, [
        reward(1, 1) + reward(2, 1), reward(1, 2) + reward(2, 2), reward(1, 3), 0.0])


def test_early_finishers_bootstrap_from_the_members_still_playing():
    emitted, _ = run_script()
    two, one = emitted[2][2], emitted[3][1]
    assert two.done and not two.group_done
    np.testing.assert_array_equal(two.obs[0], obs_at(2, [0, 1]))
    np.testing.assert_array_equal(two.next_obs[0], [2, 2.5])
    np.testing.assert_array_equal(two.next_teammate_obs[0], [[0, 2], [1, 2]])
    np.testing.assert_array_equal(two.next_teammate_mask, [1, 1])
    assert one.done and not one.group_done
    np.testing.assert_array_equal(one.obs[0], obs_at(1, [0, 1, 2]))
    np.testing.assert_array_equal(one.rewards, [11, 12, 13])
    np.testing.assert_array_equal(one.next_teammate_obs[0], [[0, 3], [0, 0]])
    np.testing.assert_array_equal(one.next_teammate_mask, [1, 0])


def test_an_agent_that_ends_and_restarts_in_one_step_gets_two_trajectories():
    emitted, _ = run_script()
    first, second = emitted[2][7], emitted[6][7]
    assert first.done and first.group_done and not first.interrupted
    np.testing.assert_array_equal(first.obs[0], obs_at(7, [0, 1]))
    np.testing.assert_array_equal(first.next_obs[0], [7, 2.5])
    np.testing.assert_array_equal(first.rewards, [71, 72])
    np.testing.assert_allclose(first.actions.continuous[:, 0], [7.0, 7.1])
    # The new episode starts from the decision of the same call; its reward 99 is dropped.
    assert second.interrupted and not second.done
    np.testing.assert_array_equal(second.obs[0], obs_at(7, [2, 3, 4]))
    np.testing.assert_array_equal(second.rewards, [73, 74, 75])
    np.testing.assert_allclose(second.actions.continuous[:, 0], [7.2, 7.3, 7.4])


def test_the_groups_next_episode_starts_from_the_decisions_of_the_step_it_ended():
    emitted, _ = run_script()
    new = emitted[6]
    for i in (0, 1, 2):
        np.testing.assert_array_equal(new[i].obs[0], obs_at(i, [4]))
        np.testing.assert_array_equal(new[i].rewards, [reward(i, 5)])  # not 99
        np.testing.assert_array_equal(new[i].group_reward, [0.0])  # not 5
        np.testing.assert_allclose(new[i].actions.continuous[:, 0], [i + 0.4])
    np.testing.assert_array_equal(new[0].teammate_obs[0], [[[1, 4], [2, 4]]])
    np.testing.assert_array_equal(new[0].teammate_mask, [[1, 1]])
    np.testing.assert_array_equal(new[0].groupmate_rewards, [reward(1, 5) + reward(2, 5)])


def test_episode_stats_mark_the_group_end_and_carry_the_group_reward():
    _, stats = run_script()
    ended = [(int(a), float(r), float(g), int(n), bool(d))
             for s in stats for a, r, g, n, d in zip(s.agent_id, s.cumulative_reward,
                                                     s.group_cumulative_reward,
                                                     s.episode_length, s.group_done)]
    assert ended == [(2, 21 + 22, 0.0, 2, False), (7, 71 + 72, 0.0, 2, True),
                     (1, 11 + 12 + 13, 0.0, 3, False), (0, 1 + 2 + 3 + 4, GROUP_WIN, 4, True)]


@pytest.mark.parametrize("horizon", [1, 2, 3])
def test_time_horizon_cuts_do_not_change_the_group_end(horizon):
    p = AgentProcessor(SPEC, time_horizon=horizon)
    p.add_experiences(decision([0, 1, 2], 0), nobody_ends())
    p.add_experiences(decision([0, 1, 2], 1), nobody_ends(), info([0, 1, 2], 0))
    p.add_experiences(decision([0, 1], 2), terminal([2], 2), info([0, 1, 2], 1))
    p.add_experiences(decision([0, 1, 2], 3, restarting=[0, 1, 2]),
                      terminal([0, 1], 3, GROUP_WIN), info([0, 1], 2))
    out = [t for t in p.pop_trajectories() if t.done]
    assert sorted((t.agent_id, t.group_done) for t in out) == [(0, True), (1, True),
                                                               (2, False)]
    zero = next(t for t in out if t.agent_id == 0)
    np.testing.assert_array_equal(zero.next_teammate_obs[0], [[1, 3.5], [0, 0]])
    np.testing.assert_array_equal(zero.next_teammate_mask, [1, 0])
    assert zero.group_reward[-1] == GROUP_WIN
