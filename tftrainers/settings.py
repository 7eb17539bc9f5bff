"""Run settings: ML-Agents' YAML schema as dataclasses, loaded strictly.

A config file written for ``mlagents-learn`` (release 20-22) loads unchanged, including the
resolved ``configuration.yaml`` it writes into every results folder: every key, default and
meaning follows ``mlagents/trainers/settings.py``; ``torch_settings.device`` is read as
``tf_settings.device``. Every problem in a file is a :class:`ConfigError` whose message is
one line naming the file, the key path, what was given and what is allowed. A key that is
accepted but changes nothing here (Unity engine settings, self-play, ...) is never dropped
in silence: ``options.notes`` holds one line per reason, naming the keys::

    options = load_run_options("configs/ppo/Ball3D.yaml", overrides={"run_id": "ball"})
    for name in env.behavior_specs:
        trainer_settings = options.settings_for(name)     # TrainerSettings
        trainer_settings.hyperparameters.batch_size        # 64
    print(options.to_yaml())                               # --dry-run / configuration.yaml
    options.notes   # ("configs/x.yaml: engine_settings is accepted but has no effect ...",)

One small recursive converter (:func:`_build`) turns a mapping into any settings dataclass
using its field types (``Optional[X]``, ``Dict[str, X]``, nested dataclasses, primitives)
and field metadata (``help``, bounds, choices). Classes only *declare* what they accept:
there is no per-class parsing code, no global mutable default and no import-time
registration.
"""
import copy
import dataclasses
import difflib
import math
import re
from dataclasses import MISSING, dataclass, field
from types import MappingProxyType
from typing import (Any, Callable, ClassVar, Dict, List, Mapping, NamedTuple, NoReturn,
                    Optional, Tuple, Union, get_args, get_origin, get_type_hints)

import yaml

_EMPTY: Mapping[str, str] = MappingProxyType({})
SCHEDULES = ("linear", "constant")
#: POCA: what a member that leaves before its group bootstraps from
LEAVER_BOOTSTRAPS = ("group", "remaining")


class ConfigError(ValueError):
    """A configuration problem; the message is one line naming file, key, value and fix."""

    def __init__(self, message: str):
        # The CLI prints this as the whole error (exit code 2, no traceback), so it must
        # stay one line even when a YAML value or OS message contains newlines.
        super().__init__(" ".join(str(message).splitlines()))


class _Note(NamedTuple):
    """A remark on one key of a file: ``path text``; an inert key's text is why it has no
    effect here."""

    path: str
    text: str
    inert: bool = False


def _opt(help: str, default: Any = MISSING, *, factory: Any = MISSING, **rules: Any) -> Any:
    """Declares a settings field.

    Args:
        help: One line shown by ``--help`` and the docs.
        default: Default value (MISSING makes the key required).
        factory: Default factory for mutable defaults.
        **rules: Checks and hooks read by the converter: ``ge``/``gt``/``le``/``lt``
            (constant bounds), ``multiple_of``, ``choices`` (allowed values),
            ``default_from`` (sibling field whose value is the default when None),
            ``select_by`` + ``types`` (the dataclass to build is ``types[sibling]``),
            ``key_types`` (a dict whose keys select the value dataclass), ``parse``
            (``f(value, path, source)`` normalising the raw value first), ``inert``
            (why the key has no effect here: a note when the file gives it a value
            other than null, false or empty, and left out of ``as_dict`` at its default).
    """
    return field(default=default, default_factory=factory, metadata={"help": help, **rules})


@dataclass(kw_only=True)
class _Settings:
    """Base of all settings classes: derived defaults, plain-dict export, help texts.

    Class attributes a subclass may set (read by the converter, never mutated):
        _aliases: deprecated key -> dotted path it is copied to when that path is not set
            (with a note).
        _removed: key -> what to use instead (the key is an error).
        _ignored: key -> why it is ignored (the key is dropped with a note).
        _relations: (left path, op, right path) checks between fields, op in
            ``<=, >=, excludes``; skipped when either side is None.
    A subclass may also define ``_validate(self, fail)`` for checks the rules above cannot
    express; ``fail(key, problem, allowed)`` raises the one-line ConfigError.
    """

    _aliases: ClassVar[Mapping[str, str]] = _EMPTY
    _removed: ClassVar[Mapping[str, str]] = _EMPTY
    _ignored: ClassVar[Mapping[str, str]] = _EMPTY
    _relations: ClassVar[Tuple[Tuple[str, str, str], ...]] = ()

    def __post_init__(self):
        # Defaults that depend on other fields are resolved here (not in the loader) so
        # that settings built in code get them too.
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None:
                continue
            if "default_from" in f.metadata:
                setattr(self, f.name, getattr(self, f.metadata["default_from"]))
            elif "select_by" in f.metadata:
                cls = f.metadata["types"].get(getattr(self, f.metadata["select_by"]))
                if cls is not None:
                    setattr(self, f.name, cls())

    def as_dict(self) -> Dict[str, Any]:
        """Returns every field as plain dicts/lists/scalars, in declaration order."""
        return _plain(self)

    @classmethod
    def field_help(cls) -> Dict[str, str]:
        """Returns ``{field name: one-line help}`` for ``--help`` and the docs."""
        return {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}


# ---------------------------------------------------------------------------- network


@dataclass(kw_only=True)
class MemorySettings(_Settings):
    """Recurrent memory (an LSTM after the network body)."""

    sequence_length: int = _opt("Steps per training sequence for the LSTM.", 64, ge=1)
    memory_size: int = _opt("LSTM state size (h and c halves): a positive even number.",
                            128, gt=0, multiple_of=2)


ENCODER_NAME = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def encoder_name(value: Any) -> Optional[str]:
    """``network_settings.encoder`` as written to configuration.yaml: ``MODULE:NAME`` as
    given, or that of a Python class or function given from code (a layer instance: its
    class); None for none."""
    if value is None or isinstance(value, str):
        return value
    obj = value if callable(value) and not hasattr(value, "get_config") or \
        isinstance(value, type) else type(value)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "?")
    return f"{module}:{qualname}"


def _parse_encoder(value: Any, path: str, source: str) -> Any:
    """``MODULE:NAME`` (checked here, imported when the network is built) or, from
    Python, the class, factory or layer itself."""
    if value is None or callable(value) or hasattr(value, "get_config"):
        return value
    if isinstance(value, str) and ENCODER_NAME.match(value.strip()):
        return value.strip()
    _fail(source, path, _wrong(value) if not isinstance(value, str)
          else f"{_show(value)} is not MODULE:NAME",
          "MODULE:NAME of a Keras layer class or factory (e.g. my_encoders:SmallConv), "
          "or null for the built-in encoders")


@dataclass(kw_only=True)
class NetworkSettings(_Settings):
    """Shape of a network body: normalizer, encoders, hidden layers, optional memory."""

    normalize: bool = _opt("Normalize vector observations with running mean/variance.", False)
    hidden_units: int = _opt("Units per hidden layer.", 128, ge=1)
    num_layers: int = _opt("Number of hidden layers after the encoders.", 2, ge=0)
    vis_encode_type: str = _opt(
        "Encoder for visual observations.", "simple",
        choices=("simple", "nature_cnn", "resnet", "match3", "fully_connected"))
    memory: Optional[MemorySettings] = _opt("Recurrent memory; null for none.", None)
    encoder: Optional[Any] = _opt(
        "Your own Keras encoder, MODULE:NAME: a layer class or factory (no argument: it "
        "encodes each visual observation; one: called with each ObservationSpec, returns a "
        "layer or null). Replaces the built-in encoders of the networks these settings "
        "shape (the behavior's: policy and critic; a reward signal's: its own network); "
        "null: the built-in ones (see Custom networks).", None,
        parse=_parse_encoder)
    goal_conditioning_type: str = _opt(
        "How goal-signal observations condition the network: hyper (a hypernetwork makes "
        "the last hidden layer's weights from the goal) or none (a plain input).",
        "hyper", choices=("hyper", "none"))
    deterministic: bool = _opt("Act with the distribution's mode instead of sampling.", False)


