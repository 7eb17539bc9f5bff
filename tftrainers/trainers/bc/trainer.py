"""BCTrainer: behavioral cloning of a teacher (``trainer_type: bc``).

    behaviors:
      Basic:
        trainer_type: bc
        hyperparameters: {teacher: heuristic, mode: dagger, batch_size: 256}

The acting side is an ``ImitationManager`` (``acting/imitation.py``): the student's act
call for every agent plus one teacher call for the agents to label. Labelled trajectories
join the data set (an ``AgentBuffer`` of the newest ``buffer_size`` labelled steps, whole
sequences with memory); each time ``batch_size`` new labels arrived, the optimizer runs
``num_epoch`` passes of at most ``batches_per_epoch`` shuffled minibatches on it (one
compiled call) and the new weights go to the acting side. With ``demo_path`` the data set
is the demonstrations, fixed, and the student acts in every area so its return is
reported. With ``brain_to_imitate`` the labels are another behavior's steps and actions
(``BehaviorRecorder`` on that behavior's AgentManager; the runner connects it).

Stats: ``Losses/Cloning Loss``; ``Environment/Cumulative Reward`` of the episodes the
student drove (in dagger mode, the mixture's until its probability reaches 0);
``Policy/Teacher Reward`` of those the teacher drove (teacher mode); ``Policy/Teacher
Agreement`` (discrete: the share of freshly labelled states, not trained on yet, where the
student's most likely action equals the teacher's in every branch; continuous:
``Policy/Teacher Action Difference``, the mean absolute difference of its mean action,
clipped to the env's range, from the teacher's); ``Policy/Teacher Probability`` (DAgger's
mixing) and ``Policy/Teacher Labels`` (labelled steps so far).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from tftrainers.acting import ImitationManager, Labelled, TeacherEpisodes
from tftrainers.acting.imitation import BehaviorRecorder
from tftrainers.envs import BehaviorSpec
from tftrainers.processing import AgentBuffer, BufferKey, Trajectory, obs_key
from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.trainers.base import Trainer, receives
from tftrainers.trainers.bc.optimizer import BCOptimizer
from tftrainers.trainers.bc.teachers import heuristic_teacher, is_heuristic, model_teacher
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.policy import Policy

TEACHER_REWARD = "Policy/Teacher Reward"
TEACHER_AGREEMENT = "Policy/Teacher Agreement"
TEACHER_DIFFERENCE = "Policy/Teacher Action Difference"


class BCTrainer(Trainer):
    """Trains one behavior by cloning its teacher (see the module docstring)."""

    def __init__(self, behavior_name: str, spec: BehaviorSpec, settings: TrainerSettings,
                 context: TrainerContext):
        super().__init__(behavior_name, spec, settings, context)
        settings, hp = self.settings, self.settings.hyperparameters
        self.key = f"behaviors.{self.behavior_name}.hyperparameters"
        if not (hp.teacher or hp.brain_to_imitate or hp.demo_path):
            raise ConfigError(f"{self.key}: trainer_type bc needs a teacher; set one of "
                              f"teacher (heuristic, heuristic:MODULE:FUNCTION, results/RUN, "
                              f"FILE.onnx, a SavedModel folder), brain_to_imitate (another "
                              f"behavior) or demo_path (.demo files)")
        if hp.demo_path and hp.mode == "dagger":
            raise ConfigError(f"{self.key}.mode: dagger needs a live teacher to label the "
                              f"student's states; demo_path is offline (use mode: teacher)")
        if hp.brain_to_imitate and hp.mode == "dagger":
            raise ConfigError(f"{self.key}.mode: dagger needs a teacher that can label any "
                              f"state; brain_to_imitate only shows its own agents' steps "
                              f"(use mode: teacher)")
        self._policy = self.create_policy()
        self.optimizer = BCOptimizer(self._policy, settings, jit_compile=self.jit_compile)
        self.rng = np.random.default_rng(self.seed + 1)  # minibatch shuffles
        self.sequence_length = self._policy.sequence_length
        self.data = AgentBuffer(self.sequence_length)
        self._fresh = AgentBuffer(self.sequence_length)  # labels not trained on yet
        self._since_update = 0
        self.labels = 0  # labelled steps received
        self.mode = "offline" if hp.demo_path else hp.mode
        self.dagger_steps = hp.steps or max(settings.max_steps // 2, 1)
        self.teacher = None
        if hp.teacher and not is_heuristic(hp.teacher) and not self.inference:
            # Before anything trains: a bad teacher file is a one-line error up front.
            self.teacher = model_teacher(hp.teacher, self.behavior_name, self.spec,
                                         f"{self.key}.teacher", seed=self.seed)
        if hp.demo_path and not self.inference:
            self._load_demonstrations(hp.demo_path)

    # --- data -------------------------------------------------------------------------------
    def _load_demonstrations(self, path: str) -> None:
        from tftrainers.processing.demonstrations import DemonstrationError, load_demonstrations
        try:
            demos = load_demonstrations(path, self.spec, self.behavior_name)
        except DemonstrationError as error:
            raise ConfigError(f"{self.key}.demo_path: {error}") from None
        if not len(demos):
            raise ConfigError(f"{self.key}.demo_path: {path} holds no transition")
        self.demonstrations = demos
        starts = np.flatnonzero(demos.episode_start).tolist() + [len(demos)]
        for a, b in zip(starts[:-1], starts[1:]):  # one episode at a time (sequences)
            fields = {obs_key(i): o[a:b] for i, o in enumerate(demos.obs)}
            fields.update({BufferKey.ACTION_MASK: demos.action_mask[a:b],
                           BufferKey.CONTINUOUS_ACTION: demos.continuous_actions[a:b],
                           BufferKey.DISCRETE_ACTION: demos.discrete_actions[a:b]})
            if self._policy.memory_size:  # the student's memory is replayed from zeros
                fields[BufferKey.MEMORY] = np.zeros((b - a, self._policy.memory_size),
                                                    np.float32)
            self.data.append(fields)
        self._policy.update_normalization(list(demos.obs))
        self.labels = len(demos)

    def _fields(self, trajectory: Trajectory) -> Dict:
        fields = {obs_key(i): o for i, o in enumerate(trajectory.obs)}
        fields.update({BufferKey.ACTION_MASK: trajectory.action_mask,
                       BufferKey.CONTINUOUS_ACTION: trajectory.actions.continuous,
                       BufferKey.DISCRETE_ACTION: trajectory.actions.discrete})
        if self._policy.memory_size:
            fields[BufferKey.MEMORY] = trajectory.memory
        return fields

    # --- the acting side --------------------------------------------------------------------
    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def imitates(self) -> Optional[str]:
        """The behavior whose agents teach (``brain_to_imitate``), if any."""
        return self.settings.hyperparameters.brain_to_imitate

    def create_agent_manager(self, env=None) -> ImitationManager:
        hp = self.settings.hyperparameters
        teacher = self.teacher
        if hp.teacher and is_heuristic(hp.teacher) and env is not None and not self.inference:
            teacher = heuristic_teacher(hp.teacher, env, self.behavior_name,
                                        f"{self.key}.teacher")
        mode = self.mode
        if hp.brain_to_imitate or teacher is None:
            mode = "offline"  # the student acts everywhere; labels come from elsewhere
        manager = ImitationManager(self.behavior_name, self.spec, self.create_actor(),
                                   self.settings.time_horizon, teacher, mode,
                                   teacher_share=hp.teacher_agents,
                                   seed=self.seed + 2 + len(self.managers),
                                   record=not self.inference)
        if mode == "dagger":
            manager.set_teacher_probability(self.teacher_probability())
        return manager

    def create_recorder(self, teacher_spec, teacher_name: str) -> BehaviorRecorder:
        """The recorder of ``brain_to_imitate``'s steps (the runner adds it to that
        behavior's AgentManager and subscribes it here)."""
        from tftrainers.runs import spec_difference
        difference = spec_difference(teacher_spec, self.spec)
        if difference is not None:
            difference = difference.replace("the checkpoint has", f"'{teacher_name}' has")
            difference = difference.replace("the environment has", f"'{self.behavior_name}' "
                                                                   f"has")
            raise ConfigError(f"{self.key}.brain_to_imitate: behavior '{teacher_name}' does not "
                              f"match '{self.behavior_name}': {difference}")
        actor = self.create_actor() if self._policy.memory_size else None
        return BehaviorRecorder(teacher_name, self.spec, self.settings.time_horizon, actor)

    def teacher_probability(self) -> float:
        """DAgger's mixing: 1 at step 0, falling linearly to 0 at ``steps``."""
        return float(max(0.0, 1.0 - self.step / self.dagger_steps))

    # --- learning ---------------------------------------------------------------------------
    @receives(Labelled)
    def take_labelled(self, item: Labelled) -> Trajectory:
        """A trajectory with the teacher's actions: into the data set (and the fresh labels
        the next agreement is measured on) now; learnt from like any trajectory."""
        trajectory = item.trajectory
        if not self.inference:
            fields = self._fields(trajectory)
            self.data.append(fields)
            self._fresh.append(fields)
            self.labels += len(trajectory)
            if self.mode != "offline":
                self._since_update += len(trajectory)
        return trajectory

    @receives(TeacherEpisodes)
    def record_teacher_episodes(self, item: TeacherEpisodes) -> None:
        """Returns of the episodes the teacher drove."""
        self.stats.add_stat(TEACHER_REWARD, item.episodes.cumulative_reward)

    def process_trajectories(self, trajectories: List[Trajectory]) -> None:
        """Updates the normaliser, trims the data set and trains once ``batch_size`` new
        labels arrived (offline: new steps); the labels themselves joined the data set as
        they were received (``take_labelled``)."""
        if trajectories:
            obs = [np.concatenate([t.obs[i] for t in trajectories])
                   for i in range(len(self.spec.observation_specs))]
            self._policy.update_normalization(obs)
        if self.mode == "offline":
            self._since_update += sum(len(t) for t in trajectories)
        buffer_size = self.settings.hyperparameters.buffer_size
        if self.mode != "offline" and len(self.data) > buffer_size:
            self.data.truncate(buffer_size)
        if self.mode == "dagger":
            probability = self.teacher_probability()
            for manager in self.managers:
                manager.set_teacher_probability(probability)
            self.stats.set_stat("Policy/Teacher Probability", probability)
        if self._since_update >= self.settings.hyperparameters.batch_size and len(self.data):
            self._update()

    def _update(self) -> None:
        if len(self._fresh):
            same, difference = self.optimizer.agreement(self._fresh)
            action_spec = self.spec.action_spec
            if action_spec.discrete_size:
                self.stats.add_stat(TEACHER_AGREEMENT, same)
            if action_spec.continuous_size:
                self.stats.add_stat(TEACHER_DIFFERENCE, difference)
            self._fresh = AgentBuffer(self.sequence_length)
        # The data set grows to buffer_size (plus the trajectories of one drain): padded to
        # the capacity of that, the update compiles once.
        capacity = (self.optimizer.capacity(self.settings.hyperparameters.buffer_size)
                    if self.mode != "offline" else None)
        stats = self.optimizer.update(self.data, self.step, self.rng, capacity)
        self._since_update = 0
        for key, value in stats.items():
            self.stats.set_stat(key, value)
        self.stats.set_stat("Policy/Teacher Labels", float(self.labels))
        self.publish_weights(self.optimizer.actor_weights)

    # --- checkpoints ------------------------------------------------------------------------
    def trackables(self) -> Dict[str, object]:
        return {**self._policy.trackables(), **self.optimizer.trackables()}

    STATE_KEYS = Trainer.STATE_KEYS + ("trainer_rng",)

    def checkpoint_state(self) -> dict:
        return {**super().checkpoint_state(), "trainer_rng": self.rng.bit_generator.state,
                "labels": self.labels, "since_update": self._since_update}

    def restore_state(self, state: dict) -> None:
        super().restore_state(state)
        self.rng.bit_generator.state = state["trainer_rng"]
        self.labels = int(state.get("labels", self.labels))
        self._since_update = int(state.get("since_update", 0))
