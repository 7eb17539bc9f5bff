"""The league of a self-play run: snapshots of the learner, their ratings, the opponents.

    league = League(window=10, initial_elo=1200.0, rng=np.random.default_rng(0))
    league.save(flat)                          # a snapshot every save_steps (a ring of window)
    index, flat = league.draw(latest, 0.5)     # an opponent: a snapshot, or -1 = the latest
    league.record(match_result(final_reward), index)   # ELO after one match

ELO as ML-Agents' GhostTrainer computes it (DESIGN §12): expected score
``E = 1 / (1 + 10^((R_opponent - R) / 400))``, K = 1 (its code; its docs illustrate 16), the
result of a match from the sign of the learning team's final reward (that step's reward
plus group reward): win 1, draw 0.5, loss 0. The learner gains what the opponent's snapshot
loses; against the latest weights both are the learner's own rating, so nothing moves.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

#: ML-Agents' K-factor (``change = result - expected``).
ELO_K = 1.0


def expected_score(rating: float, opponent_rating: float) -> float:
    """The probability of a win ELO predicts for ``rating`` against ``opponent_rating``."""
    return 1.0 / (1.0 + 10.0 ** ((opponent_rating - rating) / 400.0))


def elo_change(rating: float, opponent_rating: float, result: float) -> float:
    """What ``rating`` gains (the opponent loses) for ``result`` (1 win, 0.5 draw, 0 loss)."""
    return ELO_K * (result - expected_score(rating, opponent_rating))


def match_result(final_reward: float) -> float:
    """1.0, 0.5 or 0.0 from the sign of the learning team's final reward (ML-Agents)."""
    return 1.0 if final_reward > 0 else 0.0 if final_reward < 0 else 0.5


class League:
    """Up to ``window`` snapshots (the oldest replaced first) and ``window + 1`` ratings:
    one per snapshot slot, the last the learner's (``elo``)."""

    def __init__(self, window: int, initial_elo: float, rng: np.random.Generator):
        self.window = int(window)
        self.rng = rng
        self.snapshots: List[Optional[np.ndarray]] = [None] * self.window
        self.count = 0  # snapshots taken so far (the ring's next slot is count % window)
        self.elos = np.full(self.window + 1, float(initial_elo))

    @property
    def elo(self) -> float:
        """The learner's current rating."""
        return float(self.elos[-1])

    def __len__(self) -> int:
        return min(self.count, self.window)

    def save(self, flat: np.ndarray) -> int:
        """Stores a snapshot (a copy of ``flat``) with the learner's current rating; returns
        its slot."""
        slot = self.count % self.window
        self.snapshots[slot] = np.array(flat, np.float32, copy=True)
        self.elos[slot] = self.elos[-1]
        self.count += 1
        return slot

    def draw(self, latest: np.ndarray, latest_ratio: float) -> Tuple[int, np.ndarray]:
        """An opponent: with probability ``latest_ratio`` the latest weights (index -1),
        else a snapshot drawn uniformly from the pool (its slot)."""
        if len(self) and self.rng.random() < 1.0 - latest_ratio:
            slot = int(self.rng.integers(len(self)))
            return slot, self.snapshots[slot]
        return -1, latest

    def record(self, result: float, opponent: int) -> float:
        """Updates the ratings after a match against ``opponent`` (a slot, or -1 for the
        latest weights); returns the change of the learner's rating."""
        change = elo_change(self.elos[-1], self.elos[opponent], result)
        self.elos[-1] += change
        self.elos[opponent] -= change
        return change

    # --- checkpoints ----------------------------------------------------------------------
    def state(self) -> dict:
        return {"count": self.count, "elos": self.elos.tolist(),
                "rng": self.rng.bit_generator.state}

    def restore(self, state: dict, snapshots: np.ndarray) -> None:
        """From ``state`` and the rows of the snapshots' variable ([window, n])."""
        self.count = int(state["count"])
        self.elos = np.asarray(state["elos"], np.float64)
        self.rng.bit_generator.state = state["rng"]
        self.snapshots = [np.array(row, np.float32) if k < len(self) else None
                          for k, row in enumerate(snapshots)]


__all__ = ["ELO_K", "League", "elo_change", "expected_score", "match_result"]
