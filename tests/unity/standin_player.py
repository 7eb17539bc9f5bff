"""A stand-in for a Unity player: plays our built-in envs through ML-Agents' protocol.

Written for the tests (there is no Unity here). It is the Unity side of the conversation:
a gRPC client that calls ``Exchange`` on ``localhost:<--mlagents-port>``, handshakes,
holds its second call until the trainer's first reset, then sends each step's agent infos
per behavior (persistent agent ids, a restarted agent's terminal info before its new
decision, as Unity does: the built-ins' ``unity_steps``), brain parameters once per
behavior, float or PNG visual observations, action masks, groups, and side channels; it
quits when answered with status 400 or when the trainer's server goes away.

Started by the launcher like a build (the tests write an executable ``Game.x86_64`` that
execs this file with the launcher's arguments): ``--mlagents-port N``, ``-nographics
-batchmode``, ``-logFile PATH`` are Unity's; the rest are its own:

    standin_player.py --mlagents-port 5005 --env builtin:Basic [--env builtin:Ball3D ...]
        [--env builtin:GridWorld?obs=visual] [--env-arg KEY=VALUE] [--png] [--team 0] [--stats] [--echo-channel UUID]
        [--crash-after N] [--hang-after N] [--quit-after N] [--nan-after N]
        [--never-connect] [--version 1.5.0]
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import time
import uuid

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from tftrainers.envs import ActionTuple, ObservationKind, make  # noqa: E402
from tftrainers.envs.unity.communicator import MAX_MESSAGE_BYTES  # noqa: E402
from tftrainers.envs.unity.communicator_objects import unity_to_external_pb2_grpc  # noqa: E402
from tftrainers.envs.unity.communicator_objects.agent_info_pb2 import AgentInfoProto  # noqa
from tftrainers.envs.unity.communicator_objects.command_pb2 import QUIT, RESET  # noqa: E402
from tftrainers.envs.unity.communicator_objects.observation_pb2 import PNG  # noqa: E402
from tftrainers.envs.unity.communicator_objects.unity_message_pb2 import (  # noqa: E402
    UnityMessageProto)
from tftrainers.envs.unity.env import all_capabilities  # noqa: E402
from tftrainers.envs.unity.side_channels import (EngineConfigurationChannel,  # noqa: E402
                                                 EnvironmentParametersChannel,
                                                 IncomingMessage, OutgoingMessage,
                                                 StatsAggregationMethod, StatsSideChannel,
                                                 join_messages, split_messages)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="standin_player")
    p.add_argument("--mlagents-port", type=int, default=None)
    p.add_argument("-nographics", action="store_true")
    p.add_argument("-batchmode", action="store_true")
    p.add_argument("-logFile", "-logfile", dest="log_file", default=None)
    p.add_argument("--env", action="append", default=None,
                   help="a built-in env id, with its own args as ID?k=v&k=v; several: their "
                        "behaviors side by side")
    p.add_argument("--env-arg", action="append", default=[], help="KEY=VALUE for every env")
    p.add_argument("--num-areas", type=int, default=None)
    p.add_argument("--png", action="store_true", help="visual observations as PNG bytes")
    p.add_argument("--team", type=int, default=None, help="behavior names get ?team=N")
    p.add_argument("--stats", action="store_true", help="report episode stats")
    p.add_argument("--echo-channel", default=None, help="UUID whose messages are echoed")
    p.add_argument("--crash-after", type=int, default=None)
    p.add_argument("--crash-once", default=None, metavar="FILE",
                   help="with --crash-after: crash only while FILE does not exist (made then)")
    p.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                   help="send behavior OLD as NEW (e.g. Ball3D=3DBall)")
    p.add_argument("--hang-after", type=int, default=None)
    p.add_argument("--quit-after", type=int, default=None)
    p.add_argument("--nan-after", type=int, default=None)
    p.add_argument("--never-connect", action="store_true")
    p.add_argument("--replay", action="store_true",
                   help="benchmarks: after the first step, answer every step with that same "
                        "output (no env step, no encoding): what remains is the protocol")
    p.add_argument("--version", default="1.5.0", help="communication API version announced")
    args, unknown = p.parse_known_args(argv)
    args.unknown = unknown
    return args


class Player:
    def __init__(self, args):
        self.args = args
        self.log_file = open(args.log_file, "a") if args.log_file else None
        self.steps = 0
        self.sent_brains = set()
        self.envs = []
        self.outgoing = []  # (channel id, payload) for the next output
        self.engine = {}
        self.parameters = {}
        self.echo = uuid.UUID(args.echo_channel) if args.echo_channel else None

    def log(self, line: str) -> None:
        if self.log_file:
            self.log_file.write(line + "\n")
            self.log_file.flush()

    # -------------------------------------------------------------- envs and their steps

    def make_envs(self, seed: int, num_areas: int) -> None:
        env_args = {}
        for item in self.args.env_arg:
            key, _, value = item.partition("=")
            env_args[key] = value
        for k, given in enumerate(self.args.env or ["builtin:Basic"]):
            env_id, _, own = given.partition("?")  # builtin:GridWorld?obs=visual
            args = dict(env_args)
            args.update(item.split("=", 1) for item in own.split("&") if item)
            args.setdefault("unity_steps", True)
            areas = self.args.num_areas or (num_areas if num_areas > 1 else None)
            env = make(env_id, seed=seed + k, num_areas=areas, **args)
            self.envs.append(env)
        self.names = {}
        renamed = dict(item.split("=", 1) for item in self.args.rename)
        for env in self.envs:
            for name in env.behavior_specs:
                shown = renamed.get(name, name)
                full = shown if self.args.team is None else f"{shown}?team={self.args.team}"
                self.names[full] = (env, name)

    def observation_proto(self, obs_proto, value, spec) -> None:
        obs_proto.name = spec.name
        if spec.kind is ObservationKind.VISUAL:
            h, w, c = spec.shape
            obs_proto.shape.extend([c, h, w])
            obs_proto.dimension_properties.extend([1, 2, 2])
            if self.args.png:
                obs_proto.compression_type = PNG
                obs_proto.compressed_data, mapping = png_bytes(value)
                obs_proto.compressed_channel_mapping.extend(mapping)
            else:
                obs_proto.float_data.data.extend(value.transpose(2, 0, 1).ravel().tolist())
        else:
            obs_proto.shape.extend(spec.shape)
            obs_proto.dimension_properties.extend(
                [4, 1] if spec.kind is ObservationKind.VARIABLE_LENGTH else [1])
            obs_proto.float_data.data.extend(value.ravel().tolist())

    def infos(self, steps, spec, done: bool):
        out = []
        n = len(steps)
        masks = None
        if not done and spec.action_spec.discrete_branches and steps.action_mask:
            masks = np.concatenate([np.asarray(m, bool) for m in steps.action_mask], axis=1)
        nan = (self.args.nan_after is not None and self.steps >= self.args.nan_after)
        for i in range(n):
            info = AgentInfoProto(reward=float(steps.reward[i]), done=done,
                                  id=int(steps.agent_id[i]),
                                  group_id=int(steps.group_id[i]),
                                  group_reward=float(steps.group_reward[i]))
            if done:
                info.max_step_reached = bool(steps.interrupted[i])
            if masks is not None and masks[i].any():
                info.action_mask.extend(masks[i].tolist())
            for o, obs_spec in enumerate(spec.observation_specs):
                value = steps.obs[o][i]
                if nan and i == 0 and o == 0:
                    value = value.copy()
                    value.ravel()[0] = np.nan
                self.observation_proto(info.observations.add(), value, obs_spec)
            out.append(info)
        return out

    def output(self) -> UnityMessageProto:
        message = UnityMessageProto()
        message.header.status = 200
        rl = message.unity_output.rl_output
        for full, (env, name) in self.names.items():
            spec = env.behavior_specs[name]
            decision, terminal = env.get_steps(name)
            entry = rl.agentInfos[full]
            entry.value.extend(self.infos(terminal, spec, True))
            entry.value.extend(self.infos(decision, spec, False))
            if len(entry.value) and full not in self.sent_brains:
                self.sent_brains.add(full)
                brain = message.unity_output.rl_initialization_output.brain_parameters.add()
                brain.brain_name = full
                brain.is_training = True
                brain.action_spec.num_continuous_actions = spec.action_spec.continuous_size
                brain.action_spec.num_discrete_actions = spec.action_spec.discrete_size
                brain.action_spec.discrete_branch_sizes.extend(spec.action_spec.discrete_branches)
            if self.args.stats and len(terminal):
                self.report_stats(full, terminal)
        rl.side_channel = join_messages(self.outgoing)
        self.outgoing = []
        return message

    def report_stats(self, full: str, terminal) -> None:
        base = full.split("?")[0]
        for key, value, kind in ((f"Standin/{base} Final Reward", float(terminal.reward.mean()),
                                  StatsAggregationMethod.AVERAGE),
                                 (f"Standin/{base} Terminals", float(len(terminal)),
                                  StatsAggregationMethod.SUM),
                                 (f"Standin/{base} Last Step", float(self.steps),
                                  StatsAggregationMethod.MOST_RECENT),
                                 (f"Standin/{base} Reward Histogram",
                                  float(terminal.reward[0]), StatsAggregationMethod.HISTOGRAM)):
            msg = OutgoingMessage()
            msg.write_string(key)
            msg.write_float32(value)
            msg.write_int32(kind)
            self.outgoing.append((StatsSideChannel.CHANNEL_ID, bytes(msg.buffer)))

    # -------------------------------------------------------------- what the trainer sends

    def apply_side_channel(self, data: bytes) -> None:
        for channel, payload in split_messages(data):
            msg = IncomingMessage(payload)
            if channel == EngineConfigurationChannel.CHANNEL_ID:
                kind = msg.read_int32()
                if kind == 0:
                    self.engine["resolution"] = (msg.read_int32(), msg.read_int32())
                elif kind == 2:
                    self.engine["time_scale"] = msg.read_float32()
                else:
                    self.engine[{1: "quality_level", 3: "target_frame_rate",
                                 4: "capture_frame_rate"}.get(kind, str(kind))] = msg.read_int32()
                self.log(f"engine configuration {self.engine}")
            elif channel == EnvironmentParametersChannel.CHANNEL_ID:
                key = msg.read_string()
                kind = msg.read_int32()
                if kind == 0:
                    self.parameters[key] = msg.read_float32()
                else:
                    seed, sampler = msg.read_int32(), msg.read_int32()
                    rest = (msg.read_float32_list() if sampler == 2
                            else [msg.read_float32(), msg.read_float32()])
                    self.parameters[key] = ("sampler", seed, sampler, rest)
                self.log(f"environment parameter {key} = {self.parameters[key]}")
            elif self.echo is not None and channel == self.echo:
                self.outgoing.append((channel, b"echo:" + payload))
            else:
                self.log(f"unknown side channel {channel}: message dropped")

    def apply_actions(self, rl_input) -> None:
        for full, (env, name) in self.names.items():
            spec = env.behavior_specs[name]
            decision, _ = env.get_steps(name)
            n = len(decision)
            if not n:
                continue
            given = rl_input.agent_actions[full].value if full in rl_input.agent_actions else []
            if not len(given):
                env.set_actions(name, spec.action_spec.empty_action(n))
                continue
            if len(given) < n:
                self.log(f"ArgumentOutOfRangeException: {len(given)} actions for {n} agents "
                         f"of {full}")
                sys.exit(1)
            c, d = spec.action_spec.continuous_size, spec.action_spec.discrete_size
            continuous = np.array([list(a.continuous_actions)[:c] for a in given[:n]],
                                  np.float32).reshape(n, c)
            discrete = np.array([list(a.discrete_actions)[:d] for a in given[:n]],
                                np.int32).reshape(n, d)
            env.set_actions(name, ActionTuple(continuous, discrete))

    # -------------------------------------------------------------- the conversation

    def run(self) -> int:
        args = self.args
        self.log(f"stand-in player: pid {os.getpid()}, args {sys.argv[1:]}")
        if args.mlagents_port is None:
            self.log("no --mlagents-port: no trainer, nothing to do")
            return 0
        if args.never_connect:
            time.sleep(3600)
        channel = grpc.insecure_channel(
            f"localhost:{args.mlagents_port}",
            options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                     ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)])
        stub = unity_to_external_pb2_grpc.UnityToExternalProtoStub(channel)

        def exchange(message):
            try:
                return stub.Exchange(message, wait_for_ready=True, timeout=None)
            except grpc.RpcError as error:  # the trainer is gone: Unity quits
                self.log(f"gRPC error, quitting: {error.code()}")
                raise SystemExit(0)

        first = UnityMessageProto()
        first.header.status = 200
        init = first.unity_output.rl_initialization_output
        init.name = "AcademySingleton"
        init.communication_version = args.version
        init.package_version = "3.0.0"
        init.capabilities.CopyFrom(all_capabilities())
        answer = exchange(first)
        if answer.header.status != 200:
            return 0
        ri = answer.unity_input.rl_initialization_input
        self.log(f"handshake: trainer API {ri.communication_version}, seed {ri.seed}")
        self.make_envs(ri.seed, ri.num_areas)
        held = UnityMessageProto()
        held.header.status = 200
        answer = exchange(held)
        while True:
            if answer.header.status != 200:
                self.log(f"status {answer.header.status}: quitting")
                return 0
            rl_input = answer.unity_input.rl_input
            self.apply_side_channel(rl_input.side_channel)
            if rl_input.command == QUIT:
                return 0
            if args.replay and self.steps and rl_input.command != RESET:
                self.steps += 1
                answer = exchange(self.replayed)
                continue
            if rl_input.command == RESET:
                for env in self.envs:
                    env.reset()
            else:
                self.apply_actions(rl_input)
                self.steps += 1
                if args.crash_after is not None and self.steps >= args.crash_after and not (
                        args.crash_once and os.path.exists(args.crash_once)):
                    if args.crash_once:
                        open(args.crash_once, "w").close()
                    self.log("crashing on request")
                    os._exit(3)
                if args.hang_after is not None and self.steps >= args.hang_after:
                    self.log("hanging on request")
                    time.sleep(3600)
                if args.quit_after is not None and self.steps >= args.quit_after:
                    bye = UnityMessageProto()
                    bye.header.status = 400
                    exchange(bye)
                    return 0
                for env in self.envs:
                    env.step()
            self.replayed = self.output()
            answer = exchange(self.replayed)


def png_bytes(hwc: np.ndarray):
    """An HWC image in [0, 1] -> (concatenated RGB PNGs, compressed channel mapping)."""
    from PIL import Image
    pixels = np.clip(np.rint(hwc * 255.0), 0, 255).astype(np.uint8)
    h, w, c = pixels.shape
    if c == 1:  # as Unity's grayscale camera: RGB of one channel, mapped to it three times
        groups, mapping = [np.repeat(pixels, 3, axis=2)], [0, 0, 0]
    else:
        groups, mapping = [], []
        for start in range(0, c, 3):
            part = pixels[:, :, start:start + 3]
            pad = 3 - part.shape[2]
            if pad:
                part = np.concatenate([part, np.zeros((h, w, pad), np.uint8)], axis=2)
            groups.append(part)
            mapping += [start + k if start + k < c else -1 for k in range(3)]
    out = io.BytesIO()
    for group in groups:
        Image.fromarray(group, "RGB").save(out, format="PNG", compress_level=1)
    return out.getvalue(), (mapping if c != 3 else [])


def main(argv=None) -> int:
    player = Player(parse_args(sys.argv[1:] if argv is None else argv))
    try:
        return player.run()
    except SystemExit:
        raise
    except BaseException:  # what a Unity player would write to its log before it dies
        import traceback
        player.log(traceback.format_exc())
        return 1


if __name__ == "__main__":
    sys.exit(main())
