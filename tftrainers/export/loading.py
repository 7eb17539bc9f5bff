"""Policies that run exported models in an environment (what Unity does with the file).

    spec = env.behavior_specs["GridWorld"]
    policy = OnnxPolicy("GridWorld.onnx", spec, deterministic=True)
    # or SavedModelPolicy("serving/GridWorld", spec): the highest version folder,
    # KerasPolicy("GridWorld.keras", spec), TFLitePolicy("GridWorld.tflite", spec),
    # or exported_policy(path, spec), which picks the kind from the path
    results = evaluate(env, policy, episodes=20)

``behavior_spec`` may be None: the spec is then read from the model itself (observation
inputs of rank 1 are vectors, of rank 3 images [C, H, W]; the action sizes from the
constant outputs), so an exported file needs no config and no env to load.

Each policy serves one behavior, with the call shape of ``tftrainers.evaluate``'s policies:
``policy(behavior_name, decision_steps) -> ActionTuple`` and
``policy.episode_ended(behavior_name, agent_ids)``, which forgets those agents' recurrent
memory. It converts the env's data to the contract's inputs (HWC images to NCHW, bool
masks with True = masked to float masks with 1 = allowed), keeps each agent's
``recurrent_out`` to feed back as its next ``recurrent_in``, and takes the sampled or
the deterministic action outputs.

The model is checked against the behavior's spec when it is loaded: every input must be
one the policy can feed with the env's data, shaped like it, and the action outputs must
match the action spec (``ValueError`` naming the input or output and both shapes). A file
that is not a readable model (truncated, garbage, damaged variables) is a ``ValueError``
naming it, too.
"""
from __future__ import annotations

import abc

import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.envs.agent_rows import AgentMemories
from tftrainers.envs.base import (ActionTuple, BehaviorSpec, DecisionSteps, ObservationKind,
                                  allowed_action_mask)
from tftrainers.export import signature as contract

Shape = Tuple[Optional[int], ...]


def _reason(error: BaseException) -> str:
    """The first line of a loader's error, short."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


def _format_shape(shape: Sequence) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


class _Model(abc.ABC):
    """What the policies need of a loaded model: input and output shapes, and a run.

    ``inputs`` / ``outputs``: name -> (shape with None for free dims, dtype as a NumPy
    kind: "f" float, "i" int).
    """

    inputs: Dict[str, Tuple[Shape, str]]
    outputs: Dict[str, Tuple[Shape, str]]

    @abc.abstractmethod
    def run(self, names: List[str], feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
        """The named outputs for the given inputs."""


class _OnnxModel(_Model):
    _KINDS = {"tensor(float)": "f", "tensor(int64)": "i", "tensor(int32)": "i"}

    def __init__(self, path: str):
        import onnxruntime

        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such ONNX file")
        options = onnxruntime.SessionOptions()
        # One agent batch per env step: threads cost more in hand-offs than they save.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self.session = onnxruntime.InferenceSession(path, options,
                                                        providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime's own kinds: InvalidProtobuf, Fail, ...
            raise ValueError(f"{path}: not a readable ONNX model ({_reason(error)})") \
                from error

        def describe(values):
            return {v.name: (tuple(d if isinstance(d, int) else None for d in v.shape),
                             self._KINDS.get(v.type, v.type)) for v in values}

        self.inputs = describe(self.session.get_inputs())
        self.outputs = describe(self.session.get_outputs())

    def run(self, names, feeds):
        return self.session.run(names, feeds)


class _SavedModel(_Model):
    def __init__(self, path: str):
        self.folder = folder = _saved_model_folder(path)
        # Keep the loaded object: its signature functions hold only weak references.
        try:
            self.loaded = tf.saved_model.load(folder)
        except Exception as error:  # a damaged saved_model.pb or variables: many kinds
            raise ValueError(f"{folder}: the SavedModel cannot be read ({_reason(error)})") \
                from error
        if contract.SERVING_SIGNATURE not in self.loaded.signatures:
            raise ValueError(f"{folder}: no '{contract.SERVING_SIGNATURE}' signature (has "
                             f"{', '.join(self.loaded.signatures) or 'none'})")
        self.function = self.loaded.signatures[contract.SERVING_SIGNATURE]

        def describe(specs):
            return {name: (tuple(s.shape.as_list()), "f" if s.dtype.is_floating else "i")
                    for name, s in specs.items()}

        self.inputs = describe(self.function.structured_input_signature[1])
        self.outputs = describe(self.function.structured_outputs)

    def run(self, names, feeds):
        out = self.function(**{k: tf.constant(v) for k, v in feeds.items()})
        return [out[name].numpy() for name in names]


def _saved_model_folder(path: str) -> str:
    """``path`` if it holds a SavedModel, else its highest numbered version folder (as TF
    Serving picks)."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    names = os.listdir(path) if os.path.isdir(path) else []
    versions = sorted(int(d) for d in names if d.isascii() and d.isdigit()
                      and os.path.isfile(os.path.join(path, d, "saved_model.pb")))
    if not versions:
        raise FileNotFoundError(f"{path}: no SavedModel (saved_model.pb) in it or in a "
                                f"numbered version folder")
    return os.path.join(path, str(versions[-1]))