# ---------------------------------------------------------------------- hyperparameters


@dataclass(kw_only=True)
class _OnPolicyHyperparameters(_Settings):
    """Hyperparameters shared by PPO and MA-POCA."""

    batch_size: int = _opt("Experiences per gradient step (minibatch size).", 1024, ge=1)
    buffer_size: int = _opt("Experiences collected before an update; >= batch_size.",
                            10240, ge=1)
    learning_rate: float = _opt("Initial Adam learning rate.", 3.0e-4, gt=0)
    beta: float = _opt("Entropy bonus strength.", 5.0e-3, ge=0)
    epsilon: float = _opt("Clipping range of the policy ratio and of the value change.",
                          0.2, gt=0, lt=1)
    lambd: float = _opt("GAE lambda: bias/variance trade-off of advantages.", 0.95,
                        ge=0, le=1)
    num_epoch: int = _opt("Passes over the update buffer per update.", 3, ge=1)
    learning_rate_schedule: str = _opt("Learning rate over training: linear decay or constant.",
                                       "linear", choices=SCHEDULES)
    beta_schedule: str = _opt("Entropy strength over training (default: learning_rate_schedule).",
                              None, choices=SCHEDULES, default_from="learning_rate_schedule")
    epsilon_schedule: str = _opt("Clipping range over training (default: learning_rate_schedule).",
                                 None, choices=SCHEDULES, default_from="learning_rate_schedule")
    # tftrainers extensions; their defaults are ML-Agents' behaviour.
    clip_value: bool = _opt("Clip the value change to epsilon in the value loss (ML-Agents: "
                            "true; Stable-Baselines3's default: false).", True)
    max_grad_norm: Optional[float] = _opt(
        "Clip the global gradient norm to this (null: no clipping, as ML-Agents; "
        "Stable-Baselines3's default: 0.5).", None, gt=0)
    advantage_scale_floor: float = _opt(
        "Advantages are divided by their spread over the update buffer, but never by less "
        "than this (in reward units). Towards the rewards' scale it keeps a solved policy's "
        "rare mistakes from becoming 10-sigma updates (see the Hallway config).",
        1.0e-4, gt=0)

    _relations = (("buffer_size", ">=", "batch_size"),)


@dataclass(kw_only=True)
class PPOSettings(_OnPolicyHyperparameters):
    """PPO hyperparameters (``trainer_type: ppo``)."""

    shared_critic: bool = _opt(
        "Value heads on the policy's network body (encoders, hidden layers and memory) instead "
        "of a critic with its own body; the value loss then trains that body too. The export "
        "is the same; a run cannot resume with this changed.", False)


@dataclass(kw_only=True)
class POCASettings(_OnPolicyHyperparameters):
    """MA-POCA hyperparameters (``trainer_type: poca``): PPO's keys but shared_critic, and
    leaver_bootstrap."""

    # tftrainers extension; "group" is ML-Agents' behaviour.
    leaver_bootstrap: str = _opt(
        "What a member that finishes before its group (e.g. dies) bootstraps its return "
        "from: remaining, the value of the members still present, without it; group, the "
        "value of the whole group after its last step, itself included (ML-Agents).",
        "remaining", choices=LEAVER_BOOTSTRAPS)


@dataclass(kw_only=True)
class BCSettings(_Settings):
    """Hyperparameters of the standalone behavioral cloning trainer (``trainer_type: bc``):
    ML-Agents' keys, the seed's ``batches_per_epoch`` and ``brain_to_imitate``, and the
    teacher (one of ``teacher``, ``brain_to_imitate``, ``demo_path``)."""

    batch_size: int = _opt("Labelled steps per gradient step; an update runs each time this "
                           "many new labelled steps (demo_path: env steps) arrived.", 1024, ge=1)
    buffer_size: int = _opt("Labelled steps kept for training (the newest; DAgger's "
                            "aggregated data set).", 50000, ge=1)
    num_epoch: int = _opt("Passes over the labelled steps per update.", 3, ge=1)
    batches_per_epoch: int = _opt("Most minibatches per pass (0: as many as the data holds).",
                                  10, ge=0)
    learning_rate: float = _opt("Initial Adam learning rate.", 3.0e-4, gt=0)
    learning_rate_schedule: str = _opt("Learning rate over training: linear decay or constant.",
                                       "linear", choices=SCHEDULES)
    teacher: Optional[str] = _opt(
        "The teacher: heuristic (the env's), heuristic:MODULE:FUNCTION (an expert "
        "f(decision_steps) -> actions), a run folder results/RUN, a FILE.onnx or a SavedModel "
        "folder.", None)
    brain_to_imitate: Optional[str] = _opt(
        "Another behavior of the env whose agents (driven by their own trainer) teach.", None)
    demo_path: Optional[str] = _opt("Learn offline from a .demo file or a folder of them.",
                                    None)
    mode: str = _opt("teacher: a share of the agents is driven by the teacher and recorded; "
                     "dagger: the teacher labels every state, and at each step an agent takes the "
                     "teacher's action with a probability falling from 1 to 0 over steps.", "teacher",
                     choices=("teacher", "dagger"))
    teacher_agents: float = _opt("mode teacher: the share of agents the teacher drives.", 0.5,
                                 gt=0, le=1)
    steps: Optional[int] = _opt("mode dagger: steps over which the teacher's probability falls "
                                "to 0 (null: half of max_steps).", None, ge=1)
    continuous_loss: str = _opt("Continuous actions: log_likelihood of the teacher's action "
                                "under the student's Gaussian, mse of its mean, or sampled_mse "
                                "(ML-Agents' BC module).", "log_likelihood",
                                choices=("log_likelihood", "mse", "sampled_mse"))

    _relations = (("teacher", "excludes", "brain_to_imitate"),
                  ("teacher", "excludes", "demo_path"),
                  ("brain_to_imitate", "excludes", "demo_path"))


@dataclass(kw_only=True)
class SACSettings(_Settings):
    """Soft actor-critic hyperparameters (``trainer_type: sac``): ML-Agents' keys and
    defaults (docs/trainers/sac.md)."""

    batch_size: int = _opt("Transitions sampled from the replay buffer per gradient step.",
                           128, ge=1)
    buffer_size: int = _opt("Transitions the replay buffer holds (the oldest are replaced); "
                            ">= batch_size.", 50000, ge=1)
    buffer_init_steps: int = _opt("Steps collected (by the untrained policy) before the first "
                                  "update.", 0, ge=0)
    learning_rate: float = _opt("Adam learning rate of the policy, the Q and value networks "
                                "and the entropy coefficients.", 3.0e-4, gt=0)
    learning_rate_schedule: str = _opt("Learning rate over training: constant or linear decay.",
                                       "constant", choices=SCHEDULES)
    tau: float = _opt("Soft update rate of the target value network (target = tau * value + "
                      "(1 - tau) * target, after every gradient step).", 0.005, gt=0, le=1)
    steps_per_update: float = _opt("Agent steps per gradient step (about the number of "
                                   "agents: more = fewer updates per step).", 1.0, gt=0)
    save_replay_buffer: bool = _opt("Save the replay buffer with every checkpoint and restore "
                                    "it on --resume.", False)
    init_entcoef: float = _opt("Initial entropy coefficient (alpha) of every discrete branch "
                               "and of the continuous actions.", 1.0, gt=0)
    reward_signal_steps_per_update: float = _opt(
        "Agent steps per update of the learned reward signals (null: steps_per_update).",
        None, gt=0, default_from="steps_per_update")

    _relations = (("buffer_size", ">=", "batch_size"),)


