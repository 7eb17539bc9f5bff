"""OnnxPolicy and SavedModelPolicy: checks at load, agent memories, and whole episodes."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.checkpoint import Checkpointer
from tftrainers.envs import make
from tftrainers.envs.base import ActionSpec, BehaviorSpec, DecisionSteps, allowed_action_mask
from tftrainers.evaluate import evaluate
from tftrainers.export import OnnxPolicy, SavedModelPolicy, export_onnx, export_savedmodel
from tftrainers.trainers.policy import Policy

from .helpers import CASES, env_spec, random_masks, random_obs

POLICIES = {"onnx": lambda e, spec, **kw: OnnxPolicy(e.onnx_path, spec, **kw),
            "savedmodel": lambda e, spec, **kw: SavedModelPolicy(e.savedmodel_dir, spec, **kw)}


def decision_steps(spec, agent_ids, rng):
    """DecisionSteps for ``agent_ids`` with random observations and env masks."""
    n = len(agent_ids)
    allowed = random_masks(rng, n, spec.action_spec.discrete_branches).astype(bool)
    masks = np.split(~allowed, np.cumsum(spec.action_spec.discrete_branches)[:-1], axis=1) \
        if spec.action_spec.discrete_branches else []
    return DecisionSteps(random_obs(spec, n, rng), np.zeros(n, np.float32),
                         np.asarray(agent_ids, np.int32), masks)


def keras_step(policy, steps, memory):
    """The Keras actor's deterministic env actions and new memory for ``steps``."""
    masks = allowed_action_mask(steps.action_mask, policy.spec.action_spec.discrete_branches,
                                len(steps))
    out = policy.actor.deterministic([tf.constant(o) for o in steps.obs], tf.constant(masks),
                                     tf.constant(memory))
    return out["env_continuous_action"].numpy(), out["discrete_action"].numpy(), \
        out["memory"].numpy()


@pytest.mark.parametrize("kind", list(POLICIES))
def test_visual_environment_with_a_vector_model_names_the_input(exported, kind):
    visual = env_spec("builtin:GridWorld", obs="visual")
    with pytest.raises(ValueError) as error:
        POLICIES[kind](exported("discrete"), visual)
    assert ("model input obs_0 has shape [?, 75] but the environment's observation 0 "
            "('grid_image') is [20, 20, 3] (as [3, 20, 20])") in str(error.value)


@pytest.mark.parametrize("kind", list(POLICIES))
@pytest.mark.parametrize("case,spec,pattern", [
    ("continuous", BehaviorSpec(env_spec("builtin:Ball3D").observation_specs,
                                ActionSpec(3, ())),
     r"deterministic_continuous_actions has shape \[\?, 2\] \(f\) but the environment has 3 "
     r"continuous actions"),
    ("continuous", BehaviorSpec(env_spec("builtin:Ball3D").observation_specs,
                                ActionSpec(2, (3,))),
     r"no action_masks input but the environment has discrete branches \[3\]"),
    ("hybrid", BehaviorSpec(env_spec("builtin:Ball3D").observation_specs,
                            ActionSpec(2, (3, 2))),
     r"the model takes 2 observation\(s\) \(obs_0, obs_1\) but the environment has 1 "
     r"\('platform_and_ball'\)"),
    ("hybrid", BehaviorSpec(CASES["hybrid"].spec().observation_specs, ActionSpec(2, (2, 3))),
     r"the model has discrete branches \[3, 2\] but the environment has \[2, 3\]"),
    ("discrete", BehaviorSpec(env_spec("builtin:GridWorld").observation_specs,
                              ActionSpec(0, (2, 3))),
     r"model output deterministic_discrete_actions has shape \[\?, 1\] \(i\) but the "
     r"environment has 2 discrete branches"),
    ("discrete", BehaviorSpec(env_spec("builtin:GridWorld").observation_specs,
                              ActionSpec(0, (4,))),
     r"action_masks has shape \[\?, 5\] but the environment's discrete branches \[4\] need "
     r"\[\?, 4\]"),
])
def test_action_and_observation_mismatches_are_named(exported, kind, case, spec, pattern):
    with pytest.raises(ValueError, match=pattern):
        POLICIES[kind](exported(case), spec, deterministic=True)


def test_missing_files_are_reported(tmp_path):
    spec = env_spec("builtin:Ball3D")
    with pytest.raises(FileNotFoundError, match="no such ONNX file"):
        OnnxPolicy(str(tmp_path / "missing.onnx"), spec)
    with pytest.raises(FileNotFoundError, match="no SavedModel"):
        SavedModelPolicy(str(tmp_path), spec)


