"""AgentProcessor driven by hand-written decision/terminal steps, with exact expectations."""
import numpy as np
import pytest

from tftrainers.envs.base import (ActionSpec, ActionTuple, BehaviorSpec, DecisionSteps,
                                  ObservationSpec, TerminalSteps)
from tftrainers.processing import ActionInfo, AgentProcessor, LogProbs, TrajectoryQueue

SPEC = BehaviorSpec((ObservationSpec((2,), "vec"),), ActionSpec(1, (3,)))
GROUP = {0: 1, 1: 1}  # agents 0 and 1 form group 1; the others are in no group


def obs(ids, k):
    """Observation of agent ``id`` at call k: [id, k], so alignment is visible."""
    return [np.array([[i, k] for i in ids], np.float32).reshape(len(ids), 2)]


def reward(i, k):
    return 10.0 * i + k


def group_reward(i, k):
    return 0.5 * k if i in GROUP else 0.0


def masked_branch(ids, k):
    mask = np.zeros((len(ids), 3), bool)
    for row, i in enumerate(ids):
        mask[row, (i + k + 1) % 3] = True
    return [mask]


def decision(ids, k, rewards=None):
    ids = list(ids)
    r = [reward(i, k) for i in ids] if rewards is None else rewards
    return DecisionSteps(obs(ids, k), np.array(r, np.float32), np.array(ids, np.int32),
                         masked_branch(ids, k),
                         np.array([GROUP.get(i, 0) for i in ids], np.int32),
                         np.array([group_reward(i, k) for i in ids], np.float32))


def terminal(ids, k, interrupted):
    ids = list(ids)
    return TerminalSteps(obs(ids, k), np.array([reward(i, k) for i in ids], np.float32),
                         np.array(interrupted, bool), np.array(ids, np.int32),
                         np.array([GROUP.get(i, 0) for i in ids], np.int32),
                         np.array([group_reward(i, k) for i in ids], np.float32))


def empty_terminal():
    return TerminalSteps.empty(SPEC)


def action_info(ids, k):
    """What a policy would return for decision step k (values encode id and k)."""
    ids = np.array(ids, np.int32)
    return ActionInfo(
        agent_id=ids,
        actions=ActionTuple((ids + 0.1 * k)[:, None].astype(np.float32),
                            ((ids + k) % 3)[:, None].astype(np.int32)),
        log_probs=LogProbs(-(ids + 0.1 * k)[:, None].astype(np.float32),
                           (-(ids + k) / 10.0)[:, None].astype(np.float32)),
        values={"extrinsic": (100.0 * ids + k).astype(np.float32)},
        memory=np.stack([ids, np.full_like(ids, k)], axis=1).astype(np.float32),
    )


def check(trajectory, agent_id, ks, next_k, rewards, done, interrupted):
    """Asserts a trajectory holds agent ``agent_id``'s decisions at calls ``ks``."""
    ks = np.array(ks)
    assert trajectory.agent_id == agent_id
    assert len(trajectory) == len(ks)
    np.testing.assert_array_equal(trajectory.obs[0], np.stack([np.full(len(ks), agent_id), ks], 1))
    np.testing.assert_array_equal(trajectory.next_obs[0], [agent_id, next_k])
    np.testing.assert_allclose(trajectory.actions.continuous[:, 0], agent_id + 0.1 * ks, rtol=1e-6)
    np.testing.assert_array_equal(trajectory.actions.discrete[:, 0], (agent_id + ks) % 3)
    np.testing.assert_allclose(trajectory.log_probs.continuous[:, 0], -(agent_id + 0.1 * ks),
                               rtol=1e-6)
    np.testing.assert_allclose(trajectory.log_probs.discrete[:, 0], -(agent_id + ks) / 10.0,
                               rtol=1e-6)
    np.testing.assert_array_equal(trajectory.values["extrinsic"], 100.0 * agent_id + ks)
    np.testing.assert_array_equal(trajectory.memory, np.stack([np.full(len(ks), agent_id), ks], 1))
    expected_mask = np.ones((len(ks), 3), np.float32)
    expected_mask[np.arange(len(ks)), (agent_id + ks + 1) % 3] = 0.0
    np.testing.assert_array_equal(trajectory.action_mask, expected_mask)
    np.testing.assert_array_equal(trajectory.rewards, rewards)
    np.testing.assert_array_equal(trajectory.group_id, np.full(len(ks), GROUP.get(agent_id, 0)))
    assert trajectory.done is done and trajectory.interrupted is interrupted
    assert trajectory.obs[0].dtype == np.float32 and trajectory.rewards.dtype == np.float32
    assert trajectory.actions.discrete.dtype == np.int32


