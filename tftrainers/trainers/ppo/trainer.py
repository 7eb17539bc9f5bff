"""PPOTrainer: GAE per reward stream over drained trajectories, then ML-Agents' PPO update.

See ``OnPolicyTrainer`` for the loop and ``PPOOptimizer`` for the loss.
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from tftrainers.processing import BufferKey, StreamField, Trajectory, stream_key
from tftrainers.returns import batched_gae, pad_batch, unpad_batch
from tftrainers.trainers.on_policy import OnPolicyTrainer
from tftrainers.trainers.ppo.optimizer import PPOOptimizer


class PPOTrainer(OnPolicyTrainer):
    """Trains one behavior with PPO."""

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
        self.append_to_buffer(trajectories, fields, computed)
