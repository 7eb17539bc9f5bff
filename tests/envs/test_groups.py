"""Groups (MA-POCA): the group rules of the env API, the cooperative built-ins, and the checker."""
import numpy as np
import pytest

from tftrainers.envs import ActionTuple, BaseEnv, EnvCheckError, check_env, make
from tftrainers.evaluate import RandomPolicy, evaluate

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def discrete(*actions):
    a = np.asarray(actions, np.int32).reshape(-1, 1)
    return ActionTuple(np.zeros((len(a), 0), np.float32), a)


def step(env, name, *actions):
    env.set_actions(name, discrete(*actions))
    env.step()
    return env.get_steps(name)


def dungeon():
    """One area: agent 0 next to the dragon, the door two cells above agent 1."""
    env = make("builtin:DungeonEscape", num_areas=1, seed=0, dragon_period=100)
    env.reset()
    env.dragon[0] = [5, 3]
    env.dragon_step[0] = 1
    env.portal[0] = [5, 6]
    env.door[0] = [0, 1]
    env.agent[0] = [[4, 3], [2, 1], [2, 5]]
    return env


def test_member_that_dies_leaves_its_group_and_the_group_escapes_without_it():
    env = dungeon()
    decision, _ = env.get_steps("DungeonEscape")
    assert decision.group_id.tolist() == [1, 1, 1] and decision.group_reward.tolist() == [0] * 3
    # Agent 0 steps on the dragon: it slays it, drops the key and dies.
    decision, terminal = step(env, "DungeonEscape", DOWN, STAY, STAY)
    assert terminal.agent_id.tolist() == [0] and terminal.interrupted.tolist() == [False]
    assert terminal.reward.tolist() == [0.0] and terminal.group_id.tolist() == [1]
    assert decision.agent_id.tolist() == [1, 2]
    assert not env.dragon_alive[0] and env.key_on_floor[0] and env.key[0].tolist() == [5, 3]
    # The key sector of agent 1 (at 2,1; key at 5,3: south-east) lights up.
    key_sectors = decision.obs[0][0, 24:32]
    assert key_sectors.argmax() == 3 and key_sectors.max() > 0
    # Agent 1 walks to the key (3 down, 2 right) and picks it up; agent 0 stays away.
    for action in (DOWN, DOWN, DOWN, RIGHT):
        decision, terminal = step(env, "DungeonEscape", action, STAY)
        assert decision.agent_id.tolist() == [1, 2] and len(terminal) == 0
        assert decision.group_reward.tolist() == [0.0, 0.0]
    decision, terminal = step(env, "DungeonEscape", RIGHT, STAY)
    assert env.holder[0] == 1
    assert decision.obs[0][:, -2:].tolist() == [[1.0, 0.0], [0.0, 1.0]]  # has key / mate has
    # To the door at (0, 1): 5 up, 2 left. The group escapes: +1 for both members left.
    for action in (UP, UP, UP, UP, LEFT, LEFT):
        decision, terminal = step(env, "DungeonEscape", action, STAY)
        assert len(terminal) == 0
    decision, terminal = step(env, "DungeonEscape", UP, STAY)
    assert terminal.agent_id.tolist() == [1, 2] and len(decision) == 0
    assert terminal.group_reward.tolist() == [1.0, 1.0] and terminal.reward.tolist() == [0, 0]
    assert not terminal.interrupted.any()
    # Everyone sits out the next step, which starts the whole group (agent 0 too) anew.
    decision, terminal = step(env, "DungeonEscape")
    assert decision.agent_id.tolist() == [0, 1, 2] and len(terminal) == 0
    assert decision.reward.tolist() == [0, 0, 0] and decision.group_reward.tolist() == [0, 0, 0]
    assert env.dragon_alive[0] and env.holder[0] == -1


