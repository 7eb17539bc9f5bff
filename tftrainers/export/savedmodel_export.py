"""SavedModel export for TF Serving: the ONNX contract as the ``serving_default`` signature.

    export_savedmodel(policy, "serving/Ball3D", version=1)     # writes serving/Ball3D/1/
    # saved_model_cli show --dir serving/Ball3D/1 --all
    # tensorflow_model_server --model_base_path=$PWD/serving/Ball3D --model_name=Ball3D

Signatures:
    ``serving_default``: inputs and outputs named and typed as the ONNX model's (constant
    outputs such as ``version_number`` repeated per row, [B, 1], for TF Serving's row format)
    (``signature.inference_function``), batch dimension free.
    ``value_estimates`` (when the critic is given): the same observation inputs (``obs_i``,
    images NCHW) -> one [B] float32 value per reward stream, keyed by the stream's name.
    A critic with memory also takes ``critic_recurrent_in`` [B, 1, memory_size] and gives
    ``critic_recurrent_out``, as the policy's ``recurrent_in`` / ``recurrent_out``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Union

import tensorflow as tf

from tftrainers.export.signature import (SERVING_SIGNATURE, inference_function, input_signature,
                                         network_inputs)

VALUE_SIGNATURE = "value_estimates"
CRITIC_RECURRENT_IN = "critic_recurrent_in"
CRITIC_RECURRENT_OUT = "critic_recurrent_out"


def _value_function(spec, critic) -> tf.types.experimental.GenericFunction:
    """The critic's values from the contract's observation inputs."""
    signature = [s for s in input_signature(spec, 0) if s.name.startswith("obs_")]
    names = [s.name for s in signature]
    memory_size = int(critic.memory_size)
    if memory_size:
        signature.append(tf.TensorSpec([None, 1, memory_size], tf.float32,
                                       name=CRITIC_RECURRENT_IN))

    def values(*args):
        obs, _, _ = network_inputs(spec, 0, dict(zip(names, args)))
        memory = tf.reshape(args[-1], [-1, memory_size]) if memory_size else None
        estimates, new_memory = critic(obs, memory=memory)
        out = {stream: tf.identity(v, name=stream) for stream, v in estimates.items()}
        if memory_size:
            out[CRITIC_RECURRENT_OUT] = tf.identity(new_memory[:, None],
                                                    name=CRITIC_RECURRENT_OUT)
        return out

    return tf.function(values, input_signature=signature, autograph=False)


# Outputs the contract gives as constants without a batch dimension ([1] or [branches]).
_CONSTANT_OUTPUTS = ("version_number", "memory_size", "continuous_action_output_shape",
                     "discrete_action_output_shape")


def _serving_function(policy) -> tf.types.experimental.GenericFunction:
    """The inference function with its constant outputs repeated per row ([B, ...]).

    TF Serving's row format ("instances" -> "predictions") needs every output to lead with
    the batch dimension; the ONNX model keeps the contract's [1] / [branches] shapes.
    """
    inference = inference_function(policy)

    def serve(*args):
        out = dict(inference(*args))
        batch = tf.shape(args[0])[:1]
        for name in _CONSTANT_OUTPUTS:
            if name in out:
                out[name] = tf.tile(out[name][None], tf.concat([batch, [1]], axis=0))
        return out
    return tf.function(serve, input_signature=inference.input_signature, autograph=False)


def export_savedmodel(policy, directory: str, version: Union[int, str],
                      overwrite: bool = False, critic=None) -> str:
    """Writes a ``Policy`` as a SavedModel in ``directory/<version>/`` (TF Serving's layout).

    The version folder appears at once, complete: the model is written to a temporary
    folder beside it (a name TF Serving ignores) and renamed.

    Args:
        policy: a trained (or restored) ``tftrainers.trainers.policy.Policy``.
        directory: the model's base path (TF Serving's ``--model_base_path``).
        version: the version folder's name: a non-negative int, or a string of digits.
        overwrite: replace an existing version folder instead of refusing.
        critic: the behavior's critic (``networks.Critic``), exported as the
            ``value_estimates`` signature; None for none.

    Returns:
        The version folder's path.

    Raises:
        ValueError: a version TF Serving would not read as a version number.
        FileExistsError: the version folder exists and ``overwrite`` is False.
    """
    # TF Serving loads only folders whose whole name parses as a non-negative int64.
    if isinstance(version, bool) or not (isinstance(version, int) and version >= 0 or
                                         isinstance(version, str) and version.isdigit()
                                         and version.isascii()):
        raise ValueError(f"SavedModel version must be a non-negative int (TF Serving's "
                         f"numbered folders), got {version!r}")
    version = int(version)
    target = os.path.join(directory, str(version))
    if os.path.exists(target) and not overwrite:
        raise FileExistsError(f"{target} exists; pick another version or pass overwrite=True")
    os.makedirs(directory, exist_ok=True)

    serve = _serving_function(policy).get_concrete_function()
    functions = [serve]
    signatures = {SERVING_SIGNATURE: serve}
    if critic is not None:
        values = _value_function(policy.spec, critic).get_concrete_function()
        functions.append(values)
        signatures[VALUE_SIGNATURE] = values
    module = tf.Module()
    # Track the tf.Variables the functions read, not the Keras models: a Keras 3 variable
    # is saved as a second, differently named copy of its tf.Variable, so the TF1-style
    # loader (TF Serving, saved_model_cli run) restores the copy and the functions then read
    # an uninitialized variable ("Could not find variable mean/kernel"). This is what
    # keras.export.ExportArchive does too.
    used = {}
    for fn in functions:
        for variable in fn.variables:
            used.setdefault(id(variable), variable)
    module.variables_used = list(used.values())

    tmp = tempfile.mkdtemp(prefix=f".tmp-{version}-", dir=directory)
    try:
        tf.saved_model.save(module, tmp, signatures=signatures)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
