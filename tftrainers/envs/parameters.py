"""What an environment parameter's value is drawn from: seeded samplers.

ML-Agents' four forms (``environment_parameters`` in the config), each with its own random
stream: an env draws a fresh value whenever it reads the parameter (the built-ins: at each
area's reset), as a Unity scene does through ``Academy.EnvironmentParameters``::

    sampler = UniformSampler(0.0, 4.0, seed=7)
    sampler.sample(3)          # [3] float64, the same three values for seed 7 every time
    env.set_environment_parameters({"big_wall_height": sampler, "gravity": 9.81})

A plain number is a constant. Samplers hold a NumPy generator, so two envs must not share
one sampler object: :func:`worker_sampler_seed` gives each env instance its own seed.
"""
from __future__ import annotations

from typing import Mapping, Sequence, Tuple, Union

import numpy as np


class Sampler:
    """Draws values of one parameter; ``seed`` makes the sequence reproducible."""

    def __init__(self, seed: int):
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed & 0xFFFFFFFFFFFFFFFF)

    def sample(self, n: int) -> np.ndarray:
        """``n`` values: [n] float64."""
        raise NotImplementedError

    def reseeded(self, seed: int) -> "Sampler":
        """The same distribution with another seed (a fresh stream)."""
        raise NotImplementedError


class ConstantSampler(Sampler):
    def __init__(self, value: float, seed: int = 0):
        super().__init__(seed)
        self.value = float(value)

    def sample(self, n):
        return np.full(n, self.value)

    def reseeded(self, seed):
        return ConstantSampler(self.value, seed)

    def __repr__(self):
        return f"{self.value:g}"


class UniformSampler(Sampler):
    def __init__(self, min_value: float, max_value: float, seed: int = 0):
        if min_value > max_value:
            raise ValueError(f"uniform sampler: min_value {min_value} > max_value {max_value}")
        super().__init__(seed)
        self.min_value, self.max_value = float(min_value), float(max_value)

    def sample(self, n):
        return self.rng.uniform(self.min_value, self.max_value, n)

    def reseeded(self, seed):
        return UniformSampler(self.min_value, self.max_value, seed)

    def __repr__(self):
        return f"uniform({self.min_value:g}, {self.max_value:g})"


class GaussianSampler(Sampler):
    def __init__(self, mean: float, st_dev: float, seed: int = 0):
        super().__init__(seed)
        self.mean, self.st_dev = float(mean), float(st_dev)

    def sample(self, n):
        # |st_dev|: ML-Agents accepts a negative one; the spread is the same.
        return self.rng.normal(self.mean, abs(self.st_dev), n)

    def reseeded(self, seed):
        return GaussianSampler(self.mean, self.st_dev, seed)

    def __repr__(self):
        return f"gaussian({self.mean:g}, {self.st_dev:g})"


class MultiRangeUniformSampler(Sampler):
    """Uniform over the union of intervals: an interval is picked with a probability
    proportional to its length (each with equal probability when all are points)."""

    def __init__(self, intervals: Sequence[Sequence[float]], seed: int = 0):
        bounds = np.asarray(intervals, np.float64).reshape(-1, 2)
        if not len(bounds) or np.any(bounds[:, 0] > bounds[:, 1]):
            raise ValueError(f"multirangeuniform sampler: intervals must be [min, max] pairs "
                             f"with min <= max, got {[list(b) for b in bounds]}")
        super().__init__(seed)
        self.intervals = bounds
        lengths = bounds[:, 1] - bounds[:, 0]
        total = lengths.sum()
        self._p = lengths / total if total > 0 else np.full(len(bounds), 1.0 / len(bounds))

    def sample(self, n):
        pick = self.rng.choice(len(self.intervals), size=n, p=self._p)
        low, high = self.intervals[pick, 0], self.intervals[pick, 1]
        return low + self.rng.random(n) * (high - low)

    def reseeded(self, seed):
        return MultiRangeUniformSampler(self.intervals, seed)

    def __repr__(self):
        return f"multirangeuniform({self.intervals.tolist()})"


ParameterValue = Union[float, Sampler]


def as_sampler(value: ParameterValue) -> Sampler:
    """A sampler for ``value`` (a number is a constant)."""
    if isinstance(value, Sampler):
        return value
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return ConstantSampler(float(value))
    raise ValueError(f"an environment parameter's value must be a number or a Sampler, "
                     f"got {type(value).__name__}")


def worker_sampler_seed(seed: int, worker: int) -> int:
    """The sampler seed env instance (worker) ``worker`` uses for a sampler of seed ``seed``:
    instance 0 keeps ``seed``; the others get distinct seeds derived from (seed, worker), the
    same in every run. ML-Agents sends every worker the same seed, so its workers draw the
    same values; here each draws its own."""
    if worker == 0:
        return int(seed)
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(worker)])
    return int(state.generate_state(1)[0] & 0x7FFFFFFF)


def for_worker(parameters: Mapping[str, ParameterValue], worker: int) -> dict:
    """``parameters`` with each sampler reseeded for env instance ``worker``."""
    out = {}
    for name, value in parameters.items():
        sampler = as_sampler(value)
        out[name] = sampler.reseeded(worker_sampler_seed(sampler.seed, worker))
    return out


def check_parameter_names(env_name: str, names: Tuple[str, ...], given) -> None:
    """Raises ValueError (one line) when ``given`` holds a parameter the env does not read."""
    unknown = [name for name in given if name not in names]
    if unknown:
        reads = ", ".join(names) if names else "none"
        raise ValueError(f"{env_name}: unknown environment parameter '{unknown[0]}'; it reads: "
                         f"{reads}")
