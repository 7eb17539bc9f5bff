from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.networks import NetworkBody

from .helpers import vector_spec, visual_spec


def _lstm_body(memory_size: int = 6) -> NetworkBody:
    return NetworkBody([vector_spec(3), visual_spec(2, 2, 1)], hidden_units=8, num_layers=1,
                       normalize=False, vis_encode_type="fully_connected",
                       memory_size=memory_size)


def test_flat_sequences_equal_stepping_with_carried_memory(rng):
    body = _lstm_body()
    n, length = 3, 4
    vec = rng.normal(size=(n * length, 3)).astype(np.float32)
    img = rng.random((n * length, 2, 2, 1), dtype=np.float32)
    start_memory = rng.normal(0, 0.5, (n, 6)).astype(np.float32)

    encode = tf.function(lambda v, i, m: body([v, i], memory=m, sequence_length=length))
    flat, last_memory = encode(vec, img, start_memory)
    assert flat.shape == (n * length, 3) and last_memory.shape == (n, 6)

    # Row order: sequence-major, [seq0 t0..t3, seq1 t0..t3, ...].
    vec_steps, img_steps = vec.reshape(n, length, 3), img.reshape(n, length, 2, 2, 1)
    memory = start_memory
    for t in range(length):
        step, memory = body([vec_steps[:, t], img_steps[:, t]], memory=memory)
        np.testing.assert_allclose(flat.numpy().reshape(n, length, 3)[:, t], step.numpy(),
                                   atol=1e-5)
    np.testing.assert_allclose(last_memory.numpy(), memory.numpy(), atol=1e-5)


def test_memory_defaults_to_zeros_and_is_h_then_c(rng):
    body = _lstm_body(memory_size=4)
    obs = [rng.normal(size=(5, 3)).astype(np.float32), rng.random((5, 2, 2, 1), np.float32)]
    encoding, memory = body(obs)
    same, _ = body(obs, memory=np.zeros((5, 4), np.float32))
    np.testing.assert_allclose(encoding.numpy(), same.numpy(), atol=1e-6)
    # The LSTM output is h, the first half of the memory.
    np.testing.assert_allclose(memory.numpy()[:, :2], encoding.numpy(), atol=1e-6)


def test_encoding_sizes(rng):
    specs = [vector_spec(3), visual_spec(20, 20, 3)]
    assert NetworkBody(specs, 16, 2).encoding_size == 16
    assert NetworkBody(specs, 16, 0).encoding_size == 3 + 16  # visual encodes to hidden_units
    body = NetworkBody(specs, 16, 1, memory_size=10)
    assert body.encoding_size == 5
    obs = [rng.random((2, 3), np.float32), rng.random((2, 20, 20, 3), np.float32)]
    encoding, memory = body(obs)
    assert encoding.shape == (2, 5) and memory.shape == (2, 10)
    assert NetworkBody(specs, 16, 1)(obs)[1] is None


def test_update_normalization_touches_vector_observations_only(rng):
    body = NetworkBody([vector_spec(2), visual_spec(2, 2, 1)], 8, 1, normalize=True,
                       vis_encode_type="fully_connected")
    vec = rng.normal(3.0, 2.0, (100, 2)).astype(np.float32)
    body.update_normalization([vec, rng.random((100, 2, 2, 1), np.float32)])
    normalizer = body.encoders[0].normalizer
    np.testing.assert_allclose(normalizer.mean.numpy(), vec.mean(0), rtol=1e-5)
    assert not hasattr(body.encoders[1], "normalizer")


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="even"):
        NetworkBody([vector_spec(2)], 8, 1, memory_size=5)
    with pytest.raises(ValueError, match="nature_cnn.*36x36"):
        NetworkBody([visual_spec(30, 30, 3)], 8, 1, vis_encode_type="nature_cnn")
