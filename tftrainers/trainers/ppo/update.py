"""The PPO update: the loss terms, one compiled call per update, its guard and schedules.

    update = PPOUpdate(policy, settings, critic, reward_providers, bc, PPOLoss(...))
    stats, weights = update.update(buffer, step, rng)   # num_epoch passes, one call
    weights[:actor_size]                                # the actor's new flat weights

Loss terms, as in ML-Agents (torch ``ppo/optimizer_torch.py``):
    ratio_d   = exp(log pi(a_d|s) - log pi_old(a_d|s))    per action dimension / branch d
    L_policy  = -masked_mean_t( mean_d min(ratio_d A_t, clip(ratio_d, 1-eps, 1+eps) A_t) )
    L_value   = mean_streams masked_mean_t( max((G_t - V_t)^2, (G_t - V_clip_t)^2) ),
                V_clip = V_old + clip(V - V_old, -eps, eps)
    loss      = L_policy + 0.5 L_value - beta * masked_mean_t(entropy_t)
``masked_mean_t`` averages over real steps (sequence padding has mask 0).

Diagnostics (not in the loss; CleanRL's and Stable-Baselines3's), computed in the same
compiled call: ``Policy/Approx KL`` and ``Policy/Clip Fraction`` on each minibatch before
its gradient step, averaged over the update's minibatches (``ratio_diagnostics``), and
``Losses/Explained Variance`` of the returns by the values the buffer was collected with
(``explained_variance``).

``PPOUpdate`` is what PPO and MA-POCA share: the fused Adam over actor and critic, the
schedules, the minibatch index, the compiled loop (the buffer goes in once, padded to a
power-of-two capacity, so XLA compiles once per capacity rather than per buffer length,
with a fixed-shape matrix of minibatch indices: ``num_epoch`` shuffled passes, whole
sequences for recurrent policies), learned reward signals (curiosity, RND, GAIL) stepping
on each minibatch inside the same loop as ML-Agents interleaves them, behavioral cloning's
steps after them, and the non-finite guard (``finite.FiniteGuard``: an update whose losses
or new weights are not finite is undone inside the call and refused with
``NonFiniteUpdateError``). What differs is the loss, a small object (``PPOLoss``,
``poca.optimizer.POCALoss``): its batch type, how a buffer becomes one, its stat names and
the loss of a minibatch. The critic's values for targets are not here
(``trainers/critic_side.py``).
"""
from __future__ import annotations

import threading
from typing import Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.acting import bucket, pad_rows
from tftrainers.networks import Actions
from tftrainers.processing import AgentBuffer, BufferKey, StreamField, next_obs_key, obs_key, stream_key
from tftrainers.rewards import RewardBatch, masked_mean
from tftrainers.settings import TrainerSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.trainers.behavioral_cloning import STAT as PRETRAINING_LOSS
from tftrainers.trainers.behavioral_cloning import BCModule, BCPlan
from tftrainers.trainers.finite import (FiniteGuard, NonFiniteUpdateError, refusal_message,
                                        variables_of)
from tftrainers.trainers.policy import Policy, obs_signature
from tftrainers.trainers.schedules import (BETA_FLOOR, EPSILON_FLOOR, LEARNING_RATE_FLOOR,
                                           decayed_value)


class PPOBatch(NamedTuple):
    """One minibatch, [B, ...] per step (B = sequences * sequence_length)."""

    obs: Tuple[tf.Tensor, ...]
    next_obs: Tuple[tf.Tensor, ...]  # empty unless a reward signal trains on transitions
    action_mask: tf.Tensor  # [B, sum(branches)] 1 = allowed
    continuous_action: tf.Tensor  # [B, c] raw samples
    discrete_action: tf.Tensor  # [B, branches] int32
    old_log_probs: tf.Tensor  # [B, c + branches]
    advantages: tf.Tensor  # [B]
    returns: Tuple[tf.Tensor, ...]  # per stream [B]
    old_values: Tuple[tf.Tensor, ...]  # per stream [B]
    memory: tf.Tensor  # [B, memory_size] read at each step; a minibatch keeps sequence starts
    critic_memory: tf.Tensor  # [B, critic_state_size] the critic's state at each step (likewise)
    done: tf.Tensor  # [B] 1 on the last step of an episode that really ended
    loss_mask: tf.Tensor  # [B] 1 = real step


