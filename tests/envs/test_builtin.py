"""Known answers of the built-in environments."""
import numpy as np
import pytest

from tftrainers.envs import ActionTuple, check_env, make
from tftrainers.envs.builtin import BUILTIN_ENVS
from tftrainers.envs.builtin.gridworld import MOVES, N


def discrete(*actions):
    a = np.asarray(actions, np.int32).reshape(-1, 1)
    return ActionTuple(np.zeros((len(a), 0), np.float32), a)


@pytest.mark.parametrize("env_id,env_args", [
    ("builtin:Basic", {}), ("builtin:GridWorld", {}), ("builtin:GridWorld", {"obs": "visual"}),
    ("builtin:GridWorld", {"obs": "grid"}), ("builtin:Ball3D", {}), ("builtin:Hallway", {}),
    ("builtin:Hallway", {"length": 4})])
def test_builtin_envs_pass_the_checker(env_id, env_args):
    report = check_env(make(env_id, seed=1, num_areas=3, **env_args), n_steps=400)
    (counts,) = report.values()
    assert counts["decisions"] > 0 and counts["episodes"] > 0


def test_basic_optimal_path_returns_0_93():
    env = make("builtin:Basic", num_areas=1)
    env.reset()
    total, steps = 0.0, 0
    while True:
        env.set_actions("Basic", discrete(2))
        env.step()
        decision, terminal = env.get_steps("Basic")
        steps += 1
        if len(terminal):
            total += float(terminal.reward[0])
            assert not terminal.interrupted[0]
            break
        total += float(decision.reward[0])
    assert steps == 7
    assert total == pytest.approx(0.93, abs=1e-6)


def test_basic_small_goal_and_one_hot_observation():
    env = make("builtin:Basic", num_areas=1)
    env.reset()
    decision, _ = env.get_steps("Basic")
    assert decision.obs[0].shape == (1, 20) and decision.obs[0][0, 10] == 1.0
    rewards = []
    for _ in range(3):
        env.set_actions("Basic", discrete(1))
        env.step()
        decision, terminal = env.get_steps("Basic")
        rewards.append((decision.reward if len(decision) else terminal.reward)[0])
    assert len(terminal) == 1 and not terminal.interrupted[0]
    assert terminal.obs[0][0, 7] == 1.0
    assert np.allclose(rewards, [-0.01, -0.01, 0.09])


def test_step_limit_gives_interrupted_and_agent_returns_next_step():
    env = make("builtin:Basic", num_areas=2)
    env.reset()
    for t in range(100):
        env.set_actions("Basic", discrete(0, 0))  # stay forever
        env.step()
        decision, terminal = env.get_steps("Basic")
        if t < 99:
            assert len(terminal) == 0
    assert terminal.interrupted.tolist() == [True, True]
    assert len(decision) == 0
    env.step()  # both sit out this step and start their new episodes
    decision, terminal = env.get_steps("Basic")
    assert decision.agent_id.tolist() == [0, 1] and len(terminal) == 0
    assert np.all(decision.obs[0][:, 10] == 1.0)


def test_ball3d_ball_pushed_off_ends_with_minus_one():
    env = make("builtin:Ball3D", num_areas=1)
    env.reset()
    env.position[:] = [2.9, 0.0]
    env.velocity[:] = [3.0, 0.0]
    env.set_actions("Ball3D", ActionTuple(np.zeros((12, 2), np.float32), np.zeros((12, 0), np.int32)))
    env.step()
    decision, terminal = env.get_steps("Ball3D")
    assert len(terminal) == 12 and len(decision) == 0
    assert np.all(terminal.reward == -1.0) and not terminal.interrupted.any()


def test_ball3d_spec_and_best_return():
    env = make("builtin:Ball3D", num_areas=2)
    spec = env.behavior_specs["Ball3D"]
    assert spec.observation_specs[0].shape == (8,)
    assert spec.action_spec.continuous_size == 2 and spec.action_spec.discrete_size == 0
    assert env.n_agents == 24
    assert env.max_episode_steps * 0.1 == pytest.approx(100)


