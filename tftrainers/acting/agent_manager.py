"""AgentManager: one behavior's acting side, from env steps to trajectories on a queue.

    manager = AgentManager("Ball3D", spec, actor, time_horizon=64)
    trainer.subscribe(manager)             # its queue feeds the trainer; weights come back
    while training:
        decision, terminal = env.get_steps("Ball3D")
        env.set_actions("Ball3D", manager.step(decision, terminal))
        env.step()
        trainer.advance()                  # drains manager.queue, updates, publishes weights

As ML-Agents' AgentProcessor -> AgentManagerQueue -> Trainer, on arrays: the manager
records every agent's steps with an ``AgentProcessor`` (one policy call for all agents),
and its queue carries what the learner needs: ``Trajectory`` objects, ``EpisodeStats`` of
finished episodes and ``ActingStats`` (the policy's entropy while acting). Weights come back
as a ``WeightUpdate`` (flat vector + version). Nothing here imports TensorFlow or a trainer,
so the same manager runs in the learner's process, a worker process or a Ray actor.
"""
from __future__ import annotations

from typing import NamedTuple, Optional


from tftrainers.acting.actor import Actor, WeightUpdate
from tftrainers.envs.base import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from tftrainers.envs.checks import EnvDataError, check_steps
from tftrainers.processing import AgentProcessor, TrajectoryQueue
from tftrainers.timers import TIMERS


class ActingStats(NamedTuple):
    """What the acting side measured since its last report (``Policy/Entropy``)."""

    entropy_sum: float
    steps: int


class AgentManager:
    """Records one behavior's env steps into trajectories and acts for its agents.

    Args:
        behavior_name: the behavior.
        spec: its spec.
        actor: the acting policy (``Actor``).
        time_horizon: steps after which a trajectory is cut (ML-Agents ``time_horizon``).
        record: False to act only (inference): no trajectories, no stats.
        report_every: env steps between ``ActingStats`` reports.
    """

    def __init__(self, behavior_name: str, spec: BehaviorSpec, actor: Actor, time_horizon: int,
                 record: bool = True, report_every: int = 64):
        self.behavior_name = behavior_name
        self.spec = spec
        self.actor = actor
        self.queue = TrajectoryQueue(behavior_name)
        self.processor = AgentProcessor(spec, time_horizon, (), behavior_name)
        self.processor.publish_trajectory_queue(self.queue)
        self.recording = record
        self._last_info = None
        self._entropy_sum, self._entropy_steps = 0.0, 0
        self._report_every = max(int(report_every), 1)
        self._since_report = 0
        self.observers = []  # called with (decision, terminal, env actions) every step

    def add_observer(self, observer) -> None:
        """``observer(decision_steps, terminal_steps, env_actions)`` sees every recorded step
        (a BC student's ``BehaviorRecorder`` watching its teacher behavior)."""
        self.observers.append(observer)

    def step(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps) -> ActionTuple:
        """Checks the agents' steps at the boundary (shapes, dtypes, finite values: one-line
        ``EnvDataError``), records them and returns actions for ``decision_steps``."""
        check_steps(self.behavior_name, self.spec, decision_steps, terminal_steps)
        if len(terminal_steps):
            self.actor.episode_ended(terminal_steps.agent_id)
        if not self.recording:
            if not len(decision_steps):
                return self.spec.action_spec.empty_action(0)
            with TIMERS.timed("act"):
                return self.actor.act(decision_steps)[1]
        processor = self.processor
        with TIMERS.timed("trajectory assembly"):
            processor.add_experiences(decision_steps, terminal_steps, self._last_info)
        episodes = processor.pop_episode_stats()
        if len(episodes):
            self.queue.put(episodes)
        if not len(decision_steps):
            self._last_info = None
            empty = self.spec.action_spec.empty_action(0)
            for observer in self.observers:
                observer(decision_steps, terminal_steps, empty)
            return empty
        with TIMERS.timed("act"):
            info, env_actions = self.actor.act(decision_steps)
        self._last_info = info
        self._entropy_sum += float(self.actor.last_entropy.sum())
        self._entropy_steps += len(decision_steps)
        self._since_report += 1
        if self._since_report >= self._report_every:
            self.flush_stats()
        for observer in self.observers:
            observer(decision_steps, terminal_steps, env_actions)
        return env_actions

    def flush_stats(self) -> None:
        """Puts the acting stats gathered so far on the queue."""
        if self._entropy_steps:
            self.queue.put(ActingStats(self._entropy_sum, self._entropy_steps))
        self._entropy_sum, self._entropy_steps, self._since_report = 0.0, 0, 0

    def set_weights(self, update: WeightUpdate) -> None:
        """The learner's new weights (ignored unless newer than the ones in use)."""
        self.actor.set_weights(update)

    def stop_recording(self) -> None:
        """Keeps acting but records nothing more (the trainer reached max_steps)."""
        self.recording = False
        self._last_info = None

    def state(self) -> Optional[dict]:
        """What a checkpoint keeps of the acting side (see ``Actor.state``)."""
        return self.actor.state()

    def set_state(self, state: dict) -> None:
        self.actor.set_state(state)

    def end_episodes(self) -> None:
        """Emits every agent's steps so far as interrupted trajectories (a forced reset)."""
        self.processor.end_episodes()
        self._last_info = None


class EnvCallError(Exception):
    """An env call raised inside ``step_env``: ``call`` names it (``"step()"``, ...) and
    ``error`` is what it raised."""

    def __init__(self, call: str, error: Exception):
        super().__init__(f"{call}: {error}")
        self.call = call
        self.error = error


def env_error_line(env_id: str, call: str, env_step: int, error: BaseException) -> str:
    """One line for an env call that raised: the env, the error's type, the call, the env
    step and the first line of the error's message (the same in-process and in a worker)."""
    reason = (str(error).strip().splitlines() or [""])[0][:300]
    return f"{env_id} raised {type(error).__name__} in {call} at env step {env_step}: {reason}"


def call_env(call: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, an env call named ``call`` (``"reset()"``, ...).

    Raises:
        EnvCallError: it raised (``call`` and the error it raised), so that whoever steps
            the env can tell the env's errors from its own and name the call.
        EnvDataError: an adapter's check of what the env returned failed; it passes
            through as it is, so it ends the run like the boundary check's (a worker
            restarted with a fresh env would get the same data again).
    """
    try:
        return fn(*args, **kwargs)
    except EnvDataError:
        raise
    except Exception as error:  # pylint: disable=broad-except
        raise EnvCallError(call, error) from error


def step_env(env, managers) -> None:
    """One env step for every behavior: its decision and terminal steps to its
    AgentManager, the manager's actions back, then ``env.step()``.

    Raises:
        EnvCallError: an env call raised (the managers' own errors, such as the boundary
            check's ``EnvDataError``, pass through as they are).
    """
    for name, manager in managers.items():
        decision, terminal = call_env("get_steps()", env.get_steps, name)
        actions = manager.step(decision, terminal)  # checks the data first
        if len(decision):
            call_env("set_actions()", env.set_actions, name, actions)
    with TIMERS.timed("env step"):
        call_env("step()", env.step)
    # What a Unity game reported on its stats channel goes to every behavior's trainer.
    pop_stats = getattr(env, "pop_environment_stats", None)
    if pop_stats is not None:
        stats = pop_stats()
        if stats is not None:
            for manager in managers.values():
                manager.queue.put(stats)


__all__ = ["ActingStats", "AgentManager", "EnvCallError", "call_env", "env_error_line",
           "step_env"]
