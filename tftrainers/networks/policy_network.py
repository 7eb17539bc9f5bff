"""The policy network: ``NetworkBody`` + ``ActionModel`` for one behavior.

Usage (one compiled call per env step for all agents of a behavior)::

    policy = PolicyNetwork(behavior_spec, hidden_units=128, num_layers=2, normalize=True,
                           vis_encode_type="simple", memory_size=0)
    masks = allowed_action_mask(decision_steps.action_mask, spec.action_spec.discrete_branches,
                                len(decision_steps))
    out = policy(decision_steps.obs, masks, memory)     # sampled actions
    env.set_actions(name, ActionTuple(out["env_continuous_action"].numpy(),
                                      out["discrete_action"].numpy()))
    # store out["continuous_action"] (raw), out["log_probs_*"], out["memory"] in the buffer

    # PPO update, for stored actions (memory: stored memory at each sequence start)
    evaluation = policy.evaluate(obs, masks, Actions(cont, disc), memory, sequence_length)

Every variable (weights, log std, normalizer statistics) is created in the constructor
and tracked for ``tf.train.Checkpoint``.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import keras
import tensorflow as tf

from tftrainers.envs.base import BehaviorSpec
from tftrainers.networks.action_model import (ActionEvaluation, ActionModel, ActionNoise, Actions,
                                              SquashedActionModel)
from tftrainers.networks.body import NetworkBody


class PolicyNetwork(keras.Model):
    """Maps observations (and memory) to actions for one behavior.

    Args:
        behavior_spec: observation specs and action spec of the behavior.
        hidden_units, num_layers, normalize, vis_encode_type, memory_size,
            goal_conditioning, encoder: ML-Agents ``network_settings`` (see ``NetworkBody``).
        tanh_squash: SAC's action model (``SquashedActionModel``: state-dependent log std,
            env actions ``tanh`` of the sample) instead of PPO's.
    """

    def __init__(self, behavior_spec: BehaviorSpec, hidden_units: int = 128, num_layers: int = 2,
                 normalize: bool = False, vis_encode_type: str = "simple", memory_size: int = 0,
                 encoder=None, name: str | None = "policy", goal_conditioning: str = "hyper",
                 tanh_squash: bool = False, **kwargs):
        super().__init__(name=name, **kwargs)
        self.behavior_spec = behavior_spec
        self.body = NetworkBody(behavior_spec.observation_specs, hidden_units, num_layers,
                                normalize, vis_encode_type, memory_size, name="body",
                                goal_conditioning=goal_conditioning, encoder=encoder)
        model = SquashedActionModel if tanh_squash else ActionModel
        self.tanh_squash = bool(tanh_squash)
        self.action_model = model(self.body.encoding_size, behavior_spec.action_spec,
                                  name="action_model")
        self.built = True

    @property
    def memory_size(self) -> int:
        return self.body.memory_size

    def _memory_out(self, new_memory: Optional[tf.Tensor], encoding: tf.Tensor) -> tf.Tensor:
        if new_memory is not None:
            return new_memory
        # [B, 0] keeps the output structure the same with and without memory.
        return tf.zeros(tf.stack([tf.shape(encoding)[0], 0]), encoding.dtype)

    def call(self, obs: Sequence[tf.Tensor], masks: Optional[tf.Tensor] = None,
             memory: Optional[tf.Tensor] = None,
             noise: Optional[ActionNoise] = None) -> Dict[str, tf.Tensor]:
        """Samples actions for one step.

        Args:
            obs: one [B, *shape] float32 per observation spec.
            masks: [B, sum(discrete_branches)] float32, 1 = allowed; None allows all.
            memory: [B, memory_size] float32 or None (zeros).
            noise: ActionNoise from outside the graph, or None to sample in the graph.

        Returns:
            dict with
              continuous_action [B, c] raw Gaussian sample (what PPO stores),
              env_continuous_action [B, c] = clip(raw, -3, 3) / 3, or tanh(raw) with
                  tanh_squash (what the env gets),
              discrete_action [B, branches] int32,
              log_probs_continuous [B, c], log_probs_discrete [B, branches],
              entropy [B] (mean over continuous dims + sum over branches),
              memory [B, memory_size] (the new memory; [B, 0] without memory).
        """
        encoding, new_memory = self.body(obs, memory=memory)
        sample = self.action_model.sample(encoding, masks, noise)
        return {
            "continuous_action": sample.continuous,
            "env_continuous_action": self.action_model.env_actions(sample.continuous),
            "discrete_action": sample.discrete,
            "log_probs_continuous": sample.log_probs_continuous,
            "log_probs_discrete": sample.log_probs_discrete,
            "entropy": sample.entropy,
            "memory": self._memory_out(new_memory, encoding),
        }

    def deterministic(self, obs: Sequence[tf.Tensor], masks: Optional[tf.Tensor] = None,
                      memory: Optional[tf.Tensor] = None) -> Dict[str, tf.Tensor]:
        """The most likely actions for one step (no sampling).

        Returns:
            dict with continuous_action [B, c] (Gaussian mean, raw), env_continuous_action
            [B, c], discrete_action [B, branches] int32 (argmax of masked logits),
            memory [B, memory_size] ([B, 0] without memory).
        """
        encoding, new_memory = self.body(obs, memory=memory)
        actions = self.action_model.deterministic(encoding, masks)
        return {
            "continuous_action": actions.continuous,
            "env_continuous_action": self.action_model.env_actions(actions.continuous),
            "discrete_action": actions.discrete,
            "memory": self._memory_out(new_memory, encoding),
        }

    def evaluate(self, obs: Sequence[tf.Tensor], masks: Optional[tf.Tensor], actions: Actions,
                 memory: Optional[tf.Tensor] = None,
                 sequence_length: int = 1) -> ActionEvaluation:
        """Log-probabilities and entropy of stored actions, differentiable (PPO update).

        Args:
            obs: one [N * L, *shape] float32 per spec: N sequences of L = sequence_length.
            masks: [N * L, sum(branches)] float32, 1 = allowed, or None.
            actions: Actions(continuous [N * L, c] raw, discrete [N * L, branches] int).
            memory: [N, memory_size], the stored memory at the first step of each sequence.
            sequence_length: Python int L (1 without memory).

        Returns:
            ActionEvaluation(log_probs_continuous [N*L, c], log_probs_discrete [N*L, branches],
            entropy [N*L]).
        """
        encoding, _ = self.body(obs, memory=memory, sequence_length=sequence_length)
        return self.action_model.evaluate(encoding, masks, actions)

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """See ``NetworkBody.update_normalization``."""
        self.body.update_normalization(obs)
