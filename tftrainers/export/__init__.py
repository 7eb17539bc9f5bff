"""Deployment formats of a trained policy: ONNX (Unity ML-Agents, model version 3) and
SavedModel (TF Serving), both following DESIGN §7's contract; and policies that run them.

    export_onnx(policy, "Ball3D.onnx")                          # opset DEFAULT_OPSET
    export_savedmodel(policy, "serving/Ball3D", version=1)      # serving/Ball3D/1/
    evaluate(env, OnnxPolicy("Ball3D.onnx", env.behavior_specs["Ball3D"]), episodes=10)
"""
from tftrainers.export.loading import OnnxPolicy, SavedModelPolicy
from tftrainers.export.onnx_export import (DEFAULT_OPSET, SUPPORTED_OPSETS, OnnxExportError,
                                           check_opset, export_onnx, policy_to_onnx)
from tftrainers.export.savedmodel_export import VALUE_SIGNATURE, export_savedmodel
from tftrainers.export.signature import (MODEL_VERSION, SERVING_SIGNATURE, inference_function,
                                         input_signature, output_names)

__all__ = ["DEFAULT_OPSET", "MODEL_VERSION", "OnnxExportError", "OnnxPolicy", "SERVING_SIGNATURE",
           "SUPPORTED_OPSETS", "SavedModelPolicy", "VALUE_SIGNATURE", "check_opset",
           "export_onnx", "export_savedmodel", "inference_function", "input_signature",
           "output_names", "policy_to_onnx"]
