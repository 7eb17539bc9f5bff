"""The exported inference function: the contract of docs/dev/architecture.md#export-contract as one
``tf.function``.

Both exporters (ONNX and SavedModel) trace this one function, so the two files have the
same inputs, outputs, dtypes and numbers::

    fn = inference_function(policy)          # tf.function with a fixed input signature
    [s.name for s in fn.input_signature]     # ["obs_0", "action_masks", "recurrent_in"]
    outputs = fn(obs_0, action_masks, recurrent_in)    # positional, in that order
    outputs["deterministic_discrete_actions"]          # [B, branches] int64

Inputs (all float32, batch dimension free):
    ``obs_0 .. obs_{n-1}``: [B, size] vector, [B, C, H, W] visual (NCHW, as ML-Agents and
    Unity feed images; transposed to the network's HWC inside);
    ``action_masks`` [B, sum(branches)] with 1 = allowed (only with discrete actions);
    ``recurrent_in`` [B, 1, memory_size] = concat(h, c) (only with memory).

Outputs (``output_names``):
    ``version_number`` [1] float32 = 3, ``memory_size`` [1] float32;
    continuous: ``continuous_actions`` [B, c] float32 = clip(Gaussian sample, -3, 3) / 3
    (SAC's squashed Gaussian: tanh of the sample; see ``SquashedActionModel``),
    ``continuous_action_output_shape`` [1] float32 = c,
    ``deterministic_continuous_actions`` [B, c] float32 = clip(mean, -3, 3) / 3 (SAC:
    tanh(mean));
    discrete: ``discrete_actions`` [B, branches] int64 (sampled from the masked logits),
    ``discrete_action_output_shape`` [branches] float32 = branch sizes,
    ``deterministic_discrete_actions`` [B, branches] int64 (argmax of the masked logits);
    memory: ``recurrent_out`` [B, 1, memory_size] float32.

Dtypes follow what Unity's ML-Agents package (Sentis / Inference Engine) reads: it casts
``version_number``, ``memory_size`` and both ``*_output_shape`` tensors to
``Tensor<float>`` (``SentisModelInfo.GetTensorByNameAsInt``), so they are float32 as in
ML-Agents' own exporter (``torch.Tensor([...])`` parameters); it reads discrete actions as
``Tensor<int>`` (``DiscreteActionOutputApplier``), which Sentis builds from an ONNX int64 or
int32 tensor alike. We export int64, the type ``torch.multinomial`` / ``torch.argmax`` give
ML-Agents' models, so our graphs have the types of the models Unity is tested with.
``discrete_action_output_shape`` is [branches] where ML-Agents' is [1, branches]: Unity
sums all its elements (``CheckDiscreteOutputSize``), so both read the same.
"""
from __future__ import annotations

from typing import Dict, List

import tensorflow as tf

from tftrainers.envs.base import BehaviorSpec, ObservationKind

#: ML-Agents' ``MODEL_EXPORT_VERSION`` (Unity's ``ModelApiVersion.MLAgents2_0``).
MODEL_VERSION = 3
#: Dtype of the discrete action outputs (see the module docstring).
DISCRETE_ACTION_DTYPE = tf.int64

#: The SavedModel signature that carries the contract.
SERVING_SIGNATURE = "serving_default"

VERSION_NUMBER = "version_number"
MEMORY_SIZE = "memory_size"
ACTION_MASKS = "action_masks"
RECURRENT_IN = "recurrent_in"
RECURRENT_OUT = "recurrent_out"
CONTINUOUS_ACTIONS = "continuous_actions"
CONTINUOUS_ACTION_OUTPUT_SHAPE = "continuous_action_output_shape"
DETERMINISTIC_CONTINUOUS_ACTIONS = "deterministic_continuous_actions"
DISCRETE_ACTIONS = "discrete_actions"
DISCRETE_ACTION_OUTPUT_SHAPE = "discrete_action_output_shape"
DETERMINISTIC_DISCRETE_ACTIONS = "deterministic_discrete_actions"


def observation_name(index: int) -> str:
    """The input name of observation ``index``: ``obs_<index>``."""
    return f"obs_{index}"


def exported_observation_shape(obs_spec) -> tuple:
    """An observation's shape as the exported model takes it: [size] or [C, H, W]."""
    if obs_spec.kind == ObservationKind.VISUAL:
        height, width, channels = obs_spec.shape
        return (channels, height, width)
    return tuple(obs_spec.shape)


def input_signature(spec: BehaviorSpec, memory_size: int) -> List[tf.TensorSpec]:
    """The exported inputs, in order: observations, then masks and memory when used.

    Args:
        spec: the behavior's spec.
        memory_size: the actor's memory size (0 without memory).

    Returns:
        Named float32 TensorSpecs with a free batch dimension.
    """
    specs = [tf.TensorSpec([None, *exported_observation_shape(o)], tf.float32,
                           name=observation_name(i))
             for i, o in enumerate(spec.observation_specs)]
    branches = spec.action_spec.discrete_branches
    if branches:
        specs.append(tf.TensorSpec([None, int(sum(branches))], tf.float32, name=ACTION_MASKS))
    if memory_size:
        specs.append(tf.TensorSpec([None, 1, int(memory_size)], tf.float32, name=RECURRENT_IN))
    return specs


