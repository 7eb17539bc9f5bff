"""Known answers for the regression envs: ML-Agents' dynamics, rewards and Unity-style steps."""
import numpy as np
import pytest

from tftrainers.envs.base import ActionTuple

from .simple_envs import SUCCESS_REWARD, TIME_PENALTY, GroupLineEnv, LineEnv, passes


def act(env, continuous=None, discrete=None):
    decision, _ = env.get_steps("1D")
    n = len(decision)
    spec = env.behavior_specs["1D"].action_spec
    c = np.zeros((n, spec.continuous_size), np.float32) if continuous is None else continuous
    d = np.zeros((n, spec.discrete_size), np.int32) if discrete is None else discrete
    env.set_actions("1D", ActionTuple(np.asarray(c, np.float32), np.asarray(d, np.int32)))
    env.step()
    return env.get_steps("1D")


def test_line_reaches_the_goal_in_five_steps_and_restarts_in_the_same_step():
    env = LineEnv(action_sizes=(1, 0), step_size=0.2, seed=3)
    env.reset()
    decision, _ = env.get_steps("1D")
    goal = float(decision.obs[0][0, 0])
    first_id = int(decision.agent_id[0])
    for _ in range(4):  # 0.2 a step (the action 1.0 is clamped to the step size)
        decision, terminal = act(env, [[goal]])
        assert len(terminal) == 0 and decision.reward[0] == pytest.approx(-TIME_PENALTY)
    decision, terminal = act(env, [[goal]])
    assert terminal.reward[0] == pytest.approx(SUCCESS_REWARD)
    assert not terminal.interrupted[0] and terminal.agent_id[0] == first_id
    # Unity's way: the next episode asks for its first decision in the same step (new id).
    assert decision.agent_id[0] != first_id and decision.reward[0] == 0.0
    assert env.final_rewards == [pytest.approx(SUCCESS_REWARD - 4 * TIME_PENALTY)]
    assert passes([1.02] * 5) and not passes([1.02] * 4 + [-1.1]) and not passes([1.02] * 4)


def test_hybrid_needs_every_dimension_at_an_end_and_scores_their_mean():
    env = LineEnv(action_sizes=(1, 1), step_size=0.8, seed=0)
    env.reset()
    goal = float(env.get_steps("1D")[0].obs[0][0, 0])
    # Continuous towards the goal, discrete away from it: both ends after 2 steps.
    away = 0 if goal > 0 else 1
    act(env, [[goal]], [[away]])
    _, terminal = act(env, [[goal]], [[away]])
    assert terminal.reward[0] == pytest.approx(0.0)  # mean of +1 and -1, times 1.06


def test_memory_env_shows_the_goal_for_the_first_three_observations_only():
    env = LineEnv(action_sizes=(0, 1), memory=True, seed=1)
    env.reset()
    seen = [float(env.get_steps("1D")[0].obs[0][0, 0])]
    for _ in range(3):
        decision, _ = act(env, discrete=[[1]] if seen[0] > 0 else [[0]])
        seen.append(float(decision.obs[0][0, 0]))
    assert seen[0] == seen[1] == seen[2] != 0 and seen[3] == 0


@pytest.mark.parametrize("signed,values", [(True, {-1.0, 1.0}), (False, {0.0, 1.0})])
def test_visual_observation_is_the_goal_in_every_pixel(signed, values):
    env = LineEnv(action_sizes=(0, 1), num_vector=0, num_visual=2, num_agents=16, seed=0,
                  signed_images=signed)
    env.reset()
    decision, _ = env.get_steps("1D")
    assert [o.shape for o in decision.obs] == [(16, 20, 20, 3)] * 2
    assert set(np.unique(decision.obs[0])) == values


def _group_episode(unity_steps):
    """Member 0 walks to its end in 5 steps, member 1 in 10 (half steps)."""
    env = GroupLineEnv(action_sizes=(1, 0), num_groups=1, unity_steps=unity_steps, seed=0)
    env.reset()
    goal = float(env.get_steps("1D")[0].obs[0][0, 0])
    record = []
    for t in range(10):
        decision, _ = env.get_steps("1D")
        moves = np.where(decision.agent_id == 0, goal, goal * 0.1)[:, None]
        decision, terminal = act(env, moves)
        record.append((decision, terminal))
    return env, goal, record


def test_group_reports_the_unity_way():
    env, goal, record = _group_episode(unity_steps=True)
    # Step 5: member 0 ends early: time penalty as its reward, no group reward; then absent.
    decision, terminal = record[4]
    assert list(terminal.agent_id) == [0] and terminal.reward[0] == pytest.approx(-TIME_PENALTY)
    assert terminal.group_reward[0] == 0.0 and list(decision.agent_id) == [1]
    assert list(terminal.group_id) == [1] and list(decision.group_id) == [1]
    assert list(record[5][0].agent_id) == [1]
    # Step 10: member 1 ends the group: reward 0, group reward = its final reward, and both
    # members (0 back with its old id) ask for the new episode's first decision.
    decision, terminal = record[9]
    assert list(terminal.agent_id) == [1] and terminal.reward[0] == 0.0
    assert terminal.group_reward[0] == pytest.approx(SUCCESS_REWARD)
    assert list(decision.agent_id) == [0, 1] and list(decision.reward) == [0.0, 0.0]
    assert list(decision.group_reward) == [0.0, 0.0]
    assert env.final_rewards == [pytest.approx(SUCCESS_REWARD)] * 2
    assert env.group_returns == [pytest.approx(SUCCESS_REWARD)]


def test_group_reports_the_built_in_way():
    env, goal, record = _group_episode(unity_steps=False)
    decision, terminal = record[9]
    assert list(terminal.agent_id) == [1] and len(decision) == 0  # the group sits out a step
    decision, terminal = act(env)
    assert list(decision.agent_id) == [0, 1] and len(terminal) == 0


def test_group_member_that_fails_early_gets_its_negative_final_reward():
    env = GroupLineEnv(action_sizes=(0, 1), num_groups=3, seed=2)
    env.reset()
    goals = env.get_steps("1D")[0].obs[0][:, 0]
    away = (goals < 0).astype(np.int32)  # action 1 moves up: away from a goal of -1
    for t in range(5):
        # Members 0 walk to the wrong end; members 1 wander around the middle.
        actions = np.where(np.arange(6) % 2 == 0, away, t % 2)
        decision, terminal = act(env, discrete=actions[:, None])
    assert list(terminal.agent_id) == [0, 2, 4]
    assert terminal.reward == pytest.approx([-SUCCESS_REWARD] * 3)
    assert list(decision.agent_id) == [1, 3, 5]
