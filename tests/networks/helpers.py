"""Small specs and random inputs for the network tests."""
from __future__ import annotations

import numpy as np

from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec


def vector_spec(size: int, name: str = "vector") -> ObservationSpec:
    return ObservationSpec((size,), name, ObservationKind.VECTOR)


def visual_spec(height: int, width: int, channels: int = 1,
                name: str = "camera") -> ObservationSpec:
    return ObservationSpec((height, width, channels), name, ObservationKind.VISUAL)


def behavior(observation_specs, continuous: int = 0, branches=()) -> BehaviorSpec:
    return BehaviorSpec(tuple(observation_specs), ActionSpec(continuous, tuple(branches)))


def random_obs(spec: BehaviorSpec, batch: int, rng: np.random.Generator):
    return [rng.random((batch, *o.shape), dtype=np.float32) for o in spec.observation_specs]


def random_allowed_masks(rng: np.random.Generator, batch: int, branches) -> np.ndarray:
    """[batch, sum(branches)] float32, 1 = allowed, at least one allowed per branch."""
    parts = []
    for size in branches:
        allowed = rng.random((batch, size)) < 0.5
        forced = rng.integers(0, size, batch)
        allowed[np.arange(batch), forced] = True
        parts.append(allowed)
    return np.concatenate(parts, axis=1).astype(np.float32)
