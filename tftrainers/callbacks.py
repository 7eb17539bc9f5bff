"""Callbacks of ``tftrainers.train``: called on each summary and each checkpoint; a
callback can stop the run (as Stable-Baselines3's ``BaseCallback._on_step`` returning False).

    class PrintReward(tftrainers.Callback):
        def on_summary(self, behavior, step, stats):
            print(behavior, step, stats.get("Environment/Cumulative Reward"))

    run = tftrainers.train("configs/ppo/Basic.yaml", callbacks=[
        PrintReward(), tftrainers.StopOnReward(0.9)])

A plain function ``f(behavior, step, stats)`` is taken as an ``on_summary``. Returning
``False`` from ``on_summary`` or ``on_checkpoint`` stops the run: the loop ends at the next
env step, every trainer saves its checkpoint and exports (``on_checkpoint`` is called for
them too), and ``train`` returns the Run with ``run.stopped_by`` naming the callback. An
exception in a callback stops the run the same way and then raises ``TrainingFailed``
naming the callback (the callback's exception in its ``__cause__`` chain).

No TensorFlow here: a callback sees step counts, stat means and file paths.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Iterable, Optional, Union

from tftrainers.stats import CUMULATIVE_REWARD, StatsWriter


class Callback:
    """Base of callbacks; override what you need. ``False`` from a hook stops the run."""

    def on_start(self, run) -> None:
        """Before the first env step; ``run`` is the Run being trained (its folder exists,
        ``run.behaviors`` lists what trains)."""

    def on_summary(self, behavior: str, step: int, stats: Dict[str, float]) -> Optional[bool]:
        """Every ``summary_freq`` steps of ``behavior``: ``stats`` maps ML-Agents' stat names
        (``Environment/Cumulative Reward``, ``Losses/Policy Loss``...) to their mean over the
        period; stats without a value this period are absent."""
        return None

    def on_checkpoint(self, behavior: str, step: int, path: str) -> Optional[bool]:
        """After each checkpoint (and its ONNX/SavedModel exports) of ``behavior``:
        ``path`` is the checkpoint folder."""
        return None

    def on_end(self, run) -> None:
        """After the last save, also when the run stopped early or failed."""


class StopOnReward(Callback):
    """Stops the run once a summary's mean cumulative reward reaches ``threshold``
    (Stable-Baselines3's ``StopTrainingOnRewardThreshold``).

    Args:
        threshold: the mean episode return that ends the run.
        behavior: the behavior to watch (default: any).
    """

    def __init__(self, threshold: float, behavior: Optional[str] = None):
        self.threshold = float(threshold)
        self.behavior = behavior
        self.reached_at: Optional[int] = None  # the step it was reached at

    def on_summary(self, behavior, step, stats):
        if self.behavior is not None and behavior != self.behavior:
            return None
        reward = stats.get(CUMULATIVE_REWARD, math.nan)
        if reward >= self.threshold:
            self.reached_at = step
            return False
        return None

    def __repr__(self):
        return f"StopOnReward({self.threshold:g})"


class CallbackError(Exception):
    """A callback raised; names the callback and the hook. (The run maps it to
    ``TrainingFailed``.)"""


def _name(callback) -> str:
    if isinstance(callback, Callback) and type(callback).__repr__ is not object.__repr__:
        return repr(callback)
    return getattr(callback, "__name__", None) or type(callback).__name__


class _FunctionCallback(Callback):
    def __init__(self, function: Callable):
        self.function = function

    def on_summary(self, behavior, step, stats):
        return self.function(behavior, step, stats)

    def __repr__(self):
        return _name(self.function)


class _SummaryWriter(StatsWriter):
    """Hands each summary to the callbacks (the last of the run's stats writers)."""

    def __init__(self, callbacks: "CallbackList"):
        self.callbacks = callbacks

    def write(self, category, step, summaries, steps_per_second, elapsed):
        stats = {name: s.mean for name, s in summaries.items() if s.count}
        self.callbacks.call("on_summary", category, step, stats)


class CallbackList:
    """The run's callbacks: hooks them into the stats writers and the trainers' saves."""

    def __init__(self, callbacks: Iterable[Union[Callback, Callable]] = ()):
        if isinstance(callbacks, (Callback,)) or callable(callbacks):
            callbacks = [callbacks]
        self.callbacks = []
        for callback in callbacks:
            if isinstance(callback, Callback):
                self.callbacks.append(callback)
            elif callable(callback):
                self.callbacks.append(_FunctionCallback(callback))
            else:
                raise TypeError(f"callbacks: {callback!r} is neither a tftrainers.Callback "
                                f"nor a function f(behavior, step, stats)")
        self.writer = _SummaryWriter(self)
        self.run = None  # the Run, handed to on_start and on_end
        self.stop = None
        self.stopped_by: Optional[str] = None
        self.error: Optional[CallbackError] = None  # the first exception of a callback

    def start(self, trainers, stop) -> None:
        """Called by the runner once the trainers exist, before the first env step."""
        self.stop = stop
        for trainer in trainers.values():
            trainer.save_listeners.append(self._saved)
        self.each("on_start", self.run)

    def _saved(self, trainer, path) -> None:
        self.call("on_checkpoint", trainer.behavior_name, trainer.step, path)

    def call(self, hook: str, *args) -> None:
        for callback in self.callbacks:
            try:
                answer = getattr(callback, hook)(*args)
            except Exception as error:  # pylint: disable=broad-except
                # Not raised here (inside a trainer's summary or save): the run stops at the
                # next env step, saves, and then fails with it (``raise_error``).
                if self.error is None:
                    self.error = CallbackError(f"callback {_name(callback)}.{hook} raised "
                                               f"{type(error).__name__}: {error}")
                    self.error.__cause__ = error
                if self.stop is None:
                    raise self.error from error
                self.stop.request(f"callback {_name(callback)}")
                continue
            if answer is False and self.stop is not None and not self.stop.requested:
                self.stopped_by = f"callback {_name(callback)}"
                self.stop.request(self.stopped_by)

    def each(self, hook: str, *args) -> None:
        """Calls a hook that cannot stop anything (on_start, on_end)."""
        for callback in self.callbacks:
            try:
                getattr(callback, hook)(*args)
            except Exception as error:  # pylint: disable=broad-except
                raise CallbackError(f"callback {_name(callback)}.{hook} raised "
                                    f"{type(error).__name__}: {error}") from error
