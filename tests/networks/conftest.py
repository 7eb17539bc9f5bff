"""Fixtures for the network tests: fixed seeds."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    tf.random.set_seed(0)
    np.random.seed(0)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
