"""Reward providers: one reward stream each (docs/dev/architecture.md#algorithm-facts).

- ``extrinsic``: the environment's reward.
- ``curiosity``: ICM forward-model error (own encoder, inverse and forward models, Adam).
- ``rnd``: random network distillation error (frozen target, trained predictor, Adam).
- ``gail``: a discriminator's belief that a step is the demonstrations' (GAIL, VAIL).

``create_reward_provider(name, spec, settings, seed, env_actions)`` builds one from its
``reward_signals`` entry (``env_actions``: how the trainer's raw continuous actions map to
the env's [-1, 1], PPO's ``clip(x, -3, 3) / 3`` by default, SAC's ``tanh``); an unknown or
unavailable name raises ValueError naming the available ones.
"""
from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional

from tftrainers.envs import BehaviorSpec
from tftrainers.rewards.base import (ExtrinsicRewardProvider, RewardBatch, RewardProvider,
                                     masked_mean)
from tftrainers.rewards.curiosity import CuriosityRewardProvider
from tftrainers.rewards.gail import GAILRewardProvider
from tftrainers.rewards.rnd import RNDRewardProvider
from tftrainers.settings import RewardSignalSettings

#: reward signal name -> provider class.
REWARD_PROVIDERS: Mapping[str, type] = {
    "extrinsic": ExtrinsicRewardProvider,
    "curiosity": CuriosityRewardProvider,
    "rnd": RNDRewardProvider,
    "gail": GAILRewardProvider,
}


def create_reward_provider(name: str, spec: BehaviorSpec, settings: RewardSignalSettings,
                           seed: int = 0, env_actions: Optional[Callable] = None
                           ) -> RewardProvider:
    if name not in REWARD_PROVIDERS:
        raise ValueError(f"reward signal '{name}' is not available; available: "
                         f"{', '.join(REWARD_PROVIDERS)}")
    return REWARD_PROVIDERS[name](name, spec, settings, seed, env_actions)


def create_reward_providers(spec: BehaviorSpec, signals: Mapping[str, RewardSignalSettings],
                            seed: int = 0, env_actions: Optional[Callable] = None
                            ) -> Dict[str, RewardProvider]:
    return {name: create_reward_provider(name, spec, s, seed + i, env_actions)
            for i, (name, s) in enumerate(signals.items())}


__all__ = ["CuriosityRewardProvider", "ExtrinsicRewardProvider", "GAILRewardProvider",
           "REWARD_PROVIDERS",
           "RNDRewardProvider", "RewardBatch", "RewardProvider", "create_reward_provider",
           "create_reward_providers", "masked_mean"]
