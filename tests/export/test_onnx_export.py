"""ONNX export: opsets, graph checks and file handling."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest

from tftrainers.export import (DEFAULT_OPSET, SUPPORTED_OPSETS, OnnxExportError, export_onnx,
                               policy_to_onnx)
from tftrainers.export.onnx_export import check_converted

from .helpers import CASES, build_policy, contract_feeds, keras_deterministic, random_inputs


@pytest.fixture(scope="module")
def everything():
    """Visual + vector observations, hybrid actions, memory, normalizer: every op kind."""
    return build_policy(CASES["everything"])


def test_default_opset_is_in_the_sentis_range():
    assert DEFAULT_OPSET in SUPPORTED_OPSETS
    assert (SUPPORTED_OPSETS.start, SUPPORTED_OPSETS.stop - 1) == (9, 15)


@pytest.mark.parametrize("opset", list(SUPPORTED_OPSETS))
def test_every_supported_opset_converts_and_matches_keras(everything, opset, rng):
    model = policy_to_onnx(everything, opset)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [opset]
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    obs, masks, memory = random_inputs(everything, 64, rng, scale=3.0)
    expected = keras_deterministic(everything, obs, masks, memory)
    names = list(expected)
    got = dict(zip(names, session.run(names, contract_feeds(everything.spec, obs, masks,
                                                            memory))))
    for name in names:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("opset", [8, 16, 0, 13.0, "13", True])
def test_opset_outside_the_range_is_a_one_line_error(everything, tmp_path, opset):
    with pytest.raises(ValueError) as error:
        export_onnx(everything, str(tmp_path / "model.onnx"), opset=opset)
    message = str(error.value)
    assert "\n" not in message
    assert repr(opset) in message and "9 to 15" in message
    assert not os.listdir(tmp_path)  # nothing written


def test_export_writes_the_file_atomically(everything, tmp_path):
    path = tmp_path / "nested" / "Everything.onnx"
    assert export_onnx(everything, str(path)) == str(path)
    assert sorted(os.listdir(path.parent)) == ["Everything.onnx"]  # no temporary left over
    model = onnx.load(str(path))
    assert [o.version for o in model.opset_import if o.domain == ""] == [DEFAULT_OPSET]
    # Overwriting an existing export works too.
    export_onnx(everything, str(path), opset=9)
    assert [o.version for o in onnx.load(str(path)).opset_import if o.domain == ""] == [9]


def test_unconverted_tensorflow_ops_are_an_error():
    # tf2onnx converts with continue_on_error=True: an op without a handler stays in the
    # graph under its TensorFlow name and only a log line says so.
    node = onnx.helper.make_node("MatrixDiagV3", ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])])
    model = onnx.helper.make_model(graph)
    with pytest.raises(OnnxExportError, match="MatrixDiagV3"):
        check_converted(model, 13)
