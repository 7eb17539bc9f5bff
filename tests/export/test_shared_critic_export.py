"""A run with ``shared_critic: true`` (and memory) exports by the frozen contract: the same
inputs and outputs as any policy, no value output; the values stay in the SavedModel's
separate ``value_estimates`` signature."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.cli import learn_main
from tftrainers.export import SERVING_SIGNATURE, output_names
from tftrainers.export.savedmodel_export import CRITIC_RECURRENT_IN, VALUE_SIGNATURE
from tftrainers.networks import SharedCritic
from tftrainers.runs import load_policy

from .helpers import Exported, contract_feeds, deterministic_names, keras_deterministic, \
    random_inputs
from .test_contract import BATCH, check_values, expected_inputs, expected_outputs, per_row

CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 128, shared_critic: true}
    network_settings:
      hidden_units: 16
      num_layers: 1
      normalize: true
      memory: {memory_size: 16, sequence_length: 8}
    reward_signals: {extrinsic: {gamma: 0.9}, curiosity: {strength: 0.01}}
    max_steps: 600
    time_horizon: 16
    keep_checkpoints: 1
env_settings: {env_path: "builtin:Basic", seed: 1}
"""


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """The run's shipped ONNX and SavedModel, with the policy and critic of its checkpoint."""
    root = tmp_path_factory.mktemp("shared_critic_run")
    config = root / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(root)]) == 0
    run = str(root / "r")
    policy, step, critic = load_policy(run, "Basic", deterministic=True, with_step=True,
                                       with_critic=True)
    savedmodel = os.path.join(run, "Basic", "saved_model", str(step))
    return Exported(policy, critic, os.path.join(run, "Basic.onnx"), savedmodel)


def test_inputs_and_outputs_are_the_contracts(shipped, rng):
    policy = shipped.policy
    assert policy.memory_size == 16
    inputs = {i.name: tuple(i.shape[1:]) for i in shipped.session.get_inputs()}
    assert inputs == expected_inputs(policy)
    outputs = [o.name for o in shipped.session.get_outputs()]
    assert outputs == output_names(policy.spec, policy.memory_size)
    assert not any("value" in name for name in outputs)
    serving = shipped.loaded.signatures[SERVING_SIGNATURE]
    assert {name: (tuple(s.shape), s.dtype.as_numpy_dtype)
            for name, s in serving.structured_outputs.items()} == \
        per_row(expected_outputs(policy))
    obs, masks, memory = random_inputs(policy, BATCH, rng)
    feeds = contract_feeds(policy.spec, obs, masks, memory)
    check_values(policy, shipped.run_onnx(feeds))
    check_values(policy, shipped.run_savedmodel(feeds), rows=True)


def test_shipped_actions_are_the_checkpoints(shipped, rng):
    obs, masks, memory = random_inputs(shipped.policy, 64, rng, scale=3.0)
    expected = keras_deterministic(shipped.policy, obs, masks, memory)
    feeds = contract_feeds(shipped.policy.spec, obs, masks, memory)
    names = deterministic_names(shipped.policy)
    for out in (shipped.run_onnx(feeds, names), shipped.run_savedmodel(feeds, names)):
        for name in names:
            np.testing.assert_allclose(out[name], expected[name], rtol=1e-5, atol=1e-5,
                                       err_msg=name)


def test_value_signature_reads_the_policy_body(shipped, rng):
    critic = shipped.critic
    assert isinstance(critic, SharedCritic) and critic.body is shipped.policy.actor.body
    obs, _, memory = random_inputs(shipped.policy, BATCH, rng)
    feeds = {f"obs_{i}": o for i, o in enumerate(obs)}  # vector observations only
    feeds[CRITIC_RECURRENT_IN] = memory[:, None, :]
    out = shipped.loaded.signatures[VALUE_SIGNATURE](
        **{k: tf.constant(v) for k, v in feeds.items()})
    expected, _ = critic([tf.constant(o) for o in obs], memory=tf.constant(memory))
    assert set(expected) == {"extrinsic", "curiosity"}
    for stream, values in expected.items():
        np.testing.assert_allclose(out[stream].numpy(), values.numpy(), rtol=1e-5, atol=1e-6)
