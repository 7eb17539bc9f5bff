"""Gymnasium adapter: ``gym:ID`` with ``num_envs`` copies as the agents of one behavior.

The behavior is named after the env id. Spaces map onto the env API as follows:

- observations: ``Box`` of rank 1 (or 0, or 2: flattened) is a vector observation, rank 3
  is a visual HWC observation (``uint8`` scaled to [0, 1]); ``Discrete`` and
  ``MultiDiscrete`` become one-hot vectors; ``MultiBinary`` a 0/1 vector; ``Dict`` and
  ``Tuple`` become several observations (nested ones are flattened in order).
- actions: ``Discrete`` is one branch, ``MultiDiscrete`` and ``MultiBinary`` several
  branches, ``Box`` continuous (the policy's [-1, 1] is rescaled to finite bounds), and a
  ``Tuple`` of these is a hybrid action.
- ``truncated`` becomes ``interrupted``; copy ``i`` is seeded with ``seed + i`` on its
  first reset.
- environment parameters (docs/guides/environments-api.md#environment-parameters): an env
  whose ``unwrapped`` declares ``environment_parameter_names`` (a tuple of str) and has
  ``set_environment_parameters(values: Mapping[str, float])`` gets, before each of its
  copy's resets, one value drawn for that copy from each parameter's sampler. Like gymnasium's next-step autoreset, a copy whose episode ended sits out
  the next step and then asks for its first decision of the new episode.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

import numpy as np

from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ActionSpec, ObservationKind, ObservationSpec
from tftrainers.envs.checks import EnvDataError, check_agent_memory

# Memory of one gymnasium env copy besides its observations (CartPole-v1 measured ~5 KB
# with tracemalloc; rendering or physics envs hold more), for the memory check.
_BYTES_PER_COPY = 8192


def _import_gymnasium():
    try:
        import gymnasium
    except ImportError as error:  # a clear line instead of a bare ImportError
        raise ImportError("gym: environments need gymnasium: pip install 'tftrainers[gym]'") \
            from error
    return gymnasium


ObsConverter = Callable[[object], np.ndarray]


def _box_scale(space) -> float:
    """What a Box observation is multiplied by: 1/255 for uint8 images, else 1."""
    return 1.0 / 255.0 if space.dtype == np.uint8 else 1.0


class _Misfit(ValueError):
    """A raw observation that does not fit its part of the space; the message says how,
    after "observation i ('name') from the env"."""


def _shaped(o, shape: tuple) -> np.ndarray:
    array = np.asarray(o, np.float32)
    if array.shape != shape:
        # Checked, not reshaped into place: a channels-first image has as many values as
        # the channels-last one it claims to be.
        raise _Misfit(f"has shape {list(array.shape)}, its observation space has "
                      f"{list(shape)}")
    return array


def _item(o, key):
    try:
        return o[key]
    except (KeyError, IndexError, TypeError):
        raise _Misfit(f"is missing: the env's observation has no {key!r}") from None


def _leaf(space, convert: ObsConverter) -> ObsConverter:
    """``convert`` whose failures name the part of the space that was not met."""
    def checked(o):
        try:
            return convert(o)
        except _Misfit:
            raise
        except (ValueError, TypeError, IndexError, KeyError) as error:
            raise _Misfit(f"does not fit its observation space {space} ({error})") from None
    return checked


def _observation_parts(space, name: str) -> List[Tuple[ObservationSpec, ObsConverter]]:
    """ObservationSpecs for a space and, for each, a function raw obs -> float32 array
    (raising ``_Misfit`` for a raw obs that does not fit)."""
    spaces = _import_gymnasium().spaces
    if isinstance(space, spaces.Box):
        shape = space.shape
        scale = _box_scale(space)
        if len(shape) == 3:
            spec = ObservationSpec(shape, name, ObservationKind.VISUAL)
            return [(spec, _leaf(space, lambda o: _shaped(o, shape) * scale))]
        size = int(np.prod(shape)) if shape else 1
        return [(ObservationSpec((size,), name),
                 _leaf(space, lambda o: _shaped(o, shape).reshape(size) * scale))]
    if isinstance(space, spaces.Discrete):
        eye = np.eye(int(space.n), dtype=np.float32)
        start = int(space.start)
        return [(ObservationSpec((int(space.n),), name),
                 _leaf(space, lambda o: eye[int(o) - start]))]
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        nvec, start = space.nvec.astype(np.int64), space.start.astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        size = int(nvec.sum())

        def one_hot(o):
            out = np.zeros(size, np.float32)
            out[offsets + np.asarray(o, np.int64) - start] = 1.0
            return out
        return [(ObservationSpec((size,), name), _leaf(space, one_hot))]
    if isinstance(space, spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return [(ObservationSpec((size,), name),
                 _leaf(space, lambda o: _shaped(o, space.shape).reshape(size)))]
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        keys = list(space.spaces.keys()) if isinstance(space, spaces.Dict) else \
            list(range(len(space.spaces)))
        parts = []
        for key in keys:
            for spec, convert in _observation_parts(space[key], f"{name}.{key}"):
                parts.append((spec, lambda o, key=key, convert=convert: convert(_item(o, key))))
        return parts
    raise ValueError(f"gym: observation space {space} ({type(space).__name__}) at '{name}' is "
                     f"not supported; supported: Box, Discrete, MultiDiscrete, MultiBinary, "
                     f"Dict, Tuple")


class _ActionConverter:
    """Turns one row of an ActionTuple into the env's action for a (possibly Tuple) space."""

    def __init__(self, space):
        spaces = _import_gymnasium().spaces
        self.space = space
        self.continuous_size = 0
        self.branches: List[int] = []
        self._build: Callable[[np.ndarray, np.ndarray], object] = \
            self._part(space, spaces, top_level=True)
        # The common case, a single Discrete space: every row's action in one conversion.
        self._discrete_start = int(space.start) if isinstance(space, spaces.Discrete) else None

    def _part(self, space, spaces, top_level=False):
        c0, d0 = self.continuous_size, len(self.branches)
        if isinstance(space, spaces.Discrete):
            self.branches.append(int(space.n))
            start = int(space.start)
            return lambda c, d: int(d[d0]) + start
        if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self.branches.extend(int(n) for n in space.nvec)
            n, start = len(space.nvec), space.start.astype(np.int64)
            return lambda c, d: d[d0:d0 + n].astype(np.int64) + start
        if isinstance(space, spaces.MultiBinary) and len(space.shape) == 1:
            n = int(space.shape[0])
            self.branches.extend([2] * n)
            return lambda c, d: d[d0:d0 + n].astype(np.int8)
        if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating):
            n = int(np.prod(space.shape)) if space.shape else 1
            self.continuous_size += n
            low, high = space.low.reshape(-1).astype(np.float64), \
                space.high.reshape(-1).astype(np.float64)
            bounded = np.isfinite(low) & np.isfinite(high)
            low_b, high_b = np.where(bounded, low, -1.0), np.where(bounded, high, 1.0)

            def box(c, d):
                x = c[c0:c0 + n].astype(np.float64)
                # The policy acts in [-1, 1]; map that onto the finite bounds.
                x = np.where(bounded, low_b + (np.clip(x, -1, 1) + 1.0) * 0.5 * (high_b - low_b),
                             x)
                return x.reshape(space.shape).astype(space.dtype)
            return box
        if isinstance(space, spaces.Tuple) and top_level:
            parts = [self._part(s, spaces) for s in space.spaces]
            return lambda c, d: tuple(p(c, d) for p in parts)
        raise ValueError(f"gym: action space {space} ({type(space).__name__}) is not supported; "
                         f"supported: Discrete, MultiDiscrete, MultiBinary, Box (float), and a "
                         f"Tuple of these")

    def __call__(self, continuous: np.ndarray, discrete: np.ndarray):
        return self._build(continuous, discrete)

    def rows(self, continuous: np.ndarray, discrete: np.ndarray) -> list:
        """The env's action for each row of ``continuous`` [n, c] and ``discrete`` [n, b]."""
        if self._discrete_start is not None:
            # NumPy int64 scalars, as Discrete.sample() gives: gymnasium's Discrete.contains
            # takes them faster than Python ints (no np.iinfo per step).
            return list(discrete[:, 0].astype(np.int64) + self._discrete_start)
        return [self._build(c, d) for c, d in zip(continuous, discrete)]


