"""A Gymnasium env whose observation has the wrong shape at one step, for the env data tests.

``gym:acting.misshapen_envs:Misshapen-v0`` (tests/ is on the path; Gymnasium imports this
module, which registers the id, in whatever process builds the env). Every instance
returns observations that fit its space until its step ``at_step``, which returns one that
does not.

Env args: ``kind``:

- ``vector``: a Box (4,) that gets a (5,) observation;
- ``image``: a uint8 Box (24, 24, 3) that gets the same pixels channels first (3, 24, 24):
  as many values, so only the shape tells them apart;
- ``dict``: a Dict whose 'pos' Box (16,) has per-element bounds (NumPy prints them on
  several lines) and gets a (17,) 'pos'.
"""
import gymnasium
import numpy as np

_BOUNDS = np.arange(1, 17, dtype=np.float32)


class Misshapen(gymnasium.Env):
    def __init__(self, kind="vector", at_step=5):
        spaces = gymnasium.spaces
        self.kind, self.at_step = kind, int(at_step)
        self.steps = 0
        self.observation_space = {
            "vector": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "image": spaces.Box(0, 255, (24, 24, 3), np.uint8),
            "dict": spaces.Dict({"pos": spaces.Box(-_BOUNDS, _BOUNDS, (16,), np.float32),
                                 "k": spaces.Discrete(3)}),
        }[kind]
        self.action_space = spaces.Discrete(2)

    def _obs(self, wrong: bool):
        if self.kind == "vector":
            return np.zeros(5 if wrong else 4, np.float32)
        if self.kind == "image":
            return np.zeros((3, 24, 24) if wrong else (24, 24, 3), np.uint8)
        return {"pos": np.zeros(17 if wrong else 16, np.float32), "k": 0}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(False), {}

    def step(self, action):
        self.steps += 1
        return self._obs(self.steps == self.at_step), 0.0, False, False, {}


if "Misshapen-v0" not in gymnasium.registry:
    gymnasium.register("Misshapen-v0", entry_point=Misshapen)
