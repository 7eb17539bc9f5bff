"""Boundary validation, make(), and the env checker catching broken envs."""
import numpy as np
import pytest

from tftrainers.envs import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                             EnvCheckError, ObservationSpec, TerminalSteps, check_env, make)
from tftrainers.envs.agent_rows import AgentRows


def test_set_actions_wrong_shape_names_behavior_expected_and_given():
    env = make("builtin:Ball3D", num_areas=1)
    env.reset()
    with pytest.raises(ValueError, match=r"set_actions\('Ball3D'\): expected continuous actions "
                                         r"of shape \(12, 2\), got \(12, 3\)"):
        env.set_actions("Ball3D", ActionTuple(np.zeros((12, 3), np.float32),
                                              np.zeros((12, 0), np.int32)))


def test_set_actions_wrong_dtype_and_out_of_range_index():
    env = make("builtin:GridWorld", num_areas=2)
    env.reset()
    no_c = np.zeros((2, 0), np.float32)
    with pytest.raises(ValueError, match=r"'GridWorld'.*discrete actions of an int dtype, "
                                         r"got float32"):
        env.set_actions("GridWorld", ActionTuple(no_c, np.zeros((2, 1), np.float32)))
    with pytest.raises(ValueError, match=r"'GridWorld'.*branch 0 takes indices 0..4, got 5"):
        env.set_actions("GridWorld", ActionTuple(no_c, np.array([[1], [5]], np.int32)))
    with pytest.raises(ValueError, match=r"expected discrete actions of shape \(2, 1\), got \(3, 1\)"):
        env.set_actions("GridWorld", ActionTuple(no_c, np.zeros((3, 1), np.int32)))


def test_unknown_env_ids_list_the_builtins():
    with pytest.raises(ValueError, match=r"unknown env id 'Basic'; use builtin:NAME "
                                         r"\(Ball3D, Basic, BasicGoal, DungeonEscape, GridWorld, "
                                         r"Hallway, PushBlockCollab, Pyramids, SoccerTwos, Sorter, "
                                         r"Tennis, WallJump\)"):
        make("Basic")
    with pytest.raises(ValueError, match=r"unknown built-in env 'Bsic'; built-ins: "
                                         r"Ball3D, Basic, BasicGoal, DungeonEscape, GridWorld, "
                                         r"Hallway, PushBlockCollab, Pyramids, SoccerTwos, Sorter, "
                                         r"Tennis, WallJump"):
        make("builtin:Bsic")


def test_bad_env_args():
    with pytest.raises(ValueError, match=r"unknown env arg 'ob'; allowed: obs, step_latency_ms"):
        make("builtin:GridWorld", ob="visual")
    with pytest.raises(ValueError, match=r"obs='image' is not allowed; allowed: vector, visual"):
        make("builtin:GridWorld", obs="image")
    with pytest.raises(ValueError, match=r"length='long' must be an int"):
        make("builtin:Hallway", length="long")
    with pytest.raises(ValueError, match=r"unknown env arg 'obs'; allowed: step_latency_ms, "
                                         r"unity_steps$"):
        make("builtin:Basic", obs="visual")
    with pytest.raises(ValueError, match=r"unity_steps='yes' must be bool"):
        make("builtin:Basic", unity_steps="yes")
    with pytest.raises(ValueError, match=r"step_latency_ms must be >= 0, got -1.0"):
        make("builtin:Basic", step_latency_ms=-1)


def test_step_latency_makes_each_instance_step_that_long():
    import time
    env = make("builtin:Ball3D", seed=0, num_envs=3, step_latency_ms=20)
    env.reset()
    start = time.perf_counter()
    env.step()
    assert time.perf_counter() - start >= 3 * 0.020  # three instances, one after another
    fast = make("builtin:Ball3D", seed=0, num_envs=3)
    assert fast.num_areas == 3  # without latency: one env of more areas


def test_random_actions_respect_masks():
    spec = ActionSpec(1, (3, 4))
    rng = np.random.default_rng(0)
    mask = [rng.random((500, 3)) < 0.5, rng.random((500, 4)) < 0.6]
    for m in mask:
        m[np.arange(500), rng.integers(0, m.shape[1], 500)] = False  # one allowed at least
    actions = spec.random_action(500, rng, mask)
    for b, m in enumerate(mask):
        assert not m[np.arange(500), actions.discrete[:, b]].any()
    assert np.all(np.abs(actions.continuous) <= 1.0)


