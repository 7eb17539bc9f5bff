"""``UnityEnv``: a Unity build or the Unity Editor as a ``BaseEnv``, over ML-Agents' protocol.

    env = UnityEnv("Builds/Game", worker_id=0, no_graphics=True)   # launches, handshakes
    env.behavior_specs          # known once the player sent its first step (done here)
    env.reset(); env.step(); env.get_steps(name); env.set_actions(name, actions)
    env.close()                 # the player quits; no process left

``file_name=None`` is the Editor: nothing is launched, the server listens on 5004 and one
line asks the user to press Play. Ports: ``base_port + worker_id`` (5005 for builds).

The conversation (docs/guides/unity-builds.md): the player's first call carries its
communication API version and capabilities, and our answer our own; its second call is
held until the first reset, answered with RESET and the side channels' first messages
(engine configuration, environment parameters). From then on every call carries a step's
agent infos per behavior, and its answer carries the actions (one per agent that asked,
in the player's order), the next command and side-channel messages. Behavior specs come
from the brain parameters of the first output holding an agent of that behavior.

Unity's steps differ from our built-ins' in one way: an agent whose episode ended and
restarted in one step has its terminal and its decision in the same message, with the
same id. The acting side handles that (docs/dev/architecture.md#step-conventions).
"""
from __future__ import annotations

import os
from typing import Dict, Mapping, Optional, Sequence, Tuple

from tftrainers.envs.base import (ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                                  TerminalSteps, validate_actions)
from tftrainers.envs.checks import EnvDataError
from tftrainers.envs.parameters import (ConstantSampler, GaussianSampler,
                                        MultiRangeUniformSampler, UniformSampler, as_sampler)
from tftrainers.envs.unity import convert, launcher
from tftrainers.envs.unity.communicator import (STATUS_OK, Communicator, UnityEnvironmentError,
                                                UnityExited, UnityTimeout)
from tftrainers.envs.unity.communicator_objects.capabilities_pb2 import UnityRLCapabilitiesProto
from tftrainers.envs.unity.communicator_objects.command_pb2 import RESET, STEP
from tftrainers.envs.unity.communicator_objects.unity_message_pb2 import UnityMessageProto
from tftrainers.envs.unity.communicator_objects.unity_rl_input_pb2 import UnityRLInputProto
from tftrainers.envs.unity.side_channels import (EngineConfigurationChannel,
                                                 EnvironmentParametersChannel,
                                                 EnvironmentStats, SideChannel,
                                                 SideChannelError, SideChannelManager,
                                                 StatsSideChannel)

COMMUNICATION_VERSION = "1.5.0"
#: What the trainer announces as its package version (ML-Agents' Python package it stands for).
PACKAGE_VERSION = "1.1.0"
BUILD_PORT, EDITOR_PORT = 5005, 5004


def all_capabilities() -> UnityRLCapabilitiesProto:
    return UnityRLCapabilitiesProto(
        baseRLCapabilities=True, concatenatedPngObservations=True, compressedChannelMapping=True,
        hybridActions=True, trainingAnalytics=True, variableLengthObservation=True,
        multiAgentGroups=True)


def initialization_input(seed: int, num_areas: int) -> UnityMessageProto:
    """The trainer's answer to the player's first call: its version and capabilities."""
    reply = UnityMessageProto()
    reply.header.status = STATUS_OK
    ri = reply.unity_input.rl_initialization_input
    ri.seed = int(seed)
    ri.communication_version = COMMUNICATION_VERSION
    ri.package_version = PACKAGE_VERSION
    ri.capabilities.CopyFrom(all_capabilities())
    ri.num_areas = int(num_areas or 1)
    return reply


def version_check(unity_version: str, ours: str = COMMUNICATION_VERSION) -> Optional[str]:
    """None when compatible, "warn" when the player's minor version is newer, "error" when
    the major versions (for 0.x: the minor versions too) differ or it is not a version."""
    try:
        theirs = [int(p) for p in unity_version.split(".")[:2]]
        mine = [int(p) for p in ours.split(".")[:2]]
    except ValueError:
        return "error"
    if len(theirs) < 2 or theirs[0] != mine[0] or (mine[0] == 0 and theirs[1] != mine[1]):
        return "error"
    return "warn" if theirs[1] > mine[1] else None