#: trainer_type -> its hyperparameters class.
TRAINER_TYPES: Mapping[str, type] = MappingProxyType(
    {"ppo": PPOSettings, "poca": POCASettings, "sac": SACSettings, "bc": BCSettings})


# ----------------------------------------------------------------------- reward signals

# ML-Agents deprecated a reward signal's encoding_size in favour of its network_settings.
_ENCODING_SIZE_ALIAS = MappingProxyType({"encoding_size": "network_settings.hidden_units"})


@dataclass(kw_only=True)
class RewardSignalSettings(_Settings):
    """A reward signal: the keys every signal has."""

    gamma: float = _opt("Discount factor of this reward stream.", 0.99, ge=0, le=1)
    strength: float = _opt("Multiplier of this reward.", 1.0, ge=0)
    network_settings: NetworkSettings = _opt("Network of the signal's model (if any).",
                                             factory=NetworkSettings)


@dataclass(kw_only=True)
class ExtrinsicSettings(RewardSignalSettings):
    """The environment's reward. ML-Agents writes a network_settings here too, and ignores it."""

    network_settings: NetworkSettings = _opt(
        "Not used: the extrinsic reward has no network.", factory=NetworkSettings,
        inert="the extrinsic reward has no network (ML-Agents ignores it too)")


@dataclass(kw_only=True)
class NoveltyNetworkSettings(NetworkSettings):
    """Network of a curiosity or RND model: ``normalize`` follows the behavior's."""

    normalize: Optional[bool] = _opt(
        "Normalize the model's vector observations with running mean/variance (null: as "
        "the behavior's network_settings.normalize; ML-Agents' default is false).", None)


@dataclass(kw_only=True)
class CuriositySettings(RewardSignalSettings):
    """Curiosity (ICM) intrinsic reward; ``encoding_size`` is read as network hidden_units."""

    network_settings: NoveltyNetworkSettings = _opt(
        "Network of the encoder (normalize: null follows the behavior).",
        factory=NoveltyNetworkSettings)
    learning_rate: float = _opt("Learning rate of the forward/inverse models.", 3.0e-4, gt=0)

    _aliases = _ENCODING_SIZE_ALIAS


@dataclass(kw_only=True)
class RNDSettings(RewardSignalSettings):
    """Random network distillation intrinsic reward."""

    network_settings: NoveltyNetworkSettings = _opt(
        "Network of the target and predictor (normalize: null follows the behavior).",
        factory=NoveltyNetworkSettings)
    learning_rate: float = _opt("Learning rate of the predictor network.", 1.0e-4, gt=0)

    _aliases = _ENCODING_SIZE_ALIAS


@dataclass(kw_only=True)
class GAILSettings(RewardSignalSettings):
    """GAIL reward from a discriminator trained against demonstrations."""

    demo_path: str = _opt("Path to a .demo file or a folder of them.")
    learning_rate: float = _opt("Learning rate of the discriminator.", 3.0e-4, gt=0)
    use_actions: bool = _opt("Discriminate on actions as well as observations.", False)
    use_vail: bool = _opt("Use a variational information bottleneck in the discriminator.",
                          False)
    # tftrainers extension; false is ML-Agents' behaviour.
    use_next_obs: bool = _opt("The discriminator also sees the observation that followed the "
                              "step (GAIfO's state transition); ML-Agents: false.", False)
    # tftrainers extension; false is ML-Agents' behaviour.
    absorbing_state: bool = _opt("Real episode ends lead to an absorbing state that the "
                                 "discriminator judges and the GAIL reward is measured "
                                 "from (no survival bias); ML-Agents: false.", True)
    # tftrainers extension; false is ML-Agents' behaviour.
    bootstrap_ends: bool = _opt("Without absorbing_state: every episode end bootstraps the "
                                "stream from the critic's value of the final observation, "
                                "as curiosity's (tftrainers' rule before absorbing states); "
                                "ML-Agents: false (the stream stops).", False)

    _aliases = _ENCODING_SIZE_ALIAS
    _relations = (("bootstrap_ends", "excludes", "absorbing_state"),)


#: reward signal name -> its settings class.
REWARD_SIGNAL_TYPES: Mapping[str, type] = MappingProxyType({
    "extrinsic": ExtrinsicSettings, "curiosity": CuriositySettings,
    "rnd": RNDSettings, "gail": GAILSettings})


@dataclass(kw_only=True)
class BehavioralCloningSettings(_Settings):
    """Behavioral cloning as an auxiliary loss of PPO/POCA (or the data of trainer_type bc)."""

    demo_path: str = _opt("Path to a .demo file or a folder of them.")
    steps: int = _opt("Steps over which the BC strength decays to 0 (0: constant).", 0, ge=0)
    strength: float = _opt("Weight of the BC loss relative to the RL loss.", 1.0, ge=0)
    samples_per_update: int = _opt("Demonstration samples per update (0: all).", 0, ge=0)
    num_epoch: Optional[int] = _opt("Passes over the demonstrations (null: trainer's).",
                                    None, ge=1)
    batch_size: Optional[int] = _opt("Demonstration minibatch size (null: trainer's).",
                                     None, ge=1)


# ------------------------------------------------------------------------------ trainer


@dataclass(kw_only=True)
class SelfPlaySettings(_Settings):
    """Self-play (ML-Agents' adversarial training): the teams of a behavior (``Name?team=N``)
    take turns learning against snapshots of the policy (docs/trainers/self-play.md)."""

    save_steps: int = _opt("Trainer steps between snapshots of the policy.", 20000, ge=1)
    team_change: Optional[int] = _opt("Trainer steps between changes of the learning team "
                                      "(null: 5 x save_steps).", None, ge=1)
    swap_steps: int = _opt("Ghost steps between swaps of the opponent's snapshot.", 2000, ge=1)
    window: int = _opt("Snapshots kept to sample opponents from.", 10, ge=1)
    play_against_latest_model_ratio: float = _opt(
        "Probability of playing against the current policy.", 0.5, ge=0, le=1)
    initial_elo: float = _opt("Starting ELO rating.", 1200.0)

    def __post_init__(self):
        super().__post_init__()
        if self.team_change is None:
            self.team_change = self.save_steps * 5


