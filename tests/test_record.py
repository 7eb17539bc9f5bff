"""tftrainers-record: what a policy did is what the .demo file reads back as."""
import json

import numpy as np
import pytest

from tftrainers.cli import record_main
from tftrainers.envs import (ActionSpec, ActionTuple, ObservationKind, ObservationSpec, check_env,
                             make)
from tftrainers.envs.area_env import AreaEnv
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.processing.demonstrations import load_demonstrations
from tftrainers.record import record


class HybridEnv(AreaEnv):
    """Hybrid actions (2 continuous, branches 3 and 2), state-dependent masks, a vector and a
    4-channel visual observation (two PNGs in the file), episodes of random length."""

    name = "Hybrid"
    agents_per_area = 2
    default_num_areas = 3
    max_episode_steps = 6

    def __init__(self, seed=0, num_areas=None):
        super().__init__(seed, num_areas)
        self.state = np.zeros((self.n_agents, 4))

    def observation_specs(self):
        return [ObservationSpec((4,), "state"),
                ObservationSpec((5, 6, 4), "camera", ObservationKind.VISUAL)]

    def action_spec(self):
        return ActionSpec(2, (3, 2))

    def _reset_agents(self, rows):
        self.state[rows] = self.rng.uniform(-1, 1, (len(rows), 4))

    def _act(self, rows, actions):
        move = np.concatenate([actions.continuous, actions.discrete - 0.5], axis=1)
        self.state[rows] = np.clip(self.state[rows] + 0.3 * move, -1, 1)
        reward = actions.continuous.sum(axis=1) + actions.discrete[:, 0]
        return reward.astype(np.float32), self.rng.random(len(rows)) < 0.2

    def _observe(self, rows):
        # The image is a function of the float32 state, so a test can redraw it.
        state = self.state[rows].astype(np.float32).astype(np.float64)
        grid = np.arange(30).reshape(1, 5, 6, 1) / 30.0
        image = np.floor(((state[:, None, None, :] + 1) / 2 + grid) % 1.0 * 255) / 255
        return [state.astype(np.float32), image.astype(np.float32)]

    def _action_mask(self, rows):
        masked = np.zeros((len(rows), 3), bool)
        masked[:, 2] = self.state[rows, 0] > 0  # action 2 of branch 0 when state 0 > 0
        return [masked, np.zeros((len(rows), 2), bool)]


def obs_policy(spec, seed=0):
    """Actions as a fixed function of the observation and mask, so a file's pairing of
    observations and actions can be checked against it."""
    rng = np.random.default_rng(seed)
    size = spec.observation_specs[0].shape[0]
    continuous_w = rng.standard_normal((size, spec.action_spec.continuous_size))
    branch_w = [rng.standard_normal((size, b)) for b in spec.action_spec.discrete_branches]

    def act(obs, allowed):
        continuous = np.tanh(obs @ continuous_w).astype(np.float32)
        discrete, start = [], 0
        for w, b in zip(branch_w, spec.action_spec.discrete_branches):
            logits = np.where(allowed[:, start:start + b] > 0, obs @ w, -np.inf)
            discrete.append(logits.argmax(axis=1))
            start += b
        return ActionTuple(continuous, np.stack(discrete, axis=1).astype(np.int32))

    def policy(name, steps):
        return act(steps.obs[0], steps.allowed_mask(spec.action_spec.discrete_branches))

    return policy, act


def check_transitions(demos, act):
    """Each action is the policy's at its observation; next_obs continues the episode."""
    expected = act(demos.obs[0], demos.action_mask)
    np.testing.assert_allclose(demos.continuous_actions, expected.continuous, rtol=1e-6)
    np.testing.assert_array_equal(demos.discrete_actions, expected.discrete)
    same_episode = ~demos.episode_start[1:]
    for o, n in zip(demos.obs, demos.next_obs):
        np.testing.assert_array_equal(o[1:][same_episode], n[:-1][same_episode])
    np.testing.assert_array_equal(demos.done, np.r_[~same_episode, True])