class UnityEnv(BaseEnv):
    """A Unity player (build or Editor) behind the env API (see the module docstring).

    Args:
        file_name: the build (resolved as ML-Agents does, see ``launcher.resolve_build``);
            None: the Editor.
        worker_id: this instance's number: port ``base_port + worker_id``, log
            ``Player-<worker_id>.log``.
        base_port: None: 5005 for a build, 5004 for the Editor.
        seed: sent to the player in the handshake.
        no_graphics: ``-nographics -batchmode``.
        timeout_wait: seconds to wait for each message of the player.
        additional_args: more arguments for the player (``env_settings.env_args``).
        log_folder: where the player writes ``Player-<worker_id>.log``.
        side_channels: the user's own channels (``SideChannel``); engine configuration,
            environment parameters and stats channels are added when not given.
        num_areas: sent to the player in the handshake (Unity's ``--num-areas``).
        engine_settings: ``{width, height, quality_level, time_scale, target_frame_rate,
            capture_frame_rate}`` sent with the first reset (missing keys: not sent).
        log: where the Editor's "press Play" line and warnings go.
    """

    def __init__(self, file_name: Optional[str] = None, worker_id: int = 0,
                 base_port: Optional[int] = None, seed: int = 0, no_graphics: bool = False,
                 timeout_wait: float = 60, additional_args: Sequence[str] = (),
                 log_folder: Optional[str] = None, side_channels: Sequence[SideChannel] = (),
                 num_areas: int = 1, engine_settings: Optional[Mapping[str, float]] = None,
                 log=print):
        self.file_name = file_name
        self.worker_id = int(worker_id)
        self.log = log
        self.process = None
        self.log_file = None
        self._specs: Dict[str, BehaviorSpec] = {}
        self._brains: Dict[str, object] = {}
        self._steps: Dict[str, Tuple[DecisionSteps, TerminalSteps]] = {}
        self._actions: Dict[str, ActionTuple] = {}
        self._fresh = False  # the steps are those of a reset no step has followed yet
        self._closed = False
        self._hung = False
        self.side_channels = SideChannelManager(side_channels, warn=log)
        for cls in (EngineConfigurationChannel, EnvironmentParametersChannel, StatsSideChannel):
            if cls.CHANNEL_ID not in self.side_channels.channels:
                self.side_channels.register(cls())
        channels = self.side_channels.channels
        self.engine_configuration = channels[EngineConfigurationChannel.CHANNEL_ID]
        self.parameters_channel = channels[EnvironmentParametersChannel.CHANNEL_ID]
        self.stats_channel = channels[StatsSideChannel.CHANNEL_ID]
        if engine_settings:
            self.engine_configuration.set_configuration_parameters(**dict(engine_settings))

        if base_port is None:
            base_port = BUILD_PORT if file_name else EDITOR_PORT
        self.port = int(base_port) + self.worker_id
        exe = launcher.resolve_build(file_name) if file_name else None
        if exe is not None and log_folder:
            self.log_file = os.path.abspath(os.path.join(log_folder,
                                                         f"Player-{self.worker_id}.log"))
        if exe is None:
            self.where = f"Unity Editor (port {self.port})"
        else:
            self.where = (f"Unity build {file_name} (worker {self.worker_id}, player log "
                          f"{self.log_file or 'not written: no log folder'})")
        self.comm = Communicator(self.port, timeout_wait, self.where)
        try:
            self.comm.start()
            if exe is None:
                log(f"[INFO] Listening on port {self.port}: press Play in the Unity Editor "
                    f"to start training.")
            else:
                if self.log_file:
                    os.makedirs(os.path.dirname(self.log_file), exist_ok=True)
                try:
                    self.process = launcher.launch(launcher.player_args(
                        exe, self.port, no_graphics, self.log_file, additional_args or ()))
                except OSError as error:
                    raise UnityEnvironmentError(f"{self.where}: cannot start {exe} "
                                                f"({error.strerror or error})") from None
            self._handshake(seed, num_areas)
            self._reset_now()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ the conversation

    def _poll(self) -> Optional[int]:
        return self.process.poll() if self.process is not None else None

    def _receive(self, waiting_for: str) -> UnityMessageProto:
        try:
            return self.comm.receive(self._poll, waiting_for)
        except UnityTimeout:
            self._hung = True  # close() kills it at once: it would not answer a 400 either
            raise

    def _handshake(self, seed: int, num_areas: int) -> None:
        first = self._receive("the player's first message (the handshake; a build that "
                              "never connects was not built with ML-Agents, or waits for "
                              "another port)")
        init = first.unity_output.rl_initialization_output
        if not first.unity_output.HasField("rl_initialization_output"):
            raise UnityEnvironmentError(f"{self.where}: the player's first message has no "
                                        f"initialization output; it does not speak ML-Agents' "
                                        f"protocol")
        verdict = version_check(init.communication_version)
        self.comm.answer(initialization_input(seed, num_areas))
        self.unity_version = init.communication_version
        self.unity_package_version = init.package_version
        self.unity_capabilities = init.capabilities
        if verdict == "error":
            try:
                self._receive("the player's second message")
            except UnityEnvironmentError:
                pass
            raise UnityEnvironmentError(
                f"{self.where}: the communication API version is not compatible: Python API "
                f"{COMMUNICATION_VERSION}, Unity API {init.communication_version or '(none)'} "
                f"(the major versions must match; use an ML-Agents package of the same major "
                f"communication version)")
        if verdict == "warn":
            self.log(f"[WARNING] {self.where}: the player speaks communication API "
                     f"{init.communication_version}, newer than ours ({COMMUNICATION_VERSION}); "
                     f"what it added is not used")
        held = self._receive("the player's second message (after the handshake)")
        if held.unity_output.HasField("rl_output"):
            self._take(held)  # not what Unity sends, but nothing in it is lost

    def _exchange(self, rl_input: UnityRLInputProto, waiting_for: str) -> None:
        rl_input.side_channel = self.side_channels.generate_side_channel_messages()
        message = UnityMessageProto()
        message.header.status = STATUS_OK
        message.unity_input.rl_input.CopyFrom(rl_input)
        self.comm.answer(message)
        self._take(self._receive(waiting_for))

    def _take(self, message: UnityMessageProto) -> None:
        """Reads one step output: brain parameters, side channels, agent infos."""
        self.last_message = message  # as received (benchmarks and debugging read it)
        if message.header.status != STATUS_OK:
            raise UnityExited(f"{self.where}: the player sent status {message.header.status} "
                              f"({message.header.message or 'no message'})")
        output = message.unity_output
        for brain in output.rl_initialization_output.brain_parameters:
            self._brains[brain.brain_name] = brain
        rl = output.rl_output
        if rl.side_channel:
            try:
                self.side_channels.process_side_channel_message(rl.side_channel)
            except SideChannelError as error:
                raise EnvDataError(f"{self.where}: {error}") from None
        steps = {}
        for name, agents in rl.agentInfos.items():
            infos = agents.value
            if name not in self._specs:
                if not len(infos):
                    continue
                brain = self._brains.get(name)
                if brain is None:
                    raise EnvDataError(f"{self.where}: behavior '{name}' sent agents before "
                                       f"its brain parameters (not allowed by the protocol)")
                try:
                    self._specs[name] = convert.behavior_spec(brain, infos[0], name)
                except ValueError as error:
                    raise EnvDataError(f"{self.where}: {error}") from None
            try:
                steps[name] = convert.steps_from_infos(infos, self._specs[name], name)
            except EnvDataError as error:
                raise EnvDataError(f"{self.where}: {error}") from None
        for name, spec in self._specs.items():
            if name not in steps:
                steps[name] = (DecisionSteps.empty(spec), TerminalSteps.empty(spec))
        self._steps = steps
        self._actions = {}

    def _reset_now(self) -> None:
        rl_input = UnityRLInputProto()
        rl_input.command = RESET
        self._exchange(rl_input, "the first step after a reset")
        self._fresh = True

    # ------------------------------------------------------------------ the env API

    @property
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        return dict(self._specs)

    def reset(self) -> None:
        """Starts new episodes. Right after the start (or another reset) with nothing
        queued on a side channel, the player is already reset: nothing is sent."""
        if self._fresh and not any(c.message_queue
                                   for c in self.side_channels.channels.values()):
            return
        self._reset_now()

    def step(self) -> None:
        rl_input = UnityRLInputProto()
        rl_input.command = STEP
        for name, (decision, _) in self._steps.items():
            n = len(decision)
            if not n:
                continue
            actions = self._actions.get(name)
            if actions is None:  # as ML-Agents: agents nobody acted for get zeros
                actions = self._specs[name].action_spec.empty_action(n)
            rl_input.agent_actions[name].value.extend(convert.action_protos(actions))
        self._fresh = False
        self._exchange(rl_input, "the next step")

    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        self._known(behavior_name)
        return self._steps[behavior_name]

    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        self._known(behavior_name)
        decision, _ = self._steps[behavior_name]
        self._actions[behavior_name] = validate_actions(
            behavior_name, self._specs[behavior_name].action_spec, actions, len(decision))

    def _known(self, behavior_name: str) -> None:
        if behavior_name not in self._specs:
            raise ValueError(f"{self.where} has no behavior '{behavior_name}'; it has "
                             f"{', '.join(sorted(self._specs)) or 'none yet'}")

    # ------------------------------------------------------------------ side channels

    def set_environment_parameters(self, parameters) -> None:
        """The run's ``environment_parameters`` (numbers or ``envs.parameters`` samplers),
        sent through the environment-parameters channel with the next reset or step. Any
        name: the game reads what its scene asks ``Academy.EnvironmentParameters`` for
        (a name it never reads is ignored there, as with ML-Agents)."""
        current = dict(getattr(self, "_environment_parameters", {}))
        for key, value in parameters.items():
            sampler = as_sampler(value)
            current[key] = sampler
            if isinstance(sampler, ConstantSampler):
                self.set_sampler_parameter(key, "constant", sampler.seed, value=sampler.value)
            elif isinstance(sampler, UniformSampler):
                self.set_sampler_parameter(key, "uniform", sampler.seed,
                                           min_value=sampler.min_value,
                                           max_value=sampler.max_value)
            elif isinstance(sampler, GaussianSampler):
                self.set_sampler_parameter(key, "gaussian", sampler.seed, mean=sampler.mean,
                                           st_dev=sampler.st_dev)
            elif isinstance(sampler, MultiRangeUniformSampler):
                self.set_sampler_parameter(key, "multirangeuniform", sampler.seed,
                                           intervals=[list(i) for i in sampler.intervals])
            else:
                raise ValueError(f"environment parameter '{key}': a "
                                 f"{type(sampler).__name__} cannot be sent to a Unity player "
                                 f"(constant, uniform, gaussian and multirangeuniform can)")
        self._environment_parameters = current

    def set_float_parameter(self, key: str, value: float) -> None:
        """An environment parameter, sent with the next reset or step."""
        self.parameters_channel.set_float_parameter(key, value)

    def set_sampler_parameter(self, key: str, sampler_type: str, seed: int, **args) -> None:
        """A sampled environment parameter: ``uniform`` (min_value, max_value), ``gaussian``
        (mean, st_dev) or ``multirangeuniform`` (intervals ``[[min, max], ...]``); the
        player draws a value each time the game reads it. ``constant`` (value) is sent as a
        float, as ML-Agents sends it."""
        channel = self.parameters_channel
        if sampler_type == "constant":
            channel.set_float_parameter(key, args["value"])
        elif sampler_type == "uniform":
            channel.set_uniform_sampler_parameters(key, args["min_value"], args["max_value"],
                                                   seed)
        elif sampler_type == "gaussian":
            channel.set_gaussian_sampler_parameters(key, args["mean"], args["st_dev"], seed)
        elif sampler_type == "multirangeuniform":
            channel.set_multirangeuniform_sampler_parameters(key, args["intervals"], seed)
        else:
            raise ValueError(f"environment parameter '{key}': unknown sampler_type "
                             f"'{sampler_type}'; allowed: constant, uniform, gaussian, "
                             f"multirangeuniform")

    def pop_environment_stats(self) -> Optional[EnvironmentStats]:
        """What the game reported through the stats channel since the last call (None:
        nothing)."""
        stats = self.stats_channel.get_and_reset_stats()
        return EnvironmentStats(stats) if stats else None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.comm.close()
        finally:
            code = launcher.stop(self.process, wait_s=0.0 if self._hung else 5.0)
            self.exit_code = code


__all__ = ["BUILD_PORT", "COMMUNICATION_VERSION", "EDITOR_PORT", "PACKAGE_VERSION", "UnityEnv",
           "all_capabilities", "initialization_input", "version_check"]
