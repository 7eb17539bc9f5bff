"""The Python API's exceptions (a leaf: imported by ``api`` and ``inference``, which
``tftrainers`` exports them from; ``api`` used to define them, ``inference`` to import them
from there, a cycle)."""
from __future__ import annotations


class TrainingError(Exception):
    """A usage, config or file problem (``tftrainers-learn`` exits 2 with this line): a bad
    key or value, an unknown env id or an object that is no env, a run folder that exists
    or is locked, a checkpoint that does not fit. Raised before anything trains (or, for a
    file that cannot be written, after saving what could be). The message is one line."""

    exit_code = 2


class TrainingFailed(TrainingError):
    """The run failed while training (``tftrainers-learn`` exits 1): the env raised or sent
    bad data, an update was not finite, a callback raised. What could be saved was saved
    first; the original exception is ``__cause__``."""

    exit_code = 1
