"""A tiny two-team game for the self-play tests: ``Race?team=0`` against ``Race?team=1``.

Each area holds one agent per team. Every step a target (one of 3) is drawn; an agent whose
action names it moves one cell on. The first to reach ``GOAL`` cells wins (+1, the other
-1, both at once a draw, 0); after ``MAX_STEPS`` steps the one ahead wins. Rewards come only
at the end (zero-sum, as self-play's ELO wants). An agent that matches the target always
beats a random one in about 96% of races. Episodes last 3 to 6 steps, so areas end at
different times; a finished area sits out one step (as the built-ins).
Observation: the target one-hot (3), own and opponent's progress / GOAL. Action: 1 branch of 3.
"""
import numpy as np

from tftrainers.envs import (ActionSpec, BaseEnv, BehaviorSpec, DecisionSteps,
                             ObservationSpec, TerminalSteps)

GOAL, MAX_STEPS = 3, 6
TEAMS = ("Race?team=0", "Race?team=1")


class Race(BaseEnv):
    def __init__(self, seed=0, num_areas=16):
        self.n = num_areas
        self.rng = np.random.default_rng(seed)
        self.ids = np.arange(num_areas, dtype=np.int32)
        self.spec = BehaviorSpec((ObservationSpec((5,), "race"),),
                                 ActionSpec.create_discrete((3,)))

    @property
    def behavior_specs(self):
        return {name: self.spec for name in TEAMS}

    def reset(self):
        n = self.n
        self.progress = np.zeros((2, n), int)
        self.t = np.zeros(n, int)
        self.target = self.rng.integers(0, 3, n)
        self.action = np.zeros((2, n), int)
        self.reward = np.zeros((2, n), np.float32)
        self.done = np.zeros(n, bool)
        self.episodes = 0

    def step(self):
        restart, acting = self.done, ~self.done
        self.progress[:, restart], self.t[restart] = 0, 0
        self.progress += (acting & (self.action == self.target))
        self.t += acting
        finished = acting & ((self.progress >= GOAL).any(axis=0) | (self.t >= MAX_STEPS))
        lead = np.sign(self.progress[0] - self.progress[1]).astype(np.float32)
        self.reward = np.where(finished, np.stack([lead, -lead]), 0.0).astype(np.float32)
        self.done = finished
        self.episodes += int(finished.sum())
        self.target = self.rng.integers(0, 3, self.n)

    def observations(self, team):
        onehot = np.eye(3, dtype=np.float32)[self.target]
        own, other = self.progress[team], self.progress[1 - team]
        return np.concatenate([onehot, own[:, None] / GOAL, other[:, None] / GOAL],
                              axis=1).astype(np.float32)

    def get_steps(self, behavior_name):
        team = TEAMS.index(behavior_name)
        obs = self.observations(team)
        d, e = ~self.done, self.done
        return (DecisionSteps([obs[d]], self.reward[team][d], self.ids[d],
                              [np.zeros((d.sum(), 3), bool)]),
                TerminalSteps([obs[e]], self.reward[team][e], np.zeros(e.sum(), bool),
                              self.ids[e]))

    def set_actions(self, behavior_name, actions):
        team = TEAMS.index(behavior_name)
        self.action[team, ~self.done] = actions.discrete[:, 0]

    def close(self):
        pass


def race_results(policy_a, policy_b, matches=400, seed=0):
    """(wins, draws, losses) of ``policy_a`` (team 0) against ``policy_b`` (team 1) over
    ``matches`` races; a policy maps observations [n, 5] to actions [n, 1]."""
    env = Race(seed=seed, num_areas=matches)
    env.reset()
    results = np.full(matches, np.nan)
    while np.isnan(results).any():
        live = np.isnan(results)
        for team, policy in enumerate((policy_a, policy_b)):
            env.action[team] = np.asarray(policy(env.observations(team)))[:, 0]
        env.done = ~live  # a finished race stays finished
        before = env.progress.copy()
        env.step()
        env.progress[:, ~live] = before[:, ~live]
        ended = live & env.done
        results[ended] = env.reward[0][ended]
    return int((results > 0).sum()), int((results == 0).sum()), int((results < 0).sum())


def random_policy(seed=0):
    rng = np.random.default_rng(seed)
    return lambda obs: rng.integers(0, 3, (len(obs), 1))


CONFIG = {
    "behaviors": {"Race": {
        "trainer_type": "ppo",
        "hyperparameters": {"batch_size": 64, "buffer_size": 512, "learning_rate": 3.0e-3,
                            "num_epoch": 3, "beta": 5.0e-3},
        "network_settings": {"hidden_units": 32, "num_layers": 1},
        "reward_signals": {"extrinsic": {"gamma": 0.99}},
        "time_horizon": 16, "max_steps": 6000, "summary_freq": 2000,
        "checkpoint_interval": 100000,
        "self_play": {"save_steps": 1000, "team_change": 2000, "swap_steps": 500,
                      "window": 5, "play_against_latest_model_ratio": 0.5}}},
}
