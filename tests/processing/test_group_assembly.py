"""Group experience (MA-POCA): teammates' observations, actions and rewards per step, the
teammates after a trajectory, and group_done, with members ending at different steps."""
import numpy as np

from tftrainers.envs.base import (ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps,
                                  ObservationSpec, TerminalSteps)
from tftrainers.processing import ActionInfo, AgentProcessor, BufferKey, LogProbs, team_obs_key

SPEC = BehaviorSpec((ObservationSpec((2,), "vec"),), ActionSpec(1, (3,)))
GROUP = {0: 1, 1: 1, 2: 1}  # 0, 1, 2 form group 1; agent 5 has no group


def obs(ids, k):
    return [np.array([[i, k] for i in ids], np.float32).reshape(len(ids), 2)]


def reward(i, k):
    return 10.0 * i + k


def steps(kind, ids, k, interrupted=None):
    ids = list(ids)
    common = dict(obs=obs(ids, k), reward=np.array([reward(i, k) for i in ids], np.float32),
                  agent_id=np.array(ids, np.int32),
                  group_id=np.array([GROUP.get(i, 0) for i in ids], np.int32),
                  group_reward=np.array([0.5 * k if i in GROUP else 0.0 for i in ids],
                                        np.float32))
    if kind == "decision":
        return DecisionSteps(action_mask=[np.zeros((len(ids), 3), bool)], **common)
    return TerminalSteps(interrupted=np.array(interrupted, bool), **common)


def info(ids, k):
    ids = np.array(ids, np.int32)
    n = len(ids)
    return ActionInfo(ids, ActionTuple((ids + 0.1 * k)[:, None].astype(np.float32),
                                       ((ids + k) % 3)[:, None].astype(np.int32)),
                      LogProbs(np.zeros((n, 1), np.float32), np.zeros((n, 1), np.float32)), {})


def none_ending():
    return TerminalSteps.empty(SPEC)


def by_agent(trajectories):
    return {t.agent_id: t for t in trajectories}


def test_a_member_that_dies_keeps_its_group_and_the_survivors_see_it_leave():
    p = AgentProcessor(SPEC, time_horizon=10)
    p.add_experiences(steps("decision", [0, 1, 2, 5], 0), none_ending())
    p.add_experiences(steps("decision", [0, 1, 2, 5], 1), none_ending(), info([0, 1, 2, 5], 0))
    # Call 2: member 2 dies (a real end) while 0 and 1 go on.
    p.add_experiences(steps("decision", [0, 1, 5], 2), steps("terminal", [2], 2, [False]),
                      info([5, 2, 1, 0], 1))
    dead = by_agent(p.pop_trajectories())[2]
    assert dead.done and not dead.group_done
    np.testing.assert_array_equal(dead.next_teammate_obs[0], [[0, 2], [1, 2]])
    np.testing.assert_array_equal(dead.next_teammate_mask, [1, 1])
    np.testing.assert_array_equal(dead.teammate_obs[0][:, :, 0], [[0, 1], [0, 1]])
    np.testing.assert_array_equal(dead.teammate_mask, np.ones((2, 2)))
    np.testing.assert_array_equal(dead.groupmate_rewards, [reward(0, 1) + reward(1, 1),
                                                           reward(0, 2) + reward(1, 2)])
    (episode_group_done,) = p.pop_episode_stats().group_done
    assert not episode_group_done

    # Call 3: the group's episode ends for 0 and 1 (a real end); 5 goes on.
    p.add_experiences(steps("decision", [5], 3), steps("terminal", [0, 1], 3, [False, False]),
                      info([0, 1, 5], 2))
    out = by_agent(p.pop_trajectories())
    zero, one = out[0], out[1]
    assert zero.done and zero.group_done and one.group_done and 5 not in out
    # Agent 0's teammates: 1 and 2 at calls 0 and 1, only 1 at call 2 (2 had left).
    np.testing.assert_array_equal(zero.teammate_mask, [[1, 1], [1, 1], [1, 0]])
    np.testing.assert_array_equal(zero.teammate_obs[0][:, 0], [[1, 0], [1, 1], [1, 2]])
    np.testing.assert_array_equal(zero.teammate_obs[0][:2, 1], [[2, 0], [2, 1]])
    np.testing.assert_allclose(zero.teammate_actions.continuous[:, 0, 0], [1.0, 1.1, 1.2])
    np.testing.assert_array_equal(zero.teammate_actions.discrete[:2, 1, 0], [2, 0])
    np.testing.assert_array_equal(zero.groupmate_rewards, [
        reward(1, 1) + reward(2, 1), reward(1, 2) + reward(2, 2), reward(1, 3)])
    np.testing.assert_array_equal(zero.group_reward, [0.5, 1.0, 1.5])
    # The group ended: the teammate after the last step is 1's terminal observation.
    np.testing.assert_array_equal(zero.next_teammate_obs[0][0], [1, 3])
    np.testing.assert_array_equal(zero.next_teammate_mask, [1, 0])
    episodes = p.pop_episode_stats()
    np.testing.assert_array_equal(episodes.agent_id, [0, 1])
    np.testing.assert_array_equal(episodes.group_done, [True, True])
    np.testing.assert_allclose(episodes.group_cumulative_reward, [3.0, 3.0])

    # The ungrouped agent records no teammates.
    p.end_episodes()
    (alone,) = p.pop_trajectories()
    assert alone.agent_id == 5 and not alone.teammate_mask.any()
    assert not alone.groupmate_rewards.any()
    fields = alone.to_fields()
    assert fields[team_obs_key(0)].shape == (3, 2, 2)
    assert fields[BufferKey.TEAM_MASK].shape == (3, 2)


def test_time_horizon_cut_bootstraps_from_the_teammates_present():
    p = AgentProcessor(SPEC, time_horizon=2)
    p.add_experiences(steps("decision", [0, 1], 0), none_ending())
    p.add_experiences(steps("decision", [0, 1], 1), none_ending(), info([0, 1], 0))
    p.add_experiences(steps("decision", [0, 1], 2), none_ending(), info([1, 0], 1))
    out = by_agent(p.pop_trajectories())
    assert not out[0].done and not out[0].group_done
    np.testing.assert_array_equal(out[0].next_teammate_obs[0][0], [1, 2])
    np.testing.assert_array_equal(out[1].next_teammate_obs[0][0], [0, 2])
    np.testing.assert_array_equal(out[1].teammate_obs[0][:, 0], [[0, 0], [0, 1]])


def test_without_groups_nothing_is_recorded():
    p = AgentProcessor(SPEC, time_horizon=2)
    d = steps("decision", [5, 6], 0)
    p.add_experiences(d, none_ending())
    p.add_experiences(steps("decision", [5, 6], 1), none_ending(), info([5, 6], 0))
    p.add_experiences(steps("terminal", [5, 6], 2, [False, True]) and steps(
        "decision", [5, 6], 2), none_ending(), info([5, 6], 1))
    (first, _) = p.pop_trajectories()
    assert first.teammate_obs is None and first.teammate_mask is None