def policy_loss(log_probs: tf.Tensor, old_log_probs: tf.Tensor, advantages: tf.Tensor,
                epsilon: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Clipped surrogate, ratio per action dimension/branch ([B, d]); averaged over d.

    ML-Agents' ``trust_region_policy_loss`` takes its masked mean over steps *and* the d
    columns. A sum over d would weigh the policy term d times against the entropy bonus:
    with 2 continuous dimensions and a branch, beta would act as beta / 3, and a dimension
    that ended up ignoring the goal stayed stuck on more seeds (docs/experiments/
    2026-11-25-regression-tasks.md)."""
    ratio = tf.exp(log_probs - old_log_probs)
    adv = advantages[:, None]
    surrogate = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1.0 - epsilon, 1.0 + epsilon) * adv)
    return -masked_mean(tf.reduce_mean(surrogate, axis=1), mask)


class ActorTerms(NamedTuple):
    """What ``PPOOptimizer.actor_terms`` computes on a minibatch (scalars)."""

    policy_loss: tf.Tensor
    entropy: tf.Tensor
    approx_kl: tf.Tensor
    clip_fraction: tf.Tensor

    @property
    def diagnostics(self) -> Dict[str, tf.Tensor]:
        return {APPROX_KL: self.approx_kl, CLIP_FRACTION: self.clip_fraction}


#: The update's diagnostics, by stat name (docs/reference/stats.md).
APPROX_KL, CLIP_FRACTION = "Policy/Approx KL", "Policy/Clip Fraction"
EXPLAINED_VARIANCE = "Losses/Explained Variance"


def ratio_diagnostics(log_probs: tf.Tensor, old_log_probs: tf.Tensor, epsilon: tf.Tensor,
                      mask: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """Approximate KL(pi_old || pi) and the clip fraction of a minibatch.

    Args:
        log_probs, old_log_probs: [B, d] per action dimension / branch.
        epsilon: the clip range; mask: [B] 1 = real step.

    Returns:
        approx_kl: masked mean over steps of ``(r - 1) - log r``, r the ratio of the whole
            action's probabilities (the product over d: the sum of the log ratios). An
            unbiased, never negative estimate of the KL (Schulman's "k3"; CleanRL's
            ``approx_kl``).
        clip_fraction: the share of the ratios, per step and dimension as the loss clips
            them, outside ``[1 - epsilon, 1 + epsilon]`` (masked mean over steps of the
            mean over d).
    """
    log_ratio = log_probs - old_log_probs
    joint = tf.reduce_sum(log_ratio, axis=1)
    approx_kl = masked_mean(tf.math.expm1(joint) - joint, mask)
    outside = tf.cast(tf.abs(tf.exp(log_ratio) - 1.0) > epsilon, tf.float32)
    return approx_kl, masked_mean(tf.reduce_mean(outside, axis=1), mask)


def explained_variance(values: Sequence[tf.Tensor], returns: Sequence[tf.Tensor],
                       mask: tf.Tensor) -> tf.Tensor:
    """``1 - Var(G - V) / Var(G)`` over the real steps, averaged over reward streams.

    1: the values predict the returns; 0: no better than their mean; negative: worse. A
    stream whose returns do not vary (Var(G) = 0) counts as 0 rather than dividing by 0.
    """
    def variance(x):
        mean = masked_mean(x, mask)
        return masked_mean(tf.square(x - mean), mask)
    out = []
    for value, target in zip(values, returns):
        spread = variance(target)
        out.append(tf.where(spread > 0.0,
                            1.0 - variance(target - value) / tf.maximum(spread, 1e-30), 0.0))
    return tf.reduce_mean(tf.stack(out))


def value_loss(values: Sequence[tf.Tensor], old_values: Sequence[tf.Tensor],
               returns: Sequence[tf.Tensor], epsilon: tf.Tensor, mask: tf.Tensor,
               clip: bool = True) -> tf.Tensor:
    """Value loss averaged over reward streams; clipped as ML-Agents does unless ``clip``
    is False (plain squared error, Stable-Baselines3's default)."""
    losses = []
    for value, old, target in zip(values, old_values, returns):
        error = tf.square(target - value)
        if clip:
            clipped = old + tf.clip_by_value(value - old, -epsilon, epsilon)
            error = tf.maximum(error, tf.square(target - clipped))
        losses.append(masked_mean(error, mask))
    return tf.reduce_mean(tf.stack(losses))


def actor_terms(policy: Policy, batch: PPOBatch, epsilon: tf.Tensor, sequence_length: int,
                encoding: Optional[tf.Tensor] = None) -> ActorTerms:
    """The clipped policy loss, the mean entropy and the ratio diagnostics of a
    minibatch (in a tape); ``encoding``: the body's encoding of ``batch.obs`` if
    already computed."""
    actions = Actions(batch.continuous_action, batch.discrete_action)
    if encoding is not None:
        evaluation = policy.actor.action_model.evaluate(encoding, batch.action_mask,
                                                             actions)
    else:
        memory = batch.memory if policy.memory_size else None
        evaluation = policy.actor.evaluate(list(batch.obs), batch.action_mask,
                                                actions, memory, sequence_length)
    log_probs = tf.concat([evaluation.log_probs_continuous,
                           evaluation.log_probs_discrete], axis=1)
    p_loss = policy_loss(log_probs, batch.old_log_probs, batch.advantages, epsilon,
                         batch.loss_mask)
    # Not in the loss: no gradient flows through them.
    approx_kl, clip_fraction = ratio_diagnostics(
        tf.stop_gradient(log_probs), batch.old_log_probs, epsilon, batch.loss_mask)
    return ActorTerms(p_loss, masked_mean(evaluation.entropy, batch.loss_mask),
                      approx_kl, clip_fraction)


class PPOLoss:
    """PPO's loss on a ``PPOBatch`` minibatch: the clipped surrogate, the clipped value loss
    over the critic's streams, the entropy bonus (see the module docstring).

    With ``shared_critic: true`` (ML-Agents' ``SharedActorCritic``) the critic is value heads
    on the policy's body (``networks.SharedCritic``): the one loss, through the one Adam,
    trains the body from the value term too. Without memory a minibatch's observations go
    through the body once for both heads; with memory the value reads the body's LSTM from
    the critic's own stored state, as ML-Agents'.

    Args:
        policy: the actor; critic: the value network (``Critic`` or ``SharedCritic``).
        streams: the reward streams, in the order of the batch's returns and values.
        settings: the behavior's TrainerSettings (``clip_value``, ``shared_critic``).
        with_next_obs: the batch carries next observations (a learned reward signal
            trains on transitions).
    """

    #: the loss's own stats, in the order ``__call__`` returns them.
    stat_names = ("Losses/Policy Loss", "Losses/Value Loss", "Policy/Update Entropy")
    #: whether the batch's shapes are known before the first buffer (``start_compile``).
    compiles_ahead = True

    def __init__(self, policy: Policy, critic, streams: Sequence[str], settings: TrainerSettings,
                 with_next_obs: bool):
        self.policy = policy
        self.critic = critic
        self.streams = tuple(streams)
        self.hp = settings.hyperparameters
        self.memory_size = policy.memory_size
        self.sequence_length = policy.sequence_length
        self.critic_state_size = critic.state_size
        self.shared_critic = bool(getattr(self.hp, "shared_critic", False))
        self.with_next_obs = with_next_obs

    def signature(self) -> PPOBatch:
        """Input signature of the buffer the compiled update takes."""
        spec, f32 = self.policy.spec, tf.float32
        c = spec.action_spec.continuous_size
        b = spec.action_spec.discrete_size
        mask_size = int(sum(spec.action_spec.discrete_branches))
        return PPOBatch(
            obs=tuple(obs_signature(spec)),
            next_obs=tuple(obs_signature(spec)) if self.with_next_obs else (),
            action_mask=tf.TensorSpec([None, mask_size], f32),
            continuous_action=tf.TensorSpec([None, c], f32),
            discrete_action=tf.TensorSpec([None, b], tf.int32),
            old_log_probs=tf.TensorSpec([None, c + b], f32),
            advantages=tf.TensorSpec([None], f32),
            returns=tuple(tf.TensorSpec([None], f32) for _ in self.streams),
            old_values=tuple(tf.TensorSpec([None], f32) for _ in self.streams),
            memory=tf.TensorSpec([None, self.policy.memory_size], f32),
            critic_memory=tf.TensorSpec([None, self.critic_state_size], f32),
            done=tf.TensorSpec([None], f32),
            loss_mask=tf.TensorSpec([None], f32))

    def make_batch(self, buffer: AgentBuffer, capacity: int) -> PPOBatch:
        """The buffer's fields as a PPOBatch, padded with zeros to ``capacity`` steps."""
        n_obs = len(self.policy.spec.observation_specs)

        def field(key):
            return pad_rows(buffer[key], capacity)
        memory = (field(BufferKey.MEMORY) if self.policy.memory_size
                  else np.zeros((capacity, 0), np.float32))
        critic_memory = (field(BufferKey.CRITIC_MEMORY) if self.critic_state_size
                         else np.zeros((capacity, 0), np.float32))
        return PPOBatch(
            obs=tuple(field(obs_key(i)) for i in range(n_obs)),
            next_obs=(tuple(field(next_obs_key(i)) for i in range(n_obs))
                      if self.with_next_obs else ()),
            action_mask=pad_rows(buffer[BufferKey.ACTION_MASK], capacity, 1.0),
            continuous_action=field(BufferKey.CONTINUOUS_ACTION),
            discrete_action=field(BufferKey.DISCRETE_ACTION),
            old_log_probs=np.concatenate([field(BufferKey.CONTINUOUS_LOG_PROBS),
                                          field(BufferKey.DISCRETE_LOG_PROBS)], axis=1),
            advantages=field(BufferKey.ADVANTAGES),
            returns=tuple(field(stream_key(StreamField.RETURNS, s)) for s in self.streams),
            old_values=tuple(field(stream_key(StreamField.VALUES, s)) for s in self.streams),
            memory=memory,
            critic_memory=critic_memory,
            done=field(BufferKey.DONE),
            loss_mask=field(BufferKey.MASK))

    def __call__(self, batch: PPOBatch, beta: tf.Tensor,
                 epsilon: tf.Tensor) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
        """The loss of a minibatch (in the update's tape) and its stats
        (``batch.memory``: [sequences, memory_size])."""
        critic = self.critic
        critic_memory = batch.critic_memory if self.memory_size else None
        if self.shared_critic and not self.memory_size:
            # One pass through the shared body feeds the action and the value heads.
            encoding, _ = self.policy.actor.body(list(batch.obs))
            terms = actor_terms(self.policy, batch, epsilon, self.sequence_length, encoding)
            values = critic.value_heads(encoding)
        else:
            terms = actor_terms(self.policy, batch, epsilon, self.sequence_length)
            values, _ = critic(list(batch.obs), memory=critic_memory,
                               sequence_length=self.sequence_length)
        values = [values[name] for name in self.streams]
        v_loss = value_loss(values, batch.old_values, batch.returns, epsilon,
                            batch.loss_mask, clip=self.hp.clip_value)
        p_loss, entropy = terms.policy_loss, terms.entropy
        loss = p_loss + 0.5 * v_loss - beta * entropy
        return loss, {"Losses/Policy Loss": tf.abs(p_loss), "Losses/Value Loss": v_loss,
                      "Policy/Update Entropy": entropy, **terms.diagnostics}


def needs_next_obs(reward_providers) -> bool:
    """Whether a learned reward signal trains on transitions (the batch then carries the
    next observations)."""
    return any(p.needs_next_obs for p in reward_providers.values() if p.update_stat_names)


class PPOUpdate:
    """The fused Adam over actor and critic and the compiled update of PPO-style losses.

    Args:
        policy: the actor; critic: the critic network the loss trains.
        settings: the behavior's TrainerSettings (hyperparameters, max_steps).
        reward_providers: {name: provider}; the learned ones step inside the update.
        bc: ``behavioral_cloning``'s module, or None.
        loss: the loss object (``PPOLoss``; MA-POCA's ``POCALoss``).
        jit_compile: XLA-compile the update.
    """

    def __init__(self, policy: Policy, critic, settings: TrainerSettings, reward_providers,
                 bc: Optional[BCModule], loss, jit_compile: bool = True):
        self.policy = policy
        self.loss = loss
        self.hp = hyperparameters = settings.hyperparameters
        self.max_steps = settings.max_steps
        self.sequence_length = policy.sequence_length
        self.bc = bc
        learned = [p for p in reward_providers.values() if p.update_stat_names]
        self.learned_providers = learned
        self.stat_names = (*loss.stat_names, APPROX_KL, CLIP_FRACTION,
                           *(n for p in learned for n in p.update_stat_names),
                           *((PRETRAINING_LOSS,) if self.bc is not None else ()))
        self.variables = policy.actor.trainable_variables + critic.trainable_variables
        self.optimizer = FusedAdam(self.variables, hyperparameters.learning_rate, epsilon=1e-8,
                                   global_clipnorm=hyperparameters.max_grad_norm)
        # The update hands back every actor and critic variable (normalizers included):
        # the acting side and the critic's runner take them without a read of their own.
        self.published = policy.variables + list(critic.variables)
        self.actor_size = sum(int(np.prod(v.shape)) for v in policy.variables)
        # Everything an update changes: restored in the graph if the update is not finite.
        self._guard = FiniteGuard(list(self.variables) + list(self.optimizer.variables) + [
            v for p in reward_providers.values()
            for v in variables_of(p.trackables()).values()] + (
            list(variables_of(self.bc.trackables()).values()) if self.bc is not None else []))
        f32 = tf.float32
        self._buffer_signature = buffer_signature = loss.signature()
        bc_signature = BCPlan(tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
                              tf.TensorSpec([], f32))
        self.update_fn = CompiledFunction(self._update_all, [
            buffer_signature, tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], f32), tf.TensorSpec([], f32), tf.TensorSpec([], f32),
            bc_signature], jit_compile=jit_compile)
        self.jit_compile = jit_compile
        self._compile_thread: Optional[threading.Thread] = None

    def schedules(self, step: int) -> Dict[str, float]:
        """Learning rate, beta and epsilon at ``step`` (ML-Agents' schedules and floors)."""
        hp = self.hp
        return {
            "learning_rate": decayed_value(hp.learning_rate_schedule, hp.learning_rate,
                                           LEARNING_RATE_FLOOR, step, self.max_steps),
            "beta": decayed_value(hp.beta_schedule, hp.beta, BETA_FLOOR, step, self.max_steps),
            "epsilon": decayed_value(hp.epsilon_schedule, hp.epsilon, EPSILON_FLOOR, step,
                                     self.max_steps),
        }

    def start_compile(self) -> None:
        """XLA-compiles the update for the usual buffer in a background thread.

        The compile (~1.5 s for a small policy) then overlaps the start of the run instead
        of stalling the first update. It runs the update with no minibatches, which
        changes no variable; ``update`` waits for it. Nothing to do without XLA, or when
        the loss's batch shapes are known only from the data (``compiles_ahead``).
        """
        if (not self.jit_compile or not self.loss.compiles_ahead
                or self._compile_thread is not None):
            return
        capacity = self.capacity(self.hp.buffer_size)
        batch = tf.nest.map_structure(
            lambda spec: np.zeros([capacity, *spec.shape[1:]], spec.dtype.as_numpy_dtype),
            self._buffer_signature)
        index = np.zeros(self._index_shape(capacity), np.int32)

        learning_rate = float(self.optimizer.learning_rate.numpy())  # assigned unchanged
        bc = self._no_cloning()

        def compile_update():
            try:
                self.update_fn(batch, index, 0, learning_rate, 0.0, 0.0, bc)
            except Exception:  # pylint: disable=broad-except
                # Not fatal here: the first real update compiles again and raises there.
                return
        self._compile_thread = threading.Thread(target=compile_update, daemon=True,
                                                name="compile-update")
        self._compile_thread.start()

    def wait_for_compile(self) -> None:
        """Returns once a compile started by ``start_compile`` has finished."""
        if self._compile_thread is not None:
            self._compile_thread.join()

    # --- compiled ---------------------------------------------------------------------------
    def _update_all(self, buffer, index: tf.Tensor, count: tf.Tensor,
                    learning_rate: tf.Tensor, beta: tf.Tensor, epsilon: tf.Tensor,
                    bc: BCPlan) -> Tuple[Dict[str, tf.Tensor], tf.Tensor, tf.Tensor]:
        """Gradient steps on the minibatches ``index[:count]`` ([rows, batch] step indices),
        then the behavioral cloning steps of ``bc`` (if configured); returns the mean stats,
        the trained variables' new values (one flat vector) and whether all of it was
        finite (if not, every variable was put back as it was)."""
        seq = self.sequence_length
        # The PPO minibatches' stats; behavioral cloning's (last) is its own loop's.
        names = self.stat_names[:-1] if self.bc is not None else self.stat_names
        saved = self._guard.snapshot()
        # In the graph: an eager assign costs ~0.5 ms in an env loop, the update ~5.
        self.optimizer.learning_rate.assign(learning_rate)

        def body(i, totals):
            rows = index[i]
            minibatch = tf.nest.map_structure(lambda x: tf.gather(x, rows), buffer)
            minibatch = minibatch._replace(
                memory=tf.gather(buffer.memory, rows[::seq]),
                critic_memory=tf.gather(buffer.critic_memory, rows[::seq]))
            out = self._update_step(minibatch, beta, epsilon)
            transitions = RewardBatch(
                obs=minibatch.obs, next_obs=minibatch.next_obs,
                continuous_action=minibatch.continuous_action,
                discrete_action=minibatch.discrete_action,
                environment_reward=tf.zeros_like(minibatch.advantages),
                done=minibatch.done, mask=minibatch.loss_mask)
            for provider in self.learned_providers:
                out.update(provider.update_step(transitions))
            return i + 1, tuple(t + out[k] for t, k in zip(totals, names))

        _, totals = tf.while_loop(lambda i, _: i < count, body,
                                  (tf.constant(0), tuple(tf.constant(0.0) for _ in names)))
        n = tf.cast(tf.maximum(count, 1), tf.float32)
        stats = {k: v / n for k, v in zip(names, totals)}
        if self.bc is not None:  # after the PPO minibatches, as ML-Agents' BCModule
            self.bc.optimizer.learning_rate.assign(bc.learning_rate)
            _, bc_total = tf.while_loop(
                lambda i, _: i < bc.count,
                lambda i, total: (i + 1, total + self.bc.update_step(bc.index[i])),
                (tf.constant(0), tf.constant(0.0)))
            stats[PRETRAINING_LOSS] = bc_total / tf.cast(tf.maximum(bc.count, 1), tf.float32)
        # The diagnostics are not checked: a ratio overflowing the KL estimate refuses no
        # update whose losses and weights are finite.
        finite = self._guard.restore_unless_finite(
            saved, [v for k, v in stats.items() if k not in (APPROX_KL, CLIP_FRACTION)])
        stats[EXPLAINED_VARIANCE] = explained_variance(buffer.old_values, buffer.returns,
                                                       buffer.loss_mask)
        # The new weights leave with the stats: the acting side needs them next, and
        # reading them in a call of their own costs more than the copy.
        return stats, self.optimizer.flat_values(self.published), finite

    def _update_step(self, batch, beta: tf.Tensor, epsilon: tf.Tensor):
        """One gradient step on a minibatch: the loss's, through the fused Adam."""
        with tf.GradientTape() as tape:
            loss, stats = self.loss(batch, beta, epsilon)
        # Clipped to max_grad_norm (if set) inside the optimizer, on the flat gradient.
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.variables), self.variables))
        return stats

    # --- Python side --------------------------------------------------------------------------
    def update(self, buffer: AgentBuffer, step: int,
               rng: np.random.Generator) -> Tuple[Dict[str, float], np.ndarray]:
        """``num_epoch`` passes of shuffled minibatches over ``buffer`` in one compiled call.

        Returns:
            Mean losses and the schedules' current values, by ML-Agents stat name; the new
            values of ``published`` (actor then critic variables) as one flat vector.

        Raises:
            NonFiniteUpdateError: a loss or a new weight was NaN or inf; the update was
                undone (weights and optimizer state as before it).
        """
        self.wait_for_compile()
        values = self.schedules(step)
        n_steps = len(buffer)
        capacity = self.capacity(n_steps)
        index, count = self.minibatch_index(n_steps, capacity, rng)
        bc = self.bc.plan(step, rng) if self.bc is not None else self._no_cloning()
        out, weights, finite = self.update_fn(self.loss.make_batch(buffer, capacity), index, count,
                                              values["learning_rate"], values["beta"],
                                              values["epsilon"], bc)
        stats = {key: float(value) for key, value in out.items()}
        if self.bc is not None and not bc.count:  # the cloning rate has run out: no stat
            stats.pop(PRETRAINING_LOSS)
        if not bool(finite):
            raise NonFiniteUpdateError(refusal_message(step, stats))
        stats.update({"Policy/Learning Rate": values["learning_rate"],
                      "Policy/Beta": values["beta"], "Policy/Epsilon": values["epsilon"]})
        return stats, weights.numpy()

    def _no_cloning(self) -> BCPlan:
        """A plan of no cloning steps (of the module's index shape, if there is one)."""
        shape = self.bc.index_shape if self.bc is not None else (0, 0)
        return BCPlan(np.zeros(shape, np.int32), 0, 0.0)

    def capacity(self, n_steps: int) -> int:
        """Rows the compiled update gets for a buffer of ``n_steps``: a power of two, so
        that XLA compiles once per capacity rather than once per buffer length."""
        # Buffers overshoot buffer_size by the trajectories that finished last; room for
        # half as much again keeps most updates on one compiled shape.
        capacity = bucket(max(n_steps, self.hp.buffer_size * 3 // 2))
        return capacity + -capacity % self.sequence_length

    @property
    def _sequences_per_batch(self) -> int:
        return max(self.hp.batch_size // self.sequence_length, 1)

    def _index_shape(self, capacity: int) -> Tuple[int, int]:
        """[rows, steps per minibatch] of the minibatch index for ``capacity``."""
        seq, per_batch = self.sequence_length, self._sequences_per_batch
        return self.hp.num_epoch * max((capacity // seq) // per_batch, 1), per_batch * seq

    def minibatch_index(self, n_steps: int, capacity: int,
                        rng: np.random.Generator) -> Tuple[np.ndarray, int]:
        """Step indices of ``num_epoch`` shuffled passes of whole-sequence minibatches.

        Returns:
            index [rows, batch] int32 (rows fixed by ``capacity``) and how many rows to use.
            Each pass has ``n_steps // batch`` minibatches; the remainder is left out, a
            different part each pass, as ML-Agents does.
        """
        seq, per_batch = self.sequence_length, self._sequences_per_batch
        batches = (n_steps // seq) // per_batch
        index = np.zeros(self._index_shape(capacity), np.int32)
        offsets = np.arange(seq)
        for epoch in range(self.hp.num_epoch):
            order = rng.permutation(n_steps // seq)[:batches * per_batch]
            steps = (order.reshape(batches, per_batch, 1) * seq + offsets).reshape(batches, -1)
            index[epoch * batches:(epoch + 1) * batches] = steps
        return index, self.hp.num_epoch * batches
