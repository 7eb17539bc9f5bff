"""The act call in onnxruntime: same numbers as TensorFlow; weights published with versions."""
import numpy as np
import pytest

from tftrainers.acting import WeightUpdate
from tftrainers.envs import DecisionSteps, make
from tftrainers.tf_utils.onnx_function import OnnxExportError
from tftrainers.trainers.policy import Policy
from tftrainers.trainers.ppo.optimizer import PPOOptimizer

from export.helpers import CASES, build_policy  # tests/export (pytest puts tests/ on the path)
from .helpers import drive, make_trainer, trainer_settings


def decisions(policy: Policy, n: int, seed: int) -> DecisionSteps:
    """``n`` agents' decision steps with random observations and masks (one action left
    allowed per branch at least)."""
    rng = np.random.default_rng(seed)
    obs = [rng.normal(0.0, 2.0, (n, *o.shape)).astype(np.float32)
           for o in policy.spec.observation_specs]
    masks = []
    for size in policy.spec.action_spec.discrete_branches:
        masked = rng.random((n, size)) < 0.4
        masked[np.arange(n), rng.integers(0, size, n)] = False
        masks.append(masked)
    return DecisionSteps(obs, np.zeros(n, np.float32), np.arange(n, dtype=np.int32), masks)


def act_both(policy: Policy, steps: DecisionSteps, seed: int, onnx_actor=None):
    """The act outputs of a TensorFlow actor, then of an onnxruntime actor, with the same
    noise and the same recurrent memory to start from."""
    results = []
    start = None
    for actor in (policy.make_actor("tensorflow", seed=seed),
                  onnx_actor or policy.make_actor("onnxruntime", seed=seed)):
        actor.rng = np.random.default_rng(seed)
        if policy.memory_size:
            rows, memory = actor._memories.read(steps.agent_id)
            if start is None:
                start = np.random.default_rng(seed).normal(0, 0.5, memory.shape)
            actor._memories.write(rows, start.astype(np.float32))
        info, env_actions = actor.act(steps)
        results.append((info, env_actions, actor.last_entropy.copy()))
    return results


@pytest.mark.parametrize("case", sorted(CASES))
def test_onnxruntime_act_matches_tensorflow(case):
    policy = build_policy(CASES[case])
    for n, seed in ((5, 1), (1, 2), (12, 3)):  # onnxruntime takes every batch size as is
        steps = decisions(policy, n, seed)
        (tf_info, tf_env, tf_entropy), (ort_info, ort_env, ort_entropy) = act_both(
            policy, steps, seed)
        np.testing.assert_array_equal(ort_info.actions.discrete, tf_info.actions.discrete)
        np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                                   atol=1e-5)
        np.testing.assert_allclose(ort_env.continuous, tf_env.continuous, atol=1e-5)
        np.testing.assert_allclose(ort_info.log_probs.continuous, tf_info.log_probs.continuous,
                                   atol=1e-4)
        np.testing.assert_allclose(ort_info.log_probs.discrete, tf_info.log_probs.discrete,
                                   atol=1e-5)
        np.testing.assert_allclose(ort_entropy, tf_entropy, atol=1e-4)
        if policy.memory_size:
            np.testing.assert_allclose(ort_info.memory, tf_info.memory, atol=1e-6)


def test_the_acting_side_takes_newer_weight_versions_only():
    policy = build_policy(CASES["continuous"])
    actor = policy.make_actor("onnxruntime", version=3)
    steps = decisions(policy, 4, 0)

    def mean_action():
        actor.rng = np.random.default_rng(0)
        return actor.act(steps)[0].actions.continuous
    before = mean_action()
    for variable in policy.actor.trainable_variables:
        variable.assign(variable.numpy() * 1.5)
    np.testing.assert_array_equal(mean_action(), before)  # its own copy until published
    actor.set_weights(WeightUpdate(3, policy.flat_weights()))  # not newer: ignored
    np.testing.assert_array_equal(mean_action(), before)
    actor.set_weights(WeightUpdate(4, policy.flat_weights()))
    assert actor.version == 4 and np.abs(mean_action() - before).max() > 1e-3
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0, actor)
    np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                               atol=1e-5)
    # The normalizer's statistics travel in the same vector.
    policy.update_normalization([np.full((64, *o.shape), 5.0, np.float32)
                                 for o in policy.spec.observation_specs])
    actor.set_weights(WeightUpdate(5, policy.flat_weights()))
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0, actor)
    np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                               atol=1e-5)