def test_agent_rows_are_dense_and_stable():
    rows = AgentRows()
    assert rows.rows(np.array([10, 3, 7])).tolist() == [0, 1, 2]
    assert rows.rows(np.array([7, 42, 10, 5])).tolist() == [2, 3, 0, 4]
    assert rows.rows(np.array([5, 3])).tolist() == [4, 1]
    assert len(rows) == 5


class BrokenEnv(BaseEnv):
    """Breaks the API in the ways the checker must see."""

    def __init__(self, flaw):
        self.flaw = flaw
        self.spec = BehaviorSpec([ObservationSpec((3,), "o")], ActionSpec.create_discrete([2]))

    @property
    def behavior_specs(self):
        return {"B": self.spec}

    def reset(self):
        pass

    def step(self):
        pass

    def set_actions(self, name, actions):
        if self.flaw != "accepts_anything" and len(actions.discrete) != 2:
            raise ValueError("wrong number of agents")

    def get_steps(self, name):
        obs = np.zeros((2, 3), np.float32)
        mask = [np.zeros((2, 2), bool)]
        if self.flaw == "nan":
            obs[1, 2] = np.nan
        if self.flaw == "shape":
            obs = np.zeros((2, 4), np.float32)
        if self.flaw == "all_masked":
            mask = [np.ones((2, 2), bool)]
        decision = DecisionSteps([obs], np.zeros(2, np.float32), np.array([0, 1], np.int32), mask)
        terminal = TerminalSteps.empty(self.spec)
        if self.flaw == "both":
            terminal = TerminalSteps([obs[:1]], np.zeros(1, np.float32), np.zeros(1, bool),
                                     np.array([1], np.int32))
        return decision, terminal


@pytest.mark.parametrize("flaw,message", [
    ("nan", r"obs\[0\] \('o'\): holds NaN or inf"),
    ("shape", r"expected shape \(2, 3\), got \(2, 4\)"),
    ("all_masked", r"every action of the branch is masked"),
    ("accepts_anything", r"set_actions accepted actions for 3 agents when 2 asked"),
])
def test_checker_reports_violations(flaw, message):
    with pytest.raises(EnvCheckError, match=message):
        check_env(BrokenEnv(flaw), n_steps=5)


@pytest.mark.parametrize("convention", ["none", "both"])
def test_checker_passes_a_correct_env(convention):
    # "both": agent 1 ends and restarts at every step, listed in terminal and decision
    # steps with the same id as Unity reports it; an accepted convention
    # (docs/dev/architecture.md#env-api).
    report = check_env(BrokenEnv(convention), n_steps=5)["B"]
    assert report["decisions"] == 12 and report["episodes"] == (6 if convention == "both" else 0)


def test_multi_env_merges_instances_and_routes_actions():
    from tftrainers.envs.multi_env import MultiEnv
    env = MultiEnv([make("builtin:GridWorld", seed=s, num_areas=3) for s in (1, 2)])
    assert check_env(env, n_steps=100)["GridWorld"]["decisions"] > 0
    env.reset()
    decision, _ = env.get_steps("GridWorld")
    assert decision.agent_id.tolist() == [0, 2, 4, 1, 3, 5]
    actions = env.heuristic("GridWorld", decision)
    direct = env.envs[1].heuristic("GridWorld", env.envs[1].get_steps("GridWorld")[0])
    assert np.array_equal(actions.discrete[3:], direct.discrete)
    env.set_actions("GridWorld", actions)
    env.step()


@pytest.mark.parametrize("env_id, num_areas, agents", [
    ("builtin:GridWorld", None, 3 * 16),  # GridWorld's default: 16 areas
    ("builtin:Ball3D", 2, 3 * 2 * 12),  # 12 agents per area
    ("gym:CartPole-v1", None, 3),
    ("gym:CartPole-v1", 4, 12),
])
def test_num_envs_of_an_in_process_env_is_one_env_with_more_areas(env_id, num_areas, agents):
    if env_id.startswith("gym:"):
        pytest.importorskip("gymnasium")
    env = make(env_id, seed=5, num_areas=num_areas, num_envs=3)
    env.reset()
    (name,) = env.behavior_specs
    decision, _ = env.get_steps(name)
    assert len(decision) == agents
    # the areas (gym copies) are not clones: each has its own random start
    assert len(np.unique(decision.obs[0], axis=0)) > agents // 2
    env.close()
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        make(env_id, num_envs=0)
