"""A Gymnasium env that fails on purpose, for the env worker fault tests.

``gym:acting.faulty_envs:Faulty-v0`` (tests/ is on the path; Gymnasium imports this module, which registers
the id, in whatever process builds the env). Every instance draws a token from its seed
and observes ``[token, step in episode / 100, 0, 0]``, so a test can tell which instance
and which episode step every recorded observation came from. Episodes last 10 steps.

Env args: ``fault`` (``none``, ``raise``, ``crash``: the process kills itself,
``hang``: the step never returns), ``at_step`` (the instance's step at which it faults)
and ``once`` (a file path: the first instance to fault creates it, later ones run clean;
empty: fault every time).
"""
import os
import signal
import time

import gymnasium
import numpy as np

EPISODE = 10


class Faulty(gymnasium.Env):
    def __init__(self, fault="none", at_step=30, once=""):
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.fault, self.at_step, self.once = fault, int(at_step), once
        self.token = 0.0
        self.t = 0
        self.steps = 0

    def _obs(self):
        return np.array([self.token, self.t / 100.0, 0.0, 0.0], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.token = float(np.random.default_rng(seed).uniform(0.01, 1.0))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        if self.fault != "none" and self.steps == self.at_step and self._claim():
            if self.fault == "raise":
                raise RuntimeError("the engine lost its device")
            if self.fault == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.fault == "hang":
                time.sleep(3600)
        self.t += 1
        return self._obs(), 1.0 if action == 1 else 0.0, self.t >= EPISODE, False, {}

    def _claim(self):
        if not self.once:
            return True
        try:
            os.close(os.open(self.once, os.O_CREAT | os.O_EXCL))
            return True
        except FileExistsError:
            return False


if "Faulty-v0" not in gymnasium.registry:
    gymnasium.register("Faulty-v0", entry_point=Faulty)
