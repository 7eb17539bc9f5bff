"""Which behaviors of an env play against each other: ``Name?team=N`` (no TensorFlow).

    teams = self_play_teams(settings)     # {"Race": {0: "Race?team=0", 1: "Race?team=1"}}
    check_self_play(settings, specs, act_runtime)    # before TensorFlow: one-line errors

As ML-Agents: the name before ``?`` finds the settings (``RunOptions.settings_for``), a name
without ``team`` is team 0, and every behavior of one name whose settings have ``self_play``
is one learner (a ``GhostTrainer``) with a team per behavior.
"""
from __future__ import annotations

from typing import Dict, Mapping

from tftrainers.envs.unity.convert import behavior_base_name, behavior_team
from tftrainers.settings import ConfigError, TrainerSettings

SELF_PLAY_TRAINERS = ("ppo", "poca")


def self_play_teams(settings: Mapping[str, TrainerSettings]) -> Dict[str, Dict[int, str]]:
    """Behavior name -> the settings it trains with; returns, for the names with
    ``self_play``, base name -> {team id: behavior name}."""
    teams: Dict[str, Dict[int, str]] = {}
    for name in sorted(settings):
        if settings[name].self_play is None:
            continue
        team = behavior_team(name)
        teams.setdefault(behavior_base_name(name), {})[0 if team is None else team] = name
    return teams


def check_self_play(settings: Mapping[str, TrainerSettings], specs: Mapping[str, object],
                    act_runtime: str) -> None:
    """What self-play needs of the env and the settings, each refused in one line.

    Raises:
        ConfigError: a trainer type without self-play, teams whose specs differ, or
            ``tf_settings.act_runtime: tensorflow`` (opponents act with their own
            weights, in onnxruntime).
    """
    for base, teams in self_play_teams(settings).items():
        first = teams[min(teams)]
        trainer_type = settings[first].trainer_type
        if trainer_type not in SELF_PLAY_TRAINERS:
            raise ConfigError(f"behaviors.{base}.self_play: not available with trainer_type "
                              f"{trainer_type}; allowed with: "
                              f"{', '.join(SELF_PLAY_TRAINERS)}")
        if act_runtime != "onnxruntime":
            raise ConfigError(f"tf_settings.act_runtime: {act_runtime} cannot act for "
                              f"behaviors.{base}.self_play (each team acts with its own "
                              f"weights in onnxruntime); allowed with self_play: onnxruntime")
        for team, name in teams.items():
            if specs[name] != specs[first]:
                raise ConfigError(f"behaviors.{base}.self_play: the teams of {base} must "
                                  f"have one behavior spec to share a policy, and {name} "
                                  f"differs from {first}; give them different behavior "
                                  f"names (asymmetric games) or the same spec")


__all__ = ["SELF_PLAY_TRAINERS", "check_self_play", "self_play_teams"]
