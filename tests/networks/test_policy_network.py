from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.networks import Actions, Critic, PolicyNetwork

from .helpers import behavior, random_allowed_masks, random_obs, vector_spec, visual_spec

BRANCHES = (3, 2)


def _hybrid_policy(memory_size: int = 8):
    spec = behavior([vector_spec(5), visual_spec(15, 15, 2)], continuous=2, branches=BRANCHES)
    return spec, PolicyNetwork(spec, hidden_units=16, num_layers=2, normalize=True,
                               vis_encode_type="resnet", memory_size=memory_size)


def _signature(spec, memory_size):
    return [[tf.TensorSpec([None, *o.shape], tf.float32) for o in spec.observation_specs],
            tf.TensorSpec([None, sum(BRANCHES)], tf.float32),
            tf.TensorSpec([None, memory_size], tf.float32)]


def test_hybrid_policy_compiled_once(rng):
    spec, policy = _hybrid_policy()
    act = tf.function(lambda obs, masks, memory: policy(obs, masks, memory),
                      input_signature=_signature(spec, 8))
    for batch in (7, 3):
        masks = random_allowed_masks(rng, batch, BRANCHES)
        out = act(random_obs(spec, batch, rng), masks, np.zeros((batch, 8), np.float32))
        assert out["continuous_action"].shape == (batch, 2)
        assert out["discrete_action"].shape == (batch, 2)
        assert out["discrete_action"].dtype == tf.int32
        assert out["log_probs_continuous"].shape == (batch, 2)
        assert out["log_probs_discrete"].shape == (batch, 2)
        assert out["entropy"].shape == (batch,)
        assert out["memory"].shape == (batch, 8)
        env = out["env_continuous_action"].numpy()
        assert np.all(np.abs(env) <= 1.0)
    assert act.experimental_get_tracing_count() == 1


def test_evaluate_is_differentiable_for_every_trainable_weight(rng):
    spec, policy = _hybrid_policy()
    n, length = 2, 3
    obs = random_obs(spec, n * length, rng)
    masks = random_allowed_masks(rng, n * length, BRANCHES)
    out = policy(obs, masks)
    actions = Actions(out["continuous_action"], out["discrete_action"])
    with tf.GradientTape() as tape:
        evaluation = policy.evaluate(obs, masks, actions, np.zeros((n, 8), np.float32), length)
        loss = (tf.reduce_sum(evaluation.log_probs_continuous)
                + tf.reduce_sum(evaluation.log_probs_discrete)
                + tf.reduce_sum(evaluation.entropy))
    assert evaluation.log_probs_continuous.shape == (n * length, 2)
    assert evaluation.log_probs_discrete.shape == (n * length, 2)
    grads = tape.gradient(loss, policy.trainable_variables)
    missing = [v.path for v, g in zip(policy.trainable_variables, grads) if g is None]
    assert not missing


def test_deterministic_outputs(rng):
    spec, policy = _hybrid_policy(memory_size=0)
    obs = random_obs(spec, 4, rng)
    out = policy.deterministic(obs)
    again = policy.deterministic(obs)
    np.testing.assert_array_equal(out["discrete_action"].numpy(), again["discrete_action"].numpy())
    np.testing.assert_allclose(out["env_continuous_action"].numpy(),
                               np.clip(out["continuous_action"].numpy(), -3, 3) / 3, rtol=1e-6)
    assert out["memory"].shape == (4, 0)


def test_checkpoint_restores_every_weight(tmp_path, rng):
    spec, policy = _hybrid_policy()
    obs = random_obs(spec, 4, rng)
    policy.update_normalization(obs)
    path = tf.train.Checkpoint(policy=policy).write(str(tmp_path / "ckpt"))

    # Keras 3 does not checkpoint layers held in lists; every weight must have a name.
    saved = {name for name, _ in tf.train.list_variables(path)} - {"_CHECKPOINTABLE_OBJECT_GRAPH"}
    weights = [v for v in policy.variables if "seed_generator" not in v.path]
    assert len(saved) == len(weights)

    tf.random.set_seed(1)
    _, other = _hybrid_policy()
    tf.train.Checkpoint(policy=other).read(path).assert_consumed()
    masks = random_allowed_masks(rng, 4, BRANCHES)
    memory = rng.normal(size=(4, 8)).astype(np.float32)
    for key, value in policy.deterministic(obs, masks, memory).items():
        np.testing.assert_allclose(other.deterministic(obs, masks, memory)[key].numpy(),
                                   value.numpy(), atol=1e-6, err_msg=key)


def test_critic_value_per_stream(rng):
    spec = behavior([vector_spec(4)], continuous=1)
    critic = Critic(spec.observation_specs, ["extrinsic", "curiosity"], hidden_units=8,
                    num_layers=1, normalize=True, memory_size=4)
    values, memory = critic(random_obs(spec, 6, rng))
    assert set(values) == {"extrinsic", "curiosity"}
    assert all(v.shape == (6,) for v in values.values())
    assert memory.shape == (6, 4)
    with pytest.raises(ValueError, match="unique"):
        Critic(spec.observation_specs, ["extrinsic", "extrinsic"])