def test_gridworld_masks_forbid_exactly_the_wall_moves():
    env = make("builtin:GridWorld", num_areas=N * N, seed=3)
    env.reset()
    env.agent[:] = np.stack(np.divmod(np.arange(N * N), N), axis=1)  # one agent per cell
    decision, _ = env.get_steps("GridWorld")
    mask = env._action_mask(np.arange(N * N))[0]
    for row in range(N * N):
        r, c = divmod(row, N)
        expected = [False, r == 0, r == N - 1, c == 0, c == N - 1]
        assert mask[row].tolist() == expected
    assert decision.action_mask[0].shape == (N * N, len(MOVES))


def test_gridworld_visual_and_grid_match_vector():
    vector = make("builtin:GridWorld", seed=5, num_areas=4)
    visual = make("builtin:GridWorld", seed=5, num_areas=4, obs="visual")
    grid = make("builtin:GridWorld", seed=5, num_areas=4, obs="grid")
    vector.reset(), visual.reset(), grid.reset()
    v = vector.get_steps("GridWorld")[0].obs[0].reshape(4, 3, N, N)
    image = visual.get_steps("GridWorld")[0].obs[0]
    assert image.shape == (4, 20, 20, 3) and image.dtype == np.float32
    assert image.min() >= 0.0 and image.max() <= 1.0
    assert np.array_equal(image[:, ::4, ::4, :].transpose(0, 3, 1, 2), v)
    (cells,) = grid.get_steps("GridWorld")[0].obs  # one pixel a cell, channels last
    assert cells.shape == (4, N, N, 3) and cells.dtype == np.float32
    assert grid.behavior_specs["GridWorld"].observation_specs[0].kind.value == "visual"
    assert np.array_equal(cells.transpose(0, 3, 1, 2), v)
    for planes in v:  # exactly one agent, one goal, one pit on distinct cells
        assert planes.sum(axis=(1, 2)).tolist() == [1, 1, 1]
        assert planes.sum(axis=0).max() == 1


def test_gridworld_goal_and_pit_rewards():
    env = make("builtin:GridWorld", num_areas=2)
    env.reset()
    env.agent[:] = [[2, 2], [2, 2]]
    env.goal[:] = [[2, 3], [0, 0]]
    env.pit[:] = [[4, 4], [2, 3]]
    env.set_actions("GridWorld", discrete(4, 4))  # both move right
    env.step()
    _, terminal = env.get_steps("GridWorld")
    assert np.allclose(terminal.reward, [0.99, -1.01])


def test_hallway_cue_visible_only_at_first_step():
    env = make("builtin:Hallway", num_areas=6, seed=2, length=5)
    env.reset()
    decision, _ = env.get_steps("Hallway")
    cue = decision.obs[0][:, 5:]
    assert np.array_equal(cue.argmax(axis=1), env.cue) and np.all(cue.sum(axis=1) == 1)
    for _ in range(3):
        env.set_actions("Hallway", env.heuristic("Hallway", decision))
        env.step()
        decision, _ = env.get_steps("Hallway")
        assert np.all(decision.obs[0][:, 5:] == 0.0)


def test_hallway_goals():
    env = make("builtin:Hallway", num_areas=2, length=2)
    env.reset()
    env.cue[:] = [0, 0]
    env.set_actions("Hallway", discrete(1, 1))
    env.step()
    env.set_actions("Hallway", discrete(3, 4))  # left goal (right one), right goal (wrong)
    env.step()
    _, terminal = env.get_steps("Hallway")
    # ML-Agents' SetReward: the goal's reward replaces the step's penalty.
    assert np.allclose(terminal.reward, [1.0, -0.1])


@pytest.mark.parametrize("name", sorted(BUILTIN_ENVS))
def test_seeds_reproduce_trajectories(name):
    def rollout(seed):
        env = make(f"builtin:{name}", seed=seed, num_areas=2)
        rng = np.random.default_rng(0)
        env.reset()
        behavior = next(iter(env.behavior_specs))  # WallJump's is BigWallJump
        spec = env.behavior_specs[behavior]
        trace = []
        for _ in range(60):
            decision, terminal = env.get_steps(behavior)
            trace += [decision.obs[0].copy(), decision.reward.copy(), terminal.reward.copy()]
            env.set_actions(behavior, spec.action_spec.random_action(len(decision), rng,
                                                                 decision.action_mask))
            env.step()
        return trace
    first, again, other = rollout(7), rollout(7), rollout(8)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    if name != "Basic":  # Basic has no randomness of its own: always starts at 10
        assert not all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(first, other))
