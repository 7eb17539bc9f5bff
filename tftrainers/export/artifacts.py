"""Deployment files of a run, laid out as ML-Agents does (plus SavedModel for TF Serving).

    results/RUN/<Behavior>/<Behavior>-<step>.onnx     every export, newest keep_checkpoints
    results/RUN/<Behavior>.onnx                       the latest (what Unity users pick up)
    results/RUN/<Behavior>/saved_model/<step>/        numeric versions, as TF Serving expects

Each file or folder is written under a temporary name and renamed into place, so a reader
(TF Serving polls the folder) never sees half an export. A folder that cannot be written
(read-only, full) is one ``ExportWriteError`` line naming it.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import List, Sequence

FORMATS = ("onnx", "savedmodel")


class ExportWriteError(ValueError):
    """An export could not be written (the folder is read-only, full, not a folder)."""


def export_policy(policy, behavior: str, out_dir: str, step: int,
                  formats: Sequence[str] = FORMATS, opset: int = None,
                  critic=None) -> List[str]:
    """Writes the policy's ONNX and/or SavedModel for ``step`` (the SavedModel with the
    ``critic``'s value signature when given); returns what was written.

    Raises:
        ExportWriteError: ``out_dir`` cannot be written; what was there before stays.
    """
    import tensorflow as tf
    try:
        return _export(policy, behavior, out_dir, step, formats, opset, critic)
    except (OSError, tf.errors.OpError) as error:
        where = getattr(error, "filename", None) or out_dir
        reason = getattr(error, "strerror", None) or getattr(error, "message", None) or error
        reason = (str(reason).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ExportWriteError(f"{where}: cannot write the export of '{behavior}' "
                               f"({reason})") from error


def _export(policy, behavior, out_dir, step, formats, opset, critic) -> List[str]:
    from tftrainers.export import DEFAULT_OPSET, export_onnx, export_savedmodel
    written = []
    behavior_dir = os.path.join(out_dir, behavior)
    os.makedirs(behavior_dir, exist_ok=True)
    tmp_tag = f".tmp-{os.getpid()}"
    if "onnx" in formats:
        versioned = os.path.join(behavior_dir, f"{behavior}-{step}.onnx")
        export_onnx(policy, versioned + tmp_tag, opset=opset or DEFAULT_OPSET)
        os.replace(versioned + tmp_tag, versioned)
        latest = os.path.join(out_dir, f"{behavior}.onnx")
        shutil.copyfile(versioned, latest + tmp_tag)
        os.replace(latest + tmp_tag, latest)
        written += [versioned, latest]
    if "savedmodel" in formats:
        root = os.path.join(behavior_dir, "saved_model")
        final = os.path.join(root, str(step))
        # Outside root while being written: TF Serving would load any numeric folder in it.
        staging = os.path.join(behavior_dir, f"saved_model{tmp_tag}")
        shutil.rmtree(staging, ignore_errors=True)
        export_savedmodel(policy, staging, str(step), critic=critic)
        os.makedirs(root, exist_ok=True)
        shutil.rmtree(final, ignore_errors=True)
        os.rename(os.path.join(staging, str(step)), final)
        shutil.rmtree(staging, ignore_errors=True)
        written.append(final)
    return written


def prune_exports(out_dir: str, behavior: str, keep: int) -> None:
    """Keeps the newest ``keep`` versioned ONNX files and SavedModel versions."""
    behavior_dir = os.path.join(out_dir, behavior)
    pattern = re.compile(rf"^{re.escape(behavior)}-(\d+)\.onnx$")
    onnx = sorted((int(m.group(1)), name) for name in _list(behavior_dir)
                  if (m := pattern.match(name)))
    for _, name in onnx[:-keep]:
        os.remove(os.path.join(behavior_dir, name))
    root = os.path.join(behavior_dir, "saved_model")
    versions = sorted(int(name) for name in _list(root) if name.isdigit())
    for version in versions[:-keep]:
        shutil.rmtree(os.path.join(root, str(version)), ignore_errors=True)


def _list(directory: str) -> List[str]:
    return os.listdir(directory) if os.path.isdir(directory) else []
