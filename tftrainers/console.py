"""A console that is ours alone: what the installed commands do about their dependencies'
own output. Library use (tests, notebooks) is left alone: only the commands call this.

    quiet_dependencies()          # first thing a command does, before TensorFlow is imported
    ...parse arguments, load the config: errors answer here, without TensorFlow...
    tf = import_tensorflow()      # when the command needs TensorFlow, or:
    with quiet_tensorflow_import():
        policy = make_policy(...)   # a short block that may import it

Each source of noise is handled where it arises:

- TensorFlow's C++ logs (oneDNN, CPU features, CUDA probing, cuInit errors) obey
  ``TF_CPP_MIN_LOG_LEVEL``, set to 3 unless the user set it.
- Two lines obey nothing: libtensorflow_framework's CUDA stub logs "Could not find cuda
  drivers" (info) through absl while the library loads, before absl's logging is
  initialised; absl then writes everything to stderr, after its "All log messages before
  absl::InitializeLog()" banner, and reads no environment variable. So only that import
  runs with stderr (fd 2) captured, and every captured line is written back except C++
  log lines below ``TF_CPP_MIN_LOG_LEVEL`` (none when the user set it to 0).
- Python-side loggers of TensorFlow, absl and tf2onnx are raised to ERROR, and Python
  warnings raised in TensorFlow, Keras, tf2onnx, onnx and protobuf (or in our code, about
  how we call them) are ignored: a user can act on none of them. What a user can act on is
  said by our own lines (e.g. a GPU asked for but not found).
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings
from typing import Callable, Iterator, Optional

#: Python packages whose warnings and log records are not ours to show.
DEPENDENCY_LOGGERS = ("tensorflow", "absl", "tf2onnx", "keras", "h5py")
# Warnings are filtered by the module they are attributed to: the dependency's own, or ours
# when it warns about how we call it (stacklevel=2). Our messages to users are printed lines,
# never warnings.
_WARNING_MODULES = (r"(tensorflow|keras|tf2onnx|onnx|onnxruntime|google\.protobuf|"
                    r"absl|h5py|ml_dtypes|tftrainers)(\..*)?$")
# absl's C++ log lines ("I0000 00:00:1795426352.155532    8480 file.cc:31] ...": before
# absl is initialised the seconds field holds the whole Unix time) and
# TensorFlow's own ("2025-01-01 12:00:00.000000: I tensorflow/...cc:31] ...").
_CPP_LOG_LINE = re.compile(r"(?:([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] "
                           r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) \S+:\d+\] )")
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called"
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}


def quiet_dependencies() -> None:
    """Silences what TensorFlow and friends print that a user cannot act on (see the module
    docstring). Call before TensorFlow is imported; calling again changes nothing."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name in DEPENDENCY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=_WARNING_MODULES)


def cpp_log_severity(line: str) -> Optional[int]:
    """0 (info) .. 3 (fatal) for a line of TensorFlow's / absl's C++ logging (absl's
    pre-initialisation banner counts as info); None for any other line."""
    if line.startswith(_ABSL_BANNER):
        return 0
    match = _CPP_LOG_LINE.match(line)
    return _SEVERITY[match.group(1) or match.group(2)] if match else None


def cpp_min_log_level() -> int:
    """``TF_CPP_MIN_LOG_LEVEL`` as TensorFlow reads it (0 when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


@contextlib.contextmanager
def quiet_tensorflow_import() -> Iterator[None]:
    """Runs a block that may import TensorFlow first: the C++ lines it writes while it loads
    that ``TF_CPP_MIN_LOG_LEVEL`` should have held back are dropped, everything else written
    to stderr in the block reaches it (after the block). Keep such blocks short."""
    level = cpp_min_log_level()
    if "tensorflow" in sys.modules or level <= 0:
        yield
        return

    def held_back(line: str) -> bool:
        severity = cpp_log_severity(line)
        return severity is not None and severity < level
    with stderr_without(held_back):
        yield


def import_tensorflow():
    """Imports TensorFlow quietly (see ``quiet_tensorflow_import``) and returns it."""
    with quiet_tensorflow_import():
        import tensorflow  # noqa: F401
    return sys.modules["tensorflow"]


def quiet_tensorflow():
    """``quiet_dependencies`` then ``import_tensorflow``: for a script (a benchmark) that
    runs TensorFlow in its own process, so that what it prints is its own lines only."""
    quiet_dependencies()
    return import_tensorflow()


@contextlib.contextmanager
def stderr_without(drop: Callable[[str], bool]) -> Iterator[None]:
    """Runs the block with file descriptor 2 captured, then writes back to stderr every
    captured line for which ``drop`` is false (C++ code writes to fd 2 directly, so
    replacing ``sys.stderr`` would not see it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                capture.seek(0)
                text = capture.read().decode("utf-8", errors="replace")
                kept = [line for line in text.splitlines(keepends=True) if not drop(line)]
                if kept:
                    sys.stderr.write("".join(kept))
                    sys.stderr.flush()
    finally:
        os.close(saved)
