"""Trainer: one behavior's learner, fed by the acting side's queue
(docs/dev/architecture.md#acting-and-learning).

    context = TrainerContext(run_dir, seed=0, writers=writers)   # what it takes from the run
    trainer = create_trainer("Ball3D", spec, settings, context)
    manager = trainer.create_agent_manager(env)   # acting side: AgentProcessor + actor
    trainer.subscribe(manager)                    # its queue in, weights out
    while not trainer.done:
        env.set_actions("Ball3D", manager.step(*env.get_steps("Ball3D")))
        env.step()
        trainer.advance()     # drain the queue, count steps, learn, publish weights, report
    trainer.save()

The base owns what every algorithm shares (hooks, not copies, as ML-Agents' Trainer ->
OnPolicyTrainer -> PPOTrainer): draining the queues and counting steps from what was
drained, the episode stats, the weight hand-over (a flat vector with a version, to every
subscribed AgentManager), checkpoints with the deployment exports, resume and
``--initialize-from``. An algorithm supplies its policy and optimizer, what its acting
side is, and what to do with trajectories (``process_trajectories``). No GradientTape here.

The queue protocol: every item an acting side queued goes through ``receive(item)``, which
calls the method marked ``@receives(kind)`` for the item's type (a table per trainer class,
collected from its bases: a subclass adds kinds or overrides a handler by name). A handler
returns the trajectory to learn from, or None:

    class MyTrainer(Trainer):
        @receives(Labelled)
        def take_labelled(self, item: Labelled) -> Trajectory:
            ...                       # use the label now
            return item.trajectory    # counted and learnt from like any trajectory
"""
from __future__ import annotations

import abc
import collections
import os
import threading
from typing import Callable, Deque, Dict, List, Optional

import numpy as np

from tftrainers.acting import ActingStats, AgentManager, WeightUpdate
from tftrainers.acting.workers import BehaviorSetup
from tftrainers.checkpoint import Checkpointer
from tftrainers.envs import BehaviorSpec
from tftrainers.envs.unity.side_channels import EnvironmentStats
from tftrainers.export.artifacts import FORMATS, export_policy, prune_exports
from tftrainers.processing import EpisodeStats, Trajectory
from tftrainers.runs import write_behavior_spec
from tftrainers.settings import TrainerSettings
from tftrainers.stats import CUMULATIVE_REWARD, EPISODE_LENGTH, StatsReporter
from tftrainers.tf_utils.onnx_function import OnnxExportError
from tftrainers.timers import TIMERS, TIMERS_FILE
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.policy import Policy


def receives(*kinds: type):
    """Marks a trainer method as the handler of queue items of ``kinds`` (exact types)."""
    def mark(method):
        method.receives = kinds
        return method
    return mark


def _handlers(cls) -> Dict[type, str]:
    """{item type: handler method name} of ``cls``, bases first (a subclass wins)."""
    table: Dict[type, str] = {}
    for klass in reversed(cls.__mro__):
        for name, attribute in vars(klass).items():
            for kind in getattr(attribute, "receives", ()):
                table[kind] = name
    return table


