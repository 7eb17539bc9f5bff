"""SACOptimizer: twin Q, value and target value networks, entropy coefficients, and one
compiled call doing many gradient steps (docs/trainers/sac.md#implementation-notes).

    optimizer = SACOptimizer(policy, settings, seed=0)
    stats = optimizer.update(batches, rewards, learning_rate)   # K gradient steps, one call
    policy.flat_weights()                                       # what the acting side gets

``batches`` holds K sampled minibatches stacked on a leading axis ([K, batch_size, ...]);
the call runs a ``tf.while_loop`` over them: per step the policy, Q and value losses
(``losses``), one Adam step each for the policy, the critics (Q1 + Q2 + V) and the log
entropy coefficients, then the soft update of the target value network. The losses and
the loop are graph code; no file, queue or counter is touched here.

With ``network_settings.memory`` (as ML-Agents' SAC) the policy, Q1, Q2, V and the target
V each have their own LSTM (none shares one). A minibatch of ``batch_size`` steps is
``batch_size / sequence_length`` sequences: the policy's LSTM starts from the memory stored
at each sequence's first step (what it read while acting), V's from the value network's
state stored there (``critic_values`` replays every trajectory through V for it), the Q
networks' from zeros (no Q memory exists while acting), and the target V, which reads the
next observations, from V's state after the first step. Padding steps are masked out of
every loss.
"""
from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.networks import Critic
from tftrainers.rewards import RewardBatch, create_reward_providers
from tftrainers.settings import TrainerSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.tf_utils.draws import Draws
from tftrainers.trainers.behavioral_cloning import STAT as PRETRAINING_LOSS
from tftrainers.trainers.behavioral_cloning import BCModule, BCPlan
from tftrainers.processing import Trajectory
from tftrainers.trainers.critic_side import ValueEstimator
from tftrainers.trainers.policy import Policy
from tftrainers.trainers.sac import losses as L
from tftrainers.trainers.sac.networks import QNetwork, trainable

#: ML-Agents' SAC stats, in the order the compiled update returns them.
STAT_NAMES = ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Q1 Loss", "Losses/Q2 Loss",
              "Policy/Continuous Entropy Coeff", "Policy/Discrete Entropy Coeff")
#: log alpha stays within these bounds (a runaway coefficient made ML-Agents' runs go NaN,
#: ML-Agents #5928).
LOG_ALPHA_MIN, LOG_ALPHA_MAX = math.log(1e-8), math.log(1e3)
#: Passes over the demonstrations per cloning when ``behavioral_cloning.num_epoch`` is not
#: set (SAC has no ``num_epoch``; ML-Agents' BCModule defaults to 3 for every trainer).
BC_NUM_EPOCH = 3


class SACBatch(NamedTuple):
    """K minibatches stacked: each field [K, B, ...] (see ``replay_buffer.Transitions``).

    rewards: [K, B, streams] float32, each stream's reward times its strength.
    reward_update: [K] float32, 1 where the learned reward signals (curiosity, RND, GAIL) also
        take a step on that minibatch.
    mask: [K, B] float32, 1 = a real step, 0 = sequence padding (all 1 without memory).
    memory, critic_memory: [K, B / L, memory_size] float32, the policy's and V's state at
        each sequence's first step ([K, B, 0] without memory).
    """

    obs: tuple
    next_obs: tuple
    continuous: object
    discrete: object
    action_mask: object
    rewards: object
    done: object
    reward_update: object
    mask: object
    memory: object
    critic_memory: object


class EntropyCoefficients(tf.Module):
    """log alpha of the continuous actions and of each discrete branch."""

    def __init__(self, init: float, branches: int):
        super().__init__(name="entropy_coefficients")
        self.log_alpha_continuous = tf.Variable(math.log(init), dtype=tf.float32,
                                                name="log_alpha_continuous")
        self.log_alpha_discrete = tf.Variable([math.log(init)] * branches, dtype=tf.float32,
                                              shape=[branches], name="log_alpha_discrete")


