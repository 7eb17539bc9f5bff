"""Quieting the loggers of libraries for a moment.

    with quiet_logger("tf2onnx", logging.WARNING):   # its INFO pages stay off the console
        ...
"""
from __future__ import annotations

import contextlib
import logging
from typing import Iterator


@contextlib.contextmanager
def quiet_logger(name: str, level: int) -> Iterator[None]:
    """Within: the logger ``name`` drops records below ``level``; its level is put back
    after."""
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(previous)
