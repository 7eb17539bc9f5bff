"""SAC with memory: sequence sampling (known answers), the memory columns saved and restored,
export with recurrent_in / recurrent_out, and learning a task only memory solves."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.evaluate import evaluate, make_policy
from tftrainers.envs.base import ActionSpec, ActionTuple, BehaviorSpec, ObservationSpec
from tftrainers.export.loading import OnnxPolicy
from tftrainers.processing import LogProbs, Trajectory
from tftrainers.settings import RunOptions
from tftrainers.trainers.sac.replay_buffer import ReplayBuffer
from tests.regression.harness import VARIANTS
from tests.regression.simple_envs import LineEnv, last_mean
from tests.trainers.helpers import drive, make_trainer

SPEC = BehaviorSpec([ObservationSpec((2,), "v")], ActionSpec(1, (3,)))
SEQ = 3


def trajectory(first, length, done=False, interrupted=False, agent_id=0):
    """Observations first, first+1, ... (next_obs first+length); the policy's memory at
    step t is (obs + 0.5, -(obs + 0.5)); action 2 is masked at every step."""
    steps = np.arange(first, first + length, dtype=np.float32)
    nxt = float(first + length)
    mask = np.ones((length, 3), np.float32)
    mask[:, 2] = 0.0
    return Trajectory(
        obs=[np.stack([steps, -steps], axis=1)], next_obs=[np.array([nxt, -nxt], np.float32)],
        actions=ActionTuple(steps[:, None], (steps % 2).astype(np.int32)[:, None]),
        log_probs=LogProbs(np.zeros((length, 1), np.float32), np.zeros((length, 1), np.float32)),
        action_mask=mask, rewards=steps + 100.0, values={},
        memory=np.stack([steps + 0.5, -(steps + 0.5)], axis=1),
        group_id=np.zeros(length, np.int32), group_reward=np.zeros(length, np.float32),
        done=done, interrupted=interrupted, agent_id=agent_id)


def critic_memory(first, length):
    steps = np.arange(first, first + length, dtype=np.float32)
    return np.stack([steps + 0.25, steps - 0.25], axis=1)


def filled(capacity=32):
    buffer = ReplayBuffer.for_spec(SPEC, capacity, memory_size=2, sequence_length=SEQ)
    buffer.add_trajectory(trajectory(0, 5, done=True), critic_memory(0, 5))  # rows 0-4, 5
    buffer.add_trajectory(trajectory(10, 2, interrupted=True), critic_memory(10, 2))  # 6-7, 8
    return buffer


def test_sequences_start_aligned_never_cross_a_trajectory_end_and_carry_their_memory():
    buffer = filled()
    starts = np.flatnonzero(buffer.valid & buffer.sequence_start)
    np.testing.assert_array_equal(starts, [0, 3, 6])  # steps 0 and 3 of the first, 0 of the 2nd
    b = buffer.sequences(starts)
    np.testing.assert_array_equal(b.mask, [1, 1, 1, 1, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(b.obs[0][:, 0], [0, 1, 2, 3, 4, 0, 10, 11, 0])
    # The last real step's next observation is its trajectory's next_obs; padding is zeros.
    np.testing.assert_array_equal(b.next_obs[0][:, 0], [1, 2, 3, 4, 5, 0, 11, 12, 0])
    np.testing.assert_array_equal(b.done, [0, 0, 0, 0, 1, 0, 0, 0, 0])  # interrupted: 0
    np.testing.assert_array_equal(b.reward, [100, 101, 102, 103, 104, 0, 110, 111, 0])
    np.testing.assert_array_equal(b.continuous[:, 0], [0, 1, 2, 3, 4, 0, 10, 11, 0])
    # Padding allows every action (finite logits), real steps keep the mask they saw.
    np.testing.assert_array_equal(b.action_mask[:, 2], [0, 0, 0, 0, 0, 1, 0, 0, 1])
    # The LSTMs start from what was stored at each sequence's first step.
    np.testing.assert_array_equal(b.memory, [[0.5, -0.5], [3.5, -3.5], [10.5, -10.5]])
    np.testing.assert_array_equal(b.critic_memory, [[0.25, -0.25], [3.25, 2.75],
                                                    [10.25, 9.75]])


def test_sampling_is_uniform_over_sequence_starts():
    buffer = filled()
    drawn = buffer.sample_sequences(6000, np.random.default_rng(0))
    rows, counts = np.unique(drawn, return_counts=True)
    np.testing.assert_array_equal(rows, [0, 3, 6])
    assert np.all(np.abs(counts / 6000 - 1 / 3) < 0.03), counts


def test_wrap_around_keeps_sequences_of_the_rows_left():
    buffer = filled(capacity=12)
    # 4 steps and a next-obs row: rows 9, 10, 11, 0 and 1, over the first trajectory's start.
    buffer.add_trajectory(trajectory(20, 4, done=True), critic_memory(20, 4))
    starts = np.flatnonzero(buffer.valid & buffer.sequence_start)
    np.testing.assert_array_equal(starts, [0, 3, 6, 9])  # row 0: step 3 of the new one
    b = buffer.sequences(np.array([9, 0, 3]))
    np.testing.assert_array_equal(b.obs[0][:, 0], [20, 21, 22, 23, 0, 0, 3, 4, 0])
    np.testing.assert_array_equal(b.next_obs[0][:, 0], [21, 22, 23, 24, 0, 0, 4, 5, 0])
    np.testing.assert_array_equal(b.mask, [1, 1, 1, 1, 0, 0, 1, 1, 0])
    np.testing.assert_array_equal(b.done, [0, 0, 0, 1, 0, 0, 0, 1, 0])
    np.testing.assert_array_equal(b.memory[:, 0], [20.5, 23.5, 3.5])


def test_memory_columns_are_saved_and_restored(tmp_path):
    buffer = filled()
    path = buffer.save(str(tmp_path / "buffer.npz"))
    other = ReplayBuffer.for_spec(SPEC, 32, memory_size=2, sequence_length=SEQ)
    other.load(path)
    restored = other.columns()
    assert {"memory", "critic_memory", "remaining", "sequence_start"} <= set(restored)
    for key, array in buffer.columns().items():
        np.testing.assert_array_equal(restored[key], array, err_msg=key)
    memoryless = ReplayBuffer.for_spec(SPEC, 32)
    with pytest.raises(ValueError, match=r"buffer.npz: the saved replay buffer has fields .*"
                                         r"'critic_memory'.*this behavior needs"):
        memoryless.load(path)


def sac_settings(name, **behavior):
    """The memory task's config (``benchmarks/regression_tasks.py --variants
    sac_memory_discrete`` measures it on more seeds)."""
    data = {**VARIANTS["sac_memory_discrete"].config, **behavior}
    return RunOptions.from_dict({"behaviors": {name: data}}).settings_for(name)


def test_recurrent_policy_exports_memory_in_and_out(tmp_path):
    env = LineEnv(action_sizes=(1, 1), memory=True, num_agents=3, seed=0, step_size=0.5)
    env.reset()
    trainer = make_trainer(tmp_path, env, "1D", sac_settings("1D", max_steps=400),
                           jit_compile=False)
    drive(env, trainer, 60)
    assert trainer.gradient_steps > 0
    trainer.save()
    policy = OnnxPolicy(os.path.join(str(tmp_path), "1D.onnx"), env.behavior_specs["1D"],
                        deterministic=True)
    assert policy.memory_size == 16
    actor = trainer.policy.actor
    memories = {}  # per agent id (a new episode is a new id here, from zeros)
    for _ in range(4):  # the exported graph carries the memory as the actor does
        decision, _ = env.get_steps("1D")
        memory = np.stack([memories.get(i, np.zeros(16, np.float32))
                           for i in decision.agent_id.tolist()])
        out = actor.deterministic([tf.constant(o) for o in decision.obs], None,
                                  tf.constant(memory))
        memories.update(zip(decision.agent_id.tolist(), out["memory"].numpy()))
        actions = policy("1D", decision)
        np.testing.assert_allclose(actions.continuous, out["env_continuous_action"].numpy(),
                                   atol=1e-5)
        np.testing.assert_array_equal(actions.discrete, out["discrete_action"].numpy())
        env.set_actions("1D", actions)
        env.step()


def test_sac_with_memory_solves_a_task_only_memory_can(tmp_path):
    # ML-Agents' MemoryEnvironment: the goal's side is shown for the first 3 steps only and
    # the end is 5 steps away, so the last steps need it remembered; a policy without memory
    # ends on the wrong side about half the time (about 0 on average, -0.13 measured with
    # this config and no memory), one with memory collects 1.02.
    env = LineEnv(action_sizes=(0, 1), memory=True, num_agents=4, seed=0)
    env.reset()
    trainer = make_trainer(tmp_path, env, "1D", sac_settings("1D"), seed=0, jit_compile=False)
    while not trainer.done:
        drive(env, trainer, 50)
    learning = last_mean(env.final_rewards, 30)
    trainer.save()
    # Scored by the evaluator (tftrainers-evaluate's code) on fresh goals.
    random, trained = score("random"), score(os.path.join(str(tmp_path), "1D.onnx"))
    assert trained > 0.8 and trained > random + 0.7, (trained, random, learning)


def score(policy_name):
    # One episode per agent: this env gives each new episode a new agent id, and the
    # evaluator counts episodes of the agents present at the start.
    env = LineEnv(action_sizes=(0, 1), memory=True, num_agents=40, seed=5)
    (result,) = evaluate(env, make_policy(policy_name, env, seed=3), episodes=40).values()
    return result["mean_reward"]
