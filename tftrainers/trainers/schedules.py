"""ML-Agents' hyperparameter schedules: constant, or linear decay to a floor at max_steps."""
from __future__ import annotations

# Floors ML-Agents decays to at max_steps.
LEARNING_RATE_FLOOR = 1e-10
EPSILON_FLOOR = 0.1
BETA_FLOOR = 1e-5


def decayed_value(schedule: str, initial: float, floor: float, step: int, max_steps: int) -> float:
    """``initial`` for "constant"; for "linear", ``(initial - floor) * (1 - t) + floor`` with
    ``t = min(step / max_steps, 1)``."""
    if schedule == "constant" or max_steps <= 0:
        return float(initial)
    if schedule != "linear":
        raise ValueError(f"unknown schedule '{schedule}'; allowed: linear, constant")
    progress = min(max(step, 0) / max_steps, 1.0)
    return float((initial - floor) * (1.0 - progress) + floor)
