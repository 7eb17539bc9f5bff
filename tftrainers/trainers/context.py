"""What every trainer takes from its run (docs/dev/architecture.md#trainer-base).

    context = TrainerContext(run_dir="results/ball", seed=0, writers=writers)
    trainer = create_trainer("Ball3D", spec, settings, context)

One frozen value, passed explicitly: a trainer reads its folder, seed, stats writers,
progress line, ``--inference`` flag and the run's compile and act settings from here, and
the runner makes one per behavior (``dataclasses.replace(context, seed=...)``). No
TensorFlow is imported here.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Sequence

from tftrainers.stats import ProgressDisplay, StatsWriter


@dataclasses.dataclass(frozen=True)
class TrainerContext:
    """The run as a trainer sees it.

    Attributes:
        run_dir: the run's results folder (a behavior writes into ``run_dir/<behavior>``).
        seed: seeds the behavior's networks, acting noise and shuffles.
        writers: the stats writers (TensorBoard, console, CSV, the API's callbacks).
        progress: the live progress line, or None.
        inference: act without learning (``--inference``): nothing is written.
        jit_compile: XLA-compile the compiled calls (``tf_settings.jit_compile``).
        act_runtime: "onnxruntime" (the act graph converted to ONNX: the acting side needs
            no TensorFlow) or "tensorflow" (``tf_settings.act_runtime``).
        log: where one-line notes go.
    """

    run_dir: str
    seed: int = 0
    writers: Sequence[StatsWriter] = ()
    progress: Optional[ProgressDisplay] = None
    inference: bool = False
    jit_compile: bool = True
    act_runtime: str = "onnxruntime"
    log: Callable[..., None] = print

    def behavior_dir(self, behavior_name: str) -> str:
        """Where a behavior's checkpoints, events and exports go."""
        return os.path.join(self.run_dir, behavior_name)
