"""Training statistics with ML-Agents' names, written to TensorBoard, the console and CSV.

    writers = [TensorBoardWriter(run_dir), ConsoleWriter(), CSVWriter(run_dir)]
    stats = StatsReporter("Ball3D", writers)
    stats.add_stat("Environment/Cumulative Reward", episode_returns)   # many values a period
    stats.set_stat("Policy/Learning Rate", 3e-4)                        # the latest value
    stats.write_stats(step)                                            # every summary_freq steps

Values added during a summary period are averaged when written; the console line also gives
the standard deviation of the cumulative reward and the steps per second.
"""
from __future__ import annotations

import csv
import math
import os
import socket
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, TextIO

import numpy as np

CUMULATIVE_REWARD = "Environment/Cumulative Reward"
GROUP_CUMULATIVE_REWARD = "Environment/Group Cumulative Reward"
EPISODE_LENGTH = "Environment/Episode Length"
SELF_PLAY_ELO = "Self-play/ELO"  # the learner's rating after each match (trainers/ghost)


class StatSummary:
    """Mean, standard deviation and count of one stat over a summary period; ``values``
    keeps the values themselves for a histogram stat (None otherwise)."""

    __slots__ = ("mean", "std", "count", "values")

    def __init__(self, values: Sequence[float], histogram: bool = False):
        values = np.asarray(values, np.float64)
        self.count = len(values)
        self.mean = float(values.mean()) if self.count else float("nan")
        self.std = float(values.std()) if self.count else float("nan")
        self.values = values if histogram else None


class StatsWriter:
    """Receives the summaries of one category (behavior) at each summary step."""

    def write(self, category: str, step: int, summaries: Dict[str, StatSummary],
              steps_per_second: float, elapsed: float) -> None:
        """Writes the period's summaries."""

    def close(self) -> None:
        """Flushes and releases files."""


class TensorBoardWriter(StatsWriter):
    """TensorBoard event files under ``<run_dir>/<category>/`` (as ML-Agents lays them out).

    Scalars are written as ``simple_value`` summaries, as ML-Agents' (PyTorch) writer does:
    Event protocol buffers in a TFRecord file, written directly. TensorFlow's summary ops
    cost ~20 ms of eager op calls per summary in the middle of training.
    """

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._writers = {}

    def _writer(self, category: str):
        import tensorflow as tf
        from tensorflow.core.util.event_pb2 import Event
        writer = self._writers.get(category)
        if writer is None:
            directory = os.path.join(self.run_dir, category)
            os.makedirs(directory, exist_ok=True)
            now = time.time()
            name = f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}"
            writer = self._writers[category] = tf.io.TFRecordWriter(os.path.join(directory,
                                                                                 name))
            writer.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
        return writer

    def write(self, category, step, summaries, steps_per_second, elapsed):
        from tensorflow.core.framework.summary_pb2 import Summary
        from tensorflow.core.util.event_pb2 import Event
        values = [Summary.Value(tag=name, simple_value=summary.mean)
                  if summary.values is None else Summary.Value(tag=name,
                                                               histo=_histogram(summary.values))
                  for name, summary in summaries.items() if summary.count]
        values.append(Summary.Value(tag="Environment/Steps per Second",
                                    simple_value=steps_per_second))
        writer = self._writer(category)
        writer.write(Event(wall_time=time.time(), step=int(step),
                           summary=Summary(value=values)).SerializeToString())
        writer.flush()

    def close(self):
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


def _histogram(values: np.ndarray):
    """TensorBoard's HistogramProto of ``values`` (30 buckets, right edges)."""
    from tensorflow.core.framework.summary_pb2 import HistogramProto
    counts, edges = np.histogram(values, bins=30)
    return HistogramProto(min=float(values.min()), max=float(values.max()), num=len(values),
                          sum=float(values.sum()), sum_squares=float(np.square(values).sum()),
                          bucket_limit=edges[1:].tolist(), bucket=counts.astype(float).tolist())


class CSVWriter(StatsWriter):
    """``<run_dir>/run_logs/<category>.csv``: one row per summary, one column per stat."""

    def __init__(self, run_dir: str):
        self.directory = os.path.join(run_dir, "run_logs")
        self._columns: Dict[str, List[str]] = {}

    def write(self, category, step, summaries, steps_per_second, elapsed):
        os.makedirs(self.directory, exist_ok=True)
        path = os.path.join(self.directory, f"{category}.csv")
        row = {"step": step, "time_elapsed": round(elapsed, 3),
               "steps_per_second": round(steps_per_second, 1)}
        row.update({name: s.mean for name, s in summaries.items() if s.count})
        columns = self._columns.get(category)
        if columns is None and os.path.exists(path):  # resuming: keep the file's columns
            with open(path, newline="") as f:
                columns = next(csv.reader(f), None)
        new_file = columns is None
        if new_file:
            columns = list(row)
        added = [k for k in row if k not in columns]
        if added:  # a stat appeared later (e.g. after the first update): rewrite the header
            columns = columns + added
            rows = []
            if os.path.exists(path):
                with open(path, newline="") as f:
                    rows = list(csv.DictReader(f))
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, columns)
                writer.writeheader()
                writer.writerows(rows)
            new_file = False
        self._columns[category] = columns
        with open(path, "w" if new_file else "a", newline="") as f:
            writer = csv.DictWriter(f, columns)
            if new_file:
                writer.writeheader()
            writer.writerow(row)


