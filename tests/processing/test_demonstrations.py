"""Reading .demo files: files built byte by byte from docs/dev/architecture.md#demo-format
(protobuf wire format written
here by hand, not with our writer or message classes), old files, folders, and every error."""
import io
import struct

import numpy as np
import pytest
from PIL import Image

from tftrainers.envs import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from tftrainers.processing.demonstrations import (DemonstrationError, DemonstrationWriter,
                                                  Records, load_demonstrations,
                                                  read_demo_file)


# --- protobuf wire format by hand -----------------------------------------------------------
def varint(value):
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number, wire_type):
    return varint(number << 3 | wire_type)


def int_field(number, value):  # int32 / bool / enum: wire type 0
    return tag(number, 0) + varint(value) if value else b""


def float_field(number, value):  # wire type 5
    return tag(number, 5) + struct.pack("<f", value) if value else b""


def bytes_field(number, data):  # wire type 2
    return tag(number, 2) + varint(len(data)) + data


def packed_floats(number, values):
    return bytes_field(number, struct.pack(f"<{len(values)}f", *values)) if len(values) else b""


def packed_ints(number, values):
    return bytes_field(number, b"".join(varint(v & 0xFFFFFFFFFFFFFFFF) for v in values)) \
        if len(values) else b""


def delimited(message):
    return varint(len(message)) + message


def meta(steps, episodes, mean_reward, api_version=1, name=b"hand"):
    return (int_field(1, api_version) + bytes_field(2, name) + int_field(3, steps)
            + int_field(4, episodes) + float_field(5, mean_reward))


def demo_file(meta_message, brain_message, records, trailing=b""):
    header = delimited(meta_message)
    assert len(header) <= 33
    return header + b"\0" * (33 - len(header)) + delimited(brain_message) + \
        b"".join(delimited(r) for r in records) + trailing


def vector_obs(values, name=b"VectorSensor"):
    return (packed_ints(1, [len(values)]) + bytes_field(4, packed_floats(1, values))
            + packed_ints(6, [1]) + bytes_field(8, name))


def png(pixels):
    out = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(out, format="PNG")
    return out.getvalue()


def record(obs_messages, reward=0.0, done=False, max_step=False, agent=7, mask=(),
           continuous=(), discrete=(), deprecated=()):
    info = (float_field(7, reward) + int_field(8, done) + int_field(9, max_step)
            + int_field(10, agent) + packed_ints(11, [int(m) for m in mask])
            + b"".join(bytes_field(13, o) for o in obs_messages))
    action = (packed_floats(1, deprecated) + packed_floats(6, continuous)
              + packed_ints(7, discrete))
    return bytes_field(1, info) + bytes_field(2, action)


# --- a Unity-recorded discrete file with a visual observation of two PNGs ---------------------
H, W = 2, 3


def camera(rng):
    """4 channels as Unity sends them: two PNGs (RGB, then channel 3 and two pad channels)
    with compressed_channel_mapping [0, 1, 2, 3, -1, -1]; shape [C, H, W]."""
    hwc = rng.integers(0, 256, (H, W, 4)).astype(np.uint8)
    pad = np.zeros((H, W, 2), np.uint8)
    data = png(hwc[:, :, :3]) + png(np.concatenate([hwc[:, :, 3:], pad], axis=2))
    message = (packed_ints(1, [4, H, W]) + int_field(2, 1) + bytes_field(3, data)
               + packed_ints(5, [0, 1, 2, 3, -1, -1]) + packed_ints(6, [1, 2, 2])
               + bytes_field(8, b"CameraSensor"))
    return message, hwc.astype(np.float32) / 255.0


