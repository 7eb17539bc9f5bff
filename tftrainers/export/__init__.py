"""Deployment formats of a trained policy: ONNX (Unity ML-Agents, model version 3) and
SavedModel (TF Serving), both following the contract of docs/dev/architecture.md#export-contract;
and policies that run them.

    export_onnx(policy, "Ball3D.onnx")                          # opset DEFAULT_OPSET
    export_savedmodel(policy, "serving/Ball3D", version=1)      # serving/Ball3D/1/
    evaluate(env, OnnxPolicy("Ball3D.onnx", env.behavior_specs["Ball3D"]), episodes=10)

The names below are imported from their modules when first used, so that importing this
package (or ``tftrainers.tf_utils.opsets``, for ``--opset`` checks) does not import
TensorFlow and tf2onnx.
"""
import importlib

_OPSETS = "tftrainers.tf_utils.opsets"
_MODULE_OF = {
    "OnnxPolicy": "loading", "SavedModelPolicy": "loading",
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
