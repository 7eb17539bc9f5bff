"""Export sizes and inference latency of every format, on Ball3D and visual GridWorld.

    python benchmarks/inference_latency.py [--calls 2000] [--policy ball3d|gridworld ...]

For each policy (untrained, of the ready configs' shapes: latency does not depend on the
weights): Ball3D (configs/ppo/Ball3D.yaml: 8 inputs, 2 x 128, 2 continuous actions) and
visual GridWorld (configs/ppo/GridWorld.yaml with obs=visual: a 20x20x3 image through the
``simple`` encoder, 2 x 128, one branch of 5 with masks). Each format is written by
tftrainers' exporter and run in its own runtime with one thread, on the contract's inputs,
fetching the deterministic actions:

- ONNX: onnxruntime (intra_op_num_threads=1);
- SavedModel: ``tf.saved_model.load(...).signatures["serving_default"]``;
- .keras: ``keras.models.load_model`` called through a ``tf.function`` (what a TF user
  would write; a plain eager call is listed too);
- TFLite float32 and dynamic-range int8: the LiteRT interpreter (``ai-edge-litert``;
  ``tf.lite.Interpreter`` without it), ``num_threads=1``, its signature runner.

Batch 1 (one agent) and 12 (a 12-agent batch, e.g. Ball3D's 12 platforms), p50 and p99 in
microseconds over ``--calls`` calls after 50 warm-up calls. Sizes are on-disk bytes (a
SavedModel: its folder). Prints one table per policy.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def percentiles(fn, calls):
    for _ in range(50):  # warm up (traces, allocations, resizes)
        fn()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return np.percentile(times, 50) * 1e6, np.percentile(times, 99) * 1e6


def folder_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def build(name):
    """(policy, env spec) of the ready config's shape for ``name``."""
    from tftrainers.envs import make
    from tftrainers.settings import load_run_options
    from tftrainers.trainers.policy import Policy
    configs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "configs", "ppo")
    env_id, behavior, config, env_args = {
        "ball3d": ("builtin:Ball3D", "Ball3D", "Ball3D.yaml", {}),
        "gridworld": ("builtin:GridWorld", "GridWorld", "GridWorld.yaml", {"obs": "visual"}),
    }[name]
    spec = make(env_id, **env_args).behavior_specs[behavior]
    settings = load_run_options(os.path.join(configs, config)).settings_for(behavior)
    return Policy(spec, settings.network_settings, seed=0, deterministic=True), spec


def feeds_for(spec, batch, rng):
    from tftrainers.envs.base import ObservationKind
    from tftrainers.export.signature import exported_observation_shape
    feeds = {}
    for i, o in enumerate(spec.observation_specs):
        shape = exported_observation_shape(o)
        values = rng.random((batch, *shape)) if o.kind == ObservationKind.VISUAL else \
            rng.normal(size=(batch, *shape))
        feeds[f"obs_{i}"] = values.astype(np.float32)
    if spec.action_spec.discrete_branches:
        feeds["action_masks"] = np.ones((batch, sum(spec.action_spec.discrete_branches)),
                                        np.float32)
    return feeds


def measure(name, calls, batches):
    import keras
    import onnxruntime
    import tensorflow as tf

    import tftrainers.export.keras_export  # noqa: F401  (registers ExportedPolicy)
    from tftrainers.export import export_keras, export_onnx, export_savedmodel, export_tflite
    try:
        from ai_edge_litert.interpreter import Interpreter
        lite_runtime = "LiteRT"
    except ImportError:
        Interpreter = tf.lite.Interpreter
        lite_runtime = "tf.lite"

    policy, spec = build(name)
    fetch = ["deterministic_continuous_actions" if spec.action_spec.continuous_size
             else "deterministic_discrete_actions"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            "ONNX (onnxruntime)": export_onnx(policy, os.path.join(tmp, "p.onnx")),
            "SavedModel (TensorFlow)": export_savedmodel(policy, os.path.join(tmp, "sm"), 1),
            ".keras (tf.function)": export_keras(policy, os.path.join(tmp, "p.keras")),
            f"TFLite float32 ({lite_runtime})": export_tflite(policy,
                                                              os.path.join(tmp, "p.tflite")),
            f"TFLite int8 weights ({lite_runtime})": export_tflite(
                policy, os.path.join(tmp, "p.int8.tflite"), quantize=True),
        }
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(paths["ONNX (onnxruntime)"], options,
                                               providers=["CPUExecutionProvider"])
        serving = tf.saved_model.load(paths["SavedModel (TensorFlow)"]).signatures[
            "serving_default"]
        model = keras.models.load_model(paths[".keras (tf.function)"])
        keras_fn = tf.function(lambda feeds: model(feeds, training=False),
                               reduce_retracing=True)
        runners = {label: Interpreter(model_path=path, num_threads=1).get_signature_runner(
            "serving_default") for label, path in paths.items() if label.startswith("TFLite")}
        rng = np.random.default_rng(0)
        for batch in batches:
            feeds = feeds_for(spec, batch, rng)
            tensors = {k: tf.constant(v) for k, v in feeds.items()}
            calls_of = {
                "ONNX (onnxruntime)": lambda: session.run(fetch, feeds),
                "SavedModel (TensorFlow)": lambda: serving(**tensors)[fetch[0]].numpy(),
                ".keras (tf.function)": lambda: keras_fn(tensors)[fetch[0]].numpy(),
                ".keras (eager call)": lambda: model(tensors)[fetch[0]].numpy(),
            }
            for label, runner in runners.items():
                calls_of[label] = (lambda r=runner: r(**feeds)[fetch[0]])
            for label, fn in calls_of.items():
                p50, p99 = percentiles(fn, calls if "eager" not in label else calls // 10)
                size = folder_size(paths.get(label, paths[".keras (tf.function)"]))
                rows.append((label, size, batch, p50, p99))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--policy", nargs="+", choices=("ball3d", "gridworld"),
                        default=["ball3d", "gridworld"])
    args = parser.parse_args()
    from tftrainers.console import quiet_tensorflow
    tf = quiet_tensorflow()  # TensorFlow's start-up lines would bury the figures
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    for name in args.policy:
        rows = measure(name, args.calls, (1, 12))
        print(f"\n{name}: {'format':36s} {'bytes':>9s} {'batch':>5s} {'p50 us':>9s} "
              f"{'p99 us':>9s}")
        for label, size, batch, p50, p99 in rows:
            print(f"{'':{len(name) + 2}s}{label:36s} {size:9d} {batch:5d} {p50:9.1f} {p99:9.1f}")


if __name__ == "__main__":
    main()
