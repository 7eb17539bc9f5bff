"""Running mean / variance normalisation of vector observations (ML-Agents ``Normalizer``).

Usage::

    normalizer = Normalizer(obs_size)
    normalizer.update(batch)          # [n, obs_size], inside or outside a tf.function
    x = normalizer(obs)               # clip((obs - mean) / sqrt(var + eps), -5, 5)

The statistics are non-trainable weights, so they are saved by ``tf.train.Checkpoint``
and frozen into exported models like any other weight.
"""
from __future__ import annotations

import keras
import tensorflow as tf


class Normalizer(keras.layers.Layer):
    """Running mean and variance of a vector, merged batch by batch (Chan et al.).

    Before the first update the mean is 0 and the variance 1, so normalising is the
    identity up to the clip.

    Args:
        size: length of the vectors to normalise.
        clip: normalised values are clipped to ``[-clip, clip]``.
        epsilon: added to the variance so a constant feature does not divide by zero.
    """

    def __init__(self, size: int, clip: float = 5.0, epsilon: float = 1e-8,
                 name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = int(size)
        self.clip = float(clip)
        self.epsilon = float(epsilon)
        self.mean = self.add_weight(shape=(self.size,), initializer="zeros",
                                    trainable=False, name="mean")
        self.var = self.add_weight(shape=(self.size,), initializer="ones",
                                   trainable=False, name="var")
        # float64: a float32 count stops counting exactly after 2**24 samples.
        self.count = self.add_weight(shape=(), initializer="zeros", dtype="float64",
                                     trainable=False, name="count")
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """Normalises ``x``: [batch, size] float32 -> [batch, size] float32 in [-clip, clip]."""
        x = tf.convert_to_tensor(x, tf.float32)
        normalized = (x - self.mean) / tf.sqrt(self.var + self.epsilon)
        return tf.clip_by_value(normalized, -self.clip, self.clip)

    def normalize(self, x: tf.Tensor) -> tf.Tensor:
        """Same as calling the layer."""
        return self(x)

    def update(self, batch: tf.Tensor) -> None:
        """Merges the mean and variance of ``batch`` [n, size] into the running statistics.

        A graph op: call it inside a ``tf.function`` as well as eagerly. An empty batch
        leaves the statistics unchanged.
        """
        batch = tf.reshape(tf.convert_to_tensor(batch, tf.float32), [-1, self.size])
        n = tf.cast(tf.shape(batch)[0], tf.float64)
        n_safe = tf.cast(tf.maximum(n, 1.0), tf.float32)
        batch_mean = tf.reduce_sum(batch, axis=0) / n_safe
        batch_var = tf.reduce_sum(tf.square(batch - batch_mean), axis=0) / n_safe

        total = self.count + n
        # Weights of the new and old statistics; divide_no_nan keeps an empty batch on an
        # empty normalizer from producing NaN (w_new = 0, w_old = 1: nothing changes).
        w_new = tf.math.divide_no_nan(n, total)
        w_old = 1.0 - w_new
        w_new32, w_old32 = tf.cast(w_new, tf.float32), tf.cast(w_old, tf.float32)

        delta = batch_mean - self.mean
        new_mean = self.mean + delta * w_new32
        new_var = (self.var * w_old32 + batch_var * w_new32
                   + tf.square(delta) * (w_old32 * w_new32))
        self.mean.assign(new_mean)
        self.var.assign(new_var)
        self.count.assign(total)

    def copy_from(self, other: "Normalizer") -> None:
        """Takes the statistics of another normalizer of the same size."""
        self.mean.assign(other.mean)
        self.var.assign(other.var)
        self.count.assign(other.count)
