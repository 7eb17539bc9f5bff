"""ONNX opsets the exporter writes (no TensorFlow or tf2onnx here: the CLI checks
``--opset`` before either is imported)."""
from __future__ import annotations

#: Opsets a Unity project can import (Sentis reads 7..15; ML-Agents' exporter writes 9),
#: from ML-Agents' own up: every one converts these graphs and matches Keras (tests).
SUPPORTED_OPSETS = range(9, 16)
#: tf2onnx 1.17's default and the newest opset Sentis reads; tf2onnx tests 14..18 only,
#: so 14..15 is the overlap it vouches for. Pass 9 for older runtimes (Barracuda).
DEFAULT_OPSET = 15


def check_opset(opset: int) -> int:
    """Returns ``opset`` when it is in ``SUPPORTED_OPSETS``.

    Raises:
        ValueError: one line naming the opset and the allowed range.
    """
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in SUPPORTED_OPSETS:
        raise ValueError(f"ONNX opset {opset!r} is not supported; use an opset from "
                         f"{SUPPORTED_OPSETS.start} to {SUPPORTED_OPSETS.stop - 1} (Unity Sentis)")
    return opset
