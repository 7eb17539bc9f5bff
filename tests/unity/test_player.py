"""UnityEnv against the stand-in player, launched as a build: the whole path from launch
to exit (vector, PNG visual, several behaviors and teams, masks, side channels, faults)."""
import os
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from tftrainers.envs import ActionTuple, make
from tftrainers.envs.checks import EnvDataError
from tftrainers.envs.unity import IncomingMessage, OutgoingMessage, SideChannel, UnityEnv
from tftrainers.envs.unity.communicator import UnityEnvironmentError, UnityExited, UnityTimeout
from tftrainers.envs.unity.launcher import UnityBuildError, resolve_build

from .conftest import ROOT


def open_env(path, port, tmp_path, **kwargs):
    return UnityEnv(path, base_port=port, log_folder=str(tmp_path / "logs"), **kwargs)


def drive(env, steps):
    rngs = {name: np.random.default_rng(0) for name in env.behavior_specs}  # one per behavior
    seen = {name: [] for name in env.behavior_specs}
    for _ in range(steps):
        for name, spec in env.behavior_specs.items():
            decision, terminal = env.get_steps(name)
            seen[name].append((decision, terminal))
            env.set_actions(name, spec.action_spec.random_action(len(decision), rngs[name],
                                                                 decision.action_mask))
        env.step()
    return seen


def test_basic_through_the_protocol_matches_in_process(build, port, tmp_path):
    path = build("--env", "builtin:Basic")
    env = open_env(path, port, tmp_path, seed=3, no_graphics=True,
                   additional_args=["--custom", "1"])
    local = make("builtin:Basic", seed=3, unity_steps=True)
    try:
        assert dict(env.behavior_specs) == dict(local.behavior_specs)
        env.reset()  # right after the start: nothing sent, the same first step
        local.reset()
        rng = np.random.default_rng(1)
        same_step_restarts = 0
        for _ in range(40):
            (d, t), (ld, lt) = env.get_steps("Basic"), local.get_steps("Basic")
            assert d.agent_id.tolist() == ld.agent_id.tolist()
            assert t.agent_id.tolist() == lt.agent_id.tolist()
            np.testing.assert_array_equal(d.obs[0], ld.obs[0])
            np.testing.assert_array_equal(t.reward, lt.reward)
            same_step_restarts += len(set(d.agent_id) & set(t.agent_id))
            actions = ActionTuple(np.zeros((len(d), 0), np.float32),
                                  rng.integers(0, 3, (len(d), 1)).astype(np.int32))
            env.set_actions("Basic", actions)
            local.set_actions("Basic", actions)
            env.step()
            local.step()
        assert same_step_restarts > 0  # Unity's convention reached the env API
        process = env.process
    finally:
        env.close()
    assert process.poll() == 0  # answered 400: the player quit on its own
    log = open(tmp_path / "logs" / "Player-0.log").read()
    assert "'-nographics', '-batchmode', '--mlagents-port', " + f"'{port}'" in log
    assert "'--custom', '1'" in log  # the user's arguments reach the player
    assert "'time_scale'" not in log  # no engine settings given: none sent


def test_png_visual_several_behaviors_teams_and_masks(build, port, tmp_path):
    path = build("--env", "builtin:GridWorld?obs=visual", "--env", "builtin:Ball3D", "--png",
                 "--team", "1", "--num-areas", "2")
    floats = build("--env", "builtin:GridWorld", "--env-arg", "obs=visual", "--num-areas", "2",
                   folder="Floats")
    env = open_env(path, port, tmp_path, seed=5)
    try:
        assert sorted(env.behavior_specs) == ["Ball3D?team=1", "GridWorld?team=1"]
        spec = env.behavior_specs["GridWorld?team=1"]
        assert spec.observation_specs[0].shape == (20, 20, 3)
        seen = drive(env, 12)
    finally:
        env.close()
    other = open_env(floats, port + 1, tmp_path, seed=5)
    try:
        plain = drive(other, 12)
    finally:
        other.close()
    for (d, _), (pd, _) in zip(seen["GridWorld?team=1"], plain["GridWorld"]):
        np.testing.assert_allclose(d.obs[0], pd.obs[0], atol=0.5 / 255)  # PNG: 8 bits
        for mask, plain_mask in zip(d.action_mask, pd.action_mask):
            np.testing.assert_array_equal(mask, plain_mask)
    assert any(m.any() for d, _ in seen["GridWorld?team=1"] for m in d.action_mask)
    assert len(seen["Ball3D?team=1"][0][0]) == 24  # 2 areas of 12


