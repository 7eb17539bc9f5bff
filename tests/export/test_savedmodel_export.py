"""SavedModel export: TF Serving's folder layout, the value signature, saved_model_cli."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.export import VALUE_SIGNATURE, export_savedmodel
from tftrainers.export.savedmodel_export import CRITIC_RECURRENT_IN, CRITIC_RECURRENT_OUT

from .helpers import STREAMS, contract_feeds, keras_deterministic, random_inputs

SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")


def test_version_folder_layout(exported, tmp_path):
    policy = exported("discrete").policy
    base = tmp_path / "serving" / "GridWorld"
    assert export_savedmodel(policy, str(base), 7) == str(base / "7")
    assert export_savedmodel(policy, str(base), "12") == str(base / "12")  # digits as str
    # Only the numbered folders: the temporary folders are gone.
    assert sorted(os.listdir(base)) == ["12", "7"]
    assert os.path.isfile(base / "7" / "saved_model.pb")
    assert os.path.isdir(base / "7" / "variables")


def test_existing_version_is_kept_unless_overwrite(exported, tmp_path):
    discrete, continuous = exported("discrete").policy, exported("continuous").policy
    export_savedmodel(discrete, str(tmp_path), 1)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_savedmodel(continuous, str(tmp_path), 1)
    export_savedmodel(continuous, str(tmp_path), 1, overwrite=True)
    inputs = tf.saved_model.load(str(tmp_path / "1")).signatures[
        "serving_default"].structured_input_signature[1]
    assert set(inputs) == {"obs_0"}  # the continuous model replaced the discrete one
    assert sorted(os.listdir(tmp_path)) == ["1"]


@pytest.mark.parametrize("version", [-1, 1.5, "v1", "", True, "１"])
def test_bad_versions_are_refused(exported, tmp_path, version):
    with pytest.raises(ValueError, match="non-negative int"):
        export_savedmodel(exported("discrete").policy, str(tmp_path), version)
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("case", ["continuous", "visual", "memory"])
def test_value_estimates_signature_matches_the_critic(exported, case, rng):
    e = exported(case)
    obs, _, memory = random_inputs(e.policy, 32, rng)
    feeds = {k: tf.constant(v) for k, v in contract_feeds(e.policy.spec, obs, None,
                                                           None).items()
             if k.startswith("obs_")}
    if memory is not None:  # the critic's own memory, shaped as the policy's recurrent_in
        feeds[CRITIC_RECURRENT_IN] = tf.constant(memory[:, None])
    values = e.loaded.signatures[VALUE_SIGNATURE](**feeds)
    expected, new_memory = e.critic([tf.constant(o) for o in obs],
                                    memory=None if memory is None else tf.constant(memory))
    assert set(expected) == set(STREAMS)
    assert set(values) == set(STREAMS) | ({CRITIC_RECURRENT_OUT} if memory is not None
                                           else set())
    for stream in STREAMS:
        assert values[stream].shape == (32,)
        np.testing.assert_allclose(values[stream].numpy(), expected[stream].numpy(),
                                   atol=1e-5)
    if memory is not None:
        np.testing.assert_allclose(values[CRITIC_RECURRENT_OUT].numpy()[:, 0],
                                   new_memory.numpy(), atol=1e-5)


def test_no_critic_no_value_signature(exported, tmp_path):
    folder = export_savedmodel(exported("discrete").policy, str(tmp_path), 3)
    assert VALUE_SIGNATURE not in tf.saved_model.load(folder).signatures


def _cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([SAVED_MODEL_CLI, *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.skipif(not os.path.exists(SAVED_MODEL_CLI), reason="saved_model_cli not installed")
def test_saved_model_cli_shows_and_runs_the_serving_signature(exported, tmp_path, rng):
    e = exported("hybrid")
    shown = _cli("show", "--dir", e.savedmodel_dir, "--all")
    assert shown.returncode == 0, shown.stderr
    serving = shown.stdout.split("signature_def['serving_default']")[1].split("signature_def[")[0]
    for name in ("obs_0", "obs_1", "action_masks", "version_number", "memory_size",
                 "continuous_actions", "continuous_action_output_shape",
                 "deterministic_continuous_actions", "discrete_actions",
                 "discrete_action_output_shape", "deterministic_discrete_actions"):
        assert f"['{name}']" in serving, name
    assert "shape: (-1, 8)" in serving  # free batch dimension
    assert "signature_def['value_estimates']" in shown.stdout

    obs, masks, _ = random_inputs(e.policy, 3, rng)
    feeds = contract_feeds(e.policy.spec, obs, masks, None)
    for name, array in feeds.items():
        np.save(tmp_path / f"{name}.npy", array)
    out_dir = tmp_path / "out"
    ran = _cli("run", "--dir", e.savedmodel_dir, "--tag_set", "serve", "--signature_def",
               "serving_default", "--outdir", str(out_dir),
               "--inputs", ";".join(f"{k}={tmp_path / k}.npy" for k in feeds))
    assert ran.returncode == 0, ran.stderr
    expected = keras_deterministic(e.policy, obs, masks, None)
    for name, want in expected.items():
        np.testing.assert_allclose(np.load(out_dir / f"{name}.npy"), want, atol=1e-5)
    assert np.load(out_dir / "version_number.npy").tolist() == [[3.0]] * 3  # one per row
