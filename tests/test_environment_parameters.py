"""environment_parameters: samplers and their seeds, lessons and when they advance, how the
values reach the envs, bad values (one line each), and a curriculum run that resumes."""
import csv
import glob
import json
import os

import numpy as np
import pytest
import yaml

from tftrainers.cli import learn_main
from tftrainers.environment_parameters import EnvironmentParameterManager, build_sampler
from tftrainers.envs import make
from tftrainers.envs.multi_env import MultiEnv
from tftrainers.envs.parameters import (ConstantSampler, GaussianSampler,
                                        MultiRangeUniformSampler, UniformSampler, for_worker,
                                        worker_sampler_seed)
from tftrainers.settings import ConfigError, RunOptions, load_run_options

DATA = os.path.join(os.path.dirname(__file__), "data")


def options(parameters, behaviors=("Basic",)):
    return RunOptions.from_dict({"behaviors": {b: {"trainer_type": "ppo"} for b in behaviors},
                                 "environment_parameters": parameters})


def curriculum(*thresholds, measure="reward", min_lesson_length=0, smoothing=True,
               behavior="Basic"):
    lessons = [{"name": f"L{i}", "value": float(i),
                "completion_criteria": {"behavior": behavior, "measure": measure,
                                        "threshold": t, "min_lesson_length": min_lesson_length,
                                        "signal_smoothing": smoothing}}
               for i, t in enumerate(thresholds)]
    return {"curriculum": lessons + [{"name": "last", "value": 99.0}]}


# --- samplers ---------------------------------------------------------------------------------
def test_samplers_draw_their_distributions():
    n = 20000
    uniform = UniformSampler(2.0, 4.0, seed=1).sample(n)
    assert uniform.min() >= 2.0 and uniform.max() <= 4.0
    assert abs(uniform.mean() - 3.0) < 0.02 and abs(uniform.std() - 2 / np.sqrt(12)) < 0.01
    gauss = GaussianSampler(5.0, 0.5, seed=1).sample(n)
    assert abs(gauss.mean() - 5.0) < 0.02 and abs(gauss.std() - 0.5) < 0.01
    multi = MultiRangeUniformSampler([[0.0, 1.0], [2.0, 5.0]], seed=1).sample(n)
    assert np.all(((multi >= 0) & (multi <= 1)) | ((multi >= 2) & (multi <= 5)))
    # An interval is picked in proportion to its length: 1 of 4 in [0, 1].
    assert abs(np.mean(multi <= 1.0) - 0.25) < 0.015
    assert np.all(ConstantSampler(3.5).sample(4) == 3.5)


def test_a_seed_gives_the_same_values_and_another_seed_others():
    first = UniformSampler(0.0, 1.0, seed=7).sample(5)
    np.testing.assert_array_equal(first, UniformSampler(0.0, 1.0, seed=7).sample(5))
    np.testing.assert_array_equal(first, np.random.default_rng(7).uniform(0.0, 1.0, 5))
    assert not np.array_equal(first, UniformSampler(0.0, 1.0, seed=8).sample(5))
    # Known answer: seed 7's first draw, pinned so that a change of stream is noticed.
    assert first[0] == pytest.approx(0.6250955, abs=1e-6)


def test_seeds_of_minus_one_count_from_the_run_seed_in_file_order():
    opts = options({"a": curriculum(0.5), "b": {"sampler_type": "uniform",
                                                 "sampler_parameters": {"seed": 42}},
                    "c": {"sampler_type": "gaussian", "sampler_parameters": {}}})
    manager = EnvironmentParameterManager(opts.environment_parameters, run_seed=100)
    seeds = {name: [s.seed for s in samplers] for name, samplers in manager._samplers.items()}
    # a: two lessons (100, 101); b keeps its own seed (offset 102 is used up); c: 103.
    assert seeds == {"a": [100, 101], "b": [42], "c": [103]}


def test_each_worker_draws_its_own_reproducible_values():
    seeds = [worker_sampler_seed(5, w) for w in range(8)]
    assert seeds[0] == 5 and len(set(seeds)) == 8
    assert seeds == [worker_sampler_seed(5, w) for w in range(8)]
    draws = [for_worker({"h": UniformSampler(0, 8, seed=5)}, w)["h"].sample(3) for w in range(3)]
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[1], draws[2])
    np.testing.assert_array_equal(
        draws[1], for_worker({"h": UniformSampler(0, 8, seed=5)}, 1)["h"].sample(3))


