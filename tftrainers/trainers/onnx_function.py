"""Policy calls run by onnxruntime, their weights fed in as inputs and refreshed after updates.

    act = OnnxFunction(policy._act_packed, width, policy.actor.variables)
    out = act(packed)            # [n, outputs] NumPy, the same numbers as the TensorFlow call
    act.refresh()                # after the variables changed (an update, a restore)

A small policy spends most of a TensorFlow call in the runtime around the graph: ~100 us
alone and ~200-280 us inside an env loop, against ~40 and ~100 for the same graph in
onnxruntime. The function is traced once with every Keras variable it reads replaced by an
input (``keras.StatelessScope``) and converted by tf2onnx, so the ONNX graph holds no
weights: after an update, ``refresh`` reads the variables once and every later call feeds
those arrays. Nothing is converted again while training.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf


class OnnxFunction:
    """``fn(packed) -> [n, k] float32`` over ``variables``, run by onnxruntime.

    Args:
        fn: a function of one float32 matrix [n, width] returning one float32 matrix; it
            may read any of ``variables`` (Keras variables) and no other state.
        width: the input's columns.
        variables: every variable ``fn`` reads.

    Raises:
        ImportError: onnxruntime is not installed.
        tftrainers.export.onnx_export.OnnxExportError: an op tf2onnx could not convert.
    """

    def __init__(self, fn: Callable[[tf.Tensor], tf.Tensor], width: int,
                 variables: Sequence[keras.Variable]):
        import onnxruntime
        import tf2onnx

        from tftrainers.export.onnx_export import (DEFAULT_OPSET, OnnxExportError,
                                                   check_converted, quiet_tf2onnx)

        self.variables = list(variables)
        signature = [tf.TensorSpec([None, int(width)], tf.float32, name="packed")] + [
            tf.TensorSpec(v.shape, v.dtype, name=f"weight_{i}")
            for i, v in enumerate(self.variables)]

        def stateless(packed, *weights):
            with keras.StatelessScope(state_mapping=list(zip(self.variables, weights))):
                return fn(packed)

        with quiet_tf2onnx():
            model, _ = tf2onnx.convert.from_function(
                tf.function(stateless, input_signature=signature, autograph=False),
                input_signature=signature, opset=DEFAULT_OPSET)
        check_converted(model, DEFAULT_OPSET)
        options = onnxruntime.SessionOptions()
        # One batch of agents per env step: thread hand-offs cost more than they save.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"])
        names = [i.name for i in self.session.get_inputs()]
        # tf2onnx keeps the signature's names, but an input the graph never reads (a
        # variable of an unused head) is dropped: feed exactly the inputs that remain.
        by_name = {s.name: i for i, s in enumerate(signature)}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise OnnxExportError(f"converted graph has unexpected inputs {missing}")
        self._input_name = signature[0].name
        self._weight_inputs = [(n, by_name[n] - 1) for n in names if n != self._input_name]
        self._output_names = [self.session.get_outputs()[0].name]
        # One TensorFlow call reads every variable (a read each costs ~20 us, far more in
        # an env loop that has pushed TensorFlow out of the CPU caches).
        read = [self.variables[index] for _, index in self._weight_inputs]
        self._read = tf.function(lambda: [tf.identity(v.value) for v in read],
                                 input_signature=[], autograph=False).get_concrete_function()
        self._feed = {}
        self.refresh()

    def refresh(self, known: Optional[Mapping[int, np.ndarray]] = None) -> None:
        """Takes the variables' current values for the following calls: those in ``known``
        (arrays by variable ``id``) as given, all others unchanged; without ``known``, every
        variable's value, read from TensorFlow."""
        if known is not None:
            feed = dict(self._feed)
            for name, index in self._weight_inputs:
                value = known.get(id(self.variables[index]))
                if value is not None:
                    feed[name] = value
            self._feed = feed
            return
        values = self._read()
        feed = {name: np.asarray(value.numpy())  # scalars come back as NumPy scalars
                for (name, _), value in zip(self._weight_inputs, values)}
        self._feed = feed  # one swap: a call in another thread sees old or new, never a mix

    def __call__(self, packed: np.ndarray) -> np.ndarray:
        feed = dict(self._feed)
        feed[self._input_name] = packed
        return self.session.run(self._output_names, feed)[0]