def test_dragon_walking_into_an_agent_kills_both_and_escaping_dragon_ends_the_episode():
    env = dungeon()
    env.dragon_period = 1
    env.agent[0] = [[5, 4], [0, 0], [0, 6]]  # agent 0 waits in the dragon's way
    decision, terminal = step(env, "DungeonEscape", STAY, STAY, STAY)
    assert terminal.agent_id.tolist() == [0] and env.key[0].tolist() == [5, 4]
    env = dungeon()
    env.dragon_period = 1
    env.agent[0] = [[0, 0], [0, 0], [0, 6]]
    for _ in range(2):
        decision, terminal = step(env, "DungeonEscape", STAY, STAY, STAY)
        assert len(terminal) == 0
    decision, terminal = step(env, "DungeonEscape", STAY, STAY, STAY)  # dragon at its portal
    assert terminal.agent_id.tolist() == [0, 1, 2] and not terminal.interrupted.any()
    assert terminal.group_reward.tolist() == [0, 0, 0]


def test_step_limit_interrupts_every_member_present():
    env = make("builtin:DungeonEscape", num_areas=1, seed=2, max_steps=3, dragon_period=100)
    env.reset()
    env.agent[0] = [[0, 0], [0, 1], [1, 0]]
    for _ in range(3):
        decision, terminal = step(env, "DungeonEscape", STAY, STAY, STAY)
    assert terminal.agent_id.tolist() == [0, 1, 2] and terminal.interrupted.all()


def test_shared_reward_gives_members_the_group_reward_too():
    env = dungeon()
    env.args["shared_reward"] = True
    env.agent[0] = [[4, 3], [1, 1], [2, 5]]
    env.dragon_alive[0], env.holder[0] = False, 1
    _, terminal = step(env, "DungeonEscape", STAY, UP, STAY)
    assert terminal.reward.tolist() == [1.0, 1.0, 1.0]
    assert terminal.group_reward.tolist() == [1.0, 1.0, 1.0]


def pushblock(weights="3", blocks=((3, 2),), agents=((6, 2), (6, 3), (6, 4))):
    env = make("builtin:PushBlockCollab", num_areas=1, seed=0, size=8, blocks=weights,
               max_steps=50)
    env.reset()
    env.block[0] = blocks
    env.agent[0] = agents
    return env


def test_a_weight_3_block_needs_three_pushers():
    env = pushblock()
    for actions in ((UP, UP, STAY), (STAY, UP, UP), (UP, STAY, UP)):
        decision, _ = step(env, "PushBlockCollab", *actions)
        assert env.block[0, 0].tolist() == [3, 2]  # two pushers: nothing moves
        assert env.agent[0].tolist() == [[6, 2], [6, 3], [6, 4]]
        assert decision.group_reward.tolist() == [pytest.approx(-0.01)] * 3
    decision, _ = step(env, "PushBlockCollab", UP, UP, UP)
    assert env.block[0, 0].tolist() == [2, 2]
    assert env.agent[0].tolist() == [[5, 2], [5, 3], [5, 4]]
    # Into the goal zone (rows 0-1): the group gets the block's weight and the episode ends.
    decision, terminal = step(env, "PushBlockCollab", UP, UP, UP)
    assert len(decision) == 0 and terminal.agent_id.tolist() == [0, 1, 2]
    assert terminal.group_reward.tolist() == [pytest.approx(3 - 0.01)] * 3
    assert not terminal.interrupted.any() and not env.active[0].any()


def test_blocks_stop_at_blocks_agents_and_opposite_pushes():
    # A weight-1 block under a weight-2 block: pushing it up does nothing.
    env = pushblock("1,2", blocks=((5, 2), (3, 2)), agents=((6, 2), (0, 7), (7, 7)))
    step(env, "PushBlockCollab", UP, STAY, STAY)
    assert env.block[0].tolist() == [[5, 2], [3, 2]] and env.agent[0, 0].tolist() == [6, 2]
    # An agent in the way stops a weight-1 block; so do two agents pushing it both ways.
    env = pushblock("1", blocks=((4, 3),), agents=((5, 3), (3, 3), (7, 7)))
    step(env, "PushBlockCollab", UP, STAY, STAY)
    assert env.block[0, 0].tolist() == [4, 3]
    env = pushblock("1", blocks=((4, 3),), agents=((4, 2), (4, 4), (7, 7)))
    step(env, "PushBlockCollab", RIGHT, LEFT, STAY)
    assert env.block[0, 0].tolist() == [4, 3]
    step(env, "PushBlockCollab", RIGHT, STAY, STAY)  # one pusher, the other side free...
    assert env.block[0, 0].tolist() == [4, 3]  # ...but the agent at (4, 4) is in the way
    step(env, "PushBlockCollab", STAY, UP, STAY)
    step(env, "PushBlockCollab", RIGHT, STAY, STAY)
    assert env.block[0, 0].tolist() == [4, 4] and env.agent[0, 0].tolist() == [4, 3]


