"""SIGINT (Ctrl-C) and SIGTERM (Kubernetes, slurm, ``docker stop``) for the commands.

    with stop_signals("tftrainers-learn") as stop:   # first thing a command does
        ...start-up...            # a signal here raises Interrupted: nothing to save yet
        stop.defer()              # from here to the end: the loop, its saves, the teardown
        while not stop.requested:
            ...                   # a signal only sets stop.signum; the loop ends, saves
        return stop.exit_code     # 128 + signum (130 SIGINT, 143 SIGTERM), else 0

Both signals are handled the same way. A second signal, whatever is running (a save
included), ends the process at once with ``os._exit(128 + signum)`` and one line, no
traceback: checkpoints are written under a temporary name and renamed into place, so the
last complete one stays intact.

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

    def __init__(self, prog: str = "tftrainers"):
        self.prog = prog
        self.signum: Optional[int] = None
        self.deferred = False

    @property
    def requested(self) -> bool:
        """A stop signal has arrived."""
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal number once stopped by a signal, else 0."""
        return 0 if self.signum is None else 128 + self.signum

    def defer(self) -> None:
        """From now on a first signal only sets ``signum`` (the loop polls ``requested``)
        instead of raising Interrupted."""
        self.deferred = True

    def handle(self, signum: int, frame=None) -> None:
        if self.signum is not None:  # the second signal: no more waiting
            os.write(2, f"{self.prog}: {signal_name(signum)} again: stopped at once; the "
                        f"last complete checkpoint is kept\n".encode())
            os._exit(128 + signum)
        self.signum = signum
        if not self.deferred:
            raise Interrupted(signum)


_active: Optional[StopSignals] = None


@contextlib.contextmanager
def stop_signals(prog: str = "tftrainers") -> Iterator[StopSignals]:
    """Handles SIGINT and SIGTERM within; the handlers in place before are put back after.
    Nested calls share the outer instance (the command's)."""
    global _active
    if _active is not None:
        yield _active
        return
    stop = StopSignals(prog)
    if threading.current_thread() is not threading.main_thread():
        yield stop  # signals reach the main thread only: nothing to install here
        return
    previous = {signum: signal.signal(signum, stop.handle) for signum in HANDLED}
    _active = stop
    try:
        yield stop
    finally:
        _active = None
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
