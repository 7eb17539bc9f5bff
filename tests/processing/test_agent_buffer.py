"""AgentBuffer: typed keys, sequence padding and mask, whole-sequence shuffles, minibatches."""
import numpy as np
import pytest

from tftrainers.processing import (AgentBuffer, BufferKey, StreamField, next_obs_key, obs_key,
                                   stream_key)

RETURNS = stream_key(StreamField.RETURNS, "extrinsic")


def trajectory_fields(first_step, n, memory_size=2):
    """Fields of n steps whose values are their global step numbers (first_step + t)."""
    steps = np.arange(first_step, first_step + n, dtype=np.float32)
    return {
        obs_key(0): np.stack([steps, -steps], axis=1),  # [n, 2]
        next_obs_key(0): np.stack([steps + 1, -steps - 1], axis=1),
        BufferKey.ACTION_MASK: np.zeros((n, 3), np.float32),
        BufferKey.DISCRETE_ACTION: np.full((n, 1), 2, np.int32),
        BufferKey.MEMORY: np.stack([steps] * memory_size, axis=1),
        RETURNS: steps * 10,
    }


def test_len_and_fields_without_sequences():
    buffer = AgentBuffer()
    buffer.append(trajectory_fields(0, 5))
    buffer.append(trajectory_fields(100, 3))
    assert len(buffer) == 8 and buffer.num_sequences == 8
    np.testing.assert_array_equal(buffer[RETURNS], [0, 10, 20, 30, 40, 1000, 1010, 1020])
    np.testing.assert_array_equal(buffer[BufferKey.MASK], np.ones(8))
    assert buffer[obs_key(0)].shape == (8, 2)
    assert buffer[BufferKey.DISCRETE_ACTION].dtype == np.int32
    assert set(buffer.keys()) == set(trajectory_fields(0, 1)) | {BufferKey.MASK}


def test_sequences_pad_the_end_and_mask_padding():
    buffer = AgentBuffer(sequence_length=4)
    buffer.append(trajectory_fields(0, 5))  # 4 + 1 real steps -> 2 sequences
    buffer.append(trajectory_fields(100, 3))  # 3 real steps -> 1 sequence
    buffer.append(trajectory_fields(200, 4))  # exactly 1 sequence, no padding
    assert len(buffer) == 16 and buffer.num_sequences == 4
    np.testing.assert_array_equal(buffer[BufferKey.MASK],
                                  [1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1])
    np.testing.assert_array_equal(buffer[RETURNS],
                                  [0, 10, 20, 30, 40, 0, 0, 0, 1000, 1010, 1020, 0,
                                   2000, 2010, 2020, 2030])
    np.testing.assert_array_equal(buffer[obs_key(0)][4:8], [[4, -4], [0, 0], [0, 0], [0, 0]])
    # Padded steps keep every action allowed; real ones keep what was appended.
    np.testing.assert_array_equal(buffer[BufferKey.ACTION_MASK][:, 0],
                                  [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0])
    # Each sequence starts on a real step, so its first memory is the LSTM's start state.
    np.testing.assert_array_equal(buffer[BufferKey.MEMORY][::4, 0], [0, 4, 100, 200])


def test_shuffle_keeps_sequences_whole_and_fields_aligned():
    buffer = AgentBuffer(sequence_length=4)
    for start, n in [(0, 5), (100, 3), (200, 8), (300, 6)]:
        buffer.append(trajectory_fields(start, n))
    before = {key: buffer[key].copy() for key in buffer.keys()}
    buffer.shuffle(rng=np.random.default_rng(3))
    assert len(buffer) == 28  # 5, 3, 8, 6 steps -> 2 + 1 + 2 + 2 sequences of 4
    ret = buffer[RETURNS].reshape(-1, 4)
    mask = buffer[BufferKey.MASK].reshape(-1, 4)
    old_ret = before[RETURNS].reshape(-1, 4)
    # The same sequences, in another order, each intact.
    order = [int(np.flatnonzero((old_ret == row).all(axis=1) &
                                (before[BufferKey.MASK].reshape(-1, 4) == m).all(axis=1))[0])
             for row, m in zip(ret, mask)]
    assert sorted(order) == list(range(7)) and order != list(range(7))
    for key, old in before.items():
        np.testing.assert_array_equal(buffer[key].reshape(7, 4, *old.shape[1:]),
                                      old.reshape(7, 4, *old.shape[1:])[order])


def test_shuffle_single_steps_is_a_permutation_and_reproducible():
    a, b = AgentBuffer(), AgentBuffer()
    for buffer in (a, b):
        buffer.append(trajectory_fields(0, 50))
        buffer.shuffle(1, np.random.default_rng(7))
    np.testing.assert_array_equal(a[RETURNS], b[RETURNS])
    assert sorted(a[RETURNS].tolist()) == list(range(0, 500, 10))
    np.testing.assert_array_equal(a[obs_key(0)][:, 0] * 10, a[RETURNS])
    with pytest.raises(ValueError, match="sequence_length"):
        a.shuffle(4, np.random.default_rng(0))