def test_trainer_publishes_each_update_and_the_critic_runs_in_onnxruntime(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=4)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic",
                           trainer_settings("Basic", network_settings={"normalize": True}))
    assert trainer.policy._tf_act is None and trainer.optimizer.critic_side._critic_runner is not None
    drive(env, trainer, 150)
    assert trainer.updates >= 2
    manager = trainer.managers[0]
    assert manager.actor.version == trainer.version == trainer.updates
    np.testing.assert_array_equal(manager.actor.run._feed[manager.actor.run.program.weights[0]
                                                          .name].ravel()[:5],
                                  trainer.policy.flat_weights()[:5])
    steps = decisions(trainer.policy, 6, 0)
    (tf_info, _, _), (ort_info, _, _) = act_both(trainer.policy, steps, 0, manager.actor)
    np.testing.assert_allclose(ort_info.log_probs.discrete, tf_info.log_probs.discrete,
                               atol=1e-5)
    ort_values = trainer.optimizer.values(steps.obs)
    tf_values = {k: v.numpy() for k, v in trainer.optimizer.critic_side._values_fn(steps.obs).items()}
    np.testing.assert_allclose(ort_values["extrinsic"], tf_values["extrinsic"], atol=1e-5)


def test_a_policy_that_does_not_convert_acts_in_tensorflow_with_one_warning(tmp_path,
                                                                            monkeypatch):
    def fail(self):
        raise OnnxExportError("tf2onnx could not convert FancyOp to ONNX opset 15")
    monkeypatch.setattr(Policy, "onnx_program", fail)
    lines = []
    env = make("builtin:Basic", seed=0, num_areas=2)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"), log=lines.append)
    drive(env, trainer, 80)
    assert lines == ["[WARNING] Basic: the act call runs in TensorFlow (onnxruntime: tf2onnx "
                     "could not convert FancyOp to ONNX opset 15)"]
    assert trainer.act_runtime == "tensorflow" and trainer.policy._tf_act is not None
    assert trainer.step > 0 and trainer.updates >= 1


def test_tensorflow_act_runtime_is_kept_when_asked(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=2)
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"),
                           act_runtime="tensorflow")
    trainer.subscribe(trainer.create_agent_manager(env))
    assert trainer.act_runtime == "tensorflow" and trainer.policy._tf_act is not None


def test_background_compile_changes_nothing_and_is_the_update_used(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=4)
    env.reset()
    settings = trainer_settings("Basic")
    trainer = make_trainer(tmp_path, env, "Basic", settings)
    assert trainer.optimizer.ppo_update._compile_thread is not None
    # A second optimizer of the same policy: its compile runs the update with no minibatch.
    optimizer = PPOOptimizer(trainer.policy, settings)
    state = [*optimizer.variables, *optimizer.optimizer.variables]
    before = [v.numpy().copy() for v in state]
    optimizer.start_compile()
    optimizer.wait_for_compile()
    for a, b in zip(before, [v.numpy() for v in state]):
        np.testing.assert_array_equal(a, b)
    drive(env, trainer, 150)
    assert trainer.updates >= 2 and trainer.optimizer.update_fn.tracing_count == 1


def test_converted_programs_are_cached_by_graph_and_the_cache_acts_the_same(tmp_path,
                                                                           monkeypatch):
    import tftrainers.tf_utils.onnx_function as onnx_function
    monkeypatch.setenv("TFTRAINERS_CACHE_DIR", str(tmp_path))
    conversions = []
    convert = onnx_function._convert
    monkeypatch.setattr(onnx_function, "_convert",
                        lambda *a: conversions.append(1) or convert(*a))
    policy = build_policy(CASES[sorted(CASES)[0]])
    first = policy.onnx_program()
    files = sorted((tmp_path / "onnx").iterdir())
    assert len(conversions) == 1 and len(files) == 1
    second = policy.onnx_program()  # the same graph: read back, not converted
    assert len(conversions) == 1 and second == first
    steps = decisions(policy, 5, 1)
    (tf_info, _, _), (ort_info, _, _) = act_both(
        policy, steps, 1, policy.make_actor("onnxruntime", seed=1, program=second))
    np.testing.assert_allclose(ort_info.log_probs.continuous, tf_info.log_probs.continuous,
                               atol=1e-4)
    files[0].write_text("{not json")  # damaged: converted again and rewritten
    third = policy.onnx_program()
    assert len(conversions) == 2 and third.weights == first.weights
    assert policy.onnx_program() == third and len(conversions) == 2
    monkeypatch.setenv("TFTRAINERS_CACHE_DIR", "off")
    policy.onnx_program()
    assert len(conversions) == 3
