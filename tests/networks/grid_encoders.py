"""The custom encoders of the tests and of docs/guides/custom-networks.md, named
``tests.networks.grid_encoders:CellConv`` etc. (from the repository's root)."""
import keras


class CellConv(keras.layers.Layer):
    """GridWorld's 20x20 image is 5x5 cells of 4x4 pixels: a 4x4/4 convolution reads one
    cell a pixel, a 3x3 one looks at the neighbours, then flatten and a dense layer."""

    def __init__(self, filters: int = 16, units: int = 64, **kwargs):
        super().__init__(**kwargs)
        self.filters, self.units = filters, units
        self.cells = keras.layers.Conv2D(filters, 4, strides=4, activation="relu")
        self.neighbours = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(units, activation="relu")

    def call(self, images):
        return self.dense(self.flatten(self.neighbours(self.cells(images))))

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "units": self.units}


def cell_conv_or_builtin(spec):
    """One-argument factory: CellConv for images, the built-in input for vectors."""
    return CellConv(filters=8, units=32) if len(spec.shape) == 3 else None


class ListKeeper(keras.layers.Layer):
    """Keeps its layers in a list: tf.train.Checkpoint would not save them."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.convs = [keras.layers.Conv2D(4, 4, strides=4), keras.layers.Conv2D(4, 3)]
        self.flatten = keras.layers.Flatten()

    def call(self, images):
        for conv in self.convs:
            images = conv(images)
        return self.flatten(images)


def no_flatten():
    return keras.layers.Conv2D(4, 4, strides=4)


class Bessel(keras.layers.Layer):
    """CellConv's features through bessel_i0e, an op tf2onnx has no converter for."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.features = CellConv(filters=4, units=8)

    def call(self, images):
        import tensorflow as tf
        return tf.math.special.bessel_i0e(self.features(images))