@pytest.fixture(scope="module")
def unity_file(tmp_path_factory):
    """Two episodes of one agent as Unity writes them: each record is written before the
    step's decision, so its action field holds the previous action (zeros first)."""
    rng = np.random.default_rng(0)
    episodes = [  # per step: vector obs, reward received, action taken from that obs
        dict(obs=[[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], reward=[0, -0.1, -0.1, 1.0],
             action=[2, 0, 1], end="done"),
        dict(obs=[[1.5, 1.0], [2.5, 2.0], [3.5, 3.0]], reward=[0, 0.25, 0.5], action=[1, 1],
             end="max_step"),
    ]
    records, expected = [], dict(obs=[], cam=[], next_obs=[], action=[], reward=[], done=[],
                                 interrupted=[], mask=[], episode=[])
    for e, ep in enumerate(episodes):
        cams = []
        steps = len(ep["obs"])
        for t in range(steps):
            cam_message, cam = camera(rng)
            cams.append(cam)
            last = t == steps - 1
            mask = (False, t % 2 == 1, False)  # action 1 masked on odd steps
            previous = ep["action"][t - 1] if t else 0
            records.append(record([vector_obs(ep["obs"][t]), cam_message],
                                  reward=ep["reward"][t], done=last,
                                  max_step=last and ep["end"] == "max_step", mask=mask,
                                  discrete=[previous], deprecated=[float(previous)]))
            if not last:
                expected["mask"].append([1.0, 0.0 if t % 2 else 1.0, 1.0])
        for t in range(steps - 1):
            expected["obs"].append(ep["obs"][t])
            expected["next_obs"].append(ep["obs"][t + 1])
            expected["cam"].append(cams[t])
            expected["action"].append([ep["action"][t]])
            expected["reward"].append(ep["reward"][t + 1])
            expected["done"].append(t == steps - 2)
            expected["interrupted"].append(t == steps - 2 and ep["end"] == "max_step")
            expected["episode"].append(e)
    brain = (packed_ints(3, [3]) + bytes_field(7, b"Hand")
             + bytes_field(9, int_field(2, 1) + packed_ints(3, [3])))
    # Unity counts an extra episode on close, and leaves the meta's bytes after the records.
    meta_message = meta(len(records), 3, 1.55 / 3)
    data = demo_file(meta_message, brain, records, trailing=meta_message)
    path = tmp_path_factory.mktemp("unity") / "hand.demo"
    path.write_bytes(data)
    return path, {k: np.asarray(v) for k, v in expected.items()}


def test_a_unity_file_built_by_hand_reads_with_the_action_of_the_next_record(unity_file):
    path, expected = unity_file
    demos = load_demonstrations(str(path))
    assert demos.behavior_name == "Hand" and demos.name == "hand"
    assert demos.files[0].action_pairing == "next_record"
    assert demos.files[0].number_episodes == 3  # the header's, as Unity wrote it
    spec = demos.spec
    assert spec.action_spec == ActionSpec(0, (3,))
    assert [(o.shape, o.kind, o.name) for o in spec.observation_specs] == [
        ((2,), ObservationKind.VECTOR, "VectorSensor"),
        ((H, W, 4), ObservationKind.VISUAL, "CameraSensor")]
    assert len(demos) == 5 and demos.num_episodes == 2
    np.testing.assert_array_equal(demos.obs[0], expected["obs"].astype(np.float32))
    np.testing.assert_array_equal(demos.next_obs[0], expected["next_obs"].astype(np.float32))
    np.testing.assert_array_equal(demos.obs[1], expected["cam"])
    np.testing.assert_array_equal(demos.discrete_actions, expected["action"])
    np.testing.assert_array_equal(demos.reward, expected["reward"].astype(np.float32))
    np.testing.assert_array_equal(demos.done, expected["done"])
    np.testing.assert_array_equal(demos.interrupted, expected["interrupted"])
    np.testing.assert_array_equal(demos.action_mask, expected["mask"])
    np.testing.assert_array_equal(demos.episode, expected["episode"])
    np.testing.assert_array_equal(demos.episode_start, [1, 0, 0, 1, 0])
    np.testing.assert_allclose(demos.episode_returns, [0.8, 0.75], rtol=1e-6)
    assert demos.mean_reward == pytest.approx(0.775)
    assert (demos.agent_id == 7).all() and demos.continuous_actions.shape == (5, 0)


def test_ml_agents_pairing_keeps_the_recorded_offset(unity_file):
    # What ML-Agents' BC trains on: the action field of the observation's own record.
    path, expected = unity_file
    demos = load_demonstrations(str(path), action_pairing="same_record")
    previous = [[0], [2], [0], [0], [1]]
    np.testing.assert_array_equal(demos.discrete_actions, previous)
    np.testing.assert_array_equal(demos.obs[0], expected["obs"].astype(np.float32))


def test_a_file_unity_never_closed_reads_to_the_end(tmp_path):
    # The header is written again on close; before that it says 0 steps.
    records = [record([vector_obs([float(t)])], reward=0.5 * t, discrete=[t % 2])
               for t in range(4)]
    brain = packed_ints(3, [2]) + bytes_field(7, b"Open")
    path = tmp_path / "open.demo"
    path.write_bytes(demo_file(meta(0, 0, 0.0), brain, records))
    demos = load_demonstrations(str(path))
    np.testing.assert_array_equal(demos.obs[0][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(demos.discrete_actions[:, 0], [1, 0, 1])
    assert not demos.done.any() and demos.num_episodes == 0


@pytest.mark.parametrize("space_type,sizes,values,expected", [
    (1, [2], [[0.5, -0.25], [1.0, 0.75], [0.0, 0.0]], ActionSpec(2, ())),  # continuous
    (0, [3, 2], [[2, 1], [0, 1], [0, 0]], ActionSpec(0, (3, 2))),  # discrete: type 0 omitted
])
def test_old_files_with_only_the_deprecated_action_fields(tmp_path, space_type, sizes, values,
                                                           expected):
    brain = packed_ints(3, sizes) + int_field(6, space_type) + bytes_field(7, b"Old")
    records = [record([vector_obs([0.0])], deprecated=[0.0] * len(sizes)),
               record([vector_obs([1.0])], deprecated=[float(v) for v in values[0]]),
               record([vector_obs([2.0])], deprecated=[float(v) for v in values[1]],
                      done=True)]
    path = tmp_path / "old.demo"
    path.write_bytes(demo_file(meta(3, 1, 0.0, api_version=0), brain, records))
    demos = load_demonstrations(str(path))
    assert demos.spec.action_spec == expected and demos.files[0].api_version == 0
    taken = demos.continuous_actions if space_type else demos.discrete_actions
    np.testing.assert_array_equal(taken, values[:2])


def test_hwc_visual_observations_of_older_unity(tmp_path):
    # Before dimension properties, Unity sent visual shapes as [H, W, C].
    rng = np.random.default_rng(1)
    pixels = [rng.integers(0, 256, (H, W, 3)).astype(np.uint8) for _ in range(2)]
    obs = [packed_ints(1, [H, W, 3]) + int_field(2, 1) + bytes_field(3, png(p))
           for p in pixels]
    brain = packed_ints(3, [2]) + bytes_field(7, b"Hwc")
    records = [record([obs[0]], discrete=[0]), record([obs[1]], discrete=[1], done=True)]
    path = tmp_path / "hwc.demo"
    path.write_bytes(demo_file(meta(2, 1, 0.0), brain, records))
    demos = load_demonstrations(str(path))
    assert demos.spec.observation_specs[0].shape == (H, W, 3)
    np.testing.assert_array_equal(demos.obs[0][0], pixels[0] / np.float32(255))
    np.testing.assert_array_equal(demos.next_obs[0][0], pixels[1] / np.float32(255))


# --- visual observations without dimension properties, as ML-Agents' Python tools write them --
def known_hwc(h, w, c, record_index):
    """[H, W, C] uint8 pixels that say where they are: every (record, row, column, channel)
    has its own value, so any transposition or swap shows."""
    y, x, k = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    return (1 + record_index * h * w * c + (y * w + x) * c + k).astype(np.uint8)


def undescribed_visual_obs(stored, compressed):
    """An ObservationProto as ML-Agents' test helper builds it: the shape as the array has
    it, float_data or PNG, no dimension properties, no name. ``stored``: uint8 pixels in
    the stored layout; a PNG holds them as [H, W, C] rows."""
    message = packed_ints(1, list(stored.shape))
    if compressed:  # stored is [C, H, W]: the PNG holds it channels last
        return message + int_field(2, 1) + bytes_field(3, png(stored.transpose(1, 2, 0)))
    values = (stored.astype(np.float32) / 255).reshape(-1).tolist()
    return message + bytes_field(4, packed_floats(1, values))


def undescribed_file(path, h, w, c, compressed=False, channels_first=True):
    """Three records of one agent (the last done) whose only observation is visual [C, H, W]
    (or [H, W, C] with ``channels_first=False``); returns the [H, W, C] floats per record."""
    expected, records = [], []
    for r in range(3):
        hwc = known_hwc(h, w, c, r)
        expected.append(hwc.astype(np.float32) / 255)
        stored = hwc.transpose(2, 0, 1) if channels_first else hwc
        records.append(record([undescribed_visual_obs(stored, compressed)], discrete=[r % 2],
                              done=r == 2))
    brain = (packed_ints(3, [2]) + bytes_field(7, b"1D")
             + bytes_field(9, int_field(2, 1) + packed_ints(3, [2])))
    path.write_bytes(demo_file(meta(3, 1, 0.0), brain, records))
    return expected


def visual_spec(h, w, c):
    return BehaviorSpec((ObservationSpec((h, w, c), "camera", ObservationKind.VISUAL),),
                        ActionSpec(0, (2,)))


@pytest.mark.parametrize("h, w, c, compressed, channels_first", [
    (20, 20, 3, False, True),  # the case of issue 35: float_data [3, 20, 20]
    (5, 4, 3, False, True),  # rows and columns of different lengths
    (5, 4, 3, False, False),  # [H, W, C] float_data (Unity before dimension properties)
    (5, 4, 3, True, True),  # PNG [C, H, W]: the PNG's size tells
    (3, 3, 3, True, True),  # PNG [3, 3, 3]: its size cannot tell; the behavior does
    (3, 3, 3, False, True),
])
def test_visual_observations_without_dimension_properties_read_as_the_behavior_has_them(
        tmp_path, h, w, c, compressed, channels_first):
    path = tmp_path / "python.demo"
    expected = undescribed_file(path, h, w, c, compressed, channels_first)
    demos = load_demonstrations(str(path), spec=visual_spec(h, w, c), behavior_name="1D")
    assert demos.spec.observation_specs[0].shape == (h, w, c)
    # next_record pairing: the transitions start at records 0 and 1
    np.testing.assert_array_equal(demos.obs[0], expected[:2])
    np.testing.assert_array_equal(demos.next_obs[0], expected[1:])


def test_in_a_folder_without_a_behavior_the_first_file_decides_the_layout(tmp_path):
    first = known_hwc(5, 4, 3, 7).astype(np.float32)[None] / 255
    with DemonstrationWriter(str(tmp_path / "a.demo"), "1D", visual_spec(5, 4, 3)) as writer:
        writer.write_episode(Records(
            [np.concatenate([first, first])], np.zeros(2, np.float32), np.array([0, 1], bool),
            np.zeros(2, bool), np.zeros(2, np.int32), np.zeros((2, 2), bool),
            np.zeros((2, 0), np.float32), np.zeros((2, 1), np.int32), np.ones(2, bool),
            np.zeros(2, np.int32), np.zeros(2, np.float32)))
    expected = undescribed_file(tmp_path / "b.demo", 5, 4, 3)  # [3, 5, 4], no properties
    demos = load_demonstrations(str(tmp_path))
    assert demos.spec.observation_specs[0].shape == (5, 4, 3)
    np.testing.assert_array_equal(demos.obs[0], [first[0], *expected[:2]])


@pytest.mark.parametrize("compressed", [False, True])
def test_a_visual_observation_that_fits_neither_layout_is_refused(tmp_path, compressed):
    path = tmp_path / "python.demo"
    undescribed_file(path, 3, 3, 3, compressed)  # stored [3, 3, 3]
    assert one_line_error(path, spec=visual_spec(3, 3, 4), behavior_name="1D") == (
        f"{path}: observation 0 ('obs_0') is stored [3, 3, 3] without dimension "
        f"properties, and neither channels first ([3, 3, 3]) nor channels last ([3, 3, 3]) "
        f"is the [3, 3, 4] of 'camera' in behavior '1D'")
    path = tmp_path / "float.demo"
    undescribed_file(path, 20, 20, 3)  # stored [3, 20, 20]
    assert one_line_error(path, spec=visual_spec(20, 20, 4), behavior_name="1D") == (
        f"{path}: observation 0 ('obs_0') is stored [3, 20, 20] without dimension "
        f"properties, and neither channels first ([20, 20, 3]) nor channels last "
        f"([3, 20, 20]) is the [20, 20, 4] of 'camera' in behavior '1D'")


# --- our writer: marked, read exactly, and a folder -----------------------------------------
SPEC = BehaviorSpec((ObservationSpec((3,), "v"),), ActionSpec(1, (2,)))


def write(path, episodes, seed):
    rng = np.random.default_rng(seed)
    with DemonstrationWriter(str(path), "W", SPEC) as writer:
        for length in episodes:
            done = np.zeros(length, bool)
            done[-1] = True
            writer.write_episode(Records(
                [rng.standard_normal((length, 3)).astype(np.float32)],
                rng.standard_normal(length).astype(np.float32), done, np.zeros(length, bool),
                np.full(length, seed, np.int32), rng.random((length, 2)) < 0.3,
                rng.uniform(-1, 1, (length, 1)).astype(np.float32),
                rng.integers(0, 2, (length, 1)).astype(np.int32), np.ones(length, bool),
                np.zeros(length, np.int32), np.zeros(length, np.float32)))
    return read_demo_file(str(path))[2]


def test_our_files_pair_each_observation_with_its_own_action(tmp_path):
    records = write(tmp_path / "ours.demo", [4, 3], seed=0)
    demos = load_demonstrations(str(tmp_path / "ours.demo"))
    assert demos.files[0].recorded_by.startswith("tftrainers")
    assert demos.files[0].action_pairing == "same_record"
    rows = [0, 1, 2, 4, 5]  # the records that do not end an episode
    np.testing.assert_array_equal(demos.obs[0], records.obs[0][rows])
    np.testing.assert_array_equal(demos.continuous_actions, records.continuous[rows])
    np.testing.assert_array_equal(demos.discrete_actions, records.discrete[rows])
    np.testing.assert_array_equal(demos.action_mask, ~records.action_mask[rows])
    np.testing.assert_array_equal(demos.reward, records.reward[[1, 2, 3, 5, 6]])
    header = demos.files[0]
    assert (header.number_steps, header.number_episodes) == (7, 2)
    assert header.mean_reward == pytest.approx(records.reward.sum() / 2, rel=1e-6)


def test_variable_length_and_goal_signal_observations_round_trip(tmp_path):
    from tftrainers.envs.base import ObservationType
    spec = BehaviorSpec((ObservationSpec((2,), "v"),
                         ObservationSpec((3, 2), "tiles", ObservationKind.VARIABLE_LENGTH),
                         ObservationSpec((2,), "goal",
                                         observation_type=ObservationType.GOAL_SIGNAL)),
                        ActionSpec(0, (3,)))
    rng = np.random.default_rng(0)
    n = 3
    obs = [rng.standard_normal((n, 2)).astype(np.float32),
           rng.standard_normal((n, 3, 2)).astype(np.float32),
           np.eye(2, dtype=np.float32)[[0, 1, 1]]]
    obs[1][:, 2] = 0.0  # an absent entity
    with DemonstrationWriter(str(tmp_path / "g.demo"), "G", spec) as writer:
        writer.write_episode(Records(
            obs, np.zeros(n, np.float32), np.array([False, False, True]), np.zeros(n, bool),
            np.zeros(n, np.int32), np.zeros((n, 3), bool), np.zeros((n, 0), np.float32),
            np.zeros((n, 1), np.int32), np.ones(n, bool), np.zeros(n, np.int32),
            np.zeros(n, np.float32)))
    file_spec, records = read_demo_file(str(tmp_path / "g.demo"))[1:]
    assert file_spec.observation_specs == spec.observation_specs
    np.testing.assert_array_equal(records.obs[1], obs[1])
    # an env whose goal is a plain observation is not what these demonstrations are for
    plain = BehaviorSpec(spec.observation_specs[:2] + (ObservationSpec((2,), "goal"),),
                         spec.action_spec)
    assert one_line_error(tmp_path / "g.demo", spec=plain, behavior_name="G") == (
        f"{tmp_path / 'g.demo'}: observation 2 ('goal') is a goal_signal observation in the "
        f"demonstrations but a default one in behavior 'G'")


def test_a_folder_reads_every_demo_file_in_name_order(tmp_path):
    write(tmp_path / "b.demo", [3], seed=2)
    write(tmp_path / "a.demo", [4, 2], seed=1)
    (tmp_path / "notes.txt").write_text("not a demo")
    demos = load_demonstrations(str(tmp_path))
    assert [f.path.rsplit("/", 1)[1] for f in demos.files] == ["a.demo", "b.demo"]
    assert len(demos) == 3 + 1 + 2 and demos.num_episodes == 3
    np.testing.assert_array_equal(demos.episode, [0, 0, 0, 1, 2, 2])
    np.testing.assert_array_equal(demos.agent_id, [1, 1, 1, 1, 2, 2])


# --- errors: one line naming the file -------------------------------------------------------
def one_line_error(path, **kwargs):
    with pytest.raises(DemonstrationError) as info:
        load_demonstrations(str(path), **kwargs)
    message = str(info.value)
    assert "\n" not in message and isinstance(info.value, ValueError)
    return message


def test_not_a_demo_file(tmp_path):
    text = tmp_path / "notes.demo"
    text.write_text("hello, this is not a demonstration\n")
    assert one_line_error(text) == (f"{text}: not a .demo file (no DemonstrationMetaProto "
                                    f"header and BrainParametersProto at offset 33)")
    image = tmp_path / "image.demo"
    image.write_bytes(png(np.zeros((4, 4, 3), np.uint8)))
    assert "not a .demo file" in one_line_error(image)
    empty = tmp_path / "empty.demo"
    empty.write_bytes(b"")
    assert one_line_error(empty) == f"{empty}: not a .demo file (it is empty)"


def test_truncated_file(tmp_path, unity_file):
    data = unity_file[0].read_bytes()
    cut = tmp_path / "cut.demo"
    cut.write_bytes(data[:len(data) // 2])
    message = one_line_error(cut)
    assert message.startswith(f"{cut}: truncated or damaged at record ")
    assert message.endswith("the header says 7 records")
    short = tmp_path / "short.demo"  # whole records, but fewer than the header says
    write(short, [3], seed=0)
    data = short.read_bytes()
    short.write_bytes(data[:1] + data[1:].replace(bytes([3 << 3, 3]), bytes([3 << 3, 9]), 1))
    assert one_line_error(short) == (f"{short}: truncated: the header says 9 records, the file "
                                     f"holds 3")


def test_unsupported_api_version(tmp_path):
    path = tmp_path / "future.demo"
    path.write_bytes(demo_file(meta(1, 1, 0.0, api_version=2), bytes_field(7, b"F") +
                               packed_ints(3, [2]), [record([vector_obs([0.0])], done=True)]))
    assert one_line_error(path) == f"{path}: unsupported api_version 2; supported: 0, 1"


def test_mismatching_spec_names_the_observation_and_both_shapes(unity_file):
    path, _ = unity_file
    demos = load_demonstrations(str(path))
    camera_spec = ObservationSpec((84, 84, 3), "camera", ObservationKind.VISUAL)
    wrong_obs = BehaviorSpec((ObservationSpec((2,), "pos"), camera_spec), ActionSpec(0, (3,)))
    with pytest.raises(DemonstrationError) as info:
        demos.check_against(wrong_obs, "Robot")
    assert str(info.value) == (f"{path}: observation 1 is 'CameraSensor' [2, 3, 4] in the "
                               f"demonstrations but 'camera' [84, 84, 3] in behavior 'Robot'")
    fewer = BehaviorSpec((ObservationSpec((2,), "pos"),), ActionSpec(0, (3,)))
    assert one_line_error(path, spec=fewer, behavior_name="Robot") == (
        f"{path}: the demonstrations have 2 observation(s) ('VectorSensor' [2], 'CameraSensor' "
        f"[2, 3, 4]) but behavior 'Robot' has 1 ('pos' [2])")
    actions = BehaviorSpec(demos.spec.observation_specs, ActionSpec(2, ()))
    assert one_line_error(path, spec=actions) == (
        f"{path}: the demonstrations' actions (0 continuous, discrete branches [3]) do not "
        f"match behavior 'Hand''s (2 continuous, discrete branches [])")


def test_missing_path_and_empty_folder(tmp_path):
    assert one_line_error(tmp_path / "nope.demo") == (f"{tmp_path / 'nope.demo'}: no such "
                                                      f".demo file or folder")
    assert one_line_error(tmp_path) == f"{tmp_path}: the folder holds no .demo files"


def test_folder_of_files_that_disagree(tmp_path):
    write(tmp_path / "a.demo", [2], seed=0)
    other = BehaviorSpec((ObservationSpec((4,), "v"),), SPEC.action_spec)
    with DemonstrationWriter(str(tmp_path / "b.demo"), "W", other) as writer:
        writer.write_episode(Records(
            [np.zeros((2, 4), np.float32)], np.zeros(2, np.float32), np.array([0, 1], bool),
            np.zeros(2, bool), np.zeros(2, np.int32), np.zeros((2, 2), bool),
            np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int32), np.ones(2, bool),
            np.zeros(2, np.int32), np.zeros(2, np.float32)))
    assert one_line_error(tmp_path) == (
        f"{tmp_path / 'b.demo'}: observation 0 is 'v' [4] in the demonstrations but 'v' [3] "
        f"in the first file {tmp_path / 'a.demo'}")
