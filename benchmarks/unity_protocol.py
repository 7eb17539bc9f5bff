"""What ML-Agents' protocol costs: the same env in process and through the stand-in player.

    PYTHONPATH=. python benchmarks/unity_protocol.py [--seconds 5] [--players 1 4]

For Ball3D (12 agents, vector) and GridWorld with visual observations (16 agents, 20x20x3,
as PNG and as floats): agent steps per second of a random policy in process (the built-in
with ``unity_steps``) and through the stand-in player (tests/unity/standin_player.py,
launched as a build by the launcher), with 1 and 4 players (4 players: stepped together,
one thread each, as 4 env workers would; in process: one env of 4x the areas).

Per-step protocol overhead = (ms per step through the player) - (ms per step in process),
with one player: the stand-in's own work in Python (its env step, building 12 agent infos),
gRPC's round trip on localhost and our decoding. "Ball3D replayed" has the stand-in answer
every step with its first output again (no env step, no encoding on its side): what
remains per step is the protocol itself (our encode, the send, our decode; the player's
side costs only its deserialising the actions). The trainer's own share (decode the step,
encode the actions) is timed apart, as is PNG decoding, to show what bounds a visual run.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tftrainers.envs import make  # noqa: E402
from tftrainers.envs.unity import convert  # noqa: E402
from tftrainers.envs.unity.env import UnityEnv  # noqa: E402

STANDIN = os.path.join(ROOT, "tests", "unity", "standin_player.py")
CASES = {  # name -> (built-in id and args, stand-in args)
    "Ball3D (12 agents, vector)": ("builtin:Ball3D", {}, ["--env", "builtin:Ball3D"]),
    "Ball3D replayed (the protocol alone)": ("builtin:Ball3D", {},
                                             ["--env", "builtin:Ball3D", "--replay"]),
    "GridWorld visual PNG (16 agents, 20x20x3)": (
        "builtin:GridWorld", {"obs": "visual"}, ["--env", "builtin:GridWorld?obs=visual",
                                                 "--png"]),
    "GridWorld visual floats (16 agents, 20x20x3)": (
        "builtin:GridWorld", {"obs": "visual"}, ["--env", "builtin:GridWorld?obs=visual"]),
}


def free_base(count: int) -> int:
    for base in range(31000, 60000, 7):
        ok = True
        for k in range(count):
            with socket.socket() as s:
                try:
                    s.bind(("localhost", base + k))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free ports")


def write_build(folder: str, args) -> str:
    path = os.path.join(folder, "Game.x86_64")
    quoted = " ".join(f"'{a}'" for a in args)
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nPYTHONPATH='{ROOT}' exec '{sys.executable}' '{STANDIN}' {quoted} "
                f"\"$@\"\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class Stepper:
    """Random actions for every behavior of one env; counts agent steps."""

    def __init__(self, env, seed: int):
        self.env, self.rng, self.agent_steps = env, np.random.default_rng(seed), 0
        env.reset()

    def step(self) -> None:
        for name, spec in self.env.behavior_specs.items():
            decision, _ = self.env.get_steps(name)
            self.agent_steps += len(decision)
            self.env.set_actions(name, spec.action_spec.random_action(
                len(decision), self.rng, decision.action_mask))
        self.env.step()


def rate(steppers, seconds: float):
    """(agent steps per second, ms per env step of one stepper, CPU ms of this process per
    step of one env), steppers stepped together. The CPU time counts every thread of the
    trainer's process (gRPC's too) and nothing of the players': it does not grow with the
    machine's load as wall time does."""
    pool = ThreadPoolExecutor(len(steppers)) if len(steppers) > 1 else None
    for _ in range(20):  # warm up
        list(pool.map(lambda s: s.step(), steppers)) if pool else steppers[0].step()
    start_steps = sum(s.agent_steps for s in steppers)
    start, env_steps, cpu = time.perf_counter(), 0, time.process_time()
    while time.perf_counter() - start < seconds:
        if pool:
            list(pool.map(lambda s: s.step(), steppers))
        else:
            steppers[0].step()
        env_steps += 1
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if pool:
        pool.shutdown()
    return ((sum(s.agent_steps for s in steppers) - start_steps) / elapsed,
            1000.0 * elapsed / env_steps, 1000.0 * cpu / (env_steps * len(steppers)))