@dataclass(kw_only=True)
class TrainerSettings(_Settings):
    """Everything about training one behavior (``behaviors.<Name>`` / ``default_settings``)."""

    trainer_type: str = _opt("Trainer: ppo, poca (MA-POCA), sac (soft actor-critic) or bc "
                             "(behavioral cloning).",
                             "ppo", choices=TRAINER_TYPES)
    hyperparameters: Union[PPOSettings, POCASettings, SACSettings, BCSettings] = _opt(
        "Algorithm hyperparameters; the keys depend on trainer_type.", None,
        select_by="trainer_type", types=TRAINER_TYPES)
    network_settings: NetworkSettings = _opt("Policy (and critic) network.",
                                             factory=NetworkSettings)
    reward_signals: Dict[str, RewardSignalSettings] = _opt(
        "Reward signals by name: extrinsic, curiosity, rnd, gail.",
        factory=lambda: {"extrinsic": ExtrinsicSettings()},
        key_types=REWARD_SIGNAL_TYPES)
    init_path: Optional[str] = _opt("Checkpoint to initialize this behavior's weights from.",
                                    None)
    keep_checkpoints: int = _opt("Number of recent checkpoints (and .onnx) to keep.", 5, ge=1)
    even_checkpoints: bool = _opt(
        "Space checkpoints evenly: checkpoint_interval = max_steps / keep_checkpoints.", False)
    checkpoint_interval: int = _opt("Steps between checkpoints.", 500000, ge=1)
    max_steps: int = _opt("Total environment steps to train for.", 500000, ge=0)
    time_horizon: int = _opt("Steps per agent before a trajectory is cut and bootstrapped.",
                             64, ge=1)
    summary_freq: int = _opt("Steps between stats summaries.", 50000, ge=1)
    threaded: bool = _opt("Update the policy while the environment steps.", False)
    self_play: Optional[SelfPlaySettings] = _opt(
        "Self-play against snapshots of the policy (ppo, poca); null for none.", None)
    behavioral_cloning: Optional[BehavioralCloningSettings] = _opt(
        "Behavioral cloning from demonstrations; null for none.", None)

    _ignored = MappingProxyType({"framework": "ML-Agents deprecated it; TensorFlow is used"})
    _relations = (("network_settings.memory.sequence_length", "<=",
                   "hyperparameters.batch_size"),)

    def __post_init__(self):
        super().__post_init__()
        # Mirrors ML-Agents: even_checkpoints overrides checkpoint_interval.
        if self.even_checkpoints and self.keep_checkpoints > 0:
            self.checkpoint_interval = max(1, int(self.max_steps / self.keep_checkpoints))
        # Novelty models normalise their inputs when the behavior does, unless told (the
        # RND paper normalises; ML-Agents' default does not).
        for signal in self.reward_signals.values():
            ns = signal.network_settings
            if isinstance(ns, NoveltyNetworkSettings) and ns.normalize is None:
                ns.normalize = self.network_settings.normalize


# -------------------------------------------------------------------------- run level


def _parse_env_args(value: Any, path: str, source: str) -> Any:
    """Normalises env_args given as ``{k: v}`` or ``["k=v", ...]`` to a dict; a list of
    strings that are not all ``k=v`` stays a list (a Unity player's own arguments)."""
    allowed = ("a mapping {key: value}, a list of 'key=value' strings, or (for a Unity "
               "build) a list of the player's arguments")
    if value is None:
        return None
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        if all(isinstance(item, str) for item in value) and not all(
                "=" in item and item.split("=", 1)[0].strip() for item in value):
            return list(value)  # a player's arguments; only a Unity build takes them
        items = []
        for i, item in enumerate(value):
            key = item.split("=", 1)[0].strip() if isinstance(item, str) else ""
            if not key or "=" not in item:
                _fail(source, f"{path}[{i}]", f"{_show(item)} is not a 'key=value' string",
                      allowed)
            items.append((key, item.split("=", 1)[1]))
    else:
        _fail(source, path, _wrong(value), allowed)
    for key, val in items:
        if not isinstance(key, str):
            _fail(source, f"{path}.{key}", f"key {_show(key)} is {_kind(key)}", allowed)
        if val is not None and not isinstance(val, (str, int, float, bool)):
            _fail(source, f"{path}.{key}", _wrong(val), "a string, number or boolean")
    return dict(items)


def _is_unity(env_path: Optional[str]) -> bool:
    from tftrainers.envs.unity import is_unity_env_id
    return is_unity_env_id(env_path)


_UNITY_PLAYER = ("Unity player settings (crash restart rate limits); env workers here "
                 "restart as env_settings.max_worker_restarts says")


@dataclass(kw_only=True)
class EnvironmentSettings(_Settings):
    """Which environment to run and how many copies."""

    env_path: Optional[str] = _opt(
        "Environment: builtin:NAME, gym:ID, pettingzoo:MODULE.ENV, python:MODULE:NAME or a "
        "Unity build path "
        "(null: the Unity Editor, after pressing Play).", None)
    env_args: Optional[Any] = _opt(
        "Arguments passed to the environment ({k: v} or a list of 'k=v'); for a Unity build, "
        "the player's own command-line arguments (a list).", None, parse=_parse_env_args)
    base_port: int = _opt(
        "First port of Unity players: worker N's player connects to base_port + N. The "
        "Editor listens on 5004 while this is 5005, the default.", 5005, ge=1, le=65535,
        inert="the port of a Unity player (a build or the Editor); built-in, gym and "
              "pettingzoo environments have none")
    num_envs: int = _opt(
        "Environment instances: inline, one env of num_envs x num_areas areas (built-in, gym "
        "and pettingzoo envs vectorise); with workers, one instance per worker.", 1, ge=1)
    workers: str = _opt(
        "Where the num_envs instances step: inline (in the learner's process), process (one "
        "worker process each, acting inside it) or auto (processes when num_envs > 1 and a "
        "step of one instance takes 1 ms or more, measured at start-up).", "auto",
        choices=("auto", "inline", "process"))
    ray_address: Optional[str] = _opt(
        "Run the env workers as actors on a Ray cluster: auto (the running cluster, or a "
        "local one) or HOST:PORT; null: no Ray.", None)
    max_worker_restarts: int = _opt(
        "Times one env worker is restarted after it raised, crashed or hung before the run "
        "stops.", 5, ge=0)
    num_areas: Optional[int] = _opt(
        "Training areas per environment copy (null: the environment's own default).", None,
        ge=1)
    timeout_wait: int = _opt("Seconds an env worker (or a Unity player, for each message) "
                             "may go without answering before it is restarted.", 60, ge=1)
    seed: int = _opt("Random seed (-1: pick one at random).", -1)
    max_lifetime_restarts: int = _opt("Crashes an environment may restart from (-1: no limit).",
                                      10, ge=-1, inert=_UNITY_PLAYER)
    restarts_rate_limit_n: int = _opt("Restarts allowed per rate-limit period (-1: no limit).",
                                      1, ge=-1, inert=_UNITY_PLAYER)
    restarts_rate_limit_period_s: int = _opt("Length of the restart rate-limit period (s).",
                                             60, ge=0, inert=_UNITY_PLAYER)

    def _validate(self, fail):
        if isinstance(self.env_args, list) and not (self.env_path and _is_unity(self.env_path)):
            # A list of arguments is for a Unity build's player; other envs take key=value.
            i, item = next((i, a) for i, a in enumerate(self.env_args)
                           if "=" not in a or not a.split("=", 1)[0].strip())
            fail(f"env_args[{i}]", f"{_show(item)} is not a 'key=value' string",
                 "a mapping {key: value} or a list of 'key=value' strings (a list of other "
                 "arguments is for the player of a Unity build)")
        address = self.ray_address
        if address is not None:
            host, _, port = str(address).rpartition(":")
            if address != "auto" and not (host and port.isdigit()):
                fail("ray_address", f"{_show(address)} is not a Ray address",
                     "auto or HOST:PORT (e.g. 10.0.0.5:6379)")
            if self.workers == "inline":
                fail("workers", "inline conflicts with ray_address (Ray runs the envs in "
                     "workers)", "auto or process with ray_address, or ray_address: null")


@dataclass(kw_only=True)
class EngineSettings(_Settings):
    """Unity engine settings, sent to the player through the engine-configuration side
    channel (built-in, gym and pettingzoo envs have no player and ignore them)."""

    width: int = _opt("Window width.", 84, ge=1)
    height: int = _opt("Window height.", 84, ge=1)
    quality_level: int = _opt("Unity quality level.", 5, ge=0)
    time_scale: float = _opt("Simulation speed multiplier.", 20.0, gt=0)
    target_frame_rate: int = _opt("Target frame rate (-1: unlimited).", -1, ge=-1)
    capture_frame_rate: int = _opt("Frame rate used for capture.", 60, ge=0)
    no_graphics: bool = _opt("Run the environment without rendering.", False)


