"""Unity's step convention: the built-ins' ``unity_steps`` env arg, and the checker, the
evaluator and the recorder on hand-written Unity-style steps, with known answers."""
import numpy as np
import pytest

from tftrainers.envs import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                             ObservationSpec, TerminalSteps, check_env, make)
from tftrainers.evaluate import RandomPolicy, evaluate
from tftrainers.processing.demonstrations import load_demonstrations
from tftrainers.record import record

STAY, UP, DOWN, LEFT, RIGHT = range(5)


def discrete(*actions):
    a = np.asarray(actions, np.int32).reshape(-1, 1)
    return ActionTuple(np.zeros((len(a), 0), np.float32), a)


def step(env, name, *actions):
    env.set_actions(name, discrete(*actions))
    env.step()
    return env.get_steps(name)


def test_basic_ends_and_restarts_an_agent_in_one_step():
    env = make("builtin:Basic", num_areas=2, unity_steps=True)
    env.reset()
    stay, right = 0, 2  # Basic's actions
    for _ in range(6):  # agent 0 walks right, agent 1 stays
        decision, terminal = step(env, "Basic", right, stay)
        assert decision.agent_id.tolist() == [0, 1] and len(terminal) == 0
    decision, terminal = step(env, "Basic", right, stay)  # agent 0 reaches the large goal
    assert terminal.agent_id.tolist() == [0] and not terminal.interrupted.any()
    assert terminal.reward.tolist() == pytest.approx([0.99])
    assert terminal.obs[0][0].argmax() == 17  # where it ended
    assert decision.agent_id.tolist() == [0, 1]  # and, same id, where it starts anew
    assert decision.obs[0][0].argmax() == 10 and decision.reward[0] == 0.0
    decision, terminal = step(env, "Basic", right, stay)
    assert len(terminal) == 0 and decision.obs[0][0].argmax() == 11


def dungeon(**env_args):
    """One area: agent 0 next to the dragon, the door two cells above agent 1."""
    env = make("builtin:DungeonEscape", num_areas=1, seed=0, dragon_period=100, **env_args)
    env.reset()
    env.dragon[0] = [5, 3]
    env.dragon_step[0] = 1
    env.portal[0] = [5, 6]
    env.door[0] = [0, 1]
    env.agent[0] = [[4, 3], [2, 1], [2, 5]]
    return env


def test_dungeon_members_that_died_come_back_in_the_step_their_group_escapes():
    env = dungeon(unity_steps=True)
    decision, terminal = step(env, "DungeonEscape", DOWN, STAY, STAY)  # 0 slays and dies
    assert terminal.agent_id.tolist() == [0] and decision.agent_id.tolist() == [1, 2]
    for action in (DOWN, DOWN, DOWN, RIGHT, RIGHT, UP, UP, UP, UP, LEFT, LEFT):
        decision, terminal = step(env, "DungeonEscape", action, STAY)
        assert decision.agent_id.tolist() == [1, 2] and len(terminal) == 0
    decision, terminal = step(env, "DungeonEscape", UP, STAY)  # through the door
    assert terminal.agent_id.tolist() == [1, 2] and not terminal.interrupted.any()
    assert terminal.group_reward.tolist() == [1.0, 1.0]
    assert terminal.obs[0][:, -2:].tolist() == [[1.0, 0.0], [0.0, 1.0]]  # 1 held the key
    # The same step: the whole group anew, the member that died with its old id.
    assert decision.agent_id.tolist() == [0, 1, 2] and decision.group_id.tolist() == [1] * 3
    assert decision.reward.tolist() == [0] * 3 and decision.group_reward.tolist() == [0] * 3
    assert decision.obs[0][:, -2:].tolist() == [[0.0, 0.0]] * 3  # nobody holds a key
    assert env.dragon_alive[0] and env.holder[0] == -1
    decision, terminal = step(env, "DungeonEscape", STAY, STAY, STAY)
    assert decision.agent_id.tolist() == [0, 1, 2] and len(terminal) == 0


@pytest.mark.parametrize("env_id", ["builtin:Basic", "builtin:Ball3D", "builtin:GridWorld",
                                    "builtin:Hallway", "builtin:PushBlockCollab",
                                    "builtin:DungeonEscape"])
def test_builtins_with_unity_steps_pass_the_checker(env_id):
    env = make(env_id, seed=1, num_areas=3, unity_steps=True)
    (counts,) = check_env(env, n_steps=400).values()
    assert counts["episodes"] > 0


