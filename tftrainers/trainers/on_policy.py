"""OnPolicyTrainer: trajectories -> targets -> update buffer -> one compiled update.

    class PPOTrainer(OnPolicyTrainer):
        def create_optimizer(self): return PPOOptimizer(self.policy, self.settings)
        def compute_targets(self, trajectories): ... GAE per reward stream -> buffer fields

Drained trajectories wait until ``buffer_size`` real steps have arrived; then the algorithm
turns them into training targets (``compute_targets``: GAE for PPO, lambda returns minus
baselines for POCA), advantages are normalised over the whole buffer (as ML-Agents), the
optimizer runs its update (in a thread with ``threaded: true``) and the new weights go to
the acting side. No GradientTape here: the optimizer owns losses and the compiled update.
"""
from __future__ import annotations

import abc
from typing import Dict, List, Optional

import numpy as np

from tftrainers.envs import BehaviorSpec
from tftrainers.processing import AgentBuffer, BufferKey, Trajectory, next_obs_key
from tftrainers.rewards import REWARD_PROVIDERS, RewardBatch
from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.timers import TIMERS
from tftrainers.trainers.base import Trainer
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.policy import Policy


#: Advantages are divided by their spread over the buffer, but never by less than this
#: (the default of ``hyperparameters.advantage_scale_floor``).
ADVANTAGE_SCALE_FLOOR = 1e-4


def normalized_advantages(advantages: np.ndarray, mask: np.ndarray,
                          floor: float = ADVANTAGE_SCALE_FLOOR) -> np.ndarray:
    """``advantages`` centred and scaled over the real steps (``mask`` 1) of the buffer, as
    ML-Agents normalises them, except that the scale is at least ``floor``.

    Once a task is solved to the same return every episode (Hallway), the value fits the
    returns to float precision and the advantages are rounding noise around 1e-8; ML-Agents'
    ``std + 1e-10`` blows that noise up to unit size, and every update then pushes the
    policy in a random direction at full strength. Over a few hundred updates that walk
    broke a solved Hallway policy (0.98 to chance, 460k steps into seed 0). With the floor,
    noise stays noise and the entropy bonus keeps acting; real advantages (a spread above
    1e-4, i.e. any reward signal a policy can still learn from) are scaled exactly as before.

    A floor near the rewards' scale (``hyperparameters.advantage_scale_floor``) goes
    further: once a policy is solved and nearly deterministic, the buffer's spread comes
    from the one or two episodes where it sampled a rare action, and dividing by it turns
    that episode's advantages into 10-sigma ones (a wrong goal's -1.1 into -13.7, one
    wasted step's -0.013 into -9.5). After a quiet period Adam's second moments are small,
    so that one episode's gradient moves every weight by up to ~3 learning rates at once;
    in Hallway this erased the memory's cue (docs/experiments/2026-11-26-hallway-cue.md).
    """
    real = mask > 0
    if not real.any():
        return np.zeros_like(advantages, dtype=np.float32)
    mean, std = advantages[real].mean(), advantages[real].std()
    return ((advantages - mean) / max(std, floor) * mask).astype(np.float32)