def test_hybrid_actions_masks_and_visual_round_trip(tmp_path):
    env = HybridEnv(seed=3)
    check_env(HybridEnv(seed=3))  # raises on an API violation
    spec = env.behavior_specs["Hybrid"]
    policy, act = obs_policy(spec)
    path = str(tmp_path / "hybrid.demo")
    summary = record(env, policy, path, episodes=12)
    demos = load_demonstrations(path, spec=spec)
    assert demos.spec == spec
    assert summary.episodes == demos.num_episodes == 12
    assert summary.steps == len(demos) and summary.records == len(demos) + 12
    check_transitions(demos, act)
    assert (demos.action_mask[:, 2] == 0).any() and (demos.action_mask[:, 2] == 1).any()
    assert demos.interrupted.any() and not demos.interrupted[~demos.done].any()
    # The camera is stored as two PNGs and comes back exactly (values are k / 255).
    assert np.isin(np.rint(demos.obs[1] * 255), np.arange(256)).all()
    image = HybridEnv._observe(type("S", (), {"state": demos.obs[0].astype(np.float64)})(),
                               np.arange(len(demos)))[1]
    np.testing.assert_array_equal(demos.obs[1], image)
    # Returns as the env paid them, the same as tftrainers-evaluate's under the same seed.
    scored = evaluate(HybridEnv(seed=3), obs_policy(spec)[0], episodes=12)["Hybrid"]
    assert summary.mean_reward == pytest.approx(scored["mean_reward"], rel=1e-6)
    assert demos.mean_reward == pytest.approx(summary.mean_reward, rel=1e-5)
    assert demos.episode_returns.std() == pytest.approx(scored["std_reward"], rel=1e-4)


@pytest.mark.parametrize("obs", ["vector", "visual", "grid"])
def test_gridworld_round_trip(tmp_path, obs):
    env = make("builtin:GridWorld", seed=1, num_areas=8, obs=obs)
    spec = env.behavior_specs["GridWorld"]
    path = str(tmp_path / f"{obs}.demo")
    if obs == "vector":
        policy, act = obs_policy(spec)
    else:
        policy = make_policy("heuristic", env)
    summary = record(env, policy, path, episodes=20)
    demos = load_demonstrations(path, spec=spec)
    assert demos.num_episodes == 20 and len(demos) == summary.steps
    if obs == "vector":
        check_transitions(demos, act)
    else:  # the heuristic from the image's planes: agent, goal, pit
        side = 20 if obs == "visual" else 5
        assert demos.obs[0].shape[1:] == (side, side, 3)
        assert set(np.unique(demos.obs[0])) == {0, 1}
        assert summary.mean_reward > 0.8
    assert demos.mean_reward == pytest.approx(summary.mean_reward, rel=1e-5)


def run(capsys, *argv):
    code = record_main(list(argv))
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_cli_records_the_heuristic_and_reports_it(tmp_path, capsys):
    path = tmp_path / "basic.demo"
    code, result, err = run(capsys, "builtin:Basic", "--policy", "heuristic", "--episodes",
                            "6", "--output", str(path), "--seed", "2")
    assert code == 0 and result["episodes"] == 6 and result["path"] == str(path)
    assert result["mean_reward"] == pytest.approx(0.93, abs=0.01)
    assert err.startswith(f"Basic: recorded 6 episodes, {result['steps']} steps, mean return")
    demos = load_demonstrations(str(path))
    assert demos.num_episodes == 6 and len(demos) == result["steps"]
    assert demos.mean_reward == pytest.approx(result["mean_reward"], rel=1e-5)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("argv,message", [
    (["--episodes", "0"], "--episodes must be >= 1, got 0"),
    (["--output", "x.dem"], "--output must end with .demo (ML-Agents reads only .demo files)"),
    (["--output", "no/such/x.demo"], "--output no/such/x.demo: no such folder"),
    (["--policy", "smart"], "unknown policy 'smart'; use heuristic"),
    (["--behavior", "Other"], "the env has no behavior 'Other'; it has Basic"),
    (["--env-args", "size=3"], "builtin:Basic: unknown env arg 'size'"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    base = {"--policy": "random", "--episodes": "2", "--output": "x.demo"}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    args = ["builtin:Basic"] + [item for pair in base.items() for item in pair]
    with pytest.raises(SystemExit) as exit_info:
        record_main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name,episodes,low", [("Pyramids", 6, 1.8), ("GridWorld", 100, 0.9),
                                               ("Basic", 100, 0.9), ("Ball3D", 15, 99)])
def test_the_committed_demos_fit_their_envs(name, episodes, low):
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "configs", "demos", f"{name}.demo")
    spec = make(f"builtin:{name}").behavior_specs[name]
    demos = load_demonstrations(path, spec=spec, behavior_name=name)
    assert demos.num_episodes == episodes and demos.mean_reward > low
