"""Goal conditioning: a dense layer whose weights are made from the goal (ML-Agents'
``HyperNetwork``, what ``network_settings.goal_conditioning_type: hyper`` selects).

    layer = HyperDense(input_size=130, units=128, goal_size=4, hidden_units=128)
    y = layer(x, goal)        # x [B, 130], goal [B, 4] -> [B, 128]

A small network reads the goal (``num_layers`` x Dense + swish, then a layer norm
without learned scale) and outputs a full ``[input_size, units]`` weight matrix per
row; ``y = x W(goal) + b`` with one learned bias ``b`` shared by every goal. The same
observations can so be mapped by a different function for each goal, which a plain
concatenation of the goal to the input only approximates.

The last layer that makes the weights starts uniform in ``+-sqrt(1 / (hidden_units *
input_size))`` with zero bias (ML-Agents' initialisation), so the generated weights
start on the scale of an ordinary dense layer's.
"""
from __future__ import annotations

import math

import keras
import tensorflow as tf

from tftrainers.networks.attention import layer_norm
from tftrainers.networks.layers import kaiming_normal, swish, track_layers


class HyperDense(keras.layers.Layer):
    """A dense layer (no activation) whose kernel a hypernetwork makes from the goal.

    Args:
        input_size: features of the layer's input ``x``.
        units: the layer's output size.
        goal_size: features of the goal encoding.
        hidden_units: width of the hypernetwork's hidden layers.
        num_layers: hidden layers of the hypernetwork (ML-Agents: 2).
    """

    def __init__(self, input_size: int, units: int, goal_size: int, hidden_units: int,
                 num_layers: int = 2, name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.input_size, self.units = int(input_size), int(units)
        layers, width = [], int(goal_size)
        for i in range(int(num_layers)):
            dense = keras.layers.Dense(int(hidden_units), kernel_initializer=kaiming_normal(1.0),
                                       bias_initializer="zeros", name=f"hyper_hidden_{i}")
            dense.build((None, width))
            layers.append(dense)
            width = int(hidden_units)
        self.hyper_layers = track_layers(self, "hyper_hidden", layers)
        bound = math.sqrt(1.0 / (width * self.input_size))
        self.weights_out = keras.layers.Dense(
            self.input_size * self.units, bias_initializer="zeros",
            kernel_initializer=keras.initializers.RandomUniform(-bound, bound),
            name="weights_out")
        self.weights_out.build((None, width))
        self.bias = self.add_weight(shape=(self.units,), initializer="zeros", name="bias")
        self.built = True

    def call(self, x: tf.Tensor, goal: tf.Tensor) -> tf.Tensor:
        """x: [B, input_size]; goal: [B, goal_size]. Returns [B, units]."""
        h = goal
        for dense in self.hyper_layers:
            h = swish(dense(h))
        kernel = tf.reshape(self.weights_out(layer_norm(h)), [-1, self.input_size, self.units])
        # [B, 1, in] @ [B, in, units]: a batched MatMul, which every ONNX opset has.
        return tf.matmul(x[:, None, :], kernel)[:, 0, :] + self.bias
