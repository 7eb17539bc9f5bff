"""Returns and advantages: pure NumPy functions, tested against hand-computed answers.

One trajectory at a time (``[T]`` arrays) or many at once (``[N, T]`` arrays, each row
holding one trajectory left-aligned, ``lengths[i]`` real steps, anything after that
ignored and returned as 0). The batched versions loop over T once for all N rows, which
is what a trainer processing many trajectories per update wants::

    rewards, lengths = pad_batch([t.rewards for t in trajectories])
    values, _ = pad_batch([t.values["extrinsic"] for t in trajectories])
    next_values = np.array([0.0 if t.done else v for t, v in zip(trajectories, v_next)])
    adv = batched_gae(rewards, values, next_values, lengths, gamma=0.99, lambd=0.95)
    advantages = unpad_batch(adv, lengths)      # [sum(lengths)], trajectory after trajectory

Bootstrapping (the value after the last step, ``next_value``) is the caller's decision and
the one place episode ends enter these formulas:

- the episode really ended (terminal step, not interrupted): ``next_value = 0``;
- the episode was cut by a step limit (``interrupted``) or the trajectory was cut by
  ``time_horizon``: ``next_value = V(next_obs)``, the critic's estimate of the observation
  after the last step, because the agent's future did not stop there;
- reward streams that ignore episode ends (curiosity, RND in ML-Agents) always bootstrap.

Everything is computed in float64 and returned as float32 (the dtype of every buffer).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

__all__ = [
    "discounted_returns",
    "gae",
    "lambda_returns",
    "batched_discounted_returns",
    "batched_gae",
    "batched_lambda_returns",
    "pad_batch",
    "unpad_batch",
    "split_batch",
]


def _check_factor(name: str, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return value


def _as_1d(name: str, array) -> np.ndarray:
    array = np.asarray(array, np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array [T], got shape {array.shape}")
    return array


def discounted_returns(rewards, gamma: float, bootstrap_value: float = 0.0) -> np.ndarray:
    """Discounted sum of future rewards, ``G_t = r_t + gamma * G_{t+1}``, ``G_T = bootstrap_value``.

    Args:
        rewards: [T] rewards, ``rewards[t]`` received for the action taken at step t.
        gamma: discount factor in [0, 1].
        bootstrap_value: estimated return after the last step; 0 when the episode really
            ended (see the module docstring).

    Returns:
        [T] float32 returns.
    """
    r = _as_1d("rewards", rewards).tolist()
    gamma = _check_factor("gamma", gamma)
    out = [0.0] * len(r)
    running = float(bootstrap_value)
    # A plain float loop: for one short trajectory it is faster than NumPy per-element ops.
    for t in range(len(r) - 1, -1, -1):
        running = r[t] + gamma * running
        out[t] = running
    return np.asarray(out, np.float32)


def gae(rewards, values, next_value: float, gamma: float, lambd: float) -> np.ndarray:
    """Generalized Advantage Estimation (Schulman et al. 2016).

    ``delta_t = r_t + gamma * V_{t+1} - V_t`` with ``V_T = next_value``, and
    ``A_t = delta_t + gamma * lambd * A_{t+1}``, ``A_T = 0``.
    lambd = 1 gives the discounted return minus the value; lambd = 0 the one-step TD error.

    Args:
        rewards: [T] rewards, ``rewards[t]`` received for the action taken at step t.
        values: [T] value estimates ``V(obs_t)``.
        next_value: ``V(next_obs)`` after the last step. Pass 0 only when the episode really
            ended (terminal and not interrupted); when it was interrupted or the trajectory
            was cut by ``time_horizon`` pass the critic's estimate, so the advantage still
            counts the reward the agent would have collected afterwards.
        gamma: discount factor in [0, 1].
        lambd: GAE lambda in [0, 1] (``lambd`` as in ML-Agents YAML, ``lambda`` is a keyword).

    Returns:
        [T] float32 advantages.
    """
    r = _as_1d("rewards", rewards)
    v = _as_1d("values", values)
    if r.shape != v.shape:
        raise ValueError(f"rewards and values must have the same shape, got {r.shape} and "
                         f"{v.shape}")
    gamma = _check_factor("gamma", gamma)
    lambd = _check_factor("lambd", lambd)
    v_next = np.append(v[1:], float(next_value))
    delta = (r + gamma * v_next - v).tolist()
    out = [0.0] * len(delta)
    running = 0.0
    decay = gamma * lambd
    for t in range(len(delta) - 1, -1, -1):
        running = delta[t] + decay * running
        out[t] = running
    return np.asarray(out, np.float32)


def lambda_returns(rewards, values, next_value: float, gamma: float, lambd: float) -> np.ndarray:
    """TD(lambda) returns, the value targets of ML-Agents' MA-POCA.

    ``G_t = r_t + gamma * ((1 - lambd) * V_{t+1} + lambd * G_{t+1})`` with
    ``V_T = G_T = next_value``. lambd = 1 gives the discounted return bootstrapped with
    next_value; lambd = 0 gives ``r_t + gamma * V_{t+1}``. (They equal ``gae(...) + values``.)

    Args:
        rewards: [T] rewards, ``rewards[t]`` received for the action taken at step t.
        values: [T] value estimates ``V(obs_t)``.
        next_value: value after the last step, 0 only when the episode really ended (for
            POCA: when the whole group is done and not interrupted); see :func:`gae`.
        gamma: discount factor in [0, 1].
        lambd: lambda in [0, 1].

    Returns:
        [T] float32 returns.
    """
    # G^lambda_t = A^GAE_t + V_t: both recursions agree and G_T - V_T = 0, so one
    # recursion (GAE's) serves both.
    advantages = gae(rewards, values, next_value, gamma, lambd)
    return (advantages + _as_1d("values", values)).astype(np.float32)


def _check_batch(rewards, values, boot, lengths):
    r = np.asarray(rewards, np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must be a 2-D array [N, T], got shape {r.shape}")
    n, t_max = r.shape
    if values is not None:
        values = np.asarray(values, np.float64)
        if values.shape != r.shape:
            raise ValueError(f"values must have the shape of rewards {r.shape}, got "
                             f"{values.shape}")
    boot = np.broadcast_to(np.asarray(boot, np.float64), (n,))
    if lengths is None:
        lengths = np.full(n, t_max, np.int64)
    else:
        lengths = np.asarray(lengths, np.int64)
        if lengths.shape != (n,):
            raise ValueError(f"lengths must have shape [{n}], got {lengths.shape}")
        if n and (lengths.min() < 0 or lengths.max() > t_max):
            raise ValueError(f"lengths must be in [0, {t_max}], got {lengths.min()}.."
                             f"{lengths.max()}")
    valid = np.arange(t_max)[None, :] < lengths[:, None]  # [N, T]
    return r, values, boot, lengths, valid


def _next_values(values: np.ndarray, boot: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """[N, T] with ``V_{t+1}`` at each step and ``boot[i]`` after each row's last real step."""
    v_next = np.zeros_like(values)
    v_next[:, :-1] = values[:, 1:]
    rows = np.flatnonzero(lengths > 0)
    v_next[rows, lengths[rows] - 1] = boot[rows]
    return v_next


