"""Deployment files of a run, laid out as ML-Agents does (plus SavedModel for TF Serving).

    results/RUN/<Behavior>/<Behavior>-<step>.onnx     every export, newest keep_checkpoints
    results/RUN/<Behavior>.onnx                       the latest (what Unity users pick up)
    results/RUN/<Behavior>/saved_model/<step>/        numeric versions, as TF Serving expects

Training writes ONNX and SavedModel at every checkpoint; ``tftrainers-export --format``
also writes, the same way (versioned in the behavior's folder, the latest beside it):

    <Behavior>-<step>.keras, <Behavior>.keras         Keras 3 native (keras_export)
    <Behavior>-<step>.tflite, <Behavior>.tflite       TFLite float32 (tflite_export)
    <Behavior>-<step>.int8.tflite, <Behavior>.int8.tflite   dynamic-range quantised

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
#: Every format ``tftrainers-export --format`` writes.
ALL_FORMATS = ("onnx", "savedmodel", "keras", "tflite")
#: The single-file formats: format -> (suffix, writer name in tftrainers.export, kwargs).
_FILE_FORMATS = {
    "onnx": ((".onnx", "export_onnx", {}),),
    "keras": ((".keras", "export_keras", {}),),
    "tflite": ((".tflite", "export_tflite", {}),
               (".int8.tflite", "export_tflite", {"quantize": True})),
}
_SUFFIXES = "|".join(re.escape(s) for specs in _FILE_FORMATS.values() for s, _, _ in specs)


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
    import tftrainers.export as export
    from tftrainers.export import DEFAULT_OPSET, export_savedmodel
    written = []
    behavior_dir = os.path.join(out_dir, behavior)
    os.makedirs(behavior_dir, exist_ok=True)
    tmp_tag = f".tmp-{os.getpid()}"
    for fmt in ("onnx", "keras", "tflite"):
        if fmt not in formats:
            continue
        for suffix, writer, kwargs in _FILE_FORMATS[fmt]:
            if fmt == "onnx":
                kwargs = {"opset": opset or DEFAULT_OPSET}
            versioned = os.path.join(behavior_dir, f"{behavior}-{step}{suffix}")
            # Keras insists on its own suffix: the temporary name keeps it.
            tmp = os.path.join(behavior_dir, f".tmp-{os.getpid()}-{behavior}-{step}{suffix}")
            getattr(export, writer)(policy, tmp, **kwargs)
            os.replace(tmp, versioned)
            latest = os.path.join(out_dir, f"{behavior}{suffix}")
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
    """Keeps the newest ``keep`` versioned files of each format and SavedModel versions."""
    behavior_dir = os.path.join(out_dir, behavior)
    pattern = re.compile(rf"^{re.escape(behavior)}-(\d+)({_SUFFIXES})$")
    by_suffix = {}
    for name in _list(behavior_dir):
        if (m := pattern.match(name)):
            by_suffix.setdefault(m.group(2), []).append((int(m.group(1)), name))
    for files in by_suffix.values():
        for _, name in sorted(files)[:-keep]:
            os.remove(os.path.join(behavior_dir, name))
    root = os.path.join(behavior_dir, "saved_model")
    versions = sorted(int(name) for name in _list(root) if name.isdigit())
    for version in versions[:-keep]:
        shutil.rmtree(os.path.join(root, str(version)), ignore_errors=True)


def _list(directory: str) -> List[str]:
    return os.listdir(directory) if os.path.isdir(directory) else []