def test_env_instances_get_distinct_sampler_seeds():
    env = MultiEnv([make("builtin:WallJump", seed=k, num_areas=4, wall="big") for k in range(2)])
    env.set_environment_parameters({"big_wall_height": UniformSampler(0.0, 8.0, seed=3)})
    env.reset()
    heights = [e.envs["BigWallJump"].parameter_values["big_wall_height"] for e in env.envs]
    np.testing.assert_array_equal(heights[0], UniformSampler(0.0, 8.0, seed=3).sample(4))
    assert not np.array_equal(heights[0], heights[1])


def test_env_workers_each_get_their_own_sampler_seed():
    from tftrainers.acting.worker_pool import ProcessLauncher, WorkerPool
    pool = WorkerPool(ProcessLauncher(), "builtin:WallJump", {"wall": "big"}, 2, 3, 0, {})
    try:
        assert pool._setup(pool.slots[0]).environment_parameters is None
        pool.send_environment_parameters({"big_wall_height": UniformSampler(0, 8, seed=9)})
        setups = [pool._setup(slot).environment_parameters["big_wall_height"]
                  for slot in pool.slots]
        assert [s.seed for s in setups] == [worker_sampler_seed(9, k) for k in range(3)]
        assert setups[0].seed == 9 and len({s.seed for s in setups}) == 3
    finally:
        pool.close()


# --- how values reach an env ------------------------------------------------------------------
def test_area_envs_draw_a_value_per_area_at_each_reset_of_the_area():
    env = make("builtin:WallJump", seed=0, num_areas=3, wall="big").envs["BigWallJump"]
    assert env.environment_parameter_names == ("big_wall_height",)
    np.testing.assert_array_equal(env.parameter_values["big_wall_height"], [8.0, 8.0, 8.0])
    env.set_environment_parameters({"big_wall_height": UniformSampler(0.0, 4.0, seed=1)})
    env.reset()
    expected = np.random.default_rng(1).uniform(0.0, 4.0, 6)
    np.testing.assert_array_equal(env.parameter_values["big_wall_height"], expected[:3])
    np.testing.assert_array_equal(env.climbs, np.ceil(1.5 * expected[:3]))  # jumps
    env._restart(np.array([1]))  # only area 1 starts a new episode: only it draws again
    np.testing.assert_array_equal(env.parameter_values["big_wall_height"],
                                  [expected[0], expected[3], expected[2]])


def test_builtins_declare_what_they_read_and_refuse_the_rest():
    assert make("builtin:Ball3D").environment_parameter_names == ("gravity", "scale", "mass")
    assert make("builtin:Basic").environment_parameter_names == ("large_goal_distance",)
    assert make("builtin:GridWorld").environment_parameter_names == ()
    with pytest.raises(ValueError, match=r"^builtin:WallJump: unknown environment parameter "
                                         r"'gravity'; it reads: big_wall_height, "
                                         r"small_wall_height$"):
        make("builtin:WallJump").set_environment_parameters({"gravity": 9.81})
    with pytest.raises(ValueError, match=r"^builtin:GridWorld: unknown environment parameter "
                                         r"'size'; it reads: none$"):
        make("builtin:GridWorld").set_environment_parameters({"size": 5})


def test_basic_reads_its_goal_distance():
    env = make("builtin:Basic", seed=0, num_areas=1)
    env.set_environment_parameters({"large_goal_distance": 2})
    env.reset()
    rewards = []
    for _ in range(2):  # two steps right reach the goal at 12
        env.set_actions("Basic", env.heuristic("Basic", env.get_steps("Basic")[0]))
        env.step()
        rewards.append(env.get_steps("Basic")[1].reward)
    assert rewards[1].tolist() == pytest.approx([0.99])


def test_gym_envs_get_values_through_their_hook():
    gymnasium = pytest.importorskip("gymnasium")

    class Hooked(gymnasium.Env):
        environment_parameter_names = ("goal",)
        observation_space = gymnasium.spaces.Box(-10, 10, (1,))
        action_space = gymnasium.spaces.Discrete(2)
        goal = -1.0

        def set_environment_parameters(self, values):
            self.goal = values["goal"]

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.array([self.goal], np.float32), {}

        def step(self, action):
            return np.array([self.goal], np.float32), 0.0, True, False, {}

    gymnasium.register("HookedEnv-v0", entry_point=Hooked)
    env = make("gym:HookedEnv-v0", num_areas=3)
    assert env.environment_parameter_names == ("goal",)
    env.set_environment_parameters({"goal": UniformSampler(0.0, 1.0, seed=4)})
    env.reset()
    obs = env.get_steps("HookedEnv-v0")[0].obs[0][:, 0]
    np.testing.assert_allclose(obs, np.random.default_rng(4).uniform(0, 1, 3), rtol=1e-6)


