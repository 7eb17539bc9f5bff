"""POCATrainer: MA-POCA (Cohen et al. 2021) on the OnPolicyTrainer base.

Per update, for every drained trajectory (docs/dev/architecture.md#algorithm-facts, ML-Agents'
``poca/trainer.py``):

- each step's extrinsic reward is the agent's own reward + its teammates' own rewards +
  the group reward (other streams, e.g. curiosity or RND, score the agent's own steps);
- the centralised critic gives V(every member's observation) and the agent's baseline
  b_i(its observation, its teammates' observations and actions) per step (with memory,
  each from its own LSTM state carried through the agent's trajectories);
- lambda returns ``G_t = r_t + gamma ((1 - lambd) V_{t+1} + lambd G_{t+1})`` bootstrap
  from V of the group after the last step, zeroed only when the agent's episode really
  ended AND its whole group's did (``done and group_done``): a member that left early
  (died) keeps credit for what its group achieves afterwards through that value
  (``hyperparameters.leaver_bootstrap``: "remaining", the default, V of the members still
  present; "group", V of every member after its last step, itself included, as ML-Agents);
- advantage ``A = G - b_i`` per stream, averaged over streams and normalised over the
  buffer by the base; V and b_i both regress on G (``POCAOptimizer``).

``Environment/Group Cumulative Reward`` is reported for each member present when its
group's episode ends; ``Policy/<Signal> Value Estimate`` and ``... Baseline Estimate``
per update.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from tftrainers.envs import BehaviorSpec
from tftrainers.processing import (BufferKey, EpisodeStats, StreamField, Trajectory, stream_key,
                                   team_obs_key)
from tftrainers.returns import batched_lambda_returns, pad_batch, unpad_batch
from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.stats import GROUP_CUMULATIVE_REWARD
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.on_policy import OnPolicyTrainer
from tftrainers.trainers.poca.optimizer import GroupBatch, POCAOptimizer


class POCATrainer(OnPolicyTrainer):
    """Trains one behavior whose agents cooperate in groups with MA-POCA."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 context: TrainerContext):
        units = settings.network_settings.hidden_units
        if units % 4:
            raise ConfigError(f"behaviors.{behavior_name}.network_settings.hidden_units: {units} "
                              f"does not split into the critic's 4 attention heads; allowed: a "
                              f"multiple of 4")
        self._team_width = 1  # teammate slots in the update buffer (the largest seen)
        super().__init__(behavior_name, spec, settings, context)

    def create_optimizer(self) -> POCAOptimizer:
        return POCAOptimizer(self.policy, self.settings, jit_compile=self.jit_compile,
                             critic_runtime=self.act_runtime)

    def value_critic(self):
        """No value signature in the SavedModel: V needs the whole group's observations."""
        return None

    def record_episodes(self, episodes: EpisodeStats) -> None:
        """The base's episode stats, and each ended group's return."""
        super().record_episodes(episodes)
        ended = episodes.group_done
        if ended.any():
            self.stats.add_stat(GROUP_CUMULATIVE_REWARD, episodes.group_cumulative_reward[ended])

    # --- targets ------------------------------------------------------------------------------
    def _team(self, t: Trajectory, width: int) -> Tuple:
        """The trajectory's group fields with ``width`` teammate slots (zeros and mask 0
        for slots it does not have; all of them for an agent without a group)."""
        n, specs = len(t), self.spec.observation_specs
        a = self.spec.action_spec
        have = 0 if t.teammate_mask is None else t.teammate_mask.shape[1]

        def widen(array, lead, shape, dtype):
            out = np.zeros((*lead, width, *shape), dtype)
            if have:
                out[(slice(None),) * len(lead) + (slice(0, have),)] = array
            return out
        obs = [widen(None if not have else t.teammate_obs[i], (n,), o.shape, np.float32)
               for i, o in enumerate(specs)]
        cont = widen(None if not have else t.teammate_actions.continuous, (n,),
                     (a.continuous_size,), np.float32)
        disc = widen(None if not have else t.teammate_actions.discrete, (n,),
                     (a.discrete_size,), np.int32)
        mask = widen(None if not have else t.teammate_mask, (n,), (), np.float32)
        next_obs = [widen(None if not have else t.next_teammate_obs[i], (), o.shape, np.float32)
                    for i, o in enumerate(specs)]
        next_mask = widen(None if not have else t.next_teammate_mask, (), (), np.float32)
        mates = (np.zeros(n, np.float32) if t.groupmate_rewards is None
                 else t.groupmate_rewards)
        return obs, cont, disc, mask, next_obs, next_mask, mates

    def compute_targets(self, trajectories: List[Trajectory]) -> None:
        """Lambda returns with the group's value and baseline advantages, into the buffer."""
        optimizer = self.optimizer
        n_obs = len(self.spec.observation_specs)
        self._team_width = width = max([self._team_width] + [
            t.teammate_mask.shape[1] for t in trajectories if t.teammate_mask is not None])
        teams = [self._team(t, width) for t in trajectories]
        obs = [np.concatenate([t.obs[i] for t in trajectories]) for i in range(n_obs)]
        team = GroupBatch(
            obs=obs,
            team_obs=[np.concatenate([g[0][i] for g in teams]) for i in range(n_obs)],
            team_continuous=np.concatenate([g[1] for g in teams]),
            team_discrete=np.concatenate([g[2] for g in teams]),
            team_mask=np.concatenate([g[3] for g in teams]))
        after = GroupBatch(
            obs=[np.stack([t.next_obs[i] for t in trajectories]) for i in range(n_obs)],
            team_obs=[np.stack([g[4][i] for g in teams]) for i in range(n_obs)],
            team_continuous=np.zeros((len(trajectories), width,
                                      self.spec.action_spec.continuous_size), np.float32),
            team_discrete=np.zeros((len(trajectories), width,
                                    self.spec.action_spec.discrete_size), np.int32),
            team_mask=np.stack([g[5] for g in teams]))
        if self.settings.hyperparameters.leaver_bootstrap == "remaining":
            after = _without_leavers(after, np.array([t.done and not t.group_done
                                                      for t in trajectories]))
        optimizer.update_normalization(obs)
        optimizer.observe_group_size(1 + max(team.team_mask.sum(axis=1).max(),
                                             after.team_mask.sum(axis=1).max()))
        # With memory, V and b_i run through each agent's trajectories from the states its
        # previous one left (the update's sequences start from the states stored here).
        estimates = optimizer.group_estimates(trajectories, team, after)
        values, baselines, bootstrap = estimates.values, estimates.baselines, estimates.bootstrap

        lengths = np.array([len(t) for t in trajectories])
        bounds = np.cumsum(lengths)[:-1]
        # Zero after the last step only when this agent's and its whole group's episode
        # really ended: a member that left early bootstraps from its group's value.
        ended = np.array([t.done and t.group_done for t in trajectories])
        fields = [t.to_fields() for t in trajectories]
        for f, g in zip(fields, teams):  # the group fields with the buffer's slot count
            f.update({team_obs_key(i): g[0][i] for i in range(n_obs)})
            f.update({BufferKey.TEAM_CONTINUOUS_ACTION: g[1], BufferKey.TEAM_DISCRETE_ACTION: g[2],
                      BufferKey.TEAM_MASK: g[3], BufferKey.GROUPMATE_REWARDS: g[6]})
        group_reward = np.concatenate([t.rewards + g[6] + t.group_reward
                                       for t, g in zip(trajectories, teams)])
        stream_rewards = self._evaluate_rewards(trajectories, fields, obs, group_reward)
        self._report_signal_rewards(trajectories, stream_rewards, bounds)
        advantages = []
        computed = {}
        for name, provider in optimizer.reward_providers.items():
            rewards, _ = pad_batch(np.split(stream_rewards[name], bounds))
            step_values, _ = pad_batch(np.split(values[name], bounds))
            boot = (bootstrap[name] if provider.ignore_done
                    else np.where(ended, 0.0, bootstrap[name]))
            returns = unpad_batch(batched_lambda_returns(
                rewards, step_values, boot, lengths, gamma=provider.gamma,
                lambd=self.settings.hyperparameters.lambd), lengths)
            advantages.append(returns - baselines[name])
            computed[stream_key(StreamField.RETURNS, name)] = returns
            computed[stream_key(StreamField.VALUES, name)] = values[name]
            computed[stream_key(StreamField.BASELINES, name)] = baselines[name]
            self.stats.add_stat(f"Policy/{provider.stat_name} Value Estimate", values[name])
            self.stats.add_stat(f"Policy/{provider.stat_name} Baseline Estimate",
                                baselines[name])
        computed[BufferKey.ADVANTAGES] = np.mean(advantages, axis=0).astype(np.float32)
        if estimates.memory is not None:
            computed[BufferKey.CRITIC_MEMORY] = estimates.memory
        self.append_to_buffer(trajectories, fields, computed)


def _without_leavers(after: GroupBatch, leaving: np.ndarray) -> GroupBatch:
    """``after`` with each leaving row's own observation replaced by its first present
    teammate's (that slot then masked): V of the members still present, without the one
    that left. Rows without a present teammate are unchanged."""
    mask = after.team_mask
    rows = np.flatnonzero(leaving & (mask > 0).any(axis=1))
    if not len(rows):
        return after
    first = np.argmax(mask[rows] > 0, axis=1)
    obs = [o.copy() for o in after.obs]
    for o, t in zip(obs, after.team_obs):
        o[rows] = t[rows, first]
    team_mask = mask.copy()
    team_mask[rows, first] = 0.0
    return after._replace(obs=obs, team_mask=team_mask)
