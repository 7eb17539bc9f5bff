"""Trains a trainer on one of the regression envs in this process and reads the outcome.

    config = mlagents_config("ppo", hyperparameters={"learning_rate": 1e-3})
    result = train(LineEnv(action_sizes=(1, 1), step_size=0.8), config, seed=1337)
    result.passed, result.score       # ML-Agents' pass criterion and its figure

``mlagents_config`` starts from ML-Agents' ``dummy_config.py`` (the trainer settings its
regression tests evolve): learning rate 5e-3 with a *constant* schedule (here beta and epsilon
are constant too, by the YAML rule; ML-Agents builds that config in Python, where they keep
their linear default: with linear ones the POCA group task moved between seeds, not up, on
our default action heads: docs/experiments/2026-11-25-poca-group-task.md), batch 16, buffer
64, one layer of 32 units, max_steps 3000, every other key at its default (time_horizon 64,
beta 5e-3, epsilon 0.2, lambd 0.95, num_epoch 3, gamma 0.99). ``VARIANTS`` holds the tasks
and the changes each of ML-Agents' tests makes.
"""
from __future__ import annotations

import copy
import tempfile
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from tftrainers.acting.agent_manager import step_env
from tftrainers.processing import StreamField, stream_key
from tftrainers.settings import RunOptions
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.registry import create_trainer

from .simple_envs import GroupLineEnv, LineEnv, last_mean, passes

BEHAVIOR = "1D"


def mlagents_config(trainer_type: str = "ppo", **overrides) -> dict:
    """ML-Agents' dummy test config as a YAML-shaped dict; nested dicts update sections."""
    config = {"trainer_type": trainer_type,
              "hyperparameters": {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                  "batch_size": 16, "buffer_size": 64},
              "network_settings": {"num_layers": 1, "hidden_units": 32},
              "summary_freq": 500, "max_steps": 3000}
    for key, value in overrides.items():
        if isinstance(value, dict):
            config.setdefault(key, {}).update(value)
        else:
            config[key] = value
    return config


@dataclass
class Result:
    final_rewards: List[float]
    steps: int
    seconds: float
    #: per stat with "Estimate" in its name (``Policy/Extrinsic Value Estimate``, ...), each
    #: batch of targets the trainer computed: (trainer step, min, max, mean)
    estimates: Dict[str, list] = field(default_factory=dict)
    group_returns: Optional[List[float]] = None
    #: (min, max) over the run of the extrinsic value estimates the trainer computed its
    #: targets with, and of those targets (GAE or lambda returns), as the buffer got them
    value_range: Optional[tuple] = None
    return_range: Optional[tuple] = None
    #: the trained actor for goal -1 and +1: raw Gaussian means [2, c], log std [c],
    #: probabilities of action 1 per discrete branch [2, branches]
    probe: Optional[dict] = None
    #: POCA: V the members that finished before their group bootstrapped from (one per
    #: such trajectory, the extrinsic stream)
    leaver_bootstraps: Optional[List[float]] = None

    @property
    def score(self) -> float:
        """ML-Agents' figure: the mean of the last five final rewards."""
        return last_mean(self.final_rewards)

    @property
    def passed(self) -> bool:
        return passes(self.final_rewards)

    def estimate_range(self, key: str = "Policy/Extrinsic Value Estimate",
                       from_step: int = 0) -> Optional[tuple]:
        """(min, max) of the estimates the trainer computed targets with from ``from_step``."""
        rows = [r for r in self.estimates.get(key, []) if r[0] >= from_step]
        if not rows:
            return None
        return min(r[1] for r in rows), max(r[2] for r in rows)


