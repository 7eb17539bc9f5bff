"""Running out the time limit is the worst outcome an agent can choose (issue 34).

Our Hallway once paid -1 for the wrong goal and 0.0025 a step over 300 steps: standing still
until the limit (-0.75) beat entering the wrong goal, and seeds that had not yet learned to
read the cue learned to stop moving. For every built-in whose episodes end at goals, these
tests play scripted episodes (no training) in one env: a stalling policy that runs out the
limit at the least cost the env allows, against the goal and terminal outcomes reached by
their direct route (and, where every terminal reward is positive, reached as late as
possible). Stalling must score strictly lowest. Where an env has a worse outcome on purpose,
the test pins it, and docs/reference/environments.md ("Is running out the time limit the
worst outcome?") says why.
"""
from typing import Callable, List, Sequence

import numpy as np

from tftrainers.envs import ActionTuple, make
from tftrainers.envs.builtin import hallway, pushblock_collab

# policy(env, decision_steps, t) -> [n] int actions; t: steps since reset.
Policy = Callable[..., np.ndarray]


def constant(action: int) -> Policy:
    return lambda env, decision, t: np.full(len(decision), action)


def heuristic(name: str) -> Policy:
    return lambda env, decision, t: env.heuristic(name, decision).discrete[:, 0]


def after(start: int, first: Policy, then: Policy) -> Policy:
    """``first`` for the first ``start`` steps of the episode, ``then`` after."""
    return lambda env, decision, t: (first if t < start else then)(env, decision, t)


def play(name: str, policies: Sequence[Policy], setup=None, **env_args):
    """Plays the first episode of every area, area ``a`` following ``policies[a]``.

    Returns:
        (returns [areas]: the episode's return, the group reward for group envs;
        interrupted [areas] bool: the time limit ended it).
    """
    env = make(f"builtin:{name}", num_areas=len(policies), seed=0, **env_args)
    env.reset()
    if setup is not None:
        setup(env)
    k = env.agents_per_area
    grouped = k > 1
    returns = np.zeros(env.num_areas)
    interrupted = np.zeros(env.num_areas, bool)
    finished = np.zeros(env.n_agents, bool)
    decision, terminal = env.get_steps(name)
    for t in range(env.max_episode_steps + 2):
        counted = np.zeros(env.num_areas, bool)  # a group reward is reported to every member
        for steps, ends in ((decision, False), (terminal, True)):
            ids = np.asarray(steps.agent_id, np.int64)
            live = ~finished[ids]
            areas = ids[live] // k
            if grouped:
                for area, value in zip(areas, np.asarray(steps.group_reward)[live]):
                    if not counted[area]:
                        returns[area] += value
                        counted[area] = True
            np.add.at(returns, areas, np.asarray(steps.reward)[live])
            if ends:
                interrupted[areas] |= np.asarray(steps.interrupted)[live]
                finished[ids[live]] = True
        if finished.all():
            return returns, interrupted
        area = np.asarray(decision.agent_id, np.int64) // k
        actions = np.zeros(len(decision), np.int32)
        for index, policy in enumerate(policies):
            mine = area == index
            if mine.any():
                actions[mine] = policy(env, decision, t)[mine]
        env.set_actions(name, ActionTuple(np.zeros((len(decision), 0), np.float32),
                                          actions[:, None]))
        env.step()
        decision, terminal = env.get_steps(name)
    raise AssertionError(f"{name}: some episodes outlived the time limit")


def assert_stalling_worst(stall: float, stall_cut: bool, outcomes: List[float]):
    assert stall_cut, "the stalling policy should run out the time limit"
    assert stall < min(outcomes), (stall, outcomes)


