"""A user's own Keras layer as the observation encoder (``network_settings.encoder``).

    network_settings:
      encoder: my_encoders:SmallConv     # MODULE:NAME, imported with the working directory
                                         # on the path

``NAME`` is one of:

- a Keras layer class or a factory taking no argument: its layer encodes every visual
  observation (vector observations keep the built-in input and its normalizer);
- a factory (or class) taking one argument: called with each observation's
  ``ObservationSpec`` (``name``, ``shape``, ``kind``), vector ones included; it returns the
  layer for that observation, or None to keep the built-in encoder. A vector observation's
  layer sees the normalised vector when ``normalize`` is on.

From Python (settings objects or dicts) ``encoder`` may also be the class, the factory or a
layer instance (cloned from its ``get_config()`` for every network, so that the policy and
the critic never share weights).

Each network that encodes observations (the policy's body, the critic's, curiosity, RND
and GAIL with the same ``network_settings``) calls the factory again, so every network has
its own weights. The layer takes ``[batch, *shape]`` float32 (images HWC in [0, 1]) and
must return ``[batch, features]``. It is built at once on a one-row batch, and checked:

- every variable must be one a ``tf.train.Checkpoint`` saves (a Keras 3 layer kept in a
  plain Python list of a custom layer is not: keras-team/keras#18398), or resume would
  silently start from fresh weights;
- the output must be two-dimensional.

Each problem is one ``EncoderError`` line naming the encoder and what to change.
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any, Callable, Optional

import keras
import tensorflow as tf

from tftrainers.envs.base import ObservationKind, ObservationSpec
from tftrainers.networks.encoders import VectorInput
from tftrainers.settings import ENCODER_NAME, encoder_name


class EncoderError(ValueError):
    """``network_settings.encoder`` cannot be used; the message is one line."""


def encoder_label(encoder: Any) -> str:
    """How messages name an encoder: its ``MODULE:NAME`` or the object's type."""
    return encoder_name(encoder)


def importable_name(obj: Any) -> Optional[str]:
    """``MODULE:NAME`` that imports back to ``obj`` (a module-level class or function), or
    None (a lambda, a local function, a layer instance)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    return f"{module}:{qualname}"


def resolve_encoder(encoder: Any) -> Any:
    """The object ``network_settings.encoder`` names: ``MODULE:NAME`` imported (with the
    working directory on the path), anything else returned as it is."""
    if not isinstance(encoder, str):
        return encoder
    if not ENCODER_NAME.match(encoder):
        raise EncoderError(f"network_settings.encoder: '{encoder}' is not MODULE:NAME (e.g. "
                           f"my_encoders:SmallConv)")
    module_name, name = encoder.split(":", 1)
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise EncoderError(f"network_settings.encoder: '{encoder}': no module "
                               f"'{error.name}' in the working directory ({cwd}) or on the "
                               f"Python path") from None
        raise EncoderError(f"network_settings.encoder: '{encoder}': importing {module_name} "
                           f"failed ({error})") from error
    except Exception as error:  # the user's module raised while importing
        raise EncoderError(f"network_settings.encoder: '{encoder}': importing {module_name} "
                           f"raised {type(error).__name__}: {_first_line(error)}") from error
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise EncoderError(f"network_settings.encoder: '{encoder}': module {module_name} "
                               f"has no '{name}'")
        obj = getattr(obj, part)
    return obj


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def _required_arguments(fn: Callable) -> int:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0
    return sum(1 for p in parameters
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               and p.default is p.empty)


def _layer_for(encoder: Any, label: str, spec: ObservationSpec) -> Optional[keras.layers.Layer]:
    """The user's layer for one observation, or None for the built-in encoder."""
    if isinstance(encoder, keras.layers.Layer):
        if spec.kind != ObservationKind.VISUAL:
            return None
        try:
            return type(encoder).from_config(encoder.get_config())
        except Exception as error:
            raise EncoderError(f"network_settings.encoder: the layer {label} cannot be cloned "
                               f"from its get_config() ({_first_line(error)}); give its class "
                               f"or a factory instead") from error
    if not callable(encoder):
        raise EncoderError(f"network_settings.encoder: {label} is not a Keras layer class, a "
                           f"factory or a layer")
    arguments = _required_arguments(encoder)
    if arguments > 1:
        raise EncoderError(f"network_settings.encoder: {label} takes {arguments} arguments; "
                           f"it must take none (a layer for each visual observation) or one "
                           f"(the ObservationSpec)")
    if arguments == 0 and spec.kind != ObservationKind.VISUAL:
        return None
    try:
        layer = encoder(spec) if arguments else encoder()
    except Exception as error:
        raise EncoderError(f"network_settings.encoder: {label} raised {type(error).__name__} "
                           f"for observation '{spec.name}': {_first_line(error)}") from error
    if layer is not None and not isinstance(layer, keras.layers.Layer):
        raise EncoderError(f"network_settings.encoder: {label} returned "
                           f"{type(layer).__name__} for observation '{spec.name}'; it must "
                           f"return a keras.layers.Layer (or None for the built-in encoder)")
    return layer