@dataclass(kw_only=True)
class CheckpointSettings(_Settings):
    """Where results go and how a run starts (fresh, resumed, initialized from another)."""

    run_id: str = _opt("Run name: results go to results_dir/run_id.", "ppo")
    initialize_from: Optional[str] = _opt("Run id whose weights initialize this run.", None)
    load_model: bool = _opt("Deprecated alias of resume.", False)
    resume: bool = _opt("Continue the run from its last checkpoint.", False)
    force: bool = _opt("Overwrite an existing run with the same run_id.", False)
    train_model: bool = _opt("Deprecated; training is the default.", False,
                             inert="ML-Agents deprecated it (the old --train); training is "
                                   "the default")
    inference: bool = _opt("Run the policy without training.", False)
    results_dir: str = _opt("Folder holding all runs.", "results")

    _relations = (("resume", "excludes", "force"),)


@dataclass(kw_only=True)
class TFSettings(_Settings):
    """TensorFlow placement (replaces ML-Agents' torch_settings)."""

    device: Optional[str] = _opt("Device to train on: cpu or gpu (null: TensorFlow decides).",
                                 None, choices=("cpu", "gpu"))
    num_threads: int = _opt(
        "TensorFlow thread-pool size (0: TensorFlow decides). Small policies run fastest on 1, "
        "where per-op overhead, not arithmetic, dominates.", 1, ge=0)
    jit_compile: bool = _opt("Compile the act and update steps with XLA.", True)
    act_runtime: str = _opt(
        "Where the per-step act call runs: onnxruntime (the policy converted once at the "
        "start, its weights refreshed after every update; about half the time of a "
        "TensorFlow call in an env loop) or tensorflow.", "onnxruntime",
        choices=("onnxruntime", "tensorflow"))


@dataclass(kw_only=True)
class TorchSettings(_Settings):
    """ML-Agents' PyTorch device, read as ``tf_settings.device`` (see RunOptions)."""

    device: Optional[str] = _opt("PyTorch device: cpu, cuda, cuda:N or mps (null: default).",
                                 None)

    #: PyTorch device (before any ":index") -> tf_settings.device.
    DEVICES: ClassVar[Mapping[str, str]] = MappingProxyType(
        {"cpu": "cpu", "cuda": "gpu", "mps": "gpu"})


# --------------------------------------------------------------- environment parameters


def _parse_sampler(value: Any, path: str, source: str) -> Any:
    """A plain number is ML-Agents' shorthand for a constant sampler."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"sampler_type": "constant", "sampler_parameters": {"value": value}}
    return value


def _parse_intervals(value: Any, path: str, source: str) -> Any:
    allowed = "a list of [min, max] pairs of numbers with min <= max"
    if not isinstance(value, (list, tuple)) or not value:
        _fail(source, path, _wrong(value), allowed)
    intervals = []
    for i, pair in enumerate(value):
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                           for x in pair) or pair[0] > pair[1]):
            _fail(source, f"{path}[{i}]", f"{_show(pair)} is not a [min, max] pair", allowed)
        intervals.append([float(pair[0]), float(pair[1])])
    return intervals


@dataclass(kw_only=True)
class ConstantSampler(_Settings):
    """One value."""

    seed: int = _opt("Sampler seed (-1: from the run's seed).", -1)
    value: float = _opt("The value.", 0.0)


@dataclass(kw_only=True)
class UniformSampler(_Settings):
    """Uniform between min_value and max_value."""

    seed: int = _opt("Sampler seed (-1: from the run's seed).", -1)
    min_value: float = _opt("Lower bound.", 0.0)
    max_value: float = _opt("Upper bound.", 1.0)

    _relations = (("min_value", "<=", "max_value"),)


@dataclass(kw_only=True)
class GaussianSampler(_Settings):
    """Normal distribution."""

    seed: int = _opt("Sampler seed (-1: from the run's seed).", -1)
    mean: float = _opt("Mean.", 1.0)
    st_dev: float = _opt("Standard deviation.", 1.0)


@dataclass(kw_only=True)
class MultiRangeUniformSampler(_Settings):
    """Uniform over several intervals."""

    seed: int = _opt("Sampler seed (-1: from the run's seed).", -1)
    intervals: List[List[float]] = _opt("[min, max] intervals.",
                                        factory=lambda: [[0.0, 1.0]], parse=_parse_intervals)


#: sampler_type -> its sampler_parameters class.
SAMPLER_TYPES: Mapping[str, type] = MappingProxyType({
    "uniform": UniformSampler, "gaussian": GaussianSampler,
    "multirangeuniform": MultiRangeUniformSampler, "constant": ConstantSampler})


@dataclass(kw_only=True)
class SamplerSettings(_Settings):
    """How an environment parameter's value is drawn."""

    sampler_type: str = _opt("uniform, gaussian, multirangeuniform or constant.",
                             choices=SAMPLER_TYPES)
    sampler_parameters: Union[UniformSampler, GaussianSampler, MultiRangeUniformSampler,
                              ConstantSampler] = _opt(
        "The sampler's parameters; the keys depend on sampler_type.", None,
        select_by="sampler_type", types=SAMPLER_TYPES)


@dataclass(kw_only=True)
class CompletionCriteriaSettings(_Settings):
    """When a curriculum lesson is complete."""

    behavior: str = _opt("Behavior whose progress or reward is measured.")
    measure: str = _opt("progress (share of max_steps) or reward.", "reward",
                        choices=("progress", "reward"))
    min_lesson_length: int = _opt("Episodes before the lesson may end.", 0, ge=0)
    signal_smoothing: bool = _opt("Smooth the measured reward.", True)
    threshold: float = _opt("Value of the measure that ends the lesson.", 0.0)
    require_reset: bool = _opt("Reset the environment when the lesson ends.", False)

    def _validate(self, fail):
        if self.measure == "progress" and not 0.0 <= self.threshold <= 1.0:
            fail("threshold", f"{_show(self.threshold)} is out of range",
                 "0 <= threshold <= 1 when measure is progress")


@dataclass(kw_only=True)
class LessonSettings(_Settings):
    """One lesson of a curriculum: a value and when to move on."""

    value: SamplerSettings = _opt("The parameter's value (a number) or sampler.",
                                  parse=_parse_sampler)
    name: str = _opt("Lesson name.")
    completion_criteria: Optional[CompletionCriteriaSettings] = _opt(
        "When the lesson ends (null for the last lesson).", None)


def _named_lesson(lesson: Any) -> Any:
    """Early ML-Agents 1.x files key each lesson by its name (``- Lesson0: {value: ...}``);
    it is the same as ``- {name: Lesson0, value: ...}``."""
    if (isinstance(lesson, Mapping) and len(lesson) == 1
            and not {"name", "value", "completion_criteria"} & set(lesson)):
        (name, body), = lesson.items()
        if isinstance(name, str) and isinstance(body, Mapping) and "name" not in body:
            return {"name": name, **body}
    return lesson


def _parse_environment_parameters(value: Any, path: str, source: str) -> Any:
    """A number or a sampler is ML-Agents' shorthand for a one-lesson curriculum named
    after the parameter."""
    if not isinstance(value, Mapping):
        return value  # null, or a wrong type the converter reports
    out = {}
    for name, given in value.items():
        if isinstance(given, Mapping) and "curriculum" in given:
            lessons = given["curriculum"]
            if isinstance(lessons, list):
                given = {**given, "curriculum": [_named_lesson(x) for x in lessons]}
            out[name] = given
        else:
            out[name] = {"curriculum": [{"value": given, "name": name,
                                         "completion_criteria": None}]}
    return out


