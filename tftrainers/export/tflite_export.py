"""The policy as a TFLite / LiteRT flatbuffer for phones and edge devices.

    export_tflite(policy, "Ball3D.tflite")                        # float32
    export_tflite(policy, "Ball3D-int8.tflite", quantize=True)    # dynamic-range int8 weights
    from ai_edge_litert.interpreter import Interpreter
    runner = Interpreter("Ball3D.tflite").get_signature_runner()   # "serving_default"
    out = runner(obs_0=obs)                                       # dict, the contract's names

The file is converted from the SavedModel's ``serving_default`` signature
(``savedmodel_export``), so it has the same inputs and outputs (constant outputs repeated
per row, [B, k]) and a free batch dimension (the signature runner resizes its inputs).
Recurrent policies convert too: the memory is the explicit ``recurrent_in`` /
``recurrent_out`` pair, one LSTM step per call, no state kept inside the model. Only
TFLite builtin ops are used (no Flex / Select TF ops), so the plain LiteRT runtime runs it.

Dynamic-range quantisation stores weights as int8 and computes in float: about a
third to a half of the float file (measured: docs/guides/deploying.md) at a small loss of
accuracy, bounded in tests/export/test_tflite_export.py.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from tftrainers.export.savedmodel_export import export_savedmodel
from tftrainers.export.signature import SERVING_SIGNATURE


class TFLiteExportError(ValueError):
    """The TFLite converter could not convert the policy (one line naming why)."""


def policy_to_tflite(policy, quantize: bool = False) -> bytes:
    """The policy's TFLite flatbuffer, in memory (see ``export_tflite``)."""
    import tensorflow as tf
    staging = tempfile.mkdtemp(prefix=".tmp-tflite-")
    try:
        folder = export_savedmodel(policy, staging, 1)
        converter = tf.lite.TFLiteConverter.from_saved_model(
            folder, signature_keys=[SERVING_SIGNATURE])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        try:
            return converter.convert()
        except Exception as error:  # the converter's ConverterError and friends
            raise TFLiteExportError(f"the TFLite converter could not convert the policy "
                                    f"({_converter_reason(error)})") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _converter_reason(error: BaseException) -> str:
    """The converter's first line that names an op ('... op is neither a custom op nor a
    flex op'), else its first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if "op" in line and ("neither" in line or "not supported" in line):
            return line[:300]
    return (lines or [type(error).__name__])[0][:300]


def export_tflite(policy, path: str, quantize: bool = False) -> str:
    """Writes ``policy`` as a ``.tflite`` file (replaced atomically); returns ``path``.

    Args:
        policy: a trained (or restored) ``tftrainers.trainers.policy.Policy``.
        path: the file to write (its folder is created).
        quantize: dynamic-range quantisation (int8 weights, float computation).

    Raises:
        TFLiteExportError: an op the TFLite builtins do not have (named).
    """
    data = policy_to_tflite(policy, quantize)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tflite", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