class _KerasModel(_Model):
    """A ``.keras`` file of ``keras_export``, run as one compiled TensorFlow function."""

    def __init__(self, path: str):
        import keras

        import tftrainers.export.keras_export  # noqa: F401  (registers ExportedPolicy)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such .keras file")
        try:
            self.keras_model = keras.models.load_model(path)
        except Exception as error:  # zip, JSON, h5 and deserialisation errors: many kinds
            raise ValueError(f"{path}: not a readable .keras policy ({_reason(error)})") \
                from error

        def describe(tensors):
            return {name: (tuple(t.shape), "f" if "float" in str(t.dtype) else "i")
                    for name, t in tensors.items()}

        model = self.keras_model
        if not isinstance(model.input, dict) or not isinstance(model.output, dict):
            raise ValueError(f"{path}: not a tftrainers policy (its inputs and outputs are "
                             f"not named by the export contract)")
        self.inputs = describe(model.input)
        self.outputs = describe(model.output)
        self._call = tf.function(lambda feeds: model(feeds, training=False),
                                 reduce_retracing=True)

    def run(self, names, feeds):
        out = self._call({k: tf.constant(v) for k, v in feeds.items()})
        return [out[name].numpy() for name in names]


class _TFLiteModel(_Model):
    """A ``.tflite`` file of ``tflite_export`` in the LiteRT interpreter (``ai-edge-litert``;
    TensorFlow's own ``tf.lite.Interpreter`` when that is not installed)."""

    def __init__(self, path: str):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such TFLite file")
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:  # the same flatbuffer runtime, deprecated in TensorFlow
            Interpreter = tf.lite.Interpreter
        try:
            # One agent batch per env step: one thread, as for onnxruntime.
            self.interpreter = Interpreter(model_path=path, num_threads=1)
            self.runner = self.interpreter.get_signature_runner(contract.SERVING_SIGNATURE)
        except Exception as error:  # flatbuffer and signature errors
            raise ValueError(f"{path}: not a readable TFLite policy ({_reason(error)})") \
                from error

        def describe(details):
            return {name: (tuple(None if d < 0 else int(d) for d in detail["shape_signature"]),
                           "f" if np.dtype(detail["dtype"]).kind == "f" else "i")
                    for name, detail in details.items()}

        self.inputs = describe(self.runner.get_input_details())
        self.outputs = describe(self.runner.get_output_details())

    def run(self, names, feeds):
        out = self.runner(**{k: np.ascontiguousarray(v, np.float32) for k, v in feeds.items()})
        return [out[name] for name in names]


