""".keras and TFLite: each format in its own runtime acts as the SavedModel does (.keras
1e-5; TFLite float 1e-5 plus 1e-5 of the value; a stated bound for dynamic-range quantised
TFLite), loads without a config, and names what it cannot do."""
from __future__ import annotations

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs import make
from tftrainers.evaluate import evaluate
from tftrainers.export import (KerasExportError, KerasPolicy, TFLitePolicy, export_keras,
                               export_tflite, exported_policy)
from tftrainers.export import signature as contract
from tftrainers.settings import NetworkSettings
from tftrainers.trainers.policy import Policy

from .helpers import contract_feeds, deterministic_names, random_inputs
from .test_parity import TOLERANCE, assert_outputs_match

pytest.importorskip("ai_edge_litert")
from ai_edge_litert.interpreter import Interpreter  # noqa: E402

CASES = ["continuous", "discrete", "hybrid", "visual", "memory"]

# LiteRT's default CPU kernels (XNNPACK) sum in another order than TensorFlow: measured up
# to 1.7e-5 on a memory value of 1.6 (the "everything" case, 256 rows); its reference
# kernels stay under 1e-5 there. So TFLite float gets 1e-5 plus 1e-5 of the value.
TFLITE_RTOL = 1e-5

# Dynamic-range quantisation (int8 weights, float activations) against the float
# SavedModel, on the test policies, whose weights are perturbed by N(0, 0.3) (larger than
# trained ones) and fed inputs of scale 3. Measured over these cases, 256 rows each: largest
# action difference 0.056 (hybrid), largest memory difference 0.094, argmax changed in at
# most 0.8% of the rows (visual). The bounds leave about 2x room.
QUANTISED_ACTION_BOUND = 0.12
QUANTISED_MEMORY_BOUND = 0.2
QUANTISED_ARGMAX_AGREEMENT = 0.97


@pytest.fixture(scope="module")
def files(exported, tmp_path_factory):
    """``files(case)``: (Exported, .keras path, .tflite path, quantised .tflite path)."""
    cache = {}

    def get(case):
        if case not in cache:
            e = exported(case)
            folder = tmp_path_factory.mktemp(f"{case}-formats")
            cache[case] = (e, export_keras(e.policy, str(folder / f"{case}.keras")),
                           export_tflite(e.policy, str(folder / f"{case}.tflite")),
                           export_tflite(e.policy, str(folder / f"{case}.int8.tflite"),
                                         quantize=True))
        return cache[case]
    return get


_LOADED = {}


def run_keras(path, feeds):
    """The file through plain Keras, as a user without tftrainers' loader would."""
    import tftrainers.export.keras_export  # noqa: F401  (registers ExportedPolicy)
    if path not in _LOADED:
        _LOADED[path] = keras.models.load_model(path)
    out = _LOADED[path]({k: tf.constant(v) for k, v in feeds.items()})
    return {k: np.asarray(v) for k, v in out.items()}


def run_litert(path, feeds):
    """The file in the LiteRT interpreter (default CPU kernels) through its signature."""
    if path not in _LOADED:
        _LOADED[path] = Interpreter(model_path=path).get_signature_runner(
            contract.SERVING_SIGNATURE)
    return _LOADED[path](**feeds)


@pytest.mark.parametrize("case", CASES)
def test_keras_and_tflite_act_as_the_savedmodel(files, case, rng):
    e, keras_path, tflite_path, _ = files(case)
    obs, masks, memory = random_inputs(e.policy, 256, rng, scale=3.0)
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    names = deterministic_names(e.policy)
    expected = e.run_savedmodel(feeds, names)
    assert_outputs_match(expected, run_keras(keras_path, feeds), "keras")
    got = run_litert(tflite_path, feeds)
    for name, want in expected.items():
        if want.dtype.kind == "i":
            np.testing.assert_array_equal(got[name], want, err_msg=f"tflite {name}")
        else:
            np.testing.assert_allclose(got[name], want, rtol=TFLITE_RTOL, atol=TOLERANCE,
                                       err_msg=f"tflite {name}")