def _reverse_discounted_sum(x: np.ndarray, decay: float) -> np.ndarray:
    """``y_t = x_t + decay * y_{t+1}`` along axis 1, ``y_T = 0``; one NumPy op per step."""
    out = np.empty_like(x)
    running = np.zeros(x.shape[0], x.dtype)
    for t in range(x.shape[1] - 1, -1, -1):
        running = x[:, t] + decay * running
        out[:, t] = running
    return out


def batched_discounted_returns(rewards, gamma: float, bootstrap_values=0.0,
                               lengths=None) -> np.ndarray:
    """:func:`discounted_returns` for N trajectories at once.

    Args:
        rewards: [N, T] rewards, row i real for ``t < lengths[i]``.
        gamma: discount factor in [0, 1].
        bootstrap_values: [N] (or a scalar) return after each row's last real step.
        lengths: [N] int real steps per row; None means every row has T.

    Returns:
        [N, T] float32 returns, 0 after each row's length.
    """
    r, _, boot, lengths, valid = _check_batch(rewards, None, bootstrap_values, lengths)
    gamma = _check_factor("gamma", gamma)
    # Folding the bootstrap into the last real reward makes every row end at its length
    # with a zero carry, so the loop needs no per-row condition.
    x = np.where(valid, r, 0.0)
    rows = np.flatnonzero(lengths > 0)
    x[rows, lengths[rows] - 1] += gamma * boot[rows]
    return _reverse_discounted_sum(x, gamma).astype(np.float32)


