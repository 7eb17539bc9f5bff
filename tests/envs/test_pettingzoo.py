"""The PettingZoo adapter: pettingzoo:MODULE.ENV, behaviors, groups, and parity with the raw env."""
import functools

import numpy as np
import pytest
from gymnasium import spaces

pytest.importorskip("mpe2")
from mpe2 import simple_spread_v3  # noqa: E402
from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.test import parallel_api_test  # noqa: E402

from tftrainers.envs import ActionTuple, check_env, make  # noqa: E402
from tftrainers.envs.pettingzoo_adapter import behavior_of_names  # noqa: E402

SPREAD = "pettingzoo:mpe2.simple_spread_v3"


def test_simple_spread_passes_the_checker_as_one_group_per_copy():
    env = make(SPREAD, num_areas=3, seed=1)
    report = check_env(env, n_steps=120)
    assert report["agent"]["episodes"] == 4 * 3 * 3  # 25-step episodes, 3 agents, 3 copies
    assert report["agent"]["interrupted"] == report["agent"]["episodes"]  # max_cycles
    spec = env.behavior_specs["agent"]
    assert spec.observation_specs[0].shape == (18,) and spec.action_spec.discrete_branches == (5,)
    decision, _ = env.get_steps("agent")
    assert decision.group_id.tolist() == [1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_rewards_and_observations_match_the_raw_env_under_the_same_seed_and_actions():
    copies, seed = 2, 5
    env = make(SPREAD, num_areas=copies, seed=seed)
    raw = [simple_spread_v3.parallel_env() for _ in range(copies)]
    raw_obs = [r.reset(seed=seed + k)[0] for k, r in enumerate(raw)]
    names = raw[0].possible_agents
    env.reset()
    decision, _ = env.get_steps("agent")
    expected = np.stack([raw_obs[k][a] for k in range(copies) for a in names])
    assert np.array_equal(decision.obs[0], expected)
    rng = np.random.default_rng(0)
    for t in range(25):
        actions = rng.integers(0, 5, (len(decision), 1)).astype(np.int32)
        env.set_actions("agent", ActionTuple(np.zeros((len(decision), 0), np.float32), actions))
        env.step()
        decision, terminal = env.get_steps("agent")
        steps = decision if t < 24 else terminal
        results = [r.step({a: int(actions[k * 3 + j, 0]) for j, a in enumerate(names)})
                   for k, r in enumerate(raw)]
        assert steps.agent_id.tolist() == list(range(copies * 3))
        assert steps.reward.tolist() == pytest.approx(
            [results[k][1][a] for k in range(copies) for a in names], abs=1e-6)
        assert np.allclose(steps.obs[0], [results[k][0][a] for k in range(copies) for a in names])
    assert terminal.interrupted.all() and len(decision) == 0
    # Every copy restarts (unseeded, as gymnasium's autoreset) after its agents sat out a step.
    env.step()
    decision, _ = env.get_steps("agent")
    again = [r.reset()[0] for r in raw]
    again = np.stack([obs[a] for obs in again for a in names])
    assert np.array_equal(decision.obs[0], again)


def test_the_raw_env_passes_pettingzoos_own_parallel_api_test():
    parallel_api_test(simple_spread_v3.parallel_env(), num_cycles=30)


def test_behaviors_by_name_prefix_and_spaces():
    env = make("pettingzoo:mpe2.simple_adversary_v3", num_areas=2)
    assert sorted(env.behavior_specs) == ["adversary", "agent"]
    env.reset()
    assert env.get_steps("adversary")[0].group_id.tolist() == [1, 2]
    assert env.get_steps("agent")[0].agent_id.tolist() == [0, 1, 2, 3]
    box, other = spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (4,))
    obs = {"agent_0": box, "agent_1": box, "agent_2": other, "agent_10": box, "bob": box}
    act = dict.fromkeys(obs, spaces.Discrete(2))
    assert behavior_of_names(list(obs), obs.get, act.get) == {
        "agent_0": ["agent_0", "agent_1", "agent_10"], "agent_2": ["agent_2"], "bob": ["bob"]}


class _Leaving(ParallelEnv):
    """Three agents; ``agent_1`` terminates after 2 steps, the others are truncated at 4."""

    metadata = {"name": "leaving_v0"}

    def __init__(self):
        self.possible_agents = ["agent_0", "agent_1", "agent_2"]

    @functools.lru_cache(None)
    def observation_space(self, agent):
        return spaces.Box(0, 10, (1,), np.float32)

    @functools.lru_cache(None)
    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in actions}
        reward = {a: float(actions[a]) + self.t for a in actions}
        term = {a: a == "agent_1" and self.t == 2 for a in actions}
        trunc = {a: self.t == 4 for a in actions}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, reward, term, trunc, {a: {} for a in actions}


def parallel_env():
    return _Leaving()


def test_an_agent_that_terminates_early_leaves_its_group_and_the_copy_resets_when_all_are_done():
    env = make(f"pettingzoo:{__name__}", num_areas=1)
    assert check_env(env, n_steps=30)["agent"]["episodes"] > 0
    env.reset()
    seen = []
    for _ in range(6):
        decision, terminal = env.get_steps("agent")
        seen.append((decision.agent_id.tolist(), terminal.agent_id.tolist(),
                     terminal.interrupted.tolist(), terminal.reward.tolist()))
        env.set_actions("agent", ActionTuple(np.zeros((len(decision), 0), np.float32),
                                             np.ones((len(decision), 1), np.int32)))
        env.step()
    assert seen == [([0, 1, 2], [], [], []), ([0, 1, 2], [], [], []),
                    ([0, 2], [1], [False], [3.0]),  # agent_1 terminated at t=2, then absent
                    ([0, 2], [], [], []),
                    ([], [0, 2], [True, True], [5.0, 5.0]),  # truncated at t=4
                    ([0, 1, 2], [], [], [])]  # the copy restarted: all three back


def test_bad_pettingzoo_ids():
    with pytest.raises(ValueError, match=r"pettingzoo:mpe2.nothing_v0: cannot import module"):
        make("pettingzoo:mpe2.nothing_v0")
    with pytest.raises(ValueError, match=r"pettingzoo:numpy: module 'numpy' has no "
                                         r"parallel_env\(\)"):
        make("pettingzoo:numpy")
    with pytest.raises(ValueError, match=r"bad env args"):
        make(SPREAD, no_such_arg=1)
