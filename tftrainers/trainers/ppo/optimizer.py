"""PPOOptimizer: ML-Agents' PPO loss and one compiled update step; owns the critic.

    optimizer = PPOOptimizer(policy, trainer_settings)
    values = optimizer.critic_values(trajectories)   # per step, bootstraps, critic memory
    stats = optimizer.update(buffer, step, rng)      # num_epoch passes of shuffled minibatches
    optimizer.actor_weights                          # the actor's new flat weights

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

The critic (one value head per reward stream) and the reward providers belong to the
optimizer (docs/dev/architecture.md#acting-and-learning); the policy is the actor. With
``network_settings.memory`` the critic
has its own LSTM, as ML-Agents': its state is carried through each agent's trajectories
(``critic_values``), stored at every step for the update, and the bootstrap value of a cut
trajectory is taken with the state after its last step.

With ``shared_critic: true`` (ML-Agents' ``SharedActorCritic``) the critic is value heads on
the policy's body (``networks.SharedCritic``): the one loss above, through the one Adam,
trains the body from the value term too. Without memory a minibatch's observations go
through the body once for both heads; with memory the value reads the body's LSTM from the
critic's own stored state, as ML-Agents'.

One compiled call runs a whole update: the buffer goes in once (padded to a power-of-two
capacity, so XLA compiles once per capacity rather than per buffer length) with a fixed-
shape matrix of minibatch indices (``num_epoch`` shuffled passes, whole sequences for
recurrent policies) and the number of rows to use; the minibatch loop runs in the graph.
Learned reward signals (curiosity, RND) take their gradient step on each minibatch inside
the same loop, as ML-Agents interleaves them. An update whose losses or new weights are not
finite is undone inside the same call (``finite.FiniteGuard``: weights and Adam state as
they were) and refused with ``NonFiniteUpdateError``.
"""
from __future__ import annotations

import threading
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.acting import OnnxRunner, bucket, pad_rows
from tftrainers.envs.agent_rows import AgentMemories
from tftrainers.networks import Actions, Critic, SharedCritic
from tftrainers.processing import (AgentBuffer, BufferKey, StreamField, Trajectory,
                                   next_obs_key, obs_key, stream_key)
from tftrainers.rewards import RewardBatch, create_reward_providers, masked_mean
from tftrainers.settings import TrainerSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.tf_utils.onnx_function import OnnxExportError, convert_to_onnx, flat_values
from tftrainers.trainers.behavioral_cloning import STAT as PRETRAINING_LOSS
from tftrainers.trainers.behavioral_cloning import BCModule, BCPlan
from tftrainers.trainers.finite import (FiniteGuard, NonFiniteUpdateError, refusal_message,
                                        variables_of)
from tftrainers.trainers.policy import Policy, obs_signature, unflatten_obs
from tftrainers.trainers.schedules import (BETA_FLOOR, EPSILON_FLOOR, LEARNING_RATE_FLOOR,
                                           decayed_value)


class CriticValues(NamedTuple):
    """The critic's estimates for a batch of trajectories (concatenated in order).

    step: {stream: [steps]} value of every step; bootstrap: {stream: [trajectories]} value
    of each trajectory's ``next_obs``; memory: [steps, critic_state_size] the critic's state
    at every step (None without memory). (``POCAOptimizer.replay``: step and bootstrap are
    (values, baselines) pairs of such dicts.)
    """

    step: object
    bootstrap: object
    memory: Optional[np.ndarray]


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


