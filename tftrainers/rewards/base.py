"""The reward-provider interface: one reward stream each, with its own model and optimizer.

    provider = create_reward_provider("curiosity", spec, settings.reward_signals["curiosity"])
    rewards = provider.evaluate(experience)          # [n] raw reward per step, before strength
    ...inside the trainer's compiled update, once per minibatch:
    stats = provider.update_step(batch)              # {stat name: scalar tensor}

The trainer multiplies ``evaluate``'s result by ``strength``, keeps one value head and one
GAE per provider (discount ``gamma``; ``ignore_done`` streams bootstrap through episode
ends), and checkpoints ``trackables()``. ``update_step`` runs inside the algorithm's one
compiled update call (a graph function), so it must be pure TensorFlow.
"""
from __future__ import annotations

import abc
from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.envs import BehaviorSpec
from tftrainers.networks.action_model import ActionModel
from tftrainers.settings import RewardSignalSettings


class RewardBatch(NamedTuple):
    """Steps to score or train on, [B, ...] each (NumPy or tensors)."""

    obs: Tuple  # per observation spec [B, *shape] float32: what the action was chosen from
    next_obs: Tuple  # per observation spec [B, *shape] float32: what followed the action
    continuous_action: object  # [B, c] float32 raw samples (before ``env_actions``)
    discrete_action: object  # [B, branches] int32
    environment_reward: object  # [B] float32
    done: object  # [B] float32, 1 on the last step of an episode that really ended
    mask: object  # [B] float32, 1 = real step, 0 = padding


def masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Mean of ``x`` [B] over the steps where ``mask`` [B] is 1 (0 when there are none)."""
    return tf.reduce_sum(x * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def reward_signature(spec: BehaviorSpec) -> RewardBatch:
    """Input signature of a RewardBatch of ``spec``'s observations and actions."""
    obs = tuple(tf.TensorSpec([None, *o.shape], tf.float32) for o in spec.observation_specs)
    a = spec.action_spec
    return RewardBatch(obs=obs, next_obs=obs,
                       continuous_action=tf.TensorSpec([None, a.continuous_size], tf.float32),
                       discrete_action=tf.TensorSpec([None, a.discrete_size], tf.int32),
                       environment_reward=tf.TensorSpec([None], tf.float32),
                       done=tf.TensorSpec([None], tf.float32),
                       mask=tf.TensorSpec([None], tf.float32))


class RewardProvider(abc.ABC):
    """A reward stream. Subclasses set ``stat_name`` and implement ``evaluate``; learned
    signals also override ``update_step``, ``update_stat_names`` and ``trackables``."""

    #: the stream's name in stats: ``Policy/<stat_name> Reward``, ``... Value Estimate``.
    stat_name: str = ""
    #: bootstrap through episode ends (novelty does not stop when an episode does).
    ignore_done: bool = False
    #: ``update_step`` reads ``next_obs`` (the trainer only ships it when someone does).
    needs_next_obs: bool = False
    #: names of the stats ``update_step`` returns, in order.
    update_stat_names: Tuple[str, ...] = ()

    def __init__(self, name: str, spec: BehaviorSpec, settings: RewardSignalSettings,
                 seed: int = 0, env_actions: Optional[Callable] = None):
        self.name = name
        # How the trainer's raw continuous actions become the env's [-1, 1] ones (what
        # demonstrations hold): PPO's clip(x, -3, 3) / 3 by default, SAC's tanh.
        self.env_actions = env_actions or ActionModel.env_actions
        self.seed = int(seed)  # of the provider's own random draws, if it makes any
        self.spec = spec
        self.settings = settings
        self.strength = float(settings.strength)
        self.gamma = float(settings.gamma)

    @abc.abstractmethod
    def evaluate(self, batch: RewardBatch) -> np.ndarray:
        """The reward of each step, [B] float32, before ``strength`` is applied."""

    def update_step(self, batch: RewardBatch) -> Dict[str, tf.Tensor]:
        """One gradient step on a minibatch of tensors (graph code); stats by name."""
        return {}

    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds of this provider (networks, optimizer, counters)."""
        return {}

    def update_normalization(self, next_obs: Sequence[np.ndarray]) -> None:
        """Adds a batch of observations to the provider's running normalizers, if any."""


class ExtrinsicRewardProvider(RewardProvider):
    """The environment's reward."""

    stat_name = "Extrinsic"

    def evaluate(self, batch: RewardBatch) -> np.ndarray:
        return np.asarray(batch.environment_reward, np.float32)