def run_scripted(processor):
    """Agents 0..3, time_horizon 3:

    - 0 ends (done) at call 2, comes back at call 3 with a new episode;
    - 1 and 2 hit time_horizon at call 3; 1 is interrupted at call 4;
    - 3 skips call 2 (its reward arrives at call 3), then hits time_horizon at call 4.
    """
    emitted = {}
    processor.add_experiences(decision([0, 1, 2, 3], 0), empty_terminal(), None)
    processor.add_experiences(decision([0, 1, 2, 3], 1), empty_terminal(),
                              action_info([0, 1, 2, 3], 0))
    emitted[1] = processor.pop_trajectories()
    # The policy may list agents in any order.
    processor.add_experiences(decision([1, 2], 2), terminal([0], 2, [False]),
                              action_info([3, 2, 1, 0], 1))
    emitted[2] = processor.pop_trajectories()
    # Agent 0's first decision of its new episode reports reward 99: no action earned it.
    processor.add_experiences(decision([0, 1, 2, 3], 3, rewards=[99.0, 13.0, 23.0, 33.0]),
                              empty_terminal(), action_info([1, 2], 2))
    emitted[3] = processor.pop_trajectories()
    processor.add_experiences(decision([0, 2, 3], 4), terminal([1], 4, [True]),
                              action_info([0, 1, 2, 3], 3))
    emitted[4] = processor.pop_trajectories()
    return emitted


def test_scripted_sequence_exact_trajectories():
    processor = AgentProcessor(SPEC, time_horizon=3)
    emitted = run_scripted(processor)
    assert emitted[1] == []

    (a,) = emitted[2]  # agent 0 ended for real after 2 steps
    check(a, 0, ks=[0, 1], next_k=2, rewards=[1.0, 2.0], done=True, interrupted=False)
    np.testing.assert_array_equal(a.group_reward, [0.5, 1.0])
    assert a.episode_ended

    b, c = emitted[3]  # agents 1 and 2 hit time_horizon; next_obs is their current obs
    check(b, 1, ks=[0, 1, 2], next_k=3, rewards=[11.0, 12.0, 13.0], done=False,
          interrupted=False)
    np.testing.assert_array_equal(b.group_reward, [0.5, 1.0, 1.5])
    check(c, 2, ks=[0, 1, 2], next_k=3, rewards=[21.0, 22.0, 23.0], done=False,
          interrupted=False)
    np.testing.assert_array_equal(c.group_reward, [0.0, 0.0, 0.0])
    assert not b.episode_ended

    d, e = emitted[4]  # terminal steps are emitted before time_horizon cuts
    # Agent 1's new trajectory starts at the obs its previous one bootstrapped from.
    check(d, 1, ks=[3], next_k=4, rewards=[14.0], done=False, interrupted=True)
    # Agent 3 skipped call 2: its step from call 1 got the reward reported at call 3.
    check(e, 3, ks=[0, 1, 3], next_k=4, rewards=[31.0, 33.0, 34.0], done=False,
          interrupted=False)

    stats = processor.pop_episode_stats()
    np.testing.assert_array_equal(stats.agent_id, [0, 1])
    np.testing.assert_allclose(stats.cumulative_reward, [1.0 + 2.0, 11.0 + 12.0 + 13.0 + 14.0])
    np.testing.assert_allclose(stats.group_cumulative_reward, [0.5 + 1.0, 0.5 + 1.0 + 1.5 + 2.0])
    np.testing.assert_array_equal(stats.episode_length, [2, 4])
    np.testing.assert_array_equal(stats.interrupted, [False, True])
    assert len(processor.pop_episode_stats()) == 0
    assert processor.pop_trajectories() == []


