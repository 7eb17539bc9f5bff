from __future__ import annotations

import numpy as np
import tensorflow as tf

from tftrainers.networks import Normalizer


def test_running_statistics_match_numpy_over_batches(rng):
    normalizer = Normalizer(3)
    update = tf.function(normalizer.update,
                         input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    batches = [rng.normal([1.0, -2.0, 10.0], [0.5, 3.0, 0.1], (n, 3)).astype(np.float32)
               for n in (7, 1, 50, 13)]
    for i, batch in enumerate(batches):
        # Alternate eager and compiled updates: both are the same op.
        (update if i % 2 else normalizer.update)(batch)
    data = np.concatenate(batches).astype(np.float64)
    np.testing.assert_allclose(normalizer.mean.numpy(), data.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(normalizer.var.numpy(), data.var(axis=0), rtol=1e-4, atol=1e-6)
    assert normalizer.count.numpy() == len(data)

    x = rng.normal(size=(4, 3)).astype(np.float32)
    expected = np.clip((x - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), -5, 5)
    np.testing.assert_allclose(normalizer(x).numpy(), expected, rtol=1e-4, atol=1e-4)


def test_normalize_clips_at_five():
    normalizer = Normalizer(2)
    normalizer.update(np.array([[0.0, 0.0], [2.0, 2.0]], np.float32))  # mean 1, var 1
    out = normalizer(np.array([[100.0, -100.0], [1.5, 0.0]], np.float32)).numpy()
    np.testing.assert_allclose(out, [[5.0, -5.0], [0.5, -1.0]], atol=1e-6)


def test_starts_as_identity_and_ignores_empty_batches():
    normalizer = Normalizer(2)
    normalizer.update(np.zeros((0, 2), np.float32))
    x = np.array([[0.3, -4.0]], np.float32)
    np.testing.assert_allclose(normalizer(x).numpy(), x, atol=1e-6)
    assert normalizer.count.numpy() == 0
