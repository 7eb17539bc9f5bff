"""trainer_type -> trainer class. A plain table: no import-time registration.

A new trainer is one row of ``_trainers()``; its class takes ``(behavior_name, spec,
settings, context)`` (docs/dev/architecture.md#trainer-base).
"""
from __future__ import annotations

from tftrainers.settings import ConfigError, TrainerSettings
from tftrainers.trainers.context import TrainerContext


def _trainers() -> dict:
    from tftrainers.trainers.bc.trainer import BCTrainer
    from tftrainers.trainers.poca.trainer import POCATrainer
    from tftrainers.trainers.ppo.trainer import PPOTrainer
    from tftrainers.trainers.sac.trainer import SACTrainer
    return {"ppo": PPOTrainer, "poca": POCATrainer, "sac": SACTrainer, "bc": BCTrainer}


def create_trainer(behavior_name: str, spec, settings: TrainerSettings, context, **legacy):
    """The trainer for ``settings.trainer_type``.

    Args:
        context: a ``TrainerContext``. (Until every caller is ported, a run folder path
            with the context's fields as keywords is accepted too.)
    """
    if not isinstance(context, TrainerContext):
        context = TrainerContext(str(context), **legacy)
    elif legacy:
        raise TypeError(f"create_trainer: {', '.join(legacy)} belong in the TrainerContext")
    trainers = _trainers()
    cls = trainers.get(settings.trainer_type)
    if cls is None:
        raise ConfigError(f"behaviors.{behavior_name}.trainer_type: '{settings.trainer_type}' is "
                          f"not available in this version; available: {', '.join(trainers)}")
    return cls(behavior_name, spec, settings, context)
