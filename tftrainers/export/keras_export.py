"""The policy as a Keras 3 native ``.keras`` file: the export contract as a functional model.

    export_keras(policy, "Ball3D.keras")
    import tftrainers.export.keras_export              # registers ExportedPolicy
    model = keras.models.load_model("Ball3D.keras")
    out = model({"obs_0": obs})                        # dict keyed by the contract's names
    out["deterministic_continuous_actions"]            # [B, 2]

Inputs and outputs carry the contract's names (docs/dev/architecture.md#export-contract);
the constant outputs (``version_number``, ``memory_size``, ``*_output_shape``) are repeated
per row, [B, k], as in the SavedModel's ``serving_default`` (``model.predict`` stacks
batches along the first axis). The one layer, ``ExportedPolicy``, rebuilds the actor
(``PolicyNetwork``) from its config (the behavior spec and the network's shape) and Keras
loads its weights; a user's encoder (``network_settings.encoder``) is rebuilt from its
``MODULE:NAME``, so its module must be importable where the file is loaded.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict

import keras
import tensorflow as tf

from tftrainers.envs.base import BehaviorSpec
from tftrainers.export.signature import contract_outputs, input_signature, output_names
from tftrainers.networks import PolicyNetwork
from tftrainers.networks.custom_encoder import importable_name

#: Outputs the contract gives without a batch dimension; repeated per row here.
CONSTANT_OUTPUTS = ("version_number", "memory_size", "continuous_action_output_shape",
                    "discrete_action_output_shape")


class KerasExportError(ValueError):
    """The policy cannot be written as a .keras file (one line naming why)."""


@keras.saving.register_keras_serializable(package="tftrainers")
class ExportedPolicy(keras.layers.Layer):
    """The contract's inference as one Keras layer: inputs name -> tensor, outputs the same.

    Args:
        behavior_spec: ``BehaviorSpec.to_dict()``.
        network: the actor's shape: ``hidden_units``, ``num_layers``, ``normalize``,
            ``vis_encode_type``, ``memory_size``, ``encoder`` (``MODULE:NAME`` or None),
            ``tanh_squash`` (SAC's actions; absent: false).
    """

    def __init__(self, behavior_spec: Dict[str, Any], network: Dict[str, Any], **kwargs):
        super().__init__(**kwargs)
        self.behavior_spec = dict(behavior_spec)
        self.network = dict(network)
        self.spec = BehaviorSpec.from_dict(self.behavior_spec)
        self.memory_size = int(network["memory_size"])
        self.actor = PolicyNetwork(self.spec, network["hidden_units"], network["num_layers"],
                                   network["normalize"], network["vis_encode_type"],
                                   self.memory_size, encoder=network.get("encoder"),
                                   tanh_squash=network.get("tanh_squash", False))
        self.built = True

    def call(self, inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        out = dict(contract_outputs(self.actor, self.spec, self.memory_size, inputs))
        batch = tf.shape(next(iter(inputs.values())))[:1]
        for name in CONSTANT_OUTPUTS:
            if name in out:
                out[name] = tf.tile(out[name][None], tf.concat([batch, [1]], axis=0))
        return out

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "behavior_spec": self.behavior_spec,
                "network": self.network}


def keras_model(policy) -> keras.Model:
    """A functional ``keras.Model`` of the contract with ``policy``'s current weights.

    Raises:
        KerasExportError: the policy's encoder was given as a Python object that cannot be
            imported back by name (a lambda, a local function, a layer instance).
    """
    ns = policy.network_settings
    encoder = ns.encoder
    if encoder is not None and not isinstance(encoder, str):
        name = importable_name(encoder) if not isinstance(encoder, keras.layers.Layer) else None
        if name is None:
            raise KerasExportError(
                f"the encoder {encoder!r} cannot be saved in a .keras file: a .keras file "
                f"rebuilds it by name; give network_settings.encoder as MODULE:NAME of a "
                f"module-level class or factory")
        encoder = name
    network = {"hidden_units": ns.hidden_units, "num_layers": ns.num_layers,
               "normalize": ns.normalize, "vis_encode_type": ns.vis_encode_type,
               "memory_size": int(policy.memory_size), "encoder": encoder,
               "tanh_squash": bool(getattr(policy, "tanh_squash", False))}
    layer = ExportedPolicy(policy.spec.to_dict(), network, name="policy")
    for mine, theirs in zip(layer.actor.variables, policy.actor.variables):
        mine.assign(theirs)
    inputs = {s.name: keras.Input(shape=s.shape[1:], name=s.name, dtype="float32")
              for s in input_signature(policy.spec, policy.memory_size)}
    outputs = layer(inputs)
    ordered = {name: outputs[name] for name in output_names(policy.spec, policy.memory_size)}
    return keras.Model(inputs=inputs, outputs=ordered, name="tftrainers_policy")


def export_keras(policy, path: str) -> str:
    """Writes ``policy`` as a Keras 3 ``.keras`` file (replaced atomically); returns ``path``.

    Raises:
        ValueError: ``path`` does not end with ``.keras`` (Keras' own rule).
        KerasExportError: the encoder cannot be saved by name; or a layer of it has no
            ``get_config`` that rebuilds it (named in the message).
    """
    if not path.endswith(".keras"):
        raise ValueError(f"{path}: a Keras model file must end with .keras")
    model = keras_model(policy)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".keras", dir=folder)
    os.close(fd)
    try:
        try:
            model.save(tmp)
        except (NotImplementedError, TypeError) as error:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise KerasExportError(f"{path}: the policy cannot be saved as .keras "
                                   f"({reason})") from error
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path