class Echo(SideChannel):
    """A user's own channel (the stand-in echoes its messages back, prefixed)."""

    ID = uuid.UUID("6c9f2c3e-0000-4000-8000-00000000abcd")

    def __init__(self):
        super().__init__(self.ID)
        self.received = []

    def on_message_received(self, msg: IncomingMessage) -> None:
        self.received.append(msg.get_raw_bytes())

    def send(self, text: str) -> None:
        msg = OutgoingMessage()
        msg.write_string(text)
        self.queue_message_to_send(msg)


def test_side_channels_both_ways(build, port, tmp_path):
    path = build("--env", "builtin:Basic", "--stats", "--echo-channel", str(Echo.ID))
    echo = Echo()
    env = open_env(path, port, tmp_path, side_channels=[echo],
                   engine_settings={"width": 84, "height": 84, "quality_level": 5,
                                    "time_scale": 20.0, "target_frame_rate": -1,
                                    "capture_frame_rate": 60})
    try:
        env.set_float_parameter("gravity", 2.5)
        env.set_sampler_parameter("size", "uniform", seed=3, min_value=1.0, max_value=2.0)
        env.set_sampler_parameter("mass", "gaussian", seed=4, mean=2.0, st_dev=0.5)
        env.set_sampler_parameter("scale", "multirangeuniform", seed=5,
                                  intervals=[[0.75, 1.0], [2.0, 3.0]])
        env.set_sampler_parameter("g", "constant", seed=6, value=9.5)
        with pytest.raises(ValueError, match="unknown sampler_type 'beta'; allowed: constant, "):
            env.set_sampler_parameter("g", "beta", seed=6)
        echo.send("hi")
        env.reset()  # something queued: a real reset carries it
        drive(env, 1)
        assert echo.received == [b"echo:" + b"\x02\x00\x00\x00hi"]
        drive(env, 30)
        stats = env.pop_environment_stats().values
        assert stats["Standin/Basic Terminals"][0][1] == 2  # SUM
        assert {agg for _, agg in stats["Standin/Basic Final Reward"]} == {0}  # AVERAGE
        assert env.pop_environment_stats() is None
    finally:
        env.close()
    log = open(tmp_path / "logs" / "Player-0.log").read()
    assert ("engine configuration {'resolution': (84, 84), 'quality_level': 5, 'time_scale': "
            "20.0, 'target_frame_rate': -1, 'capture_frame_rate': 60}") in log
    assert "environment parameter gravity = 2.5" in log
    assert "environment parameter size = ('sampler', 3, 0, [1.0, 2.0])" in log
    assert "environment parameter mass = ('sampler', 4, 1, [2.0, 0.5])" in log
    assert "environment parameter scale = ('sampler', 5, 2, [0.75, 1.0, 2.0, 3.0])" in log
    assert "environment parameter g = 9.5" in log


def test_num_envs_players_inline_are_one_env_on_consecutive_ports(build, port, tmp_path):
    env = make(build("--env", "builtin:Basic", "--stats"), seed=0, num_envs=2, base_port=port,
               log_folder=str(tmp_path / "logs"))
    try:
        assert [e.port for e in env.envs] == [port, port + 1]
        env.reset()
        drive(env, 30)
        stats = env.pop_environment_stats().values  # both players' reports, merged
        assert len(stats["Standin/Basic Terminals"]) >= 2
    finally:
        env.close()
    assert all(e.process.poll() == 0 for e in env.envs)