@dataclass(kw_only=True)
class EnvironmentParameterSettings(_Settings):
    """An environment parameter: its lessons, in order (one for a plain sampler)."""

    curriculum: List[LessonSettings] = _opt("Lessons; all but the last need "
                                            "completion_criteria.")

    def _validate(self, fail):
        if not self.curriculum:
            fail("curriculum", "is empty", "at least one lesson")
        for i, lesson in enumerate(self.curriculum[:-1]):
            if lesson.completion_criteria is None:
                fail(f"curriculum[{i}].completion_criteria", "is missing",
                     "completion_criteria on every lesson but the last")
        last = len(self.curriculum) - 1
        if len(self.curriculum) > 1 and self.curriculum[last].completion_criteria is not None:
            # ML-Agents ignores it with a warning; a final lesson that looks like it could
            # end is a mistake in the file (a lesson missing after it), so say so.
            fail(f"curriculum[{last}].completion_criteria", "is set on the last lesson, so "
                 "the curriculum has no final lesson", "no completion_criteria on the last "
                 "lesson (add the lesson it should lead to)")


def _check_criteria_behaviors(options: "RunOptions", source: str) -> None:
    """A completion criterion must name a behavior the run trains: one of ``behaviors``
    (any name when default_settings trains whatever the env exposes; the env checks it)."""
    if not options.environment_parameters or options.default_settings is not None:
        return
    for name, parameter in options.environment_parameters.items():
        for i, lesson in enumerate(parameter.curriculum[:-1]):
            behavior = lesson.completion_criteria.behavior
            if behavior not in options.behaviors:
                _fail(source, f"environment_parameters.{name}.curriculum[{i}]."
                      f"completion_criteria.behavior", f"{_show(behavior)} is not a behavior "
                      f"of this config", ", ".join(options.behaviors) or "(no behaviors)")


# -------------------------------------------------------------------------- run options


@dataclass(kw_only=True)
class RunOptions(_Settings):
    """A whole training run: one YAML file plus command-line overrides."""

    default_settings: Optional[TrainerSettings] = _opt(
        "Settings every behavior starts from (deep-merged under its own).", None)
    behaviors: Dict[str, TrainerSettings] = _opt("Trainer settings per behavior name.",
                                                 factory=dict)
    env_settings: EnvironmentSettings = _opt("Environment to train in.",
                                             factory=EnvironmentSettings)
    engine_settings: EngineSettings = _opt(
        "Unity engine settings.", factory=EngineSettings,
        inert="Unity player settings (window, quality, time scale, frame rates, graphics), "
              "sent to a Unity build or the Editor; built-in, gym and pettingzoo environments "
              "have no player")
    checkpoint_settings: CheckpointSettings = _opt("Run id, results folder, resume/force.",
                                                   factory=CheckpointSettings)
    tf_settings: TFSettings = _opt("TensorFlow device placement.", factory=TFSettings)
    environment_parameters: Optional[Dict[str, EnvironmentParameterSettings]] = _opt(
        "Environment parameters: a value, a sampler or a curriculum of lessons each; the env "
        "draws a fresh value at each episode start (docs/guides/environment-parameters.md).",
        None, parse=_parse_environment_parameters)
    debug: bool = _opt("Log debug messages.", False,
                       inert="tftrainers writes no debug log")

    # Name of the file the options came from, for messages raised after loading, and the
    # notes of loading it (see the module docstring).
    _source: ClassVar[str] = "<settings>"
    _notes: ClassVar[Tuple[str, ...]] = ()

    @property
    def notes(self) -> Tuple[str, ...]:
        """One line per reason why keys of the file change nothing here (or were read
        differently), naming the keys: the CLI prints them."""
        return self._notes

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>",
                  overrides: Optional[Mapping[str, Any]] = None) -> "RunOptions":
        """Builds run options from a parsed YAML document.

        Args:
            data: The document (must be a mapping).
            source: Name used in error messages (the file path).
            overrides: Command-line overrides, see :func:`load_run_options`.

        Returns:
            The options, behaviors already merged with default_settings.

        Raises:
            ConfigError: On any problem in ``data`` or ``overrides``.
        """
        if not isinstance(data, Mapping):
            what = "empty" if data is None else f"{_kind(data)}, not a mapping"
            _fail(source, "", f"the top level is {what}",
                  "a mapping with keys " + _names(cls))
        data = dict(data)
        notes: List[_Note] = []
        if "torch_settings" in data:
            data = _torch_to_tf(data, source, notes)
        defaults, behaviors = data.get("default_settings"), data.get("behaviors")
        if isinstance(defaults, Mapping) and isinstance(behaviors, Mapping):
            data["behaviors"] = {name: _with_defaults(defaults, settings)
                                 for name, settings in behaviors.items()}
        options = _build(cls, data, "", source, notes)
        _apply_overrides(options, overrides or {})
        if _is_unity(options.env_settings.env_path):  # a player: these settings apply
            notes = [n for n in notes if not (n.path.startswith("engine_settings")
                                              or n.path == "env_settings.base_port")]
        if not options.checkpoint_settings.inference:
            for name, trainer in options.behaviors.items():
                if trainer.network_settings.deterministic:
                    notes.append(_Note(f"behaviors.{name}.network_settings.deterministic",
                                       "has no effect while training: it applies with "
                                       "--inference (and tftrainers-evaluate --deterministic)"))
        _check_criteria_behaviors(options, source)
        options._source = source
        options._notes = _note_lines(source, notes)
        return options

    def settings_for(self, behavior_name: str) -> TrainerSettings:
        """Returns the settings to train ``behavior_name`` with.

        Args:
            behavior_name: A behavior the environment exposes; Unity's self-play suffix
                (``Striker?team=0``) is ignored, as in ML-Agents.

        Returns:
            The behavior's settings, else a copy of default_settings.

        Raises:
            ConfigError: If the behavior has no settings and there is no default_settings.
        """
        for name in (behavior_name, behavior_name.split("?", 1)[0]):
            if name in self.behaviors:
                return self.behaviors[name]
        if self.default_settings is not None:
            return copy.deepcopy(self.default_settings)
        configured = ", ".join(self.behaviors) or "(none)"
        _fail(self._source, f"behaviors.{behavior_name}",
              f"the environment exposes behavior {behavior_name!r} but it has no settings "
              f"and there is no default_settings",
              f"settings for one of the configured behaviors ({configured}), "
              f"or add behaviors.{behavior_name} or default_settings")

    def to_yaml(self) -> str:
        """Returns the fully resolved options as YAML; loading it gives equal options."""
        return yaml.safe_dump(self.as_dict(), sort_keys=False, default_flow_style=False)


# Command-line override -> (section of RunOptions, field in it).
_OVERRIDES: Mapping[str, Tuple[str, str]] = MappingProxyType({
    "env_path": ("env_settings", "env_path"),
    "env_args": ("env_settings", "env_args"),
    "num_envs": ("env_settings", "num_envs"),
    "num_areas": ("env_settings", "num_areas"),
    "seed": ("env_settings", "seed"),
    "run_id": ("checkpoint_settings", "run_id"),
    "resume": ("checkpoint_settings", "resume"),
    "force": ("checkpoint_settings", "force"),
    "initialize_from": ("checkpoint_settings", "initialize_from"),
    "inference": ("checkpoint_settings", "inference"),
    "results_dir": ("checkpoint_settings", "results_dir"),
    "device": ("tf_settings", "device"),
    "workers": ("env_settings", "workers"),
    "ray_address": ("env_settings", "ray_address"),
    "timeout_wait": ("env_settings", "timeout_wait"),
    "base_port": ("env_settings", "base_port"),
    "no_graphics": ("engine_settings", "no_graphics"),
    "width": ("engine_settings", "width"),
    "height": ("engine_settings", "height"),
    "quality_level": ("engine_settings", "quality_level"),
    "time_scale": ("engine_settings", "time_scale"),
    "target_frame_rate": ("engine_settings", "target_frame_rate"),
    "capture_frame_rate": ("engine_settings", "capture_frame_rate"),
})


