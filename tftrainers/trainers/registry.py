"""trainer_type -> trainer class. A plain table: no import-time registration."""
from __future__ import annotations

from tftrainers.settings import ConfigError, TrainerSettings


def create_trainer(behavior_name: str, spec, settings: TrainerSettings, run_dir: str, **kwargs):
    """The trainer for ``settings.trainer_type``."""
    from tftrainers.trainers.bc.trainer import BCTrainer
    from tftrainers.trainers.poca.trainer import POCATrainer
    from tftrainers.trainers.ppo.trainer import PPOTrainer
    from tftrainers.trainers.sac.trainer import SACTrainer
    trainers = {"ppo": PPOTrainer, "poca": POCATrainer, "sac": SACTrainer, "bc": BCTrainer}
    cls = trainers.get(settings.trainer_type)
    if cls is None:
        raise ConfigError(f"behaviors.{behavior_name}.trainer_type: '{settings.trainer_type}' is "
                          f"not available in this version; available: {', '.join(trainers)}")
    return cls(behavior_name, spec, settings, run_dir, **kwargs)
