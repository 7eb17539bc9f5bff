"""The act call in onnxruntime: same numbers as TensorFlow, fresh weights after changes."""
import numpy as np
import pytest

from tftrainers.envs import DecisionSteps, make
from tftrainers.export.onnx_export import OnnxExportError
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


def act_both(policy: Policy, steps: DecisionSteps, seed: int):
    """The act outputs from TensorFlow, then from onnxruntime, with the same noise and the
    same recurrent memory to start from."""
    onnx_act = policy._onnx_act
    start = policy._memories.read(steps.agent_id)[1].copy() if policy.memory_size else None
    results = []
    for runtime in (None, onnx_act):
        policy._onnx_act = runtime
        policy.rng = np.random.default_rng(seed)
        if start is not None:
            policy._memories.write(policy._memories.read(steps.agent_id)[0], start)
        info, env_actions = policy.act(steps)
        results.append((info, env_actions, policy.last_entropy.copy()))
    policy._onnx_act = onnx_act
    return results


@pytest.mark.parametrize("case", sorted(CASES))
def test_onnxruntime_act_matches_tensorflow(case):
    policy = build_policy(CASES[case])
    policy.use_onnxruntime()
    assert policy.act_runtime == "onnxruntime"
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


def test_onnxruntime_act_takes_weights_only_when_told_they_changed():
    policy = build_policy(CASES["continuous"])
    policy.use_onnxruntime()
    steps = decisions(policy, 4, 0)

    def mean_action():
        policy.rng = np.random.default_rng(0)
        return policy.act(steps)[0].actions.continuous
    before = mean_action()
    for variable in policy.actor.trainable_variables:
        variable.assign(variable.numpy() * 1.5)
    np.testing.assert_array_equal(mean_action(), before)  # a snapshot until told
    policy.weights_changed()
    after = mean_action()
    assert np.abs(after - before).max() > 1e-3
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0)
    np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                               atol=1e-5)
    # The normalizer is the policy's own update: no call needed.
    policy.update_normalization([np.full((64, *o.shape), 5.0, np.float32)
                                 for o in policy.spec.observation_specs])
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0)
    np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                               atol=1e-5)


def assert_act_and_values_match_tensorflow(policy: Policy, steps: DecisionSteps):
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0)
    np.testing.assert_allclose(ort_info.actions.continuous, tf_info.actions.continuous,
                               atol=1e-5)
    ort_values = policy.values(steps.obs)
    tf_values = {k: v.numpy() for k, v in policy._tf_values_fn()(steps.obs).items()}
    for name in policy.stream_names:
        np.testing.assert_allclose(ort_values[name], tf_values[name], atol=1e-5)


def test_weights_handed_over_are_taken_and_a_full_change_reads_everything():
    policy = build_policy(CASES["continuous"])
    policy.use_onnxruntime()
    steps = decisions(policy, 4, 0)
    trained = policy.actor.trainable_variables + policy.critic.trainable_variables
    for variable in trained:
        variable.assign(variable.numpy() * 1.5)
    # What an update hands over is taken as it is, without a read.
    policy.weights_changed({id(v): v.numpy() for v in trained})
    assert_act_and_values_match_tensorflow(policy, steps)
    handed = {id(v): v.numpy() for v in trained}
    for variable in trained:
        variable.assign(variable.numpy() * 0.5)
    policy.weights_changed()  # e.g. a restore: everything is read ...
    policy.weights_changed(handed)  # ... and older arrays handed over later do not win
    assert_act_and_values_match_tensorflow(policy, steps)


def test_trainer_acts_in_onnxruntime_with_the_weights_of_each_update(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=4)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"))
    policy = trainer.policy
    assert policy.act_runtime == "onnxruntime" and policy._tf_act is None
    drive(env, trainer, 150)
    assert trainer.updates >= 2
    steps = decisions(policy, 6, 0)
    (tf_info, _, _), (ort_info, _, _) = act_both(policy, steps, 0)
    np.testing.assert_allclose(ort_info.log_probs.discrete, tf_info.log_probs.discrete,
                               atol=1e-5)


def test_a_policy_that_does_not_convert_acts_in_tensorflow_with_one_warning(tmp_path,
                                                                            monkeypatch):
    def fail(self):
        raise OnnxExportError("tf2onnx could not convert FancyOp to ONNX opset 15")
    monkeypatch.setattr(Policy, "use_onnxruntime", fail)
    lines = []
    env = make("builtin:Basic", seed=0, num_areas=2)
    env.reset()
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"), log=lines.append)
    assert lines == ["[WARNING] Basic: the act call runs in TensorFlow (onnxruntime: tf2onnx "
                     "could not convert FancyOp to ONNX opset 15)"]
    assert trainer.policy.act_runtime == "tensorflow"
    drive(env, trainer, 10)
    assert trainer.step > 0


def test_tensorflow_act_runtime_is_kept_when_asked(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=2)
    trainer = make_trainer(tmp_path, env, "Basic", trainer_settings("Basic"),
                           act_runtime="tensorflow")
    assert trainer.policy.act_runtime == "tensorflow"


def test_background_compile_changes_nothing_and_is_the_update_used(tmp_path):
    env = make("builtin:Basic", seed=0, num_areas=4)
    env.reset()
    settings = trainer_settings("Basic")
    trainer = make_trainer(tmp_path, env, "Basic", settings)
    assert trainer.optimizer._compile_thread is not None
    # A second optimizer of the same policy: its compile runs the update with no minibatch.
    optimizer = PPOOptimizer(trainer.policy, settings.hyperparameters, settings.max_steps)
    state = [*optimizer.variables, *optimizer.optimizer.variables]
    before = [v.numpy().copy() for v in state]
    optimizer.start_compile()
    optimizer.wait_for_compile()
    for a, b in zip(before, [v.numpy() for v in state]):
        np.testing.assert_array_equal(a, b)
    drive(env, trainer, 150)
    assert trainer.updates >= 2 and trainer.optimizer.update_fn.tracing_count == 1
