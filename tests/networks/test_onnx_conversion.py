"""De-risks export: the policy's graph converts with tf2onnx and runs in onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.networks import PolicyNetwork

from .helpers import behavior, random_allowed_masks, random_obs, vector_spec, visual_spec

onnxruntime = pytest.importorskip("onnxruntime")
tf2onnx = pytest.importorskip("tf2onnx")


def _convert_and_run(serve, feeds):
    model, _ = tf2onnx.convert.from_function(serve, input_signature=serve.input_signature,
                                             opset=13)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def test_discrete_policy_with_mask_matches_onnxruntime(rng):
    branches = (3, 4)
    spec = behavior([vector_spec(6)], branches=branches)
    policy = PolicyNetwork(spec, hidden_units=16, num_layers=2, normalize=True)
    policy.update_normalization(random_obs(spec, 32, rng))

    @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="obs_0"),
                                  tf.TensorSpec([None, sum(branches)], tf.float32,
                                                name="action_masks")])
    def serve(obs_0, action_masks):
        sampled = policy([obs_0], action_masks)
        deterministic = policy.deterministic([obs_0], action_masks)
        return {"discrete_actions": sampled["discrete_action"],
                "deterministic_discrete_actions": deterministic["discrete_action"],
                "masked_logits": tf.concat(policy.action_model.masked_logits(
                    policy.body([obs_0])[0], action_masks), axis=-1)}

    batch = 64
    obs = random_obs(spec, batch, rng)[0] * 4.0
    masks = random_allowed_masks(rng, batch, branches)
    onnx_out = _convert_and_run(serve, {"obs_0": obs, "action_masks": masks})
    tf_out = serve(obs, masks)

    np.testing.assert_array_equal(onnx_out["deterministic_discrete_actions"],
                                  tf_out["deterministic_discrete_actions"].numpy())
    np.testing.assert_allclose(onnx_out["masked_logits"], tf_out["masked_logits"].numpy(),
                               rtol=1e-5, atol=1e-5)
    # ONNX Multinomial samples must respect the mask too.
    sampled = onnx_out["discrete_actions"]
    offsets = np.cumsum((0,) + branches[:-1])
    for b, offset in enumerate(offsets):
        assert np.all(masks[np.arange(batch), offset + sampled[:, b]] == 1.0)


def test_hybrid_recurrent_visual_policy_matches_onnxruntime(rng):
    # ResNet is the visual encoder with the most ops (max-pool, residual adds, padding).
    spec = behavior([vector_spec(5), visual_spec(15, 15, 2)], continuous=2, branches=(3,))
    policy = PolicyNetwork(spec, hidden_units=16, num_layers=1, normalize=False,
                           vis_encode_type="resnet", memory_size=8)

    # Images stay HWC here; the exporter owns the NCHW input layout.
    @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="obs_0"),
                                  tf.TensorSpec([None, 15, 15, 2], tf.float32, name="obs_1"),
                                  tf.TensorSpec([None, 3], tf.float32, name="action_masks"),
                                  tf.TensorSpec([None, 8], tf.float32, name="recurrent_in")])
    def serve(obs_0, obs_1, action_masks, recurrent_in):
        sampled = policy([obs_0, obs_1], action_masks, recurrent_in)
        deterministic = policy.deterministic([obs_0, obs_1], action_masks, recurrent_in)
        return {"continuous_actions": sampled["env_continuous_action"],
                "deterministic_continuous_actions": deterministic["env_continuous_action"],
                "deterministic_discrete_actions": deterministic["discrete_action"],
                "recurrent_out": deterministic["memory"]}

    batch = 16
    obs = random_obs(spec, batch, rng)
    feeds = {"obs_0": obs[0], "obs_1": obs[1],
             "action_masks": random_allowed_masks(rng, batch, (3,)),
             "recurrent_in": rng.normal(size=(batch, 8)).astype(np.float32)}
    onnx_out = _convert_and_run(serve, feeds)
    tf_out = serve(*feeds.values())
    for name in ("deterministic_continuous_actions", "recurrent_out"):
        np.testing.assert_allclose(onnx_out[name], tf_out[name].numpy(), atol=1e-5, err_msg=name)
    np.testing.assert_array_equal(onnx_out["deterministic_discrete_actions"],
                                  tf_out["deterministic_discrete_actions"].numpy())
    sampled = onnx_out["continuous_actions"]
    assert sampled.shape == (batch, 2) and np.all(np.abs(sampled) <= 1.0)
