"""Checks at the boundary where environment data enters training
(docs/dev/architecture.md#boundary-checks).

    decision_steps, terminal_steps = env.get_steps(name)
    check_steps(name, spec, decision_steps, terminal_steps)   # EnvDataError: one line

Every env (built-in, gym, later PettingZoo and Unity) is held to the API's promises before
its data reaches a trainer: observations are float32 ``[n_agents, *shape]`` arrays as the
spec says, rewards are ``[n_agents]`` floats, and all of them are finite. A NaN that gets
past this point trains on silently and ends in a checkpoint of NaN weights; a wrong shape
surfaces deep inside NumPy as a message that names nothing the user knows.

The check is cheap on purpose (one ``isfinite`` per array, a few attribute reads): it runs
every env step. Only when it fails does it look for the agent and element at fault.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np

from tftrainers.envs.base import BehaviorSpec, ObservationSpec

_FLOAT32 = np.dtype(np.float32)


class EnvDataError(ValueError):
    """The environment sent data that breaks the API (shape, dtype, NaN/inf). The message is
    one line naming the behavior, the agent, the observation and what was wrong."""

    def __init__(self, message: str):
        # Messages quote what the env gave (a space's repr, an error of NumPy's), which can
        # span lines; whoever reports it keeps one line, so the shapes at the end would be lost.
        super().__init__(" ".join(str(message).split()))


def _shape(shape: Sequence) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _agent(agent_id, row: int) -> str:
    try:
        return f"agent {int(agent_id[row])}"
    except (TypeError, ValueError, IndexError):
        return f"agent row {row}"


def _where_nonfinite(array: np.ndarray) -> tuple:
    """(row, element index within the row, value) of the first NaN/inf in ``array``
    [n, ...] (which has one)."""
    bad = np.flatnonzero(~np.isfinite(array.reshape(len(array), -1)))
    width = max(array[0].size, 1)
    row, element = divmod(int(bad[0]), width)
    return row, element, float(array.reshape(-1)[bad[0]])


def _fail(behavior: str, kind: str, what: str) -> EnvDataError:
    return EnvDataError(f"behavior '{behavior}' ({kind} steps): {what}")


def _observation_error(behavior: str, kind: str, index: int, spec: ObservationSpec, obs,
                       agent_id, n: int) -> EnvDataError:
    """What is wrong with an observation that failed the fast check."""
    name = f"observation {index} ('{spec.name}')"
    if not isinstance(obs, np.ndarray):
        return _fail(behavior, kind, f"{name} is a {type(obs).__name__}, expected a float32 "
                                     f"array of shape {_shape((n, *spec.shape))}")
    if obs.ndim == 0 or obs.shape[1:] != spec.shape or len(obs) != n:
        return _fail(behavior, kind, f"{name} has shape {_shape(obs.shape)}, expected "
                                     f"{_shape((n, *spec.shape))} ({n} agents x "
                                     f"{_shape(spec.shape)})")
    if obs.dtype != _FLOAT32:
        return _fail(behavior, kind, f"{name} has dtype {obs.dtype}, expected float32")
    row, element, value = _where_nonfinite(obs)
    return _fail(behavior, kind, f"{_agent(agent_id, row)}: {name} holds {value} at element "
                                 f"{element}")


def _reward_error(behavior: str, kind: str, field: str, reward, agent_id,
                  n: int) -> EnvDataError:
    """What is wrong with a reward array that failed the fast check."""
    if not isinstance(reward, np.ndarray) or reward.dtype.kind != "f" or reward.shape != (n,):
        shape = _shape(np.shape(reward)) if isinstance(reward, np.ndarray) else \
            type(reward).__name__
        dtype = f" of dtype {reward.dtype}" if isinstance(reward, np.ndarray) else ""
        return _fail(behavior, kind, f"{field} is {shape}{dtype}, expected a float array of "
                                     f"shape {_shape((n,))}")
    row, _, value = _where_nonfinite(reward)
    return _fail(behavior, kind, f"{_agent(agent_id, row)}: {field} is {value}")


def _check(behavior: str, spec: BehaviorSpec, steps, kind: str) -> None:
    # The fast path is one condition per array; the explanations run only on failure.
    agent_id = steps.agent_id
    n = len(agent_id)
    obs = steps.obs
    specs = spec.observation_specs
    if len(obs) != len(specs):
        raise _fail(behavior, kind, f"{len(obs)} observations, the behavior spec has "
                                    f"{len(specs)} ({', '.join(repr(s.name) for s in specs)})")
    for index, (o, obs_spec) in enumerate(zip(obs, specs)):
        if type(o) is not np.ndarray or o.dtype != _FLOAT32 or o.shape[1:] != obs_spec.shape \
                or len(o) != n or n and not np.isfinite(o).all():
            raise _observation_error(behavior, kind, index, obs_spec, o, agent_id, n)
    for field in ("reward", "group_reward"):
        reward = getattr(steps, field)
        if reward is None and field == "group_reward":
            continue
        if type(reward) is not np.ndarray or reward.dtype.kind != "f" or reward.ndim != 1 \
                or len(reward) != n or n and not np.isfinite(reward).all():
            raise _reward_error(behavior, kind, field, reward, agent_id, n)


def check_steps(behavior_name: str, spec: BehaviorSpec, decision_steps, terminal_steps) -> None:
    """Checks one env step of a behavior before a trainer or policy sees it.

    Args:
        behavior_name: the behavior (named in the message).
        spec: its BehaviorSpec.
        decision_steps, terminal_steps: what ``env.get_steps(behavior_name)`` returned.

    Raises:
        EnvDataError: an observation of the wrong shape or dtype, a reward that is not a
            float array of one value per agent, or a NaN/inf in either.
    """
    _check(behavior_name, spec, decision_steps, "decision")
    if len(terminal_steps.agent_id):
        _check(behavior_name, spec, terminal_steps, "terminal")


def available_memory() -> Optional[int]:
    """Bytes of memory the process can still get (Linux ``MemAvailable``), else the physical
    memory, or None when neither is known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_agent_memory(env_name: str, n_agents: int, observation_specs: Sequence[ObservationSpec],
                       bytes_per_agent: int = 0, what: str = "num_areas",
                       count: Optional[int] = None) -> None:
    """Refuses an agent count whose arrays cannot fit in memory, before allocating them.

    An env keeps a few copies of every agent's observations (its state, what it hands out
    per step, the trainer's trajectories); with ``num_areas`` mistyped by a few digits that
    is more than the machine has, and the process dies in the kernel's out-of-memory
    killer (or a MemoryError) instead of answering.

    Args:
        env_name: e.g. ``builtin:Basic`` (named in the message).
        n_agents: agents the env would hold.
        observation_specs: their observations.
        bytes_per_agent: the env's own state per agent besides observations.
        what: the setting that made ``n_agents`` (named in the message), with ``count`` its
            value (default ``n_agents``).

    Raises:
        ValueError: one line naming the setting, the memory needed and what is available.
    """
    copies = 4  # env state, the step's arrays, the trainer's trajectories, the policy input
    per_agent = copies * 4 * sum(int(np.prod(s.shape)) for s in observation_specs) \
        + bytes_per_agent + 64
    needed = per_agent * int(n_agents)
    available = available_memory()
    if available is None or needed <= available:
        return
    count = n_agents if count is None else count
    most = max(available // per_agent, 1) * count // max(int(n_agents), 1)
    raise ValueError(f"{env_name}: {what} {count} means {n_agents} agents, which need about "
                     f"{needed / 2**30:.1f} GB of memory; {available / 2**30:.1f} GB are "
                     f"available; allowed: {what} up to about {max(most, 1)}")
