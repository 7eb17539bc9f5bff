"""Env data checked at the boundary: NaN/inf, shapes and dtypes named in one line; env
construction refusing what cannot work (unknown gym args, more agents than memory)."""
import gymnasium
import numpy as np
import pytest

from tftrainers.envs import make
from tftrainers.envs.checks import EnvDataError, check_agent_memory, check_steps


@pytest.fixture
def basic():
    env = make("builtin:Basic", num_areas=4)
    env.reset()
    return env.behavior_specs["Basic"], env.get_steps("Basic")


def fails(spec, decision, terminal):
    with pytest.raises(EnvDataError) as error:
        check_steps("Basic", spec, decision, terminal)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_clean_steps_pass_and_finite_sums_that_overflow_are_no_alarm(basic):
    spec, (decision, terminal) = basic
    check_steps("Basic", spec, decision, terminal)
    decision.reward[:] = 3e38  # finite, though their sum is not
    check_steps("Basic", spec, decision, terminal)


def test_nan_observation_names_behavior_agent_observation_and_element(basic):
    spec, (decision, terminal) = basic
    decision.obs[0][2, 7] = np.nan
    assert fails(spec, decision, terminal) == (
        "behavior 'Basic' (decision steps): agent 2: observation 0 ('position') holds nan at "
        "element 7")


def test_inf_reward_and_group_reward(basic):
    spec, (decision, terminal) = basic
    decision.reward[3] = -np.inf
    assert fails(spec, decision, terminal).endswith("agent 3: reward is -inf")
    decision.reward[3] = 0.0
    decision.group_reward[1] = np.nan
    assert fails(spec, decision, terminal).endswith("agent 1: group_reward is nan")


def test_wrong_shape_dtype_and_count(basic):
    spec, (decision, terminal) = basic
    obs = decision.obs[0]
    decision.obs[0] = obs[:, :5]
    assert fails(spec, decision, terminal) == (
        "behavior 'Basic' (decision steps): observation 0 ('position') has shape [4, 5], "
        "expected [4, 20] (4 agents x [20])")
    decision.obs[0] = obs.astype(np.float64)
    assert "observation 0 ('position') has dtype float64, expected float32" in fails(
        spec, decision, terminal)
    decision.obs[0] = list(obs)
    assert "observation 0 ('position') is a list, expected a float32 array of shape [4, 20]" \
        in fails(spec, decision, terminal)
    decision.obs = []
    assert "0 observations, the behavior spec has 1 ('position')" in fails(
        spec, decision, terminal)


def test_terminal_steps_are_checked_too(basic):
    spec, (decision, _) = basic
    terminal = type(basic[1][1])([o[:1].copy() for o in decision.obs], np.array([np.nan],
                                 np.float32), np.zeros(1, bool), np.array([9], np.int32))
    assert fails(spec, decision, terminal) == \
        "behavior 'Basic' (terminal steps): agent 9: reward is nan"


class _WrongShape(gymnasium.Wrapper):
    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return np.zeros(5, np.float32), reward, terminated, truncated, info


gymnasium.register("TftrainersWrongShape-v0",
                   entry_point=lambda: _WrongShape(gymnasium.make("CartPole-v1")))


def test_gym_observation_of_the_wrong_shape_names_agent_and_both_shapes():
    env = make("gym:TftrainersWrongShape-v0", num_areas=3)
    env.reset()
    name = "TftrainersWrongShape-v0"
    env.set_actions(name, env.behavior_specs[name].action_spec.empty_action(3))
    with pytest.warns(UserWarning), pytest.raises(EnvDataError) as error:
        env.step()
    assert str(error.value) == (
        f"behavior '{name}' (gym:{name}): agent 0: observation 0 ('obs') from the env has "
        f"shape [5], its observation space has [4]")


def test_gym_env_args_the_env_does_not_take():
    with pytest.raises(ValueError) as error:
        make("gym:CartPole-v1", foo=1)
    assert str(error.value) == ("gym:CartPole-v1: the env does not take env args foo=1 "
                                "(CartPoleEnv.__init__() got an unexpected keyword argument "
                                "'foo')")


@pytest.mark.parametrize("env_id", ["builtin:Basic", "gym:CartPole-v1"])
def test_more_areas_than_memory_are_refused_before_allocating(env_id):
    with pytest.raises(ValueError, match=rf"^{env_id}: num_areas 200000000 means 200000000 "
                                         rf"agents, which need about [\d.]+ GB of memory; "
                                         rf"[\d.]+ GB are available; allowed: num_areas up to "
                                         rf"about \d+$"):
        make(env_id, num_areas=200_000_000)


def test_memory_check_counts_every_observation(monkeypatch):
    monkeypatch.setattr("tftrainers.envs.checks.available_memory", lambda: 10_000_000)
    spec = make("builtin:GridWorld", obs="visual").behavior_specs["GridWorld"]
    check_agent_memory("x", 100, spec.observation_specs)  # 100 x 4 x 4.8 KB: fits
    with pytest.raises(ValueError, match="x: num_areas 1000 means 1000 agents"):
        check_agent_memory("x", 1000, spec.observation_specs)
