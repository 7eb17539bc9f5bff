"""The acting side of a behavioral cloning student: who acts, and which states a teacher labels.

    manager = ImitationManager("Basic", spec, student_actor, time_horizon=64,
                               teacher=teacher, mode="dagger", seed=0)
    trainer.subscribe(manager)
    manager.set_teacher_probability(0.7)        # DAgger's mixing, set by the trainer
    env.set_actions("Basic", manager.step(decision, terminal))

Modes (``MODES``):
- ``teacher`` (the seed's online BC): a fixed share of the agents (``teacher_share``,
  every agent in order of first appearance whose share boundary it crosses) is driven by
  the teacher and recorded as labels; the others run the student and are scored.
- ``dagger``: every state is labelled by the teacher, and the env gets the mixture policy
  of Ross et al. (2011): at every step, each agent takes the teacher's action with
  probability ``p`` (set by the trainer as it falls from 1 to 0), else the student's. The
  draw is per step, not per episode: with long episodes (Ball3D's run 1000 steps) a
  per-episode draw made at p = 1 would leave the teacher driving long after p has fallen,
  and the student would never visit (and get labelled on) its own mistakes. The episodes
  count as the student's (their return is the mixture's until p reaches 0).
- ``offline``: the student drives every agent and nothing is labelled (the labels come
  from ``.demo`` files on the learner's side).

A teacher is one more actor-like call: ``teacher(decision_steps) -> ActionTuple`` of env
actions for those agents (continuous in [-1, 1]), with ``teacher.episode_ended(agent_ids)``
for one with memory. Per env step: one student call for all agents (its memory follows
every agent, teacher-driven or not, so recurrent students train on the states they were
in), one teacher call for the agents to label, and array selects for the env's actions.

Queue items besides the base's: ``Labelled(trajectory, teacher_driven)`` (the trajectory's
actions are the teacher's labels, continuous in env scale; its memory is the student's)
and ``TeacherEpisodes`` (the episodes the teacher drove: ``Policy/Teacher Reward``).
Episodes the student drove come as plain ``EpisodeStats``; trajectories the student drove
and nobody labelled as plain ``Trajectory`` (they count as steps). Nothing here imports
TensorFlow.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from tftrainers.acting.actor import Actor
from tftrainers.acting.agent_manager import AgentManager
from tftrainers.envs.agent_rows import AgentRows
from tftrainers.envs.base import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from tftrainers.envs.checks import check_steps
from tftrainers.processing import (ActionInfo, AgentProcessor, EpisodeStats, LogProbs,
                                   Trajectory, TrajectoryQueue)

MODES = ("teacher", "dagger", "offline")


class Labelled(NamedTuple):
    """A trajectory whose actions are the teacher's (labels) and who drove it."""

    trajectory: Trajectory
    teacher_driven: bool


class TeacherEpisodes(NamedTuple):
    """Episodes the teacher drove (``Policy/Teacher Reward``)."""

    episodes: EpisodeStats


def take_decisions(steps: DecisionSteps, index: np.ndarray) -> DecisionSteps:
    """The agents ``index`` of ``steps`` (a new DecisionSteps)."""
    return DecisionSteps([o[index] for o in steps.obs], steps.reward[index],
                         steps.agent_id[index], [m[index] for m in steps.action_mask],
                         steps.group_id[index], steps.group_reward[index])


def take_terminals(steps: TerminalSteps, index: np.ndarray) -> TerminalSteps:
    """The agents ``index`` of ``steps`` (a new TerminalSteps)."""
    return TerminalSteps([o[index] for o in steps.obs], steps.reward[index],
                         steps.interrupted[index], steps.agent_id[index],
                         steps.group_id[index], steps.group_reward[index])


def _take_info(info: ActionInfo, index: np.ndarray) -> ActionInfo:
    return ActionInfo(info.agent_id[index],
                      ActionTuple(info.actions.continuous[index], info.actions.discrete[index]),
                      LogProbs(info.log_probs.continuous[index], info.log_probs.discrete[index]),
                      {}, None if info.memory is None else info.memory[index])