class _HookedParallel:
    """A PettingZoo parallel env of two agents whose observation is its parameter "goal"."""

    metadata = {"name": "hooked_v0"}
    environment_parameter_names = ("goal",)

    def __init__(self):
        from gymnasium import spaces
        self.possible_agents = ["agent_0", "agent_1"]
        self._space = spaces.Box(-10, 10, (1,), np.float32)
        self._actions = spaces.Discrete(2)
        self.goal = -1.0

    def observation_space(self, agent):
        return self._space

    def action_space(self, agent):
        return self._actions

    def set_environment_parameters(self, values):
        self.goal = values["goal"]

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return ({a: np.array([self.goal], np.float32) for a in self.agents},
                {a: {} for a in self.agents})

    def step(self, actions):
        obs = {a: np.array([self.goal], np.float32) for a in actions}
        self.agents = []
        return (obs, dict.fromkeys(actions, 0.0), dict.fromkeys(actions, True),
                dict.fromkeys(actions, False), {a: {} for a in actions})


def parallel_env():
    return _HookedParallel()


def test_pettingzoo_envs_get_one_value_per_copy_through_their_hook():
    env = make(f"pettingzoo:{__name__}", num_areas=3)
    assert env.environment_parameter_names == ("goal",)
    env.set_environment_parameters({"goal": UniformSampler(0.0, 1.0, seed=4)})
    env.reset()
    obs = env.get_steps("agent")[0].obs[0][:, 0]  # rows: copy k's agents are 2k, 2k + 1
    expected = np.random.default_rng(4).uniform(0, 1, 3)
    np.testing.assert_allclose(obs, np.repeat(expected, 2), rtol=1e-6)


# --- lessons ----------------------------------------------------------------------------------
def test_reward_lessons_advance_on_the_smoothed_mean_after_min_lesson_length():
    opts = options({"p": curriculum(0.9, min_lesson_length=3)})
    manager = EnvironmentParameterManager(opts.environment_parameters)
    assert manager.reward_buffer_size("Basic") == 3
    # Two episodes: fewer than min_lesson_length, no change (and no smoothing yet).
    assert manager.update({"Basic": 0.0}, {"Basic": [1.0, 1.0]}) == (False, False)
    assert manager.smoothed["p"] == 0.0
    # Smoothed 0.25 * 0 + 0.75 * 1 = 0.75: not above 0.9.
    assert manager.update({"Basic": 0.0}, {"Basic": [1.0, 1.0, 1.0]}) == (False, False)
    assert manager.smoothed["p"] == pytest.approx(0.75)
    # 0.25 * 0.75 + 0.75 = 0.9375 > 0.9: next lesson.
    assert manager.update({"Basic": 0.0}, {"Basic": [1.0, 1.0, 1.0]}) == (True, False)
    assert manager.lessons == {"p": 1} and manager.lesson_names() == {"p": "last"}
    assert repr(manager.samplers()["p"]) == "99"
    # The last lesson stays.
    assert manager.update({"Basic": 1.0}, {"Basic": [5.0] * 3}) == (False, False)


def test_without_smoothing_the_mean_must_be_strictly_above_the_threshold():
    opts = options({"p": curriculum(0.5, 0.5, smoothing=False)})
    manager = EnvironmentParameterManager(opts.environment_parameters)
    assert manager.update({}, {"Basic": [0.5, 0.5]}) == (False, False)
    assert manager.update({}, {"Basic": [0.5, 0.7]}) == (True, False)
    assert manager.lessons == {"p": 1}  # one lesson per call at most
    assert manager.update({}, {"Basic": [0.5, 0.7]}) == (True, False)
    assert manager.lessons == {"p": 2}


def test_progress_lessons_need_min_lesson_length_too():
    opts = options({"p": curriculum(0.1, measure="progress", min_lesson_length=2)})
    manager = EnvironmentParameterManager(opts.environment_parameters)
    assert manager.update({"Basic": 0.5}, {"Basic": [0.0]}) == (False, False)
    assert manager.update({"Basic": 0.1}, {"Basic": [0.0, 0.0]}) == (False, False)
    assert manager.update({"Basic": 0.11}, {"Basic": [0.0, 0.0]}) == (True, False)