class Trainer(abc.ABC):
    """Base of every trainer (see the module docstring for the loop and the queue protocol).

    Args:
        behavior_name, spec, settings: the behavior and its TrainerSettings.
        context: what the trainer takes from the run (``TrainerContext``: folder, seed,
            writers, progress, inference, compile and act settings, log).
    """

    #: {queue item type: handler method name}; filled per class from ``@receives``.
    handlers: Dict[type, str] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.handlers = _handlers(cls)

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 context: TrainerContext):
        self.behavior_name = behavior_name
        self.spec = spec
        self.settings = settings
        self.context = context
        # Falls back to "tensorflow" when the act graph does not convert (``create_actor``).
        self.act_runtime = context.act_runtime
        self.step = 0
        self.version = 0  # of the weights published to the acting side
        self.stats = StatsReporter(behavior_name, context.writers)
        self.behavior_dir = context.behavior_dir(behavior_name)
        if not context.inference:
            write_behavior_spec(self.behavior_dir, spec)
        self.checkpointer = Checkpointer(os.path.join(self.behavior_dir, "checkpoints"),
                                         behavior_name, settings.keep_checkpoints)
        self._next_summary = settings.summary_freq
        self._next_checkpoint = settings.checkpoint_interval
        self._saved_step = -1
        self.managers: List[AgentManager] = []
        self._acting_states: List[dict] = []  # restored, for managers yet to subscribe
        self._entropy_sum, self._entropy_steps = 0.0, 0
        self._program = None  # the act graph as ONNX, converted once
        # Returns of the latest episodes, for curriculum lessons measured on reward; the
        # run sizes it (environment_parameters) and clears it when a lesson changes.
        self.reward_buffer: Deque[float] = collections.deque(maxlen=1)
        # State of the run every behavior's checkpoint carries (the curriculum's lessons):
        # set by the run; what a restored checkpoint held is in ``restored_run_state``.
        self.run_state: Optional[Callable[[], dict]] = None
        self.restored_run_state: Optional[dict] = None
        # Parts a wrapper adds to every checkpoint of this trainer (self-play's league,
        # trainers/ghost): name -> object with ``trackables()`` (TF objects, by name),
        # ``state()`` (JSON) and ``restore_state(state or None)``, called after a restore.
        self.checkpoint_parts: Dict[str, object] = {}
        self._failed_formats = set()  # export formats that failed once (not tried again)
        # Called as listener(trainer, checkpoint_path) after each checkpoint (the API's
        # callbacks).
        self.save_listeners: List = []
        # threaded: true (ML-Agents): an update runs beside the env loop, one at a time
        # (run_update); its stats or its error are collected by wait_for_update.
        self._update_thread: Optional[threading.Thread] = None
        self._thread_outcome: Dict[str, object] = {}

    # What the context says, by the names trainers have always read.
    run_dir = property(lambda self: self.context.run_dir)
    seed = property(lambda self: self.context.seed)
    inference = property(lambda self: self.context.inference)
    jit_compile = property(lambda self: self.context.jit_compile)
    progress = property(lambda self: self.context.progress)
    log = property(lambda self: self.context.log)

    # --- what an algorithm supplies ---------------------------------------------------------
    @property
    @abc.abstractmethod
    def policy(self) -> Policy:
        """The policy the acting side runs and export writes."""

    @abc.abstractmethod
    def trackables(self) -> Dict[str, object]:
        """What a checkpoint holds (policy, optimizer, critic, reward providers...)."""

    @abc.abstractmethod
    def process_trajectories(self, trajectories: List[Trajectory]) -> None:
        """Learns from drained trajectories (already counted in ``step``)."""

    def update_if_ready(self) -> None:
        """Called on every ``advance`` (e.g. to collect a threaded update that finished)."""

    def run_update(self, work: Callable[[], Dict[str, float]]) -> None:
        """Runs ``work`` (an update, returning its stats) now, or with ``threaded`` in a
        thread of its own while acting goes on; its stats go to ``_finish_update``, here or
        when ``wait_for_update`` collects the thread (which re-raises its error)."""
        if not self.settings.threaded:
            self._finish_update(work())
            return

        def run():
            try:
                self._thread_outcome["stats"] = work()
            except BaseException as error:  # re-raised in the main thread
                self._thread_outcome["error"] = error
        self._update_thread = threading.Thread(target=run, daemon=True,
                                               name=f"{self.behavior_name}-update")
        self._update_thread.start()

    def _finish_update(self, stats: Dict[str, float]) -> None:
        """Takes a finished update's stats and weights (trainers that call run_update)."""
        raise NotImplementedError

    def wait_for_update(self) -> None:
        """Returns once no update is running (before a save or a restore)."""
        if self._update_thread is None:
            return
        self._update_thread.join()
        self._update_thread = None
        outcome, self._thread_outcome = self._thread_outcome, {}
        if "error" in outcome:
            raise outcome["error"]
        self._finish_update(outcome["stats"])

    def acting_weights(self) -> np.ndarray:
        """The flat weight vector the acting side runs with now."""
        return self.policy.flat_weights()

    def value_critic(self):
        """The critic whose values the SavedModel exports (None: no value signature)."""
        return None

    def create_policy(self) -> Policy:
        """The behavior's Policy from ``network_settings``, its initial weights seeded by
        ``seed`` (TensorFlow's and Keras' global seeds); deterministic in inference when
        the settings say so."""
        import keras
        import tensorflow as tf
        tf.random.set_seed(self.seed)
        keras.utils.set_random_seed(self.seed)
        ns = self.settings.network_settings
        return Policy(self.spec, ns, seed=self.seed,
                      deterministic=self.inference and ns.deterministic,
                      jit_compile=self.jit_compile)

    # --- the acting side ----------------------------------------------------------------------
    def create_agent_manager(self, env=None) -> AgentManager:
        """This behavior's acting side, with the current weights. ``env`` is the env the
        manager acts in (teachers read its heuristic)."""
        return AgentManager(self.behavior_name, self.spec, self.create_actor(),
                            self.settings.time_horizon)

    def create_actor(self):
        """The acting policy: the act graph in onnxruntime (converted once), or in this
        process's TensorFlow when ``act_runtime`` says so or the conversion fails."""
        policy = self.policy
        if self.act_runtime == "onnxruntime":
            try:
                if self._program is None:
                    self._program = policy.onnx_program()
                return policy.make_actor("onnxruntime", seed=self.seed, version=self.version,
                                         program=self._program)
            except (ImportError, OnnxExportError) as error:
                self.log(f"[WARNING] {self.behavior_name}: the act call runs in TensorFlow "
                         f"(onnxruntime: {str(error).splitlines()[0]})")
                self.act_runtime = "tensorflow"
        return policy.make_actor("tensorflow", seed=self.seed, version=self.version)

    def acting_setup(self) -> BehaviorSetup:
        """What an env worker needs to act for this behavior: the act graph as ONNX, the
        current weights with their version, the time horizon and the acting seed.

        Raises:
            OnnxExportError: the act graph does not convert (workers run only ONNX).
        """
        if self._program is None:
            self._program = self.policy.onnx_program()
        # Workers wait for new weights once they have sent about a buffer (none to wait
        # for with --inference, where nothing updates).
        steps = 0 if self.inference else getattr(self.settings.hyperparameters, "buffer_size", 0)
        return BehaviorSetup(self.spec, self.policy.memory_size, self._program,
                             self.settings.time_horizon, self.seed,
                             WeightUpdate(self.version, self.acting_weights()),
                             recording=not self.done, steps_per_version=steps)

    def subscribe(self, manager: AgentManager) -> None:
        """Takes ``manager``'s trajectories from now on and sends it every new weight."""
        index = len(self.managers)
        self.managers.append(manager)
        manager.set_weights(WeightUpdate(self.version, self.acting_weights()))
        if index < len(self._acting_states) and self._acting_states[index]:
            manager.set_state(self._acting_states[index])
        if self.done:
            manager.stop_recording()

    def publish_weights(self, flat: Optional[np.ndarray] = None) -> None:
        """Sends the policy's weights (``flat`` if given, else read) with a new version to
        every subscribed acting side."""
        self.version += 1
        update = WeightUpdate(self.version, self.acting_weights() if flat is None else flat)
        for manager in self.managers:
            manager.set_weights(update)

    # --- the loop ---------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.step >= self.settings.max_steps

    def drain(self) -> List[Trajectory]:
        """Everything the acting side queued, through ``receive``: returns the
        trajectories to learn from, in the order they arrived."""
        trajectories = []
        for manager in self.managers:
            for item in manager.queue.drain():
                trajectory = self.receive(item)
                if trajectory is not None:
                    trajectories.append(trajectory)
        return trajectories

    def receive(self, item) -> Optional[Trajectory]:
        """Hands one queue item to this trainer's handler for its type; returns the
        trajectory to learn from, if the item brings one."""
        handler = self.handlers.get(type(item))
        if handler is None:
            raise TypeError(f"{self.behavior_name}: {type(self).__name__} receives no "
                            f"{type(item).__name__}; it receives "
                            f"{', '.join(sorted(k.__name__ for k in self.handlers))}")
        return getattr(self, handler)(item)

    @receives(Trajectory)
    def take_trajectory(self, trajectory: Trajectory) -> Trajectory:
        return trajectory

    @receives(EpisodeStats)
    def record_episodes(self, episodes: EpisodeStats) -> None:
        """The episodes' returns and lengths (algorithms add their own episode stats)."""
        self.stats.add_stat(CUMULATIVE_REWARD, episodes.cumulative_reward)
        self.reward_buffer.extend(episodes.cumulative_reward.tolist())
        self.stats.add_stat(EPISODE_LENGTH, episodes.episode_length)

    @receives(ActingStats)
    def record_acting(self, acting: ActingStats) -> None:
        """The acting side's entropy, averaged per summary as ``Policy/Entropy``."""
        self._entropy_sum += acting.entropy_sum
        self._entropy_steps += acting.steps

    @receives(EnvironmentStats)
    def record_environment(self, environment: EnvironmentStats) -> None:
        """What the env reported through its stats side channel."""
        self.stats.add_environment_stats(environment.values)

    def advance(self) -> None:
        """Drains the acting side, learns, reports and saves when due."""
        if self.done:  # finished: one final checkpoint, then nothing more to do
            if self._saved_step != self.step and not self.inference:
                self.stats.write_stats(self.step)
                self.save()
            return
        self.update_if_ready()
        trajectories = self.drain()
        if trajectories:
            # Steps are counted from what the learner received, as ML-Agents does.
            self.step += sum(len(t) for t in trajectories)
            if not self.inference:
                self.process_trajectories(trajectories)
        if self.step >= self._next_summary:
            if self._entropy_steps:
                self.stats.set_stat("Policy/Entropy", self._entropy_sum / self._entropy_steps)
                self._entropy_sum, self._entropy_steps = 0.0, 0
            self.stats.write_stats(self.step)
            while self._next_summary <= self.step:
                self._next_summary += self.settings.summary_freq
        if self.step >= self._next_checkpoint and not self.inference:
            # Advanced first: the checkpoint records the next one, so a run resumed from
            # it does not save again a few steps later.
            while self._next_checkpoint <= self.step:
                self._next_checkpoint += self.settings.checkpoint_interval
            self.save()
        if self.done:
            for manager in self.managers:  # keep acting for other behaviors, stop recording
                manager.stop_recording()
        if self.progress is not None and self.progress.due():
            self.progress.update(self.behavior_name, self.step, self.settings.max_steps,
                                 self.stats.latest_mean(CUMULATIVE_REWARD),
                                 self.stats.steps_per_second(self.step))

    # --- checkpoints ------------------------------------------------------------------------
    def checkpoint_state(self) -> dict:
        """The JSON part of a checkpoint (counters, generators); algorithms add theirs."""
        states = [m.state() for m in self.managers]
        state = {"step": self.step, "version": self.version, "elapsed": self.stats.elapsed(),
                 "next_summary": self._next_summary, "next_checkpoint": self._next_checkpoint,
                 "acting": states}
        if states and states[0]:  # the name earlier checkpoints used for the first one
            state["policy_rng"] = states[0]["rng"]
        if self.run_state is not None:
            state["run"] = self.run_state()
        for name, part in self.checkpoint_parts.items():
            state[name] = part.state()
        return state

    def _all_trackables(self) -> Dict[str, object]:
        trackables = dict(self.trackables())
        for part in self.checkpoint_parts.values():
            trackables.update(part.trackables())
        return trackables

    #: what ``state.json`` must hold for a resume (a checkpoint without them is damaged).
    STATE_KEYS = ("step", "next_summary", "next_checkpoint")

    def restore_state(self, state: dict) -> None:
        self.step = int(state["step"])
        self.version = int(state.get("version", 0))
        self.stats.elapsed_offset = float(state.get("elapsed", 0.0))
        self._next_summary = int(state["next_summary"])
        self._next_checkpoint = int(state["next_checkpoint"])
        while self._next_checkpoint <= self.step:  # checkpoints of earlier versions
            self._next_checkpoint += self.settings.checkpoint_interval
        acting = state.get("acting")
        if acting is None and "policy_rng" in state:
            acting = [{"rng": state["policy_rng"]}]
        self._acting_states = list(acting or [])
        self.restored_run_state = state.get("run")
        for manager, acting_state in zip(self.managers, self._acting_states):
            if acting_state:
                manager.set_state(acting_state)

    def save(self) -> Optional[str]:
        """Writes a checkpoint of the current step (once per step) and, as ML-Agents does at
        every checkpoint, the deployment exports (ONNX and SavedModel)."""
        self.wait_for_update()  # weights and Adam state of a finished update only
        if self.inference or self._saved_step == self.step:
            return None
        with TIMERS.timed("checkpoint"):
            path = self.checkpointer.save(self.step, self._all_trackables(),
                                          self.checkpoint_state())
        self._saved_step = self.step
        with TIMERS.timed("export"):
            formats = [f for f in FORMATS if f not in self._failed_formats]
            try:
                export_policy(self.policy, self.behavior_name, self.run_dir, self.step,
                              formats=formats, critic=self.value_critic())
            except OnnxExportError as error:
                # A user's encoder tf2onnx cannot convert: the checkpoint above stays, the
                # SavedModel is still written; said once.
                self._failed_formats.add("onnx")
                self.log(f"[WARNING] {self.behavior_name}: no ONNX export "
                         f"({str(error).splitlines()[0]}); checkpoints and SavedModel exports "
                         f"go on")
                export_policy(self.policy, self.behavior_name, self.run_dir, self.step,
                              formats=["savedmodel"], critic=self.value_critic())
            prune_exports(self.run_dir, self.behavior_name, self.settings.keep_checkpoints)
        for listener in self.save_listeners:
            listener(self, path)
        # Where the time went so far, at each save (the runner writes the final one and
        # reports a failed write; a diagnostic file does not fail a checkpoint).
        try:
            os.makedirs(os.path.join(self.run_dir, "run_logs"), exist_ok=True)
            TIMERS.write(os.path.join(self.run_dir, "run_logs", TIMERS_FILE))
        except OSError:
            pass
        return path

    def weights_restored(self) -> None:
        """Called after a restore changed the variables: the acting side gets them."""
        self.publish_weights()

    def restore_latest(self) -> None:
        """Continues from the latest checkpoint (``--resume``), or from the newest one that
        reads completely when the latest is damaged (saying which and why)."""
        self.wait_for_update()
        _, state, _ = self.checkpointer.restore_newest(
            self._all_trackables(), required=self.STATE_KEYS, repair=True, log=self.log)
        self.restore_state(state)
        for name, part in self.checkpoint_parts.items():
            part.restore_state(state.get(name))
        self.weights_restored()
        self._saved_step = self.step
        self.stats.start_period(self.step)

    def initialize_from(self, run_dir: str) -> None:
        """Copies the policy weights of another run (``--initialize-from``); step stays 0."""
        directory = os.path.join(run_dir, self.behavior_name, "checkpoints")
        Checkpointer(directory, self.behavior_name).restore_newest(self.policy.trackables(),
                                                                   log=self.log)
        self.weights_restored()


Trainer.handlers = _handlers(Trainer)
