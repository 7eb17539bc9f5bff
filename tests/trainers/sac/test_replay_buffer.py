"""The SAC replay buffer: observations stored once, wrap-around, sampling, save/restore."""
import numpy as np
import pytest

from tftrainers.envs.base import ActionSpec, ActionTuple, BehaviorSpec, ObservationKind, \
    ObservationSpec
from tftrainers.processing import LogProbs, Trajectory
from tftrainers.trainers.sac.replay_buffer import ReplayBuffer

SPEC = BehaviorSpec([ObservationSpec((2,), "v"), ObservationSpec((2, 2, 1), "img",
                                                                  ObservationKind.VISUAL)],
                    ActionSpec(1, (3,)))


def trajectory(first, length, done=False, interrupted=False):
    """Observations first, first+1, ... (next_obs first+length); action = reward = step."""
    steps = np.arange(first, first + length, dtype=np.float32)
    vec = np.stack([steps, -steps], axis=1)
    img = np.zeros((length, 2, 2, 1), np.float32) + (steps % 256 / 255.0)[:, None, None, None]
    nxt = float(first + length)
    return Trajectory(
        obs=[vec, img], next_obs=[np.array([nxt, -nxt], np.float32),
                                  np.full((2, 2, 1), nxt % 256 / 255.0, np.float32)],
        actions=ActionTuple(steps[:, None], (steps % 3).astype(np.int32)[:, None]),
        log_probs=LogProbs(np.zeros((length, 1), np.float32), np.zeros((length, 1), np.float32)),
        action_mask=np.ones((length, 3), np.float32), rewards=steps.copy(),
        values={}, memory=None, group_id=np.zeros(length, np.int32),
        group_reward=np.full(length, 0.5, np.float32), done=done, interrupted=interrupted,
        agent_id=0)


def test_next_observation_is_read_from_the_next_row():
    buffer = ReplayBuffer.for_spec(SPEC, 16)
    buffer.add_trajectory(trajectory(0, 3, done=True))
    buffer.add_trajectory(trajectory(10, 2, interrupted=True))
    assert len(buffer) == 5 and buffer.size == 7  # 5 transitions + 2 next-obs rows
    rows = np.arange(7)[buffer.valid[:7]]
    b = buffer.batch(rows)
    np.testing.assert_array_equal(b.obs[0][:, 0], [0, 1, 2, 10, 11])
    np.testing.assert_array_equal(b.next_obs[0][:, 0], [1, 2, 3, 11, 12])
    np.testing.assert_allclose(b.next_obs[1][:, 0, 0, 0], np.array([1, 2, 3, 11, 12]) / 255)
    np.testing.assert_array_equal(b.reward, [0.5, 1.5, 2.5, 10.5, 11.5])  # env + group
    np.testing.assert_array_equal(b.done, [0, 0, 1, 0, 0])  # interrupted: not done
    np.testing.assert_array_equal(b.continuous[:, 0], [0, 1, 2, 10, 11])
    np.testing.assert_array_equal(b.discrete[:, 0], [0, 1, 2, 1, 2])
    assert buffer.obs[1].dtype == np.uint8  # images a quarter of float32


def test_wrap_around_replaces_the_oldest_and_keeps_next_rows():
    buffer = ReplayBuffer.for_spec(SPEC, 8)
    buffer.add_trajectory(trajectory(0, 4))      # rows 0-4
    buffer.add_trajectory(trajectory(20, 3))     # rows 5,6,7,0 (wraps over the oldest)
    assert buffer.size == 8 and buffer.position == 1
    assert len(buffer) == 3 + 3  # transitions 1,2,3 of the first and 20,21,22
    rows = np.flatnonzero(buffer.valid)
    b = buffer.batch(rows)
    pairs = sorted(zip(b.obs[0][:, 0], b.next_obs[0][:, 0]))
    assert pairs == [(1, 2), (2, 3), (3, 4), (20, 21), (21, 22), (22, 23)]