@pytest.mark.parametrize("case", CASES)
def test_outputs_and_constants_follow_the_contract(files, case, rng):
    e, keras_path, tflite_path, _ = files(case)
    obs, masks, memory = random_inputs(e.policy, 3, rng)
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    reference = e.run_savedmodel(feeds)  # constants repeated per row, as TF Serving's
    for source, out in (("keras", run_keras(keras_path, feeds)),
                        ("tflite", run_litert(tflite_path, feeds))):
        assert sorted(out) == sorted(contract.output_names(e.policy.spec,
                                                           e.policy.memory_size)), source
        for name, want in reference.items():
            assert out[name].shape == want.shape, (source, name)
            assert out[name].dtype.kind == want.dtype.kind, (source, name)
            if name in ("version_number", "memory_size") or name.endswith("output_shape"):
                np.testing.assert_array_equal(out[name], want, err_msg=f"{source} {name}")


@pytest.mark.parametrize("case", CASES)
def test_quantised_tflite_stays_within_its_bound(files, case, rng):
    e, _, _, quantised = files(case)
    assert os.path.getsize(quantised) < os.path.getsize(files(case)[2])
    obs, masks, memory = random_inputs(e.policy, 256, rng, scale=3.0)
    feeds = contract_feeds(e.policy.spec, obs, masks, memory)
    names = deterministic_names(e.policy)
    expected, got = e.run_savedmodel(feeds, names), run_litert(quantised, feeds)
    for name in names:
        if name == contract.DETERMINISTIC_DISCRETE_ACTIONS:
            agreement = np.mean(got[name] == expected[name])
            assert agreement >= QUANTISED_ARGMAX_AGREEMENT, (name, agreement)
        else:
            bound = QUANTISED_MEMORY_BOUND if name == contract.RECURRENT_OUT \
                else QUANTISED_ACTION_BOUND
            assert np.abs(got[name] - expected[name]).max() <= bound, name


@pytest.mark.parametrize("case", ["continuous", "visual", "memory"])
def test_loaders_read_the_spec_from_the_file(files, case):
    e, keras_path, tflite_path, quantised = files(case)
    for path in (e.onnx_path, e.savedmodel_dir, keras_path, tflite_path, quantised):
        policy = exported_policy(path)  # no spec, no config
        assert policy.spec.action_spec == e.policy.spec.action_spec, path
        assert [(o.shape, o.kind) for o in policy.spec.observation_specs] == \
            [(o.shape, o.kind) for o in e.policy.spec.observation_specs], path
        assert policy.memory_size == e.policy.memory_size, path
    assert isinstance(exported_policy(keras_path), KerasPolicy)
    assert isinstance(exported_policy(keras_path).keras_model, keras.Model)
    assert isinstance(exported_policy(tflite_path), TFLitePolicy)


def test_every_format_scores_the_same_episodes(files):
    e, keras_path, tflite_path, _ = files("memory")  # Hallway: memory fed back per agent
    scores = {}
    for path in (e.onnx_path, keras_path, tflite_path):
        env = make("builtin:Hallway", seed=5, num_areas=4)
        (result,) = evaluate(env, exported_policy(path, deterministic=True),
                             episodes=4).values()
        scores[os.path.splitext(path)[1]] = result["mean_reward"]
    assert scores[".keras"] == pytest.approx(scores[".onnx"], abs=1e-6)
    assert scores[".tflite"] == pytest.approx(scores[".onnx"], abs=1e-6)


def test_keras_export_errors(tmp_path):
    spec = make("builtin:GridWorld", obs="visual").behavior_specs["GridWorld"]
    policy = Policy(spec, NetworkSettings(hidden_units=8, num_layers=1,
                                          encoder=lambda: keras.layers.Flatten()),
                    jit_compile=False)
    with pytest.raises(KerasExportError, match=r"cannot be saved in a \.keras file: a \.keras "
                                               r"file rebuilds it by name; give "
                                               r"network_settings\.encoder as MODULE:NAME"):
        export_keras(policy, str(tmp_path / "p.keras"))
    with pytest.raises(ValueError, match=r"must end with \.keras"):
        export_keras(policy, str(tmp_path / "p.h5"))
    assert not list(tmp_path.iterdir())


def test_unreadable_files_are_one_line(tmp_path):
    for suffix, words in ((".keras", "not a readable .keras policy"),
                          (".tflite", "not a readable TFLite policy")):
        path = tmp_path / f"garbage{suffix}"
        path.write_bytes(b"not a model at all")
        with pytest.raises(ValueError, match=words) as info:
            exported_policy(str(path))
        assert len(str(info.value).splitlines()) == 1
    with pytest.raises(FileNotFoundError, match="no such TFLite file"):
        exported_policy(str(tmp_path / "missing.tflite"))