def teacher_rows(count: int, share: float) -> np.ndarray:
    """[count] bool: the agent rows (in order of first appearance) the teacher drives in
    ``teacher`` mode; spread evenly, ``round(count * share)`` of them."""
    rows = np.arange(count)
    return np.floor((rows + 1) * share + 1e-9) > np.floor(rows * share + 1e-9)


class ImitationManager(AgentManager):
    """A student behavior's acting side with a teacher (see the module docstring).

    Args:
        behavior_name, spec, actor, time_horizon: as ``AgentManager`` (``actor``: the
            student).
        teacher: the teacher call (None only in ``offline`` mode).
        mode: one of ``MODES``.
        teacher_share: ``teacher`` mode: the share of agents the teacher drives.
        seed: seeds DAgger's draws of who acts at each step.
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, actor: Actor, time_horizon: int,
                 teacher: Optional[Callable[[DecisionSteps], ActionTuple]], mode: str,
                 teacher_share: float = 0.5, seed: int = 0, record: bool = True,
                 report_every: int = 64):
        if mode not in MODES:
            raise ValueError(f"mode '{mode}': allowed {', '.join(MODES)}")
        if teacher is None and mode != "offline":
            raise ValueError(f"mode '{mode}' needs a teacher")
        super().__init__(behavior_name, spec, actor, time_horizon, record, report_every)
        self.teacher = teacher
        self.mode = mode
        self.teacher_share = float(teacher_share)
        self.teacher_probability = 1.0 if mode == "dagger" else 0.0
        self.rng = np.random.default_rng(seed)
        # Student-driven and teacher-driven episodes go to separate processors: an agent's
        # episode has one driver, its trajectories and episode stats say which.
        self._student_queue = TrajectoryQueue(behavior_name)
        self._teacher_queue = TrajectoryQueue(behavior_name)
        self.processor = AgentProcessor(spec, time_horizon, (), behavior_name)
        self.processor.publish_trajectory_queue(self._student_queue)
        self.teacher_processor = AgentProcessor(spec, time_horizon, (), behavior_name)
        self.teacher_processor.publish_trajectory_queue(self._teacher_queue)
        self._rows = AgentRows()
        self._driver = np.zeros(0, bool)  # per agent row: the teacher drives its episode
        self._fresh = np.zeros(0, bool)  # per agent row: its next decision starts an episode
        self._student_info: Optional[ActionInfo] = None
        self._teacher_info: Optional[ActionInfo] = None
        self.labels = 0  # teacher-labelled steps recorded so far

    def set_teacher_probability(self, probability: float) -> None:
        """DAgger: the probability that an agent takes the teacher's action at a step."""
        self.teacher_probability = float(probability)

    # --- rows -------------------------------------------------------------------------------
    def _agent_rows(self, agent_id: np.ndarray) -> np.ndarray:
        rows = self._rows.rows(agent_id)
        if len(self._rows) > len(self._driver):
            extra = len(self._rows) - len(self._driver)
            self._driver = np.concatenate([self._driver, np.zeros(extra, bool)])
            self._fresh = np.concatenate([self._fresh, np.ones(extra, bool)])
        return rows

    def _assign(self, rows: np.ndarray) -> None:
        """Chooses the driver of the episodes that start at ``rows``."""
        if self.mode == "teacher":
            self._driver[rows] = teacher_rows(len(self._driver), self.teacher_share)[rows]
        else:  # dagger mixes per step (``_steering``); offline: the student drives
            self._driver[rows] = False
        self._fresh[rows] = False

    def _steering(self, by_teacher: np.ndarray) -> np.ndarray:
        """[n] bool: the agents whose env action is the teacher's at this step."""
        if self.mode != "dagger":
            return by_teacher
        p = self.teacher_probability
        if p <= 0.0 or p >= 1.0:  # no draw at the ends of the schedule
            return np.full(len(by_teacher), p >= 1.0)
        return self.rng.random(len(by_teacher)) < p

    # --- acting -----------------------------------------------------------------------------
    def step(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps) -> ActionTuple:
        env_actions = self._step(decision_steps, terminal_steps)
        if self.recording:
            for observer in self.observers:
                observer(decision_steps, terminal_steps, env_actions)
        return env_actions

    def _step(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps) -> ActionTuple:
        check_steps(self.behavior_name, self.spec, decision_steps, terminal_steps)
        if len(terminal_steps):
            self.actor.episode_ended(terminal_steps.agent_id)
            if self.teacher is not None and hasattr(self.teacher, "episode_ended"):
                self.teacher.episode_ended(terminal_steps.agent_id)
        if not self.recording:  # inference, or the trainer is done: the student acts
            if not len(decision_steps):
                return self.spec.action_spec.empty_action(0)
            return self.actor.act(decision_steps)[1]
        # Terminal steps close the episode with the processor of the driver it had.
        terminal_rows = self._agent_rows(terminal_steps.agent_id)
        by_teacher_end = self._driver[terminal_rows]
        self._fresh[terminal_rows] = True
        decision_rows = self._agent_rows(decision_steps.agent_id)
        starting = decision_rows[self._fresh[decision_rows]]
        if len(starting):
            self._assign(starting)
        by_teacher = self._driver[decision_rows]
        self._record(self.teacher_processor, decision_steps, terminal_steps, by_teacher,
                     by_teacher_end, self._teacher_info)
        self._record(self.processor, decision_steps, terminal_steps, ~by_teacher,
                     ~by_teacher_end, self._student_info)
        self._forward()
        if not len(decision_steps):
            self._student_info = self._teacher_info = None
            return self.spec.action_spec.empty_action(0)
        info, env_actions = self.actor.act(decision_steps)
        label = np.ones(len(decision_steps), bool) if self.mode == "dagger" else by_teacher
        labelled = np.flatnonzero(label)
        teacher_index = np.flatnonzero(by_teacher)
        student_index = np.flatnonzero(~by_teacher)
        steering = self._steering(by_teacher)
        if len(labelled):
            labels = self.teacher(take_decisions(decision_steps, labelled))
            labels = ActionTuple(np.asarray(labels.continuous, np.float32),
                                 np.asarray(labels.discrete, np.int32))
            self.labels += len(labelled)
            # The recorded actions are the labels where there are labels.
            recorded = ActionInfo(
                info.agent_id, ActionTuple(info.actions.continuous.copy(),
                                           info.actions.discrete.copy()),
                info.log_probs, {}, info.memory)
            recorded.actions.continuous[labelled] = labels.continuous
            recorded.actions.discrete[labelled] = labels.discrete
            # The env gets the teacher's actions where the teacher steers (labelled ⊇ those).
            env_actions = ActionTuple(env_actions.continuous.copy(),
                                      env_actions.discrete.copy())
            at = np.flatnonzero(steering[labelled])
            steered = np.flatnonzero(steering)
            env_actions.continuous[steered] = labels.continuous[at]
            env_actions.discrete[steered] = labels.discrete[at]
        else:
            recorded = info
        self._teacher_info = _take_info(recorded, teacher_index) if len(teacher_index) else None
        self._student_info = _take_info(recorded, student_index) if len(student_index) else None
        if len(student_index):
            self._entropy_sum += float(self.actor.last_entropy[student_index].sum())
            self._entropy_steps += len(student_index)
        self._since_report += 1
        if self._since_report >= self._report_every:
            self.flush_stats()
        return env_actions

    def _record(self, processor: AgentProcessor, decision: DecisionSteps,
                terminal: TerminalSteps, decision_mask: np.ndarray, terminal_mask: np.ndarray,
                info: Optional[ActionInfo]) -> None:
        d = decision if decision_mask.all() else take_decisions(decision,
                                                                np.flatnonzero(decision_mask))
        t = terminal if terminal_mask.all() else take_terminals(terminal,
                                                                np.flatnonzero(terminal_mask))
        if info is not None or len(d) or len(t):
            processor.add_experiences(d, t, info)

    def _forward(self) -> None:
        """Moves what the two processors produced onto the trainer's queue, tagged."""
        labelled_student = self.mode == "dagger"
        for trajectory in self._teacher_queue.drain():
            self.queue.put(Labelled(trajectory, True))
        for trajectory in self._student_queue.drain():
            self.queue.put(Labelled(trajectory, False) if labelled_student else trajectory)
        episodes = self.teacher_processor.pop_episode_stats()
        if len(episodes):
            self.queue.put(TeacherEpisodes(episodes))
        episodes = self.processor.pop_episode_stats()
        if len(episodes):
            self.queue.put(episodes)

    def stop_recording(self) -> None:
        super().stop_recording()
        self._student_info = self._teacher_info = None

    def state(self) -> Optional[dict]:
        return {**self.actor.state(), "imitation_rng": self.rng.bit_generator.state,
                "teacher_probability": self.teacher_probability, "labels": self.labels}

    def set_state(self, state: dict) -> None:
        self.actor.set_state(state)
        if "imitation_rng" in state:
            self.rng.bit_generator.state = state["imitation_rng"]
            self.teacher_probability = float(state["teacher_probability"])
            self.labels = int(state["labels"])

    def end_episodes(self) -> None:
        self.processor.end_episodes()
        self.teacher_processor.end_episodes()
        self._forward()
        self._student_info = self._teacher_info = None
        self._fresh[:] = True


