"""SIGINT (Ctrl-C) and SIGTERM (Kubernetes, slurm, ``docker stop``) for the commands.

    with stop_signals("tftrainers-learn", hold=True) as stop:   # first thing a command does
        ...start-up...            # a signal here is held: recorded, nothing interrupted
        stop.check()              # where start-up can stop cleanly: raises Interrupted
        stop.defer()              # checks, then from here on: the loop, its saves, teardown
        while not stop.requested:
            ...                   # a signal only sets stop.signum; the loop ends, saves
        return stop.exit_code     # 128 + signum (130 SIGINT, 143 SIGTERM), else 0

    with held():                  # (a command that is not held) import TensorFlow, write
        ...                       # files: Interrupted comes at the end of the block

Both signals are handled the same way. Without ``hold`` a first signal raises Interrupted
wherever the main thread is, which is only safe in code written for it: raised inside an
import or a library's constructor it leaves half-built objects whose ``__del__`` prints a
traceback (TensorFlow's ``ApiDefMap``), inside ``write_atomically`` it leaves a temporary
file. So slow third-party work (importing TensorFlow, building networks, writing exports)
runs held, and stops at the next ``check`` instead.

A second signal, whatever is running (a save included), ends the process at once with
``os._exit(128 + signum)`` and one line, no traceback: checkpoints are written under a
temporary name and renamed into place, so the last complete one stays intact. The line
goes to the stderr the command started with, even while a block captures file descriptor
2 (``console.stderr_without``).

The handlers are installed before TensorFlow is imported (the commands install them first
thing), so a signal during the slow start-up answers as well. Only the main thread can
install them; elsewhere ``stop_signals`` hands out an inert instance.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Iterator, Optional

HANDLED = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Interrupted(BaseException):
    """A stop signal arrived while there was nothing to save (start-up). A BaseException,
    like KeyboardInterrupt, so that ``except Exception`` on the way does not swallow it."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal_name(signum)}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """The state of SIGINT/SIGTERM handling for one command (see the module docstring)."""

    def __init__(self, prog: str = "tftrainers", hold: bool = False):
        self.prog = prog
        self.signum: Optional[int] = None
        self.deferred = False
        self.hold = hold
        self._held = 0  # depth of ``held()`` blocks
        self._stderr: Optional[int] = None  # a copy of fd 2 as the command started

    @property
    def requested(self) -> bool:
        """A stop signal has arrived."""
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal number once stopped by a signal, else 0."""
        return 0 if self.signum is None else 128 + self.signum

    def check(self) -> None:
        """Raises Interrupted if a signal arrived while held (and the run is not deferred)."""
        if self.signum is not None and not self.deferred:
            raise Interrupted(self.signum)

    def defer(self) -> None:
        """Checks, then from now on a first signal only sets ``signum`` (the loop polls
        ``requested``) instead of raising Interrupted."""
        self.check()
        self.deferred = True

    def handle(self, signum: int, frame=None) -> None:
        if self.signum is not None:  # the second signal: no more waiting
            line = (f"{self.prog}: {signal_name(signum)} again: stopped at once; the last "
                    f"complete checkpoint is kept\n").encode()
            try:
                os.write(2 if self._stderr is None else self._stderr, line)
            finally:
                os._exit(128 + signum)
        self.signum = signum
        if not (self.deferred or self.hold or self._held):
            raise Interrupted(signum)


_active: Optional[StopSignals] = None


@contextlib.contextmanager
def stop_signals(prog: str = "tftrainers", hold: bool = False) -> Iterator[StopSignals]:
    """Handles SIGINT and SIGTERM within; the handlers in place before are put back after.
    Nested calls share the outer instance (the command's); ``hold`` holds signals (see the
    module docstring) until ``check`` or ``defer``."""
    global _active
    if _active is not None:
        _active.hold = _active.hold or hold
        yield _active
        return
    stop = StopSignals(prog, hold)
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signals reach the main thread only: nothing to install here
        return
    try:
        stop._stderr = os.dup(2)
    except OSError:  # no stderr at all: the line has nowhere to go
        stop._stderr = None
    previous = {signum: signal.signal(signum, stop.handle) for signum in HANDLED}
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        if stop._stderr is not None:
            os.close(stop._stderr)
            stop._stderr = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Runs the block with a first stop signal only recorded; Interrupted is raised once
    the block has ended (unless the run is deferred). For work that must not be cut in
    the middle. Without handlers installed (library use), nothing changes."""
    stop = _active
    if stop is None:
        yield
        return
    stop._held += 1
    try:
        yield
    finally:
        stop._held -= 1
    if not stop._held:
        stop.check()


class StopFlag:
    """What stops a run started from Python (``tftrainers.train``): the interface of
    ``StopSignals`` without any signal handler (a notebook keeps its own Ctrl-C, which
    reaches the run as KeyboardInterrupt). ``request`` is how a callback ends the run:
    the loop stops, every trainer saves, the exit code stays 0."""

    signum: Optional[int] = None
    exit_code = 0

    def __init__(self):
        self.reason: Optional[str] = None
        self.deferred = False

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def check(self) -> None:
        """Nothing is held: there are no handlers."""

    def defer(self) -> None:
        self.deferred = True