class ConsoleWriter(StatsWriter):
    """ML-Agents' console line: behavior, step, time elapsed, mean and std reward (and the
    mean group reward when groups report one, the ELO under self-play), steps/s."""

    def __init__(self, stream: Optional[TextIO] = None, progress: "Optional[ProgressDisplay]" = None,
                 log: Optional[Callable[[str], None]] = None):
        self.stream = stream or sys.stdout
        self.progress = progress
        # Where the lines go: ``stream`` unless the caller routes its run's lines elsewhere
        # (a benchmark that runs trainings in its own process and prints only its table).
        self.log = log

    def write(self, category, step, summaries, steps_per_second, elapsed):
        reward = summaries.get(CUMULATIVE_REWARD)
        if reward is not None and reward.count:
            rewards = f"Mean Reward: {reward.mean:.3f}. Std of Reward: {reward.std:.3f}."
        else:
            rewards = "No episode was completed since the last summary."
        group = summaries.get(GROUP_CUMULATIVE_REWARD)
        if group is not None and group.count:  # as ML-Agents, for groups (MA-POCA)
            rewards += f" Mean Group Reward: {group.mean:.3f}."
        elo = summaries.get(SELF_PLAY_ELO)
        if elo is not None and elo.count:  # as ML-Agents, under self-play
            rewards += f" ELO: {elo.mean:.3f}."
        if self.progress is not None:
            self.progress.clear()
        line = (f"[INFO] {category}. Step: {step}. Time Elapsed: {elapsed:.3f} s. {rewards} "
                f"Steps/s: {steps_per_second:.0f}.")
        if self.log is not None:
            self.log(line)
        else:
            print(line, file=self.stream, flush=True)


class ProgressDisplay:
    """A live status line on an interactive terminal; silent when output is not a terminal."""

    def __init__(self, stream: Optional[TextIO] = None, min_interval: float = 0.25):
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.min_interval = min_interval
        self._last = 0.0
        self._width = 0

    def due(self) -> bool:
        """Whether an update would be shown now (callers skip computing its figures if not)."""
        return self.enabled and time.monotonic() - self._last >= self.min_interval

    def update(self, category: str, step: int, max_steps: int, reward: float,
               steps_per_second: float) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.min_interval:
            return
        self._last = now
        left = (max_steps - step) / steps_per_second if steps_per_second > 0 else float("inf")
        left_text = "?" if math.isinf(left) else time.strftime("%H:%M:%S", time.gmtime(left))
        reward_text = "-" if math.isnan(reward) else f"{reward:.3f}"
        line = (f"{category}: {step}/{max_steps} steps ({100.0 * step / max(max_steps, 1):.1f}%)"
                f"  reward {reward_text}  {steps_per_second:.0f} steps/s  {left_text} left")
        self._width = max(self._width, len(line))
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()


class StatsReporter:
    """Collects one category's stats over a summary period and hands them to the writers."""

    def __init__(self, category: str, writers: Iterable[StatsWriter]):
        self.category = category
        self.writers = list(writers)
        self._values: Dict[str, List[float]] = {}
        self._sums = set()  # keys whose one value is the period's running sum
        self._histograms = set()  # keys written as histograms
        self._start = time.monotonic()
        self._period_start = self._start
        self._period_step: Optional[int] = 0
        self.elapsed_offset = 0.0  # time of earlier sessions of a resumed run

    def add_stat(self, key: str, value) -> None:
        """Adds one value or an array of values to the period's mean."""
        values = self._values.setdefault(key, [])
        if np.ndim(value):
            values.extend(np.asarray(value, np.float64).ravel().tolist())
        else:
            values.append(float(value))

    def add_environment_stats(self, values) -> None:
        """Stats a game reported (``{key: [(value, aggregation), ...]}``, Unity's stats side
        channel), under the key as given, summarised as the game asked: 0 average, 1 most
        recent, 2 sum over the summary period, 3 histogram (a TensorBoard histogram; its
        mean on the console and in the CSV)."""
        for key, pairs in values.items():
            for value, aggregation in pairs:
                if aggregation == 1:
                    self.set_stat(key, value)
                elif aggregation == 2:
                    if key in self._sums:
                        self._values[key][0] += float(value)
                    else:
                        self._values[key] = [float(value)]
                        self._sums.add(key)
                else:
                    if aggregation == 3:
                        self._histograms.add(key)
                    self.add_stat(key, value)

    def set_stat(self, key: str, value: float) -> None:
        """Replaces the period's values with this one (for learning rates and the like)."""
        self._values[key] = [float(value)]

    def latest_mean(self, key: str) -> float:
        values = self._values.get(key)
        return float(np.mean(values)) if values else float("nan")

    def elapsed(self) -> float:
        return self.elapsed_offset + time.monotonic() - self._start

    def steps_per_second(self, step: int) -> float:
        """Rate over the current summary period."""
        seconds = time.monotonic() - self._period_start
        steps = step - (self._period_step or 0)
        return steps / seconds if seconds > 0 else 0.0

    def write_stats(self, step: int) -> Dict[str, StatSummary]:
        now = time.monotonic()
        steps = step - (self._period_step if self._period_step is not None else step)
        seconds = now - self._period_start
        steps_per_second = steps / seconds if seconds > 0 and steps > 0 else 0.0
        summaries = {k: StatSummary(v, k in self._histograms) for k, v in self._values.items()}
        for writer in self.writers:
            writer.write(self.category, step, summaries, steps_per_second, self.elapsed())
        self._values = {}
        self._sums = set()
        self._histograms = set()
        self._period_start, self._period_step = now, step
        return summaries

    def start_period(self, step: int) -> None:
        """Starts timing a summary period at ``step`` (at the start or a resume)."""
        self._period_start, self._period_step = time.monotonic(), step
