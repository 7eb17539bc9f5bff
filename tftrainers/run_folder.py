"""The run folder ``results_dir/run_id``: a safe name, one process at a time, no leftovers.

    folder = RunFolder.open(options.checkpoint_settings)   # checks, locks, (--force) clears
    try:
        ...train into folder.path...
    finally:
        folder.close()                                      # releases the lock

- A run id is a name, not a path: empty, ``.``, ``..``, a path separator or an absolute
  path is refused, so ``--force`` with an unset shell variable cannot wipe other runs.
- ``--force`` deletes only a folder that is a run of ours (it holds ``configuration.yaml``)
  or is empty, directly inside ``results_dir``, and only after taking the run's lock.
- The lock is ``fcntl.flock`` on ``run.lock`` in the run folder, which holds the PID and
  host of its owner for the message a second process gets. The kernel drops it when its
  process dies, however it dies, so a lock left by a dead process is simply taken over.
- With the lock held, leftovers of killed runs (files and folders with ``.tmp-`` in their
  name, checkpoint folders the index does not list) are removed.
"""
from __future__ import annotations

import os
import shutil
import socket
from typing import List, Optional

from tftrainers.files import TMP_TAG, write_atomically  # noqa: F401  (re-exported)

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None

LOCK_FILE = "run.lock"
CONFIG_FILE = "configuration.yaml"


class RunError(ValueError):
    """A problem with the run's folders or checkpoints; one line for the user."""


def check_run_id(run_id) -> str:
    """Returns ``run_id`` if it names a folder directly inside results_dir.

    Raises:
        RunError: empty, ``.``, ``..``, a path separator or an absolute path.
    """
    allowed = ("allowed: a folder name inside results_dir, without '/' or '\\', "
               "not '.' or '..'")
    text = "" if run_id is None else str(run_id)
    separators = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if not text.strip():
        problem = "is empty"
    elif text == ".":
        problem = "is results_dir itself"
    elif text == "..":
        problem = "is the folder above results_dir"
    elif os.path.isabs(text):
        problem = "is an absolute path"
    elif any(sep in text for sep in separators):
        problem = "contains a path separator"
    elif "\0" in text:
        problem = "contains a NUL character"
    else:
        return text
    raise RunError(f"run id {text!r} {problem}; {allowed}")


def _os_error(path: str, error: OSError, doing: str) -> RunError:
    return RunError(f"{path}: cannot {doing} ({error.strerror or error})")


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/run.lock`` for the life of this process."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.path = os.path.join(run_dir, LOCK_FILE)
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Takes the lock.

        Raises:
            RunError: another process holds it (naming it), or the file cannot be made.
        """
        if self._fd is not None or fcntl is None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise _os_error(self.path, error, "create the run's lock file") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = self._holder(fd)
            os.close(fd)
            raise RunError(f"{self.run_dir}: the run is in use by {holder}; wait for it to "
                           f"end or stop it first") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
        self._fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            pid, host = os.pread(fd, 512, 0).decode(errors="replace").split()[:2]
            return f"process {int(pid)} on host {host}"
        except (OSError, ValueError):
            return "another process"

    def release(self) -> None:
        # The file stays: removing it would let a process that opened it meanwhile lock
        # an unlinked file while a third locks a new one.
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _entries(path: str) -> List[str]:
    """What a run folder holds, besides our lock file."""
    try:
        return sorted(name for name in os.listdir(path) if name != LOCK_FILE)
    except FileNotFoundError:
        return []
    except OSError as error:
        raise _os_error(path, error, "read the run folder") from None


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


class RunFolder:
    """A run folder opened for training: checked, locked, and cleared with ``--force``."""

    def __init__(self, path: str, lock: RunLock):
        self.path = path
        self.lock = lock

    @classmethod
    def open(cls, checkpoint_settings) -> "RunFolder":
        """Opens ``results_dir/run_id`` as ``checkpoint_settings`` ask (fresh, ``--force``,
        ``--resume``, ``--inference``); the returned folder holds the lock.

        Raises:
            RunError: one line: an unsafe run id, a run that exists (fresh start) or does
                not (resume), a folder --force must not delete, a run another process
                holds, or a folder that cannot be made.
        """
        cs = checkpoint_settings
        run_id = check_run_id(cs.run_id)
        path = os.path.join(cs.results_dir, run_id)
        if os.path.islink(path):
            raise RunError(f"{path}: is a symbolic link; a run folder is a plain folder inside "
                           f"results_dir")
        if os.path.lexists(path) and not os.path.isdir(path):
            raise RunError(f"{path}: exists and is not a folder; pick another --run-id")
        exists = os.path.isdir(path)
        entries = _entries(path) if exists else []
        ours = not entries or CONFIG_FILE in entries
        resuming = bool(cs.resume or (cs.inference and cs.load_model))
        lock = RunLock(path)
        if exists and ours:  # whatever else is wrong, a run in use is named first
            lock.acquire()
        try:
            if resuming:
                if not entries:
                    raise RunError(f"{path}: no run to resume; start it without --resume")
                if not ours:
                    raise RunError(f"{path}: not a run of tftrainers (no {CONFIG_FILE}); "
                                   f"nothing to resume")
            elif entries and not cs.inference:
                if not cs.force:
                    raise RunError(f"{path}: a run with id '{run_id}' exists; use --resume to "
                                   f"continue it, --force to overwrite it, or another --run-id")
                if not ours:
                    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
                    raise RunError(f"{path}: --force deletes only a run folder of tftrainers "
                                   f"(with {CONFIG_FILE}) or an empty one; this folder holds "
                                   f"{shown}; pick another --run-id")
                for name in _entries(path):  # read again: under the lock now
                    _remove(os.path.join(path, name))
            if not exists:
                try:
                    os.makedirs(path, exist_ok=True)
                except OSError as error:
                    raise _os_error(path, error, "create the run folder") from None
                lock.acquire()
        except BaseException:
            lock.release()
            raise
        return cls(path, lock)

    def remove_leftovers(self) -> List[str]:
        """Removes what killed runs left behind; returns the removed paths. Call it with
        the lock held (no other process of ours writes here then)."""
        return remove_leftovers(self.path)

    def close(self) -> None:
        self.lock.release()


def _temporary(directory: str) -> List[str]:
    return [os.path.join(directory, name) for name in _list(directory) if TMP_TAG in name]


def _list(directory: str) -> List[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def remove_leftovers(run_dir: str) -> List[str]:
    """Temporary files and folders (``*.tmp-*``: interrupted checkpoints, index writes,
    ONNX and SavedModel exports) and checkpoint folders the index does not list (killed
    between the rename and the index update, or while pruning) of every behavior."""
    from tftrainers.checkpoint import Checkpointer, CheckpointError
    found = _temporary(run_dir)
    for behavior in _list(run_dir):
        behavior_dir = os.path.join(run_dir, behavior)
        if not os.path.isdir(behavior_dir) or os.path.islink(behavior_dir):
            continue
        found += _temporary(behavior_dir)
        found += _temporary(os.path.join(behavior_dir, "saved_model"))
        checkpoints = os.path.join(behavior_dir, "checkpoints")
        if os.path.isdir(checkpoints):
            found += _temporary(checkpoints)
            try:
                found += Checkpointer(checkpoints, behavior).unindexed()
            except CheckpointError:  # an unreadable index: nothing is known to be stale
                pass
    removed = []
    for path in found:
        try:
            _remove(path)
            removed.append(path)
        except OSError:
            pass  # left for the next start; not worth stopping a run for
    return removed
