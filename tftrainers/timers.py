"""Where a run's time goes: a tree of named phases, written as ``run_logs/timers.json``.

    from tftrainers.timers import TIMERS
    TIMERS.reset()                                  # a run starts (runner.run_training)
    with TIMERS.timed("update"):                    # nested phases nest in the tree
        ...
    TIMERS.add("worker start-up", seconds)         # a span measured elsewhere
    TIMERS.write("results/RUN/run_logs/timers.json")
    print(TIMERS.summary_line())                    # the three largest phases

The layout is ML-Agents' ``timers.json``: a root ``{"name": "root", "gauges", "metadata",
"total", "count", "self", "children"}`` whose ``children`` map each phase's name to
``{"total", "count", "self", "children"}`` (seconds; ``self`` is the total less its
children's). Each phase also has ``min`` and ``max`` (seconds of its shortest and longest
call), which ML-Agents' file does not. A phase timed in another thread than the run's
(a ``threaded`` update) is marked ``"is_parallel": true``: it overlaps its siblings, so
totals may add up to more than the root's.

One ``Timers`` per process (``TIMERS``), as a run is one per process: the phases are timed
where they happen (runner, trainers, acting) without passing an object through every
layer. Timing costs two ``perf_counter()`` calls and a dict lookup, well under a
microsecond a phase (docs/reference/timers.md has the measurement).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from threading import get_ident
from time import perf_counter
from typing import Dict, List, Optional, Tuple

#: ML-Agents' format version of the file this one follows.
TIMER_FORMAT_VERSION = "0.1.0"


def process_start_time() -> Optional[float]:
    """Wall-clock time (``time.time()``) this process was started, from /proc (Linux);
    None where that is not available."""
    try:
        with open("/proc/self/stat") as f:
            # Field 22 (after the parenthesised command, which may hold spaces).
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class TimerNode:
    """One phase: calls, their total, shortest and longest (seconds), its sub-phases."""

    __slots__ = ("children", "total", "count", "min", "max", "parallel")

    def __init__(self):
        self.children: Dict[str, TimerNode] = {}
        self.total = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = 0.0
        self.parallel = False

    def child(self, name: str) -> "TimerNode":
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = TimerNode()
        return node

    def add(self, seconds: float) -> None:
        self.total += seconds
        self.count += 1
        if seconds < self.min:
            self.min = seconds
        if seconds > self.max:
            self.max = seconds

    def as_dict(self) -> dict:
        children = {name: node.as_dict() for name, node in list(self.children.items())}
        out = {"total": self.total, "count": self.count,
               "self": max(0.0, self.total - sum(c["total"] for c in children.values()
                                                 if not c.get("is_parallel"))),
               "min": self.min if self.count else 0.0, "max": self.max}
        if self.parallel:
            out["is_parallel"] = True
        if children:
            out["children"] = children
        return out


class _Timed:
    """The context manager ``Timers.timed`` returns (a class: cheaper than a generator)."""

    __slots__ = ("timers", "name", "node", "start", "stack")

    def __init__(self, timers: "Timers", name: str):
        self.timers, self.name = timers, name

    def __enter__(self):
        timers = self.timers
        ident = get_ident()
        stack = self.stack = timers._stacks.get(ident) or timers._stack()
        node = stack[-1].children.get(self.name)
        if node is None:
            node = stack[-1].child(self.name)
            node.parallel = ident != timers._main
        self.node = node
        stack.append(node)
        self.start = perf_counter()
        return node

    def __exit__(self, *exc):
        self.node.add(perf_counter() - self.start)
        self.stack.pop()
        return False


class Timers:
    """The phases of one run, per thread a stack of the phases open now."""

    def __init__(self):
        self.reset()

    def reset(self, start: Optional[float] = None) -> None:
        """Forgets every phase; the root's clock starts at ``start`` (``time.time()``,
        default now)."""
        self.root = TimerNode()
        self.gauges: Dict[str, dict] = {}
        self.start_wall = time.time() if start is None else start
        self._start_perf = perf_counter() - (time.time() - self.start_wall)
        self._main = threading.get_ident()
        self._stacks: Dict[int, List[TimerNode]] = {}
        self.metadata = {"timer_format_version": TIMER_FORMAT_VERSION,
                         "start_time_seconds": str(int(self.start_wall)),
                         "python_version": sys.version,
                         "command_line_arguments": " ".join(sys.argv)}

    def _stack(self) -> List[TimerNode]:
        ident = threading.get_ident()
        stack = self._stacks.get(ident)
        if stack is None:
            stack = self._stacks[ident] = [self.root]
        return stack

    def timed(self, name: str) -> _Timed:
        """``with timers.timed(name):`` adds the block's time to phase ``name`` under the
        phase open in this thread (the root if none). Phases first timed in a thread other
        than the one that called ``reset`` are marked parallel."""
        return _Timed(self, name)

    def add(self, name: str, seconds: float, parent: Optional[str] = None) -> None:
        """Adds one call of ``seconds`` to phase ``name`` (under the root phase ``parent``
        if given, else under the phase open in this thread)."""
        node = self.root.child(parent) if parent else self._stack()[-1]
        node.child(name).add(seconds)

    def begin(self, name: str) -> None:
        """Opens root phase ``name`` in this thread without timing it: what is timed until
        ``end`` nests under it (a phase that spans functions, such as the start-up)."""
        self._stack().append(self.root.child(name))

    def end(self, name: str, seconds: float) -> None:
        """Closes phase ``name`` opened by ``begin``, adding one call of ``seconds``."""
        stack = self._stack()
        node = self.root.child(name)
        if node in stack:
            del stack[stack.index(node):]
        node.add(seconds)

    def set_gauge(self, name: str, value: float) -> None:
        """A value with its min, max and count (ML-Agents' gauges)."""
        gauge = self.gauges.get(name)
        if gauge is None:
            self.gauges[name] = {"value": value, "min": value, "max": value, "count": 1}
        else:
            gauge.update(value=value, min=min(gauge["min"], value),
                         max=max(gauge["max"], value), count=gauge["count"] + 1)

    def elapsed(self) -> float:
        """Seconds since the root's clock started."""
        return perf_counter() - self._start_perf

    def tree(self) -> dict:
        """The ML-Agents-layout dict of everything timed so far."""
        total = self.elapsed()
        children = self.root.as_dict().get("children", {})
        out = {"name": "root", "gauges": dict(self.gauges),
               "metadata": {**self.metadata, "end_time_seconds": str(int(time.time()))},
               "total": total, "count": 1,
               "self": max(0.0, total - sum(c["total"] for c in children.values()
                                            if not c.get("is_parallel")))}
        if children:
            out["children"] = children
        return out

    def write(self, path: str) -> None:
        """Writes ``tree()`` to ``path`` atomically (a reader sees the old or new file)."""
        from tftrainers.files import write_atomically
        write_atomically(path, json.dumps(self.tree(), indent=2))

    def largest(self, n: int = 3) -> List[Tuple[str, float]]:
        """The ``n`` phases with the largest totals among the root's children."""
        phases = [(name, node.total) for name, node in self.root.children.items()]
        return sorted(phases, key=lambda p: -p[1])[:n]

    def summary_line(self, path: Optional[str] = None) -> str:
        """One line: the three largest phases, their seconds and share of the run."""
        total = self.elapsed()
        parts = [f"{name} {seconds:.1f} s ({100 * seconds / max(total, 1e-9):.0f}%)"
                 for name, seconds in self.largest(3)]
        where = f"; every phase in {path}" if path else ""
        return (f"[INFO] Timers: {', '.join(parts) or 'nothing timed'} of {total:.1f} s"
                f"{where}.")


#: The process's timers (a run is one per process; ``runner.run_training`` resets them).
TIMERS = Timers()

#: File name in ``results/RUN/run_logs/``.
TIMERS_FILE = "timers.json"
