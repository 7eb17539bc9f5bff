"""Resume state: TF variables (networks, optimizers, normalizers) plus a JSON of the rest.

    checkpointer = Checkpointer("results/run/Ball3D/checkpoints", "Ball3D", keep=5)
    checkpointer.save(step, {"policy": policy, "optimizer": optimizer}, {"step": step, ...})
    state = checkpointer.restore(checkpointer.latest(), {"policy": policy, ...})
    entry, state, skipped = checkpointer.restore_newest({...}, log=print)  # the newest that reads

A checkpoint is a folder ``<Behavior>-<step>/`` holding ``ckpt.*`` (tf.train.Checkpoint) and
``state.json`` (counters, NumPy RNG state; JSON, never pickle). It is written under a
temporary name and renamed into place, and ``checkpoint.json`` (the list of complete
checkpoints) is replaced atomically, so an interrupted save never leaves a half checkpoint
where a resume would read it. A checkpoint whose variables are not all finite is never
written: pruning can then never drop the last healthy one. Readers that race with a
training run (evaluate, export) take the newest checkpoint that reads completely, reading
the index again when one is pruned under them. Every reader (``--resume``,
``--initialize-from``, evaluate, export, BC teachers) goes through ``restore_newest``, which
says in one line which checkpoint was damaged and which one was used instead. Without an
index (deleted), the checkpoints are found from their folders; a resume writes the index
again. Exported models (ONNX, SavedModel) are a different thing and live elsewhere.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import re
import shutil
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tftrainers.logs import quiet_logger
from tftrainers.files import write_atomically

INDEX_FILE = "checkpoint.json"
STATE_FILE = "state.json"
PREFIX = "ckpt"
DAMAGED_SUFFIX = ".damaged"


class CheckpointError(ValueError):
    """A checkpoint is missing, cannot be read or written; the message names the path."""


def _reason(error: BaseException) -> str:
    """The first line of an error, short: what a one-line message can quote."""
    text = getattr(error, "strerror", None) or getattr(error, "message", None) or str(error)
    return (str(text).strip().splitlines() or [type(error).__name__])[0][:200]


def nonfinite_variable(trackables: Mapping[str, Any]) -> Optional[str]:
    """The name of the first floating-point variable of ``trackables`` holding NaN or inf,
    or None when all are finite."""
    import tensorflow as tf
    for key, obj in trackables.items():
        for variable in getattr(obj, "variables", ()):
            if not tf.as_dtype(variable.dtype).is_floating:
                continue
            if not np.isfinite(np.asarray(variable)).all():
                return f"{key}/{variable.name}"
    return None


class Checkpointer:
    """Writes, lists, prunes and restores one behavior's checkpoints."""

    def __init__(self, directory: str, behavior_name: str, keep: int = 5):
        self.directory = directory
        self.behavior_name = behavior_name
        self.keep = keep
        self._name = re.compile(rf"^{re.escape(behavior_name)}-(\d+)$")

    def _index_path(self) -> str:
        return os.path.join(self.directory, INDEX_FILE)

    def checkpoints(self) -> List[Dict[str, Any]]:
        """Complete checkpoints, oldest first: ``[{"step": int, "path": str}, ...]``."""
        path = self._index_path()
        if not os.path.exists(path):
            return []
        try:
            with open(path) as f:
                entries = json.load(f)["checkpoints"]
            return [{"step": int(e["step"]), "path": os.path.join(self.directory, e["name"])}
                    for e in entries]
        except (ValueError, KeyError, TypeError, OSError) as error:
            raise CheckpointError(f"{path}: the checkpoint index cannot be read "
                                  f"({_reason(error)})") from None

    def latest(self) -> Optional[str]:
        entries = self.checkpoints()
        return entries[-1]["path"] if entries else None

    def _known(self) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """The checkpoints the index lists or, when it is missing or cannot be read, the
        complete ``<Behavior>-<step>`` folders; and why the index was not used (None when
        it was)."""
        if not os.path.exists(self._index_path()):
            found = self.scan()
            return found, (f"{self._index_path()}: missing; the checkpoints were found from "
                           f"their folders" if found else None)
        try:
            return self.checkpoints(), None
        except CheckpointError as error:
            return self.scan(), str(error)

    def _write_index(self, entries: Sequence[Dict[str, Any]]) -> None:
        write_atomically(self._index_path(), json.dumps({"checkpoints": [
            {"step": e["step"], "name": os.path.basename(e["path"])} for e in entries]},
            indent=1), fsync=True)

    def save(self, step: int, trackables: Mapping[str, Any], state: Dict[str, Any]) -> str:
        """Writes a checkpoint for ``step``; returns its folder.

        Raises:
            CheckpointError: a variable holds NaN or inf (nothing is written), or the files
                cannot be written (a full disk, a read-only folder); the checkpoints already
                there stay as they were.
        """
        bad = nonfinite_variable(trackables)
        if bad is not None:
            raise CheckpointError(f"{self.directory}: step {step} not saved: {bad} holds NaN "
                                  f"or inf; {self._kept()}")
        import tensorflow as tf  # here, not at import: CheckpointError is needed before it
        name = f"{self.behavior_name}-{step}"
        final = os.path.join(self.directory, name)
        tmp = os.path.join(self.directory, f".tmp-{name}-{os.getpid()}")
        old = os.path.join(self.directory, f".tmp-old-{name}-{os.getpid()}")
        try:
            os.makedirs(self.directory, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            tf.train.Checkpoint(**trackables).write(os.path.join(tmp, PREFIX))
            with open(os.path.join(tmp, STATE_FILE), "w") as f:
                json.dump(state, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            if os.path.exists(final):  # the same step saved again: swap, then delete
                os.rename(final, old)
            os.rename(tmp, final)
            # Without a readable index, the folders on disk: never dropped from a new one.
            entries = [e for e in self._known()[0] if e["step"] != step]
            entries.append({"step": step, "path": final})
            entries.sort(key=lambda e: e["step"])
            stale, entries = entries[:-self.keep], entries[-self.keep:]
            self._write_index(entries)
        except (OSError, tf.errors.OpError) as error:
            shutil.rmtree(tmp, ignore_errors=True)
            if os.path.isdir(old) and not os.path.exists(final):
                os.rename(old, final)  # the one it was to replace stays
            raise CheckpointError(f"{self.directory}: cannot write the checkpoint of step "
                                  f"{step} ({_reason(error)}); {self._kept()}") from error
        shutil.rmtree(old, ignore_errors=True)
        for entry in stale:  # only after the index no longer names them
            shutil.rmtree(entry["path"], ignore_errors=True)
        return final

    def _kept(self) -> str:
        try:
            latest = self.latest()
        except CheckpointError:
            latest = None
        return (f"the last complete checkpoint is {latest}" if latest
                else "there is no earlier checkpoint")

    @staticmethod
    def restore(path: str, trackables: Mapping[str, Any],
                required: Sequence[str] = ()) -> Dict[str, Any]:
        """Restores variables in place from the checkpoint folder ``path``; returns its state.

        Args:
            required: keys the state must have (checked before any variable is touched).

        Raises:
            CheckpointError: the folder is missing, incomplete or corrupted.
        """
        state_path = os.path.join(path, STATE_FILE)
        if not os.path.isdir(path) or not os.path.exists(state_path):
            raise CheckpointError(f"{path}: no checkpoint there (expected {STATE_FILE} and "
                                  f"{PREFIX}.* files)")
        try:
            with open(state_path) as f:
                state = json.load(f)
        except (OSError, ValueError) as error:
            raise CheckpointError(f"{state_path}: cannot be read ({_reason(error)})") from None
        missing = [key for key in required if not isinstance(state, dict) or key not in state]
        if missing:
            raise CheckpointError(f"{state_path}: incomplete, missing "
                                  f"{', '.join(repr(k) for k in missing)}")
        import tensorflow as tf
        status, reason = None, None
        # A failed read leaves TF's restore bookkeeping behind, which logs a warning line per
        # unmatched value when it is freed: freed here, quietly.
        with quiet_logger("tensorflow", logging.ERROR):
            try:
                status = tf.train.Checkpoint(**trackables).read(os.path.join(path, PREFIX))
                status.assert_existing_objects_matched()
            except Exception as error:  # TF's reader raises many kinds on a damaged file
                reason = _reason(error)
            finally:
                if status is not None:  # restoring a subset (a policy without its optimizer)
                    status.expect_partial()
            if reason is not None:
                status = None
                gc.collect()
        if reason is not None:
            raise CheckpointError(f"{path}: the checkpoint cannot be read ({reason})")
        return state

    def scan(self, complete: bool = True) -> List[Dict[str, Any]]:
        """``<Behavior>-<step>`` folders on disk, oldest first; with ``complete``, those with
        a state file (what is left to read when the index itself is damaged)."""
        found = []
        for name in _list(self.directory):
            match = self._name.match(name)
            path = os.path.join(self.directory, name)
            if match and os.path.isdir(path) and (
                    not complete or os.path.isfile(os.path.join(path, STATE_FILE))):
                found.append({"step": int(match.group(1)), "path": path})
        return sorted(found, key=lambda e: e["step"])

    def restore_newest(self, trackables: Mapping[str, Any], required: Sequence[str] = (),
                       repair: bool = False, attempts: int = 5,
                       log: Optional[Callable[[str], None]] = None
                       ) -> Tuple[Dict[str, Any], Dict[str, Any], List[str]]:
        """Restores the newest checkpoint that reads completely: what every reader of
        checkpoints calls, so that none of them uses an older one in silence.

        A checkpoint that disappears while it is read (pruned by a run that is training)
        sends it back to the index, up to ``attempts`` times; one that is damaged is
        skipped for the next older one. A missing or unreadable index is read around: the
        checkpoint folders themselves are listed.

        Args:
            required: keys its state must have.
            repair: the caller holds the run's lock (``--resume``): damaged checkpoints
                newer than the one restored leave the index (their folders are renamed to
                ``<name>.damaged``, kept for inspection) and a missing or damaged index is
                written again.
            log: gets one line (``[WARNING] <Behavior>: ...``) when the checkpoint used is
                not the newest the index lists, naming what was skipped and why and the
                one used instead; None: standard error (no reader falls back in silence).

        Returns:
            The restored entry (``{"step", "path"}``), its state, and one line per
            checkpoint (or index) that was skipped and why, newest first.

        Raises:
            CheckpointError: no checkpoint at all, or none that reads (naming the newest
                and why).
        """
        for _ in range(attempts):
            skipped: List[Tuple[Dict[str, Any], str]] = []
            notes: List[str] = []
            entries, index_note = self._known()
            index_damaged = index_note is not None
            if index_damaged:
                notes.append(index_note)
            if not entries:
                if index_damaged and os.path.exists(self._index_path()):
                    raise CheckpointError(notes[0])
                raise CheckpointError(f"{self.directory}: no checkpoint of "
                                      f"'{self.behavior_name}'")
            vanished = False
            for entry in reversed(entries):
                try:
                    state = self.restore(entry["path"], trackables, required)
                except CheckpointError as error:
                    if not index_damaged and entry not in self._listed():
                        vanished = True  # pruned or replaced meanwhile: read the index again
                        break
                    skipped.append((entry, str(error)))
                    continue
                notes += [reason for _, reason in skipped]
                if repair and (skipped or index_damaged):
                    self._set_aside([e for e, _ in skipped], entries)
                if notes:
                    line = self.fallback_line(entry, notes, set_aside=repair and bool(skipped),
                                              reindexed=repair and index_damaged)
                    if log is None:
                        print(line, file=sys.stderr)
                    else:
                        log(line)
                return entry, state, notes
            if not vanished:
                newest = skipped[0][1] if skipped else f"{self.directory}: unreadable"
                raise CheckpointError(f"no checkpoint of '{self.behavior_name}' can be read; "
                                      f"the newest: {newest}")
        raise CheckpointError(f"{self.directory}: the checkpoints kept changing while they "
                              f"were read ({attempts} attempts)")

    def fallback_line(self, entry: Dict[str, Any], notes: Sequence[str],
                      set_aside: bool = False, reindexed: bool = False) -> str:
        """The one line a reader shows when it did not read the index's newest checkpoint
        (``notes``: why, newest first)."""
        line = (f"[WARNING] {self.behavior_name}: {'; '.join(notes)}; using the newest "
                f"intact checkpoint {entry['path']} (step {entry['step']})")
        if set_aside:
            line += f"; the damaged ones are set aside as *{DAMAGED_SUFFIX}"
        if reindexed:
            line += f"; {INDEX_FILE} is written again"
        return line

    def _listed(self) -> List[Dict[str, Any]]:
        try:
            return self.checkpoints()
        except CheckpointError:
            return []

    def _set_aside(self, damaged: Sequence[Dict[str, Any]],
                   entries: Sequence[Dict[str, Any]]) -> None:
        keep = [e for e in entries if e not in damaged]
        self._write_index(keep)
        for entry in damaged:
            target = entry["path"] + DAMAGED_SUFFIX
            shutil.rmtree(target, ignore_errors=True)
            try:
                os.rename(entry["path"], target)
            except OSError:
                pass  # already gone; the index no longer lists it either way

    def unindexed(self) -> List[str]:
        """Checkpoint folders the index does not list: left by a run killed between the
        rename and the index update, or while pruning.

        Without an index (deleted), nothing is known to be stale either: the folders are
        what a resume reads then.

        Raises:
            CheckpointError: the index cannot be read (then nothing is known to be stale).
        """
        if not os.path.exists(self._index_path()):
            return []
        listed = {e["path"] for e in self.checkpoints()}
        return [e["path"] for e in self.scan(complete=False) if e["path"] not in listed]


def _list(directory: str) -> List[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []
