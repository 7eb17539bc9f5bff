"""Policies to export, contract inputs for them, and runners for the three implementations
(the Keras actor, onnxruntime on the ONNX file, TensorFlow on the SavedModel)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from tftrainers.envs import make
from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from tftrainers.export import signature as contract
from tftrainers.networks import Critic
from tftrainers.settings import MemorySettings, NetworkSettings
from tftrainers.trainers.policy import Policy

STREAMS = ("extrinsic", "curiosity")


def env_spec(env_id: str, **env_args) -> BehaviorSpec:
    (spec,) = make(env_id, **env_args).behavior_specs.values()
    return spec


@dataclasses.dataclass(frozen=True)
class Case:
    """A behavior to export: its spec and network settings."""

    spec: Callable[[], BehaviorSpec]
    network: NetworkSettings


CASES: Dict[str, Case] = {
    # Normalized vector observations, Gaussian actions.
    "continuous": Case(lambda: env_spec("builtin:Ball3D"),
                       NetworkSettings(hidden_units=32, num_layers=2, normalize=True)),
    "discrete": Case(lambda: env_spec("builtin:GridWorld"),
                     NetworkSettings(hidden_units=32, num_layers=2)),
    "visual": Case(lambda: env_spec("builtin:GridWorld", obs="visual"),
                   NetworkSettings(hidden_units=16, num_layers=1, vis_encode_type="simple")),
    # A board of cells, one pixel each, through ML-Agents' small (match3) encoder.
    "grid": Case(lambda: env_spec("builtin:GridWorld", obs="grid"),
                 NetworkSettings(hidden_units=16, num_layers=1, vis_encode_type="match3")),
    # Two observations, continuous and two discrete branches.
    "hybrid": Case(lambda: BehaviorSpec((ObservationSpec((8,), "platform"),
                                         ObservationSpec((4,), "target")),
                                        ActionSpec(2, (3, 2))),
                   NetworkSettings(hidden_units=32, num_layers=2)),
    "memory": Case(lambda: env_spec("builtin:Hallway"),
                   NetworkSettings(hidden_units=32, num_layers=1,
                                   memory=MemorySettings(sequence_length=4, memory_size=16))),
    # Tiles as a variable-length observation (entity attention, absent rows masked).
    "entities": Case(lambda: env_spec("builtin:Sorter"),
                     NetworkSettings(hidden_units=32, num_layers=2)),
    # A goal signal conditioning the last hidden layer through a hypernetwork.
    "goal": Case(lambda: env_spec("builtin:BasicGoal"),
                 NetworkSettings(hidden_units=16, num_layers=2, goal_conditioning_type="hyper")),
    # All at once: visual + vector, hybrid actions, memory (opset sweep, agent memories).
    "everything": Case(lambda: BehaviorSpec((ObservationSpec((20, 20, 3), "camera",
                                                             ObservationKind.VISUAL),
                                             ObservationSpec((6,), "vector")),
                                            ActionSpec(2, (3, 2))),
                       NetworkSettings(hidden_units=16, num_layers=1, normalize=True,
                                       memory=MemorySettings(sequence_length=4,
                                                             memory_size=8))),
}


def build_policy(case: Case, seed: int = 0) -> Policy:
    """A randomly initialised policy with weights made larger than at initialisation.

    The initial action heads are scaled down (gains 0.1 / 0.2), so all outputs would sit
    near 0 and near-uniform; perturbed weights make actions depend on inputs, means pass
    the clip at +-3 and masks change argmaxes, so parity checks mean something.
    """
    keras.utils.set_random_seed(seed)
    policy = Policy(case.spec(), case.network, seed=seed, jit_compile=False)
    _perturb(policy.actor, policy.spec, case.network.normalize, seed)
    return policy


def build_critic(case: Case, seed: int = 0) -> Critic:
    """The case's critic (value heads for ``STREAMS``; memory as the policy's), perturbed
    like ``build_policy``'s actor."""
    keras.utils.set_random_seed(seed + 1)
    spec, ns = case.spec(), case.network
    critic = Critic(spec.observation_specs, STREAMS, ns.hidden_units, ns.num_layers,
                    ns.normalize, ns.vis_encode_type,
                    memory_size=ns.memory.memory_size if ns.memory else 0,
                    goal_conditioning=ns.goal_conditioning_type)
    _perturb(critic, spec, ns.normalize, seed + 1)
    return critic