def batched_gae(rewards, values, next_values, lengths=None, *, gamma: float,
                lambd: float) -> np.ndarray:
    """:func:`gae` for N trajectories at once.

    Args:
        rewards: [N, T] rewards, row i real for ``t < lengths[i]``.
        values: [N, T] value estimates.
        next_values: [N] (or a scalar) value after each row's last real step; 0 for rows
            whose episode really ended (see :func:`gae`).
        lengths: [N] int real steps per row; None means every row has T.
        gamma: discount factor in [0, 1].
        lambd: GAE lambda in [0, 1].

    Returns:
        [N, T] float32 advantages, 0 after each row's length.
    """
    r, v, boot, lengths, valid = _check_batch(rewards, values, next_values, lengths)
    gamma = _check_factor("gamma", gamma)
    lambd = _check_factor("lambd", lambd)
    delta = np.where(valid, r + gamma * _next_values(v, boot, lengths) - v, 0.0)
    # Padding deltas are 0, so the carry into each row's last real step is 0.
    return _reverse_discounted_sum(delta, gamma * lambd).astype(np.float32)


def batched_lambda_returns(rewards, values, next_values, lengths=None, *, gamma: float,
                           lambd: float) -> np.ndarray:
    """:func:`lambda_returns` for N trajectories at once.

    Uses ``G^lambda_t = A^GAE_t + V_t`` (same gamma, lambd, values and bootstrap), which
    follows from both recursions and ``G_T - V_T = next_value - next_value = 0``.

    Args: as :func:`batched_gae`.

    Returns:
        [N, T] float32 returns, 0 after each row's length.
    """
    adv = batched_gae(rewards, values, next_values, lengths, gamma=gamma, lambd=lambd)
    _, v, _, _, valid = _check_batch(rewards, values, next_values, lengths)
    return np.where(valid, adv + v, 0.0).astype(np.float32)


def pad_batch(arrays: Sequence[np.ndarray], dtype=np.float32) -> Tuple[np.ndarray, np.ndarray]:
    """Stacks 1-D arrays of different lengths into one zero-padded matrix.

    Args:
        arrays: N arrays of shape [T_i].
        dtype: dtype of the result.

    Returns:
        ([N, max T_i] matrix, rows left-aligned and zero-padded; [N] int64 lengths).
    """
    lengths = np.fromiter((len(a) for a in arrays), np.int64, count=len(arrays))
    t_max = int(lengths.max()) if len(arrays) else 0
    out = np.zeros((len(arrays), t_max), dtype)
    if len(arrays):
        valid = np.arange(t_max)[None, :] < lengths[:, None]
        # Row-major boolean assignment fills each row's first T_i entries in order.
        out[valid] = np.concatenate([np.asarray(a, dtype).reshape(-1) for a in arrays])
    return out, lengths


def unpad_batch(matrix: np.ndarray, lengths) -> np.ndarray:
    """Inverse of :func:`pad_batch` flattened: ``[N, T]`` -> ``[sum(lengths)]``, row after row."""
    matrix = np.asarray(matrix)
    lengths = np.asarray(lengths, np.int64)
    valid = np.arange(matrix.shape[1])[None, :] < lengths[:, None]
    return matrix[valid]


def split_batch(matrix: np.ndarray, lengths) -> List[np.ndarray]:
    """``[N, T]`` -> N arrays ``[lengths[i]]`` (views into ``matrix``)."""
    return [matrix[i, :int(n)] for i, n in enumerate(np.asarray(lengths))]