def test_minibatch_sizes():
    buffer = AgentBuffer()
    buffer.append(trajectory_fields(0, 10))
    assert [len(b[RETURNS]) for b in buffer.minibatches(4)] == [4, 4]
    assert [len(b[RETURNS]) for b in buffer.minibatches(4, drop_remainder=False)] == [4, 4, 2]
    batch = next(buffer.minibatches(4))
    assert set(batch) == set(buffer.keys())
    assert batch[obs_key(0)].shape == (4, 2) and batch[BufferKey.MEMORY].shape == (4, 2)

    sequences = AgentBuffer(sequence_length=4)
    sequences.append(trajectory_fields(0, 30))  # 8 sequences, 32 steps
    # 10 is rounded down to whole sequences: 2 sequences of 4 steps per batch.
    sizes = [len(b[BufferKey.MASK]) for b in sequences.minibatches(10, sequence_length=4)]
    assert sizes == [8, 8, 8, 8]
    with pytest.raises(ValueError, match="smaller than sequence_length"):
        next(sequences.minibatches(3))


def test_sample_minibatch_draws_whole_sequences():
    buffer = AgentBuffer(sequence_length=4)
    buffer.append(trajectory_fields(0, 9))
    batch = buffer.sample_minibatch(8, np.random.default_rng(0))
    ret = batch[RETURNS].reshape(2, 4)
    for row in ret:
        assert row[0] % 40 == 0  # starts a sequence
    assert batch[BufferKey.MASK].shape == (8,)


def test_truncate_keeps_newest_whole_sequences():
    buffer = AgentBuffer(sequence_length=2)
    buffer.append(trajectory_fields(0, 6))
    buffer.append(trajectory_fields(100, 3))  # padded to 4
    buffer.truncate(7)  # rounded down to 6 steps
    assert len(buffer) == 6
    np.testing.assert_array_equal(buffer[RETURNS], [40, 50, 1000, 1010, 1020, 0])
    buffer.truncate(100)
    assert len(buffer) == 6
    buffer.reset()
    assert len(buffer) == 0 and buffer.keys() == []


def test_lazy_concatenation_and_extend():
    buffer = AgentBuffer()
    for start in range(0, 100, 10):
        buffer.append(trajectory_fields(start, 10))
    np.testing.assert_array_equal(buffer[RETURNS], np.arange(100) * 10)
    other = AgentBuffer()
    other.append(trajectory_fields(1000, 2))
    buffer.extend(other)
    assert len(buffer) == 102
    np.testing.assert_array_equal(buffer[RETURNS][-2:], [10000, 10010])
    with pytest.raises(ValueError, match="sequence_length"):
        buffer.extend(AgentBuffer(sequence_length=2))


def test_setitem_whole_field_for_normalised_advantages():
    buffer = AgentBuffer()
    buffer.append(trajectory_fields(0, 4))
    adv = buffer[RETURNS]
    buffer[BufferKey.ADVANTAGES] = (adv - adv.mean()) / adv.std()
    assert BufferKey.ADVANTAGES in buffer
    np.testing.assert_allclose(buffer[BufferKey.ADVANTAGES].mean(), 0.0, atol=1e-6)
    with pytest.raises(ValueError, match="holds 4 steps"):
        buffer[BufferKey.DONE] = np.zeros(3)


def test_keys_are_typed_and_fields_consistent():
    buffer = AgentBuffer()
    with pytest.raises(KeyError, match="BufferKey"):
        buffer.append({"rewards": np.zeros(3)})
    with pytest.raises(KeyError, match="BufferKey"):
        buffer[("obs", 0)] = np.zeros(3)
    buffer.append(trajectory_fields(0, 3))
    with pytest.raises(KeyError, match="missing"):
        buffer.append({RETURNS: np.zeros(2)})
    with pytest.raises(ValueError, match="same number of steps"):
        fields = trajectory_fields(0, 3)
        fields[RETURNS] = np.zeros(2)
        buffer.append(fields)
    with pytest.raises(ValueError, match="shape"):
        fields = trajectory_fields(0, 3)
        fields[obs_key(0)] = np.zeros((3, 5))
        buffer.append(fields)
    with pytest.raises(KeyError, match="no field"):
        buffer[BufferKey.DONE]
    assert len(buffer) == 3


def test_trajectory_to_buffer_round_trip():
    from tftrainers.envs.base import ActionTuple
    from tftrainers.processing import LogProbs, Trajectory
    t = Trajectory(
        obs=[np.arange(6, dtype=np.float32).reshape(3, 2)], next_obs=[np.array([6, 7], np.float32)],
        actions=ActionTuple(np.zeros((3, 1), np.float32), np.zeros((3, 0), np.int32)),
        log_probs=LogProbs(np.zeros((3, 1), np.float32), np.zeros((3, 0), np.float32)),
        action_mask=np.zeros((3, 0), np.float32), rewards=np.array([1, 2, 3], np.float32),
        values={"extrinsic": np.zeros(3, np.float32)}, memory=None,
        group_id=np.zeros(3, np.int32), group_reward=np.zeros(3, np.float32),
        done=True, interrupted=False, agent_id=4)
    buffer = AgentBuffer(sequence_length=2)
    buffer.append(t.to_fields())
    np.testing.assert_array_equal(buffer[next_obs_key(0)], [[2, 3], [4, 5], [6, 7], [0, 0]])
    np.testing.assert_array_equal(buffer[BufferKey.DONE], [0, 0, 1, 0])
    np.testing.assert_array_equal(buffer[stream_key(StreamField.VALUES, "extrinsic")], 0)
    assert buffer[BufferKey.CONTINUOUS_ACTION].shape == (4, 1)
    assert BufferKey.MEMORY not in buffer
