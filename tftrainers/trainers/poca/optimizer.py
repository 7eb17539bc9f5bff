"""POCAOptimizer: MA-POCA's critic side and loss, composed with PPO's update.

    optimizer = POCAOptimizer(policy, trainer_settings)
    estimates = optimizer.group_estimates(trajectories, steps, after)  # V, b_i, bootstraps
    stats = optimizer.update(buffer, step, rng)      # num_epoch passes, one compiled call

Loss terms (Cohen et al. 2021; ML-Agents' ``poca/optimizer_torch.py``), per minibatch:
    L_policy   = PPO's clipped surrogate with advantages A_i = G_t - b_i (normalised)
    L_value    = mean_streams masked_mean( max((G - V)^2, (G - V_clip)^2) )
    L_baseline = the same for b_i against the same returns G
    loss       = L_policy + 0.5 (L_value + 0.5 L_baseline) - beta * entropy
V(s) is the centralised value of every present member's observation, b_i the
counterfactual baseline of member i's observation and its teammates' observations and
actions (``networks.POCACritic``).

With ``network_settings.memory`` the actor is PPO's recurrent actor and the critic has an
LSTM after its attention and pooling, as ML-Agents' MA-POCA: V and b_i each carry their own
state through an agent's trajectories (PPO's ``replay``, in waves per agent, the group's
observations after the last step as one more step for the bootstrap), stored at every step
as one CRITIC_MEMORY field [value memory, baseline memory]; the update replays each
minibatch's sequences from the states stored at their first steps.

The parts: ``GroupEstimator`` (the critic side: V and b_i for targets, bootstraps, the
recurrent replay, the member-count normaliser), ``POCALoss`` (the loss above on a
``POCABatch``) and PPO's ``PPOUpdate`` (schedules, the fused Adam over actor and critic,
learned reward signals stepping inside the same compiled loop, the non-finite guard,
minibatch indices), composed by ``POCAOptimizer``.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tftrainers.acting import pad_rows
from tftrainers.networks import POCACritic
from tftrainers.processing import (AgentBuffer, BufferKey, StreamField, Trajectory, stream_key,
                                   team_obs_key)
from tftrainers.settings import TrainerSettings
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.trainers.critic_side import CriticSide
from tftrainers.trainers.policy import Policy
from tftrainers.trainers.ppo.optimizer import ActorCriticOptimizer
from tftrainers.trainers.ppo.update import (PPOBatch, PPOLoss, PPOUpdate, actor_terms,
                                            needs_next_obs, value_loss)


class POCABatch(NamedTuple):
    """One minibatch of MA-POCA, [B, ...] per step with K teammate slots: PPOBatch's fields
    (in its order: ``PPOUpdate`` reads them by name) and the group's."""

    obs: Tuple[tf.Tensor, ...]
    next_obs: Tuple[tf.Tensor, ...]
    action_mask: tf.Tensor
    continuous_action: tf.Tensor
    discrete_action: tf.Tensor
    old_log_probs: tf.Tensor
    advantages: tf.Tensor
    returns: Tuple[tf.Tensor, ...]
    old_values: Tuple[tf.Tensor, ...]
    memory: tf.Tensor
    critic_memory: tf.Tensor  # [B, 2 m] value memory, then baseline memory
    done: tf.Tensor
    loss_mask: tf.Tensor
    team_obs: Tuple[tf.Tensor, ...]  # per spec [B, K, *shape]
    team_continuous_action: tf.Tensor  # [B, K, c]
    team_discrete_action: tf.Tensor  # [B, K, branches] int32
    team_mask: tf.Tensor  # [B, K] 1 = present
    old_baselines: Tuple[tf.Tensor, ...]  # per stream [B]


class GroupEstimates(NamedTuple):
    """The critic's estimates for a batch of trajectories (steps concatenated in order).

    values, baselines: {stream: [steps]} V of the group and b_i at every step; bootstrap:
    {stream: [trajectories]} V of the group after each trajectory's last step; memory:
    [steps, 2 * memory_size] the critic's states each step was read with (value memory,
    then baseline memory), None without memory.
    """

    values: Dict[str, np.ndarray]
    baselines: Dict[str, np.ndarray]
    bootstrap: Dict[str, np.ndarray]
    memory: Optional[np.ndarray]


class GroupBatch(NamedTuple):
    """What the critic reads for a batch of steps (NumPy), K teammate slots.

    obs: per spec [n, *shape]; team_obs: per spec [n, K, *shape]; team_continuous
    [n, K, c]; team_discrete [n, K, b]; team_mask [n, K].
    """

    obs: Sequence[np.ndarray]
    team_obs: Sequence[np.ndarray]
    team_continuous: np.ndarray
    team_discrete: np.ndarray
    team_mask: np.ndarray

    def fields(self) -> List[np.ndarray]:
        """Flat, in the order the critic's trace reads them: obs, team_obs (per spec),
        team_continuous, team_discrete, team_mask."""
        return [*self.obs, *self.team_obs, self.team_continuous, self.team_discrete,
                self.team_mask]