class OnPolicyTrainer(Trainer):
    """Base of PPO-style trainers; subclasses create the optimizer and compute targets."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 context: TrainerContext):
        super().__init__(behavior_name, spec, settings, context)
        unavailable = [n for n in settings.reward_signals if n not in REWARD_PROVIDERS]
        if unavailable:  # in the schema, not trainable by this version
            raise ConfigError(f"behaviors.{self.behavior_name}.reward_signals.{unavailable[0]}: "
                              f"not available in this version; available: "
                              f"{', '.join(REWARD_PROVIDERS)}")
        self._policy = self.create_policy()
        self.optimizer = self.create_optimizer()
        if not self.inference:
            self.optimizer.start_compile()  # beside the act conversion and the first steps
        self.buffer = AgentBuffer(self._policy.sequence_length)
        self.rng = np.random.default_rng(self.seed + 1)  # minibatch shuffles
        self.updates = 0
        self.last_update: Dict[str, float] = {}  # stats of the latest update
        self._pending: List[Trajectory] = []  # drained, not yet in the update buffer
        self._pending_steps = 0
        # Per stream, each agent's reward so far in its current episode (ML-Agents reports
        # Policy/<Signal> Reward per episode); filled a trajectory at a time.
        self._episode_signal_rewards: Dict[str, Dict[int, float]] = {
            s: {} for s in self.optimizer.streams}

    @abc.abstractmethod
    def create_optimizer(self):
        """The algorithm's optimizer (owns critic, reward providers, losses, update)."""

    @abc.abstractmethod
    def compute_targets(self, trajectories: List[Trajectory]) -> None:
        """Appends ``trajectories`` to ``self.buffer`` with their training targets
        (advantages, returns, values...)."""

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def reward_providers(self):
        return self.optimizer.reward_providers

    def value_critic(self):
        return self.optimizer.critic

    def trackables(self) -> Dict[str, object]:
        return {**self._policy.trackables(), **self.optimizer.trackables()}

    def acting_weights(self) -> np.ndarray:
        return self._policy.flat_weights()

    # --- learning ---------------------------------------------------------------------------
    def process_trajectories(self, trajectories: List[Trajectory]) -> None:
        # Targets are computed in one batch once there is enough for an update: one critic
        # call and one normalizer update for thousands of steps.
        self._pending.extend(trajectories)
        # Real experiences, not sequence padding, count towards buffer_size: with memory,
        # short episodes would otherwise trigger updates mostly of padding.
        self._pending_steps += sum(len(t) for t in trajectories)
        if self._pending_steps >= self.settings.hyperparameters.buffer_size:
            self.wait_for_update()
            with TIMERS.timed("targets"):
                self.compute_targets(self._pending)
            self._pending, self._pending_steps = [], 0
            self._update()

    def update_if_ready(self) -> None:
        if self._update_thread is not None and not self._update_thread.is_alive():
            self.wait_for_update()

    def _update(self) -> None:
        """Normalises advantages over the buffer and runs the optimizer on it (in a thread
        when ``threaded``); the trainer collects into a fresh buffer meanwhile."""
        mask = self.buffer[BufferKey.MASK]
        self.buffer[BufferKey.ADVANTAGES] = normalized_advantages(
            self.buffer[BufferKey.ADVANTAGES], mask,
            self.settings.hyperparameters.advantage_scale_floor)
        buffer, step = self.buffer, self.step
        self.buffer = AgentBuffer(self._policy.sequence_length)

        def work():
            with TIMERS.timed("update"):
                return self.optimizer.update(buffer, step, self.rng)
        self.run_update(work)

    def _finish_update(self, stats: Dict[str, float]) -> None:
        self.last_update = stats
        self.updates += 1
        for key, value in stats.items():
            self.stats.set_stat(key, value)
        self.publish_weights(self.optimizer.actor_weights)

    def append_to_buffer(self, trajectories: List[Trajectory], fields: List[Dict],
                         computed: Dict) -> None:
        """Appends the trajectories' ``fields`` (their ``to_fields()``) with the targets
        ``computed`` for them ({key: [steps]}, concatenated in the trajectories' order) to
        the update buffer: one chunk without memory, else each trajectory on its own, so
        that its last sequence is padded and every sequence starts on its own steps."""
        if self.buffer.sequence_length == 1:  # nothing to pad: the batch as one chunk
            steps = {key: np.concatenate([f[key] for f in fields]) for key in fields[0]}
            self.buffer.append({**steps, **computed})
            return
        offset = 0
        for t, steps in zip(trajectories, fields):
            end = offset + len(t)
            self.buffer.append({**steps, **{k: v[offset:end] for k, v in computed.items()}})
            offset = end

    # --- reward signals (shared by PPO and POCA) ---------------------------------------------
    def _evaluate_rewards(self, trajectories: List[Trajectory], fields: List[Dict],
                          obs: List[np.ndarray],
                          environment_reward: Optional[np.ndarray] = None
                          ) -> Dict[str, np.ndarray]:
        """Each stream's reward for every step of ``trajectories`` (concatenated), times its
        strength. ``fields``: the trajectories' ``to_fields()``; ``environment_reward``:
        what the extrinsic stream reads (default: the env rewards; POCA adds the group's)."""
        providers = self.optimizer.reward_providers
        next_obs = [np.concatenate([f[next_obs_key(i)] for f in fields])
                    for i in range(len(obs))] if any(
            p.needs_next_obs for p in providers.values()) else obs
        batch = RewardBatch(
            obs=tuple(obs), next_obs=tuple(next_obs),
            continuous_action=np.concatenate([t.actions.continuous for t in trajectories]),
            discrete_action=np.concatenate([t.actions.discrete for t in trajectories]),
            environment_reward=(np.concatenate([t.rewards for t in trajectories])
                                if environment_reward is None else environment_reward),
            done=np.concatenate([f[BufferKey.DONE] for f in fields]),
            mask=np.ones(len(obs[0]), np.float32))
        out = {}
        with TIMERS.timed("reward providers"):
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

    STATE_KEYS = Trainer.STATE_KEYS + ("trainer_rng",)

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "trainer_rng": self.rng.bit_generator.state}

    def restore_state(self, state: dict) -> None:
        super().restore_state(state)
        self.rng.bit_generator.state = state["trainer_rng"]

    def weights_restored(self) -> None:
        self.optimizer.weights_changed()
        super().weights_restored()