class UserEncoder(keras.layers.Layer):
    """A user's layer encoding one observation (after the normalizer, for a vector one).

    Args:
        layer: the user's Keras layer.
        spec: the observation it encodes.
        label: how messages name the encoder (``MODULE:NAME``).
        normalize: for a vector observation, normalise it first (running statistics).

    Raises:
        EncoderError: the layer fails on a one-row batch, gives other than [batch, n],
            or keeps variables a checkpoint cannot see.
    """

    def __init__(self, layer: keras.layers.Layer, spec: ObservationSpec, label: str,
                 normalize: bool = False, name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.label = label
        self.layer = layer
        self.vector_input = None
        if spec.kind == ObservationKind.VECTOR:
            self.vector_input = VectorInput(spec.shape[0], normalize, name="vector_input")
        self.normalizer = getattr(self.vector_input, "normalizer", None)
        where = f"network_settings.encoder {label} (observation '{spec.name}')"
        try:
            out = self.call(tf.zeros([1, *spec.shape], tf.float32))
        except Exception as error:
            raise EncoderError(f"{where} failed on a [1, {', '.join(map(str, spec.shape))}] "
                               f"batch: {type(error).__name__}: {_first_line(error)}") from error
        if len(out.shape) != 2 or out.shape[-1] is None or not out.dtype.is_floating:
            raise EncoderError(f"{where} returned {out.dtype.name} of shape "
                               f"{tuple(out.shape)}; it must return [batch, features] floats "
                               f"(end it with a Flatten or a Dense layer)")
        self.output_size = int(out.shape[-1])
        _check_trackable(layer, where)
        self.built = True

    def call(self, x: tf.Tensor) -> tf.Tensor:
        """[batch, *shape] -> [batch, output_size]."""
        if self.vector_input is not None:
            x = self.vector_input(x)
        return self.layer(x)

    def update_normalization(self, x: tf.Tensor) -> None:
        if self.vector_input is not None:
            self.vector_input.update_normalization(x)


def _check_trackable(layer: keras.layers.Layer, where: str) -> None:
    """Raises EncoderError when a checkpoint would not save some of the layer's weights."""
    seen = {id(obj) for obj in tf.train.TrackableView(layer).descendants()}
    missing = [w.path for w in layer.weights if id(w) not in seen]
    if missing:
        raise EncoderError(
            f"{where}: a checkpoint would not save {len(missing)} of its "
            f"{len(layer.weights)} weights ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): Keras 3 layers kept in a Python list "
            f"or dict of a custom layer are not tracked by tf.train.Checkpoint; set each one "
            f"as its own attribute (self.conv_0 = ...) or use keras.Sequential")


def make_user_encoder(encoder: Any, spec: ObservationSpec, normalize: bool,
                      name: str) -> Optional[UserEncoder]:
    """The user's encoder for observation ``spec``, or None where the built-in one stays.

    Args:
        encoder: ``network_settings.encoder``: ``MODULE:NAME`` or the object itself.
        spec: the observation.
        normalize: ``network_settings.normalize`` (vector observations only).
        name: the Keras name of the wrapper (checkpoint paths).

    Raises:
        EncoderError: one line naming the encoder and the problem.
    """
    label = encoder_label(encoder)
    layer = _layer_for(resolve_encoder(encoder), label, spec)
    if layer is None:
        return None
    return UserEncoder(layer, spec, label, normalize, name=name)