def load_run_options(path: str, overrides: Optional[Mapping[str, Any]] = None) -> RunOptions:
    """Loads an ML-Agents-style YAML config file.

    Args:
        path: The YAML file.
        overrides: Command-line values applied on top of the file: env_path, env_args
            (dict), num_envs, seed, run_id, resume, force, initialize_from, inference,
            results_dir, device, workers, ray_address, timeout_wait, base_port,
            no_graphics and the engine settings (width, height, quality_level, time_scale,
            target_frame_rate, capture_frame_rate). A None value means "not given" and is
            skipped.

    Returns:
        The validated options.

    Raises:
        ConfigError: With a one-line message for a missing or unreadable file, invalid
            YAML, or any unknown key, wrong type or out-of-range value.
    """
    return RunOptions.from_dict(read_config_file(path), source=str(path), overrides=overrides)


def read_config_file(path: str) -> Any:
    """The parsed YAML document of a config file (not validated yet).

    Raises:
        ConfigError: a missing or unreadable file, or invalid YAML (one line).
    """
    source = str(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a directory, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not a text file; allowed: a UTF-8 YAML file") from None
    except OSError as err:
        raise ConfigError(f"{source}: cannot be read ({err.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise ConfigError(f"{source}: not valid YAML ({problem}{where})") from None
    return data


def _torch_to_tf(data: Dict[str, Any], source: str,
                 notes: List[_Note]) -> Dict[str, Any]:
    """Reads ML-Agents' ``torch_settings.device`` as ``tf_settings.device`` (one note)."""
    torch = _build(TorchSettings, data.pop("torch_settings"), "torch_settings", source)
    if torch.device is None:
        return data
    kind = torch.device.split(":", 1)[0]
    if kind not in TorchSettings.DEVICES:
        _fail(source, "torch_settings.device", f"{_show(torch.device)} is not a known value",
              "cpu, cuda, cuda:N, mps or null")
    device = TorchSettings.DEVICES[kind]
    tf_settings = data.get("tf_settings")
    given = tf_settings.get("device") if isinstance(tf_settings, Mapping) else None
    if given is not None and given != device:
        notes.append(_Note("torch_settings.device", f"({_show(torch.device)}) has no effect "
                           f"here: tf_settings.device ({_show(given)}) is given too and wins"))
        return data
    notes.append(_Note("torch_settings.device", f"{_show(torch.device)} is read as "
                       f"tf_settings.device {_show(device)} (tftrainers runs on TensorFlow)"))
    return _set_if_absent(data, ["tf_settings", "device"], device)


def _note_lines(source: str, notes: List[_Note]) -> Tuple[str, ...]:
    """One line per distinct remark, naming every key it concerns."""
    grouped: Dict[Tuple[str, bool], List[str]] = {}
    for note in notes:
        grouped.setdefault((note.text, note.inert), []).append(note.path)
    lines = []
    for (text, inert), paths in grouped.items():
        if inert:
            one = len(paths) == 1
            text = (f"{'is' if one else 'are'} accepted but {'has' if one else 'have'} no "
                    f"effect here: {text}")
        lines.append(f"{source}: {', '.join(paths)} {text}")
    return tuple(lines)


# ------------------------------------------------------------------------- the converter


def _build(cls: type, data: Any, path: str, source: str,
           notes: Optional[List[_Note]] = None) -> Any:
    """Converts a mapping into the settings dataclass ``cls``, checking everything.

    ``notes`` collects ``(key path, text)`` for keys read with a remark (None: no remarks).
    """
    if data is None:
        data = {}  # an empty YAML section ("env_settings:") means all defaults
    if not isinstance(data, Mapping):
        _fail(source, path, _wrong(data), "a mapping with keys " + _names(cls))
    data = dict(data)
    if notes is None:
        notes = []  # collected and forgotten
    for key, instead in cls._removed.items():
        if key in data:
            _fail(source, _join(path, key), "is not supported", instead)
    for key, why in cls._ignored.items():
        if data.pop(key, None) is not None:
            notes.append(_Note(_join(path, key), f"is ignored ({why})"))
    names = [f.name for f in dataclasses.fields(cls)]
    for old, new in cls._aliases.items():
        if old in data:
            notes.append(_Note(_join(path, old), f"is deprecated; read as {_join(path, new)}"))
            data = _set_if_absent(data, new.split("."), data[old])
            if old not in names:
                del data[old]
    for key in data:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            _fail(source, _join(path, str(key)), f"unknown key for {cls.__name__}{hint}",
                  ", ".join(names))
    hints = get_type_hints(cls)
    kwargs: Dict[str, Any] = {}
    # Declaration order, not file order: a field that selects another's type
    # (trainer_type -> hyperparameters) is always converted first.
    for f in dataclasses.fields(cls):
        fpath = _join(path, f.name)
        if f.name in data:
            selector = None
            if "select_by" in f.metadata:
                name = f.metadata["select_by"]
                selector = kwargs.get(name, _default_of(cls, name))
            inner_notes = notes
            if "inert" in f.metadata and data[f.name] not in (None, False, {}, []):
                notes.append(_Note(fpath, f.metadata["inert"], inert=True))
                inner_notes = None  # the whole key is noted; nothing inside it again
            kwargs[f.name] = _convert(hints[f.name], data[f.name], fpath, source, f.metadata,
                                      selector, inner_notes)
        elif f.default is MISSING and f.default_factory is MISSING:
            _fail(source, fpath, "required key is missing", f.metadata["help"])
    obj = cls(**kwargs)
    _check(obj, path, source)
    return obj


def _convert(tp: Any, value: Any, path: str, source: str, meta: Mapping[str, Any],
             selector: Any = None, notes: Optional[List[_Note]] = None) -> Any:
    """Converts one raw value to the field type ``tp``; see :func:`_opt` for ``meta``."""
    if "parse" in meta:
        value = meta["parse"](value, path, source)
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        # A Python object (network_settings.encoder from code) is kept, not copied.
        result = value if callable(value) or hasattr(value, "get_config") \
            else copy.deepcopy(value)
    elif origin is Union:
        if value is None and type(None) in args:
            return None
        if "select_by" in meta:
            return _build(meta["types"][selector], value, path, source, notes)
        inner = [a for a in args if a is not type(None)]
        # "parse" already ran; only Optional[X] reaches here (select_by handles the rest).
        result = _convert(inner[0], value, path, source,
                          {k: v for k, v in meta.items() if k != "parse"}, notes=notes)
    elif origin is list:
        if not isinstance(value, (list, tuple)):
            _fail(source, path, _wrong(value), "a list")
        return [_convert(args[0], item, f"{path}[{i}]", source, _EMPTY, notes=notes)
                for i, item in enumerate(value)]
    elif origin is dict:
        if value is None:
            value = {}  # an empty YAML section ("behaviors:") means none
        if not isinstance(value, Mapping):
            _fail(source, path, _wrong(value), "a mapping")
        key_types = meta.get("key_types")
        result = {}
        for key, item in value.items():
            kpath = _join(path, str(key))
            if not isinstance(key, str):
                _fail(source, kpath, f"key {_show(key)} is {_kind(key)}", "a string key")
            if key_types is None:
                result[key] = _convert(args[1], item, kpath, source, _EMPTY, notes=notes)
            elif key in key_types:
                result[key] = _build(key_types[key], item, kpath, source, notes)
            else:
                _fail(source, kpath, "unknown key", ", ".join(key_types))
        return result
    elif dataclasses.is_dataclass(tp):
        return _build(tp, value, path, source, notes)
    else:
        result = _convert_scalar(tp, value, path, source)
    choices = meta.get("choices")
    if choices is not None and result not in choices:
        _fail(source, path, f"{_show(result)} is not a known value", ", ".join(choices))
    return result


# PyYAML implements YAML 1.1, where "3e-4" (no dot) is a string, not a float; such
# strings are read as the number the user meant.
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _convert_scalar(tp: type, value: Any, path: str, source: str) -> Any:
    """Converts a YAML scalar to bool, int, float or str, or fails."""
    allowed = {bool: "true or false", int: "an integer", float: "a number",
               str: "a string"}[tp]
    if tp is bool or tp is str:
        if isinstance(value, tp):
            return value
    elif isinstance(value, bool):
        pass  # bool is an int subclass, but true is never a number in a config
    elif isinstance(value, int):
        return value if tp is int else float(value)
    else:
        number = value
        if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
            number = float(value)
        if isinstance(number, float):
            if not math.isfinite(number):
                _fail(source, path, f"{_show(value)} is not a finite number", allowed)
            if tp is float:
                return number
            # ML-Agents reads legacy "max_steps: 5.0e5"; whole floats are fine for ints.
            if number.is_integer():
                return int(number)
            _fail(source, path, f"{_show(value)} is not a whole number", allowed)
    _fail(source, path, _wrong(value), allowed)


def _check(obj: _Settings, path: str, source: str) -> None:
    """Checks the bounds in field metadata and the class's relations on a built object."""
    for f in dataclasses.fields(obj):
        value, meta = getattr(obj, f.name), f.metadata
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        lower = next(((op, meta[k]) for k, op in (("ge", "<="), ("gt", "<")) if k in meta), None)
        upper = next(((op, meta[k]) for k, op in (("le", "<="), ("lt", "<")) if k in meta), None)
        # Written as "not (ok)" so that NaN fails too.
        ok = ((lower is None or _compare(lower[1], lower[0], value))
              and (upper is None or _compare(value, upper[0], upper[1]))
              and ("multiple_of" not in meta or value % meta["multiple_of"] == 0))
        if not ok:
            if lower and upper:
                rule = f"{_show(lower[1])} {lower[0]} {f.name} {upper[0]} {_show(upper[1])}"
            elif lower:
                rule = f"{f.name} {'>=' if lower[0] == '<=' else '>'} {_show(lower[1])}"
            elif upper:
                rule = f"{f.name} {upper[0]} {_show(upper[1])}"
            else:
                rule = f.name
            if "multiple_of" in meta:
                rule += f" and divisible by {meta['multiple_of']}"
            _fail(source, _join(path, f.name), f"{_show(value)} is out of range", rule)
    for left, op, right in obj._relations:
        a, b = _lookup(obj, left), _lookup(obj, right)
        if a is None or b is None:
            continue
        if op == "excludes":
            if a and b:
                _fail(source, _join(path, left), f"{_show(a)} together with {right}: {_show(b)}",
                      f"at most one of {left}, {right}")
        elif not _compare(a, op, b):
            _fail(source, _join(path, left), f"{_show(a)} is out of range",
                  f"{left} {op} {right} ({_show(b)})")
    validate = getattr(obj, "_validate", None)
    if validate is not None:
        validate(lambda key, problem, allowed=None: _fail(source, _join(path, key), problem,
                                                           allowed))


def _apply_overrides(options: RunOptions, overrides: Mapping[str, Any]) -> None:
    """Sets command-line values on ``options``, validated like file values."""
    source = "command line"
    for key, value in overrides.items():
        if key not in _OVERRIDES:
            _fail(source, str(key), "unknown override", ", ".join(_OVERRIDES))
        if value is None:
            continue
        section_name, name = _OVERRIDES[key]
        section = getattr(options, section_name)
        f = next(f for f in dataclasses.fields(section) if f.name == name)
        tp = get_type_hints(type(section))[name]
        setattr(section, name, _convert(tp, value, f"{section_name}.{name}", source, f.metadata))
    for section_name in dict.fromkeys(s for s, _ in _OVERRIDES.values()):
        _check(getattr(options, section_name), section_name, source)


# ----------------------------------------------------------------------------- helpers


def _with_defaults(defaults: Mapping[str, Any], settings: Any) -> Any:
    """Deep-merges a behavior's raw settings over default_settings' raw settings."""
    if settings is None:
        settings = {}
    if not isinstance(settings, Mapping):
        return settings  # the converter reports the wrong type
    # Hyperparameters depend on trainer_type: a behavior inherits only the default keys
    # its own trainer has (a ppo-only beta must not break a bc behavior).
    trainer_type = settings.get("trainer_type", defaults.get("trainer_type", "ppo"))
    hyper_cls = TRAINER_TYPES.get(trainer_type) if isinstance(trainer_type, str) else None
    inherited = defaults.get("hyperparameters")
    if hyper_cls is not None and isinstance(inherited, Mapping):
        known = {f.name for f in dataclasses.fields(hyper_cls)}
        defaults = {**defaults,
                    "hyperparameters": {k: v for k, v in inherited.items() if k in known}}
    return _deep_merge(defaults, settings)


def _deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> Dict[str, Any]:
    """Returns ``base`` updated by ``update`` at every nesting level (inputs untouched)."""
    merged = copy.deepcopy(dict(base))
    for key, value in update.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _set_if_absent(data: Dict[str, Any], keys: list, value: Any) -> Dict[str, Any]:
    """Returns a copy of ``data`` with ``value`` at the nested ``keys`` unless one is there."""
    head, rest = keys[0], keys[1:]
    if not rest:
        return data if head in data else {**data, head: value}
    inner = data.get(head)
    if inner is None:
        inner = {}
    if not isinstance(inner, Mapping):
        return data  # the converter reports the wrong type
    return {**data, head: _set_if_absent(dict(inner), rest, value)}


def _default_of(cls: type, name: str) -> Any:
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _lookup(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType({
    "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b, ">": lambda a, b: a > b})


def _compare(a: Any, op: str, b: Any) -> bool:
    return _COMPARE[op](a, b)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        # A key that changes nothing here is written only when it was set to something.
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if not ("inert" in f.metadata
                        and getattr(value, f.name) == _default_of(type(value), f.name))}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if callable(value) or hasattr(value, "get_config"):  # an encoder given from Python
        return encoder_name(value)
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _names(cls: type) -> str:
    return ", ".join(f.name for f in dataclasses.fields(cls))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _wrong(value: Any) -> str:
    """Describes a value of the wrong type: "'fast' is a string"."""
    return "got null" if value is None else f"{_show(value)} is {_kind(value)}"


def _show(value: Any) -> str:
    """Shows a value the way YAML users write it, on one short line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(source: str, path: str, problem: str, allowed: Optional[str] = None) -> NoReturn:
    where = f"{source}: {path}: " if path else f"{source}: "
    raise ConfigError(where + problem + (f"; allowed: {allowed}" if allowed else ""))


__all__ = [
    "BCSettings", "BehavioralCloningSettings", "CheckpointSettings", "CompletionCriteriaSettings",
    "ConfigError", "CuriositySettings", "EngineSettings", "EnvironmentParameterSettings",
    "EnvironmentSettings", "ExtrinsicSettings", "GAILSettings", "LessonSettings",
    "MemorySettings", "NetworkSettings", "NoveltyNetworkSettings", "POCASettings",
    "PPOSettings", "REWARD_SIGNAL_TYPES", "RNDSettings", "RewardSignalSettings", "RunOptions",
    "SAMPLER_TYPES", "SCHEDULES", "SamplerSettings", "SelfPlaySettings", "TFSettings",
    "TRAINER_TYPES", "TorchSettings", "TrainerSettings", "load_run_options",
]
