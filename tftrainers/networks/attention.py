"""Attention over a variable set of entities (MA-POCA's group members, the entities of a
variable-length observation: ML-Agents' BufferSensor).

    embed = EntityEmbedding(hidden_units)            # [B, N, F] -> [B, N, H]
    attend = ResidualSelfAttention(hidden_units)     # + mask [B, N] (1 = present)
    pooled = attend(embed(entities), mask)           # [B, H], mean over present entities

Entities that are absent (a member that left its group, an empty slot of a smaller group)
have mask 0: no present entity attends to them and the mean pool skips them, so they
change nothing, whatever their inputs hold; and since attention and the mean are
symmetric in the entities, their order changes nothing either (tests check both).
"""
from __future__ import annotations

import math

import keras
import tensorflow as tf

from tftrainers.networks.layers import swish

# Logit given to an absent key: exp(-1e9 - max) is exactly 0 in float32.
_ABSENT_LOGIT = -1.0e9
_POOL_EPSILON = 1.0e-7


def _small_gain(units: int) -> keras.initializers.Initializer:
    """ML-Agents' initialisation of its attention and entity layers (``Initialization.Normal``
    with kernel gain sqrt(0.125 / units)): a normal with std sqrt(0.125 / units) whatever
    the fan-in, which keeps the attention logits small at the start."""
    return keras.initializers.RandomNormal(stddev=math.sqrt(0.125 / units))


def small_linear_gain(units: int) -> keras.initializers.Initializer:
    """ML-Agents' initialisation of the layers after MA-POCA's attention (its
    ``LinearEncoder`` with kaiming normal, ``nonlinearity="linear"``, times gain
    sqrt(0.125 / units)): a normal with std sqrt(0.125 / units) / sqrt(fan_in)."""
    return keras.initializers.VarianceScaling(scale=0.125 / units, mode="fan_in",
                                              distribution="untruncated_normal")


def layer_norm(x: tf.Tensor, epsilon: float = 1.0e-5) -> tf.Tensor:
    """Normalises the last axis to mean 0 and variance 1 (no learned scale or shift)."""
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + epsilon)


def entity_mask(entities: tf.Tensor) -> tf.Tensor:
    """Which entities of a variable-length observation are present: every row that is not
    all zeros (an absent entity is a zero row). [B, N, F] -> [B, N] float32, 1 = present.

    (ML-Agents counts a row absent when its sum of squares is below 0.01; here only an
    exact zero row is, so an entity with small features is never dropped.)
    """
    return tf.cast(tf.reduce_max(tf.abs(entities), axis=-1) > 0.0, tf.float32)


def _entity_count(x: tf.Tensor):
    """N of [B, N, ...]: the static number when known (a variable-length observation's
    max_entities), so exported graphs reshape by constants and ONNX infers every shape."""
    return x.shape[1] if x.shape[1] is not None else tf.shape(x)[1]


class EntityEmbedding(keras.layers.Layer):
    """Dense + swish applied to every entity: [B, N, features] -> [B, N, units] (or to one
    vector, [B, features] -> [B, units]).

    Args:
        input_size: features per entity.
        units: embedding size.
    """

    def __init__(self, input_size: int, units: int, name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.units = int(units)
        self.dense = keras.layers.Dense(self.units, kernel_initializer=_small_gain(self.units),
                                        name="dense")
        self.dense.build((None, int(input_size)))
        self.built = True

    def call(self, entities: tf.Tensor) -> tf.Tensor:
        return swish(self.dense(entities))


class ResidualSelfAttention(keras.layers.Layer):
    """Multi-head self-attention with a residual connection, then a masked mean pool.

    x = norm(entities); out = norm(W_o MHA(W_q x, W_k x, W_v x; mask) + x);
    pooled = sum_n out_n mask_n / sum_n mask_n.

    Args:
        units: entity embedding size (divisible by ``num_heads``).
        num_heads: attention heads (ML-Agents: 4).
    """

    def __init__(self, units: int, num_heads: int = 4, name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        if units % num_heads:
            raise ValueError(f"attention: {units} units do not split into {num_heads} heads; "
                             f"use hidden_units divisible by {num_heads}")
        self.units, self.num_heads = int(units), int(num_heads)
        for part in ("query", "key", "value", "out"):
            dense = keras.layers.Dense(self.units, kernel_initializer=_small_gain(self.units),
                                       name=part)
            dense.build((None, self.units))
            setattr(self, part, dense)
        self.built = True

    def _heads(self, x: tf.Tensor) -> tf.Tensor:
        """[B, N, units] -> [B, heads, N, units / heads]."""
        x = tf.reshape(x, [-1, _entity_count(x), self.num_heads, self.units // self.num_heads])
        return tf.transpose(x, [0, 2, 1, 3])

    def call(self, entities: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        """entities: [B, N, units]; mask: [B, N] float32, 1 = present. Returns [B, units].

        A row without any present entity pools to zeros.
        """
        x = layer_norm(entities)
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        # Scaled by the whole embedding's size, not a head's, as ML-Agents' MultiHeadAttention.
        logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(self.units)
        keys = mask[:, None, None, :]  # [B, 1, 1, N]
        logits = logits * keys + _ABSENT_LOGIT * (1.0 - keys)
        attended = tf.matmul(tf.nn.softmax(logits, axis=-1), v)  # [B, heads, N, d]
        attended = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]),
                              [-1, _entity_count(entities), self.units])
        out = layer_norm(self.out(attended) + x)
        present = mask[:, :, None]
        return (tf.reduce_sum(out * present, axis=1)
                / (tf.reduce_sum(present, axis=1) + _POOL_EPSILON))
