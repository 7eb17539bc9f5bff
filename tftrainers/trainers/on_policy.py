"""OnPolicyTrainer: one behavior's control flow — experience, returns, updates, stats, saves.

    trainer = PPOTrainer("Ball3D", spec, settings, run_dir, seed=0, writers=writers)
    while not trainer.done:
        actions = trainer.act(decision_steps, terminal_steps)   # records, then one policy call
        ...env.set_actions / env.step...
        trainer.advance()   # finished trajectories -> GAE -> buffer -> update when full

No GradientTape here: the optimizer owns losses and the compiled update.
"""
from __future__ import annotations

import abc
import os
import threading
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tftrainers.checkpoint import Checkpointer
from tftrainers.envs import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from tftrainers.processing import (AgentBuffer, AgentProcessor, BufferKey, StreamField,
                                   Trajectory, next_obs_key, stream_key)
from tftrainers.returns import batched_gae, pad_batch, unpad_batch
from tftrainers.rewards import REWARD_PROVIDERS, RewardBatch, create_reward_providers
from tftrainers.export.artifacts import export_policy, prune_exports
from tftrainers.export.onnx_export import OnnxExportError
from tftrainers.runs import write_behavior_spec
from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.stats import (CUMULATIVE_REWARD, EPISODE_LENGTH, ProgressDisplay, StatsReporter,
                              StatsWriter)
from tftrainers.trainers.policy import Policy