def test_basic():
    # Stay, walk to either goal, or wait until the last moment for the small one: with
    # every goal paying more than nothing, even the latest goal beats the limit.
    stay, left, right = 0, 1, 2
    late = 100 - 3  # the small goal is 3 cells away
    returns, cut = play("Basic", [constant(stay), constant(left), constant(right),
                                  after(late, constant(stay), constant(left))])
    assert not cut[1:].any()
    assert_stalling_worst(returns[0], cut[0], list(returns[1:]))
    np.testing.assert_allclose(returns, [-1.0, 0.1 - 0.03, 1.0 - 0.07, 0.1 - 1.0], atol=1e-5)


def test_gridworld_goal_beats_the_limit_and_the_pit_is_worse_on_purpose():
    def layout(env):
        env.agent[:] = [2, 2]
        env.goal[:] = [2, 4]
        env.pit[:] = [0, 2]

    stay, up, right = 0, 1, 4
    returns, cut = play("GridWorld", [constant(stay), constant(right),
                                      after(98, constant(stay), constant(right)), constant(up)],
                        setup=layout)
    assert not cut[1:].any()
    assert_stalling_worst(returns[0], cut[0], list(returns[1:3]))
    np.testing.assert_allclose(returns, [-1.0, 0.98, 0.0, -1.02], atol=1e-5)
    # The pit is the mistake to avoid, not a choice among goals: it pays at most what the
    # limit does, as in ML-Agents (SetReward(-1) against -0.01 a step over 100 steps).
    assert returns[3] <= returns[0]


def test_hallway_any_goal_by_the_direct_route_beats_the_limit():
    length = 8
    stay, forward = hallway.STAY, hallway.FORWARD

    def wrong_goal(env, decision, t):
        rows = np.asarray(decision.agent_id, np.int64)
        at_end = env.cell[rows] == env.length - 1
        return np.where(at_end, hallway.LEFT_GOAL + 1 - env.cue[rows], forward)

    late = 300 - length  # the wrong goal entered at the last step
    returns, cut = play("Hallway", [constant(stay), heuristic("Hallway"), wrong_goal,
                                    after(late, constant(stay), wrong_goal)], length=length)
    assert not cut[1:].any()
    assert_stalling_worst(returns[0], cut[0], list(returns[1:3]))
    np.testing.assert_allclose(returns[:3], [-1.0, 1 - 7 / 300, -0.1 - 7 / 300], atol=1e-5)
    # As in ML-Agents (-0.1 for the wrong goal, -1/MaxStep a step), a wrong goal entered in
    # the last tenth of the episode costs more than the limit; a policy has reached the
    # goals long before then.
    assert returns[3] < returns[0]


def test_pyramids():
    stay = 0
    # The teacher walks to the switch and then to the goal: at most 4 * 63 steps in the
    # default 64-cell room, so starting it that late still reaches the goal in time.
    late = 1000 - 4 * 64
    returns, cut = play("Pyramids", [constant(stay), heuristic("Pyramids"),
                                     after(late, constant(stay), heuristic("Pyramids"))])
    assert not cut[1:].any()
    assert returns[2] > 0.9  # +2 less at most 1000 steps of 0.001
    assert_stalling_worst(returns[0], cut[0], list(returns[1:]))


def test_pushblock_collab():
    stay = 0
    returns, cut = play("PushBlockCollab", [constant(stay), heuristic("PushBlockCollab")])
    np.testing.assert_allclose(returns[0], -pushblock_collab.PENALTY_PER_EPISODE, atol=1e-4)
    assert not cut[1]
    # The hurry-up penalty sums to 0.5 over a whole episode and every block scored adds its
    # weight, so even clearing the room at the last step (12 - 0.5) beats stalling.
    assert_stalling_worst(returns[0], cut[0], [returns[1]])


def test_dungeon_escape_stalling_ends_as_the_dragons_escape_does():
    stay = 0
    returns, cut = play("DungeonEscape", [constant(stay), heuristic("DungeonEscape")])
    # Nobody moves, so the dragon reaches its portal long before the limit: a real end with
    # no reward, the same 0 as every failure (the env, like ML-Agents', has no penalty).
    assert not cut.any()
    np.testing.assert_allclose(returns, [0.0, 1.0])
    assert returns[0] < returns[1]
