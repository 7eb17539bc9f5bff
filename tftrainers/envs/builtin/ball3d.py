"""Ball3D: keep a ball on a tilting platform (ML-Agents' 3DBall).

Each area holds 12 agents, each with its own platform and ball. The agent tilts its
platform about the z and x axes (2 continuous actions in [-1, 1]: tilt rates); gravity
rolls the ball downhill. Observation (8): platform tilt z and x [rad], ball position
relative to the platform centre (3), ball velocity (3). +0.1 per step while the ball is
on the platform; -1 and the end of the episode when it falls off; 1000 steps at most
(interrupted), so the best return is 100. Episodes start with a random platform tilt and
a random ball position and velocity.

Environment parameters, as ML-Agents' 3DBall reads them at each episode start (its
3DBall_randomize config): ``gravity`` (default 9.81, the ball's acceleration downhill),
``scale`` (default 1, the ball's radius is 0.5 x scale: the height it is observed at) and
``mass`` (default 1; read and without effect: a ball rolling without slipping on a rigid
platform accelerates the same whatever its mass).
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.area_env import AreaEnv

DT = 0.1  # seconds per decision (Unity: 5 physics steps of 0.02 s)
SUBSTEPS = 2
ROLL_ACCEL = 9.81 * 5.0 / 7.0  # a solid ball rolling without slipping
MAX_TILT = 0.5  # rad (Unity's 0.25 quaternion limit is about 29 degrees)
MAX_TILT_RATE = 0.08  # rad per decision at action 1
HALF_SIZE = 3.0  # the ball is off when |x| or |z| exceeds this
BALL_RADIUS = 0.5
START_POSITION, START_SPEED, START_TILT = 1.5, 0.5, 0.17


class Ball3DEnv(AreaEnv):
    name = "Ball3D"
    agents_per_area = 12
    default_num_areas = 1
    max_episode_steps = 1000
    # As ML-Agents' 3DBall reads its "gravity" float property (3DBall_randomize.yaml).
    environment_parameter_defaults = {"gravity": 9.81, "scale": 1.0, "mass": 1.0}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.tilt = np.zeros((self.n_agents, 2))  # about z (moves the ball in x), about x (in z)
        self.position = np.zeros((self.n_agents, 2))  # ball x, z relative to the platform
        self.velocity = np.zeros((self.n_agents, 2))

    def observation_specs(self):
        return [ObservationSpec((8,), "platform_and_ball")]

    def action_spec(self):
        return ActionSpec.create_continuous(2)

    def _reset_agents(self, rows):
        k = len(rows)
        self.tilt[rows] = self.rng.uniform(-START_TILT, START_TILT, (k, 2))
        self.position[rows] = self.rng.uniform(-START_POSITION, START_POSITION, (k, 2))
        self.velocity[rows] = self.rng.uniform(-START_SPEED, START_SPEED, (k, 2))

    def _act(self, rows, actions):
        rate = np.clip(actions.continuous, -1.0, 1.0) * MAX_TILT_RATE
        tilt = np.clip(self.tilt[rows] + rate, -MAX_TILT, MAX_TILT)
        # Tilting up about z raises the +x edge, so the ball rolls towards -x; tilting up
        # about x lowers the +z edge, so the ball rolls towards +z.
        gravity = self.parameter_values["gravity"][rows, None]
        accel = ROLL_ACCEL / 9.81 * gravity * np.sin(tilt) * np.array([-1.0, 1.0])
        velocity, position = self.velocity[rows], self.position[rows]
        h = DT / SUBSTEPS
        for _ in range(SUBSTEPS):
            velocity = velocity + accel * h
            position = position + velocity * h
        self.tilt[rows], self.velocity[rows], self.position[rows] = tilt, velocity, position
        fell = np.any(np.abs(position) > HALF_SIZE, axis=1)
        reward = np.where(fell, -1.0, 0.1).astype(np.float32)
        return reward, fell

    def _observe(self, rows):
        tilt, position, velocity = self.tilt[rows], self.position[rows], self.velocity[rows]
        slope = np.sin(tilt) * np.array([1.0, -1.0])
        radius = BALL_RADIUS * self.parameter_values["scale"][rows]
        height = radius + np.sum(position * slope, axis=1)
        vertical = np.sum(velocity * slope, axis=1)
        obs = np.column_stack([tilt, position[:, 0], height, position[:, 1],
                               velocity[:, 0], vertical, velocity[:, 1]])
        return [obs.astype(np.float32)]

    def _heuristic(self, rows):
        # PD control: tilt so that the ball is pushed back to the centre, critically damped.
        position, velocity = self.position[rows], self.velocity[rows]
        desired = np.clip((0.6 * position + 0.7 * velocity) * np.array([1.0, -1.0]),
                          -MAX_TILT, MAX_TILT)
        action = np.clip((desired - self.tilt[rows]) / MAX_TILT_RATE, -1.0, 1.0)
        return ActionTuple(action.astype(np.float32), np.zeros((len(rows), 0), np.int32))
