"""Resume state: TF variables (networks, optimizers, normalizers) plus a JSON of the rest.

    checkpointer = Checkpointer("results/run/Ball3D/checkpoints", "Ball3D", keep=5)
    checkpointer.save(step, {"policy": policy, "optimizer": optimizer}, {"step": step, ...})
    state = checkpointer.restore(checkpointer.latest(), {"policy": policy, ...})

A checkpoint is a folder ``<Behavior>-<step>/`` holding ``ckpt.*`` (tf.train.Checkpoint) and
``state.json`` (counters, NumPy RNG state; JSON, never pickle). It is written under a
temporary name and renamed into place, and ``checkpoint.json`` (the list of complete
checkpoints) is replaced atomically, so an interrupted save never leaves a half checkpoint
where a resume would read it. Exported models (ONNX, SavedModel) are a different thing and
live elsewhere.
"""
from __future__ import annotations

import json
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional

INDEX_FILE = "checkpoint.json"
STATE_FILE = "state.json"
PREFIX = "ckpt"


class CheckpointError(ValueError):
    """A checkpoint is missing or cannot be read; the message names the path."""


def _write_json_atomically(path: str, data: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Checkpointer:
    """Writes, lists, prunes and restores one behavior's checkpoints."""

    def __init__(self, directory: str, behavior_name: str, keep: int = 5):
        self.directory = directory
        self.behavior_name = behavior_name
        self.keep = keep

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
        except (ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"{path}: the checkpoint index cannot be read ({error})") \
                from error

    def latest(self) -> Optional[str]:
        entries = self.checkpoints()
        return entries[-1]["path"] if entries else None

    def save(self, step: int, trackables: Mapping[str, Any], state: Dict[str, Any]) -> str:
        """Writes a checkpoint for ``step``; returns its folder."""
        os.makedirs(self.directory, exist_ok=True)
        name = f"{self.behavior_name}-{step}"
        final = os.path.join(self.directory, name)
        tmp = os.path.join(self.directory, f".tmp-{name}-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        import tensorflow as tf  # here, not at import: CheckpointError is needed before it
        tf.train.Checkpoint(**trackables).write(os.path.join(tmp, PREFIX))
        with open(os.path.join(tmp, STATE_FILE), "w") as f:
            json.dump(state, f, indent=1)
        if os.path.exists(final):  # the same step saved again (e.g. Ctrl-C right after)
            shutil.rmtree(final)
        os.rename(tmp, final)
        entries = [e for e in self.checkpoints() if e["step"] != step]
        entries.append({"step": step, "path": final})
        entries.sort(key=lambda e: e["step"])
        stale, entries = entries[:-self.keep], entries[-self.keep:]
        _write_json_atomically(self._index_path(), {"checkpoints": [
            {"step": e["step"], "name": os.path.basename(e["path"])} for e in entries]})
        for entry in stale:  # only after the index no longer names them
            shutil.rmtree(entry["path"], ignore_errors=True)
        return final

    @staticmethod
    def restore(path: str, trackables: Mapping[str, Any]) -> Dict[str, Any]:
        """Restores variables in place from the checkpoint folder ``path``; returns its state.

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
            import tensorflow as tf
            status = tf.train.Checkpoint(**trackables).read(os.path.join(path, PREFIX))
            status.assert_existing_objects_matched()
            status.expect_partial()  # restoring a subset (a policy without its optimizer)
        except Exception as error:  # TF's reader raises many kinds on a damaged file
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
            raise CheckpointError(f"{path}: the checkpoint cannot be read ({reason})") from error
        return state
