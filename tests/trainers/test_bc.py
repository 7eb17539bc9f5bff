"""trainer_type bc: learning in teacher and dagger modes, teachers from a run / .onnx /
SavedModel, brain_to_imitate, offline demos, resume, and every bad-input error."""
import os
import textwrap

import numpy as np
import pytest

import tftrainers.runner as runner
from tftrainers.acting.imitation import teacher_rows
from tftrainers.cli import learn_main
from tftrainers.envs import ActionTuple, BaseEnv, make
from tftrainers.evaluate import RandomPolicy, evaluate
from tftrainers.settings import ConfigError
from tftrainers.trainers.bc.teachers import model_teacher

from .helpers import drive, make_trainer, manager_of, trainer_settings, variables

DEMOS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "demos")


def bc_settings(name="Basic", max_steps=2500, **hyperparameters):
    hp = {"teacher": "heuristic", "batch_size": 64, "buffer_size": 4000, "num_epoch": 3,
          "batches_per_epoch": 10, "learning_rate": 3.0e-3, **hyperparameters}
    return trainer_settings(name, trainer_type="bc", hyperparameters=hp,
                            network_settings={"hidden_units": 20, "num_layers": 2},
                            max_steps=max_steps, time_horizon=8, summary_freq=1000)


def student_return(trainer, env_id="builtin:Basic", episodes=40):
    actor = trainer.policy.make_actor("tensorflow", seed=3)
    env = make(env_id, seed=11)

    def policy(name, decision):
        return actor.act(decision)[1]
    return evaluate(env, policy, episodes=episodes)["Basic"]["mean_reward"]


@pytest.fixture(scope="module")
def random_basic():
    env = make("builtin:Basic", seed=11)
    return evaluate(env, RandomPolicy(env, seed=0), episodes=40)["Basic"]["mean_reward"]


@pytest.fixture(scope="module")
def trained_basic(tmp_path_factory, random_basic):
    """A student trained in teacher mode (also the teacher run of later tests)."""
    run = tmp_path_factory.mktemp("teacher_run")
    env = make("builtin:Basic", seed=0)
    env.reset()
    trainer = make_trainer(run, env, "Basic", bc_settings(), seed=0)
    drive(env, trainer, 400)
    trainer.save()
    with open(os.path.join(run, "configuration.yaml"), "w") as f:
        f.write(textwrap.dedent("""
            behaviors:
              Basic:
                trainer_type: bc
                hyperparameters: {teacher: heuristic}
                network_settings: {hidden_units: 20, num_layers: 2}
        """))
    return run, trainer


def test_teacher_rows_spread_the_share_evenly():
    assert teacher_rows(8, 0.5).tolist() == [False, True] * 4
    assert teacher_rows(4, 1.0).all()
    assert teacher_rows(10, 0.3).sum() == 3


def test_teacher_mode_learns_basic(trained_basic, random_basic):
    _, trainer = trained_basic
    # The heuristic returns ~0.93; a random policy about 0.05 on Basic.
    assert trainer.step >= 2500
    assert trainer.labels > 1000
    assert student_return(trainer) > random_basic + 0.6


def test_dagger_learns_basic_and_the_teacher_steps_back(tmp_path, random_basic):
    env = make("builtin:Basic", seed=1)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", bc_settings(mode="dagger", steps=1200),
                           seed=1)
    drive(env, trainer, 400)
    manager = trainer.managers[0]
    assert manager.teacher_probability == 0.0  # fell from 1 to 0 over 1200 steps
    # Every state was labelled, the student's own too.
    assert trainer.labels == pytest.approx(trainer.step, abs=64)
    assert student_return(trainer) > random_basic + 0.6


def test_dagger_mixes_who_acts_at_every_step_not_per_episode(tmp_path):
    # Ball3D's episodes run 1000 steps: a per-episode draw made while p was 1 would leave
    # the teacher steering all 20 steps below; the mixture draws at every step.
    env = make("builtin:Ball3D", seed=0)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Ball3D",
                           bc_settings("Ball3D", mode="dagger", steps=100000), seed=0)
    manager = manager_of(trainer, env)
    manager.set_teacher_probability(0.5)
    steered = np.zeros(12, int)
    for _ in range(20):
        decision, terminal = env.get_steps("Ball3D")
        assert len(terminal) == 0  # one episode throughout
        labels = manager.teacher(decision).continuous
        actions = manager.step(decision, terminal).continuous
        steered += np.all(actions == labels, axis=1)
        env.set_actions("Ball3D", ActionTuple(actions, np.zeros((12, 0), np.int32)))
        env.step()
    assert ((steered > 0) & (steered < 20)).all(), steered
    assert 60 < steered.sum() < 180
    manager.set_teacher_probability(0.0)  # and the student alone once p reaches 0
    decision, terminal = env.get_steps("Ball3D")
    labels = manager.teacher(decision).continuous
    assert not np.all(manager.step(decision, terminal).continuous == labels, axis=1).any()


def test_teachers_from_a_run_an_onnx_and_a_saved_model_act_alike(trained_basic):
    run, trainer = trained_basic
    spec = trainer.spec
    env = make("builtin:Basic", seed=5)
    env.reset()
    decision, _ = env.get_steps("Basic")
    # The run's deterministic actions: the argmax the student's policy sees.
    from tftrainers.runs import load_policy
    want = load_policy(str(run), "Basic", spec, deterministic=True).make_actor(
        "tensorflow").act(decision)[1].discrete
    sources = [str(run), os.path.join(run, "Basic.onnx"),
               os.path.join(run, "Basic", "saved_model")]
    for source in sources:
        teacher = model_teacher(source, "Basic", spec, "teacher")
        np.testing.assert_array_equal(teacher(decision).discrete, want, err_msg=source)
    # And a student learns from one of them (the ONNX file) on a short run.
    env.reset()
    student = make_trainer(os.path.join(run, "student"), env, "Basic",
                           bc_settings(teacher=sources[1], max_steps=1200), seed=2)
    drive(env, student, 200)
    assert student.labels > 400


class TwoBrains(BaseEnv):
    """Basic twice, as behaviors Student and Teacher of one env."""

    def __init__(self):
        self.parts = {"Student": make("builtin:Basic", seed=1), "Teacher": make("builtin:Basic",
                                                                                seed=2)}

    @property
    def behavior_specs(self):
        return {k: e.behavior_specs["Basic"] for k, e in self.parts.items()}

    def reset(self):
        for e in self.parts.values():
            e.reset()

    def step(self):
        for e in self.parts.values():
            e.step()

    def get_steps(self, name):
        return self.parts[name].get_steps("Basic")

    def set_actions(self, name, actions):
        self.parts[name].set_actions("Basic", actions)

    def heuristic(self, name, decision):
        return self.parts[name].heuristic("Basic", decision)


class NoStop:
    requested = False


def test_brain_to_imitate_learns_from_another_behavior(tmp_path, random_basic):
    env = TwoBrains()
    trainers = {
        "Student": make_trainer(tmp_path, env, "Student", bc_settings(
            "Student", teacher=None, brain_to_imitate="Teacher"), seed=0),
        # The teacher behavior: its heuristic drives all of its agents.
        "Teacher": make_trainer(tmp_path, env, "Teacher", bc_settings(
            "Teacher", teacher_agents=1.0, max_steps=2500), seed=1)}
    managers = {}
    for name, trainer in trainers.items():
        managers[name] = trainer.create_agent_manager(env)
        trainer.subscribe(managers[name])
    runner._connect_imitation(env, trainers, managers)
    runner._loop(env, managers, trainers, NoStop())
    student = trainers["Student"]
    assert student.labels > 1000  # the Teacher behavior's steps
    assert student_return(student) > random_basic + 0.6


def test_brain_to_imitate_must_name_another_behavior(tmp_path):
    env = TwoBrains()
    trainers = {"Student": make_trainer(tmp_path, env, "Student", bc_settings(
        "Student", teacher=None, brain_to_imitate="Coach"))}
    managers = {"Student": trainers["Student"].create_agent_manager(env),
                "Teacher": None}
    with pytest.raises(ConfigError, match="brain_to_imitate: 'Coach' is not another behavior "
                                          "of the environment; it has Teacher"):
        runner._connect_imitation(env, trainers, managers)


