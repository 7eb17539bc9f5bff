"""Behavioral cloning (``trainer_type: bc``): ``BCTrainer`` and ``BCOptimizer``."""
