"""An ONNX program whose weights are inputs, and its runner: the acting side's policy call.

    runner = OnnxRunner(program)         # program: from tf_utils.onnx_function (the learner)
    runner.set_weights(flat)             # every weight, one flat vector (published)
    out = runner(packed)                 # [n, outputs] float32

Plain data and onnxruntime only (no TensorFlow), so a program and its weights can be sent
to a worker process or a Ray actor and run there.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import numpy as np


class WeightInput(NamedTuple):
    """One weight input of the graph: its name and where its values sit in the flat vector."""

    name: str
    start: int
    stop: int
    shape: Tuple[int, ...]
    dtype: str = "float32"


class OnnxProgram(NamedTuple):
    """A serialized ONNX model of ``fn(packed) -> out`` with its weights as inputs.

    Attributes:
        model: the ONNX model, serialized.
        input_name: the graph's data input ([n, width] float32).
        output_name: its one output ([n, k] float32).
        weights: the weight inputs the graph reads, with their slices of the flat vector.
        total_size: length of the flat weight vector (every variable, read or not).
    """

    model: bytes
    input_name: str
    output_name: str
    weights: Tuple[WeightInput, ...]
    total_size: int


class OnnxRunner:
    """Runs an OnnxProgram in onnxruntime with weights set from flat vectors.

    Raises:
        ImportError: onnxruntime is not installed.
    """

    def __init__(self, program: OnnxProgram, flat_weights: Optional[np.ndarray] = None):
        import onnxruntime
        options = onnxruntime.SessionOptions()
        # One batch of agents per env step: thread hand-offs cost more than they save.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.program = program
        self.session = onnxruntime.InferenceSession(program.model, options,
                                                    providers=["CPUExecutionProvider"])
        self._outputs = [program.output_name]
        self._feed = {}
        if flat_weights is not None:
            self.set_weights(flat_weights)

    def set_weights(self, flat: np.ndarray) -> None:
        """Takes every weight from ``flat`` (the program's layout) for the following calls."""
        flat = np.asarray(flat)
        if flat.shape != (self.program.total_size,):
            raise ValueError(f"expected a flat weight vector of {self.program.total_size} "
                             f"values, got shape {flat.shape}")
        feed = {w.name: flat[w.start:w.stop].astype(w.dtype, copy=False).reshape(w.shape)
                for w in self.program.weights}
        self._feed = feed  # one swap: a call in another thread sees old or new, never a mix

    def __call__(self, packed: np.ndarray) -> np.ndarray:
        feed = dict(self._feed)
        feed[self.program.input_name] = packed
        return self.session.run(self._outputs, feed)[0]