class GymEnv(AreaEnv):
    """``num_envs`` copies of a Gymnasium env, each an agent of one behavior."""

    max_episode_steps = np.iinfo(np.int64).max  # the env's own TimeLimit truncates

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0, instances=None,
                 label=None, **make_kwargs):
        """``instances``: env objects to use as the copies instead of making ``num_envs``
        with ``gymnasium.make`` (``env_id`` then only names the behavior; ``label`` names
        the env in messages, default ``gym:ENV_ID``)."""
        gymnasium = _import_gymnasium()
        self.name = env_id
        self._label = label or f"gym:{env_id}"
        self.agents_per_area = 1
        num_envs = len(instances) if instances else int(num_envs)
        if num_envs < 1:
            raise ValueError(f"gym:{env_id}: num_areas (copies) must be >= 1, got {num_envs}")
        env = instances[0] if instances else self._make(gymnasium, make_kwargs)
        try:
            self._obs_parts = _observation_parts(env.observation_space, "obs")
            self._action = _ActionConverter(env.action_space)
        except ValueError as error:
            if not instances:
                raise
            raise ValueError(f"{self._label}: {str(error).removeprefix('gym: ')}") from error
        # Before making the other copies: a mistyped count must not exhaust the memory.
        check_agent_memory(self._label, num_envs, [spec for spec, _ in self._obs_parts],
                           _BYTES_PER_COPY)
        self.envs = list(instances) if instances else [env] + [
            self._make(gymnasium, make_kwargs) for _ in range(num_envs - 1)]
        self._seed = seed
        self._seeded = np.zeros(len(self.envs), bool)
        super().__init__(seed, num_areas=len(self.envs))
        self._latest = [np.zeros((self.n_agents, *spec.shape), np.float32)
                        for spec, _ in self._obs_parts]
        # A Box observation (the common case) is stored for all stepped copies at once.
        space = env.observation_space
        self._box_scale = (_box_scale(space)
                           if isinstance(space, _import_gymnasium().spaces.Box) else None)
        self._box_shape = space.shape if self._box_scale is not None else None
        self._truncated_now = np.zeros(self.n_agents, bool)

    def _make(self, gymnasium, make_kwargs):
        try:
            return gymnasium.make(self.name, **make_kwargs)
        except gymnasium.error.Error as error:
            raise ValueError(f"gym:{self.name}: {error}") from error
        except TypeError as error:  # a keyword the env's constructor does not take
            given = ", ".join(f"{k}={v!r}" for k, v in make_kwargs.items()) or "none"
            reason = str(error).split(" was raised from the environment creator")[0]
            raise ValueError(f"gym:{self.name}: the env does not take env args {given} "
                             f"({reason})") from error

    def observation_specs(self):
        return [spec for spec, _ in self._obs_parts]

    def action_spec(self):
        return ActionSpec(self._action.continuous_size, tuple(self._action.branches))

    def _store(self, row: int, raw_obs) -> None:
        try:
            for latest, (_, convert) in zip(self._latest, self._obs_parts):
                latest[row] = convert(raw_obs)
        except (ValueError, TypeError, IndexError, KeyError) as error:
            raise self._observation_error([row], [raw_obs], error) from None

    def _observation_error(self, rows, raw_obs, error: Exception) -> EnvDataError:
        """The one-line error for the first of ``raw_obs`` (the env's observations of
        ``rows``) that does not fit the observation space."""
        where = f"behavior '{self.name}' ({self._label})"
        for row, raw in zip(rows, raw_obs):
            for index, (spec, convert) in enumerate(self._obs_parts):
                try:
                    convert(raw)
                except _Misfit as part_error:
                    return EnvDataError(f"{where}: agent {int(row)}: observation {index} "
                                        f"('{spec.name}') from the env {part_error}")
        return EnvDataError(f"{where}: the observations from the env do not fit its "
                            f"observation space {self.envs[0].observation_space} ({error})")

    @property
    def environment_parameter_names(self):
        return tuple(getattr(self.envs[0].unwrapped, "environment_parameter_names", ()))

    def _reset_agents(self, rows):
        names = list(self.environment_parameters)
        for row in rows:
            if names:  # drawn for this copy by _draw_parameters, just before
                self.envs[row].unwrapped.set_environment_parameters(
                    {name: float(self.parameter_values[name][row]) for name in names})
            seed = None if self._seeded[row] else self._seed + int(row)
            self._seeded[row] = True
            obs, _ = self.envs[row].reset(seed=seed)
            self._store(row, obs)

    def _act(self, rows, actions):
        if not len(rows):
            return np.zeros(0, np.float32), np.zeros(0, bool)
        envs = self.envs
        results = [envs[row].step(action) for row, action in zip(
            rows.tolist(), self._action.rows(actions.continuous, actions.discrete))]
        obs, reward, terminated, truncated, _ = zip(*results)
        if self._box_scale is not None:
            latest = self._latest[0]
            try:
                stacked = np.asarray(obs, np.float32)
                if stacked.shape[1:] != self._box_shape:
                    raise ValueError(f"stacked shape {list(stacked.shape)}")
            except (ValueError, TypeError) as error:
                raise self._observation_error(rows.tolist(), obs, error) from None
            stacked = stacked.reshape(len(rows), *latest.shape[1:])
            latest[rows] = stacked if self._box_scale == 1.0 else stacked * self._box_scale
        else:
            for row, o in zip(rows.tolist(), obs):
                self._store(row, o)
        self._truncated_now[rows] = truncated
        return np.asarray(reward, np.float32), np.asarray(terminated, bool)

    def _truncated(self, rows):
        return self._truncated_now[rows]

    def _observe(self, rows):
        return [latest[rows] for latest in self._latest]

    def close(self):
        for env in self.envs:
            env.close()

    def _env_id(self) -> str:
        return self._label

    def __repr__(self):
        return f"{self._label}(num_envs={self.n_agents})"