def test_end_episodes_emits_interrupted_partial_trajectories():
    processor = AgentProcessor(SPEC, time_horizon=3)
    run_scripted(processor)
    processor.pop_episode_stats()
    # Agent 0 (new episode, 1 step) and 2 (1 step after its cut); 3 was just cut: no steps.
    processor.end_episodes()
    f, g = processor.pop_trajectories()
    check(f, 0, ks=[3], next_k=4, rewards=[4.0], done=False, interrupted=True)
    check(g, 2, ks=[3], next_k=4, rewards=[24.0], done=False, interrupted=True)
    assert len(processor.pop_episode_stats()) == 0
    # Everyone starts over: actions for the last decisions are no longer expected.
    with pytest.raises(ValueError, match="not in the previous decision steps"):
        processor.add_experiences(decision([0], 5), empty_terminal(), action_info([0], 4))


def test_trajectory_fields_align_next_obs():
    processor = AgentProcessor(SPEC, time_horizon=3)
    emitted = run_scripted(processor)
    e = emitted[4][1]
    np.testing.assert_array_equal(e.next_obs_per_step()[0], [[3, 1], [3, 3], [3, 4]])
    from tftrainers.processing import BufferKey, next_obs_key, obs_key
    fields = e.to_fields()
    np.testing.assert_array_equal(fields[next_obs_key(0)], [[3, 1], [3, 3], [3, 4]])
    np.testing.assert_array_equal(fields[obs_key(0)], e.obs[0])
    np.testing.assert_array_equal(fields[BufferKey.DONE], [0, 0, 0])
    a = emitted[2][0]
    np.testing.assert_array_equal(a.to_fields()[BufferKey.DONE], [0, 1])


def test_mapping_action_info_with_flat_log_probs_and_queue():
    processor = AgentProcessor(SPEC, time_horizon=1, stream_names=["extrinsic"])
    q = TrajectoryQueue("Test")
    processor.publish_trajectory_queue(q)
    processor.add_experiences(decision([5, 7], 0), empty_terminal())
    processor.add_experiences(decision([5, 7], 1), empty_terminal(), {
        "agent_id": np.array([7, 5]),
        "actions": ActionTuple(np.array([[0.7], [0.5]], np.float32), np.array([[2], [1]])),
        "log_probs": np.array([[-0.7, -7.0], [-0.5, -5.0]], np.float32),
        "values": {"extrinsic": np.array([7.0, 5.0])},
    })
    assert processor.pop_trajectories() == []
    t5, t7 = q.drain()
    assert (t5.agent_id, t7.agent_id) == (5, 7)
    np.testing.assert_array_equal(t5.log_probs.continuous, [[-0.5]])
    np.testing.assert_array_equal(t5.log_probs.discrete, [[-5.0]])
    np.testing.assert_array_equal(t7.actions.discrete, [[2]])
    np.testing.assert_array_equal(t7.values["extrinsic"], [7.0])
    np.testing.assert_array_equal(t7.next_obs[0], [7, 1])
    assert t5.memory is None


def test_bad_action_info_is_named():
    processor = AgentProcessor(SPEC, time_horizon=3)
    processor.add_experiences(decision([0, 1], 0), empty_terminal())
    with pytest.raises(ValueError, match="not in the previous decision steps"):
        processor.add_experiences(decision([0, 1], 1), empty_terminal(), action_info([0, 9], 0))
    bad = action_info([0, 1], 0)._replace(
        actions=ActionTuple(np.zeros((2, 2), np.float32), np.zeros((2, 1), np.int32)))
    with pytest.raises(ValueError, match=r"actions'\]\.continuous: expected shape \(2, 1\)"):
        processor.add_experiences(decision([0, 1], 1), empty_terminal(), bad)
    processor = AgentProcessor(SPEC, time_horizon=3, stream_names=["extrinsic", "curiosity"])
    processor.add_experiences(decision([0, 1], 0), empty_terminal())
    with pytest.raises(ValueError, match="streams"):
        processor.add_experiences(decision([0, 1], 1), empty_terminal(), action_info([0, 1], 0))


# ----------------------------------------------------------------------------- randomised


