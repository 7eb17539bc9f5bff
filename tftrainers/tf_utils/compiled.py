"""One compiled function per step, traced once from a fixed input signature, called cheaply.

``tf.function.__call__`` re-binds and re-casts every argument against the signature on each
call; for a policy step that costs more than running the XLA-compiled graph. Because the
signature is fixed, there is exactly one concrete function: ``CompiledFunction`` traces it
once, on its first call (a function a run never calls costs no start-up; the PPO update is
first called by its background compile, so its trace leaves the start-up too), and calls
it with flat tensors, so the Python overhead per step stays small. XLA still compiles once
per distinct input shape (callers pad batches to buckets).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

try:  # the converter tf.constant uses, minus its dispatch: ~5 us instead of ~20 a call
    from tensorflow.python.eager import context as _context
    from tensorflow.python.framework.constant_op import convert_to_eager_tensor as _to_eager
except ImportError:  # a TensorFlow without these internals: the public path
    _to_eager = None


class CompiledFunction:
    """``fn`` compiled with ``input_signature`` (and XLA when ``jit_compile``).

    Call it with arguments matching the signature's structure (NumPy arrays, tensors or
    Python scalars); it returns what ``fn`` returns, as tensors.
    """

    def __init__(self, fn: Callable, input_signature: Sequence[Any], jit_compile: bool = True):
        # No autograph: these functions hold no Python control flow over tensors (loops are
        # written as tf.while_loop), and converting them cost a second at start-up.
        self.function = tf.function(fn, input_signature=input_signature, jit_compile=jit_compile,
                                    autograph=False)
        self._specs = tf.nest.flatten(list(input_signature))
        self._numpy_dtypes = [spec.dtype.as_numpy_dtype for spec in self._specs]
        self._concrete = None
        self._call_flat = None
        self._lock = threading.Lock()  # one trace when two threads call first at once

    @property
    def concrete(self):
        """The one concrete function (traced on first use)."""
        if self._concrete is None:
            with self._lock:
                if self._concrete is None:
                    concrete = self.function.get_concrete_function()
                    self._call_flat = getattr(concrete, "_call_flat", None)
                    self._concrete = concrete
        return self._concrete

    @property
    def tracing_count(self) -> int:
        return self.function.experimental_get_tracing_count()

    def __call__(self, *args):
        flat = tf.nest.flatten(list(args))
        if len(flat) != len(self._specs):
            raise ValueError(f"expected {len(self._specs)} input tensors, got {len(flat)}")
        concrete = self._concrete if self._concrete is not None else self.concrete
        if self._call_flat is None or _to_eager is None:  # no private fast path
            return self.function(*args)
        context = _context.context()
        tensors = [_to_eager(x, context, spec.dtype)
                   if type(x) is np.ndarray and x.dtype == dtype
                   else tf.convert_to_tensor(x, dtype=spec.dtype)
                   for x, spec, dtype in zip(flat, self._specs, self._numpy_dtypes)]
        return self._call_flat(tensors, concrete.captured_inputs)
