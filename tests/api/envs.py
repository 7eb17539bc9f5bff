"""Small environments for the API tests: a line to walk to its right end, as the env API
(``LINE_MODULE``, written to a file for ``python:`` ids) and as a Gymnasium env."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

# The docs' env (docs/guides/your-own-environment.md), as a module a test writes to tmp_path.
LINE_MODULE = '''
import numpy as np
from tftrainers.envs import (ActionSpec, BaseEnv, BehaviorSpec, DecisionSteps,
                             ObservationSpec, TerminalSteps)


class Line(BaseEnv):
    """num_areas agents, each on a line of `length` cells from the left end: reaching the
    right end pays +1 and ends the episode, every other step costs 0.05; cut at 30 steps."""

    def __init__(self, seed=0, num_areas=8, length=5):
        self.n, self.length = num_areas, length
        self.ids = np.arange(num_areas, dtype=np.int32)
        self.spec = BehaviorSpec((ObservationSpec((length,), "position"),),
                                 ActionSpec.create_discrete((2,)))   # 0: left, 1: right

    @property
    def behavior_specs(self):
        return {"Line": self.spec}

    def reset(self):
        self.pos, self.t = np.zeros(self.n, int), np.zeros(self.n, int)
        self.action = np.zeros(self.n, int)
        self.reward = np.zeros(self.n, np.float32)
        self.done, self.cut = np.zeros(self.n, bool), np.zeros(self.n, bool)

    def step(self):
        restart, acting = self.done, ~self.done   # ended last step: a new episode now
        self.pos[restart], self.t[restart] = 0, 0
        self.pos = np.where(acting, np.clip(self.pos + 2 * self.action - 1, 0, self.length - 1),
                            self.pos)
        self.t += acting
        reached = acting & (self.pos == self.length - 1)
        self.reward = np.where(reached, 1.0, -0.05 * acting).astype(np.float32)
        self.cut = acting & ~reached & (self.t >= 30)
        self.done = reached | self.cut

    def get_steps(self, behavior_name):
        d, e = ~self.done, self.done
        obs = np.eye(self.length, dtype=np.float32)[self.pos]
        return (DecisionSteps([obs[d]], self.reward[d], self.ids[d], [np.zeros((d.sum(), 2), bool)]),
                TerminalSteps([obs[e]], self.reward[e], self.cut[e], self.ids[e]))

    def set_actions(self, behavior_name, actions):
        self.action[~self.done] = actions.discrete[:, 0]

    def close(self):
        pass
'''


class GymLine(gym.Env):
    """The line as a Gymnasium env (one agent)."""

    def __init__(self, length=5):
        self.length = length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(length,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def _obs(self):
        return np.eye(self.length, dtype=np.float32)[self.pos]

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.pos = int(np.clip(self.pos + 2 * int(action) - 1, 0, self.length - 1))
        self.t += 1
        reached = self.pos == self.length - 1
        return self._obs(), 1.0 if reached else -0.05, reached, self.t >= 30, {}


def line_return(policy, episodes=20, length=5, rng=None):
    """Mean return of ``policy(obs [n, length]) -> actions [n, 1]`` on the line, all
    episodes stepped as one batch."""
    pos, t = np.zeros(episodes, int), np.zeros(episodes, int)
    total, live = np.zeros(episodes), np.ones(episodes, bool)
    while live.any():
        actions = np.asarray(policy(np.eye(length, dtype=np.float32)[pos]))[:, 0]
        pos = np.where(live, np.clip(pos + 2 * actions - 1, 0, length - 1), pos)
        t += live
        reached = live & (pos == length - 1)
        total += np.where(reached, 1.0, -0.05 * live)
        live &= ~reached & (t < 30)
    return float(total.mean())


def random_line_return(episodes=200, seed=0):
    rng = np.random.default_rng(seed)
    return line_return(lambda obs: rng.integers(0, 2, (len(obs), 1)), episodes)


CONFIG = {
    "behaviors": {"Line": {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 64, "buffer_size": 256, "learning_rate": 3.0e-3,
                            "num_epoch": 3, "beta": 5.0e-3},
        "network_settings": {"hidden_units": 32, "num_layers": 1},
        "reward_signals": {"extrinsic": {"gamma": 0.95}},
        "time_horizon": 32, "max_steps": 2000, "summary_freq": 500,
        "checkpoint_interval": 100000}},
}