class PPOOptimizer:
    """Owns the critic, the reward providers, the (fused) Adam over actor and critic and the
    compiled update (which also steps the learned reward signals).

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
        self.policy = policy
        self.settings = settings
        self.hp = hyperparameters = settings.hyperparameters
        self.max_steps = settings.max_steps
        self.sequence_length = policy.sequence_length
        self.reward_providers = create_reward_providers(policy.spec, settings.reward_signals,
                                                        seed=policy.seed)
        bc = settings.behavioral_cloning
        self.bc = (BCModule(policy, bc, hyperparameters.learning_rate,
                            hyperparameters.batch_size, hyperparameters.num_epoch,
                            seed=policy.seed) if bc is not None else None)
        self.streams = tuple(self.reward_providers)
        ns = settings.network_settings
        self.memory_size = policy.memory_size  # the critic's own LSTM, as the actor's
        # POCA's hyperparameters have no such key: its critic is always its own.
        self.shared_critic = bool(getattr(hyperparameters, "shared_critic", False))
        self.critic = self.create_critic()
        # The critic's recurrent state stored at every step for the update (PPO: its LSTM's;
        # POCA: the value's and the baseline's), carried per agent across trajectories.
        self.critic_state_size = self.critic.state_size
        self._critic_memories = AgentMemories(self.critic_state_size)
        learned = [p for p in self.reward_providers.values() if p.update_stat_names]
        self.learned_providers = learned
        self.with_next_obs = any(p.needs_next_obs for p in learned)
        self.stat_names = (*self.LOSS_STAT_NAMES, APPROX_KL, CLIP_FRACTION,
                           *(n for p in learned for n in p.update_stat_names),
                           *((PRETRAINING_LOSS,) if self.bc is not None else ()))
        self.variables = policy.actor.trainable_variables + self.critic.trainable_variables
        self.optimizer = FusedAdam(self.variables, hyperparameters.learning_rate, epsilon=1e-8,
                                   global_clipnorm=hyperparameters.max_grad_norm)
        # The update hands back every actor and critic variable (normalizers included):
        # the acting side and the critic's runner take them without a read of their own.
        self._published = policy.variables + list(self.critic.variables)
        self._actor_size = sum(int(np.prod(v.shape)) for v in policy.variables)
        # What the critic's values read: the published vector from _critic_offset on (a
        # shared critic reads the actor's body as well as its heads, so all of it).
        self._critic_variables = (self._published if self.shared_critic
                                  else list(self.critic.variables))
        self._critic_offset = 0 if self.shared_critic else self._actor_size
        self.actor_weights: Optional[np.ndarray] = None  # set by each update
        # Everything an update changes: restored in the graph if the update is not finite.
        self._guard = FiniteGuard(list(self.variables) + list(self.optimizer.variables) + [
            v for p in self.reward_providers.values()
            for v in variables_of(p.trackables()).values()] + (
            list(variables_of(self.bc.trackables()).values()) if self.bc is not None else []))
        spec = policy.spec
        f32 = tf.float32
        buffer_signature = self.batch_signature()
        self._buffer_signature = buffer_signature
        bc_signature = BCPlan(tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
                              tf.TensorSpec([], f32))
        self.update_fn = CompiledFunction(self._update_all, [
            buffer_signature, tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], f32), tf.TensorSpec([], f32), tf.TensorSpec([], f32),
            bc_signature], jit_compile=jit_compile)
        self.jit_compile = jit_compile
        self._compile_thread: Optional[threading.Thread] = None
        self._normalize_fn = (tf.function(self._update_normalization,
                                          input_signature=[obs_signature(spec)], autograph=False)
                              if ns.normalize else None)
        self._critic_stale = False
        self.setup_critic_values(critic_runtime)

    #: the update's own stats, in the order ``_update_step`` returns them.
    LOSS_STAT_NAMES = ("Losses/Policy Loss", "Losses/Value Loss", "Policy/Update Entropy")

    def create_critic(self):
        """The algorithm's critic (PPO: a ``Critic`` with its own body, or with
        ``shared_critic`` value heads on the policy's body)."""
        if self.shared_critic:
            return SharedCritic(self.policy.actor.body, self.streams)
        ns = self.settings.network_settings
        return Critic(self.policy.spec.observation_specs, self.streams, ns.hidden_units,
                      ns.num_layers, ns.normalize, ns.vis_encode_type,
                      memory_size=self.memory_size,
                      goal_conditioning=ns.goal_conditioning_type, encoder=ns.encoder)

    def batch_signature(self) -> PPOBatch:
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

    def setup_critic_values(self, critic_runtime: str) -> None:
        """What ``critic_values`` runs on: the critic's LSTM trace with memory, else its
        ONNX conversion in onnxruntime (or TensorFlow)."""
        spec, f32 = self.policy.spec, tf.float32
        # Critic values, once per update over whole trajectories.
        self._critic_runner: Optional[OnnxRunner] = None
        self._read_critic = flat_values(self._critic_variables)
        if self.memory_size:
            self._trace_fn = CompiledFunction(self._trace, [
                obs_signature(spec), tf.TensorSpec([None, self.critic_state_size], f32),
                tf.TensorSpec([], tf.int32)], jit_compile=False)
        else:
            self._obs_sizes = [int(np.prod(o.shape)) for o in spec.observation_specs]
            if critic_runtime == "onnxruntime":
                try:
                    self._critic_runner = OnnxRunner(
                        convert_to_onnx(self._values_packed, sum(self._obs_sizes),
                                        self._critic_variables), self._read_critic())
                except (ImportError, OnnxExportError):
                    self._critic_runner = None  # TensorFlow computes them instead
            # Values are computed once per update for many trajectories: not worth an XLA
            # compile per batch size.
            self._values_fn = CompiledFunction(self._values, [obs_signature(spec)],
                                               jit_compile=False)

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
        changes no variable; ``update`` waits for it. Nothing to do without XLA.
        """
        if not self.jit_compile or self._compile_thread is not None:
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
    def _update_all(self, buffer: PPOBatch, index: tf.Tensor, count: tf.Tensor,
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
        return stats, self.optimizer.flat_values(self._published), finite

    def actor_terms(self, batch: PPOBatch, epsilon: tf.Tensor,
                    encoding: Optional[tf.Tensor] = None) -> ActorTerms:
        """The clipped policy loss, the mean entropy and the ratio diagnostics of a
        minibatch (in a tape); ``encoding``: the body's encoding of ``batch.obs`` if
        already computed."""
        actions = Actions(batch.continuous_action, batch.discrete_action)
        if encoding is not None:
            evaluation = self.policy.actor.action_model.evaluate(encoding, batch.action_mask,
                                                                 actions)
        else:
            memory = batch.memory if self.policy.memory_size else None
            evaluation = self.policy.actor.evaluate(list(batch.obs), batch.action_mask,
                                                    actions, memory, self.sequence_length)
        log_probs = tf.concat([evaluation.log_probs_continuous,
                               evaluation.log_probs_discrete], axis=1)
        p_loss = policy_loss(log_probs, batch.old_log_probs, batch.advantages, epsilon,
                             batch.loss_mask)
        # Not in the loss: no gradient flows through them.
        approx_kl, clip_fraction = ratio_diagnostics(
            tf.stop_gradient(log_probs), batch.old_log_probs, epsilon, batch.loss_mask)
        return ActorTerms(p_loss, masked_mean(evaluation.entropy, batch.loss_mask),
                          approx_kl, clip_fraction)

    def _update_step(self, batch: PPOBatch, beta: tf.Tensor, epsilon: tf.Tensor):
        """One gradient step on a minibatch (``batch.memory``: [sequences, memory_size])."""
        critic = self.critic
        critic_memory = batch.critic_memory if self.memory_size else None
        with tf.GradientTape() as tape:
            if self.shared_critic and not self.memory_size:
                # One pass through the shared body feeds the action and the value heads.
                encoding, _ = self.policy.actor.body(list(batch.obs))
                terms = self.actor_terms(batch, epsilon, encoding)
                values = critic.value_heads(encoding)
            else:
                terms = self.actor_terms(batch, epsilon)
                values, _ = critic(list(batch.obs), memory=critic_memory,
                                   sequence_length=self.sequence_length)
            values = [values[name] for name in self.streams]
            v_loss = value_loss(values, batch.old_values, batch.returns, epsilon,
                                batch.loss_mask, clip=self.hp.clip_value)
            p_loss, entropy = terms.policy_loss, terms.entropy
            loss = p_loss + 0.5 * v_loss - beta * entropy
        # Clipped to max_grad_norm (if set) inside the optimizer, on the flat gradient.
        self.optimizer.apply_gradients(zip(tape.gradient(loss, self.variables), self.variables))
        return {"Losses/Policy Loss": tf.abs(p_loss), "Losses/Value Loss": v_loss,
                "Policy/Update Entropy": entropy, **terms.diagnostics}

    # --- Python side --------------------------------------------------------------------------
    def update(self, buffer: AgentBuffer, step: int, rng: np.random.Generator) -> Dict[str, float]:
        """``num_epoch`` passes of shuffled minibatches over ``buffer`` in one compiled call.

        Returns:
            Mean losses and the schedules' current values, by ML-Agents stat name.

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
        out, weights, finite = self.update_fn(self.make_batch(buffer, capacity), index, count,
                                              values["learning_rate"], values["beta"],
                                              values["epsilon"], bc)
        stats = {key: float(value) for key, value in out.items()}
        if self.bc is not None and not bc.count:  # the cloning rate has run out: no stat
            stats.pop(PRETRAINING_LOSS)
        if not bool(finite):
            raise NonFiniteUpdateError(refusal_message(step, stats))
        weights = weights.numpy()
        self.actor_weights = weights[:self._actor_size]
        if self._critic_runner is not None:
            self._critic_runner.set_weights(weights[self._critic_offset:])
            self._critic_stale = False
        stats.update({"Policy/Learning Rate": values["learning_rate"],
                      "Policy/Beta": values["beta"], "Policy/Epsilon": values["epsilon"]})
        return stats

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

    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds of the optimizer: the critic, Adam, the reward providers'
        networks and optimizers."""
        providers = {k: v for p in self.reward_providers.values()
                     for k, v in p.trackables().items()}
        cloning = self.bc.trackables() if self.bc is not None else {}
        return {"critic": self.critic, "optimizer": self.optimizer, **providers, **cloning}

    # --- normalisation and critic values --------------------------------------------------
    def _update_normalization(self, obs):
        self.policy.actor.update_normalization(obs)
        self.critic.update_normalization(obs)
        return tf.constant(0)

    def update_normalization(self, obs: List[np.ndarray]) -> None:
        """Adds observations to the actor's and the critic's normalizers (one call)."""
        if self._normalize_fn is not None and len(obs[0]):
            self._normalize_fn(obs)
            self._critic_stale = True

    def weights_changed(self) -> None:
        """The critic's variables changed outside an update (a restore)."""
        self._critic_stale = True

    def _values(self, obs):
        values, _ = self.critic(obs)
        return values

    def _values_packed(self, packed):
        values = self._values(unflatten_obs(tf.split(packed, self._obs_sizes, axis=1),
                                            self.policy.spec))
        return tf.stack([values[name] for name in self.streams], axis=1)

    def values(self, obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic values {stream: [n]} of a batch of observations (memoryless critic)."""
        if self._critic_runner is None:
            return {k: v.numpy() for k, v in self._values_fn(obs).items()}
        if self._critic_stale:
            self._critic_runner.set_weights(self._read_critic())
            self._critic_stale = False
        n = len(obs[0])
        packed = np.concatenate([o.reshape(n, -1) for o in obs], axis=1, dtype=np.float32)
        out = self._critic_runner(packed)
        return {name: out[:, i] for i, name in enumerate(self.streams)}

    def critic_values(self, trajectories: Sequence[Trajectory],
                      obs: Sequence[np.ndarray]) -> CriticValues:
        """Values of every step of ``trajectories`` and of their ``next_obs``.

        Args:
            trajectories: in the order of ``obs``, their observations concatenated (per
                observation spec).
        """
        n_steps = len(obs[0])
        if not self.memory_size:
            # One call on the steps followed by each trajectory's next observation.
            values = self.values([np.concatenate([o, np.stack([t.next_obs[i]
                                                               for t in trajectories])])
                                  for i, o in enumerate(obs)])
            return CriticValues({k: v[:n_steps] for k, v in values.items()},
                                {k: v[n_steps:] for k, v in values.items()}, None)
        # With memory, as ML-Agents: each trajectory runs through the critic's LSTM from
        # the state its agent's previous trajectory left, its next observation as one more
        # step (the bootstrap value is taken with the state after the last real step).
        return self.replay(trajectories, list(obs),
                           [np.stack([t.next_obs[i] for t in trajectories])
                            for i in range(len(obs))])

    def _trace(self, inputs, memory, steps):
        """The compiled trace ``replay`` calls: (outputs {stream: [N, T]}, states
        [N, T + 1, critic_state_size]) of N trajectories of T steps (``Critic.trace``)."""
        return self.critic.trace(inputs, memory, steps)

    def replay(self, trajectories: Sequence[Trajectory], inputs: Sequence[np.ndarray],
               after: Sequence[np.ndarray]) -> CriticValues:
        """Runs ``trajectories`` through the critic's memory (``self._trace_fn``), each from
        the state its agent's previous trajectory left (zeros after an episode end), with
        one more step after its last for the bootstrap; keeps the states for the next
        trajectories and for the update.

        Args:
            trajectories: in the order of ``inputs``.
            inputs: what the trace reads per step, each [steps, ...], the trajectories'
                steps concatenated.
            after: the same fields for the step after each trajectory, each [n, ...].

        Returns:
            CriticValues: ``step`` and ``bootstrap`` have the structure of the trace's
            outputs (PPO: {stream: ...}), at every step and after each trajectory; ``memory``
            the state [steps, critic_state_size] each step was read with.
        """
        n_steps = len(inputs[0])
        # Trajectories of one agent within a batch are in order; each one after the first
        # starts from where the one before ended, so they run in waves: wave k holds each
        # agent's k-th trajectory of the batch.
        lengths = np.array([len(t) for t in trajectories])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        agents = np.array([t.agent_id for t in trajectories], np.int64)
        wave = np.zeros(len(trajectories), np.int64)
        seen: Dict[int, int] = {}
        for j, agent in enumerate(agents.tolist()):
            wave[j] = seen.get(agent, -1) + 1
            seen[agent] = int(wave[j])
        step = bootstrap = None
        memory = np.zeros((n_steps, self.critic_state_size), np.float32)
        for k in range(int(wave.max()) + 1):
            members = np.flatnonzero(wave == k)
            rows, first = self._critic_memories.read(agents[members])
            width = int(lengths[members].max()) + 1
            grid = []
            for x, last in zip(inputs, after):
                block = np.zeros((len(members), width, *x.shape[1:]), x.dtype)
                for r, j in enumerate(members.tolist()):
                    block[r, :lengths[j]] = x[starts[j]:starts[j] + lengths[j]]
                    block[r, lengths[j]] = last[j]
                grid.append(block.reshape(len(members) * width, *x.shape[1:]))
            outputs, states = self._trace_fn(grid, first, width)
            outputs = tf.nest.map_structure(lambda v: v.numpy(), outputs)
            if step is None:
                step = tf.nest.map_structure(lambda v: np.zeros(n_steps, np.float32), outputs)
                bootstrap = tf.nest.map_structure(
                    lambda v: np.zeros(len(trajectories), np.float32), outputs)
            states = states.numpy()
            ends = lengths[members]
            real = np.arange(width)[None, :] < ends[:, None]
            index = np.concatenate([np.arange(starts[j], starts[j] + lengths[j])
                                    for j in members.tolist()])
            for v, at, after_last in zip(tf.nest.flatten(outputs), tf.nest.flatten(step),
                                         tf.nest.flatten(bootstrap)):
                at[index] = v[real]
                after_last[members] = v[np.arange(len(members)), ends]
            memory[index] = states[:, :width][real]
            # Each agent's state for its next trajectory; forgotten after an episode end.
            final = states[np.arange(len(members)), ends]
            ended = np.array([trajectories[j].episode_ended for j in members.tolist()])
            self._critic_memories.write(rows, np.where(ended[:, None], 0.0, final))
        return CriticValues(step, bootstrap, memory)