def trainer_share(env, behavior: str, repeats: int = 300):
    """ms per step of our decode (infos -> steps) and action encode, on the env's last
    output, and ms of PNG decoding in it."""
    spec = env.behavior_specs[behavior]
    message = env.last_message
    infos = message.unity_output.rl_output.agentInfos[behavior].value
    start = time.perf_counter()
    for _ in range(repeats):
        decision, _ = convert.steps_from_infos(infos, spec, behavior)
    decode = (time.perf_counter() - start) / repeats
    actions = spec.action_spec.random_action(len(decision), np.random.default_rng(0))
    start = time.perf_counter()
    for _ in range(repeats):
        convert.action_protos(actions)
    encode = (time.perf_counter() - start) / repeats
    png = 0.0
    observations = [o for info in infos for o in info.observations if o.compression_type == 1]
    if observations:
        c = spec.observation_specs[0].shape[2]
        start = time.perf_counter()
        for _ in range(max(1, repeats // 10)):
            for o in observations:
                convert.decode_png(o.compressed_data, c, o.compressed_channel_mapping)
        png = (time.perf_counter() - start) / max(1, repeats // 10)
    return 1000 * decode, 1000 * encode, 1000 * png, message.ByteSize()


def bare_round_trip_ms(calls: int = 2000) -> float:
    """ms of one gRPC unary call with empty messages, client and server in this process:
    the floor of any exchange on this machine as loaded now."""
    import grpc
    from tftrainers.envs.unity.communicator_objects import unity_to_external_pb2_grpc as rpc
    from tftrainers.envs.unity.communicator_objects.unity_message_pb2 import UnityMessageProto

    class Echo(rpc.UnityToExternalProtoServicer):
        def Exchange(self, request, context):  # noqa: N802
            return UnityMessageProto()

    port = free_base(1)
    server = grpc.server(ThreadPoolExecutor(2))
    rpc.add_UnityToExternalProtoServicer_to_server(Echo(), server)
    server.add_insecure_port(f"[::]:{port}")
    server.start()
    channel = grpc.insecure_channel(f"localhost:{port}")
    stub = rpc.UnityToExternalProtoStub(channel)
    message = UnityMessageProto()
    stub.Exchange(message, wait_for_ready=True)
    start = time.perf_counter()
    for _ in range(calls):
        stub.Exchange(message)
    elapsed = time.perf_counter() - start
    channel.close()
    server.stop(0)
    return 1000.0 * elapsed / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--players", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; bare gRPC round "
          f"trip (empty messages, one process): {bare_round_trip_ms():.3f} ms", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for case, (env_id, env_args, standin_args) in CASES.items():
            build = write_build(folder, standin_args)
            for players in args.players:
                local = make(env_id, seed=0, num_areas=None, unity_steps=True, **env_args)
                areas = getattr(local, "num_areas", None)
                local.close()
                local = make(env_id, seed=0, num_areas=(areas or 1) * players, unity_steps=True,
                             **env_args)
                in_process, local_ms, local_cpu = rate([Stepper(local, 0)], args.seconds)
                local.close()
                base = free_base(players)
                envs = []
                try:
                    for k in range(players):
                        envs.append(UnityEnv(build, worker_id=k, base_port=base, seed=k))
                    through, player_ms, player_cpu = rate(
                        [Stepper(e, k) for k, e in enumerate(envs)], args.seconds)
                    behavior = next(iter(envs[0].behavior_specs))
                    decode, encode, png, size = trainer_share(envs[0], behavior)
                finally:
                    for env in envs:
                        env.close()
                row = {"case": case, "players": players,
                       "in_process_agent_steps_per_s": round(in_process),
                       "player_agent_steps_per_s": round(through),
                       "ms_per_step_in_process": round(local_ms, 3),
                       "ms_per_step_through_player": round(player_ms, 3),
                       "overhead_ms_per_step": round(player_ms - local_ms, 3),
                       "trainer_cpu_ms_per_step_in_process": round(local_cpu, 3),
                       "trainer_cpu_ms_per_step_through_player": round(player_cpu, 3),
                       "trainer_decode_ms": round(decode, 3),
                       "trainer_encode_ms": round(encode, 3),
                       "png_decode_ms": round(png, 3), "message_bytes": size}
                results.append(row)
                print(json.dumps(row), flush=True)
    print()
    print("| case | players | agent steps/s in process | through the player | ms/step "
          "(in process / player) | overhead ms/step | trainer CPU ms/step (in process / "
          "player) | our decode + encode ms | PNG decode ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['case']} | {r['players']} | {r['in_process_agent_steps_per_s']:,} | "
              f"{r['player_agent_steps_per_s']:,} | {r['ms_per_step_in_process']} / "
              f"{r['ms_per_step_through_player']} | {r['overhead_ms_per_step']} | "
              f"{r['trainer_cpu_ms_per_step_in_process']} / "
              f"{r['trainer_cpu_ms_per_step_through_player']} | "
              f"{r['trainer_decode_ms']} + {r['trainer_encode_ms']} | {r['png_decode_ms']} |")


if __name__ == "__main__":
    main()
