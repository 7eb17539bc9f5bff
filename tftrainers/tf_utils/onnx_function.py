"""A TensorFlow function over Keras variables, converted once to an ONNX program whose
weights are inputs: the learner converts, the acting side runs it with no TensorFlow.

    program = convert_to_onnx(policy.act_packed, width, policy.actor.variables)
    runner = OnnxRunner(program)             # tftrainers.acting: onnxruntime only
    runner.set_weights(flat_weights)         # the variables' values, one flat vector
    out = runner(packed)                     # [n, outputs], the TensorFlow call's numbers

A small policy spends most of a TensorFlow call in the runtime around the graph: ~100 us
alone and ~200-280 us inside an env loop, against ~40 and ~100 for the same graph in
onnxruntime. The function is traced once with every Keras variable it reads replaced by an
input (``keras.StatelessScope``) and converted by tf2onnx, so the ONNX graph holds no
weights: after each update the acting side is handed the new values as one flat vector
(every variable in ``variables`` order, flattened), with a version number. Nothing is
converted again while training.

Conversions are cached on disk (``program_cache_dir``), keyed by the traced graph itself
(its GraphDef, serialized deterministically), the signature and the TensorFlow, tf2onnx and
opset versions: a second run of the same network skips tf2onnx (about 0.5 s a conversion
on an idle core, two conversions before a PPO run's first env step). A changed network, a
changed op or another version traces to another key; a cache that cannot be read or
written is ignored.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from typing import Callable, Optional, Sequence

import numpy as np

from tftrainers.acting.onnx_program import OnnxProgram, WeightInput
from tftrainers.logs import quiet_logger
from tftrainers.tf_utils.opsets import DEFAULT_OPSET, SUPPORTED_OPSETS  # noqa: F401



class OnnxExportError(RuntimeError):
    """tf2onnx left TensorFlow ops it could not convert in the graph."""


def quiet_tf2onnx():
    """tf2onnx logs its version banner and every optimizer pass at INFO: a page per
    conversion in an application that logs at INFO. Its ERROR lines (an op it cannot
    convert, two lines per op) are held back too: ``check_converted`` says that in one line,
    naming the ops and where they are. Only CRITICAL shows."""
    return quiet_logger("tf2onnx", logging.CRITICAL)


def check_converted(model, opset: int) -> None:
    """Raises OnnxExportError for ops tf2onnx left unconverted.

    ``from_function`` converts with continue_on_error=True: an op without a handler stays
    in the graph under its TensorFlow name and the failure is only logged.
    """
    import onnx
    nodes = [node for node in model.graph.node if node.domain in ("", "ai.onnx")
             and not onnx.defs.has(node.op_type, max_inclusive_version=opset)]
    unknown = sorted({node.op_type for node in nodes})
    if unknown:
        # The node's name holds the Keras layers' name scopes: it says whose op it is
        # (e.g. a user's encoder, network_settings.encoder).
        raise OnnxExportError(f"tf2onnx could not convert {', '.join(unknown)} to ONNX "
                              f"opset {opset} (in {nodes[0].name})")


def flat_layout(variables: Sequence) -> tuple:
    """(offsets [len + 1], shapes) of ``variables`` flattened and concatenated in order."""
    shapes = [tuple(int(d) for d in v.shape) for v in variables]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64), shapes


def _dtype_name(variable) -> str:
    dtype = variable.dtype  # a string for Keras variables, a DType for tf.Variables
    return dtype if isinstance(dtype, str) else dtype.name


#: Where converted programs are kept: $TFTRAINERS_CACHE_DIR, else $XDG_CACHE_HOME/tftrainers
#: (~/.cache/tftrainers); TFTRAINERS_CACHE_DIR=off turns the cache off.
CACHE_ENV = "TFTRAINERS_CACHE_DIR"


def program_cache_dir() -> Optional[str]:
    """The folder of cached ONNX programs, or None when the cache is off."""
    folder = os.environ.get(CACHE_ENV)
    if folder == "off":
        return None
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        folder = os.path.join(base, "tftrainers")
    return os.path.join(folder, "onnx")


def _cache_key(concrete, signature) -> str:
    import tensorflow as tf
    import tf2onnx
    digest = hashlib.sha256()
    for part in (tf.__version__, tf2onnx.__version__, str(DEFAULT_OPSET),
                 repr([(s.name, tuple(s.shape.as_list()), s.dtype.name) for s in signature])):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(concrete.graph.as_graph_def().SerializeToString(deterministic=True))
    return digest.hexdigest()


def _load_program(path: str) -> Optional[OnnxProgram]:
    try:
        with open(path) as f:
            data = json.load(f)
        return OnnxProgram(model=base64.b64decode(data["model"]),
                           input_name=data["input_name"], output_name=data["output_name"],
                           weights=tuple(WeightInput(w[0], w[1], w[2], tuple(w[3]), w[4])
                                         for w in data["weights"]),
                           total_size=int(data["total_size"]))
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None  # absent or unreadable: converted again (and written anew)


def _store_program(path: str, program: OnnxProgram) -> None:
    from tftrainers.files import write_atomically
    data = {"model": base64.b64encode(program.model).decode(),
            "input_name": program.input_name, "output_name": program.output_name,
            "weights": [list(w) for w in program.weights], "total_size": program.total_size}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomically(path, json.dumps(data))
    except OSError:
        pass  # a read-only or full disk: the next run converts again


def convert_to_onnx(fn: Callable, width: int, variables: Sequence) -> OnnxProgram:
    """``fn(packed [n, width] float32) -> [n, k] float32`` as an ONNX program with the
    values of ``variables`` (Keras variables: every one ``fn`` reads) as inputs.

    Raises:
        OnnxExportError: an op tf2onnx could not convert, or a graph whose inputs are not
            the ones asked for.
    """
    import keras
    import tensorflow as tf

    variables = list(variables)
    offsets, shapes = flat_layout(variables)
    signature = [tf.TensorSpec([None, int(width)], tf.float32, name="packed")] + [
        tf.TensorSpec(v.shape, v.dtype, name=f"weight_{i}") for i, v in enumerate(variables)]

    def stateless(packed, *weights):
        with keras.StatelessScope(state_mapping=list(zip(variables, weights))):
            return fn(packed)

    function = tf.function(stateless, input_signature=signature, autograph=False)
    folder = program_cache_dir()
    path = None
    if folder is not None:
        # Traced once: tf2onnx below gets the same concrete function from the tf.function.
        path = os.path.join(folder, _cache_key(function.get_concrete_function(), signature)
                            + ".json")
        program = _load_program(path)
        if program is not None and program.total_size == int(offsets[-1]):
            return program
    program = _convert(function, signature, variables, offsets, shapes)
    if path is not None:
        _store_program(path, program)
    return program


def _convert(function, signature, variables, offsets, shapes) -> OnnxProgram:
    """tf2onnx's conversion of ``function`` as an OnnxProgram (see ``convert_to_onnx``)."""
    import tf2onnx
    with quiet_tf2onnx():
        model, _ = tf2onnx.convert.from_function(function, input_signature=signature,
                                                 opset=DEFAULT_OPSET)
    check_converted(model, DEFAULT_OPSET)
    # tf2onnx keeps the signature's names, but an input the graph never reads (a variable
    # of an unused head) is dropped: the program feeds exactly the inputs that remain.
    by_name = {s.name: i for i, s in enumerate(signature)}
    names = [i.name for i in model.graph.input]
    unexpected = [n for n in names if n not in by_name]
    if unexpected:
        raise OnnxExportError(f"converted graph has unexpected inputs {unexpected}")
    weights = []
    for name in names:
        if name == "packed":
            continue
        index = by_name[name] - 1
        weights.append(WeightInput(name, int(offsets[index]), int(offsets[index + 1]),
                                   shapes[index], _dtype_name(variables[index])))
    return OnnxProgram(model=model.SerializeToString(), input_name="packed",
                       output_name=model.graph.output[0].name, weights=tuple(weights),
                       total_size=int(offsets[-1]))


def flat_values(variables: Sequence) -> Callable[[], np.ndarray]:
    """A function returning the variables' current values as one flat float32 vector (the
    layout of ``convert_to_onnx``), read in one TensorFlow call."""
    import tensorflow as tf
    variables = list(variables)

    def read():
        return tf.concat([tf.zeros([0])] + [tf.reshape(tf.cast(v.value, tf.float32), [-1])
                                            for v in variables], axis=0)
    concrete = tf.function(read, input_signature=[], autograph=False).get_concrete_function()
    return lambda: concrete().numpy()
