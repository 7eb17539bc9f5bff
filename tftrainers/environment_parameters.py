"""``environment_parameters``: each parameter's lessons, which lesson is current, and when
to move on (ML-Agents' EnvironmentParameterManager, facts in
docs/guides/environment-parameters.md).

    manager = EnvironmentParameterManager(options.environment_parameters, run_seed=seed)
    env.set_environment_parameters(manager.samplers(worker=0))
    ...                                          # every env step, after the trainers advance
    changed, reset = manager.update(progress, rewards)   # behavior -> share of max_steps,
    if changed:                                          # behavior -> recent episode returns
        env.set_environment_parameters(manager.samplers(worker=0))

A lesson ends when its ``completion_criteria`` hold: at least ``min_lesson_length``
episodes in the behavior's reward buffer, and ``progress`` (the behavior's step /
max_steps) or ``reward`` (the buffer's mean, smoothed 0.25 old + 0.75 new on every call
when ``signal_smoothing``) above ``threshold`` (strictly). One lesson per parameter per
call. The caller clears every behavior's reward buffer when a lesson changed. The lessons
(and the smoothed values) are part of every behavior's checkpoint: ``state()`` /
``restore()``.

Seeds: a sampler whose seed is -1 takes ``run_seed + k``, k counting the lessons of every
parameter in the file's order (as ML-Agents); env instance ``w`` reseeds each sampler with
``envs.parameters.worker_sampler_seed(seed, w)``, so instances draw distinct values.
"""
from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

from tftrainers.envs import parameters as P
from tftrainers.settings import ConfigError, EnvironmentParameterSettings, SamplerSettings

#: The stat with the lesson index (from 0) of each parameter, as ML-Agents names it.
LESSON_STAT = "Environment/Lesson Number/{}"


def build_sampler(settings: SamplerSettings, seed: int) -> P.Sampler:
    """The sampler of a lesson's ``value`` (``seed`` when the file gives -1)."""
    params = settings.sampler_parameters
    if params.seed != -1:
        seed = params.seed
    kind = settings.sampler_type
    if kind == "constant":
        return P.ConstantSampler(params.value, seed)
    if kind == "uniform":
        return P.UniformSampler(params.min_value, params.max_value, seed)
    if kind == "gaussian":
        return P.GaussianSampler(params.mean, params.st_dev, seed)
    return P.MultiRangeUniformSampler(params.intervals, seed)