def test_a_trajectory_longer_than_the_buffer_keeps_its_newest_steps():
    buffer = ReplayBuffer.for_spec(SPEC, 5)
    buffer.add_trajectory(trajectory(0, 9, done=True))
    b = buffer.batch(np.flatnonzero(buffer.valid))
    assert sorted(b.obs[0][:, 0]) == [5, 6, 7, 8] and b.done.sum() == 1


def test_sampling_is_uniform_over_transitions_only():
    buffer = ReplayBuffer.for_spec(SPEC, 64)
    for first in range(0, 40, 4):
        buffer.add_trajectory(trajectory(first, 3))   # 10 trajectories: 30 transitions
    rows = buffer.sample(30000, np.random.default_rng(0))
    assert buffer.valid[rows].all()
    counts = np.bincount(rows, minlength=64)[buffer.valid]
    assert len(counts) == 30 and counts.min() > 850 and counts.max() < 1150  # ~1000 each


def test_save_and_load_round_trip(tmp_path):
    buffer = ReplayBuffer.for_spec(SPEC, 8)
    buffer.add_trajectory(trajectory(0, 4))
    buffer.add_trajectory(trajectory(20, 3, done=True))
    path = buffer.save(str(tmp_path / "buffer.npz"))
    assert [p.name for p in tmp_path.iterdir()] == ["buffer.npz"]  # no temporary left
    restored = ReplayBuffer.for_spec(SPEC, 8)
    restored.load(path)
    assert len(restored) == len(buffer)
    pairs = lambda b: sorted(zip(b.obs[0][:, 0], b.next_obs[0][:, 0], b.done))
    assert pairs(restored.batch(np.flatnonzero(restored.valid))) == \
        pairs(buffer.batch(np.flatnonzero(buffer.valid)))
    # Loaded into a smaller buffer: the newest rows, still consistent.
    small = ReplayBuffer.for_spec(SPEC, 5)
    small.load(path)
    assert pairs(small.batch(np.flatnonzero(small.valid))) == [(20, 21, 0), (21, 22, 0),
                                                              (22, 23, 1)]


def test_load_refuses_another_layout(tmp_path):
    path = ReplayBuffer.for_spec(SPEC, 8).save(str(tmp_path / "b.npz"))
    other = BehaviorSpec([ObservationSpec((3,), "v"), ObservationSpec((2, 2, 1), "img",
                                                                      ObservationKind.VISUAL)],
                         ActionSpec(1, (3,)))
    with pytest.raises(ValueError, match=r"b.npz: obs_0 is float32\[2\] per row, this "
                                         r"behavior needs float32\[3\]"):
        ReplayBuffer.for_spec(other, 8).load(path)


def test_memory_per_million_transitions():
    """Computed from the layout and checked against a real allocation (see the docs)."""
    ball = BehaviorSpec([ObservationSpec((8,), "v")], ActionSpec(2, ()))
    buffer = ReplayBuffer.for_spec(ball, 1000)
    # 8 floats obs + 2 floats action + reward + done + valid; no second copy of obs.
    assert buffer.bytes_per_row == 8 * 4 + 2 * 4 + 4 + 1 + 1
    visual = BehaviorSpec([ObservationSpec((84, 84, 3), "cam", ObservationKind.VISUAL)],
                          ActionSpec(0, (3, 3)))
    buffer = ReplayBuffer.for_spec(visual, 1000)
    assert buffer.bytes_per_row == 84 * 84 * 3 + 2 * 4 + 6 + 4 + 1 + 1


def test_images_that_are_not_8_bit_levels_are_kept_as_floats():
    buffer = ReplayBuffer.for_spec(SPEC, 16)
    buffer.add_trajectory(trajectory(0, 3))
    odd = trajectory(5, 2)
    odd.obs[1][:] = 0.123456  # not k / 255
    buffer.add_trajectory(odd)
    assert buffer.obs[1].dtype == np.float32
    b = buffer.batch(np.flatnonzero(buffer.valid))
    np.testing.assert_allclose(b.obs[1][:3, 0, 0, 0], np.array([0, 1, 2]) / 255, atol=1e-7)
    np.testing.assert_allclose(b.obs[1][3:, 0, 0, 0], 0.123456, atol=1e-7)
