"""Behavioral cloning losses: the student's distribution against a teacher's actions.

    from tftrainers.trainers.cloning_loss import cloning_loss
    parts = student_distribution(actor, obs, masks, memory, sequence_length)
    loss = cloning_loss(parts, teacher, loss_mask, continuous="log_likelihood")

Used by ``trainer_type: bc`` and by the ``behavioral_cloning`` auxiliary step of PPO/POCA.
Teacher actions are what the env receives: continuous in [-1, 1] (a heuristic's action,
an exported model's ``continuous_actions``, a ``.demo`` file's), discrete indices.

Discrete: cross-entropy per branch, ``-log softmax(masked logits)[teacher action]``, over
the allowed actions only (masked logits as the export: ``logits * m - 1e8 (1 - m)``);
a label that is itself masked (a teacher that broke the rules, a demo's shifted pairing)
is left out of its branch's mean instead of costing ~1e8. Branches are averaged.

Continuous: the policy acts with ``clip(x, -3, 3) / 3`` of a Gaussian sample x, so a
teacher action a in [-1, 1] is the pre-clip action ``3 a``. Three losses (``CONTINUOUS``):
    mse             mean over dims of (mean - 3a)^2: the mean only; the log std stays as
                    initialised (exp(0) = 1: the student acts with noise 1/3 of the range)
    log_likelihood  -log N(3a | mean, exp(log_std)^2): mean and spread, so the student's
                    own sampled actions are as tight as the teacher's labels allow
    sampled_mse     (mean + exp(log_std) eps - 3a)^2 with eps ~ N(0, 1): ML-Agents'
                    BCModule (MSE of the sampled action), which shrinks the spread too
The README's BC section says which is the default and the measurement behind it.
Both kinds combined (hybrid actions) add up.

A squashed student (SAC's actor, ``tanh_squash``) acts with ``tanh(x)``: there ``mse`` and
``sampled_mse`` compare ``tanh`` of the mean or of the sample with the teacher's action in
the env's scale, and ``log_likelihood`` scores ``atanh(a)`` (a clipped to +-0.999, so that a
teacher at the bound has a finite target) under the Gaussian before the squash.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

import tensorflow as tf

from tftrainers.networks.action_model import apply_mask, gaussian_log_prob

#: Continuous losses ``continuous_cloning_loss`` knows.
CONTINUOUS = ("log_likelihood", "mse", "sampled_mse")
#: The policy's continuous actions are ``clip(x, -3, 3) / 3`` of the raw x.
ACTION_SCALE = 3.0
#: A squashed student's log-likelihood target is atanh of the teacher's action within these.
SQUASH_BOUND = 0.999


class StudentDistribution(NamedTuple):
    """The student's action distribution at a batch of steps.

    mean, log_std: [B, c] raw (pre-clip) Gaussian; logits: one [B, branch] per branch
    (not masked yet); masks: [B, sum(branches)] float32, 1 = allowed; squashed: the
    student acts with tanh of the Gaussian (SAC), not ``clip(x, -3, 3) / 3``.
    """

    mean: tf.Tensor
    log_std: tf.Tensor
    logits: Sequence[tf.Tensor]
    masks: tf.Tensor
    squashed: bool = False


class TeacherActions(NamedTuple):
    """The teacher's actions: continuous [B, c] float32 in [-1, 1] (env actions), discrete
    [B, branches] int32."""

    continuous: tf.Tensor
    discrete: tf.Tensor


def _masked_mean(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    return tf.reduce_sum(x * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def discrete_cloning_loss(logits: Sequence[tf.Tensor], masks: Optional[tf.Tensor],
                          actions: tf.Tensor, loss_mask: tf.Tensor) -> tf.Tensor:
    """Cross-entropy of the teacher's discrete actions, per branch, averaged.

    Args:
        logits: per branch [B, branch_size] raw logits.
        masks: [B, sum(branches)] float32, 1 = allowed; None allows every action.
        actions: [B, branches] int teacher actions.
        loss_mask: [B] float32, 1 = a real step (0: padding).

    Returns:
        Scalar: mean over branches of the masked mean over steps of -log p(action).
    """
    sizes = [int(l.shape[-1]) for l in logits]
    branch_masks = (tf.split(tf.cast(masks, logits[0].dtype), sizes, axis=-1)
                    if masks is not None else [None] * len(logits))
    actions = tf.cast(actions, tf.int32)
    losses = []
    for i, (branch_logits, mask) in enumerate(zip(logits, branch_masks)):
        one_hot = tf.one_hot(actions[:, i], sizes[i], dtype=branch_logits.dtype)
        weight = loss_mask
        if mask is not None:
            branch_logits = apply_mask(branch_logits, mask)
            # A masked label is left out: the student cannot (and must not) take it.
            weight = weight * tf.reduce_sum(one_hot * mask, axis=-1)
        log_p = tf.reduce_sum(one_hot * tf.nn.log_softmax(branch_logits, axis=-1), axis=-1)
        losses.append(_masked_mean(-log_p, weight))
    return tf.reduce_mean(tf.stack(losses))


def continuous_cloning_loss(mean: tf.Tensor, log_std: tf.Tensor, actions: tf.Tensor,
                            loss_mask: tf.Tensor, kind: str = "log_likelihood",
                            noise: Optional[tf.Tensor] = None,
                            squashed: bool = False) -> tf.Tensor:
    """The continuous cloning loss ``kind`` (see the module docstring).

    Args:
        mean, log_std: [B, c] the student's raw Gaussian.
        actions: [B, c] teacher env actions in [-1, 1].
        loss_mask: [B] float32, 1 = a real step.
        kind: one of ``CONTINUOUS``.
        noise: [B, c] standard normal draws for ``sampled_mse`` (drawn here if None).
        squashed: the student acts with ``tanh`` of the Gaussian (module docstring).

    Returns:
        Scalar, averaged over dimensions and real steps.
    """
    actions = tf.cast(actions, mean.dtype)
    if squashed:  # compared in the env's scale; the likelihood of atanh(a) before the tanh
        target, acted = actions, tf.tanh
        raw_target = tf.atanh(tf.clip_by_value(actions, -SQUASH_BOUND, SQUASH_BOUND))
    else:  # compared before the clip: the teacher's a is the raw 3a
        target = raw_target = ACTION_SCALE * actions

        def acted(x):
            return x
    if kind == "mse":
        per_step = tf.reduce_mean(tf.square(acted(mean) - target), axis=-1)
    elif kind == "log_likelihood":
        per_step = -tf.reduce_mean(gaussian_log_prob(raw_target, mean, log_std), axis=-1)
    elif kind == "sampled_mse":
        if noise is None:
            noise = tf.random.normal(tf.shape(mean), dtype=mean.dtype)
        sample = mean + tf.exp(log_std) * noise
        per_step = tf.reduce_mean(tf.square(acted(sample) - target), axis=-1)
    else:
        raise ValueError(f"continuous cloning loss '{kind}': allowed {', '.join(CONTINUOUS)}")
    return _masked_mean(per_step, loss_mask)


def cloning_loss(student: StudentDistribution, teacher: TeacherActions, loss_mask: tf.Tensor,
                 continuous: str = "log_likelihood",
                 noise: Optional[tf.Tensor] = None) -> tf.Tensor:
    """The whole cloning loss: continuous (if any) + discrete (if any)."""
    parts: List[tf.Tensor] = []
    if student.mean.shape[-1]:
        parts.append(continuous_cloning_loss(student.mean, student.log_std, teacher.continuous,
                                             loss_mask, continuous, noise, student.squashed))
    if len(student.logits):
        parts.append(discrete_cloning_loss(student.logits, student.masks, teacher.discrete,
                                           loss_mask))
    if not parts:
        return tf.constant(0.0)
    return tf.add_n(parts)


def student_distribution(actor, obs: Sequence[tf.Tensor], masks: tf.Tensor,
                         memory: Optional[tf.Tensor] = None,
                         sequence_length: int = 1) -> StudentDistribution:
    """The distribution of ``actor`` (a ``networks.PolicyNetwork``) at a batch of steps.

    Args:
        obs: per observation spec [N * L, *shape]; memory: [N, memory_size] at each
            sequence's first step (None without memory); sequence_length: L.
    """
    encoding, _ = actor.body(list(obs), memory=memory, sequence_length=sequence_length)
    model = actor.action_model
    if model.continuous_size:  # [B, c] each; SAC's log std is a head of the encoding
        mean, log_std = model._gaussian(encoding)
    else:
        mean = log_std = tf.zeros(tf.stack([tf.shape(encoding)[0], 0]), encoding.dtype)
    logits = [head(encoding) for head in model.branch_heads]
    return StudentDistribution(mean, log_std, logits, masks,
                               actor.tanh_squash)


def agreement(student: StudentDistribution, teacher: TeacherActions,
              loss_mask: tf.Tensor):
    """How closely the student's deterministic action follows the teacher's.

    Returns:
        (discrete, continuous): the share of real steps where the argmax of the masked
        logits equals the teacher's action in every branch, and the mean absolute
        difference between ``clip(mean, -3, 3) / 3`` (a squashed student: ``tanh(mean)``)
        and the teacher's env action (over dims and steps); 0 for a kind the behavior
        does not have.
    """
    discrete = tf.constant(0.0)
    if len(student.logits):
        sizes = [int(l.shape[-1]) for l in student.logits]
        masks = tf.split(student.masks, sizes, axis=-1)
        chosen = tf.stack([tf.argmax(apply_mask(l, m), axis=-1, output_type=tf.int32)
                           for l, m in zip(student.logits, masks)], axis=-1)
        same = tf.reduce_all(tf.equal(chosen, tf.cast(teacher.discrete, tf.int32)), axis=-1)
        discrete = _masked_mean(tf.cast(same, tf.float32), loss_mask)
    continuous = tf.constant(0.0)
    if student.mean.shape[-1]:
        acted = (tf.tanh(student.mean) if student.squashed else
                 tf.clip_by_value(student.mean, -ACTION_SCALE, ACTION_SCALE) / ACTION_SCALE)
        difference = tf.reduce_mean(tf.abs(acted - teacher.continuous), axis=-1)
        continuous = _masked_mean(difference, loss_mask)
    return discrete, continuous
