"""Behavioral cloning inside PPO and SAC (``behavioral_cloning:``), as ML-Agents' BCModule.

    bc = BCModule(policy, settings.behavioral_cloning, hyperparameters, seed)
    plan = bc.plan(step, rng)              # Python: which demo rows, how many minibatches, lr
    ...inside the optimizer's compiled update, after the PPO minibatches:
    bc.optimizer.learning_rate.assign(plan.learning_rate)
    loss = bc.update_step(plan.index[i])   # one gradient step on demo minibatch i < count

After each PPO update (SAC: after the gradient steps due when trajectories arrive) the
actor takes ``num_epoch`` (default: the trainer's; SAC has none: 3, as ML-Agents) passes of
shuffled minibatches of ``batch_size`` (default: the trainer's) demonstration steps, at
most ``samples_per_update`` steps per pass when that is > 0, with its own Adam. Its
learning rate is the policy's initial learning rate x ``strength``, decayed linearly to
1e-10 over ``steps`` (0: constant); once there, cloning stops (no more minibatches).
The loss is ML-Agents' (``cloning_loss.cloning_loss`` with ``sampled_mse``): the squared
error of the sampled continuous action against the demonstration's (pre-clip scale; SAC's
squashed policy: tanh of the sample against the demonstration's env action), plus
the cross-entropy of each discrete branch's masked policy against the demonstration's
choice, averaged over branches. Stat: ``Losses/Pretraining Loss``.

With memory, the demonstrations are cut into sequences of ``sequence_length`` steps within
each episode (the last one padded, a mask leaving the padding out), each starting from a
zero state, as ML-Agents' BC does.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.processing.demonstrations import load_demonstrations
from tftrainers.settings import BehavioralCloningSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.draws import Draws
from tftrainers.trainers.cloning_loss import (TeacherActions, cloning_loss,
                                              student_distribution)
from tftrainers.trainers.policy import Policy
from tftrainers.trainers.schedules import LEARNING_RATE_FLOOR, decayed_value

STAT = "Losses/Pretraining Loss"


class BCPlan(NamedTuple):
    """One update's cloning: ``index[:count]`` are the demo rows of each minibatch
    ([rows, steps] int32, rows fixed for a demo set so the update compiles once)."""

    index: np.ndarray
    count: int
    learning_rate: float


def cloning_learning_rate(initial: float, steps: int, step: int) -> float:
    """``initial`` decayed linearly to 1e-10 at ``steps`` (constant when ``steps`` is 0)."""
    return decayed_value("linear" if steps > 0 else "constant", initial, LEARNING_RATE_FLOOR,
                         step, steps)


def sequence_rows(episode: np.ndarray, sequence_length: int) -> Tuple[np.ndarray, np.ndarray]:
    """Rows of the demo arrays cut into sequences that never cross an episode start.

    Args:
        episode: [N] episode number of each demo step (contiguous runs).

    Returns:
        rows [S * sequence_length] int64 (padding repeats a real row) and mask [S *
        sequence_length] float32 (1 = real step).
    """
    n = len(episode)
    if sequence_length == 1:
        return np.arange(n), np.ones(n, np.float32)
    starts = np.flatnonzero(np.r_[True, episode[1:] != episode[:-1]])
    lengths = np.diff(np.r_[starts, n])
    padded = -(-lengths // sequence_length) * sequence_length
    offsets = np.arange(padded.sum()) - np.repeat(np.cumsum(padded) - padded, padded)
    real = offsets < np.repeat(lengths, padded)
    rows = np.repeat(starts, padded) + np.minimum(offsets, np.repeat(lengths - 1, padded))
    return rows, real.astype(np.float32)


class BCModule:
    """Demonstrations, an Adam on the actor, and the cloning step.

    Args:
        policy: the behavior's Policy (its actor is trained).
        settings: the ``behavioral_cloning`` section.
        learning_rate, batch_size, num_epoch: the trainer's (the defaults; the rate is the
            initial one, before any schedule).
        seed: of the sampling noise of continuous actions.

    Raises:
        DemonstrationError: the demonstrations cannot be read or do not fit the behavior.
    """

    def __init__(self, policy: Policy, settings: BehavioralCloningSettings,
                 learning_rate: float, batch_size: int, num_epoch: int, seed: int = 0):
        self.policy = policy
        self.settings = settings
        spec = policy.spec
        self.demos = demos = load_demonstrations(settings.demo_path, spec)
        if not len(demos):
            raise ValueError(f"{settings.demo_path}: no demonstration steps to clone")
        self.initial_learning_rate = float(learning_rate) * float(settings.strength)
        self.steps = int(settings.steps)
        self.batch_size = int(settings.batch_size or batch_size)
        self.num_epoch = int(settings.num_epoch or num_epoch)
        self.sequence_length = seq = policy.sequence_length
        rows, mask = sequence_rows(demos.episode, seq)
        self.n_sequences = len(rows) // seq
        # Sequences per minibatch: batch_size steps, no more than the demonstrations hold.
        self.per_batch = max(min(self.batch_size, len(rows)) // seq, 1)
        batches = self.n_sequences // self.per_batch
        if settings.samples_per_update > 0:
            batches = min(batches, max(settings.samples_per_update // (self.per_batch * seq), 1))
        self.batches_per_epoch = batches
        self._data = tuple(tf.Variable(x, trainable=False) for x in (
            *(o[rows] for o in demos.obs),
            np.asarray(demos.continuous_actions, np.float32)[rows],
            np.asarray(demos.discrete_actions, np.int32)[rows],
            np.asarray(demos.action_mask, np.float32)[rows],
            mask))
        self.variables = policy.actor.trainable_variables
        self.optimizer = FusedAdam(self.variables, self.initial_learning_rate, epsilon=1e-8,
                                   name="bc_adam")
        self.draws = Draws(seed, name="bc_draws")

    @property
    def index_shape(self) -> Tuple[int, int]:
        """[rows, steps per minibatch] of ``plan``'s index."""
        return self.num_epoch * self.batches_per_epoch, self.per_batch * self.sequence_length

    def learning_rate(self, step: int) -> float:
        return cloning_learning_rate(self.initial_learning_rate, self.steps, step)

    def plan(self, step: int, rng: np.random.Generator) -> BCPlan:
        """The minibatches of the cloning after the update at ``step``: ``num_epoch``
        shuffled passes of whole sequences; none once the rate has decayed to its floor."""
        learning_rate = self.learning_rate(step)
        index = np.zeros(self.index_shape, np.int32)
        if learning_rate <= LEARNING_RATE_FLOOR:
            return BCPlan(index, 0, learning_rate)
        seq, per_batch, batches = self.sequence_length, self.per_batch, self.batches_per_epoch
        offsets = np.arange(seq)
        for epoch in range(self.num_epoch):
            order = rng.permutation(self.n_sequences)[:batches * per_batch]
            steps = (order.reshape(batches, per_batch, 1) * seq + offsets).reshape(batches, -1)
            index[epoch * batches:(epoch + 1) * batches] = steps
        return BCPlan(index, len(index), learning_rate)

    # --- graph -------------------------------------------------------------------------
    def update_step(self, rows: tf.Tensor) -> tf.Tensor:
        """One Adam step of the actor on the demo steps ``rows`` [B]; returns the loss."""
        parts = [tf.gather(x, rows) for x in self._data]
        n = len(self.policy.spec.observation_specs)
        obs, (continuous, discrete, masks, mask) = parts[:n], parts[n:]
        actor = self.policy.actor
        size = tf.shape(rows)[0]
        memory = (tf.zeros([size // self.sequence_length, actor.memory_size])
                  if actor.memory_size else None)
        noise = self.draws.normal([size, actor.action_model.continuous_size])
        with tf.GradientTape() as tape:
            student = student_distribution(actor, obs, masks, memory, self.sequence_length)
            loss = cloning_loss(student, TeacherActions(continuous, discrete), mask,
                                continuous="sampled_mse", noise=noise)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.variables), self.variables))
        return loss

    def trackables(self) -> Dict[str, object]:
        return {"bc_optimizer": self.optimizer, "bc_draws": self.draws}


__all__: List[str] = ["BCModule", "BCPlan", "STAT", "cloning_learning_rate", "sequence_rows"]