class EnvironmentParameterManager:
    """The lessons of every environment parameter (see the module docstring)."""

    def __init__(self, parameters: Optional[Mapping[str, EnvironmentParameterSettings]],
                 run_seed: int = 0):
        self.parameters = dict(parameters or {})
        self._samplers: Dict[str, list] = {}
        offset = 0
        for name, parameter in self.parameters.items():
            self._samplers[name] = []
            for lesson in parameter.curriculum:
                self._samplers[name].append(build_sampler(lesson.value, run_seed + offset))
                offset += 1
        self.lessons: Dict[str, int] = dict.fromkeys(self.parameters, 0)
        self.smoothed: Dict[str, float] = dict.fromkeys(self.parameters, 0.0)

    def __bool__(self) -> bool:
        return bool(self.parameters)

    # --- what the env gets -------------------------------------------------------------------
    def samplers(self, worker: int = 0) -> Dict[str, P.Sampler]:
        """The current lesson's sampler of every parameter, seeded for env instance
        ``worker`` (a fresh stream each call, as a Unity scene rebuilds its sampler from
        every definition it receives)."""
        current = {name: self._samplers[name][i] for name, i in self.lessons.items()}
        return P.for_worker(current, worker)

    def lesson_names(self) -> Dict[str, str]:
        return {name: self.parameters[name].curriculum[i].name
                for name, i in self.lessons.items()}

    def describe(self, name: str) -> str:
        """``Parameter 'x' is in lesson 'L' (k of n) and has value uniform(0, 4)``."""
        i = self.lessons[name]
        lessons = self.parameters[name].curriculum
        return (f"Parameter '{name}' is in lesson '{lessons[i].name}' ({i + 1} of "
                f"{len(lessons)}) and has value {self._samplers[name][i]!r}")

    # --- what the trainers give --------------------------------------------------------------
    def behaviors(self) -> Tuple[str, ...]:
        """Behaviors named by a completion criterion, in order of first mention."""
        seen = []
        for parameter in self.parameters.values():
            for lesson in parameter.curriculum[:-1]:
                if lesson.completion_criteria.behavior not in seen:
                    seen.append(lesson.completion_criteria.behavior)
        return tuple(seen)

    def reward_buffer_size(self, behavior: str) -> int:
        """Episodes of ``behavior`` to keep: the largest ``min_lesson_length`` of the
        criteria naming it (at least 1)."""
        sizes = [lesson.completion_criteria.min_lesson_length
                 for parameter in self.parameters.values()
                 for lesson in parameter.curriculum[:-1]
                 if lesson.completion_criteria.behavior == behavior]
        return max([1] + sizes)

    def check_behaviors(self, known: Iterable[str], configured: Iterable[str] = ()) -> None:
        """Raises ConfigError (one line) for a criterion naming a behavior neither the env
        exposes (``known``) nor the config trains (``configured``)."""
        known = sorted({k.split("?", 1)[0] for k in known})
        configured = set(configured)
        for pname, parameter in self.parameters.items():
            for i, lesson in enumerate(parameter.curriculum[:-1]):
                behavior = lesson.completion_criteria.behavior
                if behavior not in known and behavior not in configured:
                    raise ConfigError(
                        f"environment_parameters.{pname}.curriculum[{i}].completion_criteria."
                        f"behavior: '{behavior}' is not a behavior of the environment; allowed: "
                        f"{', '.join(known) or 'none'}")

    def update(self, progress: Mapping[str, float],
               rewards: Mapping[str, Sequence[float]]) -> Tuple[bool, bool]:
        """Moves every parameter whose criteria hold to its next lesson.

        Args:
            progress: behavior -> its step / max_steps.
            rewards: behavior -> its reward buffer (returns of its latest episodes).
        Behaviors absent from both are skipped (their lessons wait).

        Returns:
            (some lesson changed, a changed lesson asks for a reset).
        """
        changed = reset = False
        for name, parameter in self.parameters.items():
            i = self.lessons[name]
            if i + 1 >= len(parameter.curriculum):
                continue
            criteria = parameter.curriculum[i].completion_criteria
            behavior = criteria.behavior
            if behavior not in progress and behavior not in rewards:
                continue
            buffer = rewards.get(behavior, ())
            if len(buffer) < criteria.min_lesson_length:
                continue
            if criteria.measure == "progress":
                ready = progress.get(behavior, 0.0) > criteria.threshold
            else:
                if not len(buffer):
                    continue
                measure = float(np.mean(buffer))
                if criteria.signal_smoothing:
                    measure = 0.25 * self.smoothed[name] + 0.75 * measure
                    self.smoothed[name] = measure
                ready = measure > criteria.threshold
            if ready:
                self.lessons[name] = i + 1
                changed = True
                reset = reset or criteria.require_reset
        return changed, reset

    # --- checkpoints -------------------------------------------------------------------------
    def state(self) -> dict:
        """What a checkpoint keeps: each parameter's lesson (index and name) and smoothed
        measure."""
        return {name: {"lesson": i, "name": self.parameters[name].curriculum[i].name,
                       "smoothed": self.smoothed[name]} for name, i in self.lessons.items()}

    def restore(self, states: Iterable[Optional[dict]]) -> None:
        """Continues from checkpoints' states (one per behavior): each parameter takes the
        furthest lesson any of them reached (lessons only move forward); parameters the
        checkpoints do not know, or whose lesson no longer exists, start at lesson 0."""
        for state in states:
            for name, saved in (state or {}).items():
                if name not in self.lessons:
                    continue
                lesson = int(saved.get("lesson", 0))
                if lesson >= len(self.parameters[name].curriculum):
                    continue
                if lesson > self.lessons[name] or (lesson == self.lessons[name]
                                                   and saved.get("smoothed") is not None):
                    self.lessons[name] = lesson
                    self.smoothed[name] = float(saved.get("smoothed", 0.0))


class Curriculum:
    """The manager wired to a run's trainers (duck-typed: ``step``, ``settings.max_steps``,
    ``reward_buffer``, ``stats``, ``run_state``, ``restored_run_state``)."""

    def __init__(self, manager: EnvironmentParameterManager, trainers: Mapping[str, object],
                 resume: bool = False):
        import collections
        self.manager = manager
        self.trainers = dict(trainers)
        if resume:
            manager.restore((t.restored_run_state or {}).get("environment_parameters")
                            for t in self.trainers.values())
        for name, trainer in self.trainers.items():
            trainer.reward_buffer = collections.deque(maxlen=manager.reward_buffer_size(name))
            trainer.run_state = self.run_state
        self._announced = dict(manager.lessons)
        self.set_stats()

    def news(self) -> list:
        """One line per parameter whose lesson changed since the last call (for the log)."""
        lines = [self.manager.describe(name) for name, lesson in self.manager.lessons.items()
                 if lesson != self._announced.get(name)]
        self._announced = dict(self.manager.lessons)
        return lines

    def run_state(self) -> dict:
        return {"environment_parameters": self.manager.state()}

    def set_stats(self) -> None:
        """``Environment/Lesson Number/<parameter>`` in every behavior's stats."""
        for trainer in self.trainers.values():
            for name, lesson in self.manager.lessons.items():
                trainer.stats.set_stat(LESSON_STAT.format(name), lesson)

    def update(self) -> Tuple[bool, bool]:
        """After the trainers advanced: moves lessons on; on a change, clears every reward
        buffer (as ML-Agents) and sets the stats. Returns (changed, reset)."""
        progress = {name: t.step / max(1, t.settings.max_steps)
                    for name, t in self.trainers.items()}
        rewards = {name: t.reward_buffer for name, t in self.trainers.items()}
        changed, reset = self.manager.update(progress, rewards)
        if changed:
            for trainer in self.trainers.values():
                trainer.reward_buffer.clear()
        self.set_stats()
        return changed, reset
