"""The Gymnasium adapter."""
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from tftrainers.envs import ActionTuple, ObservationKind, check_env, make
from tftrainers.envs.gym_adapter import _ActionConverter, _observation_parts


def test_cartpole_passes_the_checker_with_copies_as_agents():
    env = make("gym:CartPole-v1", num_areas=4, seed=3)
    report = check_env(env, n_steps=300)
    assert report["CartPole-v1"]["episodes"] > 10
    spec = env.behavior_specs["CartPole-v1"]
    assert spec.observation_specs[0].shape == (4,)
    assert spec.action_spec.discrete_branches == (2,)


def test_per_copy_seeds_and_reproducibility():
    def first_obs(seed):
        env = make("gym:CartPole-v1", num_areas=3, seed=seed)
        env.reset()
        return env.get_steps("CartPole-v1")[0].obs[0]
    a, b = first_obs(11), first_obs(11)
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], a[1])  # copies are seeded differently
    expected, _ = gymnasium.make("CartPole-v1").reset(seed=12)
    assert np.allclose(a[1], expected)


def test_truncated_becomes_interrupted():
    env = make("gym:CartPole-v1", num_areas=1, max_episode_steps=5)
    env.reset()
    for _ in range(5):
        decision, terminal = env.get_steps("CartPole-v1")
        assert len(terminal) == 0
        # alternate pushes so the pole stays up for 5 steps
        env.set_actions("CartPole-v1", ActionTuple(np.zeros((1, 0), np.float32),
                                                   np.array([[_ % 2]], np.int32)))
        env.step()
    _, terminal = env.get_steps("CartPole-v1")
    assert terminal.interrupted.tolist() == [True]


def test_box_actions_are_rescaled_to_bounds():
    convert = _ActionConverter(spaces.Box(low=np.array([-2.0, 0.0]), high=np.array([2.0, 10.0])))
    assert convert.continuous_size == 2
    out = convert(np.array([1.0, -1.0], np.float32), np.zeros(0, np.int32))
    assert np.allclose(out, [2.0, 0.0])
    out = convert(np.array([0.0, 0.0], np.float32), np.zeros(0, np.int32))
    assert np.allclose(out, [0.0, 5.0])


def test_multidiscrete_and_tuple_actions():
    convert = _ActionConverter(spaces.Tuple((spaces.Box(-1, 1, (2,)),
                                             spaces.MultiDiscrete([3, 4], start=[1, 0]))))
    assert convert.continuous_size == 2 and convert.branches == [3, 4]
    box, md = convert(np.array([0.5, -0.5], np.float32), np.array([2, 3], np.int32))
    assert np.allclose(box, [0.5, -0.5]) and md.tolist() == [3, 3]


def test_observation_spaces():
    space = spaces.Dict({"pos": spaces.Box(-1, 1, (3,)), "cell": spaces.Discrete(4, start=1),
                         "img": spaces.Box(0, 255, (8, 8, 3), np.uint8)})
    parts = _observation_parts(space, "obs")
    specs = {spec.name: spec for spec, _ in parts}
    assert specs["obs.cell"].shape == (4,)
    assert specs["obs.img"].kind == ObservationKind.VISUAL
    sample = {"pos": np.zeros(3), "cell": 2, "img": np.full((8, 8, 3), 255, np.uint8)}
    values = {spec.name: convert(sample) for spec, convert in parts}
    assert values["obs.cell"].tolist() == [0, 1, 0, 0]
    assert values["obs.img"].max() == 1.0


def test_frozenlake_discrete_obs_and_pendulum_box_action_pass_the_checker():
    check_env(make("gym:FrozenLake-v1", num_areas=2), n_steps=100)
    check_env(make("gym:Pendulum-v1", num_areas=2), n_steps=100)


def test_unsupported_space_is_named():
    with pytest.raises(ValueError, match=r"observation space .*Text.* is not supported; "
                                         r"supported: Box, Discrete"):
        _observation_parts(spaces.Text(5), "obs")
    with pytest.raises(ValueError, match=r"action space .*Box.* is not supported"):
        _ActionConverter(spaces.Box(0, 3, (2,), np.int64))


def test_unknown_gym_id():
    with pytest.raises(ValueError, match=r"gym:NoSuchEnv-v0"):
        make("gym:NoSuchEnv-v0")
