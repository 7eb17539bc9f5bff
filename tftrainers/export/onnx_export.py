"""ONNX export for Unity's ML-Agents package (model version 3) and any ONNX runtime.

    export_onnx(policy, "results/run1/Ball3D.onnx")            # opset DEFAULT_OPSET
    export_onnx(policy, "Ball3D.onnx", opset=9)                # as ML-Agents' own exporter

The graph is ``signature.inference_function`` converted by tf2onnx, then tidied so that a
Unity project reads it like a model ML-Agents exported: the inputs and outputs carry the
contract's exact names in ML-Agents' order, the free batch dimension is called ``batch``,
and every output (constants included) is produced by a node.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, List

import onnx
import tf2onnx

from tftrainers.export.signature import (MODEL_VERSION, inference_function, input_signature,
                                         output_names)
from tftrainers.tf_utils.onnx_function import OnnxExportError, check_converted, quiet_tf2onnx
from tftrainers.tf_utils.opsets import DEFAULT_OPSET, SUPPORTED_OPSETS, check_opset  # noqa: F401

BATCH_DIM = "batch"


def policy_to_onnx(policy, opset: int = DEFAULT_OPSET) -> onnx.ModelProto:
    """The contract's ONNX model of a ``Policy``, in memory (see ``export_onnx``)."""
    check_opset(opset)
    fn = inference_function(policy)
    signature = input_signature(policy.spec, policy.memory_size)
    with quiet_tf2onnx():
        model, _ = tf2onnx.convert.from_function(fn, input_signature=signature, opset=opset)
    check_converted(model, opset)
    _fix_names(model, [s.name for s in signature], output_names(policy.spec,
                                                                policy.memory_size))
    _constants_from_nodes(model)
    _name_batch_dimension(model)
    model.doc_string = f"tftrainers policy (ML-Agents model version {MODEL_VERSION})"
    onnx.checker.check_model(model, full_check=True)
    return model


def export_onnx(policy, path: str, opset: int = DEFAULT_OPSET) -> str:
    """Writes a ``Policy``'s actor as an ONNX model following
    docs/dev/architecture.md#export-contract.

    Inputs ``obs_i`` ([B, size] or [B, C, H, W] float32), ``action_masks`` [B, sum(branches)]
    (1 = allowed; discrete only), ``recurrent_in`` [B, 1, memory_size] (memory only).
    Outputs ``version_number``, ``memory_size``, ``continuous_actions``,
    ``continuous_action_output_shape``, ``deterministic_continuous_actions``,
    ``discrete_actions``, ``discrete_action_output_shape``,
    ``deterministic_discrete_actions``, ``recurrent_out`` (see ``signature``; the action and
    memory outputs only when the behavior has them).

    Args:
        policy: a trained (or restored) ``tftrainers.trainers.policy.Policy``.
        path: the ``.onnx`` file to write (its folder is created); replaced atomically, so
            a reader never sees half a file.
        opset: ONNX opset, one of ``SUPPORTED_OPSETS``.

    Returns:
        ``path``.

    Raises:
        ValueError: an unsupported opset.
        OnnxExportError: an op tf2onnx could not convert.
    """
    model = policy_to_onnx(policy, opset)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    # ".tmp-" marks it for the leftover cleanup of a run killed meanwhile.
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".onnx", dir=folder)
    os.close(fd)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def _rename_tensor(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.name == old:
            value.name = new
    for init in graph.initializer:
        if init.name == old:
            init.name = new


def _fix_names(model: onnx.ModelProto, inputs: List[str], outputs: List[str]) -> None:
    """Gives graph inputs and outputs the contract's names, outputs in ML-Agents' order."""
    graph = model.graph
    # tf2onnx names them after the TensorSpecs and the output dict's keys; older versions
    # appended TensorFlow's ':0' (and 'Identity:0' for outputs).
    for value, names in ((graph.input, inputs), (graph.output, outputs)):
        for v in value:
            base = v.name.split(":")[0]
            if v.name not in names and base in names:
                _rename_tensor(graph, v.name, base)
    got_in, got_out = [v.name for v in graph.input], [v.name for v in graph.output]
    if sorted(got_in) != sorted(inputs) or sorted(got_out) != sorted(outputs):
        raise OnnxExportError(f"converted graph has inputs {got_in} and outputs {got_out}; "
                              f"expected {inputs} and {outputs}")
    # tf.nest sorts the output dict's keys; ML-Agents lists version and memory first.
    by_name: Dict[str, onnx.ValueInfoProto] = {v.name: v for v in graph.output}
    ordered = [onnx.ValueInfoProto() for _ in outputs]
    for proto, name in zip(ordered, outputs):
        proto.CopyFrom(by_name[name])
    del graph.output[:]
    graph.output.extend(ordered)
    by_name = {v.name: v for v in graph.input}
    ordered = [onnx.ValueInfoProto() for _ in inputs]
    for proto, name in zip(ordered, inputs):
        proto.CopyFrom(by_name[name])
    del graph.input[:]
    graph.input.extend(ordered)


def _constants_from_nodes(model: onnx.ModelProto) -> None:
    """Makes constant outputs (``version_number``, the shapes) outputs of Identity nodes.

    tf2onnx folds them into initializers that are graph outputs: valid ONNX, but a node
    output is what every runtime (and ML-Agents' torch export) gives.
    """
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    for output in graph.output:
        if output.name in initializers:
            value = f"{output.name}/value"
            for init in graph.initializer:
                if init.name == output.name:
                    init.name = value
            for node in graph.node:
                node.input[:] = [value if name == output.name else name for name in node.input]
            graph.node.append(onnx.helper.make_node("Identity", [value], [output.name],
                                                    name=f"{output.name}/identity"))


def _name_batch_dimension(model: onnx.ModelProto) -> None:
    """Calls the free first dimension of every input and output ``batch`` (tf2onnx: unk__N)."""
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if len(dims) > 1 and not dims[0].HasField("dim_value"):
            dims[0].dim_param = BATCH_DIM
