"""BCOptimizer: the cloning loss and one compiled update step over labelled steps.

    optimizer = BCOptimizer(policy, trainer_settings)
    stats = optimizer.update(dataset, step, rng)    # num_epoch passes of shuffled minibatches
    optimizer.actor_weights                         # the actor's new flat weights
    optimizer.agreement(fresh)                      # before training on fresh labels

The learner does not care where labels come from (a live teacher, a DAgger labeller, a
``.demo`` file): a batch is observations, the allowed-action mask, the teacher's actions
(continuous in env scale), the student's memory at each step and the real-step mask. The
loss is ``cloning_loss`` (cross-entropy per discrete branch over the allowed actions;
``continuous_loss`` for continuous actions). One compiled call runs a whole update, as
PPO's: the data set goes in once, padded to a power-of-two capacity, with a fixed-shape
matrix of minibatch indices (whole sequences with memory); a non-finite update is undone
in the same call (``finite.FiniteGuard``) and refused.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.acting import bucket, pad_rows
from tftrainers.processing import AgentBuffer, BufferKey, obs_key
from tftrainers.settings import TrainerSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.trainers.cloning_loss import (TeacherActions, agreement, cloning_loss,
                                              student_distribution)
from tftrainers.trainers.finite import FiniteGuard, NonFiniteUpdateError, refusal_message
from tftrainers.trainers.policy import Policy, obs_signature
from tftrainers.trainers.schedules import LEARNING_RATE_FLOOR, decayed_value

CLONING_LOSS = "Losses/Cloning Loss"


class BCBatch(NamedTuple):
    """Labelled steps, [B, ...] each (B = sequences * sequence_length)."""

    obs: Tuple[tf.Tensor, ...]
    action_mask: tf.Tensor  # [B, sum(branches)] 1 = allowed
    continuous_action: tf.Tensor  # [B, c] the teacher's env action in [-1, 1]
    discrete_action: tf.Tensor  # [B, branches] int32
    memory: tf.Tensor  # [B, memory_size] the student's memory at each step
    loss_mask: tf.Tensor  # [B] 1 = real step


class BCOptimizer:
    """Adam on the actor and the compiled cloning update.

    Args:
        policy: the student (its actor is trained).
        settings: the behavior's TrainerSettings (``hyperparameters``: BCSettings).
        jit_compile: XLA-compile the update.
    """

    def __init__(self, policy: Policy, settings: TrainerSettings, jit_compile: bool = True):
        self.policy = policy
        self.hp = settings.hyperparameters
        self.max_steps = settings.max_steps
        self.sequence_length = policy.sequence_length
        self.continuous_loss = self.hp.continuous_loss
        self.variables = policy.actor.trainable_variables
        self.optimizer = FusedAdam(self.variables, self.hp.learning_rate, epsilon=1e-8)
        self._actor_size = sum(int(np.prod(v.shape)) for v in policy.variables)
        self.actor_weights: Optional[np.ndarray] = None
        self._guard = FiniteGuard(list(self.variables) + list(self.optimizer.variables))
        spec = policy.spec
        self.spec = spec
        action_spec = spec.action_spec
        self.signature = BCBatch(
            obs=tuple(obs_signature(spec)),
            action_mask=tf.TensorSpec([None, int(sum(action_spec.discrete_branches))],
                                      tf.float32),
            continuous_action=tf.TensorSpec([None, action_spec.continuous_size], tf.float32),
            discrete_action=tf.TensorSpec([None, action_spec.discrete_size], tf.int32),
            memory=tf.TensorSpec([None, policy.memory_size], tf.float32),
            loss_mask=tf.TensorSpec([None], tf.float32))
        self.update_fn = CompiledFunction(self._update_all, [
            self.signature, tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], tf.float32)], jit_compile=jit_compile)
        # Agreement is read on labels the student has not trained on yet: any batch size,
        # so no XLA (it would compile per size).
        self.agreement_fn = CompiledFunction(self._agreement, [self.signature],
                                             jit_compile=False)

    # --- compiled ---------------------------------------------------------------------------
    def _distribution(self, batch: BCBatch):
        seq = self.sequence_length
        memory = batch.memory[::seq] if self.policy.memory_size else None
        return student_distribution(self.policy.actor, batch.obs, batch.action_mask, memory,
                                    seq)

    def _update_all(self, data: BCBatch, index: tf.Tensor, count: tf.Tensor,
                    learning_rate: tf.Tensor):
        """Gradient steps on the minibatches ``index[:count]`` ([rows, batch] step indices);
        returns the mean loss, the actor's new values (flat) and whether all was finite."""
        saved = self._guard.snapshot()
        self.optimizer.learning_rate.assign(learning_rate)

        def body(i, total):
            minibatch = tf.nest.map_structure(lambda x: tf.gather(x, index[i]), data)
            with tf.GradientTape() as tape:
                loss = cloning_loss(self._distribution(minibatch),
                                    TeacherActions(minibatch.continuous_action,
                                                   minibatch.discrete_action),
                                    minibatch.loss_mask, self.continuous_loss)
            self.optimizer.apply_gradients(zip(tape.gradient(loss, self.variables),
                                               self.variables))
            return i + 1, total + loss

        _, total = tf.while_loop(lambda i, _: i < count, body, (tf.constant(0),
                                                                 tf.constant(0.0)))
        loss = total / tf.cast(tf.maximum(count, 1), tf.float32)
        finite = self._guard.restore_unless_finite(saved, [loss])
        return loss, self.optimizer.flat_values(self.policy.variables), finite

    def _agreement(self, batch: BCBatch):
        student = self._distribution(batch)
        return agreement(student, TeacherActions(batch.continuous_action,
                                                 batch.discrete_action), batch.loss_mask)

    # --- Python side ------------------------------------------------------------------------
    def learning_rate(self, step: int) -> float:
        return decayed_value(self.hp.learning_rate_schedule, self.hp.learning_rate,
                             LEARNING_RATE_FLOOR, step, self.max_steps)

    def make_batch(self, data: AgentBuffer, capacity: Optional[int] = None) -> BCBatch:
        """``data``'s fields as a BCBatch, padded with zeros to ``capacity`` steps."""
        capacity = len(data) if capacity is None else capacity

        def field(key, value=0.0):
            return pad_rows(data[key], capacity, value)
        memory = (field(BufferKey.MEMORY) if self.policy.memory_size
                  else np.zeros((capacity, 0), np.float32))
        return BCBatch(
            obs=tuple(field(obs_key(i)) for i in range(len(self.spec.observation_specs))),
            action_mask=field(BufferKey.ACTION_MASK, 1.0),
            continuous_action=field(BufferKey.CONTINUOUS_ACTION),
            discrete_action=field(BufferKey.DISCRETE_ACTION),
            memory=memory, loss_mask=field(BufferKey.MASK))

    def _sequences_per_batch(self) -> int:
        return max(self.hp.batch_size // self.sequence_length, 1)

    def minibatch_index(self, n_steps: int, rng: np.random.Generator) -> Tuple[np.ndarray, int]:
        """``num_epoch`` shuffled passes of at most ``batches_per_epoch`` whole-sequence
        minibatches each; [rows, batch] int32 (rows a power of two) and how many to use."""
        seq, per_batch = self.sequence_length, self._sequences_per_batch()
        sequences = n_steps // seq
        batches = max(sequences // per_batch, 1)
        if self.hp.batches_per_epoch:
            batches = min(batches, self.hp.batches_per_epoch)
        count = self.hp.num_epoch * batches
        # A fixed number of rows once batches_per_epoch caps them: XLA compiles once.
        rows = self.hp.num_epoch * (self.hp.batches_per_epoch or batches)
        index = np.zeros((bucket(rows), per_batch * seq), np.int32)
        offsets = np.arange(seq)
        for epoch in range(self.hp.num_epoch):
            # Without replacement within a pass; a data set smaller than one minibatch is
            # drawn with repeats so that every step has the same weight on average.
            order = (rng.permutation(sequences)[:batches * per_batch]
                     if sequences >= batches * per_batch
                     else rng.integers(0, sequences, batches * per_batch))
            steps = (order.reshape(batches, per_batch, 1) * seq + offsets).reshape(batches, -1)
            index[epoch * batches:(epoch + 1) * batches] = steps
        return index, count

    def capacity(self, n_steps: int) -> int:
        """Rows the compiled update gets for ``n_steps`` (a power of two, whole sequences):
        XLA compiles once per capacity."""
        capacity = bucket(n_steps)
        return capacity + -capacity % self.sequence_length

    def update(self, data: AgentBuffer, step: int, rng: np.random.Generator,
               capacity: Optional[int] = None) -> Dict[str, float]:
        """One update on ``data`` (AgentBuffer with obs, ACTION_MASK, the teacher's actions,
        MEMORY when recurrent, MASK), padded to ``capacity`` rows (default: the bucket of
        its length; a trainer whose data grows passes its largest, to compile once).

        Raises:
            NonFiniteUpdateError: the loss or a new weight was NaN or inf (undone).
        """
        learning_rate = self.learning_rate(step)
        capacity = max(capacity or 0, self.capacity(len(data)))
        index, count = self.minibatch_index(len(data), rng)
        loss, weights, finite = self.update_fn(self.make_batch(data, capacity), index, count,
                                               learning_rate)
        stats = {CLONING_LOSS: float(loss)}
        if not bool(finite):
            raise NonFiniteUpdateError(refusal_message(step, stats))
        self.actor_weights = weights.numpy()[:self._actor_size]
        stats["Policy/Learning Rate"] = learning_rate
        return stats

    def agreement(self, data: AgentBuffer) -> Tuple[float, float]:
        """(share of steps where the student's deterministic discrete action equals the
        teacher's in every branch, mean absolute difference of the continuous actions) on
        ``data``."""
        same, difference = self.agreement_fn(self.make_batch(data))
        return float(same), float(difference)

    def trackables(self) -> Dict[str, object]:
        return {"optimizer": self.optimizer}