def test_offline_from_demo_file_learns_basic(tmp_path, random_basic):
    env = make("builtin:Basic", seed=3)
    env.reset()
    settings = bc_settings(teacher=None, demo_path=os.path.join(DEMOS, "Basic.demo"),
                           max_steps=1500)
    trainer = make_trainer(tmp_path, env, "Basic", settings, seed=3)
    assert trainer.labels == len(trainer.demonstrations)
    drive(env, trainer, 200)
    assert student_return(trainer) > random_basic + 0.6


def test_resume_restores_weights_optimizer_and_counters(tmp_path):
    env = make("builtin:Basic", seed=4)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", bc_settings(max_steps=800), seed=4)
    drive(env, trainer, 100)
    trainer.save()
    again = make_trainer(tmp_path, env, "Basic", bc_settings(max_steps=800), seed=9)
    again.subscribe(again.create_agent_manager(env))
    again.restore_latest()
    assert again.step == trainer.step and again.labels == trainer.labels
    for (name, a), (_, b) in zip(variables(trainer), variables(again)):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert again.rng.bit_generator.state == trainer.rng.bit_generator.state


CONFIG = """
behaviors:
  {behavior}:
    trainer_type: bc
    hyperparameters: {hyperparameters}
    network_settings: {{hidden_units: 16, num_layers: 1}}
    max_steps: 200
env_settings:
  env_path: {env}
"""


def learn(tmp_path, one_line_error, hyperparameters, env="builtin:Basic", behavior="Basic"):
    path = tmp_path / "bc.yaml"
    path.write_text(CONFIG.format(behavior=behavior, hyperparameters=hyperparameters, env=env))
    return one_line_error(learn_main, [str(path), "--results-dir", str(tmp_path / "results"),
                                       "--run-id", "run", "--force"])


def test_bad_teachers_are_one_line_errors(tmp_path, one_line_error, trained_basic):
    run, _ = trained_basic
    key = "behaviors.Basic.hyperparameters"
    err = learn(tmp_path, one_line_error, "{batch_size: 32}")
    assert f"{key}: trainer_type bc needs a teacher; set one of teacher" in err
    err = learn(tmp_path, one_line_error, f"{{teacher: {tmp_path}/missing.onnx}}")
    assert f"{key}.teacher: {tmp_path}/missing.onnx: no such ONNX file" in err
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"not a model at all")
    err = learn(tmp_path, one_line_error, f"{{teacher: {corrupt}}}")
    assert f"{key}.teacher: {corrupt}: not a readable ONNX model" in err
    # Basic's model (obs [20]) for GridWorld (obs [75]): the input and both shapes.
    onnx = os.path.join(run, "Basic.onnx")
    err = learn(tmp_path, one_line_error, f"{{teacher: {onnx}}}", env="builtin:GridWorld",
                behavior="GridWorld")
    assert "behaviors.GridWorld.hyperparameters.teacher:" in err
    assert "obs_0 has shape [?, 20]" in err and "is [75]" in err, err
    err = learn(tmp_path, one_line_error, f"{{teacher: {run}}}", env="builtin:GridWorld",
                behavior="GridWorld")
    assert "does not fit the environment: observation 0" in err and "[20]" in err, err
    err = learn(tmp_path, one_line_error, "{teacher: heuristic}", env="gym:CartPole-v1",
                behavior="CartPole-v1")
    assert "teacher: heuristic, but" in err and "has no heuristic" in err
    err = learn(tmp_path, one_line_error, "{teacher: heuristic:os.path:nothing_here}")
    assert "teacher: cannot import nothing_here from os.path" in err
    err = learn(tmp_path, one_line_error, "{brain_to_imitate: Coach}")
    assert ("brain_to_imitate: 'Coach' is not another behavior of the environment; it has no "
            "other behavior") in err
    err = learn(tmp_path, one_line_error, "{teacher: heuristic, demo_path: x.demo}")
    assert "at most one of teacher, demo_path" in err
    err = learn(tmp_path, one_line_error, f"{{demo_path: {tmp_path}/none.demo}}")
    assert f"{key}.demo_path:" in err and "none.demo" in err
