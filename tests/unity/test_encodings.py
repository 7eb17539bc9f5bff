"""Known bytes: every side-channel encoding and the handshake, as the Unity side reads and
writes them; and the conversions between Unity's messages and our steps."""
import io
import uuid

import numpy as np
import pytest
from PIL import Image

from tftrainers.envs import ActionTuple, ObservationKind, ObservationType
from tftrainers.envs.checks import EnvDataError
from tftrainers.envs.unity import convert
from tftrainers.envs.unity.communicator_objects.agent_info_pb2 import AgentInfoProto
from tftrainers.envs.unity.communicator_objects.brain_parameters_pb2 import BrainParametersProto
from tftrainers.envs.unity.communicator_objects.observation_pb2 import ObservationProto
from tftrainers.envs.unity.env import initialization_input, version_check
from tftrainers.envs.unity.side_channels import (EngineConfigurationChannel,
                                                 EnvironmentParametersChannel, IncomingMessage,
                                                 RawBytesChannel, SideChannel,
                                                 SideChannelError, SideChannelManager,
                                                 StatsAggregationMethod, StatsSideChannel,
                                                 split_messages)

ENGINE_ID = bytes.fromhex("2c3451e97e4fea11b238784f4387d1f7")  # e951342c-4f7e-11ea-... (LE)
PARAMS_ID = bytes.fromhex("1e894c530f81ea11a9d0822485860400")  # 534c891e-810f-11ea-...
STATS_ID = bytes.fromhex("b7f7d8a1c8cef950b78bd3e165a78520")   # a1d8f7b7-cec8-50f9-...


def sent(channel) -> bytes:
    return SideChannelManager([channel]).generate_side_channel_messages()


def frame(channel_id: bytes, payload_hex: str) -> bytes:
    payload = bytes.fromhex(payload_hex)
    return channel_id + len(payload).to_bytes(4, "little") + payload


def test_engine_configuration_bytes():
    channel = EngineConfigurationChannel()
    channel.set_configuration_parameters(width=84, height=84, quality_level=5, time_scale=20.0,
                                         target_frame_rate=-1, capture_frame_rate=60)
    assert sent(channel) == (frame(ENGINE_ID, "00000000" "54000000" "54000000")
                             + frame(ENGINE_ID, "01000000" "05000000")
                             + frame(ENGINE_ID, "02000000" "0000a041")
                             + frame(ENGINE_ID, "03000000" "ffffffff")
                             + frame(ENGINE_ID, "04000000" "3c000000"))
    assert sent(channel) == b""  # sent once
    with pytest.raises(ValueError, match="needs both width and height"):
        channel.set_configuration_parameters(width=84)


def test_environment_parameter_bytes():
    channel = EnvironmentParametersChannel()
    channel.set_float_parameter("gravity", 1.5)
    channel.set_uniform_sampler_parameters("s", 1.0, 2.0, seed=5)
    channel.set_gaussian_sampler_parameters("s", 0.5, 0.25, seed=5)
    channel.set_multirangeuniform_sampler_parameters("s", [(1, 2), (3, 4)], seed=5)
    key_s = "01000000" "73" "01000000" "05000000"  # "s", SAMPLER, seed 5
    assert sent(channel) == (
        frame(PARAMS_ID, "07000000" + b"gravity".hex() + "00000000" "0000c03f")
        + frame(PARAMS_ID, key_s + "00000000" "0000803f" "00000040")
        + frame(PARAMS_ID, key_s + "01000000" "0000003f" "0000803e")
        + frame(PARAMS_ID, key_s + "02000000" "04000000" "0000803f" "00000040" "00004040"
                "00008040"))


def test_stats_are_read_with_their_aggregation():
    channel = StatsSideChannel()
    manager = SideChannelManager([channel])
    manager.process_side_channel_message(
        frame(STATS_ID, "0a000000" + b"Game/Score".hex() + "00004040" "02000000")
        + frame(STATS_ID, "0a000000" + b"Game/Score".hex() + "0000803f" "03000000"))
    assert channel.get_and_reset_stats() == {"Game/Score": [(3.0, StatsAggregationMethod.SUM),
                                                            (1.0, StatsAggregationMethod.HISTOGRAM)]}
    assert channel.get_and_reset_stats() == {}


