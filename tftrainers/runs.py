"""What a training run folder holds, read back: configuration, behavior specs, policies.

    results/RUN/configuration.yaml              the resolved settings
    results/RUN/<Behavior>/behavior_spec.json   observations and actions of the behavior
    results/RUN/<Behavior>/checkpoints/         resume state (see checkpoint.py)

    policy = load_policy("results/RUN", "Ball3D")   # latest checkpoint, no env needed
    check_compatible("results/RUN", "Ball3D", spec, settings, "resume")   # before a restore

Files are written under a temporary name and renamed into place, so a reader (an evaluation
while the run trains) never sees half a file.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, List, Optional

from tftrainers.checkpoint import INDEX_FILE, Checkpointer, CheckpointError
from tftrainers.envs.base import BehaviorSpec
from tftrainers.run_folder import CONFIG_FILE, write_atomically
from tftrainers.settings import encoder_name

SPEC_FILE = "behavior_spec.json"
# What fixes the shapes of a network's variables (``deterministic`` and the LSTM's
# ``sequence_length`` change how it runs, not what a checkpoint holds).
_NETWORK_KEYS = ("normalize", "hidden_units", "num_layers", "vis_encode_type",
                 "goal_conditioning_type")


def write_behavior_spec(behavior_dir: str, spec: BehaviorSpec) -> None:
    os.makedirs(behavior_dir, exist_ok=True)
    write_atomically(os.path.join(behavior_dir, SPEC_FILE), json.dumps(spec.to_dict(), indent=1))


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
    except OSError as error:
        raise CheckpointError(f"{path}: cannot be read ({error.strerror or error})") from None


def run_behaviors(run_dir: str) -> List[str]:
    """Behaviors of a run: folders holding a behavior spec."""
    if not os.path.isfile(os.path.join(run_dir, CONFIG_FILE)):
        raise CheckpointError(f"{run_dir}: not a training run (no {CONFIG_FILE})")
    return sorted(name for name in os.listdir(run_dir)
                  if os.path.isfile(os.path.join(run_dir, name, SPEC_FILE)))


def recorded_settings(run_dir: str, behavior: str):
    """The TrainerSettings a run trained ``behavior`` with (its configuration.yaml)."""
    from tftrainers.settings import ConfigError, load_run_options
    path = os.path.join(run_dir, CONFIG_FILE)
    if not os.path.isfile(path):
        raise CheckpointError(f"{run_dir}: not a training run (no {CONFIG_FILE})")
    try:
        return load_run_options(path).settings_for(behavior)
    except ConfigError as error:
        raise CheckpointError(f"{run_dir}: the run's settings cannot be read ({error})") \
            from None


def _shape(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def spec_difference(trained: BehaviorSpec, current: BehaviorSpec) -> Optional[str]:
    """What differs between the spec a checkpoint was trained on and the environment's,
    in words (the first difference), or None."""
    t_obs, c_obs = trained.observation_specs, current.observation_specs
    if len(t_obs) != len(c_obs):
        return (f"the checkpoint has {len(t_obs)} observation(s) "
                f"({', '.join(repr(o.name) for o in t_obs)}), the environment has "
                f"{len(c_obs)} ({', '.join(repr(o.name) for o in c_obs)})")
    for i, (t, c) in enumerate(zip(t_obs, c_obs)):
        if t.shape != c.shape or t.kind != c.kind:
            return (f"observation {i} ('{c.name}'): the checkpoint has {t.kind.value} shape "
                    f"{_shape(t.shape)}, the environment has {c.kind.value} shape "
                    f"{_shape(c.shape)}")
    t_act, c_act = trained.action_spec, current.action_spec
    if t_act.continuous_size != c_act.continuous_size:
        return (f"continuous actions: the checkpoint has {t_act.continuous_size}, the "
                f"environment has {c_act.continuous_size}")
    if t_act.discrete_branches != c_act.discrete_branches:
        return (f"discrete branches: the checkpoint has {list(t_act.discrete_branches)}, the "
                f"environment has {list(c_act.discrete_branches)}")
    return None


def _network_shape(network_settings) -> Dict[str, Any]:
    shape = {key: getattr(network_settings, key) for key in _NETWORK_KEYS}
    memory = network_settings.memory
    shape["memory"] = None if memory is None else {"memory_size": memory.memory_size}
    shape["encoder"] = encoder_name(network_settings.encoder)
    return shape


def _show(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_show(v)}" for k, v in value.items())
    return str(value)


def _first_difference(recorded: Dict[str, Any], current: Dict[str, Any],
                      path: str) -> Optional[str]:
    for key in recorded:
        a, b = recorded[key], current[key]
        if isinstance(a, dict) and isinstance(b, dict):
            found = _first_difference(a, b, f"{path}.{key}")
            if found:
                return found
        elif a != b:
            return f"{path}.{key}: the checkpoint has {_show(a)}, the config has {_show(b)}"
    return None


def settings_difference(recorded, current, reward_networks: bool = True) -> Optional[str]:
    """The first setting of ``current`` (TrainerSettings) that builds networks of other
    shapes than ``recorded`` did, in words, or None.

    Args:
        reward_networks: compare the critic's kind (``shared_critic``) and the networks of
            learned reward signals too (a resume restores them; ``--initialize-from``
            copies the policy only).
    """
    found = _first_difference(_network_shape(recorded.network_settings),
                              _network_shape(current.network_settings), "network_settings")
    if found:
        return found
    # The critic has one value head per reward signal.
    if list(recorded.reward_signals) != list(current.reward_signals):
        return (f"reward_signals: the checkpoint has {', '.join(recorded.reward_signals)}, "
                f"the config has {', '.join(current.reward_signals)}")
    if reward_networks:
        # A shared critic has no body of its own: the critic a checkpoint holds and the one
        # the config builds would differ in what they are, not only in shape.
        shared = [bool(getattr(s.hyperparameters, "shared_critic", False))
                  for s in (recorded, current)]
        if shared[0] != shared[1]:
            return (f"hyperparameters.shared_critic: the checkpoint has {_show(shared[0])}, "
                    f"the config has {_show(shared[1])}")
        for name, signal in recorded.reward_signals.items():
            if name == "extrinsic":
                continue  # no network of its own
            other = current.reward_signals[name]
            found = (_first_difference(_network_shape(signal.network_settings),
                                       _network_shape(other.network_settings),
                                       f"reward_signals.{name}.network_settings")
                     or _first_difference(_signal_inputs(signal), _signal_inputs(other),
                                          f"reward_signals.{name}"))
            if found:
                return found
    return None


# Keys of a reward signal that change its network's inputs or layers (GAIL's).
_SIGNAL_INPUT_KEYS = ("use_actions", "use_vail", "use_next_obs")


def _signal_inputs(signal) -> Dict[str, Any]:
    return {key: getattr(signal, key) for key in _SIGNAL_INPUT_KEYS if hasattr(signal, key)}


def check_compatible(run_dir: str, behavior: str, spec: BehaviorSpec, settings,
                     purpose: str = "resume") -> None:
    """Checks, before any checkpoint of ``run_dir`` is read, that networks built from
    ``settings`` for ``spec`` can take its weights.

    Args:
        purpose: ``resume`` (every network) or ``initialize`` (the policy only).

    Raises:
        CheckpointError: one line naming the setting or observation and both values.
    """
    what = "resume" if purpose == "resume" else "initialize from"
    behaviors = run_behaviors(run_dir)
    if behavior not in behaviors:
        raise CheckpointError(f"{run_dir}: cannot {what} behavior '{behavior}': the run has "
                              f"{', '.join(behaviors) or 'no behavior'}")
    trained = read_behavior_spec(run_dir, behavior)
    difference = spec_difference(trained, spec)
    if difference is None:
        difference = settings_difference(recorded_settings(run_dir, behavior), settings,
                                         reward_networks=purpose == "resume")
    if difference is not None:
        raise CheckpointError(f"{run_dir}: cannot {what} behavior '{behavior}': {difference}")


def load_policy(run_dir: str, behavior: str, spec: Optional[BehaviorSpec] = None,
                deterministic: bool = False, seed: int = 0, with_step: bool = False,
                with_critic: bool = False, log: Optional[Callable[[str], None]] = None):
    """The behavior's Policy with the weights of the run's newest readable checkpoint.

    Safe while the run trains: a checkpoint pruned while it is read sends the reader back
    to the index; a damaged one is skipped for the next older one, and ``log`` gets one
    line saying so (``Checkpointer.restore_newest``, which every reader goes through).

    Args:
        spec: the environment's spec (checked against the run's); None reads the run's.
        with_step: also return the checkpoint's step.
        with_critic: also return the critic (for the SavedModel's value signature).
        log: receives the line naming a skipped checkpoint (None: standard error).

    Returns:
        ``policy``, or ``(policy, step)`` / ``(policy, critic)`` / ``(policy, step,
        critic)`` as asked.

    Raises:
        CheckpointError: one line naming what is missing, unreadable or mismatched.
    """
    behaviors = run_behaviors(run_dir)
    if behavior not in behaviors:
        raise CheckpointError(f"{run_dir}: no behavior '{behavior}'; the run has "
                              f"{', '.join(behaviors) or 'none'}")
    trained = read_behavior_spec(run_dir, behavior)
    difference = spec_difference(trained, spec) if spec is not None else None
    if difference is not None:
        raise CheckpointError(f"{run_dir}: behavior '{behavior}' does not fit the "
                              f"environment: {difference}")
    settings = recorded_settings(run_dir, behavior)
    directory = os.path.join(run_dir, behavior, "checkpoints")
    checkpointer = Checkpointer(directory, behavior)
    if not checkpointer.scan(complete=False) and not os.path.exists(
            os.path.join(directory, INDEX_FILE)):
        raise CheckpointError(f"{directory}: no checkpoint of behavior '{behavior}'")
    from tftrainers.trainers.policy import Policy  # TensorFlow: only once the run checks out
    policy = Policy(trained, settings.network_settings, seed=seed, deterministic=deterministic,
                    tanh_squash=settings.trainer_type == "sac")
    trackables = dict(policy.trackables())
    critic = None
    if with_critic and settings.trainer_type == "ppo" and settings.hyperparameters.shared_critic:
        from tftrainers.networks import SharedCritic
        critic = SharedCritic(policy.actor.body, list(settings.reward_signals))
        trackables["critic"] = critic
    elif with_critic and settings.trainer_type == "ppo":
        from tftrainers.networks import Critic
        ns = settings.network_settings
        critic = Critic(trained.observation_specs, list(settings.reward_signals),
                        ns.hidden_units, ns.num_layers, ns.normalize, ns.vis_encode_type,
                        memory_size=policy.memory_size,
                        goal_conditioning=ns.goal_conditioning_type, encoder=ns.encoder)
        trackables["critic"] = critic
    entry, _, _ = checkpointer.restore_newest(trackables, log=log)
    out = (policy,) + ((entry["step"],) if with_step else ()) + ((critic,) if with_critic
                                                                 else ())
    return out if len(out) > 1 else policy