def train(env, config: dict, seed: int, act_runtime: str = "tensorflow",
          max_env_steps: Optional[int] = None) -> Result:
    """Trains behavior ``1D`` of ``env`` until the trainer's max_steps (as ML-Agents'
    ``check_environment_trains``), then reports its final rewards."""
    settings = RunOptions.from_dict({"behaviors": {BEHAVIOR: copy.deepcopy(config)}}
                                    ).settings_for(BEHAVIOR)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = create_trainer(BEHAVIOR, env.behavior_specs[BEHAVIOR], settings,
                                 TrainerContext(run_dir, seed=seed, act_runtime=act_runtime,
                                                log=lambda *a: None))
        seen: Dict[str, list] = {}
        add_stat = trainer.stats.add_stat

        def recording_add_stat(key, value):
            # Keeps every value estimate, not just the period means the writers get, so the
            # range the critic's estimates span can be compared with the returns'.
            if "Estimate" in key:
                values = np.asarray(value, np.float64).ravel()
                if values.size:
                    seen.setdefault(key, []).append(
                        (trainer.step, values.min(), values.max(), values.mean()))
            add_stat(key, value)
        trainer.stats.add_stat = recording_add_stat
        ranges = {"values": [np.inf, -np.inf], "returns": [np.inf, -np.inf]}
        append_to_buffer = getattr(trainer, "append_to_buffer", None)  # on-policy only

        def recording_append(trajectories, fields, computed):
            for what, key in (("values", StreamField.VALUES), ("returns", StreamField.RETURNS)):
                array = computed.get(stream_key(key, "extrinsic"))
                if array is not None and len(array):
                    ranges[what] = [min(ranges[what][0], float(np.min(array))),
                                    max(ranges[what][1], float(np.max(array)))]
            append_to_buffer(trajectories, fields, computed)
        if append_to_buffer is not None:
            trainer.append_to_buffer = recording_append
        leavers: List[float] = []
        group_estimates = getattr(trainer.optimizer, "group_estimates", None)
        if group_estimates is not None:
            def recording_estimates(trajectories, *args):
                out = group_estimates(trajectories, *args)
                boot = out.bootstrap.get("extrinsic")
                if boot is not None:
                    leavers.extend(float(b) for t, b in zip(trajectories, boot)
                                   if t.done and not t.group_done)
                return out
            trainer.optimizer.group_estimates = recording_estimates
        trainer.subscribe(trainer.create_agent_manager(env))
        managers = {BEHAVIOR: trainer.managers[0]}
        env.reset()
        env_steps = 0
        while not trainer.done and (max_env_steps is None or env_steps < max_env_steps):
            step_env(env, managers)
            trainer.advance()
            env_steps += 1
        trainer.wait_for_update()
        probe = _probe(trainer, env)
    finite = {k: tuple(v) if np.isfinite(v[0]) else None for k, v in ranges.items()}
    return Result(list(env.final_rewards), trainer.step, time.perf_counter() - start,
                  {k: [tuple(float(x) for x in row) for row in v] for k, v in seen.items()},
                  list(getattr(env, "group_returns", [])) or None,
                  finite["values"], finite["returns"], probe,
                  leavers if group_estimates is not None else None)


def _probe(trainer, env) -> Optional[dict]:
    """What the trained actor does for each goal sign at the start of an episode: which
    dimension, if any, ignores the goal."""
    lines = getattr(env, "lines", None)
    if lines is None or lines.memory:
        return None
    import tensorflow as tf
    rows = np.zeros(2, np.int64)
    obs = [tf.constant(o) for o in lines.observe(rows, np.array([-1.0, 1.0]))]
    actor = trainer.policy.actor
    encoding, _ = actor.body(obs)
    model = actor.action_model
    out = {}
    if model.continuous_size:
        out["mean"] = model.mean(encoding).numpy().round(3).tolist()
        out["log_std"] = model.log_std.numpy().round(3).tolist()
    if model.discrete_branches:
        out["p1"] = np.stack([tf.nn.softmax(l).numpy()[:, 1]
                              for l in model.masked_logits(encoding, None)], 1).round(3).tolist()
    return out


