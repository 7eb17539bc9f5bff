"""tftrainers: TensorFlow 2 / Keras trainers for game and simulation agents.

The public Python API (docs/guides/python-api.md); everything not named here is internal
and may change:

    run = tftrainers.train("configs/ppo/Basic.yaml", run_id="basic", max_steps=5000)
    policy = tftrainers.load_policy(run)
    actions = policy(observations)

Importing ``tftrainers`` is cheap: the names load their modules (and TensorFlow, when they
need it) on first use.
"""
TYPE_CHECKING = False  # (not typing.TYPE_CHECKING: importing typing costs ~10-30 ms)

# name -> module that defines it
_PUBLIC = {
    "train": "tftrainers.api",
    "Run": "tftrainers.api",
    "TrainingError": "tftrainers.api",
    "TrainingFailed": "tftrainers.api",
    "Callback": "tftrainers.callbacks",
    "StopOnReward": "tftrainers.callbacks",
    "load_policy": "tftrainers.inference",
    "Policy": "tftrainers.inference",
    "BaseEnv": "tftrainers.envs",
    "check_env": "tftrainers.envs",
    "make_env": "tftrainers.envs",
    "RunOptions": "tftrainers.settings",
}

__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:  # for editors and type checkers; at run time the names load lazily
    from tftrainers.api import Run, TrainingError, TrainingFailed, train
    from tftrainers.callbacks import Callback, StopOnReward
    from tftrainers.envs import BaseEnv, check_env
    from tftrainers.envs import make as make_env
    from tftrainers.inference import Policy, load_policy
    from tftrainers.settings import RunOptions


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tftrainers' has no attribute '{name}'")
    import importlib
    value = getattr(importlib.import_module(module), "make" if name == "make_env" else name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