def test_build_paths_resolve_as_ml_agents(tmp_path, build):
    exe = build(folder="A", name="Game.x86_64")
    assert resolve_build(str(tmp_path / "A" / "Game")) == exe
    assert resolve_build(exe) == exe
    assert resolve_build(str(tmp_path / "A")) == exe  # a folder with exactly one
    mac = build(folder="M/Game.app/Contents/MacOS", name="Game")
    assert resolve_build(str(tmp_path / "M" / "Game")) == mac
    assert resolve_build(str(tmp_path / "M" / "Game.app")) == mac
    build(folder="A", name="Other.x86")
    with pytest.raises(UnityBuildError, match="the folder holds 2 builds"):
        resolve_build(str(tmp_path / "A"))
    with pytest.raises(UnityBuildError, match=r"Unity build .*Nope: no such build \(looked for "
                                              r".*Nope, .*Nope.x86_64, .*Nope.x86, "):
        resolve_build(str(tmp_path / "Nope"))
    (tmp_path / "B").mkdir()
    (tmp_path / "B" / "Game.x86_64").write_text("not executable")
    with pytest.raises(UnityBuildError, match=r"Game.x86_64 is not executable \(chmod \+x"):
        resolve_build(str(tmp_path / "B" / "Game"))


@pytest.mark.parametrize("args, error, words", [
    (("--crash-after", "3"), UnityExited, "the player exited with code 3 while the trainer "
                                          "waited for the next step"),
    (("--quit-after", "3"), UnityExited, "the player closed the connection (it is quitting) "
                                         "while the trainer waited for the next step"),
    (("--hang-after", "3"), UnityTimeout, "no answer from the player within 2 s (waiting for "
                                          "the next step; --timeout-wait sets the limit)"),
])
def test_a_player_that_fails_is_one_line_naming_build_worker_and_log(
        build, port, tmp_path, args, error, words):
    path = build("--env", "builtin:Basic", *args)
    env = open_env(path, port, tmp_path, worker_id=1, timeout_wait=2)
    process = env.process
    with pytest.raises(error) as info:
        drive(env, 10)
    env.close()
    message = str(info.value)
    log = tmp_path / "logs" / "Player-1.log"
    assert message == f"Unity build {path} (worker 1, player log {log}): {words}"
    assert "\n" not in message and process.poll() is not None  # no process left


def test_players_that_never_connect_speak_another_version_or_find_the_port_taken(
        build, port, tmp_path):
    with pytest.raises(UnityTimeout, match="no answer from the player within 1 s \\(waiting "
                                           "for the player's first message"):
        open_env(build("--never-connect", folder="N"), port, tmp_path, timeout_wait=1)
    with pytest.raises(UnityEnvironmentError, match=r"the communication API version is not "
                                                    r"compatible: Python API 1.5.0, Unity API "
                                                    r"2.0.0"):
        open_env(build("--version", "2.0.0", folder="V"), port, tmp_path)
    lines = []
    env = open_env(build("--version", "1.7.0", folder="W"), port, tmp_path, log=lines.append)
    env.close()
    assert lines and "speaks communication API 1.7.0, newer than ours (1.5.0)" in lines[0]
    with socket.socket() as taken:
        taken.bind(("localhost", port + 2))
        taken.listen()
        with pytest.raises(UnityEnvironmentError, match=f"port {port + 2} is in use"):
            open_env(build(folder="P"), port, tmp_path, worker_id=2)


def test_nan_observations_are_refused_at_the_boundary(build, port, tmp_path):
    from tftrainers.envs.checks import check_steps
    env = open_env(build("--env", "builtin:Ball3D", "--nan-after", "2"), port, tmp_path)
    try:
        drive(env, 2)
        decision, terminal = env.get_steps("Ball3D")
        with pytest.raises(EnvDataError, match=r"agent 0: observation 0 \('platform_and_ball'\) "
                                               r"holds nan"):
            check_steps("Ball3D", env.behavior_specs["Ball3D"], decision, terminal)
    finally:
        env.close()


def test_a_missing_build_or_a_bare_name_is_refused_by_make(tmp_path):
    with pytest.raises(ValueError, match="unknown env id 'Basic'; use builtin:NAME"):
        make("Basic")
    with pytest.raises(UnityBuildError, match="no such build"):
        make(str(tmp_path / "Builds" / "Game"))
    assert not os.path.exists(tmp_path / "Builds")


def test_a_program_that_never_closes_its_env_still_exits_and_its_player_quits(build, port,
                                                                             tmp_path):
    script = tmp_path / "leak.py"
    script.write_text(
        "from tftrainers.envs.unity import UnityEnv\n"
        f"env = UnityEnv({build()!r}, base_port={port})\n"
        "print(env.process.pid, flush=True)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    for _ in range(50):
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(
                ") ")[1][0] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"player {pid} still runs")
