"""Small shared pieces of the networks: activations, initialisers, layer tracking.

``track_layers`` works around a Keras 3 (TensorFlow backend) gap: layers kept in a
Python list or dict attribute are tracked by Keras (``layer.weights``) but *not* by
``tf.train.Checkpoint``, which silently saves nothing for them (keras-team/keras#18398).
Each layer is therefore also set as its own named attribute.
"""
from __future__ import annotations

from typing import Sequence, Tuple, TypeVar

import keras
import tensorflow as tf

# torch.nn.LeakyReLU's slope, which ML-Agents uses; Keras 3's LeakyReLU defaults to 0.3.
LEAKY_RELU_SLOPE = 0.01

LayerT = TypeVar("LayerT", bound=keras.layers.Layer)


def swish(x: tf.Tensor) -> tf.Tensor:
    """x * sigmoid(x), written out: ``tf.nn.silu`` wraps a custom gradient whose
    IdentityN nodes end up in exported graphs."""
    return x * tf.sigmoid(x)


def leaky_relu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.leaky_relu(x, alpha=LEAKY_RELU_SLOPE)


def kaiming_normal(gain: float = 1.0) -> keras.initializers.Initializer:
    """torch's default ``kaiming_normal_`` times ``gain``: a normal with std
    ``gain * sqrt(2 / fan_in)``.

    ML-Agents' ``linear_layer`` calls ``kaiming_normal_(nonlinearity="linear")``, std
    ``gain / sqrt(fan_in)``: ours starts sqrt(2) wider. Every config and benchmark figure
    here was tuned and measured with this width, so it stays."""
    return keras.initializers.VarianceScaling(scale=2.0 * gain * gain, mode="fan_in",
                                              distribution="untruncated_normal")


def track_layers(owner: keras.layers.Layer, prefix: str,
                 layers: Sequence[LayerT]) -> Tuple[LayerT, ...]:
    """Sets ``owner.<prefix>_<i> = layers[i]`` so checkpoints see them; returns a tuple
    to iterate over."""
    for i, layer in enumerate(layers):
        setattr(owner, f"{prefix}_{i}", layer)
    return tuple(layers)