def _perturb(model, spec: BehaviorSpec, normalize: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for variable in model.trainable_variables:
        variable.assign(variable.numpy() + rng.normal(0.0, 0.3, variable.shape))
    if normalize:
        obs = [rng.normal(2.0, 3.0, (256, *o.shape)).astype(np.float32)
               for o in spec.observation_specs]
        model.update_normalization(obs)


def random_masks(rng: np.random.Generator, batch: int, branches) -> np.ndarray:
    """[batch, sum(branches)] float32, 1 = allowed, at least one allowed per branch."""
    parts = []
    for size in branches:
        allowed = rng.random((batch, size)) < 0.5
        allowed[np.arange(batch), rng.integers(0, size, batch)] = True
        parts.append(allowed)
    return np.concatenate(parts, axis=1).astype(np.float32) if parts else \
        np.zeros((batch, 0), np.float32)


def random_obs(spec: BehaviorSpec, batch: int, rng: np.random.Generator,
               scale: float = 1.0) -> List[np.ndarray]:
    """Env-layout observations (images HWC in [0, 1], vectors ~ N(0, scale))."""
    out = []
    for o in spec.observation_specs:
        if o.kind == ObservationKind.VISUAL:
            out.append(rng.random((batch, *o.shape), dtype=np.float32))
        elif o.kind == ObservationKind.VARIABLE_LENGTH:
            # Each entity present with probability 0.6; absent ones are zero rows.
            entities = (scale * rng.normal(size=(batch, *o.shape))).astype(np.float32)
            out.append(entities * (rng.random((batch, o.shape[0], 1)) < 0.6))
        else:
            out.append((scale * rng.normal(size=(batch, *o.shape))).astype(np.float32))
    return out


def contract_feeds(spec: BehaviorSpec, obs: List[np.ndarray], masks: Optional[np.ndarray],
                   memory: Optional[np.ndarray]) -> Dict[str, np.ndarray]:
    """Env-layout arrays -> the exported models' inputs (NCHW images, [B, 1, M] memory)."""
    feeds = {}
    for i, (o, s) in enumerate(zip(obs, spec.observation_specs)):
        if s.kind == ObservationKind.VISUAL:
            o = np.ascontiguousarray(o.transpose(0, 3, 1, 2))
        feeds[f"obs_{i}"] = o
    if spec.action_spec.discrete_branches:
        feeds[contract.ACTION_MASKS] = masks
    if memory is not None:
        feeds[contract.RECURRENT_IN] = memory[:, None, :]
    return feeds


def random_inputs(policy: Policy, batch: int, rng: np.random.Generator, scale: float = 1.0):
    """(env-layout obs, masks or None, memory [B, M] or None) for a random batch."""
    spec = policy.spec
    obs = random_obs(spec, batch, rng, scale)
    masks = random_masks(rng, batch, spec.action_spec.discrete_branches) \
        if spec.action_spec.discrete_branches else None
    memory = rng.normal(0.0, 0.5, (batch, policy.memory_size)).astype(np.float32) \
        if policy.memory_size else None
    return obs, masks, memory


def keras_deterministic(policy: Policy, obs, masks, memory) -> Dict[str, np.ndarray]:
    """The Keras actor's most likely actions, under the contract's output names."""
    out = policy.actor.deterministic([tf.constant(o) for o in obs],
                                     None if masks is None else tf.constant(masks),
                                     None if memory is None else tf.constant(memory))
    result = {}
    if policy.spec.action_spec.continuous_size:
        # What the env receives: clip(mean, -3, 3) / 3.
        result[contract.DETERMINISTIC_CONTINUOUS_ACTIONS] = \
            np.clip(out["continuous_action"].numpy(), -3.0, 3.0) / 3.0
    if policy.spec.action_spec.discrete_branches:
        result[contract.DETERMINISTIC_DISCRETE_ACTIONS] = out["discrete_action"].numpy()
    if policy.memory_size:
        result[contract.RECURRENT_OUT] = out["memory"].numpy()[:, None, :]
    return result


def deterministic_names(policy: Policy) -> List[str]:
    return [n for n in (contract.DETERMINISTIC_CONTINUOUS_ACTIONS,
                        contract.DETERMINISTIC_DISCRETE_ACTIONS, contract.RECURRENT_OUT)
            if n in contract.output_names(policy.spec, policy.memory_size)]


class Exported:
    """A policy exported both ways, with a runner for each file."""

    def __init__(self, policy: Policy, critic: Critic, onnx_path: str, savedmodel_dir: str):
        import onnxruntime
        self.policy = policy
        self.critic = critic
        self.onnx_path = onnx_path
        self.savedmodel_dir = savedmodel_dir
        self.session = onnxruntime.InferenceSession(onnx_path,
                                                    providers=["CPUExecutionProvider"])
        self.loaded = tf.saved_model.load(savedmodel_dir)
        self.serving = self.loaded.signatures[contract.SERVING_SIGNATURE]

    def run_onnx(self, feeds, names=None) -> Dict[str, np.ndarray]:
        names = names or [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds)))

    def run_savedmodel(self, feeds, names=None) -> Dict[str, np.ndarray]:
        out = self.serving(**{k: tf.constant(v) for k, v in feeds.items()})
        return {k: v.numpy() for k, v in out.items() if names is None or k in names}