__all__ = ["ImitationManager", "Labelled", "MODES", "TeacherEpisodes", "take_decisions",
           "take_terminals", "teacher_rows"]


class BehaviorRecorder:
    """Records another behavior's steps and actions as labels (``brain_to_imitate``).

    Added to the teacher behavior's AgentManager (``add_observer``), it sees every step
    that manager sees and the env actions it answered with; subscribed to the student's
    trainer, its queue carries ``Labelled`` trajectories and ``TeacherEpisodes``. With a
    recurrent student, ``actor`` (the student's) runs on those agents too, so each label
    carries the memory the student would have had there.
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, time_horizon: int,
                 actor: Optional[Actor] = None):
        self.behavior_name = behavior_name
        self.spec = spec
        self.actor = actor
        self.queue = TrajectoryQueue(behavior_name)
        self._trajectories = TrajectoryQueue(behavior_name)
        self.processor = AgentProcessor(spec, time_horizon, (), behavior_name)
        self.processor.publish_trajectory_queue(self._trajectories)
        self.recording = True
        self._last_info: Optional[ActionInfo] = None
        action_spec = spec.action_spec
        self._no_log_probs = (action_spec.continuous_size, action_spec.discrete_size)

    def __call__(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps,
                 actions: ActionTuple) -> None:
        """One step of the teacher behavior and the actions its agents got."""
        if not self.recording:
            return
        if self.actor is not None and len(terminal_steps):
            self.actor.episode_ended(terminal_steps.agent_id)
        self.processor.add_experiences(decision_steps, terminal_steps, self._last_info)
        for trajectory in self._trajectories.drain():
            self.queue.put(Labelled(trajectory, True))
        episodes = self.processor.pop_episode_stats()
        if len(episodes):
            self.queue.put(TeacherEpisodes(episodes))
        n = len(decision_steps)
        if not n:
            self._last_info = None
            return
        memory = self.actor.act(decision_steps)[0].memory if self.actor is not None else None
        c, b = self._no_log_probs
        self._last_info = ActionInfo(
            decision_steps.agent_id,
            ActionTuple(np.asarray(actions.continuous, np.float32).reshape(n, c),
                        np.asarray(actions.discrete, np.int32).reshape(n, b)),
            LogProbs(np.zeros((n, c), np.float32), np.zeros((n, b), np.float32)), {}, memory)

    def set_weights(self, update) -> None:
        if self.actor is not None:
            self.actor.set_weights(update)

    def stop_recording(self) -> None:
        self.recording = False
        self._last_info = None

    def state(self) -> Optional[dict]:
        return self.actor.state() if self.actor is not None else {}

    def set_state(self, state: dict) -> None:
        if self.actor is not None and state:
            self.actor.set_state(state)


__all__ += ["BehaviorRecorder"]
