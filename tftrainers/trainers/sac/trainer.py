"""SACTrainer: trajectories -> replay buffer -> many gradient steps per compiled call.

    trainer = create_trainer("Ball3D", spec, settings, run_dir)   # trainer_type: sac
    ...the base's loop: drain, count steps, process_trajectories, publish, report, save

Every drained trajectory updates the policy's normalizer and goes into the replay buffer.
Once the buffer holds ``batch_size`` transitions and ``buffer_init_steps`` steps were
collected, the trainer runs the gradient steps that are due - one per ``steps_per_update``
agent steps since ``buffer_init_steps`` (ML-Agents' schedule) - as one compiled call per
chunk of at most ``MAX_STEPS_PER_CALL`` steps, each step on its own uniformly sampled
minibatch, and publishes the new weights. The number of gradient steps done is derived
from the step count on resume, so a resumed run never catches up on updates (ML-Agents
#4062). With ``save_replay_buffer`` the buffer is written beside every checkpoint and read
back by ``--resume``. With ``network_settings.memory`` the buffer keeps the policy's and the
value network's memory per step and a minibatch is ``batch_size / sequence_length`` whole
sequences (``replay_buffer``, ``optimizer``).
"""
from __future__ import annotations

import glob
import os
import re
from typing import Dict, List, Optional

import numpy as np

from tftrainers.envs import BehaviorSpec
from tftrainers.envs.checks import available_memory
from tftrainers.processing import Trajectory
from tftrainers.rewards import RewardBatch
from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.timers import TIMERS
from tftrainers.trainers.base import Trainer
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.policy import Policy
from tftrainers.trainers.sac.optimizer import SACBatch, SACOptimizer
from tftrainers.trainers.sac.replay_buffer import ReplayBuffer
from tftrainers.trainers.schedules import LEARNING_RATE_FLOOR, decayed_value

#: Most gradient steps in one compiled call (the sampled minibatches of a call are built
#: at once: K x batch_size rows).
MAX_STEPS_PER_CALL = 256
#: A call's minibatches are padded to one of these counts, so that XLA compiles the update
#: for two shapes only (the padding is sampled but not trained on).
STEP_BUCKETS = (16, MAX_STEPS_PER_CALL)
BUFFER_FILE = re.compile(r"^replay_buffer-(\d+)\.npz$")


