"""Fixtures for the export tests: each case's policy exported once per session."""
from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("onnxruntime")
pytest.importorskip("tf2onnx")

from tftrainers.export import export_onnx, export_savedmodel  # noqa: E402

from .helpers import CASES, Exported, build_critic, build_policy  # noqa: E402


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(case_name)``: the case's policy written as ONNX and SavedModel (cached)."""
    cache = {}

    def get(name: str) -> Exported:
        if name not in cache:
            policy, critic = build_policy(CASES[name]), build_critic(CASES[name])
            folder = tmp_path_factory.mktemp(name)
            onnx_path = export_onnx(policy, str(folder / f"{name}.onnx"))
            savedmodel_dir = export_savedmodel(policy, str(folder / "serving"), 1,
                                               critic=critic)
            cache[name] = Exported(policy, critic, onnx_path, savedmodel_dir)
        return cache[name]

    return get


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