@dataclass(frozen=True)
class Variant:
    """One of ML-Agents' regression tests: the env it builds and the config it evolves."""

    name: str
    env_class: type
    env_kwargs: dict
    config: dict
    mlagents_test: str

    def make_env(self, seed: int, **overrides):
        return self.env_class(seed=seed, **{**self.env_kwargs, **overrides})


def _ppo(**overrides):
    return mlagents_config("ppo", **overrides)


def _poca(**overrides):
    return mlagents_config("poca", **overrides)


_HYBRID = {"hyperparameters": {"batch_size": 64, "buffer_size": 1024, "learning_rate": 1e-3},
           "max_steps": 20000}
_VISUAL_HYBRID = {"hyperparameters": {"batch_size": 64, "buffer_size": 1024,
                                      "learning_rate": 1e-4}, "max_steps": 8000}
_MEMORY = {"network_settings": {"memory": {"memory_size": 16}},
           "hyperparameters": {"learning_rate": 1e-3, "batch_size": 64, "buffer_size": 128},
           "max_steps": 6000}
_2D = {"hyperparameters": {"batch_size": 64, "buffer_size": 640}, "max_steps": 10000}
_VISUAL = {"hyperparameters": {"learning_rate": 3e-4}}
_GROUP_BOOTSTRAP = {"hyperparameters": {"leaver_bootstrap": "group"}}  # ML-Agents' rule