def test_a_weight_2_block_moves_sideways_with_two_pushers_and_scores_2():
    # The 2x2 block at rows 3-4, columns 3-4; pushers left of it at (3, 2) and (4, 2).
    env = pushblock("2", blocks=((3, 3),), agents=((3, 2), (7, 7), (4, 2)))
    step(env, "PushBlockCollab", RIGHT, STAY, STAY)  # one pusher of two: nothing moves
    assert env.block[0, 0].tolist() == [3, 3] and env.agent[0, 0].tolist() == [3, 2]
    step(env, "PushBlockCollab", RIGHT, STAY, RIGHT)
    assert env.block[0, 0].tolist() == [3, 4]
    assert env.agent[0, [0, 2]].tolist() == [[3, 3], [4, 3]]  # they follow it
    # Two from below, one pushing sideways at the same time: the two win.
    env.agent[0] = [[5, 4], [4, 3], [5, 5]]
    decision, _ = step(env, "PushBlockCollab", UP, RIGHT, UP)
    assert env.block[0, 0].tolist() == [2, 4]
    assert decision.group_reward.tolist() == [pytest.approx(-0.01)] * 3
    decision, terminal = step(env, "PushBlockCollab", UP, STAY, UP)  # touches row 1: in
    assert len(decision) == 0 and not terminal.interrupted.any()
    assert terminal.group_reward.tolist() == [pytest.approx(2 - 0.01)] * 3


def test_pushblock_episode_is_cut_at_max_steps_after_half_a_point_of_penalties():
    env = pushblock("1", blocks=((5, 5),), agents=((7, 0), (7, 1), (7, 2)))
    total, steps = 0.0, 0
    while True:
        decision, terminal = step(env, "PushBlockCollab", STAY, STAY, STAY)
        steps += 1
        if len(terminal):
            total += terminal.group_reward[0]
            break
        total += decision.group_reward[0]
    assert steps == 50 and terminal.interrupted.tolist() == [True] * 3
    assert total == pytest.approx(-0.5)


def test_pushblock_observation_sees_blocks_by_weight_around_the_agent():
    env = pushblock("1,3", blocks=((4, 6), (3, 2)), agents=((6, 3), (0, 0), (7, 7)))
    obs = step(env, "PushBlockCollab", STAY, STAY, STAY)[0].obs[0]
    side = 2 * env.view + 1
    view = obs[0, :-2].reshape(6, side, side)  # outside, goal, agent, weight 1, 2, 3
    centre = env.view
    assert view[2, centre, centre] == 1.0  # the agent itself
    assert view[5, centre - 1, centre - 1:centre + 2].tolist() == [1, 1, 1]  # 3-block above
    assert view[3, centre - 2, centre + 3] == 1.0  # the 1-block at (4, 6)
    assert view[0, centre + 2, centre] == 1.0  # below row 7: outside the room
    assert obs[0, -2:].tolist() == pytest.approx([6 / 7, 3 / 7])


@pytest.mark.parametrize("env_id,env_args", [
    ("builtin:DungeonEscape", {}), ("builtin:PushBlockCollab", {}),
    ("builtin:PushBlockCollab", {"size": 5, "blocks": "1,1,1", "max_steps": 30})])
def test_cooperative_builtins_pass_the_checker(env_id, env_args):
    (counts,) = check_env(make(env_id, seed=1, num_areas=3, **env_args), n_steps=400).values()
    assert counts["episodes"] > 0


