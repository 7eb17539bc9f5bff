"""Writing files so that a reader never sees half of one (a leaf: imports nothing of ours).

    write_atomically("results/run/configuration.yaml", text)

The run folder, checkpoints, timers and the ONNX cache all write through it. Temporary
files carry ``TMP_TAG`` in their name, which is how ``run_folder.remove_leftovers`` finds
what a killed run left behind.
"""
from __future__ import annotations

import os

TMP_TAG = ".tmp-"


def write_atomically(path: str, text: str, fsync: bool = False) -> None:
    """Writes ``text`` to ``path`` through a temporary file renamed into place: a reader
    sees the old file or the new one, never half of one."""
    tmp = f"{path}{TMP_TAG}{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