def _sac(**overrides):
    """ML-Agents' SAC test config (``test_simple_rl.py``'s ``SAC_TORCH_CONFIG``)."""
    config = mlagents_config("sac", max_steps=1000)
    config["hyperparameters"] = {"learning_rate": 5.0e-3, "learning_rate_schedule": "constant",
                                 "batch_size": 8, "buffer_size": 5000, "buffer_init_steps": 100,
                                 "tau": 0.01, "init_entcoef": 0.01}
    config["network_settings"] = {"num_layers": 1, "hidden_units": 16}
    for key, value in overrides.items():
        if isinstance(value, dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


def _line(**kwargs):
    return LineEnv, kwargs


def _group(**kwargs):
    return GroupLineEnv, kwargs


VARIANTS: Dict[str, Variant] = {v.name: v for v in [
    # test_simple_rl.py
    Variant("ppo_continuous", *_line(action_sizes=(1, 0)), _ppo(), "test_simple_ppo[(1, 0)]"),
    Variant("ppo_discrete", *_line(action_sizes=(0, 1)), _ppo(), "test_simple_ppo[(0, 1)]"),
    Variant("ppo_2d_continuous", *_line(action_sizes=(2, 0), step_size=0.8), _ppo(**_2D),
            "test_2d_ppo[(2, 0)]"),
    Variant("ppo_2d_discrete", *_line(action_sizes=(0, 2), step_size=0.8), _ppo(**_2D),
            "test_2d_ppo[(0, 2)]"),
    Variant("ppo_visual_continuous", *_line(action_sizes=(1, 0), num_vector=0, num_visual=1),
            _ppo(**_VISUAL), "test_visual_ppo[1 visual, (1, 0)]"),
    Variant("ppo_visual_discrete", *_line(action_sizes=(0, 1), num_vector=0, num_visual=1),
            _ppo(**_VISUAL), "test_visual_ppo[1 visual, (0, 1)]"),
    Variant("ppo_visual2_discrete", *_line(action_sizes=(0, 1), num_vector=0, num_visual=2),
            _ppo(**_VISUAL), "test_visual_ppo[2 visual, (0, 1)]"),
    Variant("ppo_memory_continuous", *_line(action_sizes=(1, 0), memory=True), _ppo(**_MEMORY),
            "test_recurrent_ppo[(1, 0)]"),
    Variant("ppo_memory_discrete", *_line(action_sizes=(0, 1), memory=True), _ppo(**_MEMORY),
            "test_recurrent_ppo[(0, 1)]"),
    # test_hybrid.py
    Variant("ppo_hybrid_1c1d", *_line(action_sizes=(1, 1), step_size=0.8), _ppo(**_HYBRID),
            "test_hybrid_ppo[(1, 1)]"),
    Variant("ppo_hybrid_1c2d", *_line(action_sizes=(1, 2), step_size=0.8), _ppo(**_HYBRID),
            "test_hybrid_ppo[(1, 2)]"),
    Variant("ppo_hybrid_2c1d", *_line(action_sizes=(2, 1), step_size=0.8), _ppo(**_HYBRID),
            "test_hybrid_ppo[(2, 1)]"),
    Variant("ppo_hybrid_2c2d", *_line(action_sizes=(2, 2), step_size=0.8), _ppo(**_HYBRID),
            "test_hybrid_ppo[(2, 2)]"),
    Variant("ppo_hybrid_visual", *_line(action_sizes=(1, 1), num_vector=0, num_visual=1),
            _ppo(**_VISUAL_HYBRID), "test_hybrid_visual_ppo[1]"),
    Variant("ppo_hybrid_memory", *_line(action_sizes=(1, 1), memory=True, step_size=0.5),
            _ppo(network_settings={"memory": {"memory_size": 16}},
                 hyperparameters={"learning_rate": 1e-3, "batch_size": 64, "buffer_size": 512},
                 max_steps=5000), "test_hybrid_recurrent_ppo"),
    # test_simple_rl.py, MA-POCA on MultiAgentEnvironment (2 agents, one group)
    Variant("poca_group_discrete", *_group(action_sizes=(0, 1)), _poca(),
            "test_simple_poca[(0, 1)]"),
    Variant("poca_group_continuous", *_group(action_sizes=(1, 0)), _poca(),
            "test_simple_poca[(1, 0)]"),
    Variant("poca_group_visual", *_group(action_sizes=(0, 1), num_vector=0, num_visual=1),
            _poca(**_VISUAL), "test_visual_poca[1]"),
    Variant("poca_group_discrete_builtin_steps", *_group(action_sizes=(0, 1), unity_steps=False),
            _poca(), "test_simple_poca[(0, 1)], reported the built-in way"),
    Variant("poca_group_discrete_group_bootstrap", *_group(action_sizes=(0, 1)),
            _poca(**_GROUP_BOOTSTRAP),
            "test_simple_poca[(0, 1)], leavers bootstrap from the whole group (ML-Agents)"),
    Variant("poca_group_discrete_builtin_steps_group_bootstrap",
            *_group(action_sizes=(0, 1), unity_steps=False), _poca(**_GROUP_BOOTSTRAP),
            "test_simple_poca[(0, 1)], built-in way, leavers bootstrap from the whole group "
            "(ML-Agents)"),
    Variant("poca_memory_discrete", *_line(action_sizes=(0, 1), memory=True), _poca(**_MEMORY),
            "test_recurrent_poca[(0, 1), single agent]"),
    # SAC with memory: ML-Agents' test_recurrent_sac takes 4000 steps of one agent with
    # sequences of 16, batch 256 and 1000 init steps; here 4 agents, sequences of 8, batch
    # 64 (8 sequences), 100 init steps and 1200 steps (tests/trainers/sac/test_sac_memory.py).
    Variant("sac_memory_discrete", *_line(action_sizes=(0, 1), memory=True, num_agents=4),
            _sac(network_settings={"memory": {"memory_size": 16, "sequence_length": 8}},
                 hyperparameters={"batch_size": 64, "steps_per_update": 2.0},
                 max_steps=1200, time_horizon=64),
            "test_recurrent_sac[(0, 1)], 4 agents"),
]}


def run_variant(name: str, seed: int, **kwargs) -> Result:
    variant = VARIANTS[name]
    return train(variant.make_env(seed), variant.config, seed, **kwargs)