@pytest.mark.parametrize("name,episodes,heuristic_low,random_high", [
    ("DungeonEscape", 48, 1.0, 0.3), ("PushBlockCollab", 32, 11.5, 0.5)])
def test_heuristic_beats_random_by_far(name, episodes, heuristic_low, random_high):
    env = make(f"builtin:{name}", seed=4)
    teacher = evaluate(env, env.heuristic, episodes=episodes)[name]
    chance = evaluate(env, RandomPolicy(env, seed=4), episodes=episodes)[name]
    assert teacher["group_episodes"] == chance["group_episodes"] == episodes
    assert teacher["mean_group_reward"] >= heuristic_low
    assert chance["mean_group_reward"] <= random_high
    assert teacher["mean_reward"] == chance["mean_reward"] == 0.0  # all reward is the group's


def test_random_play_slays_the_dragon_often_but_rarely_escapes():
    env = make("builtin:DungeonEscape", seed=7)
    rng = np.random.default_rng(0)
    env.reset()
    slain = ends = escaped = 0
    while ends < 200:
        decision, terminal = env.get_steps("DungeonEscape")
        over = np.setdiff1d(terminal.group_id, decision.group_id)
        ends += len(over)
        escaped += int(sum(terminal.group_reward[terminal.group_id == g][0] for g in over))
        slain += len(np.unique(terminal.group_id[~np.isin(terminal.group_id, over)]))
        spec = env.behavior_specs["DungeonEscape"].action_spec
        env.set_actions("DungeonEscape", spec.random_action(len(decision), rng))
        env.step()
    assert 0.3 < slain / ends < 0.8 and 0.02 < escaped / ends < 0.15


class _Tampered(BaseEnv):
    """A group env whose steps ``tamper(decision, terminal)`` breaks."""

    def __init__(self, env, tamper):
        self.env, self.tamper = env, tamper

    @property
    def behavior_specs(self):
        return self.env.behavior_specs

    def reset(self):
        self.env.reset()

    def step(self):
        self.env.step()

    def get_steps(self, name):
        return self.tamper(*self.env.get_steps(name))

    def set_actions(self, name, actions):
        self.env.set_actions(name, actions)


def test_checker_catches_broken_group_rules():
    def uneven_group_reward(decision, terminal):
        decision.group_reward = decision.group_reward + np.arange(len(decision))
        return decision, terminal
    with pytest.raises(EnvCheckError, match=r"members of group \d+ got different group rewards"):
        check_env(_Tampered(make("builtin:PushBlockCollab", num_areas=2), uneven_group_reward))

    dead_come_back = make("builtin:DungeonEscape", num_areas=3, seed=1)
    dead_come_back._restart_next = lambda acting, ending: acting[ending]
    with pytest.raises(EnvCheckError, match=r"left group \d+ before it and is back"):
        check_env(dead_come_back, n_steps=400)

    def lose_a_member_at_the_end(decision, terminal):
        if len(terminal) > 1 and not len(decision):
            terminal = type(terminal)([o[1:] for o in terminal.obs], terminal.reward[1:],
                                      terminal.interrupted[1:], terminal.agent_id[1:],
                                      terminal.group_id[1:], terminal.group_reward[1:])
        return decision, terminal
    env = make("builtin:PushBlockCollab", num_areas=1, size=5, blocks="1", max_steps=5)
    with pytest.raises(EnvCheckError, match=r"group 1's episode ended without terminal steps "
                                            r"for members \[0\]"):
        check_env(_Tampered(env, lose_a_member_at_the_end))


def test_group_env_args_are_checked():
    with pytest.raises(ValueError, match=r"env arg blocks='1,4' must list block weights 1..3"):
        make("builtin:PushBlockCollab", blocks="1,4")
    with pytest.raises(ValueError, match=r"size=8 is too small for blocks 1,1,2,2,3,3; it needs "
                                         r">= 13"):
        make("builtin:PushBlockCollab", size=8)
    with pytest.raises(ValueError, match=r"shared_reward='yes' must be bool"):
        make("builtin:DungeonEscape", shared_reward="yes")