class ReferenceProcessor:
    """The obvious per-agent, per-step Python implementation, to compare against."""

    def __init__(self, horizon):
        self.horizon = horizon
        self.steps, self.awaiting, self.pending = {}, {}, {}
        self.out, self.stats = [], []
        self.ep = {}

    def add(self, ds, ts, info):
        if info is not None:
            for j, i in enumerate(info.agent_id.tolist()):
                step = dict(self.awaiting.pop(i))
                step.update(ca=info.actions.continuous[j], da=info.actions.discrete[j],
                            v=info.values["extrinsic"][j], m=info.memory[j])
                self.pending[i] = step
        for j, i in enumerate(ts.agent_id.tolist()):
            self._complete(i, ts.reward[j], ts.group_reward[j])
            self.awaiting.pop(i, None)
            steps = self.steps.pop(i, [])
            ep = self.ep.pop(i, None)
            if ep and ep[1]:
                self.stats.append((i, ep[0], ep[1], bool(ts.interrupted[j])))
            if steps:
                self.out.append((i, steps, ts.obs[0][j], not ts.interrupted[j],
                                 bool(ts.interrupted[j])))
        for j, i in enumerate(ds.agent_id.tolist()):
            self._complete(i, ds.reward[j], ds.group_reward[j])
            if len(self.steps.get(i, [])) == self.horizon:
                self.out.append((i, self.steps.pop(i), ds.obs[0][j], False, False))
            self.awaiting[i] = dict(obs=ds.obs[0][j], mask=1.0 - ds.action_mask[0][j],
                                    g=ds.group_id[j])

    def _complete(self, i, r, gr):
        if i in self.pending:
            step = self.pending.pop(i)
            step.update(r=r, gr=gr)
            self.steps.setdefault(i, []).append(step)
            total, n = self.ep.get(i, (0.0, 0))
            self.ep[i] = (total + r, n + 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_reference_on_random_sequences_with_skips_ends_and_new_ids(seed):
    rng = np.random.default_rng(seed)
    horizon = 4
    processor = AgentProcessor(SPEC, time_horizon=horizon)
    reference = ReferenceProcessor(horizon)
    live = list(range(12))
    next_id, info, returning = 12, None, []
    got, want = [], []
    for k in range(300):
        # Agents skip steps (20%), end (10%, half of them interrupted), and after an end
        # either come back next step with the same id or retire for a brand-new id.
        present = [i for i in live if rng.random() > 0.2]
        ended = [i for i in present if rng.random() < 0.1]
        deciding = [i for i in present if i not in ended] + returning
        rng.shuffle(deciding)
        live += returning
        returning = []
        for i in ended:
            live.remove(i)
            if rng.random() < 0.5:
                live.append(next_id)
                next_id += 1
            else:
                returning.append(i)
        ds = decision(deciding, k)
        ts = terminal(ended, k, rng.random(len(ended)) < 0.5)
        processor.add_experiences(ds, ts, info)
        reference.add(ds, ts, info)
        got += processor.pop_trajectories()
        info = action_info(deciding[::-1], k) if deciding else None
    want = reference.out
    assert len(got) == len(want) > 50
    for t, (i, steps, next_obs, done, interrupted) in zip(got, want):
        assert (t.agent_id, t.done, t.interrupted) == (i, done, interrupted)
        np.testing.assert_array_equal(t.obs[0], [s["obs"] for s in steps])
        np.testing.assert_array_equal(t.next_obs[0], next_obs)
        np.testing.assert_array_equal(t.actions.continuous, [s["ca"] for s in steps])
        np.testing.assert_array_equal(t.actions.discrete, [s["da"] for s in steps])
        np.testing.assert_array_equal(t.values["extrinsic"], [s["v"] for s in steps])
        np.testing.assert_array_equal(t.memory, [s["m"] for s in steps])
        np.testing.assert_array_equal(t.action_mask, [s["mask"] for s in steps])
        np.testing.assert_array_equal(t.rewards, [s["r"] for s in steps])
        np.testing.assert_array_equal(t.group_reward, [s["gr"] for s in steps])
        np.testing.assert_array_equal(t.group_id, [s["g"] for s in steps])
    stats = processor.pop_episode_stats()
    assert len(stats) == len(reference.stats)
    np.testing.assert_array_equal(stats.agent_id, [s[0] for s in reference.stats])
    np.testing.assert_allclose(stats.cumulative_reward, [s[1] for s in reference.stats],
                               rtol=1e-6)
    np.testing.assert_array_equal(stats.episode_length, [s[2] for s in reference.stats])
    np.testing.assert_array_equal(stats.interrupted, [s[3] for s in reference.stats])
    # Retired ids freed their rows: storage tracks the live population, not every id seen.
    assert len(processor._length) <= 64
