"""PPOOptimizer: PPO's critic side and update, composed (docs/dev/architecture.md#trainer-base).

    optimizer = PPOOptimizer(policy, trainer_settings)
    values = optimizer.critic_values(trajectories, obs)  # per step, bootstraps, critic memory
    stats = optimizer.update(buffer, step, rng)      # num_epoch passes of shuffled minibatches
    optimizer.actor_weights                          # the actor's new flat weights

It owns what the trainer does not: the reward providers, ``behavioral_cloning``'s module,
the critic network, and the two halves that use the critic:

- ``critic_side`` (``trainers/critic_side.py``, a ``ValueEstimator``): the critic's values
  for the targets, bootstraps, the recurrent replay with per-agent critic memories, the
  ONNX critic runner;
- ``ppo_update`` (``ppo/update.py``, a ``PPOUpdate`` with a ``PPOLoss``): the losses, the
  one compiled update, its guard and schedules.

The critic and the reward providers belong to the optimizer, not the policy
(docs/dev/architecture.md#acting-and-learning): the policy is the actor, what export
needs. With ``network_settings.memory`` the critic has its own LSTM, as ML-Agents'; with
``shared_critic: true`` it is value heads on the policy's body (``networks.SharedCritic``).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from tftrainers.networks import Critic, SharedCritic
from tftrainers.processing import AgentBuffer, Trajectory
from tftrainers.rewards import create_reward_providers, masked_mean  # noqa: F401  (re-exported)
from tftrainers.settings import TrainerSettings
from tftrainers.trainers.behavioral_cloning import BCModule
from tftrainers.trainers.critic_side import CriticSide, CriticValues, ValueEstimator
from tftrainers.trainers.policy import Policy
# The loss terms and batch type, importable from here as before.
from tftrainers.trainers.ppo.update import (APPROX_KL, CLIP_FRACTION,  # noqa: F401
                                            EXPLAINED_VARIANCE, ActorTerms, PPOBatch, PPOLoss,
                                            PPOUpdate, actor_terms, explained_variance,
                                            needs_next_obs, policy_loss, ratio_diagnostics,
                                            value_loss)


def cloning_module(policy: Policy, settings: TrainerSettings) -> Optional[BCModule]:
    """``behavioral_cloning``'s module (its own Adam, demo batches), or None."""
    bc, hp = settings.behavioral_cloning, settings.hyperparameters
    return (BCModule(policy, bc, hp.learning_rate, hp.batch_size, hp.num_epoch,
                     seed=policy.seed) if bc is not None else None)


class ActorCriticOptimizer:
    """What PPO's and MA-POCA's optimizers share once composed: a subclass's ``__init__``
    sets ``reward_providers``, ``bc``, ``streams``, ``critic``, then ``ppo_update`` (a
    ``PPOUpdate`` with its loss) and ``critic_side`` (a ``CriticSide``), in that order (the
    networks' seeded initial weights depend on it)."""

    reward_providers: Dict[str, object]
    ppo_update: PPOUpdate
    critic_side: CriticSide

    def __init__(self, policy: Policy, settings: TrainerSettings):
        self.policy = policy
        self.settings = settings
        self.reward_providers = create_reward_providers(policy.spec, settings.reward_signals,
                                                        seed=policy.seed)
        self.bc = cloning_module(policy, settings)
        self.streams = tuple(self.reward_providers)
        self.actor_weights: Optional[np.ndarray] = None  # set by each update

    # --- the critic side ----------------------------------------------------------------------
    def update_normalization(self, obs: List[np.ndarray]) -> None:
        """Adds observations to the actor's and the critic's normalizers (one call)."""
        self.critic_side.update_normalization(obs)

    def weights_changed(self) -> None:
        """The critic's variables changed outside an update (a restore)."""
        self.critic_side.weights_changed()

    # --- the update ---------------------------------------------------------------------------
    def update(self, buffer: AgentBuffer, step: int, rng: np.random.Generator) -> Dict[str, float]:
        """One update (``PPOUpdate.update``); the new weights go to ``actor_weights`` and
        to the critic side.

        Raises:
            NonFiniteUpdateError: the update was undone (weights and Adam as before it).
        """
        stats, weights = self.ppo_update.update(buffer, step, rng)
        self.actor_weights = weights[:self.ppo_update.actor_size]
        self.critic_side.set_weights(weights)
        return stats

    def start_compile(self) -> None:
        """XLA-compiles the update for the usual buffer in a background thread (when the
        loss's batch shape is known ahead)."""
        self.ppo_update.start_compile()

    def wait_for_compile(self) -> None:
        self.ppo_update.wait_for_compile()

    @property
    def update_fn(self):
        """The compiled update (its ``tracing_count`` says how often it traced)."""
        return self.ppo_update.update_fn

    @property
    def variables(self) -> list:
        """What the update trains: the actor's and the critic's trainable variables."""
        return self.ppo_update.variables

    @property
    def optimizer(self):
        """The fused Adam over ``variables``."""
        return self.ppo_update.optimizer

    def minibatch_index(self, n_steps: int, capacity: int, rng: np.random.Generator):
        return self.ppo_update.minibatch_index(n_steps, capacity, rng)

    def capacity(self, n_steps: int) -> int:
        return self.ppo_update.capacity(n_steps)

    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds of the optimizer: the critic, Adam, the reward providers'
        networks and optimizers."""
        providers = {k: v for p in self.reward_providers.values()
                     for k, v in p.trackables().items()}
        cloning = self.bc.trackables() if self.bc is not None else {}
        return {"critic": self.critic, "optimizer": self.optimizer, **providers, **cloning}


class PPOOptimizer(ActorCriticOptimizer):
    """The reward providers, the critic, its ``ValueEstimator`` and the ``PPOUpdate``.

    Args:
        policy: the behavior's Policy (the actor).
        settings: the behavior's TrainerSettings (hyperparameters, network_settings,
            reward_signals, max_steps).
        jit_compile: XLA-compile the update.
        critic_runtime: "onnxruntime" to compute memoryless critic values there (cheaper
            per update than a TensorFlow call) or "tensorflow".
    """

    def __init__(self, policy: Policy, settings: TrainerSettings, jit_compile: bool = True,
                 critic_runtime: str = "onnxruntime"):
        super().__init__(policy, settings)
        ns = settings.network_settings
        shared = bool(settings.hyperparameters.shared_critic)
        if shared:
            self.critic = SharedCritic(policy.actor.body, self.streams)
        else:
            self.critic = Critic(policy.spec.observation_specs, self.streams, ns.hidden_units,
                                 ns.num_layers, ns.normalize, ns.vis_encode_type,
                                 memory_size=policy.memory_size,
                                 goal_conditioning=ns.goal_conditioning_type,
                                 encoder=ns.encoder)
        loss = PPOLoss(policy, self.critic, self.streams, settings,
                       needs_next_obs(self.reward_providers))
        self.ppo_update = PPOUpdate(policy, self.critic, settings, self.reward_providers,
                                    self.bc, loss, jit_compile=jit_compile)
        self.critic_side: ValueEstimator = ValueEstimator(
            policy, self.critic, self.streams, ns.normalize, shared=shared,
            critic_runtime=critic_runtime)

    def critic_values(self, trajectories: Sequence[Trajectory],
                      obs: Sequence[np.ndarray]) -> CriticValues:
        """V of every step of ``trajectories`` and of their ``next_obs`` (see
        ``ValueEstimator.critic_values``)."""
        return self.critic_side.critic_values(trajectories, obs)

    def values(self, obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic values {stream: [n]} of a batch of observations (memoryless critic)."""
        return self.critic_side.values(obs)
