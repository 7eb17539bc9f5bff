"""Deployment formats of a trained policy: ONNX (Unity ML-Agents, model version 3),
SavedModel (TF Serving), Keras 3 ``.keras`` and TFLite / LiteRT, all following the contract
of docs/dev/architecture.md#export-contract; and policies that run them.

    export_onnx(policy, "Ball3D.onnx")                          # opset DEFAULT_OPSET
    export_savedmodel(policy, "serving/Ball3D", version=1)      # serving/Ball3D/1/
    export_keras(policy, "Ball3D.keras")                        # keras.models.load_model
    export_tflite(policy, "Ball3D.tflite", quantize=False)      # LiteRT interpreter
    evaluate(env, OnnxPolicy("Ball3D.onnx", env.behavior_specs["Ball3D"]), episodes=10)
    evaluate(env, exported_policy("Ball3D.tflite", spec), episodes=10)   # any format

The names below are imported from their modules when first used, so that importing this
package (or ``tftrainers.tf_utils.opsets``, for ``--opset`` checks) does not import
TensorFlow and tf2onnx.
"""
import importlib

_OPSETS = "tftrainers.tf_utils.opsets"
_MODULE_OF = {
    "OnnxPolicy": "loading", "SavedModelPolicy": "loading", "KerasPolicy": "loading",
    "TFLitePolicy": "loading", "exported_policy": "loading",
    "KerasExportError": "keras_export", "export_keras": "keras_export",
    "TFLiteExportError": "tflite_export", "export_tflite": "tflite_export",
    "DEFAULT_OPSET": _OPSETS, "SUPPORTED_OPSETS": _OPSETS, "check_opset": _OPSETS,
    "OnnxExportError": "onnx_export", "export_onnx": "onnx_export",
    "policy_to_onnx": "onnx_export",
    "VALUE_SIGNATURE": "savedmodel_export", "export_savedmodel": "savedmodel_export",
    "MODEL_VERSION": "signature", "SERVING_SIGNATURE": "signature",
    "inference_function": "signature", "input_signature": "signature",
    "output_names": "signature",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'tftrainers.export' has no attribute '{name}'")
    return getattr(importlib.import_module(module if "." in module else f"tftrainers.export.{module}"), name)


def __dir__():
    return sorted(set(globals()) | set(_MODULE_OF))