def test_raw_bytes_a_users_channel_and_unknown_channels():
    mine = uuid.UUID("11111111-2222-3333-4444-555555555555")
    raw = RawBytesChannel(mine)
    raw.send_raw_data(b"\x01\x02")
    assert sent(raw) == mine.bytes_le + b"\x02\x00\x00\x00\x01\x02"

    class Counter(SideChannel):  # a user's own channel
        def __init__(self):
            super().__init__(uuid.UUID("aaaaaaaa-0000-0000-0000-000000000001"))
            self.values = []

        def on_message_received(self, msg: IncomingMessage) -> None:
            self.values.append((msg.read_int32(), msg.read_string(), msg.read_bool(True)))

    counter, warnings = Counter(), []
    manager = SideChannelManager([counter, raw], warn=warnings.append)
    unknown = uuid.UUID("bbbbbbbb-0000-0000-0000-000000000002")
    data = (counter.channel_id.bytes_le + (9).to_bytes(4, "little") + b"\x07\x00\x00\x00"
            + b"\x01\x00\x00\x00x" + unknown.bytes_le + b"\x00\x00\x00\x00"
            + mine.bytes_le + b"\x01\x00\x00\x00z")
    manager.process_side_channel_message(data)
    manager.process_side_channel_message(unknown.bytes_le + b"\x00\x00\x00\x00")
    assert counter.values == [(7, "x", True)]  # read past the end: the default
    assert raw.get_and_clear_received_messages() == [b"z"]
    assert len(warnings) == 1 and str(unknown) in warnings[0]  # warned once
    with pytest.raises(ValueError, match="two channels use the id"):
        SideChannelManager([RawBytesChannel(mine), RawBytesChannel(mine)])
    with pytest.raises(SideChannelError, match="claims 9 bytes, 1 are left"):
        split_messages(mine.bytes_le + b"\x09\x00\x00\x00z")


def test_handshake_bytes():
    expected = bytes.fromhex(
        "0a0308c801"  # header {status: 200}
        "1a24" "1222"  # unity_input {rl_initialization_input {
        "0807"  # seed 7
        "1205" + b"1.5.0".hex() + "1a05" + b"1.1.0".hex()  # versions
        + "220e" "0801" "1001" "1801" "2001" "2801" "3001" "3801"  # all 7 capabilities
        + "2801")  # num_areas 1
    assert initialization_input(seed=7, num_areas=1).SerializeToString() == expected


def test_version_rules():
    assert version_check("1.5.0") is None and version_check("1.0.0") is None
    assert version_check("1.6.0") == "warn"
    assert version_check("2.0.0") == "error" and version_check("0.15.0") == "error"
    assert version_check("API-1") == "error"


def vector(values, name="VectorSensor_size2"):
    obs = ObservationProto(shape=[len(values)], dimension_properties=[1], name=name)
    obs.float_data.data.extend(values)
    return obs


