"""Ray-like sensors of the grid built-ins, vectorised over agents.

Like ML-Agents' ray perception sensors: the space around an agent is cut into 8 sectors
(N, NE, E, SE, S, SW, W, NW); a sensor reports, per sector, how close something is.
Positions are (row, column) cells; nothing here hands an agent its own position.
"""
from __future__ import annotations

import numpy as np

SECTORS = 8
# Centre directions of the 8 sectors: N, NE, E, SE, S, SW, W, NW (row, column).
RAYS = np.array([[-1, 0], [-1, 1], [0, 1], [1, 1], [1, 0], [1, -1], [0, -1], [-1, -1]])


def wall_closeness(agent: np.ndarray, size: int) -> np.ndarray:
    """[k, 8] float32: 1 / (1 + cells to the wall) along each sector's centre ray.

    agent: [k, 2] cells of a ``size`` x ``size`` room.
    """
    limits = np.where(RAYS[None] > 0, size - 1 - agent[:, None, :],
                      np.where(RAYS[None] < 0, agent[:, None, :], size))
    steps = np.min(np.where(RAYS[None] != 0, limits, size), axis=2)
    return (1.0 / (1.0 + steps)).astype(np.float32)


def sector_proximity(agent: np.ndarray, target: np.ndarray, present: np.ndarray,
                     sight: int) -> np.ndarray:
    """[k, 8] float32: 1 - distance / (sight + 1) in the sector of ``target``, else 0.

    agent, target: [k, 2] cells; present: [k] bool (an absent target is not seen).
    Distance is Chebyshev; a target farther than ``sight`` or on the agent's own cell is
    not seen.
    """
    offset = target - agent
    distance = np.max(np.abs(offset), axis=1)
    angle = np.arctan2(offset[:, 1], -offset[:, 0])  # 0 = north, clockwise
    sector = np.round(angle / (2 * np.pi / SECTORS)).astype(np.int64) % SECTORS
    seen = present & (distance <= sight) & (distance > 0)
    out = np.zeros((len(agent), SECTORS), np.float32)
    out[np.flatnonzero(seen), sector[seen]] = 1.0 - distance[seen] / (sight + 1)
    return out