class UnityScript(BaseEnv):
    """Replays a cycle of Unity-style steps (group 1 = agents 0, 1, 2, every reward 1):

        start   decide 0 1 2
        a       decide 0 1 2
        b       end 2 (dies)                      decide 0 1
        c       end 0 1 (group reward 2)          decide 0 1 2 (a new episode)
        then a, b, c again.
    """

    spec = BehaviorSpec((ObservationSpec((1,), "o"),), ActionSpec.create_discrete([2]))

    def __init__(self):
        self.t = 0

    @property
    def behavior_specs(self):
        return {"U": self.spec}

    def reset(self):
        self.t = 0

    def step(self):
        self.t += 1

    def set_actions(self, name, actions):
        if len(actions.discrete) != len(self.get_steps(name)[0]):
            raise ValueError("one action per agent in the decision steps")

    @staticmethod
    def _decision(ids, reward):
        n = len(ids)
        return DecisionSteps([np.full((n, 1), 1.0, np.float32)], np.full(n, reward, np.float32),
                             np.array(ids, np.int32), [np.zeros((n, 2), bool)],
                             np.ones(n, np.int32), np.zeros(n, np.float32))

    @staticmethod
    def _terminal(ids, group_reward):
        n = len(ids)
        return TerminalSteps([np.full((n, 1), -1.0, np.float32)], np.ones(n, np.float32),
                             np.zeros(n, bool), np.array(ids, np.int32), np.ones(n, np.int32),
                             np.full(n, group_reward, np.float32))

    def get_steps(self, name):
        phase = "start" if self.t == 0 else "abc"[(self.t - 1) % 3]
        if phase == "start":
            return self._decision([0, 1, 2], 0.0), TerminalSteps.empty(self.spec)
        if phase == "a":
            return self._decision([0, 1, 2], 1.0), TerminalSteps.empty(self.spec)
        if phase == "b":
            return self._decision([0, 1], 1.0), self._terminal([2], 0.0)
        return self._decision([0, 1, 2], 0.0), self._terminal([0, 1], 2.0)


def test_the_checker_accepts_the_unity_script():
    (counts,) = check_env(UnityScript(), n_steps=9).values()
    assert counts["episodes"] == 9


def test_evaluate_scores_unity_style_group_episodes():
    # Agent 2's episodes return 0 + 1 + 1 (start, a, its end at b); 0's and 1's return
    # 0 + 1 + 1 + 1 (start, a, b, c). The group's reward is 2 per episode.
    (result,) = evaluate(UnityScript(), RandomPolicy(UnityScript()), episodes=3,
                         max_env_steps=30).values()
    assert result["episodes"] == 3 and result["mean_reward"] == pytest.approx(8 / 3)
    assert result["group_episodes"] == 3 and result["mean_group_reward"] == 2.0
    assert result["std_group_reward"] == 0.0


def test_record_writes_each_unity_style_episode_whole(tmp_path):
    path = str(tmp_path / "u.demo")
    summary = record(UnityScript(), RandomPolicy(UnityScript()), path, episodes=6,
                     max_env_steps=30)
    assert summary.episodes == 6
    demo = load_demonstrations(path)
    # Agent 2's episodes: 3 records (start, a, its end at b), 2 transitions; 0's and 1's:
    # 4 records (start, a, b, c), 3 transitions; two episodes an agent.
    assert len(demo.reward) == 2 * (2 + 3 + 3) and int(np.sum(demo.done)) == 6
    done = np.asarray(demo.done, bool)
    assert (demo.obs[0] == 1.0).all()  # no terminal observation starts a transition
    assert (demo.next_obs[0][done] == -1.0).all() and (demo.next_obs[0][~done] == 1.0).all()
    assert (demo.reward == 1.0).all()  # the first decisions' reward 0 is no transition's
    assert sorted(demo.group_reward[done].tolist()) == [0.0, 0.0, 2.0, 2.0, 2.0, 2.0]


class NewIdEachEpisode(UnityScript):
    """One agent at a time, a new id every episode (as ML-Agents' test envs and agents a game
    spawns): three steps of reward 1; the next agent starts in the step the last one ends."""

    def get_steps(self, name):
        n, ended = self.t // 3, self.t > 0 and self.t % 3 == 0
        decision = DecisionSteps([np.ones((1, 1), np.float32)],
                                 np.full(1, 0.0 if self.t % 3 == 0 else 1.0, np.float32),
                                 np.array([n], np.int32), [np.zeros((1, 2), bool)],
                                 np.zeros(1, np.int32), np.zeros(1, np.float32))
        if not ended:
            return decision, TerminalSteps.empty(self.spec)
        return decision, TerminalSteps([np.ones((1, 1), np.float32)], np.ones(1, np.float32),
                                       np.zeros(1, bool), np.array([n - 1], np.int32),
                                       np.zeros(1, np.int32), np.zeros(1, np.float32))


def test_evaluate_finishes_when_every_episode_has_a_new_agent_id():
    # The agent present at the start holds the whole quota and never comes back: once it has
    # been gone VACANT_AFTER steps, the later agents' episodes count, one each.
    env = NewIdEachEpisode()
    (result,) = evaluate(env, RandomPolicy(env), episodes=5, max_env_steps=200).values()
    assert result["episodes"] == 5 and result["mean_reward"] == 3.0
    assert result["mean_episode_length"] == 3.0