def group_inputs(obs: Sequence[tf.Tensor], team_obs: Sequence[tf.Tensor],
                 team_mask: tf.Tensor):
    """Every member's observations [B, 1 + K, *shape] (the agent first) and their mask."""
    group_obs = [tf.concat([o[:, None], t], axis=1) for o, t in zip(obs, team_obs)]
    mask = tf.concat([tf.ones_like(team_mask[:, :1]), team_mask], axis=1)
    return group_obs, mask


class GroupEstimator(CriticSide):
    """MA-POCA's critic side: V of the group and b_i at every step, V of the group after
    each trajectory (``group_estimates``), in TensorFlow once per update; with memory, each
    agent's trajectories replayed from the states its previous one left."""

    def __init__(self, policy: Policy, critic: POCACritic, streams: Sequence[str],
                 normalize: bool):
        super().__init__(policy, critic, streams, normalize)
        spec, f32 = policy.spec, tf.float32
        a = spec.action_spec
        team = [tuple(tf.TensorSpec([None, None, *o.shape], f32) for o in spec.observation_specs),
                tf.TensorSpec([None, None, a.continuous_size], f32),
                tf.TensorSpec([None, None, a.discrete_size], tf.int32),
                tf.TensorSpec([None, None], f32)]
        own = tuple(tf.TensorSpec([None, *o.shape], f32) for o in spec.observation_specs)
        # Once per update over thousands of steps: not worth an XLA compile per size.
        if self.memory_size:  # GroupBatch.fields(), the state, the steps per trajectory
            self._trace_fn = CompiledFunction(self._trace, [
                [*own, *team[0], *team[1:]],
                tf.TensorSpec([None, self.critic_state_size], f32),
                tf.TensorSpec([], tf.int32)], jit_compile=False)
            return
        self._estimates_fn = CompiledFunction(self._estimates, [own, *team],
                                              jit_compile=False)
        self._group_value_fn = CompiledFunction(self._group_value, [own, *team],
                                                jit_compile=False)

    def _estimates(self, obs, team_obs, team_continuous, team_discrete, team_mask):
        return self.critic.value_and_baseline(obs, team_obs, team_continuous, team_discrete,
                                              team_mask)

    def _group_value(self, obs, team_obs, team_continuous, team_discrete, team_mask):
        del team_continuous, team_discrete  # the value reads observations only
        return self.critic.value(*group_inputs(obs, team_obs, team_mask))

    def _trace(self, inputs, memory, steps):
        """V and b_i of N trajectories of T steps, each with its own memory carried through
        (``inputs``: ``GroupBatch.fields()`` [N * T, ...]; ``memory``: [N, 2 m] value then
        baseline memory). Returns ((values, baselines) {stream: [N, T]}, states
        [N, T + 1, 2 m])."""
        n = len(self.policy.spec.observation_specs)
        obs, team_obs = inputs[:n], inputs[n:2 * n]
        team_continuous, team_discrete, team_mask = inputs[2 * n:]
        critic = self.critic
        value_memory, baseline_memory = tf.split(memory, 2, axis=1)
        value_features, baseline_features = critic.both_features(
            obs, team_obs, team_continuous, team_discrete, team_mask)
        values, value_states = critic.trace(value_features, value_memory, steps)
        baselines, baseline_states = critic.trace(baseline_features, baseline_memory, steps)
        return (values, baselines), tf.concat([value_states, baseline_states], axis=-1)

    def group_estimates(self, trajectories: Sequence[Trajectory], steps: GroupBatch,
                        after: GroupBatch) -> GroupEstimates:
        """V and b_i at every step of ``trajectories`` (``steps``, concatenated in order) and
        V of the group after each one's last step (``after``, one row per trajectory; its
        actions are not read). With memory, each agent's trajectories run from the states its
        previous one left (``replay``)."""
        if not self.memory_size:
            values, baselines = self.estimates(steps)
            return GroupEstimates(values, baselines, self.group_value(after), None)
        replayed = self.replay(trajectories, steps.fields(), after.fields())
        (values, baselines), (bootstrap, _) = replayed.step, replayed.bootstrap
        return GroupEstimates(values, baselines, bootstrap, replayed.memory)

    def estimates(self, batch: GroupBatch) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
        """V(group) and b_i of every step: ({stream: [n]}, {stream: [n]}) (no memory)."""
        values, baselines = self._estimates_fn(*self._args(batch))
        return ({k: v.numpy() for k, v in values.items()},
                {k: v.numpy() for k, v in baselines.items()})

    def group_value(self, batch: GroupBatch) -> Dict[str, np.ndarray]:
        """V(group) only (bootstraps from the observations after a trajectory; no memory)."""
        return {k: v.numpy() for k, v in self._group_value_fn(*self._args(batch)).items()}

    @staticmethod
    def _args(batch: GroupBatch):
        return (list(batch.obs), list(batch.team_obs), batch.team_continuous,
                batch.team_discrete, batch.team_mask)

    def observe_group_size(self, members: int) -> None:
        """The largest group in a batch (the critic's member-count normaliser)."""
        self.critic.observe_group_size(members)