class SACTrainer(Trainer):
    """Trains one behavior with soft actor-critic (see the module doc)."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 context: TrainerContext):
        super().__init__(behavior_name, spec, settings, context)
        settings, key = self.settings, f"behaviors.{self.behavior_name}"
        hp = self.hp = settings.hyperparameters
        self._policy = self.create_policy()
        self.optimizer: Optional[SACOptimizer] = None
        self.buffer: Optional[ReplayBuffer] = None
        if not self.inference:
            self.optimizer = SACOptimizer(self._policy, settings, seed=self.seed,
                                          jit_compile=self.jit_compile)
            self.buffer = ReplayBuffer.for_spec(  # not touched yet
                self.spec, hp.buffer_size, self._policy.memory_size,
                self.optimizer.sequence_length)
            available = available_memory()
            if available is not None and self.buffer.nbytes > available:
                raise ConfigError(
                    f"{key}.hyperparameters.buffer_size: {hp.buffer_size} transitions of "
                    f"{self.buffer.bytes_per_row} bytes need {self.buffer.nbytes / 1e9:.1f} GB, "
                    f"more than the {available / 1e9:.1f} GB of memory available; lower it "
                    f"(ML-Agents #4601: a replay buffer that does not fit fails much later)")
        self.rng = np.random.default_rng(self.seed + 1)  # replay sampling
        self.gradient_steps = 0
        self.reward_signal_steps = 0  # of the learned reward signals (curiosity, RND, GAIL)
        self.last_update: Dict[str, float] = {}
        # threaded: true: the gradient steps run in a thread (run_update) while acting goes
        # on with the previous weights; what arrives meanwhile waits in _pending (module doc).
        self._pending: List[Trajectory] = []
        # Per stream, each agent's reward so far in its current episode.
        self._episode_rewards: Dict[str, Dict[int, float]] = {}

    def create_policy(self) -> Policy:
        import keras
        import tensorflow as tf
        tf.random.set_seed(self.seed)
        keras.utils.set_random_seed(self.seed)
        ns = self.settings.network_settings
        return Policy(self.spec, ns, seed=self.seed,
                      deterministic=self.inference and ns.deterministic,
                      jit_compile=self.jit_compile, tanh_squash=True)

    @property
    def policy(self) -> Policy:
        return self._policy

    def acting_setup(self):
        """The base's, with env workers held to about one update call of steps per weight
        version (the base's ``buffer_size`` is PPO's update size; a replay buffer's
        50000+ let workers run tens of thousands of steps past max_steps)."""
        setup = super().acting_setup()
        if self.inference:
            return setup
        return setup._replace(steps_per_version=self.steps_ahead())

    def steps_ahead(self) -> int:
        """How many steps acting may run ahead of the weights it acts with: about one
        update call's worth (env workers per weight version; ``threaded`` while an update
        runs), so that acting cannot outrun ``steps_per_update``'s ratio."""
        steps = int(MAX_STEPS_PER_CALL * self.hp.steps_per_update)
        return max(steps, self.settings.time_horizon)

    def trackables(self) -> Dict[str, object]:
        if self.optimizer is None:
            return dict(self._policy.trackables())
        return {**self._policy.trackables(), **self.optimizer.trackables()}

    # --- learning ----------------------------------------------------------------------------
    def process_trajectories(self, trajectories: List[Trajectory]) -> None:
        if self._update_thread is not None:  # the buffer and networks are the update's now
            self._pending.extend(trajectories)
            if sum(len(t) for t in self._pending) < self.steps_ahead():
                return
            # Acting is an update call's worth of steps ahead: it waits for the update.
            self.wait_for_update()
            trajectories, self._pending = self._pending, []
        self._learn_from(trajectories)

    def update_if_ready(self) -> None:
        """With ``threaded``: takes a finished update's weights and stats, then learns from
        what arrived while it ran (the next update starts with every step due by then)."""
        if self._update_thread is not None:
            if self._update_thread.is_alive():
                return
            self.wait_for_update()
        if self._pending:
            pending, self._pending = self._pending, []
            self._learn_from(pending)

    def _learn_from(self, trajectories: List[Trajectory]) -> None:
        """Normalizers, replay buffer and reports take the trajectories; then the update."""
        n_obs = len(self.spec.observation_specs)
        obs = [np.concatenate([t.obs[i] for t in trajectories]) for i in range(n_obs)]
        self._policy.update_normalization(obs)
        values, critic_memory = self.optimizer.critic_values(trajectories, obs)
        bounds = np.cumsum([len(t) for t in trajectories])[:-1]
        critic_memories = (np.split(critic_memory, bounds) if critic_memory is not None
                           else [None] * len(trajectories))
        for t, memory in zip(trajectories, critic_memories):
            self.buffer.add_trajectory(t, memory)
        following = [t.next_obs_per_step() for t in trajectories]
        next_obs = [np.concatenate([f[i] for f in following]) for i in range(n_obs)]
        for provider in self.optimizer.reward_providers.values():
            provider.update_normalization(next_obs)
        self._report(trajectories, obs, next_obs, values)
        self._update()

    def owed(self, steps_per_update: float) -> int:
        """Updates owed in all: one per ``steps_per_update`` agent steps collected after
        ``buffer_init_steps`` (ML-Agents' schedule)."""
        return max(0, int((self.step - self.hp.buffer_init_steps) / steps_per_update))

    def due_steps(self) -> int:
        """Gradient steps owed and not done yet."""
        return max(0, self.owed(self.hp.steps_per_update) - self.gradient_steps)

    def _update(self) -> None:
        if len(self.buffer) < self.hp.batch_size or self.step < self.hp.buffer_init_steps:
            return
        due = self.due_steps()
        if not due:
            return
        learning_rate = decayed_value(self.hp.learning_rate_schedule, self.hp.learning_rate,
                                      LEARNING_RATE_FLOOR, self.step, self.settings.max_steps)
        # What the update needs of the step count, read now (the env loop moves it on).
        step, signal_owed = self.step, self.owed(self.hp.reward_signal_steps_per_update)
        self.run_update(lambda: self._gradient_steps(due, signal_owed, step, learning_rate))

    def _gradient_steps(self, due: int, signal_owed: int, step: int,
                        learning_rate: float) -> Dict[str, float]:
        """The ``due`` gradient steps (``signal_owed``: the reward-signal steps owed in all;
        ``step``: the step count they are due at) and the cloning after them; their mean
        stats. Reads the replay buffer and trains the networks: nothing else may touch them
        meanwhile (with ``threaded``, trajectories wait in ``_pending``)."""
        totals: Dict[str, float] = {}
        done = due
        with TIMERS.timed("update"):
            while due:
                k = min(due, MAX_STEPS_PER_CALL)
                # The learned reward signals step on the first minibatches of the call, as
                # many as are owed on their own schedule (at most one per gradient step).
                signal_due = min(k, max(0, signal_owed - self.reward_signal_steps))
                bucket = next(b for b in STEP_BUCKETS if k <= b)
                flags = (np.arange(bucket) < signal_due).astype(np.float32)
                stats = self.optimizer.update(self._sample(bucket, flags), learning_rate,
                                              steps=k)
                self.reward_signal_steps += signal_due
                for name, value in stats.items():
                    totals[name] = totals.get(name, 0.0) + value * k
                self.gradient_steps += k
                due -= k
        # More reward-signal steps owed than gradient steps (reward_signal_steps_per_update
        # below steps_per_update) are dropped, not carried.
        self.reward_signal_steps = signal_owed
        stats = {name: total / done for name, total in totals.items()}
        if self.optimizer.bc is not None:  # after the gradient steps, as ML-Agents
            stats.update(self.optimizer.clone(self.optimizer.bc.plan(step, self.rng)))
        return stats

    def _finish_update(self, stats: Dict[str, float]) -> None:
        self.last_update = stats
        for name, value in stats.items():
            self.stats.set_stat(name, value)
        self.publish_weights()

    def _sample(self, k: int, reward_update: np.ndarray) -> SACBatch:
        """K minibatches of ``batch_size`` transitions, stacked [K, B, ...], with each
        stream's reward (times its strength) evaluated on them now: curiosity and RND
        rewards come from the reward models as they are at this update, as ML-Agents.
        With memory a minibatch is ``batch_size // sequence_length`` (at least one) whole
        sequences, B their steps."""
        seq = self.optimizer.sequence_length
        if self.buffer.memory_size:
            sequences = max(self.hp.batch_size // seq, 1)
            b = sequences * seq
            t = self.buffer.sequences(self.buffer.sample_sequences(k * sequences, self.rng))
            mask, memory, critic_memory = t.mask, t.memory, t.critic_memory
        else:
            b = self.hp.batch_size
            t = self.buffer.batch(self.buffer.sample(k * b, self.rng))
            mask = np.ones(k * b, np.float32)
            memory = critic_memory = np.zeros((k * b, 0), np.float32)
        batch = RewardBatch(obs=t.obs, next_obs=t.next_obs, continuous_action=t.continuous,
                            discrete_action=t.discrete, environment_reward=t.reward,
                            done=t.done, mask=mask)
        rewards = np.stack([provider.evaluate(batch) * np.float32(provider.strength)
                            for provider in self.optimizer.reward_providers.values()],
                           axis=-1)

        def stack(x):
            return x.reshape(k, len(x) // k, *x.shape[1:])
        return SACBatch(obs=tuple(stack(o) for o in t.obs),
                        next_obs=tuple(stack(o) for o in t.next_obs),
                        continuous=stack(t.continuous), discrete=stack(t.discrete),
                        action_mask=stack(t.action_mask), rewards=stack(rewards),
                        done=stack(t.done), reward_update=reward_update, mask=stack(mask),
                        memory=stack(memory), critic_memory=stack(critic_memory))

    def _report(self, trajectories: List[Trajectory], obs: List[np.ndarray],
                next_obs: List[np.ndarray], values: Dict[str, np.ndarray]) -> None:
        """``Policy/<Signal> Value`` (``values``: V over the drained steps) and
        ``Policy/<Signal> Reward`` per finished episode, each stream's reward (times its
        strength) as its model scores the drained steps (extrinsic: the environment's plus
        the group's)."""
        batch = RewardBatch(
            obs=tuple(obs), next_obs=tuple(next_obs),
            continuous_action=np.concatenate([t.actions.continuous for t in trajectories]),
            discrete_action=np.concatenate([t.actions.discrete for t in trajectories]),
            environment_reward=np.concatenate([t.rewards + t.group_reward
                                               for t in trajectories]),
            done=np.concatenate([np.eye(1, len(t), len(t) - 1, dtype=np.float32)[0] * t.done
                                 for t in trajectories]),
            mask=np.ones(len(obs[0]), np.float32))
        bounds = np.cumsum([len(t) for t in trajectories])[:-1]
        for name, provider in self.optimizer.reward_providers.items():
            self.stats.add_stat(f"Policy/{provider.stat_name} Value", values[name])
            sums = [float(x.sum()) for x in
                    np.split(provider.evaluate(batch) * np.float32(provider.strength), bounds)]
            running = self._episode_rewards.setdefault(name, {})
            ended = []
            for t, total in zip(trajectories, sums):
                running[t.agent_id] = running.get(t.agent_id, 0.0) + total
                if t.episode_ended:
                    ended.append(running.pop(t.agent_id))
            if ended:
                self.stats.add_stat(f"Policy/{provider.stat_name} Reward", np.array(ended))

    # --- checkpoints -------------------------------------------------------------------------
    STATE_KEYS = Trainer.STATE_KEYS + ("trainer_rng",)

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "trainer_rng": self.rng.bit_generator.state,
                "gradient_steps": self.gradient_steps}

    def restore_state(self, state: dict) -> None:
        super().restore_state(state)
        self.rng.bit_generator.state = state["trainer_rng"]
        # Derived from the step, not read: a resumed run owes no past updates (ML-Agents
        # #4062 replayed thousands of them while the environment waited).
        self.gradient_steps = self.owed(self.hp.steps_per_update)
        self.reward_signal_steps = self.owed(self.hp.reward_signal_steps_per_update)
        if self.buffer is not None and self.hp.save_replay_buffer:
            path = self.buffer_path(self.step)
            if os.path.exists(path):
                self.buffer.load(path)
                self.log(f"{self.behavior_name}: replay buffer restored ({len(self.buffer)} "
                         f"transitions)")
            else:
                self.log(f"[WARNING] {self.behavior_name}: no saved replay buffer for step "
                         f"{self.step} ({path}); learning goes on from an empty buffer")

    def buffer_path(self, step: int) -> str:
        """Where the replay buffer of the checkpoint of ``step`` is saved."""
        return os.path.join(self.behavior_dir, f"replay_buffer-{step}.npz")

    def save(self) -> Optional[str]:
        """The checkpoint (base), preceded, with ``save_replay_buffer``, by the replay
        buffer of the same step (written atomically; the previous one is removed once the
        checkpoint is complete, so a checkpoint always has its buffer or none)."""
        write_buffer = (self.buffer is not None and self.hp.save_replay_buffer
                        and not self.inference and self._saved_step != self.step)
        if write_buffer:
            with TIMERS.timed("replay buffer save"):
                self.buffer.save(self.buffer_path(self.step))
        path = super().save()
        if write_buffer and path is not None:
            for old in glob.glob(os.path.join(self.behavior_dir, "replay_buffer-*.npz")):
                match = BUFFER_FILE.match(os.path.basename(old))
                if match and int(match.group(1)) != self.step:
                    os.remove(old)
        return path