def test_require_reset_and_unmeasured_behaviors():
    parameters = curriculum(0.0, smoothing=False, behavior="Other")
    parameters["curriculum"][0]["completion_criteria"]["require_reset"] = True
    manager = EnvironmentParameterManager(options({"p": parameters},
                                                  ("Basic", "Other")).environment_parameters)
    assert manager.update({"Basic": 1.0}, {"Basic": [1.0]}) == (False, False)  # not measured
    assert manager.update({"Other": 0.0}, {"Other": [1.0]}) == (True, True)


def test_lessons_restore_from_the_furthest_checkpoint():
    opts = options({"p": curriculum(0.5, 0.5), "q": curriculum(0.5)})
    manager = EnvironmentParameterManager(opts.environment_parameters)
    manager.lessons["p"], manager.smoothed["p"] = 2, 0.8
    state = json.loads(json.dumps(manager.state()))
    assert state["p"] == {"lesson": 2, "name": "last", "smoothed": 0.8}
    again = EnvironmentParameterManager(opts.environment_parameters)
    again.restore([{"p": {"lesson": 1, "smoothed": 0.1}}, state, None,
                   {"gone": {"lesson": 3}}])
    assert again.lessons == {"p": 2, "q": 0} and again.smoothed["p"] == 0.8


# --- bad values, one line each ----------------------------------------------------------------
def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text("behaviors:\n  Basic:\n    trainer_type: ppo\n" + text)
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("environment_parameters:\n  w:\n    curriculum:\n"
     "    - {name: a, value: 1, completion_criteria: {behavior: Basic, threshold: 0.5}}\n"
     "    - {name: b, value: 2, completion_criteria: {behavior: Basic, threshold: 0.5}}\n",
     "environment_parameters.w.curriculum[1].completion_criteria: is set on the last lesson, "
     "so the curriculum has no final lesson; allowed: no completion_criteria on the last "
     "lesson (add the lesson it should lead to)"),
    ("environment_parameters:\n  w:\n    curriculum:\n"
     "    - {name: a, value: 1, completion_criteria: {behavior: Walker, threshold: 0.5}}\n"
     "    - {name: b, value: 2}\n",
     "environment_parameters.w.curriculum[0].completion_criteria.behavior: 'Walker' is not a "
     "behavior of this config; allowed: Basic"),
    ("environment_parameters:\n  w: {sampler_type: uniform, sampler_parameters: "
     "{min_value: 3, max_value: 1}}\n",
     "environment_parameters.w.curriculum[0].value.sampler_parameters.min_value: 3.0 is out "
     "of range"),
    ("environment_parameters:\n  w: {sampler_type: beta, sampler_parameters: {}}\n",
     "environment_parameters.w.curriculum[0].value.sampler_type: 'beta' is not a known"),
])
def test_bad_values_are_one_line(tmp_path, text, message):
    with pytest.raises(ConfigError) as error:
        load_run_options(write(tmp_path, text))
    line = str(error.value)
    assert "\n" not in line and message in line, line


def test_a_criterion_naming_a_behavior_the_env_lacks_is_one_line(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({
        "default_settings": {"trainer_type": "ppo", "max_steps": 100},
        "environment_parameters": {"large_goal_distance": {"curriculum": [
            {"name": "a", "value": 1, "completion_criteria": {"behavior": "Walker"}},
            {"name": "b", "value": 2}]}}}))
    with pytest.raises(SystemExit) as code:
        learn_main([str(path), "--env", "builtin:Basic", "--results-dir", str(tmp_path)])
    assert code.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "environment_parameters.large_goal_distance.curriculum[0].completion_criteria.behavior:"
        " 'Walker' is not a behavior of the environment; allowed: Basic")


def test_an_unknown_parameter_of_a_builtin_is_one_line(tmp_path, capsys):
    path = write(tmp_path, "environment_parameters: {gravity: 9.81}\n")
    with pytest.raises(SystemExit) as code:
        learn_main([path, "--env", "builtin:Basic", "--results-dir", str(tmp_path)])
    assert code.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "environment_parameters: builtin:Basic: unknown environment parameter 'gravity'; it "
        "reads: large_goal_distance")