class POCALoss(PPOLoss):
    """MA-POCA's loss on a ``POCABatch`` (see the module docstring): PPO's batch fields
    and actor terms, the group's fields, V's and b_i's value losses."""

    stat_names = ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Baseline Loss",
                  "Policy/Update Entropy")
    #: the teammate slots are known once groups report: the first update compiles (one
    #: trace; XLA once per buffer capacity), nothing ahead of time.
    compiles_ahead = False

    def signature(self) -> POCABatch:
        spec, f32 = self.policy.spec, tf.float32
        a = spec.action_spec
        return POCABatch(
            **super().signature()._asdict(),
            team_obs=tuple(tf.TensorSpec([None, None, *o.shape], f32)
                           for o in spec.observation_specs),
            team_continuous_action=tf.TensorSpec([None, None, a.continuous_size], f32),
            team_discrete_action=tf.TensorSpec([None, None, a.discrete_size], tf.int32),
            team_mask=tf.TensorSpec([None, None], f32),
            old_baselines=tuple(tf.TensorSpec([None], f32) for _ in self.streams))

    def make_batch(self, buffer: AgentBuffer, capacity: int) -> POCABatch:
        ppo: PPOBatch = super().make_batch(buffer, capacity)
        n_obs = len(self.policy.spec.observation_specs)
        return POCABatch(
            **ppo._asdict(),
            team_obs=tuple(pad_rows(buffer[team_obs_key(i)], capacity) for i in range(n_obs)),
            team_continuous_action=pad_rows(buffer[BufferKey.TEAM_CONTINUOUS_ACTION], capacity),
            team_discrete_action=pad_rows(buffer[BufferKey.TEAM_DISCRETE_ACTION], capacity),
            team_mask=pad_rows(buffer[BufferKey.TEAM_MASK], capacity),
            old_baselines=tuple(pad_rows(buffer[stream_key(StreamField.BASELINES, s)], capacity)
                                for s in self.streams))

    def __call__(self, batch: POCABatch, beta: tf.Tensor, epsilon: tf.Tensor):
        critic, seq = self.critic, self.sequence_length
        mask = batch.loss_mask
        value_memory = baseline_memory = None
        if self.memory_size:  # [sequences, memory_size] each, at each sequence's first step
            value_memory, baseline_memory = tf.split(batch.critic_memory, 2, axis=1)
        terms = actor_terms(self.policy, batch, epsilon, seq)
        p_loss, entropy = terms.policy_loss, terms.entropy
        values, baselines = critic.value_and_baseline(
            batch.obs, batch.team_obs, batch.team_continuous_action,
            batch.team_discrete_action, batch.team_mask, value_memory, baseline_memory, seq)
        v_loss = value_loss([values[k] for k in self.streams], batch.old_values,
                            batch.returns, epsilon, mask, clip=self.hp.clip_value)
        b_loss = value_loss([baselines[k] for k in self.streams], batch.old_baselines,
                            batch.returns, epsilon, mask, clip=self.hp.clip_value)
        loss = p_loss + 0.5 * (v_loss + 0.5 * b_loss) - beta * entropy
        return loss, {"Losses/Policy Loss": tf.abs(p_loss), "Losses/Value Loss": v_loss,
                      "Losses/Baseline Loss": b_loss, "Policy/Update Entropy": entropy,
                      **terms.diagnostics}


class POCAOptimizer(ActorCriticOptimizer):
    """The reward providers, the attention critic, its ``GroupEstimator`` and PPO's update
    with ``POCALoss``.

    Args: as PPOOptimizer (``critic_runtime`` is unused: the critic's values are computed
    in TensorFlow, once per update).
    """

    def __init__(self, policy: Policy, settings: TrainerSettings, jit_compile: bool = True,
                 critic_runtime: str = "onnxruntime"):
        del critic_runtime
        super().__init__(policy, settings)
        ns = settings.network_settings
        spec = policy.spec
        self.critic = POCACritic(spec.observation_specs, spec.action_spec, self.streams,
                                 ns.hidden_units, ns.num_layers, ns.normalize,
                                 ns.vis_encode_type, memory_size=policy.memory_size,
                                 encoder=ns.encoder)
        loss = POCALoss(policy, self.critic, self.streams, settings,
                        needs_next_obs(self.reward_providers))
        self.ppo_update = PPOUpdate(policy, self.critic, settings, self.reward_providers,
                                    self.bc, loss, jit_compile=jit_compile)
        self.critic_side: GroupEstimator = GroupEstimator(policy, self.critic, self.streams,
                                                          ns.normalize)

    def observe_group_size(self, members: int) -> None:
        self.critic_side.observe_group_size(members)

    def group_estimates(self, trajectories: Sequence[Trajectory], steps: GroupBatch,
                        after: GroupBatch) -> GroupEstimates:
        return self.critic_side.group_estimates(trajectories, steps, after)