def test_steps_keep_the_players_order_split_by_done():
    brain = BrainParametersProto(brain_name="Ball?team=1")
    brain.action_spec.num_continuous_actions = 1
    brain.action_spec.discrete_branch_sizes.extend([2, 3])
    brain.action_spec.num_discrete_actions = 2
    infos = [AgentInfoProto(id=4, reward=1.0, done=True, max_step_reached=True, group_id=2,
                            group_reward=0.5, observations=[vector([1, 2])]),
             AgentInfoProto(id=4, reward=0.0, observations=[vector([3, 4])],
                            action_mask=[False, True, True, False, False], group_id=2),
             AgentInfoProto(id=1, reward=-1.0, observations=[vector([5, 6])])]
    spec = convert.behavior_spec(brain, infos[0], "Ball?team=1")
    assert spec.action_spec.continuous_size == 1 and spec.action_spec.discrete_branches == (2, 3)
    decision, terminal = convert.steps_from_infos(infos, spec, "Ball?team=1")
    assert terminal.agent_id.tolist() == [4] and terminal.interrupted.tolist() == [True]
    assert terminal.group_reward.tolist() == [0.5] and terminal.obs[0].tolist() == [[1, 2]]
    assert decision.agent_id.tolist() == [4, 1] and decision.reward.tolist() == [0.0, -1.0]
    assert decision.obs[0].tolist() == [[3, 4], [5, 6]] and decision.group_id.tolist() == [2, 0]
    assert decision.action_mask[0].tolist() == [[False, True], [False, False]]
    assert decision.action_mask[1].tolist() == [[True, False, False], [False, False, False]]
    protos = convert.action_protos(ActionTuple(np.array([[0.5], [-1.0]], np.float32),
                                               np.array([[1, 2], [0, 0]], np.int32)))
    assert [(list(p.continuous_actions), list(p.discrete_actions)) for p in protos] == [
        ([0.5], [1, 2]), ([-1.0], [0, 0])]
    assert convert.behavior_team("Ball?team=1") == 1 and convert.behavior_team("Ball") is None
    assert convert.behavior_base_name("Ball?team=1") == "Ball"
    bad = AgentInfoProto(id=9, observations=[vector([1, 2, 3])])
    with pytest.raises(EnvDataError, match="agent 9's observation 'VectorSensor_size2' has 3 "
                                           "values, its spec \\[2\\] needs 2"):
        convert.steps_from_infos([bad], spec, "Ball?team=1")


def test_observation_kinds_and_what_we_cannot_train_on():
    buffer = ObservationProto(shape=[20, 6], dimension_properties=[4, 1], name="Buffer")
    goal = ObservationProto(shape=[3], dimension_properties=[1], observation_type=1)
    camera = ObservationProto(shape=[3, 84, 64], dimension_properties=[1, 2, 2], name="Cam")
    spec = convert.observation_spec(buffer, 0, "B")
    assert spec.kind is ObservationKind.VARIABLE_LENGTH and spec.shape == (20, 6)
    spec = convert.observation_spec(goal, 1, "B")
    assert spec.observation_type is ObservationType.GOAL_SIGNAL and spec.name == "obs_1"
    assert convert.observation_spec(camera, 2, "B").shape == (84, 64, 3)  # HWC
    odd = ObservationProto(shape=[4, 5], dimension_properties=[1, 1], name="Odd")
    with pytest.raises(EnvDataError, match="behavior 'B': observation 'Odd' has shape \\[4, 5\\] "
                                           "with dimension properties \\[1, 1\\], which "
                                           "tftrainers cannot train on"):
        convert.observation_spec(odd, 0, "B")


def png(pixels: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8), "RGB").save(out, format="PNG")
    return out.getvalue()


def test_png_decoding_stacked_and_mapped():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 256, (4, 5, 3)), rng.integers(0, 256, (4, 5, 3))
    data = png(a) + png(b)
    # 4 channels: ours 0..3 from theirs 0..3, the last two of the second PNG dropped
    out = convert.decode_png(data, 4, [0, 1, 2, 3, -1, -1])
    assert out.shape == (4, 5, 4)
    np.testing.assert_allclose(out, np.concatenate([a, b[:, :, :1]], axis=2) / 255.0, atol=1e-6)
    # grayscale as Unity sends it: RGB mapped [0, 0, 0] -> the mean
    gray = convert.decode_png(png(a), 1, [0, 0, 0])
    np.testing.assert_allclose(gray[:, :, 0], a.mean(axis=2) / 255.0, atol=1e-6)
    np.testing.assert_allclose(convert.decode_png(png(a), 1), gray, atol=1e-6)  # no mapping
    np.testing.assert_allclose(convert.decode_png(png(a), 3), a / 255.0, atol=1e-6)