def output_names(spec: BehaviorSpec, memory_size: int) -> List[str]:
    """The exported outputs' names in ML-Agents' order (``ModelSerializer.output_names``)."""
    names = [VERSION_NUMBER, MEMORY_SIZE]
    if spec.action_spec.continuous_size:
        names += [CONTINUOUS_ACTIONS, CONTINUOUS_ACTION_OUTPUT_SHAPE,
                  DETERMINISTIC_CONTINUOUS_ACTIONS]
    if spec.action_spec.discrete_branches:
        names += [DISCRETE_ACTIONS, DISCRETE_ACTION_OUTPUT_SHAPE, DETERMINISTIC_DISCRETE_ACTIONS]
    if memory_size:
        names.append(RECURRENT_OUT)
    return names


def network_inputs(spec: BehaviorSpec, memory_size: int, inputs: Dict[str, tf.Tensor]):
    """The contract's inputs as ``PolicyNetwork`` and ``Critic`` take them.

    Args:
        spec: the behavior's spec.
        memory_size: the actor's memory size (0: no ``recurrent_in``).
        inputs: contract name -> tensor (``obs_i``, ``action_masks``, ``recurrent_in``).

    Returns:
        (obs: one [B, *shape] per spec, images HWC; masks [B, sum(branches)] or None;
        memory [B, memory_size] or None).
    """
    obs = []
    for i, o in enumerate(spec.observation_specs):
        x = inputs[observation_name(i)]
        if o.kind == ObservationKind.VISUAL:
            x = tf.transpose(x, [0, 2, 3, 1])  # NCHW (Unity's layout) -> NHWC (the encoders')
        obs.append(x)
    masks = inputs.get(ACTION_MASKS)
    memory = None
    if memory_size:
        memory = tf.reshape(inputs[RECURRENT_IN], [-1, memory_size])
    return obs, masks, memory


def contract_outputs(actor, spec: BehaviorSpec, memory_size: int,
                     inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The contract's outputs of ``actor`` (a ``PolicyNetwork``) for the contract's inputs
    (name -> tensor), keyed by ``output_names(spec, memory_size)`` in that order: what every
    exported format computes (ONNX, SavedModel, .keras, TFLite)."""
    action_spec = spec.action_spec
    continuous_size = action_spec.continuous_size
    branches = tuple(action_spec.discrete_branches)
    obs, masks, memory = network_inputs(spec, memory_size, inputs)
    # One body pass feeds both the sampled and the deterministic heads.
    encoding, new_memory = actor.body(obs, memory=memory)
    sample = actor.action_model.sample(encoding, masks)
    mode = actor.action_model.deterministic(encoding, masks)
    out = {VERSION_NUMBER: tf.constant([MODEL_VERSION], tf.float32),
           MEMORY_SIZE: tf.constant([memory_size], tf.float32)}
    if continuous_size:
        out[CONTINUOUS_ACTIONS] = actor.action_model.env_actions(sample.continuous)
        out[CONTINUOUS_ACTION_OUTPUT_SHAPE] = tf.constant([continuous_size], tf.float32)
        out[DETERMINISTIC_CONTINUOUS_ACTIONS] = actor.action_model.env_actions(mode.continuous)
    if branches:
        out[DISCRETE_ACTIONS] = tf.cast(sample.discrete, DISCRETE_ACTION_DTYPE)
        out[DISCRETE_ACTION_OUTPUT_SHAPE] = tf.constant(branches, tf.float32)
        out[DETERMINISTIC_DISCRETE_ACTIONS] = tf.cast(mode.discrete, DISCRETE_ACTION_DTYPE)
    if memory_size:
        out[RECURRENT_OUT] = tf.expand_dims(new_memory, 1)
    # Named identities give the graph's output nodes the contract's names.
    return {name: tf.identity(out[name], name=name)
            for name in output_names(spec, memory_size)}


def inference_function(policy) -> tf.types.experimental.GenericFunction:
    """The contract's inference function for a trained ``Policy``.

    The function reads the actor's variables (weights, log std, normalizer statistics)
    when it runs; converting it to ONNX freezes their values at that moment.

    Args:
        policy: a ``tftrainers.trainers.policy.Policy`` (its ``actor`` and ``memory_size``).

    Returns:
        A ``tf.function`` with ``input_signature(policy.spec, policy.memory_size)``, taking
        the inputs positionally in that order and returning a dict keyed by
        ``output_names(...)``. Sampled outputs draw fresh noise at every call (stateful
        ``tf.random`` ops: ONNX ``RandomNormalLike`` and ``Multinomial``).
    """
    spec = policy.spec
    memory_size = int(policy.memory_size)
    actor = policy.actor
    signature = input_signature(spec, memory_size)
    names = [s.name for s in signature]

    def serve(*args):
        return contract_outputs(actor, spec, memory_size, dict(zip(names, args)))

    return tf.function(serve, input_signature=signature, autograph=False)
