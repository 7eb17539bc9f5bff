"""Reproducible random draws inside compiled functions, checkpointed with the run.

    draws = Draws(seed, name="gail_draws")       # track it: a checkpoint holds its counter
    ...in a compiled step...
    noise = draws.normal([batch, 128])
    rows = draws.uniform([batch], maxval=n, dtype=tf.int32)

Stateless ops keyed by (seed, counter), the counter a variable each draw advances: the same
seed draws the same numbers in the same order, a resumed run draws what the uninterrupted
one would have, and XLA compiles them (``tf.random.Generator`` keeps its state in a
variable too, but is not a ``tf.Module`` whose variables a checkpoint or a guard finds).
"""
from __future__ import annotations

import tensorflow as tf


class Draws(tf.Module):
    """Random numbers for graph code; see the module doc."""

    def __init__(self, seed: int, name: str = "draws"):
        super().__init__(name=name)
        self.seed = int(seed)
        self.counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="counter")

    def _key(self) -> tf.Tensor:
        key = tf.stack([tf.constant(self.seed, tf.int64), tf.convert_to_tensor(self.counter)])
        self.counter.assign_add(1)
        return key

    def uniform(self, shape, maxval=None, dtype=tf.float32) -> tf.Tensor:
        """Uniform in [0, 1) for floats, in [0, maxval) for integers."""
        if dtype.is_integer:
            return tf.random.stateless_uniform(shape, self._key(), minval=0, maxval=maxval,
                                               dtype=dtype)
        return tf.random.stateless_uniform(shape, self._key(), dtype=dtype)

    def normal(self, shape) -> tf.Tensor:
        """Standard normal draws."""
        return tf.random.stateless_normal(shape, self._key())