def test_savedmodel_policy_takes_the_highest_version(exported, tmp_path):
    export_savedmodel(exported("discrete").policy, str(tmp_path), 2)
    export_savedmodel(exported("continuous").policy, str(tmp_path), 10)
    policy = SavedModelPolicy(str(tmp_path), env_spec("builtin:Ball3D"))
    assert policy.source.endswith("10")  # 10 > 2 numerically, not as strings


@pytest.mark.parametrize("kind", list(POLICIES))
def test_each_agent_keeps_its_own_memory_until_its_episode_ends(exported, kind, rng):
    e = exported("everything")
    policy = POLICIES[kind](e, e.policy.spec, deterministic=True)
    assert policy.memory_size == e.policy.memory_size
    memories = {}  # the reference: agent id -> memory, run through the Keras actor
    agents = np.array([3, 17, 5, 42, 8])
    for step in range(12):
        # Agents come in varying subsets and orders, as envs deliver them.
        ids = rng.permutation(agents)[:rng.integers(2, len(agents) + 1)]
        steps = decision_steps(e.policy.spec, ids, rng)
        memory = np.stack([memories.get(a, np.zeros(e.policy.memory_size, np.float32))
                           for a in ids])
        continuous, discrete, new_memory = keras_step(e.policy, steps, memory)
        actions = policy("Everything", steps)
        np.testing.assert_allclose(actions.continuous, continuous, atol=1e-5,
                                   err_msg=f"step {step}")
        np.testing.assert_array_equal(actions.discrete, discrete)
        assert actions.continuous.dtype == np.float32 and actions.discrete.dtype == np.int32
        memories.update(zip(ids, new_memory))
        if step % 4 == 3:
            ended = ids[:1]
            policy.episode_ended("Everything", ended)
            memories.pop(ended[0])


@pytest.mark.parametrize("kind", list(POLICIES))
def test_sampled_and_deterministic_outputs_are_picked(exported, kind, rng):
    e = exported("hybrid")
    steps = decision_steps(e.policy.spec, np.arange(500), rng)
    mode = POLICIES[kind](e, e.policy.spec, deterministic=True)
    sampled = POLICIES[kind](e, e.policy.spec, deterministic=False)
    a, b = mode("Hybrid", steps), mode("Hybrid", steps)
    np.testing.assert_array_equal(a.continuous, b.continuous)
    np.testing.assert_array_equal(a.discrete, b.discrete)
    c = sampled("Hybrid", steps)
    assert not np.allclose(a.continuous, c.continuous)
    assert np.any(a.discrete != c.discrete)
    empty = sampled("Hybrid", decision_steps(e.policy.spec, [], rng))
    assert empty.continuous.shape == (0, 2) and empty.discrete.shape == (0, 2)


@pytest.mark.parametrize("kind", list(POLICIES))
@pytest.mark.parametrize("case,env_id,env_args", [
    ("continuous", "builtin:Ball3D", {}),
    ("discrete", "builtin:GridWorld", {}),
    ("visual", "builtin:GridWorld", {"obs": "visual"}),
    ("memory", "builtin:Hallway", {}),
])
def test_exported_policies_play_whole_episodes(exported, kind, case, env_id, env_args):
    env = make(env_id, seed=0, num_areas=4, **env_args)
    (name, spec), = env.behavior_specs.items()
    policy = POLICIES[kind](exported(case), spec, deterministic=False)
    results = evaluate(env, policy, episodes=4, max_env_steps=5000)
    assert results[name]["episodes"] == 4
    assert np.isfinite(results[name]["mean_reward"])


def test_a_restored_checkpoint_exports_the_trained_weights(exported, tmp_path, rng):
    # What tftrainers-export does: a fresh Policy, the run's checkpoint restored into it.
    trained = exported("memory").policy
    checkpointer = Checkpointer(str(tmp_path / "checkpoints"), "Hallway")
    checkpointer.save(100, trained.trackables(), {})
    restored = Policy(trained.spec, CASES["memory"].network)  # as runs load it
    Checkpointer.restore(checkpointer.latest(), restored.trackables())
    path = export_onnx(restored, str(tmp_path / "Hallway.onnx"))
    ours = OnnxPolicy(path, trained.spec, deterministic=True)
    reference = OnnxPolicy(exported("memory").onnx_path, trained.spec, deterministic=True)
    for _ in range(5):
        steps = decision_steps(trained.spec, np.arange(16), rng)
        np.testing.assert_array_equal(ours("Hallway", steps).discrete,
                                      reference("Hallway", steps).discrete)
    ids = np.arange(16)
    np.testing.assert_allclose(ours._memories.read(ids)[1], reference._memories.read(ids)[1],
                               atol=1e-5)
