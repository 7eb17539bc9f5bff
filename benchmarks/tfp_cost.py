"""What TensorFlow Probability would cost us, measured side by side (issue #12 item 7).

    pip install "tensorflow-probability>=0.25,<0.26" "tf-keras>=2.21,<2.22"  # not deps
    python benchmarks/tfp_cost.py [--imports 5] [--calls 300]

1. Import: ``import tensorflow`` vs ``import tensorflow, tensorflow_probability`` in fresh
   processes, alternating (tfp 0.25 imports tf_keras on import); every process's wall time.
2. The compiled update: one XLA-compiled gradient step of a PPO-style loss over a minibatch
   (Gaussian log-density of 2 continuous dimensions and entropy, categorical log-probability
   of 2 branches of 3 and entropy, clipped ratio) with our closed forms
   (tftrainers.networks.action_model) vs ``tfp.distributions.Normal`` / ``Categorical``;
   milliseconds per call, the two alternating in blocks, and whether they agree.
3. The act call: the same with sampling (our Gumbel-max on given noise vs tfp's
   ``sample``), compiled as the act call is, batch 64; and whether tf2onnx converts each.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

IMPORTS = {"tensorflow": "import tensorflow",
           "tensorflow + tfp": "import tensorflow, tensorflow_probability"}


def import_times(repeats: int):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    times = {name: [] for name in IMPORTS}
    for _ in range(repeats):
        for name, code in IMPORTS.items():
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env,
                           capture_output=True)
            times[name].append(time.perf_counter() - start)
    return times


def compiled_losses(batch: int, continuous: int, branches):
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp
    from tftrainers.networks.action_model import (_categorical_entropy, _pick,
                                                  gaussian_entropy, gaussian_log_prob)

    rng = np.random.default_rng(0)
    width = continuous + sum(branches)
    w = tf.Variable(rng.normal(0, 0.1, (64, width)).astype(np.float32))
    log_std = tf.Variable(np.zeros(continuous, np.float32))
    enc = tf.constant(rng.normal(size=(batch, 64)).astype(np.float32))
    x = tf.constant(rng.normal(size=(batch, continuous)).astype(np.float32))
    a = tf.constant(np.stack([rng.integers(0, b, batch) for b in branches], 1).astype(np.int32))
    old = tf.constant(rng.normal(-1, 0.1, (batch, continuous + len(branches))).astype(np.float32))
    adv = tf.constant(rng.normal(size=(batch, 1)).astype(np.float32))

    def heads():
        out = enc @ w
        mean = out[:, :continuous]
        logits = tf.split(out[:, continuous:], list(branches), axis=1)
        return mean, tf.zeros_like(mean) + log_std, logits

    def ours():
        mean, ls, logits = heads()
        lp = [gaussian_log_prob(x, mean, ls)]
        ent = [tf.reduce_mean(gaussian_entropy(ls), 1)]
        for i, lg in enumerate(logits):
            s = tf.nn.log_softmax(lg)
            lp.append(_pick(s, a[:, i])[:, None])
            ent.append(_categorical_entropy(s))
        return tf.concat(lp, 1), tf.add_n(ent)

    def theirs():
        mean, ls, logits = heads()
        normal = tfp.distributions.Normal(mean, tf.exp(ls))
        lp = [normal.log_prob(x)]
        ent = [tf.reduce_mean(normal.entropy(), 1)]
        for i, lg in enumerate(logits):
            cat = tfp.distributions.Categorical(logits=lg)
            lp.append(cat.log_prob(a[:, i])[:, None])
            ent.append(cat.entropy())
        return tf.concat(lp, 1), tf.add_n(ent)

    def step(log_probs_fn):
        variables = [w, log_std]
        with tf.GradientTape() as tape:
            lp, ent = log_probs_fn()
            ratio = tf.exp(lp - old)
            loss = -tf.reduce_mean(tf.minimum(ratio * adv,
                                              tf.clip_by_value(ratio, 0.8, 1.2) * adv))
            loss -= 0.005 * tf.reduce_mean(ent)
        grads = tape.gradient(loss, variables)
        return loss, tf.linalg.global_norm(grads)

    return {"ours": tf.function(lambda: step(ours), jit_compile=True),
            "tfp": tf.function(lambda: step(theirs), jit_compile=True)}


def compiled_acts(batch: int, continuous: int, branches):
    import numpy as np
    import tensorflow as tf
    import tensorflow_probability as tfp

    rng = np.random.default_rng(1)
    width = continuous + sum(branches)
    w = tf.Variable(rng.normal(0, 0.1, (64, width)).astype(np.float32))
    log_std = tf.Variable(np.zeros(continuous, np.float32))
    spec = [tf.TensorSpec([None, 64], tf.float32), tf.TensorSpec([None, continuous]),
            tf.TensorSpec([None, sum(branches)])]

    def split(enc):
        out = enc @ w
        return out[:, :continuous], tf.split(out[:, continuous:], list(branches), axis=1)

    def ours(enc, gaussian, uniform):
        mean, logits = split(enc)
        cont = mean + tf.exp(log_std) * gaussian
        us = tf.split(uniform, list(branches), axis=1)
        disc = [tf.argmax(lg - tf.math.log(-tf.math.log(u)), -1, output_type=tf.int32)
                for lg, u in zip(logits, us)]
        return cont, tf.stack(disc, 1)

    def theirs(enc, gaussian, uniform):
        mean, logits = split(enc)
        cont = tfp.distributions.Normal(mean, tf.exp(log_std)).sample()
        disc = [tfp.distributions.Categorical(logits=lg, dtype=tf.int32).sample()
                for lg in logits]
        return cont, tf.stack(disc, 1)

    inputs = (rng.normal(size=(batch, 64)).astype(np.float32),
              rng.normal(size=(batch, continuous)).astype(np.float32),
              rng.uniform(1e-6, 1, (batch, sum(branches))).astype(np.float32))
    return ({"ours": tf.function(ours, input_signature=spec, jit_compile=True),
             "tfp": tf.function(theirs, input_signature=spec, jit_compile=True)},
            inputs, spec)


def time_alternating(functions, args, calls: int, blocks: int = 6):
    """Milliseconds per call of each function, measured in alternating blocks."""
    for fn in functions.values():
        fn(*args)  # trace and compile
    per_call = {name: [] for name in functions}
    for _ in range(blocks):
        for name, fn in functions.items():
            start = time.perf_counter()
            for _ in range(calls // blocks):
                out = fn(*args)
            _ = [o.numpy() for o in out]
            per_call[name].append((time.perf_counter() - start) / (calls // blocks) * 1e3)
    return per_call


def converts_to_onnx(fn, spec) -> str:
    """Whether tf2onnx converts ``fn`` completely (ops it cannot convert stay in the graph
    under their TensorFlow names; tftrainers' exporter refuses such a model)."""
    import logging
    import tf2onnx
    from tftrainers.export.onnx_export import OnnxExportError, check_converted
    logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
    try:
        model, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=15)
        check_converted(model, 15)
    except OnnxExportError as error:
        return f"no: {error}"
    return f"yes ({len(model.graph.node)} nodes)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=5, help="processes per variant")
    parser.add_argument("--calls", type=int, default=600, help="compiled calls per variant")
    args = parser.parse_args(argv)
    from tftrainers.console import quiet_tensorflow
    quiet_tensorflow()  # TensorFlow's start-up lines would bury the figures
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    times = import_times(args.imports)
    print("1. import, seconds per process (alternating):")
    for name, values in times.items():
        print(f"   {name:18s} median {statistics.median(values):.2f}  all "
              f"{' '.join(f'{v:.2f}' for v in values)}")
    extra = statistics.median(times["tensorflow + tfp"]) - statistics.median(times["tensorflow"])
    print(f"   tfp adds {extra:.2f} s to every process that imports it")

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    for batch in (256, 1024):
        fns = compiled_losses(batch, 2, (3, 3))
        agree = [fns[name]() for name in fns]
        same = all(math.isclose(float(a), float(b), rel_tol=1e-4, abs_tol=1e-5)
                   for a, b in zip(*agree))
        per_call = time_alternating(fns, (), args.calls)
        print(f"2. compiled gradient step, minibatch {batch}, ms per call (6 alternating "
              f"blocks; loss and gradient norm agree: {same}):")
        for name, values in per_call.items():
            print(f"   {name:5s} median {statistics.median(values):.3f}  all "
                  f"{' '.join(f'{v:.3f}' for v in values)}")
    acts, inputs, spec = compiled_acts(64, 2, (3, 3))
    per_call = time_alternating(acts, inputs, args.calls)
    print("3. compiled act call, batch 64, ms per call (6 alternating blocks):")
    for name, values in per_call.items():
        print(f"   {name:5s} median {statistics.median(values):.3f}  all "
              f"{' '.join(f'{v:.3f}' for v in values)}")
    for name, fn in acts.items():
        plain = tf.function(fn.python_function, input_signature=spec)
        print(f"   {name:5s} converts to ONNX (opset 15): {converts_to_onnx(plain, spec)}")


if __name__ == "__main__":
    main()