def _constants(model: _Model, names: List[str]) -> Dict[str, np.ndarray]:
    """The named constant outputs, read by running one all-zero agent (as Unity does)."""
    names = [n for n in names if n in model.outputs]
    feeds = {name: np.zeros([1 if d is None else d for d in shape], np.float32)
             for name, (shape, _) in model.inputs.items()}
    if contract.ACTION_MASKS in feeds:
        feeds[contract.ACTION_MASKS][:] = 1.0
    return {n: np.asarray(v).reshape(-1) for n, v in zip(names, model.run(names, feeds))}


def model_behavior_spec(model: _Model, source: str) -> BehaviorSpec:
    """The behavior spec an exported model was made for, read from the model alone (its
    ``obs_i`` inputs and its constant action-shape outputs), so that loading an exported
    file needs no config: rank-1 inputs are vector observations, rank 3 (CHW) visual ones
    (given back as HWC), rank 2 variable-length ones.

    Raises:
        ValueError: the model is not one of the export contract's (naming what it lacks).
    """
    from tftrainers.envs.base import ActionSpec, ObservationSpec
    names = sorted((n for n in model.inputs if n.startswith("obs_")), key=lambda n: (len(n), n))
    if not names:
        raise ValueError(f"{source}: the model has no obs_0 input; not an exported policy of "
                         f"the ML-Agents contract")
    if contract.VERSION_NUMBER not in model.outputs:
        raise ValueError(f"{source}: the model has no {contract.VERSION_NUMBER} output; not "
                         f"an ML-Agents (version {contract.MODEL_VERSION}) model")
    kinds = {1: ObservationKind.VECTOR, 3: ObservationKind.VISUAL,
             2: ObservationKind.VARIABLE_LENGTH}
    observations = []
    for name in names:
        shape = tuple(model.inputs[name][0][1:])
        if len(shape) not in kinds or any(d is None for d in shape):
            raise ValueError(f"{source}: model input {name} has shape "
                             f"{_format_shape(model.inputs[name][0])}; expected [?, size], "
                             f"[?, entities, size] or [?, C, H, W] with fixed sizes")
        if len(shape) == 3:
            shape = (shape[1], shape[2], shape[0])  # the contract's CHW -> the env's HWC
        observations.append(ObservationSpec(shape, name, kinds[len(shape)]))
    values = _constants(model, [contract.CONTINUOUS_ACTION_OUTPUT_SHAPE,
                                contract.DISCRETE_ACTION_OUTPUT_SHAPE])
    continuous = (int(values[contract.CONTINUOUS_ACTION_OUTPUT_SHAPE][0])
                  if contract.CONTINUOUS_ACTIONS in model.outputs
                  and contract.CONTINUOUS_ACTION_OUTPUT_SHAPE in values else 0)
    branches = (tuple(int(b) for b in values[contract.DISCRETE_ACTION_OUTPUT_SHAPE])
                if contract.DISCRETE_ACTIONS in model.outputs
                and contract.DISCRETE_ACTION_OUTPUT_SHAPE in values else ())
    if not continuous and not branches:
        raise ValueError(f"{source}: the model has neither {contract.CONTINUOUS_ACTIONS} nor "
                         f"{contract.DISCRETE_ACTIONS} (with their output shapes)")
    return BehaviorSpec(tuple(observations), ActionSpec(continuous, branches))