# --- ML-Agents' WallJump config ---------------------------------------------------------------
def test_ml_agents_walljump_curriculum_resolves_without_notes(capsys):
    assert learn_main([os.path.join(DATA, "mlagents_walljump_curriculum.yaml"), "--env",
                       "builtin:WallJump", "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # no [NOTE]: environment_parameters take effect
    resolved = yaml.safe_load(out)
    lessons = resolved["environment_parameters"]["big_wall_height"]["curriculum"]
    assert [x["name"] for x in lessons] == ["Lesson0", "Lesson1", "Lesson2", "Lesson3"]
    assert lessons[1]["completion_criteria"]["threshold"] == 0.3
    env = make(resolved["env_settings"]["env_path"])
    assert set(env.behavior_specs) == set(resolved["behaviors"])
    assert set(env.environment_parameter_names) == set(resolved["environment_parameters"])


def test_lessons_keyed_by_name_are_read_as_named_lessons():
    keyed = {"w": {"curriculum": [
        {"Lesson0": {"completion_criteria": {"behavior": "Basic", "threshold": 0.1,
                                             "measure": "progress"}, "value": 1.0}},
        {"Lesson1": {"value": 2.0}}]}}
    lessons = options(keyed).environment_parameters["w"].curriculum
    assert [x.name for x in lessons] == ["Lesson0", "Lesson1"]
    assert build_sampler(lessons[1].value, 0).sample(1)[0] == 2.0


# --- a curriculum run: lessons advance, the policy beats random, resume continues -------------
def lesson_of(run_dir):
    states = sorted(glob.glob(os.path.join(run_dir, "BigWallJump", "checkpoints", "*",
                                           "state.json")), key=os.path.getmtime)
    with open(states[-1]) as f:
        return json.load(f)["run"]["environment_parameters"]["big_wall_height"]


def test_walljump_curriculum_learns_and_resumes_its_lesson(tmp_path, capsys):
    with open("configs/curriculum/WallJump.yaml") as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["BigWallJump"]
    behavior.update(max_steps=40000, summary_freq=5000, checkpoint_interval=20000)
    for lesson in config["environment_parameters"]["big_wall_height"]["curriculum"][:-1]:
        lesson["completion_criteria"]["threshold"] = 0.2  # a tiny budget: lower the bar
    path = tmp_path / "wj.yaml"
    path.write_text(yaml.safe_dump(config))
    args = [str(path), "--run-id", "wj", "--seed", "0", "--results-dir", str(tmp_path)]
    assert learn_main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "wj"
    lesson = lesson_of(run)
    assert lesson["lesson"] >= 1, out  # the wall rose at least once
    with open(run / "run_logs" / "BigWallJump.csv") as f:
        rows = list(csv.DictReader(f))
    stat = [float(r["Environment/Lesson Number/big_wall_height"]) for r in rows]
    assert stat[0] == 0 and stat[-1] == lesson["lesson"]
    # The policy beats random by a clear margin (random: -0.34, every episode cut at 64
    # steps without reaching the goal) on the lessons' walls; after a lesson ends the
    # reward drops on the higher walls, so the best summary is compared.
    assert max(float(r["Environment/Cumulative Reward"]) for r in rows) > 0.0, out
    # Resume for 4k more steps: the lesson continues where the checkpoint left it.
    behavior["max_steps"] = 44000
    path.write_text(yaml.safe_dump(config))
    assert learn_main(args + ["--resume"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if "Parameter 'big_wall_height'" in line)
    n = len(config["environment_parameters"]["big_wall_height"]["curriculum"])
    assert f"in lesson '{lesson['name']}' ({lesson['lesson'] + 1} of {n})" in first, out
    assert lesson_of(run)["lesson"] >= lesson["lesson"]


def test_require_reset_ends_every_episode_and_the_run_goes_on(tmp_path, capsys):
    path = tmp_path / "basic.yaml"
    path.write_text(yaml.safe_dump({
        "behaviors": {"Basic": {"trainer_type": "ppo", "max_steps": 600, "summary_freq": 300,
                                "hyperparameters": {"batch_size": 32, "buffer_size": 128}}},
        "environment_parameters": {"large_goal_distance": {"curriculum": [
            {"name": "near", "value": 2,
             "completion_criteria": {"behavior": "Basic", "measure": "progress",
                                     "threshold": 0.6, "require_reset": True}},
            {"name": "far", "value": 7}]}}}))
    assert learn_main([str(path), "--env", "builtin:Basic", "--run-id", "b", "--seed", "0",
                       "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Parameter 'large_goal_distance' is in lesson 'far' (2 of 2)" in out, out
    with open(tmp_path / "b" / "run_logs" / "Basic.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["Environment/Lesson Number/large_goal_distance"]) for r in rows] == [0, 1]
