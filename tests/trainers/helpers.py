"""Small settings and loops for trainer tests."""
import signal

import numpy as np

from tftrainers.settings import RunOptions
from tftrainers.trainers.context import TrainerContext
from tftrainers.trainers.registry import create_trainer


def trainer_settings(name, **overrides):
    """TrainerSettings for behavior ``name`` from a dict shaped like the YAML."""
    behavior = {"trainer_type": "ppo",
                "hyperparameters": {"batch_size": 32, "buffer_size": 128, "num_epoch": 2},
                "network_settings": {"hidden_units": 16, "num_layers": 1},
                "max_steps": 2000, "time_horizon": 16, "summary_freq": 500}
    for key, value in overrides.items():
        if isinstance(value, dict):
            behavior.setdefault(key, {}).update(value)
        else:
            behavior[key] = value
    return RunOptions.from_dict({"behaviors": {name: behavior}}).settings_for(name)


def make_trainer(tmp_path, env, name, settings, seed=0, **context):
    """``context``: the other TrainerContext fields (inference, act_runtime, ...)."""
    return create_trainer(name, env.behavior_specs[name], settings,
                          TrainerContext(str(tmp_path), seed=seed, **context))


def manager_of(trainer, env=None):
    """The trainer's (first) acting side, created and subscribed on first use."""
    if not trainer.managers:
        trainer.subscribe(trainer.create_agent_manager(env))
    return trainer.managers[0]


def act(policy, decision_steps, **kwargs):
    """One act call of a learner's Policy (through a TensorFlow actor)."""
    return policy.make_actor("tensorflow", **kwargs).act(decision_steps)


def drive(env, trainer, env_steps):
    """The runner's loop for one behavior, for ``env_steps`` steps."""
    name = trainer.behavior_name
    manager = manager_of(trainer, env)
    for _ in range(env_steps):
        decision, terminal = env.get_steps(name)
        actions = manager.step(decision, terminal)
        if len(decision):
            env.set_actions(name, actions)
        env.step()
        trainer.advance()


def variables(trainer):
    """Every variable a checkpoint should hold, as numpy, by name and position."""
    out = []
    for key, obj in sorted(trainer.trackables().items()):
        for i, v in enumerate(obj.variables):
            out.append((f"{key}/{i}/{v.name}", np.array(v.numpy())))
    return out


class SigintAfter:
    """Wraps an env; raises SIGINT (as Ctrl-C would) at its n-th step."""

    def __init__(self, env, n):
        self.env, self.n, self.count = env, n, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self):
        self.count += 1
        if self.count == self.n:
            signal.raise_signal(signal.SIGINT)
        self.env.step()