class SACOptimizer:
    """Owns SAC's critics, entropy coefficients, reward providers and the compiled update.

    Args:
        policy: the behavior's ``Policy`` (built with ``tanh_squash``); the update trains
            its actor.
        settings: the behavior's TrainerSettings (hyperparameters: ``SACSettings``).
        seed: the update's draws (policy samples).
        jit_compile: XLA-compile the update (one compile per distinct K).
    """

    def __init__(self, policy: Policy, settings: TrainerSettings, seed: int = 0,
                 jit_compile: bool = False):
        self.policy = policy
        self.spec = spec = policy.spec
        hp = settings.hyperparameters
        self.tau = float(hp.tau)
        self.batch_size = int(hp.batch_size)
        # GAIL compares the policy's actions with the demonstrations' in the env's scale:
        # tanh of the stored pre-squash samples.
        self.reward_providers = create_reward_providers(
            spec, settings.reward_signals, seed=seed,
            env_actions=policy.actor.action_model.env_actions)
        bc = settings.behavioral_cloning
        self.bc: Optional[BCModule] = (
            BCModule(policy, bc, hp.learning_rate, hp.batch_size, BC_NUM_EPOCH, seed=seed)
            if bc is not None else None)
        self._clone = (CompiledFunction(self._clone_steps, [BCPlan(
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32),
            tf.TensorSpec([], tf.float32))], jit_compile=jit_compile)
            if self.bc is not None else None)
        self.streams = tuple(self.reward_providers)
        ns = settings.network_settings
        self.memory_size = policy.memory_size
        self.sequence_length = policy.sequence_length if self.memory_size else 1
        net = dict(hidden_units=ns.hidden_units, num_layers=ns.num_layers,
                   normalize=ns.normalize, vis_encode_type=ns.vis_encode_type,
                   goal_conditioning=ns.goal_conditioning_type, encoder=ns.encoder,
                   memory_size=self.memory_size)
        self.q1 = QNetwork(spec, self.streams, name="q1", **net)
        self.q2 = QNetwork(spec, self.streams, name="q2", **net)
        self.value = Critic(spec.observation_specs, self.streams, name="value", **net)
        self.target_value = Critic(spec.observation_specs, self.streams, name="target_value",
                                   **net)
        for target, source in zip(self.target_value.variables, self.value.variables):
            target.assign(source)  # a hard copy at the start, then soft updates
        # With memory: V's state through every trajectory, stored with its steps (PPO's
        # recurrent replay; the value network's normalizer is the actor's copy).
        self.value_replay = (ValueEstimator(policy, self.value, self.streams, normalize=False)
                             if self.memory_size else None)
        action_spec = spec.action_spec
        self.continuous_size = action_spec.continuous_size
        self.branches = tuple(action_spec.discrete_branches)
        self.alphas = EntropyCoefficients(hp.init_entcoef, len(self.branches))
        self.target_continuous = L.continuous_target_entropy(self.continuous_size)
        self.target_discrete = L.discrete_target_entropies(self.branches)
        lr = hp.learning_rate
        self.actor_variables = tuple(policy.actor.trainable_variables)
        self.critic_variables = trainable(self.q1, self.q2, self.value)
        self.alpha_variables = (self.alphas.log_alpha_continuous,
                                self.alphas.log_alpha_discrete)
        self.policy_adam = FusedAdam(self.actor_variables, lr, name="policy_adam")
        self.value_adam = FusedAdam(self.critic_variables, lr, name="value_adam")
        self.entropy_adam = FusedAdam(self.alpha_variables, lr, name="entropy_adam")
        self.draws = Draws(seed, name="sac_draws")
        self.gammas = [p.gamma for p in self.reward_providers.values()]
        self.use_done = [not p.ignore_done for p in self.reward_providers.values()]
        self.learned_providers = [p for p in self.reward_providers.values()
                                  if p.update_stat_names]
        self.reward_stat_names = tuple(n for p in self.learned_providers
                                       for n in p.update_stat_names)
        self._update = CompiledFunction(self._update_steps,
                                        [self._signature(), tf.TensorSpec([], tf.int32)],
                                        jit_compile=jit_compile)
        self._values = None

    # --- the compiled update ---------------------------------------------------------------
    def _signature(self) -> SACBatch:
        obs = tuple(tf.TensorSpec([None, None, *o.shape], tf.float32)
                    for o in self.spec.observation_specs)
        return SACBatch(
            obs=obs, next_obs=obs,
            continuous=tf.TensorSpec([None, None, self.continuous_size], tf.float32),
            discrete=tf.TensorSpec([None, None, len(self.branches)], tf.int32),
            action_mask=tf.TensorSpec([None, None, int(sum(self.branches))], tf.float32),
            rewards=tf.TensorSpec([None, None, len(self.streams)], tf.float32),
            done=tf.TensorSpec([None, None], tf.float32),
            reward_update=tf.TensorSpec([None], tf.float32),
            mask=tf.TensorSpec([None, None], tf.float32),
            memory=tf.TensorSpec([None, None, self.memory_size], tf.float32),
            critic_memory=tf.TensorSpec([None, None, self.memory_size], tf.float32))

    def _update_steps(self, batches: SACBatch, steps: tf.Tensor) -> tf.Tensor:
        """``steps`` gradient steps, one per stacked minibatch (the first ``steps`` of K:
        the rest is padding, so that XLA compiles one shape per bucket of K); returns the
        mean of each stat of ``STAT_NAMES`` over the steps, then of each learned reward
        signal's over the steps it took, [len(STAT_NAMES) + len(reward_stat_names)]."""
        width = len(STAT_NAMES) + len(self.reward_stat_names)

        def body(k, total):
            batch = tf.nest.map_structure(lambda x: x[k], batches)
            stats = self._gradient_step(batch)
            if self.reward_stat_names:
                stats = tf.concat([stats, self._reward_signal_step(batch)], axis=0)
            return k + 1, total + stats

        _, total = tf.while_loop(lambda k, _: k < steps, body,
                                 (tf.constant(0), tf.zeros([width])))
        # A mask, not reward_update[:steps]: a slice ending at a tensor makes XLA compile
        # the whole update again for every distinct number of steps.
        run = tf.range(tf.shape(batches.reward_update)[0]) < steps
        counts = tf.concat([
            tf.fill([len(STAT_NAMES)], tf.cast(steps, tf.float32)),
            tf.fill([len(self.reward_stat_names)],
                    tf.reduce_sum(tf.where(run, batches.reward_update, 0.0)))],
            axis=0)
        return total / tf.maximum(counts, 1.0)

    def _reward_signal_step(self, batch: SACBatch) -> tf.Tensor:
        """One step of every learned reward signal on the minibatch when its flag says so
        (else zeros): their stats, [len(reward_stat_names)]."""
        transitions = RewardBatch(obs=batch.obs, next_obs=batch.next_obs,
                                  continuous_action=batch.continuous,
                                  discrete_action=batch.discrete,
                                  environment_reward=tf.zeros_like(batch.done),
                                  done=batch.done, mask=batch.mask)

        def step():
            out = {}
            for provider in self.learned_providers:
                out.update(provider.update_step(transitions))
            return tf.stack([tf.cast(out[n], tf.float32) for n in self.reward_stat_names])

        return tf.cond(batch.reward_update > 0.5, step,
                       lambda: tf.zeros([len(self.reward_stat_names)]))

    def _clone_steps(self, plan: BCPlan) -> tf.Tensor:
        """``plan.count`` behavioral cloning steps of the actor (``BCModule``); their mean
        loss."""
        self.bc.optimizer.learning_rate.assign(plan.learning_rate)
        _, total = tf.while_loop(lambda i, _: i < plan.count,
                                 lambda i, total: (i + 1, total + self.bc.update_step(
                                     plan.index[i])),
                                 (tf.constant(0), tf.constant(0.0)))
        return total / tf.cast(tf.maximum(plan.count, 1), tf.float32)

    def _policy_outputs(self, obs, mask, memory=None):
        """The policy at ``obs``, reparameterised: (continuous action tanh(u) or None,
        its log-prob [B] or None, per-branch probabilities and log-probabilities). With
        memory ``obs`` are sequences and ``memory`` [B / L, memory_size] their first
        steps' stored state."""
        actor = self.policy.actor
        model = actor.action_model
        encoding, _ = actor.body(list(obs), memory=memory,
                                 sequence_length=self.sequence_length)
        action = log_prob = None
        if self.continuous_size:
            mean, log_std = model._gaussian(encoding)
            u = mean + tf.exp(log_std) * self.draws.normal(tf.shape(mean))
            action = tf.tanh(u)
            log_prob = L.squashed_log_prob(u, mean, log_std)
        probs, log_probs = [], []
        if self.branches:
            for logits in model.masked_logits(encoding, mask):
                lp = tf.nn.log_softmax(logits, axis=-1)
                log_probs.append(lp)
                probs.append(tf.exp(lp))
        return action, log_prob, probs, log_probs

    def _gradient_step(self, batch: SACBatch) -> tf.Tensor:
        obs, next_obs = list(batch.obs), list(batch.next_obs)
        n = tf.shape(batch.done)[0]
        alpha_c = tf.exp(self.alphas.log_alpha_continuous)
        alpha_d = tf.exp(self.alphas.log_alpha_discrete)
        alphas_d = [alpha_d[i] for i in range(len(self.branches))]
        seq, mask = self.sequence_length, batch.mask
        memory = critic_memory = next_memory = None
        if self.memory_size:
            memory, critic_memory = batch.memory, batch.critic_memory
            # The target reads s_1..s_L: it starts from V's state after step 0 (ML-Agents').
            _, next_memory = self.value([o[::seq] for o in obs], memory=critic_memory)
        target_values, _ = self.target_value(next_obs, memory=next_memory, sequence_length=seq)
        with tf.GradientTape(persistent=True) as tape:
            action, log_prob, probs, log_probs = self._policy_outputs(obs, batch.action_mask,
                                                                      memory)
            entropy = L.entropy_term(log_prob, tf.stop_gradient(alpha_c), probs, log_probs,
                                     [tf.stop_gradient(a) for a in alphas_d])
            if self.continuous_size:
                # One pass of each Q network for the stored and the policy's actions.
                both_obs = [tf.concat([o, o], axis=0) for o in obs]
                both_actions = tf.concat([tf.tanh(batch.continuous), action], axis=0)
                q1_all = self.q1(both_obs, both_actions, sequence_length=seq)
                q2_all = self.q2(both_obs, both_actions, sequence_length=seq)
                q1_taken_all = {k: v[:n] for k, v in q1_all.items()}
                q2_taken_all = {k: v[:n] for k, v in q2_all.items()}
                q1_pi = {k: v[n:] for k, v in q1_all.items()}
                q2_pi = {k: v[n:] for k, v in q2_all.items()}
            else:  # discrete actions are not inputs: one pass serves both
                q1_taken_all = q1_pi = self.q1(obs, sequence_length=seq)
                q2_taken_all = q2_pi = self.q2(obs, sequence_length=seq)
            values, _ = self.value(obs, memory=critic_memory, sequence_length=seq)
            q1_losses, q2_losses, value_losses, policy_losses = [], [], [], []
            for k, stream in enumerate(self.streams):
                y = L.q_target(batch.rewards[:, k], batch.done, target_values[stream],
                               self.gammas[k], self.use_done[k])
                q1_losses.append(L.q_loss(L.taken_q(q1_taken_all[stream], batch.discrete,
                                                    self.branches), y, mask))
                q2_losses.append(L.q_loss(L.taken_q(q2_taken_all[stream], batch.discrete,
                                                    self.branches), y, mask))
                q1_expected = L.expected_q(q1_pi[stream], probs, self.branches)
                q2_expected = L.expected_q(q2_pi[stream], probs, self.branches)
                value_losses.append(L.value_loss(
                    values[stream], L.soft_value(q1_expected, q2_expected, entropy), mask))
                policy_losses.append(L.policy_loss(tf.minimum(q1_expected, q2_expected),
                                                   entropy, mask))
            q1_loss, q2_loss = tf.add_n(q1_losses), tf.add_n(q2_losses)
            value_loss = tf.add_n(value_losses)
            scale = 1.0 / len(self.streams)
            policy_loss = tf.add_n(policy_losses) * scale
            critic_loss = (q1_loss + q2_loss + value_loss) * scale
            entropy_losses = []
            if self.continuous_size:
                entropy_losses.append(L.entropy_coefficient_loss(
                    self.alphas.log_alpha_continuous, -log_prob, self.target_continuous,
                    mask))
            for i, (p, lp) in enumerate(zip(probs, log_probs)):
                entropy_losses.append(L.entropy_coefficient_loss(
                    self.alphas.log_alpha_discrete[i], -tf.reduce_sum(p * lp, axis=-1),
                    self.target_discrete[i], mask))
            entropy_loss = tf.add_n(entropy_losses)
        self.policy_adam.apply_gradients(zip(tape.gradient(policy_loss, self.actor_variables),
                                             self.actor_variables))
        self.value_adam.apply_gradients(zip(tape.gradient(critic_loss, self.critic_variables),
                                            self.critic_variables))
        self.entropy_adam.apply_gradients(zip(tape.gradient(entropy_loss, self.alpha_variables),
                                              self.alpha_variables))
        del tape
        for variable in self.alpha_variables:
            variable.assign(tf.clip_by_value(variable, LOG_ALPHA_MIN, LOG_ALPHA_MAX))
        L.soft_update(self.target_value.trainable_variables, self.value.trainable_variables,
                      self.tau)
        discrete_coeff = (tf.reduce_mean(alpha_d) if self.branches else tf.constant(0.0))
        continuous_coeff = alpha_c if self.continuous_size else tf.constant(0.0)
        return tf.stack([policy_loss, value_loss * scale, q1_loss * scale, q2_loss * scale,
                         continuous_coeff, discrete_coeff])

    # --- called by the trainer -------------------------------------------------------------
    def update(self, batches: SACBatch, learning_rate: float,
               steps: int = None) -> Dict[str, float]:
        """Runs ``steps`` gradient steps on the first ``steps`` minibatches (default: all K
        of ``batches``); returns the stats' means.
        The critics take the policy's observation statistics first (ML-Agents copies the
        actor's normalizer into every critic at each update)."""
        for net in (self.q1, self.q2, self.value, self.target_value):
            net.body.copy_normalization(self.policy.actor.body)
        for adam in (self.policy_adam, self.value_adam, self.entropy_adam):
            adam.learning_rate.assign(learning_rate)
        steps = len(batches.done) if steps is None else int(steps)
        out = self._update(batches, steps).numpy()
        stats = dict(zip(STAT_NAMES + self.reward_stat_names, out.tolist()))
        if self.reward_stat_names and not np.any(np.asarray(batches.reward_update)[:steps]):
            for name in self.reward_stat_names:
                del stats[name]
        # ML-Agents reports only the coefficients that exist (its empty-branch mean is NaN).
        if not self.continuous_size:
            del stats["Policy/Continuous Entropy Coeff"]
        if not self.branches:
            del stats["Policy/Discrete Entropy Coeff"]
        stats["Policy/Learning Rate"] = float(learning_rate)
        return stats

    def clone(self, plan: BCPlan) -> Dict[str, float]:
        """The behavioral cloning steps of ``plan`` (after an update's gradient steps, as
        ML-Agents); ``Losses/Pretraining Loss`` when any ran."""
        if self.bc is None or not plan.count:
            return {}
        return {PRETRAINING_LOSS: float(self._clone(plan).numpy())}
    def critic_values(self, trajectories: Sequence[Trajectory], obs: List[np.ndarray]
                      ) -> Tuple[Dict[str, np.ndarray], Optional[np.ndarray]]:
        """V(s) per stream at every step of ``trajectories`` (their observations ``obs``
        concatenated), and with memory V's state at every step, [steps, memory_size]: each
        trajectory replayed through V's LSTM from where its agent's previous one left it
        (zeros after an episode end; ``CriticSide.replay``). None without memory."""
        if self.value_replay is None:
            return self.state_values(obs), None
        estimates = self.value_replay.critic_values(trajectories, obs)
        return estimates.step, estimates.memory

    def state_values(self, obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """V(s) per stream for a batch of observations ([n] each): ``Policy/<Signal>
        Value``."""
        if self._values is None:
            def values(o):
                v, _ = self.value(list(o))
                return v
            self._values = CompiledFunction(values, [tuple(
                tf.TensorSpec([None, *s.shape], tf.float32)
                for s in self.spec.observation_specs)], jit_compile=False)
        return {k: v.numpy() for k, v in self._values(tuple(obs)).items()}

    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds besides the policy."""
        providers = {k: v for p in self.reward_providers.values()
                     for k, v in p.trackables().items()}
        if self.bc is not None:
            providers.update(self.bc.trackables())
        return {"q1": self.q1, "q2": self.q2, "value": self.value,
                "target_value": self.target_value, "entropy_coefficients": self.alphas,
                "policy_adam": self.policy_adam, "value_adam": self.value_adam,
                "entropy_adam": self.entropy_adam, "sac_draws": self.draws, **providers}
