"""PPOTrainer: GAE per reward stream over drained trajectories, then ML-Agents' PPO update.

See ``OnPolicyTrainer`` for the loop and ``PPOOptimizer`` for the loss.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from tftrainers.processing import BufferKey, StreamField, Trajectory, next_obs_key, stream_key
from tftrainers.returns import batched_gae, pad_batch, unpad_batch
from tftrainers.rewards import RewardBatch
from tftrainers.trainers.on_policy import OnPolicyTrainer
from tftrainers.trainers.ppo.optimizer import PPOOptimizer


class PPOTrainer(OnPolicyTrainer):
    """Trains one behavior with PPO."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Per stream, each agent's reward so far in its current episode (ML-Agents reports
        # Policy/<Signal> Reward per episode); filled a trajectory at a time.
        self._episode_signal_rewards: Dict[str, Dict[int, float]] = {
            s: {} for s in self.optimizer.streams}

    def create_optimizer(self) -> PPOOptimizer:
        return PPOOptimizer(self.policy, self.settings, jit_compile=self.jit_compile,
                            critic_runtime=self.act_runtime)

    def compute_targets(self, trajectories: List[Trajectory]) -> None:
        """GAE per reward stream for a batch of trajectories, into the update buffer."""
        optimizer = self.optimizer
        n_obs = len(self.spec.observation_specs)
        obs = [np.concatenate([t.obs[i] for t in trajectories]) for i in range(n_obs)]
        optimizer.update_normalization(obs)
        # The critic values every step and bootstraps every trajectory, as ML-Agents'
        # trajectory processing does (with the normalizer just updated).
        critic = optimizer.critic_values(trajectories, obs)
        lengths = np.array([len(t) for t in trajectories])
        bounds = np.cumsum(lengths)[:-1]
        done = np.array([t.done for t in trajectories])
        # Each trajectory's fields once: the reward signals read their next observations
        # and the update buffer takes them whole.
        fields = [t.to_fields() for t in trajectories]
        stream_rewards = self._evaluate_rewards(trajectories, fields, obs)
        self._report_signal_rewards(trajectories, stream_rewards, bounds)
        advantages = []
        returns: Dict[str, np.ndarray] = {}
        for name, provider in optimizer.reward_providers.items():
            rewards, _ = pad_batch(np.split(stream_rewards[name], bounds))
            values, _ = pad_batch(np.split(critic.step[name], bounds))
            # The value after a real end is 0 for the extrinsic stream; a cut (interrupted,
            # time horizon) bootstraps from the critic, and so does every end for novelty
            # streams (curiosity, RND), which do not stop when an episode does.
            bootstrap = (critic.bootstrap[name] if provider.ignore_done
                         else np.where(done, 0.0, critic.bootstrap[name]))
            adv = batched_gae(rewards, values, bootstrap, lengths, gamma=provider.gamma,
                              lambd=self.settings.hyperparameters.lambd)
            advantages.append(adv)
            returns[name] = unpad_batch(adv + values, lengths)
            self.stats.add_stat(f"Policy/{provider.stat_name} Value Estimate", critic.step[name])
        advantage = unpad_batch(np.mean(advantages, axis=0), lengths)
        computed = {BufferKey.ADVANTAGES: advantage}
        for name in optimizer.streams:
            computed[stream_key(StreamField.RETURNS, name)] = returns[name]
            computed[stream_key(StreamField.VALUES, name)] = critic.step[name]
        if critic.memory is not None:
            computed[BufferKey.CRITIC_MEMORY] = critic.memory
        if self.buffer.sequence_length == 1:  # nothing to pad: the batch as one chunk
            steps = {key: np.concatenate([f[key] for f in fields]) for key in fields[0]}
            self.buffer.append({**steps, **computed})
            return
        offset = 0
        for t, steps in zip(trajectories, fields):
            end = offset + len(t)
            self.buffer.append({**steps, **{k: v[offset:end] for k, v in computed.items()}})
            offset = end

    def _evaluate_rewards(self, trajectories: List[Trajectory], fields: List[Dict],
                          obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """Each stream's reward for every step of ``trajectories`` (concatenated), times its
        strength. ``fields``: the trajectories' ``to_fields()``."""
        providers = self.optimizer.reward_providers
        next_obs = [np.concatenate([f[next_obs_key(i)] for f in fields])
                    for i in range(len(obs))] if any(
            p.needs_next_obs for p in providers.values()) else obs
        batch = RewardBatch(
            obs=tuple(obs), next_obs=tuple(next_obs),
            continuous_action=np.concatenate([t.actions.continuous for t in trajectories]),
            discrete_action=np.concatenate([t.actions.discrete for t in trajectories]),
            environment_reward=np.concatenate([t.rewards for t in trajectories]),
            done=np.concatenate([f[BufferKey.DONE] for f in fields]),
            mask=np.ones(len(obs[0]), np.float32))
        out = {}
        for name, provider in providers.items():
            provider.update_normalization(batch.next_obs)
            out[name] = provider.evaluate(batch) * np.float32(provider.strength)
        return out

    def _report_signal_rewards(self, trajectories: List[Trajectory],
                               stream_rewards: Dict[str, np.ndarray],
                               bounds: np.ndarray) -> None:
        """Adds each stream's per-episode reward (``Policy/<Signal> Reward``) for the
        episodes these trajectories end (``bounds``: where each but the first starts)."""
        starts = np.concatenate([[0], bounds]).astype(np.int64)
        for name, provider in self.optimizer.reward_providers.items():
            sums = np.add.reduceat(stream_rewards[name], starts) if len(starts) else []
            running = self._episode_signal_rewards[name]
            ended = []
            for t, total in zip(trajectories, sums):
                running[t.agent_id] = running.get(t.agent_id, 0.0) + float(total)
                if t.episode_ended:
                    ended.append(running.pop(t.agent_id))
            if ended:
                self.stats.add_stat(f"Policy/{provider.stat_name} Reward", np.array(ended))
