"""Inference latency of the Ball3D policy (2 x 128): onnxruntime, SavedModel, Keras.

    python benchmarks/inference_latency.py [--run results/RUN] [--calls 2000]

Batch 1 and batch 64, p50 and p99 in microseconds, deterministic actions, one thread each:
onnxruntime (intra_op_num_threads=1) on the exported .onnx, the SavedModel's
serving_default signature (tf.saved_model.load), and the Keras policy called through a
tf.function (no XLA: what a TF user would write). Without --run, an untrained policy of
configs/ppo/Ball3D.yaml's shape is used (latency does not depend on the weights).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def percentiles(fn, calls):
    for _ in range(50):  # warm up (compiles, allocations)
        fn()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - start
    return np.percentile(times, 50) * 1e6, np.percentile(times, 99) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=None, help="a trained Ball3D run (default: untrained)")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    from tftrainers.console import quiet_tensorflow
    quiet_tensorflow()  # TensorFlow's start-up lines would bury the figures

    import onnxruntime
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    from tftrainers.envs import make
    from tftrainers.export import export_onnx, export_savedmodel
    from tftrainers.runs import load_policy
    from tftrainers.settings import load_run_options
    from tftrainers.trainers.policy import Policy

    spec = make("builtin:Ball3D").behavior_specs["Ball3D"]
    if args.run:
        policy = load_policy(args.run, "Ball3D", deterministic=True)
    else:
        config = os.path.join(os.path.dirname(__file__), "..", "configs", "ppo", "Ball3D.yaml")
        settings = load_run_options(config).settings_for("Ball3D")
        policy = Policy(spec, settings.network_settings, ["extrinsic"], deterministic=True)

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "Ball3D.onnx")
        export_onnx(policy, onnx_path)
        export_savedmodel(policy, os.path.join(tmp, "saved_model"), "1")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(onnx_path, options,
                                               providers=["CPUExecutionProvider"])
        serving = tf.saved_model.load(os.path.join(tmp, "saved_model", "1")).signatures[
            "serving_default"]
        keras_call = tf.function(lambda obs: policy.actor.deterministic([obs])[
            "env_continuous_action"], input_signature=[tf.TensorSpec([None, 8], tf.float32)])

        rows = []
        for batch in (1, 64):
            obs = np.random.default_rng(0).normal(size=(batch, 8)).astype(np.float32)
            obs_tensor = tf.constant(obs)
            candidates = {
                "onnxruntime (1 thread)": lambda: session.run(
                    ["deterministic_continuous_actions"], {"obs_0": obs}),
                "SavedModel serving_default": lambda: serving(obs_0=obs_tensor),
                "Keras policy (tf.function)": lambda: keras_call(obs_tensor),
            }
            for name, fn in candidates.items():
                p50, p99 = percentiles(fn, args.calls)
                rows.append((name, batch, p50, p99))
    print(f"{'Ball3D 2x128 policy':30s} {'batch':>5s} {'p50 us':>9s} {'p99 us':>9s}")
    for name, batch, p50, p99 in rows:
        print(f"{name:30s} {batch:5d} {p50:9.1f} {p99:9.1f}")


if __name__ == "__main__":
    main()