class OnPolicyTrainer(abc.ABC):
    """Base of PPO-style trainers; subclasses create the optimizer."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 run_dir: str, seed: int = 0, writers: Sequence[StatsWriter] = (),
                 progress: Optional[ProgressDisplay] = None, inference: bool = False,
                 jit_compile: bool = True, act_runtime: str = "onnxruntime", log=print):
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        self.inference = inference
        self.log = log
        if getattr(settings.hyperparameters, "shared_critic", False):
            raise ConfigError(f"behaviors.{behavior_name}.hyperparameters.shared_critic: true is "
                              f"not available in this version; allowed: false")
        self.streams = list(settings.reward_signals)
        tf.random.set_seed(seed)
        import keras
        keras.utils.set_random_seed(seed)
        unavailable = [n for n in self.streams if n not in REWARD_PROVIDERS]
        if unavailable:  # in the schema (gail), not trainable by this version
            raise ConfigError(f"behaviors.{behavior_name}.reward_signals.{unavailable[0]}: not "
                              f"available in this version; available: "
                              f"{', '.join(REWARD_PROVIDERS)}")
        self.reward_providers = create_reward_providers(spec, settings.reward_signals)
        self.jit_compile = jit_compile
        self.policy = Policy(spec, settings.network_settings, self.streams, seed=seed,
                             deterministic=inference and settings.network_settings.deterministic,
                             jit_compile=jit_compile)
        self.optimizer = self.create_optimizer()
        if not inference:
            self.optimizer.start_compile()  # beside the act conversion and the first steps
        if act_runtime == "onnxruntime":
            try:
                self.policy.use_onnxruntime()
            except (ImportError, OnnxExportError) as error:
                log(f"[WARNING] {behavior_name}: the act call runs in TensorFlow "
                    f"(onnxruntime: {str(error).splitlines()[0]})")
        # Values are not carried per step (see _process_trajectories): no streams here.
        self.processor = AgentProcessor(spec, settings.time_horizon, (), behavior_name)
        self.buffer = AgentBuffer(self.policy.sequence_length)
        self.rng = np.random.default_rng(seed + 1)  # minibatch shuffles
        self.step = 0
        self.updates = 0
        self.last_update: Dict[str, float] = {}  # stats of the latest update
        # threaded: true (ML-Agents): the update runs beside the env loop, one at a time.
        self._update_thread: Optional[threading.Thread] = None
        self._thread_outcome: Dict[str, object] = {}
        self._last_info = None
        self._pending: List[Trajectory] = []  # finished, not yet in the update buffer
        self._pending_steps = 0
        self._entropy_sum, self._entropy_count = 0.0, 0
        # Per stream, each agent's reward so far in its current episode (ML-Agents reports
        # Policy/<Signal> Reward per episode); filled a trajectory at a time.
        self._episode_signal_rewards: Dict[str, Dict[int, float]] = {s: {} for s in self.streams}
        self.stats = StatsReporter(behavior_name, writers)
        self.progress = progress
        self.run_dir = run_dir
        self.behavior_dir = os.path.join(run_dir, behavior_name)
        if not inference:
            write_behavior_spec(self.behavior_dir, spec)
        self.checkpointer = Checkpointer(os.path.join(self.behavior_dir, "checkpoints"),
                                         behavior_name, settings.keep_checkpoints)
        self._next_summary = settings.summary_freq
        self._next_checkpoint = settings.checkpoint_interval
        self._saved_step = -1

    @abc.abstractmethod
    def create_optimizer(self):
        """The algorithm's optimizer (owns the losses and the compiled update)."""

    @property
    def done(self) -> bool:
        return self.step >= self.settings.max_steps

    # --- the env loop ---------------------------------------------------------------------
    def act(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps) -> ActionTuple:
        """Records the agents' steps and returns actions for ``decision_steps``."""
        if len(terminal_steps):
            self.policy.episode_ended(terminal_steps.agent_id)
        if self.done:  # past max_steps, other behaviors still training: act, stop learning
            if not len(decision_steps):
                return self.spec.action_spec.empty_action(0)
            return self.policy.act(decision_steps)[1]
        self.processor.add_experiences(decision_steps, terminal_steps, self._last_info)
        if not len(decision_steps):
            self._last_info = None
            return self.spec.action_spec.empty_action(0)
        info, env_actions = self.policy.act(decision_steps)
        self._last_info = info
        self.step += len(decision_steps)
        self._entropy_sum += float(self.policy.last_entropy.sum())
        self._entropy_count += len(decision_steps)
        return env_actions

    def advance(self) -> None:
        """Processes finished trajectories, updates when the buffer is full, reports, saves."""
        if self.done:  # finished: one final checkpoint, then nothing more to do
            if self._saved_step != self.step and not self.inference:
                self.stats.write_stats(self.step)
                self.save()
            return
        if self._update_thread is not None and not self._update_thread.is_alive():
            self._wait_for_update()
        episodes = self.processor.pop_episode_stats()
        if len(episodes):
            self.stats.add_stat(CUMULATIVE_REWARD, episodes.cumulative_reward)
            self.stats.add_stat(EPISODE_LENGTH, episodes.episode_length)
        trajectories = self.processor.pop_trajectories()
        if trajectories and not self.inference:
            # Returns are computed in one batch once there is enough for an update: one
            # critic call and one normalizer update for thousands of steps.
            self._pending.extend(trajectories)
            # Real experiences, not sequence padding, count towards buffer_size: with
            # memory, short episodes would otherwise trigger updates mostly of padding.
            self._pending_steps += sum(len(t) for t in trajectories)
            if self._pending_steps >= self.settings.hyperparameters.buffer_size:
                self._wait_for_update()
                self._process_trajectories(self._pending)
                self._pending, self._pending_steps = [], 0
                self._update()
        if self.step >= self._next_summary:
            if self._entropy_count:
                self.stats.set_stat("Policy/Entropy", self._entropy_sum / self._entropy_count)
                self._entropy_sum, self._entropy_count = 0.0, 0
            self.stats.write_stats(self.step)
            while self._next_summary <= self.step:
                self._next_summary += self.settings.summary_freq
        if self.step >= self._next_checkpoint and not self.inference:
            # Advanced first: the checkpoint records the next one, so a run resumed from
            # it does not save again a few steps later.
            while self._next_checkpoint <= self.step:
                self._next_checkpoint += self.settings.checkpoint_interval
            self.save()
        if self.progress is not None and self.progress.due():
            self.progress.update(self.behavior_name, self.step, self.settings.max_steps,
                                 self.stats.latest_mean(CUMULATIVE_REWARD),
                                 self.stats.steps_per_second(self.step))

    # --- returns ----------------------------------------------------------------------------
    def _process_trajectories(self, trajectories: List[Trajectory]) -> None:
        """GAE per reward stream for a batch of trajectories, into the update buffer."""
        n_obs = len(self.spec.observation_specs)
        obs = [np.concatenate([t.obs[i] for t in trajectories]) for i in range(n_obs)]
        self.policy.update_normalization(obs)
        # The critic values every step and bootstraps every trajectory, as ML-Agents'
        # trajectory processing does (with the normalizer just updated): one call on the
        # steps followed by each trajectory's next observation.
        n_steps = len(obs[0])
        values = self.policy.values(
            [np.concatenate([o, np.stack([t.next_obs[i] for t in trajectories])])
             for i, o in enumerate(obs)])
        step_values = {k: v[:n_steps] for k, v in values.items()}
        next_values = {k: v[n_steps:] for k, v in values.items()}
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
        for name, provider in self.reward_providers.items():
            rewards, _ = pad_batch(np.split(stream_rewards[name], bounds))
            values, _ = pad_batch(np.split(step_values[name], bounds))
            # The value after a real end is 0 for the extrinsic stream; a cut (interrupted,
            # time horizon) bootstraps from the critic, and so does every end for novelty
            # streams (curiosity, RND), which do not stop when an episode does.
            bootstrap = (next_values[name] if provider.ignore_done
                         else np.where(done, 0.0, next_values[name]))
            adv = batched_gae(rewards, values, bootstrap, lengths, gamma=provider.gamma,
                              lambd=self.settings.hyperparameters.lambd)
            advantages.append(adv)
            returns[name] = unpad_batch(adv + values, lengths)
            self.stats.add_stat(f"Policy/{provider.stat_name} Value Estimate", step_values[name])
        advantage = unpad_batch(np.mean(advantages, axis=0), lengths)
        computed = {BufferKey.ADVANTAGES: advantage}
        for name in self.streams:
            computed[stream_key(StreamField.RETURNS, name)] = returns[name]
            computed[stream_key(StreamField.VALUES, name)] = step_values[name]
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
        next_obs = [np.concatenate([f[next_obs_key(i)] for f in fields])
                    for i in range(len(obs))] if any(
            p.needs_next_obs for p in self.reward_providers.values()) else obs
        batch = RewardBatch(
            obs=tuple(obs), next_obs=tuple(next_obs),
            continuous_action=np.concatenate([t.actions.continuous for t in trajectories]),
            discrete_action=np.concatenate([t.actions.discrete for t in trajectories]),
            environment_reward=np.concatenate([t.rewards for t in trajectories]),
            mask=np.ones(len(obs[0]), np.float32))
        out = {}
        for name, provider in self.reward_providers.items():
            provider.update_normalization(batch.next_obs)
            out[name] = provider.evaluate(batch) * np.float32(provider.strength)
        return out

    def _report_signal_rewards(self, trajectories: List[Trajectory],
                               stream_rewards: Dict[str, np.ndarray],
                               bounds: np.ndarray) -> None:
        """Adds each stream's per-episode reward (``Policy/<Signal> Reward``) for the
        episodes these trajectories end (``bounds``: where each but the first starts)."""
        starts = np.concatenate([[0], bounds]).astype(np.int64)
        for name, provider in self.reward_providers.items():
            sums = np.add.reduceat(stream_rewards[name], starts) if len(starts) else []
            running = self._episode_signal_rewards[name]
            ended = []
            for t, total in zip(trajectories, sums):
                running[t.agent_id] = running.get(t.agent_id, 0.0) + float(total)
                if t.episode_ended:
                    ended.append(running.pop(t.agent_id))
            if ended:
                self.stats.add_stat(f"Policy/{provider.stat_name} Reward", np.array(ended))

    def _update(self) -> None:
        """Normalises advantages over the buffer and runs the optimizer on it (in a thread
        when ``threaded``); the trainer collects into a fresh buffer meanwhile."""
        mask = self.buffer[BufferKey.MASK]
        advantages = self.buffer[BufferKey.ADVANTAGES]
        real = mask > 0
        mean, std = advantages[real].mean(), advantages[real].std()
        # Normalised over the whole update buffer, as ML-Agents does.
        self.buffer[BufferKey.ADVANTAGES] = ((advantages - mean) / (std + 1e-10) * mask).astype(
            np.float32)
        buffer, step = self.buffer, self.step
        self.buffer = AgentBuffer(self.policy.sequence_length)
        if not self.settings.threaded:
            self._finish_update(self.optimizer.update(buffer, step, self.rng))
            return

        def run():
            try:
                self._thread_outcome["stats"] = self.optimizer.update(buffer, step, self.rng)
            except BaseException as error:  # re-raised in the main thread
                self._thread_outcome["error"] = error
        self._update_thread = threading.Thread(target=run, daemon=True,
                                               name=f"{self.behavior_name}-update")
        self._update_thread.start()

    def _wait_for_update(self) -> None:
        """Waits for a threaded update still running and takes its stats."""
        if self._update_thread is None:
            return
        self._update_thread.join()
        self._update_thread = None
        outcome, self._thread_outcome = self._thread_outcome, {}
        if "error" in outcome:
            raise outcome["error"]
        self._finish_update(outcome["stats"])

    def _finish_update(self, stats: Dict[str, float]) -> None:
        self.last_update = stats
        self.updates += 1
        for key, value in stats.items():
            self.stats.set_stat(key, value)

    # --- checkpoints ------------------------------------------------------------------------
    def trackables(self) -> Dict[str, object]:
        providers = {k: v for p in self.reward_providers.values()
                     for k, v in p.trackables().items()}
        return {**self.policy.trackables(), **self.optimizer.trackables(), **providers}

    def save(self) -> Optional[str]:
        """Writes a checkpoint of the current step (once per step) and, as ML-Agents does at
        every checkpoint, the deployment exports (ONNX and SavedModel)."""
        self._wait_for_update()  # weights and Adam state of a finished update only
        if self.inference or self._saved_step == self.step:
            return None
        state = {"step": self.step, "policy_rng": self.policy.rng_state(),
                 "trainer_rng": self.rng.bit_generator.state,
                 "elapsed": self.stats.elapsed(),
                 "next_summary": self._next_summary, "next_checkpoint": self._next_checkpoint}
        path = self.checkpointer.save(self.step, self.trackables(), state)
        self._saved_step = self.step
        export_policy(self.policy, self.behavior_name, self.run_dir, self.step)
        prune_exports(self.run_dir, self.behavior_name, self.settings.keep_checkpoints)
        return path

    _STATE_KEYS = ("step", "policy_rng", "trainer_rng", "next_summary", "next_checkpoint")

    def restore_latest(self) -> None:
        """Continues from the latest checkpoint (``--resume``), or from the newest one that
        reads completely when the latest is damaged (saying which and why)."""
        entry, state, skipped = self.checkpointer.restore_newest(
            self.trackables(), required=self._STATE_KEYS, repair=True)
        if skipped:
            self.log(f"[WARNING] {self.behavior_name}: resumed from {entry['path']} (step "
                     f"{entry['step']}) because {'; '.join(skipped)}; set aside as *.damaged")
        self.policy.weights_changed()
        self.step = int(state["step"])
        self.policy.set_rng_state(state["policy_rng"])
        self.rng.bit_generator.state = state["trainer_rng"]
        self.stats.elapsed_offset = float(state.get("elapsed", 0.0))
        self._next_summary = int(state["next_summary"])
        self._next_checkpoint = int(state["next_checkpoint"])
        while self._next_checkpoint <= self.step:  # checkpoints of earlier versions
            self._next_checkpoint += self.settings.checkpoint_interval
        self._saved_step = self.step
        self.stats.start_period(self.step)

    def initialize_from(self, run_dir: str) -> None:
        """Copies the policy weights of another run (``--initialize-from``); step stays 0."""
        directory = os.path.join(run_dir, self.behavior_name, "checkpoints")
        entry, _, skipped = Checkpointer(directory, self.behavior_name).restore_newest(
            self.policy.trackables())
        if skipped:
            self.log(f"[WARNING] {self.behavior_name}: initialized from {entry['path']} "
                     f"because {'; '.join(skipped)}")
        self.policy.weights_changed()
