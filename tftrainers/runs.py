"""What a training run folder holds, read back: configuration, behavior specs, policies.

    results/RUN/configuration.yaml              the resolved settings
    results/RUN/<Behavior>/behavior_spec.json   observations and actions of the behavior
    results/RUN/<Behavior>/checkpoints/         resume state (see checkpoint.py)

    policy = load_policy("results/RUN", "Ball3D")   # latest checkpoint, no env needed
"""
from __future__ import annotations

import json
import os
from typing import List, Optional

from tftrainers.checkpoint import Checkpointer, CheckpointError
from tftrainers.envs.base import BehaviorSpec

SPEC_FILE = "behavior_spec.json"


def write_behavior_spec(behavior_dir: str, spec: BehaviorSpec) -> None:
    os.makedirs(behavior_dir, exist_ok=True)
    with open(os.path.join(behavior_dir, SPEC_FILE), "w") as f:
        json.dump(spec.to_dict(), f, indent=1)


def read_behavior_spec(run_dir: str, behavior: str) -> BehaviorSpec:
    path = os.path.join(run_dir, behavior, SPEC_FILE)
    try:
        with open(path) as f:
            return BehaviorSpec.from_dict(json.load(f))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; the run was not made by tftrainers-learn") \
            from None
    except ValueError as error:
        raise CheckpointError(f"{path}: {error}") from error


def run_behaviors(run_dir: str) -> List[str]:
    """Behaviors of a run: folders holding a behavior spec."""
    if not os.path.isfile(os.path.join(run_dir, "configuration.yaml")):
        raise CheckpointError(f"{run_dir}: not a training run (no configuration.yaml)")
    return sorted(name for name in os.listdir(run_dir)
                  if os.path.isfile(os.path.join(run_dir, name, SPEC_FILE)))


def load_policy(run_dir: str, behavior: str, spec: Optional[BehaviorSpec] = None,
                deterministic: bool = False, seed: int = 0, with_step: bool = False):
    """The behavior's Policy with the weights of the run's latest checkpoint.

    Args:
        spec: the environment's spec (checked against the run's); None reads the run's.
        with_step: also return the checkpoint's step: ``(policy, step)``.

    Raises:
        CheckpointError: one line naming what is missing, unreadable or mismatched.
    """
    from tftrainers.settings import load_run_options
    behaviors = run_behaviors(run_dir)
    if behavior not in behaviors:
        raise CheckpointError(f"{run_dir}: no behavior '{behavior}'; the run has "
                              f"{', '.join(behaviors) or 'none'}")
    trained = read_behavior_spec(run_dir, behavior)
    if spec is not None and spec != trained:
        raise CheckpointError(f"{run_dir}: behavior '{behavior}' was trained on "
                              f"{trained.to_dict()}, the environment has {spec.to_dict()}")
    settings = load_run_options(os.path.join(run_dir, "configuration.yaml")).settings_for(behavior)
    directory = os.path.join(run_dir, behavior, "checkpoints")
    checkpoints = Checkpointer(directory, behavior).checkpoints()
    if not checkpoints:
        raise CheckpointError(f"{directory}: no checkpoint of behavior '{behavior}'")
    from tftrainers.trainers.policy import Policy  # TensorFlow: only once the run checks out
    policy = Policy(trained, settings.network_settings, list(settings.reward_signals),
                    seed=seed, deterministic=deterministic)
    Checkpointer.restore(checkpoints[-1]["path"], policy.trackables())
    return (policy, checkpoints[-1]["step"]) if with_step else policy