class _ExportedPolicy:
    """Runs a model with the contract's inputs and outputs for one behavior's agents
    (``behavior_spec`` None: the model's own, ``model_behavior_spec``)."""

    def __init__(self, model: _Model, source: str, behavior_spec: Optional[BehaviorSpec],
                 deterministic: bool):
        if behavior_spec is None:
            behavior_spec = model_behavior_spec(model, source)
        self.model = model
        self.source = source
        self.spec = behavior_spec
        self.deterministic = bool(deterministic)
        action_spec = behavior_spec.action_spec
        self._branches = tuple(action_spec.discrete_branches)
        self._visual = [o.kind == ObservationKind.VISUAL for o in behavior_spec.observation_specs]
        self.memory_size = self._check_inputs()
        self._continuous_output = self._discrete_output = None
        if action_spec.continuous_size:
            self._continuous_output = (contract.DETERMINISTIC_CONTINUOUS_ACTIONS if deterministic
                                       else contract.CONTINUOUS_ACTIONS)
        if self._branches:
            self._discrete_output = (contract.DETERMINISTIC_DISCRETE_ACTIONS if deterministic
                                     else contract.DISCRETE_ACTIONS)
        self._check_outputs()
        self._check_constants()
        self._memories = AgentMemories(self.memory_size)
        self._fetch = [n for n in (self._continuous_output, self._discrete_output) if n]
        if self.memory_size:
            self._fetch.append(contract.RECURRENT_OUT)

    # --- checks at load ---------------------------------------------------------------
    def _error(self, message: str) -> ValueError:
        return ValueError(f"{self.source}: {message}")

    def _check_inputs(self) -> int:
        """Checks the model's inputs against the env; returns the model's memory size."""
        inputs = self.model.inputs
        specs = self.spec.observation_specs
        expected = [contract.observation_name(i) for i in range(len(specs))]
        model_obs = sorted((n for n in inputs if n.startswith("obs_")),
                           key=lambda n: (len(n), n))
        if model_obs != expected:
            raise self._error(
                f"the model takes {len(model_obs)} observation(s) ({', '.join(model_obs)}) but "
                f"the environment has {len(specs)} ({', '.join(repr(o.name) for o in specs)})")
        for i, (name, obs_spec) in enumerate(zip(expected, specs)):
            shape, kind = inputs[name]
            exported = contract.exported_observation_shape(obs_spec)
            if tuple(shape[1:]) != exported or kind != "f":
                as_chw = (f" (as {_format_shape(exported)})"
                          if obs_spec.kind == ObservationKind.VISUAL else "")
                dtype = "" if kind == "f" else f" of type {kind}"
                raise self._error(
                    f"model input {name} has shape {_format_shape(shape)}{dtype} but the "
                    f"environment's observation {i} ('{obs_spec.name}') is "
                    f"{_format_shape(obs_spec.shape)}{as_chw}")
        mask_size = int(sum(self._branches))
        if contract.ACTION_MASKS in inputs:
            shape, _ = inputs[contract.ACTION_MASKS]
            if tuple(shape[1:]) != (mask_size,):
                raise self._error(
                    f"model input {contract.ACTION_MASKS} has shape {_format_shape(shape)} but "
                    f"the environment's discrete branches {list(self._branches)} need "
                    f"{_format_shape([None, mask_size])}")
        elif self._branches:
            raise self._error(f"the model has no {contract.ACTION_MASKS} input but the "
                              f"environment has discrete branches {list(self._branches)}")
        memory_size = 0
        if contract.RECURRENT_IN in inputs:
            shape, _ = inputs[contract.RECURRENT_IN]
            if len(shape) != 3 or shape[1] != 1 or shape[2] is None:
                raise self._error(f"model input {contract.RECURRENT_IN} has shape "
                                  f"{_format_shape(shape)}; expected [?, 1, memory_size]")
            memory_size = int(shape[2])
        unknown = sorted(set(inputs) - set(expected) - {contract.ACTION_MASKS,
                                                        contract.RECURRENT_IN})
        if unknown:
            raise self._error(f"model input(s) {', '.join(unknown)} are not part of the export "
                              f"contract (obs_i, {contract.ACTION_MASKS}, "
                              f"{contract.RECURRENT_IN})")
        return memory_size

    def _check_outputs(self) -> None:
        outputs = self.model.outputs
        action_spec = self.spec.action_spec
        wanted = [(self._continuous_output, action_spec.continuous_size, "f",
                   "continuous actions"),
                  (self._discrete_output, len(self._branches), "i", "discrete branches")]
        for name, size, kind, what in wanted:
            if name is None:
                continue
            if name not in outputs:
                raise self._error(f"the model has no output {name} but the environment has "
                                  f"{size} {what}")
            shape, got_kind = outputs[name]
            if len(shape) != 2 or shape[1] not in (None, size) or got_kind != kind:
                raise self._error(f"model output {name} has shape {_format_shape(shape)} "
                                  f"({got_kind}) but the environment has {size} {what}")
        if self.memory_size and contract.RECURRENT_OUT not in outputs:
            raise self._error(f"the model takes {contract.RECURRENT_IN} but has no "
                              f"{contract.RECURRENT_OUT} output")

    def _check_constants(self) -> None:
        """Runs one all-zero agent to read the constant outputs (as Unity does at load)."""
        names = [n for n in (contract.VERSION_NUMBER, contract.MEMORY_SIZE,
                             contract.CONTINUOUS_ACTION_OUTPUT_SHAPE,
                             contract.DISCRETE_ACTION_OUTPUT_SHAPE) if n in self.model.outputs]
        if contract.VERSION_NUMBER not in names:
            raise self._error(f"the model has no {contract.VERSION_NUMBER} output; not an "
                              f"ML-Agents (version {contract.MODEL_VERSION}) model")
        values = _constants(self.model, names)
        version = int(values[contract.VERSION_NUMBER][0])
        if version != contract.MODEL_VERSION:
            raise self._error(f"model version {version}; this loader reads version "
                              f"{contract.MODEL_VERSION}")
        if contract.MEMORY_SIZE in values and \
                int(values[contract.MEMORY_SIZE][0]) != self.memory_size:
            raise self._error(f"model output {contract.MEMORY_SIZE} is "
                              f"{int(values[contract.MEMORY_SIZE][0])} but its "
                              f"{contract.RECURRENT_IN} has {self.memory_size}")
        action_spec = self.spec.action_spec
        if self._continuous_output and contract.CONTINUOUS_ACTION_OUTPUT_SHAPE in values:
            size = int(values[contract.CONTINUOUS_ACTION_OUTPUT_SHAPE][0])
            if size != action_spec.continuous_size:
                raise self._error(f"the model has {size} continuous actions but the "
                                  f"environment has {action_spec.continuous_size}")
        if self._discrete_output and contract.DISCRETE_ACTION_OUTPUT_SHAPE in values:
            branches = tuple(int(b) for b in values[contract.DISCRETE_ACTION_OUTPUT_SHAPE])
            if branches != self._branches:
                raise self._error(f"the model has discrete branches {list(branches)} but the "
                                  f"environment has {list(self._branches)}")

    # --- acting -------------------------------------------------------------------------
    def feeds(self, decision_steps: DecisionSteps, memory: Optional[np.ndarray] = None
              ) -> Dict[str, np.ndarray]:
        """The model's inputs for ``decision_steps`` (memory [n, memory_size] or zeros)."""
        n = len(decision_steps)
        feeds = {}
        for i, (obs, visual) in enumerate(zip(decision_steps.obs, self._visual)):
            obs = np.asarray(obs, np.float32)
            if visual:  # the env's HWC -> the contract's CHW
                obs = np.ascontiguousarray(obs.transpose(0, 3, 1, 2))
            feeds[contract.observation_name(i)] = obs
        if self._branches:
            feeds[contract.ACTION_MASKS] = allowed_action_mask(decision_steps.action_mask,
                                                               self._branches, n)
        if self.memory_size:
            if memory is None:
                memory = np.zeros((n, self.memory_size), np.float32)
            feeds[contract.RECURRENT_IN] = memory.reshape(n, 1, self.memory_size)
        return feeds

    def __call__(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """Actions [n, ...] for the agents of ``decision_steps`` (``behavior_name`` is
        that of the behavior this policy was loaded for)."""
        n = len(decision_steps)
        actions = self.spec.action_spec.empty_action(n)
        if n == 0:
            return actions
        rows = memory = None
        if self.memory_size:
            rows, memory = self._memories.read(decision_steps.agent_id)
        out = dict(zip(self._fetch, self.model.run(self._fetch,
                                                   self.feeds(decision_steps, memory))))
        if self.memory_size:
            self._memories.write(rows, out[contract.RECURRENT_OUT].reshape(n, self.memory_size))
        continuous, discrete = actions
        if self._continuous_output:
            continuous = np.asarray(out[self._continuous_output], np.float32)
        if self._discrete_output:
            discrete = np.asarray(out[self._discrete_output]).astype(np.int32)
        return ActionTuple(continuous, discrete)

    def episode_ended(self, behavior_name: str, agent_ids: np.ndarray) -> None:
        """Forgets the recurrent memory of agents whose episode ended."""
        if self.memory_size:
            self._memories.forget(agent_ids)


class OnnxPolicy(_ExportedPolicy):
    """An exported ONNX model run with onnxruntime (CPU, one intra-op thread).

    Args:
        path: the ``.onnx`` file.
        behavior_spec: the spec of the behavior it acts for (None: read from the model).
        deterministic: take ``deterministic_*_actions`` instead of the sampled actions.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the model does not fit ``behavior_spec`` (naming what differs).
    """

    def __init__(self, path: str, behavior_spec: Optional[BehaviorSpec] = None,
                 deterministic: bool = False):
        super().__init__(_OnnxModel(path), path, behavior_spec, deterministic)


class SavedModelPolicy(_ExportedPolicy):
    """An exported SavedModel run through its ``serving_default`` signature.

    Args:
        path: a SavedModel folder, or a model base path whose highest numbered version
            folder is taken (as TF Serving does).
        behavior_spec: the spec of the behavior it acts for (None: read from the model).
        deterministic: take ``deterministic_*_actions`` instead of the sampled actions.

    Raises:
        FileNotFoundError: no SavedModel there.
        ValueError: no ``serving_default`` signature, or a model that does not fit
            ``behavior_spec`` (naming what differs).
    """

    def __init__(self, path: str, behavior_spec: Optional[BehaviorSpec] = None,
                 deterministic: bool = False):
        model = _SavedModel(path)
        super().__init__(model, model.folder, behavior_spec, deterministic)


class KerasPolicy(_ExportedPolicy):
    """An exported ``.keras`` policy (``keras_export``) run by Keras / TensorFlow.

    Args:
        path: the ``.keras`` file.
        behavior_spec: the spec of the behavior it acts for; None: read from the model.
        deterministic: take ``deterministic_*_actions`` instead of the sampled actions.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable policy, or one that does not fit ``behavior_spec``.
    """

    def __init__(self, path: str, behavior_spec: Optional[BehaviorSpec] = None,
                 deterministic: bool = False):
        model = _KerasModel(path)
        super().__init__(model, path, behavior_spec, deterministic)
        #: The loaded ``keras.Model`` (inputs and outputs named by the contract).
        self.keras_model = model.keras_model


class TFLitePolicy(_ExportedPolicy):
    """An exported ``.tflite`` policy (``tflite_export``, float32 or quantised) run by the
    LiteRT interpreter.

    Args:
        path: the ``.tflite`` file.
        behavior_spec: the spec of the behavior it acts for; None: read from the model.
        deterministic: take ``deterministic_*_actions`` instead of the sampled actions.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a readable policy, or one that does not fit ``behavior_spec``.
    """

    def __init__(self, path: str, behavior_spec: Optional[BehaviorSpec] = None,
                 deterministic: bool = False):
        super().__init__(_TFLiteModel(path), path, behavior_spec, deterministic)


#: Exported files each policy kind reads, by how the path ends.
SUFFIXES = {".onnx": "OnnxPolicy", ".keras": "KerasPolicy", ".tflite": "TFLitePolicy"}


def exported_policy(path: str, behavior_spec: Optional[BehaviorSpec] = None,
                    deterministic: bool = False) -> _ExportedPolicy:
    """The policy of an exported model of any format: ``.onnx``, ``.keras``, ``.tflite``,
    else a SavedModel folder (or a model base path of numbered versions).

    Raises:
        FileNotFoundError: no such file, or no SavedModel in the folder.
        ValueError: not a readable model, or one that does not fit ``behavior_spec``.
    """
    for suffix, kind in SUFFIXES.items():
        if path.endswith(suffix):
            return globals()[kind](path, behavior_spec, deterministic)
    return SavedModelPolicy(path, behavior_spec, deterministic)
