"""Observation encoders: vector input (optionally normalised) and the visual encoders.

The visual encoders are ML-Agents' (``simple``, ``nature_cnn``, ``resnet``, ``match3``,
``fully_connected``), selected by ``network_settings.vis_encode_type``::

    encoder = make_visual_encoder("nature_cnn", (84, 84, 3), output_size=128)
    features = encoder(images)        # [batch, 84, 84, 3] floats in [0, 1] -> [batch, 128]

Images are HWC (channels last). Convolutions use ``padding="valid"`` like ML-Agents, so
each encoder has a minimum input resolution (``MIN_RESOLUTION``); a smaller image is
rejected when the encoder is built, not when the first batch arrives.

Every layer is built in its constructor from the known shapes, so the variables exist
before any ``tf.function`` is traced or any checkpoint restored.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.networks.layers import kaiming_normal, leaky_relu, swish, track_layers
from tftrainers.networks.normalizer import Normalizer

#: Smallest height and width each visual encoder accepts.
MIN_RESOLUTION = {
    "simple": 20,
    "nature_cnn": 36,
    "resnet": 15,
    "match3": 5,
    "fully_connected": 1,
}


class VectorInput(keras.layers.Layer):
    """A vector observation, passed through or normalised with a running ``Normalizer``.

    Args:
        size: length of the observation.
        normalize: whether to keep running statistics and normalise with them.
    """

    def __init__(self, size: int, normalize: bool = False, name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.size = int(size)
        self.normalizer = Normalizer(self.size, name="normalizer") if normalize else None
        self.output_size = self.size
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """[batch, size] -> [batch, size]."""
        if self.normalizer is None:
            return x
        return self.normalizer(x)

    def update_normalization(self, x: tf.Tensor) -> None:
        """Adds a batch [n, size] to the running statistics (no-op without a normalizer)."""
        if self.normalizer is not None:
            self.normalizer.update(x)


class VisualEncoder(keras.layers.Layer):
    """Base of the visual encoders: image features, flatten, one dense layer.

    Subclasses set ``encoder_type`` and build ``self._feature_layers`` (applied in
    ``features()``); the base checks the resolution and builds the dense head.

    Args:
        shape: (height, width, channels) of the image.
        output_size: size of the encoding (ML-Agents uses ``hidden_units``).
        obs_name: observation name, for error messages.
    """

    encoder_type = ""

    def __init__(self, shape: Sequence[int], output_size: int, obs_name: str | None = None,
                 name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        if len(shape) != 3:
            raise ValueError(f"visual encoder '{self.encoder_type}' takes images of shape "
                             f"(height, width, channels), got {tuple(shape)}")
        self.height, self.width, self.channels = (int(d) for d in shape)
        self.output_size = int(output_size)
        check_resolution(self.encoder_type, (self.height, self.width), obs_name)

    def _build_head(self, feature_shape: Tuple[Optional[int], ...], gain: float = 1.41) -> None:
        self._flat_size = int(math.prod(feature_shape[1:]))
        self.dense = keras.layers.Dense(self.output_size, kernel_initializer=kaiming_normal(gain),
                                        name="dense")
        self.dense.build((None, self._flat_size))
        self.built = True

    def features(self, x: tf.Tensor) -> tf.Tensor:
        """The convolutional trunk of the encoder type ([B, H, W, C] -> [B, ...])."""
        raise NotImplementedError(f"{type(self).__name__} must define features()")

    def head_activation(self, x: tf.Tensor) -> tf.Tensor:
        return leaky_relu(x)

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """[batch, height, width, channels] -> [batch, output_size]."""
        features = self.features(x)
        # A static flat size (not Flatten's dynamic shape arithmetic) keeps the exported
        # Reshape simple.
        flat = tf.reshape(features, [-1, self._flat_size])
        return self.head_activation(self.dense(flat))


class _ConvStackEncoder(VisualEncoder):
    """Valid convolutions with LeakyReLU (ML-Agents' simple and Nature encoders)."""

    # (filters, kernel, stride) per convolution.
    conv_spec: Tuple[Tuple[int, int, int], ...] = ()

    def __init__(self, shape: Sequence[int], output_size: int, obs_name: str | None = None,
                 name: str | None = None, **kwargs):
        super().__init__(shape, output_size, obs_name, name=name, **kwargs)
        self.convs = track_layers(self, "conv", [
            keras.layers.Conv2D(filters, kernel, strides=stride, padding="valid", name=f"conv_{i}")
            for i, (filters, kernel, stride) in enumerate(self.conv_spec)])
        feature_shape = (None, self.height, self.width, self.channels)
        for conv in self.convs:
            conv.build(feature_shape)
            feature_shape = conv.compute_output_shape(feature_shape)
        self._build_head(feature_shape)

    def features(self, x: tf.Tensor) -> tf.Tensor:
        for conv in self.convs:
            x = leaky_relu(conv(x))
        return x


class SimpleVisualEncoder(_ConvStackEncoder):
    """conv 16 8x8/4, conv 32 4x4/2, dense; LeakyReLU. Minimum 20x20."""

    encoder_type = "simple"
    conv_spec = ((16, 8, 4), (32, 4, 2))


class NatureVisualEncoder(_ConvStackEncoder):
    """The DQN Nature CNN: conv 32 8x8/4, 64 4x4/2, 64 3x3/1, dense; LeakyReLU. Minimum 36x36."""

    encoder_type = "nature_cnn"
    conv_spec = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


class Match3VisualEncoder(_ConvStackEncoder):
    """ML-Agents' small encoder for boards of cells (one pixel a cell, a channel per cell
    type): conv 35 3x3/1, conv 144 3x3/1, dense; LeakyReLU. Minimum 5x5."""

    encoder_type = "match3"
    conv_spec = ((35, 3, 1), (144, 3, 1))


class FullyConnectedVisualEncoder(VisualEncoder):
    """Flatten and one dense layer with LeakyReLU; any resolution."""

    encoder_type = "fully_connected"

    def __init__(self, shape: Sequence[int], output_size: int, obs_name: str | None = None,
                 name: str | None = None, **kwargs):
        super().__init__(shape, output_size, obs_name, name=name, **kwargs)
        self._build_head((None, self.height, self.width, self.channels))

    def features(self, x: tf.Tensor) -> tf.Tensor:
        return x


class ResidualBlock(keras.layers.Layer):
    """x + conv(swish(conv(swish(x)))), 3x3 convolutions keeping the shape."""

    def __init__(self, shape: Tuple[Optional[int], ...], name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        channels = shape[-1]
        self.conv_0 = keras.layers.Conv2D(channels, 3, padding="same", name="conv_0")
        self.conv_1 = keras.layers.Conv2D(channels, 3, padding="same", name="conv_1")
        self.conv_0.build(shape)
        self.conv_1.build(shape)
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return x + self.conv_1(swish(self.conv_0(swish(x))))


class ResNetVisualEncoder(VisualEncoder):
    """IMPALA-style ResNet (ML-Agents ``ResNetVisualEncoder``). Minimum 15x15.

    Three stacks of 16, 32, 32 channels, each: conv 3x3 (padded, as in ML-Agents),
    max-pool 3x3/2 (valid), two residual blocks; then swish, dense and ReLU.
    """

    encoder_type = "resnet"
    stack_channels = (16, 32, 32)
    blocks_per_stack = 2

    def __init__(self, shape: Sequence[int], output_size: int, obs_name: str | None = None,
                 name: str | None = None, **kwargs):
        super().__init__(shape, output_size, obs_name, name=name, **kwargs)
        feature_shape = (None, self.height, self.width, self.channels)
        stacks = []
        for i, channels in enumerate(self.stack_channels):
            conv = keras.layers.Conv2D(channels, 3, padding="same", name=f"conv_{i}")
            conv.build(feature_shape)
            feature_shape = conv.compute_output_shape(feature_shape)
            pool = keras.layers.MaxPooling2D(3, strides=2, padding="valid", name=f"pool_{i}")
            feature_shape = pool.compute_output_shape(feature_shape)
            blocks = track_layers(self, f"block_{i}", [
                ResidualBlock(feature_shape, name=f"block_{i}_{j}")
                for j in range(self.blocks_per_stack)])
            stacks.append((conv, pool, blocks))
        self.convs = track_layers(self, "conv", [conv for conv, _, _ in stacks])
        self._stacks = tuple(stacks)
        self._build_head(feature_shape)

    def features(self, x: tf.Tensor) -> tf.Tensor:
        for conv, pool, blocks in self._stacks:
            x = pool(conv(x))
            for block in blocks:
                x = block(x)
        return swish(x)

    def head_activation(self, x: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(x)


VISUAL_ENCODERS = {
    "simple": SimpleVisualEncoder,
    "nature_cnn": NatureVisualEncoder,
    "resnet": ResNetVisualEncoder,
    "match3": Match3VisualEncoder,
    "fully_connected": FullyConnectedVisualEncoder,
}


def check_resolution(vis_encode_type: str, height_width: Sequence[int],
                     obs_name: str | None = None) -> None:
    """Raises ValueError when an image is smaller than the encoder's minimum."""
    minimum = MIN_RESOLUTION[vis_encode_type]
    height, width = (int(d) for d in height_width)
    if height < minimum or width < minimum:
        where = f" (observation '{obs_name}')" if obs_name else ""
        raise ValueError(
            f"vis_encode_type '{vis_encode_type}' needs visual observations of at least "
            f"{minimum}x{minimum} pixels, got {height}x{width}{where}; use a larger camera "
            f"or another vis_encode_type (minimums: "
            + ", ".join(f"{k} {v}" for k, v in MIN_RESOLUTION.items()) + ")")


def make_visual_encoder(vis_encode_type: str, shape: Sequence[int], output_size: int,
                        obs_name: str | None = None, name: str | None = None) -> VisualEncoder:
    """The visual encoder named ``vis_encode_type`` for images of ``shape`` (H, W, C).

    Raises:
        ValueError: for an unknown type or an image below the type's minimum resolution.
    """
    try:
        cls = VISUAL_ENCODERS[vis_encode_type]
    except KeyError:
        raise ValueError(f"unknown vis_encode_type '{vis_encode_type}'; expected one of "
                         f"{', '.join(VISUAL_ENCODERS)}") from None
    return cls(shape, output_size, obs_name=obs_name, name=name)
