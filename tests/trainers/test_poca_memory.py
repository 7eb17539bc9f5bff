"""MA-POCA with memory: the critic's value and baseline memories replayed over each agent's
trajectories as stepping them would, an absent member still changes nothing, one trace of
the update, restore, export with recurrent_in/out and evaluation, and a cue only memory can
recall learned."""
import json
import os
from dataclasses import replace

import numpy as np
import onnx
import yaml

from tftrainers.cli import learn_main
from tftrainers.envs import ActionSpec, ActionTuple, ObservationSpec, make
from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.networks.body import run_lstm
from tftrainers.processing import (BufferKey, LogProbs, StreamField, Trajectory, obs_key,
                                   stream_key, team_obs_key)
from tftrainers.trainers.poca.optimizer import GroupBatch, group_inputs

from .helpers import drive, make_trainer, trainer_settings, variables

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "poca")
MEMORY = {"memory": {"memory_size": 8, "sequence_length": 4}}


class Recall(GroupAreaEnv):
    """Two members; at the first of four steps each sees its own cue (one of two), then
    zeros. At the last step each picks a side: the group reward is the fraction of members
    whose pick matches their own cue. The observations at the pick do not depend on the
    cue, so without memory a policy cannot beat chance (0.5)."""

    name = "Recall"
    agents_per_area = 2
    default_num_areas = 32
    max_episode_steps = 4
    STEPS = 4

    def __init__(self, seed=0, num_areas=None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.cue = np.zeros(self.n_agents, np.int64)
        self.clock = np.zeros(self.num_areas, np.int64)
        self.picks = self.right = 0

    def observation_specs(self):
        return [ObservationSpec((2 + self.STEPS,), "cue_then_clock")]

    def action_spec(self):
        return ActionSpec.create_discrete([2])

    def _reset_agents(self, rows):
        self.cue[rows] = self.rng.integers(0, 2, len(rows))
        self.clock[np.unique(rows // 2)] = 0

    def _act_group(self, rows, actions):
        area = rows // 2
        acting = np.zeros(self.num_areas, bool)
        acting[area] = True
        pick = self.clock[area] == self.STEPS - 1
        right = pick & (actions.discrete[:, 0] == self.cue[rows])
        group_reward = np.zeros(self.num_areas, np.float32)
        np.add.at(group_reward, area, right / 2.0)
        self.picks += int(pick.sum())
        self.right += int(right.sum())
        self.clock[acting] += 1
        done = acting & (self.clock == self.STEPS)
        return (np.zeros(len(rows), np.float32), group_reward, np.zeros(len(rows), bool), done)

    def _observe(self, rows):
        clock = self.clock[rows // 2]
        cue = np.eye(2, dtype=np.float32)[self.cue[rows]] * (clock == 0)[:, None]
        return [np.concatenate([cue, np.eye(self.STEPS, dtype=np.float32)[
            np.minimum(clock, self.STEPS - 1)]], axis=1)]


def memory_trainer(tmp_path, seed=0, **kwargs):
    env = Recall(num_areas=1)
    settings = trainer_settings("Recall", trainer_type="poca", network_settings=MEMORY)
    trainer = make_trainer(tmp_path, env, "Recall", settings, seed=seed, jit_compile=False)
    trainer.optimizer.observe_group_size(3)
    return trainer


def trajectory(rng, agent, length, done=False, group_done=False, left_at=None):
    """Random steps with 2 teammate slots; the second teammate leaves at ``left_at``."""
    mask = np.ones((length, 2), np.float32)
    if left_at is not None:
        mask[left_at:, 1] = 0.0
    zeros = np.zeros((length, 0), np.float32)
    return Trajectory(
        obs=[rng.normal(size=(length, 6)).astype(np.float32)],
        next_obs=[rng.normal(size=6).astype(np.float32)],
        actions=ActionTuple(zeros, rng.integers(0, 2, (length, 1)).astype(np.int32)),
        log_probs=LogProbs(zeros, np.zeros((length, 1), np.float32)),
        action_mask=np.ones((length, 2), np.float32),
        rewards=rng.normal(size=length).astype(np.float32), values={},
        memory=np.zeros((length, 8), np.float32), group_id=np.ones(length, np.int32),
        group_reward=np.zeros(length, np.float32), done=done, interrupted=False,
        agent_id=agent, teammate_obs=[rng.normal(size=(length, 2, 6)).astype(np.float32)],
        teammate_actions=ActionTuple(np.zeros((length, 2, 0), np.float32),
                                     rng.integers(0, 2, (length, 2, 1)).astype(np.int32)),
        teammate_mask=mask, groupmate_rewards=np.zeros(length, np.float32),
        next_teammate_obs=[rng.normal(size=(2, 6)).astype(np.float32)],
        next_teammate_mask=mask[-1].copy(), group_done=group_done)


def batches(trajectories):
    """The optimizer's GroupBatch of every step and of the step after each trajectory."""
    cat = np.concatenate
    steps = GroupBatch(
        obs=[cat([t.obs[0] for t in trajectories])],
        team_obs=[cat([t.teammate_obs[0] for t in trajectories])],
        team_continuous=cat([t.teammate_actions.continuous for t in trajectories]),
        team_discrete=cat([t.teammate_actions.discrete for t in trajectories]),
        team_mask=cat([t.teammate_mask for t in trajectories]))
    n = len(trajectories)
    after = GroupBatch(
        obs=[np.stack([t.next_obs[0] for t in trajectories])],
        team_obs=[np.stack([t.next_teammate_obs[0] for t in trajectories])],
        team_continuous=np.zeros((n, 2, 0), np.float32),
        team_discrete=np.zeros((n, 2, 1), np.int32),
        team_mask=np.stack([t.next_teammate_mask for t in trajectories]))
    return steps, after


def step_once(critic, features, memory):
    """One step of the critic's LSTM from ``memory``: the extrinsic value and the state
    after it. The features' last column is the member count, which skips the LSTM and goes
    to the heads (as ML-Agents' MultiAgentNetworkBody)."""
    out, memory = run_lstm(critic.lstm_cell, None, features[:, :-1], memory, 1)
    heads = critic.value_heads(np.concatenate([out, features[:, -1:]], axis=1))
    return float(heads["extrinsic"][0]), memory


def stepped(critic, t, value_memory, baseline_memory):
    """What one step at a time gives for trajectory ``t`` (with the step after it for V):
    values [T + 1], baselines [T], the state before every step [T, 2 m] and after the
    last step (value, baseline), each [1, m]."""
    obs = [np.concatenate([t.obs[0], t.next_obs[0][None]])]
    team = [np.concatenate([t.teammate_obs[0], t.next_teammate_obs[0][None]])]
    mask = np.concatenate([t.teammate_mask, t.next_teammate_mask[None]])
    v_features = critic.value_features(*group_inputs(obs, team, mask))
    b_features = critic.baseline_features([t.obs[0]], t.teammate_obs,
                                          t.teammate_actions.continuous,
                                          t.teammate_actions.discrete, t.teammate_mask)
    values, baselines, before = [], [], []
    for i in range(len(t) + 1):
        if i < len(t):
            before.append(np.concatenate([value_memory, baseline_memory], axis=1)[0])
            baseline, baseline_memory = step_once(critic, b_features[i:i + 1],
                                                  baseline_memory)
            baselines.append(baseline)
        value, next_memory = step_once(critic, v_features[i:i + 1], value_memory)
        values.append(value)
        if i < len(t):
            value_memory = next_memory
    return np.array(values), np.array(baselines), np.array(before), (value_memory,
                                                                      baseline_memory)


def test_value_and_baseline_memories_replay_each_agents_trajectories_as_stepping(tmp_path):
    trainer = memory_trainer(tmp_path)
    optimizer, critic = trainer.optimizer, trainer.optimizer.critic
    rng = np.random.default_rng(0)
    zeros = np.zeros((1, 8), np.float32)
    # Agent 0: cut by time_horizon, then its episode (and its group's) ends; agent 1 dies
    # (its group goes on) after a teammate left; agent 2 is cut and continues next call.
    a1, a2 = trajectory(rng, 0, 3), trajectory(rng, 0, 2, done=True, group_done=True)
    b1 = trajectory(rng, 1, 5, done=True, left_at=2)
    c1 = trajectory(rng, 2, 2, left_at=0)
    first = optimizer.group_estimates([a1, b1, c1, a2], *batches([a1, b1, c1, a2]))
    c2, a3 = trajectory(rng, 2, 3), trajectory(rng, 0, 2)
    second = optimizer.group_estimates([c2, a3], *batches([c2, a3]))

    expected = {}
    expected["a1"] = stepped(critic, a1, zeros, zeros)
    expected["b1"] = stepped(critic, b1, zeros, zeros)
    expected["c1"] = stepped(critic, c1, zeros, zeros)
    expected["a2"] = stepped(critic, a2, *expected["a1"][3])  # where a1 left off
    expected["c2"] = stepped(critic, c2, *expected["c1"][3])  # across calls too
    expected["a3"] = stepped(critic, a3, zeros, zeros)  # a2 ended its episode: forgotten
    for estimates, names in ((first, ["a1", "b1", "c1", "a2"]), (second, ["c2", "a3"])):
        lengths = [len(expected[n][1]) for n in names]
        split = np.cumsum(lengths)[:-1]
        for j, (name, values, baselines, memory) in enumerate(zip(
                names, np.split(estimates.values["extrinsic"], split),
                np.split(estimates.baselines["extrinsic"], split),
                np.split(estimates.memory, split))):
            want_values, want_baselines, want_memory, _ = expected[name]
            np.testing.assert_allclose(values, want_values[:-1], atol=1e-5, err_msg=name)
            np.testing.assert_allclose(baselines, want_baselines, atol=1e-5, err_msg=name)
            np.testing.assert_allclose(memory, want_memory, atol=1e-5, err_msg=name)
            # V after the last step, from the state it left (a member that died included).
            np.testing.assert_allclose(estimates.bootstrap["extrinsic"][j], want_values[-1],
                                       atol=1e-5, err_msg=name)
    assert not np.allclose(first.memory, 0.0)

    # The update buffer holds those states at every real step, each trajectory padded to
    # whole sequences of 4, so each sequence starts from the state stored at its first step.
    fresh = memory_trainer(tmp_path / "fresh")
    fresh.compute_targets([a1, b1, c1, a2])
    buffer = fresh.buffer
    real = buffer[BufferKey.MASK] > 0
    assert len(real) == 4 + 8 + 4 + 4 and real.sum() == 12
    np.testing.assert_allclose(buffer[BufferKey.CRITIC_MEMORY][real], first.memory, atol=1e-6)
    np.testing.assert_allclose(buffer[stream_key(StreamField.BASELINES, "extrinsic")][real],
                               first.baselines["extrinsic"], atol=1e-6)
    # The update's reading: whole sequences from those stored states give the same V and b_i.
    critic = fresh.optimizer.critic
    value_memory, baseline_memory = np.split(buffer[BufferKey.CRITIC_MEMORY][::4], 2, axis=1)
    obs, team = [buffer[obs_key(0)]], [buffer[team_obs_key(0)]]
    values = critic.value(*group_inputs(obs, team, buffer[BufferKey.TEAM_MASK]), value_memory, 4)
    baselines = critic.baseline(obs, team, buffer[BufferKey.TEAM_CONTINUOUS_ACTION],
                                buffer[BufferKey.TEAM_DISCRETE_ACTION],
                                buffer[BufferKey.TEAM_MASK], baseline_memory, 4)
    np.testing.assert_allclose(values["extrinsic"].numpy()[real], first.values["extrinsic"],
                               atol=1e-5)
    np.testing.assert_allclose(baselines["extrinsic"].numpy()[real],
                               first.baselines["extrinsic"], atol=1e-5)


def test_with_memory_an_absent_member_changes_nothing(tmp_path):
    rng = np.random.default_rng(1)
    t = trajectory(rng, 0, 6, left_at=2)
    steps, after = batches([t])
    garbage = steps._replace(team_obs=[steps.team_obs[0].copy()],
                             team_discrete=steps.team_discrete.copy())
    garbage.team_obs[0][2:, 1] = 1e3
    garbage.team_discrete[2:, 1] = 1 - garbage.team_discrete[2:, 1]
    # One critic; each run as a new agent, so from zero memories.
    optimizer = memory_trainer(tmp_path).optimizer
    clean = optimizer.group_estimates([t], steps, after)
    dirty = optimizer.group_estimates([replace(t, agent_id=1)], garbage, after)
    for a, b in ((clean.values, dirty.values), (clean.baselines, dirty.baselines)):
        np.testing.assert_array_equal(a["extrinsic"], b["extrinsic"])
    np.testing.assert_array_equal(clean.memory, dirty.memory)
    # A member present at step 0 is remembered: V and b_i of the last step change with it.
    moved = steps._replace(team_obs=[steps.team_obs[0].copy()])
    moved.team_obs[0][0, 1] += 1.0
    other = optimizer.group_estimates([replace(t, agent_id=2)], moved, after)
    assert other.values["extrinsic"][-1] != clean.values["extrinsic"][-1]
    assert other.baselines["extrinsic"][-1] != clean.baselines["extrinsic"][-1]


def test_updates_trace_once_and_restore_exactly(tmp_path):
    env = make("builtin:DungeonEscape", seed=0, num_areas=4)
    env.reset()
    settings = trainer_settings("DungeonEscape", trainer_type="poca",
                                network_settings={"hidden_units": 16, "normalize": True, **MEMORY},
                                reward_signals={"extrinsic": {}, "curiosity": {"strength": 0.1}})
    first = make_trainer(tmp_path, env, "DungeonEscape", settings, seed=0, jit_compile=False)
    drive(env, first, 45)
    assert first.updates >= 2 and first.optimizer.update_fn.tracing_count == 1
    for name in ("Losses/Policy Loss", "Losses/Value Loss", "Losses/Baseline Loss"):
        assert np.isfinite(first.last_update[name]), name
    first.save()
    saved = variables(first)
    assert any(n.startswith("critic/") and "recurrent_kernel" in n for n, _ in saved)  # its LSTM
    second = make_trainer(tmp_path, env, "DungeonEscape", settings, seed=5, jit_compile=False)
    second.restore_latest()
    restored = variables(second)
    assert [n for n, _ in saved] == [n for n, _ in restored]
    for (name, a), (_, b) in zip(saved, restored):
        # Keras' LSTMCell keeps a dropout seed (no dropout here, so never read) that
        # checkpoints leave out, PPO's with memory too.
        if "seed_generator_state" not in name:
            np.testing.assert_array_equal(a, b, err_msg=name)
    assert second.rng.bit_generator.state == first.rng.bit_generator.state


def test_learn_resume_export_and_evaluate_with_memory(tmp_path, monkeypatch, capsys):
    import tftrainers.run_setup as run_setup
    from tftrainers.cli import evaluate_main
    from .helpers import SigintAfter
    with open(os.path.join(CONFIGS, "DungeonEscape.yaml")) as f:
        config = yaml.safe_load(f)
    behavior = config["behaviors"]["DungeonEscape"]
    behavior.update(max_steps=2000, summary_freq=500, checkpoint_interval=1000)
    behavior["hyperparameters"].update(batch_size=128, buffer_size=512)
    behavior["network_settings"].update(hidden_units=16,
                                        memory={"memory_size": 16, "sequence_length": 8})
    config["tf_settings"] = {"jit_compile": False}
    path = tmp_path / "poca.yaml"
    path.write_text(yaml.safe_dump(config))
    results = str(tmp_path / "results")
    argv = [str(path), "--run-id", "run", "--results-dir", results, "--num-areas", "4"]
    make_env = run_setup.make_env
    monkeypatch.setattr(run_setup, "make_env", lambda o, s: SigintAfter(make_env(o, s), 150))
    assert learn_main(argv) == 130  # interrupted after a checkpoint at 1000
    monkeypatch.setattr(run_setup, "make_env", make_env)
    assert learn_main(argv + ["--resume"]) == 0
    run = os.path.join(results, "run")
    with open(os.path.join(run, "run_logs", "DungeonEscape.csv")) as f:
        lines = f.read().splitlines()
    assert "Losses/Baseline Loss" in lines[0] and int(lines[-1].split(",")[0]) >= 2000
    onnx_path = os.path.join(run, "DungeonEscape.onnx")
    model = onnx.load(onnx_path)
    inputs = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim][1:]
              for i in model.graph.input}
    outputs = {o.name for o in model.graph.output}
    assert inputs["recurrent_in"] == [1, 16] and {"recurrent_out", "memory_size"} <= outputs
    capsys.readouterr()
    assert evaluate_main(["builtin:DungeonEscape", "--policy", onnx_path, "--episodes", "8",
                          "--num-areas", "4"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["episodes"] == 8 and "mean_group_reward" in result


def recall_rate(trainer_or_none, env, env_steps, seed=0):
    """The fraction of right picks over ``env_steps`` steps of the trainer's policy (still
    sampling), or of uniformly random picks."""
    env.picks = env.right = 0
    if trainer_or_none is not None:
        drive(env, trainer_or_none, env_steps)
    else:
        rng = np.random.default_rng(seed)
        for _ in range(env_steps):
            decision, _ = env.get_steps("Recall")
            env.set_actions("Recall", ActionTuple(
                np.zeros((len(decision), 0), np.float32),
                rng.integers(0, 2, (len(decision), 1)).astype(np.int32)))
            env.step()
    return env.right / env.picks


def test_memory_recalls_the_cue_where_poca_without_it_cannot(tmp_path):
    random_env = Recall(seed=1)
    random_env.reset()
    random = recall_rate(None, random_env, 100)
    rates = {}
    for memory in (True, False):
        network = {"hidden_units": 32, "num_layers": 1}
        if memory:
            network["memory"] = {"memory_size": 32, "sequence_length": 4}
        settings = trainer_settings(
            "Recall", trainer_type="poca",
            hyperparameters={"batch_size": 128, "buffer_size": 512, "learning_rate": 3e-3,
                             "num_epoch": 3, "learning_rate_schedule": "constant"},
            network_settings=network, reward_signals={"extrinsic": {"gamma": 0.9}},
            max_steps=10000, time_horizon=8)
        env = Recall(seed=0)
        env.reset()
        trainer = make_trainer(tmp_path / str(memory), env, "Recall", settings,
                               jit_compile=False)
        while not trainer.done:
            drive(env, trainer, 50)
        rates[memory] = recall_rate(trainer, env, 100)
    # Chance is 0.5, and all a policy without memory can reach: the pick's observation
    # is the same whatever the cue was.
    assert rates[True] >= 0.9 and rates[True] >= random + 0.3, (rates, random)
    assert rates[False] <= 0.6, (rates, random)
