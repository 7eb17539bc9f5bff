"""The Keras actor, the ONNX file and the SavedModel act alike
(docs/dev/architecture.md#export-contract: 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.export import SERVING_SIGNATURE
from tftrainers.export import signature as contract

from .helpers import (contract_feeds, deterministic_names, keras_deterministic, random_inputs,
                      random_masks)

PARITY_CASES = ["continuous", "discrete", "visual", "grid", "hybrid", "memory", "entities",
                "goal"]
TOLERANCE = 1e-5


def assert_outputs_match(expected, got, source):
    for name, want in expected.items():
        if want.dtype.kind == "i" or got[name].dtype.kind == "i":
            np.testing.assert_array_equal(got[name], want, err_msg=f"{source} {name}")
        else:
            np.testing.assert_allclose(got[name], want, rtol=0, atol=TOLERANCE,
                                       err_msg=f"{source} {name}")


def run_tf1_loader(directory, feeds, names):
    """The SavedModel through the TF1 session loader: how TF Serving and
    ``saved_model_cli run`` load it (variables restored by name, not by object)."""
    graph = tf.Graph()
    with tf.compat.v1.Session(graph=graph) as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], directory)
        signature = meta.signature_def[SERVING_SIGNATURE]
        fetched = session.run([signature.outputs[n].name for n in names],
                              {signature.inputs[k].name: v for k, v in feeds.items()})
    return dict(zip(names, fetched))


@pytest.mark.parametrize("case", PARITY_CASES)
def test_deterministic_outputs_agree(exported, case, rng):
    e = exported(case)
    # Scale 3: some Gaussian means pass the clip at +-3, so clipping is compared too.
    obs, masks, memory = random_inputs(e.policy, 256, rng, scale=3.0)
    expected = keras_deterministic(e.policy, obs, masks, memory)
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    names = deterministic_names(e.policy)
    assert set(expected) == set(names)
    assert_outputs_match(expected, e.run_onnx(feeds, names), "onnx")
    assert_outputs_match(expected, e.run_savedmodel(feeds, names), "savedmodel")
    assert_outputs_match(expected, run_tf1_loader(e.savedmodel_dir, feeds, names), "tf1 loader")
    if contract.DETERMINISTIC_DISCRETE_ACTIONS in expected:  # the masks decide some argmaxes
        unmasked = keras_deterministic(e.policy, obs, np.ones_like(masks), memory)
        assert np.any(unmasked[contract.DETERMINISTIC_DISCRETE_ACTIONS] !=
                      expected[contract.DETERMINISTIC_DISCRETE_ACTIONS])


@pytest.mark.parametrize("case", ["discrete", "hybrid", "memory"])
def test_masked_actions_are_never_chosen(exported, case, rng):
    e = exported(case)
    branches = e.policy.spec.action_spec.discrete_branches
    offsets = np.cumsum((0,) + branches[:-1])
    batch = 2000
    obs, _, memory = random_inputs(e.policy, batch, rng)
    masks = random_masks(rng, batch, branches)
    # Rows with a single allowed action per branch: the hardest case for sampling.
    for offset, size in zip(offsets, branches):
        masks[:200, offset:offset + size] = np.eye(size)[rng.integers(0, size, 200)]
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    names = [contract.DISCRETE_ACTIONS, contract.DETERMINISTIC_DISCRETE_ACTIONS]
    for source, out in (("onnx", e.run_onnx(feeds, names)),
                        ("savedmodel", e.run_savedmodel(feeds, names))):
        for name in names:
            actions = out[name]
            for b, offset in enumerate(offsets):
                chosen = masks[np.arange(batch), offset + actions[:, b]]
                assert np.all(chosen == 1.0), f"{source} {name} picked a masked action"


@pytest.mark.parametrize("case", ["discrete", "hybrid"])
def test_onnx_sampling_follows_the_masked_softmax(exported, case, rng):
    # Multinomial takes logits, not probabilities: the sampled frequencies of one agent
    # repeated many times match softmax(masked logits).
    e = exported(case)
    branches = e.policy.spec.action_spec.discrete_branches
    batch = 4000
    obs, _, _ = random_inputs(e.policy, 1, rng)
    obs = [np.repeat(o, batch, axis=0) for o in obs]
    masks = np.repeat(random_masks(rng, 1, branches), batch, axis=0)
    encoding, _ = e.policy.actor.body([tf.constant(o[:1]) for o in obs])
    logits = e.policy.actor.action_model.masked_logits(encoding, tf.constant(masks[:1]))
    sampled = e.run_onnx(contract_feeds(e.policy.spec, obs, masks, None),
                         [contract.DISCRETE_ACTIONS])[contract.DISCRETE_ACTIONS]
    for b, branch_logits in enumerate(logits):
        probs = tf.nn.softmax(branch_logits)[0].numpy()
        freq = np.bincount(sampled[:, b], minlength=len(probs)) / batch
        np.testing.assert_allclose(freq, probs, atol=0.04)


@pytest.mark.parametrize("case", ["continuous", "hybrid"])
def test_continuous_actions_are_clipped_into_range(exported, case, rng):
    e = exported(case)
    obs, masks, memory = random_inputs(e.policy, 2000, rng, scale=30.0)
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    names = [contract.CONTINUOUS_ACTIONS, contract.DETERMINISTIC_CONTINUOUS_ACTIONS]
    for source, out in (("onnx", e.run_onnx(feeds, names)),
                        ("savedmodel", e.run_savedmodel(feeds, names))):
        sampled = out[contract.CONTINUOUS_ACTIONS]
        mode = out[contract.DETERMINISTIC_CONTINUOUS_ACTIONS]
        for actions in (sampled, mode):
            assert np.all(np.abs(actions) <= 1.0), source
        assert np.any(np.abs(sampled) == 1.0), f"{source}: large inputs should reach the clip"
        assert not np.allclose(sampled, mode), f"{source}: the sampled actions are not sampled"


@pytest.mark.parametrize("source", ["onnx", "savedmodel"])
def test_lstm_rolled_20_steps_matches_keras(exported, source, rng):
    e = exported("memory")
    batch, m = 8, e.policy.memory_size
    keras_memory = np.zeros((batch, m), np.float32)
    exported_memory = np.zeros((batch, m), np.float32)
    run = e.run_onnx if source == "onnx" else e.run_savedmodel
    names = deterministic_names(e.policy)
    for step in range(20):
        obs, masks, _ = random_inputs(e.policy, batch, rng)
        expected = keras_deterministic(e.policy, obs, masks, keras_memory)
        got = run(contract_feeds(e.policy.spec, obs, masks, exported_memory), names)
        assert_outputs_match(expected, got, f"{source} step {step}")
        keras_memory = expected[contract.RECURRENT_OUT][:, 0]
        exported_memory = got[contract.RECURRENT_OUT][:, 0]  # fed back as recurrent_in
    assert np.abs(keras_memory).max() > 0.05  # the memory carries something
