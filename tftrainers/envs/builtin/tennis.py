"""Tennis: two rackets hit a ball over a net (ML-Agents' Tennis, seen from the side in 2-D).

Each area is a court 16 long (``x`` from -8 to 8) with a net of height 1 at ``x = 0``;
team 0's racket plays on the left half, team 1's on the right (behaviors `Tennis?team=0`
and `Tennis?team=1`, one agent each). As in volleyball the ball must be returned before
it touches the ground. A rally starts with the ball dropped above the middle of a random
side. A racket hits the ball when they come within 0.8 of each other, unless it hit the
ball last (no double hits): the ball leaves towards the net at 6 + half the racket's speed
towards the net (running away adds nothing), and upwards at 6 + half the racket's upward
speed, so a racket that
stands still under the ball returns it mid-court, one that runs in hits it long (or out),
and a hit from the baseline needs a run-in to clear the net. Gravity 9.81; a decision
every 0.1 s (4 physics substeps).

Rewards (ML-Agents' original Tennis): +0.1 to the racket whose hit crosses the net above
it; -0.01 to the racket that loses the rally. A racket loses the rally when the ball lands
in its half, or when the ball it hit last lands out (beyond a baseline) or crosses the
net below its top. The rally's end ends both episodes (a real end); 400 steps at most
(env arg ``max_steps``; interrupted, no one wins). Env arg ``point_reward`` (default 0)
adds that much for the winner and takes it from the loser at the rally's end: 1 makes
ML-Agents' 1.x scoring (+1/-1 a point, zero-sum, which self-play's ELO reads from the
final reward's sign). The match score is kept in ``score`` ([areas, 2] rallies won by
team 0 and team 1) and ``winner`` ([areas], -1 until a rally ended).

Observation (10), in the team's own frame (``x`` mirrored for team 1, so both teams see
their own half at negative ``x`` and play towards positive ``x``): own racket position
and velocity (4), ball position and velocity (4), the opponent's racket position (2);
positions / 8, velocities / 10. Actions, 2 continuous in [-1, 1]: run towards (+) or away
from the net (at most 8 a second; a racket stays in its half, between 0.3 from the net
and 2 behind its baseline), and jump (above 0.5, from the ground: up at 5 a second, about
1.3 high), as the original Tennis (8 observations, without the opponent's racket). ML-Agents
1.x's racket also rotates (a third action); a point racket has no angle, its hit's
direction comes from its motion instead.

The heuristic predicts where the falling ball passes racket height and runs there; at
the hit it stands still for a mid-court return, or runs in from deep just enough to land
the ball mid-court. It misjudges each ball by a random error (normal, env arg
``aim_error``, default 0.8), so it returns about 87% of balls against itself and a
better player can beat it; ``aim_error=0`` returns nearly every ball.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import AreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.teams import TeamEnvMixin

HALF = 8.0  # half the court's length
NET = 1.0  # net height
GRAVITY = 9.81
DT = 0.1
SUBSTEPS = 4
RUN_SPEED = 8.0
JUMP_SPEED = 5.0
RACKET_HEIGHT = 1.0  # the racket's height when its player stands
HIT_RADIUS = 0.8
RETURN_SPEED = (6.0, 6.0)  # forwards, upwards, plus half the racket's own speed
NET_GAP, BEHIND_BASELINE = 0.3, 2.0
SERVE_X, SERVE_HEIGHT = -4.0, 4.0  # own frame


class TennisEnv(TeamEnvMixin, AreaEnv):
    name = "Tennis"
    agents_per_area = 2
    default_num_areas = 16
    max_episode_steps = 400
    env_arg_defaults = {"max_steps": 400, "point_reward": 0.0, "aim_error": 0.8}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.max_episode_steps = self.args["max_steps"]
        if self.max_episode_steps < 1:
            raise ValueError(f"builtin:Tennis: env arg max_steps must be >= 1, got "
                             f"{self.max_episode_steps}")
        if self.args["aim_error"] < 0:
            raise ValueError(f"builtin:Tennis: env arg aim_error must be >= 0, got "
                             f"{self.args['aim_error']}")
        a = self.num_areas
        # World frame: team 0 on the left (x < 0). racket[a, t] = (x, y), velocity likewise.
        self.racket = np.zeros((a, 2, 2))
        self.racket_velocity = np.zeros((a, 2, 2))
        self.ball = np.zeros((a, 2))
        self.ball_velocity = np.zeros((a, 2))
        self.last_hit = np.full(a, -1)  # team that hit last, -1: served
        self.score = np.zeros((a, 2), np.int64)
        self.winner = np.full(a, -1)
        self._heuristic_rng = np.random.default_rng(seed + 7919)
        self.aim = np.zeros((a, 2))  # the heuristic's error where it meets the next ball
        self._side = np.array([1.0, -1.0])  # world x -> own x, per team

    def team_of_rows(self, rows):
        return np.asarray(rows) % 2

    def observation_specs(self):
        return [ObservationSpec((10,), "rackets_and_ball")]

    def action_spec(self):
        return ActionSpec.create_continuous(2)

    # --- episodes -------------------------------------------------------------
    def _reset_agents(self, rows):
        areas = np.unique(np.asarray(rows) // 2)
        n = len(areas)
        rng = self.rng
        start = -rng.uniform(2.0, 6.0, (n, 2))  # own frame
        self.racket[areas, :, 0] = start * self._side
        self.racket[areas, :, 1] = RACKET_HEIGHT
        self.racket_velocity[areas] = 0.0
        receiver = rng.integers(0, 2, n)
        serve_x = SERVE_X + rng.uniform(-1.5, 1.5, n)
        self.ball[areas, 0] = serve_x * self._side[receiver]
        self.ball[areas, 1] = SERVE_HEIGHT
        self.ball_velocity[areas, 0] = rng.uniform(-0.5, 0.5, n)
        self.ball_velocity[areas, 1] = 0.0
        self.last_hit[areas] = -1
        self.aim[areas] = self._heuristic_rng.normal(0.0, self.args["aim_error"], (n, 2))

    # --- dynamics -------------------------------------------------------------
    def _act(self, rows, actions):
        rows = np.asarray(rows)
        areas = np.unique(rows // 2)  # both rackets of an area act together
        a = len(areas)
        command = np.zeros((self.num_areas, 2, 2))
        command[rows // 2, rows % 2] = np.clip(actions.continuous, -1.0, 1.0)
        command = command[areas]
        racket, rvel = self.racket[areas], self.racket_velocity[areas]
        ball, bvel = self.ball[areas], self.ball_velocity[areas]
        last = self.last_hit[areas]
        side = self._side[None, :]
        rvel[..., 0] = command[..., 0] * RUN_SPEED * side
        grounded = racket[..., 1] <= RACKET_HEIGHT + 1e-9
        jump = grounded & (command[..., 1] > 0.5)
        rvel[..., 1] = np.where(jump, JUMP_SPEED, np.where(grounded, 0.0, rvel[..., 1]))
        reward = np.zeros((a, 2))
        over = np.zeros(a, bool)
        loser = np.full(a, -1)
        h = DT / SUBSTEPS
        for _ in range(SUBSTEPS):
            live = ~over
            # rackets
            racket += rvel * h
            rvel[..., 1] -= GRAVITY * h
            landed = racket[..., 1] <= RACKET_HEIGHT
            racket[..., 1] = np.where(landed, RACKET_HEIGHT, racket[..., 1])
            rvel[..., 1] = np.where(landed, 0.0, rvel[..., 1])
            own_x = np.clip(racket[..., 0] * side, -HALF - BEHIND_BASELINE, -NET_GAP)
            racket[..., 0] = own_x * side
            # ball
            before = ball[:, 0].copy()
            bvel[:, 1] -= GRAVITY * h * live
            ball += bvel * h * live[:, None]
            crossed = live & (np.sign(before) != np.sign(ball[:, 0])) & (before != 0)
            into_net = crossed & (ball[:, 1] < NET)
            clear = crossed & ~into_net & (last >= 0)
            reward[clear, last[clear]] += 0.1
            fault = into_net & (last >= 0)
            loser[fault] = last[fault]
            # A served ball that meets the net falls back on the receiver's side.
            served_net = into_net & (last < 0)
            ball[served_net, 0] = before[served_net]
            bvel[served_net, 0] = 0.0
            over |= fault
            live = ~over
            # hits
            gap = np.linalg.norm(racket - ball[:, None, :], axis=2)  # [a, 2]
            can = live[:, None] & (gap <= HIT_RADIUS) & (np.arange(2)[None] != last[:, None])
            # the ball's side decides who reaches it (rackets stay in their halves)
            team_of_ball = (ball[:, 0] > 0).astype(np.int64)
            hitter = np.where(can[np.arange(a), team_of_ball], team_of_ball, -1)
            hit = hitter >= 0
            if hit.any():
                k = np.flatnonzero(hit)
                t = hitter[k]
                toward = self._side[t]
                own_rvel_x = np.maximum(rvel[k, t, 0] * toward, 0.0)  # running back: no loss
                bvel[k, 0] = (RETURN_SPEED[0] + 0.5 * own_rvel_x) * toward
                bvel[k, 1] = RETURN_SPEED[1] + 0.5 * rvel[k, t, 1]
                last[k] = t
                self.aim[areas[k], 1 - t] = self._heuristic_rng.normal(
                    0.0, self.args["aim_error"], len(k))
            # the ground
            down = live & (ball[:, 1] <= 0.0)
            if down.any():
                k = np.flatnonzero(down)
                half = (ball[k, 0] > 0).astype(np.int64)
                out = np.abs(ball[k, 0]) > HALF
                loser[k] = np.where(out & (last[k] >= 0), last[k], half)
                over[k] = True
        finished = np.flatnonzero(over)
        if len(finished):
            lost = loser[finished]
            reward[finished, lost] -= 0.01 + self.args["point_reward"]
            reward[finished, 1 - lost] += self.args["point_reward"]
            self.score[areas[finished], 1 - lost] += 1
            self.winner[areas[finished]] = 1 - lost
        self.racket[areas], self.racket_velocity[areas] = racket, rvel
        self.ball[areas], self.ball_velocity[areas] = ball, bvel
        self.last_hit[areas] = last
        position = np.searchsorted(areas, rows // 2)
        row_reward = reward[position, rows % 2].astype(np.float32)
        return row_reward, over[position]

    # --- observations ---------------------------------------------------------
    def _observe(self, rows):
        rows = np.asarray(rows)
        area, team = rows // 2, rows % 2
        side = self._side[team][:, None]
        scale = np.array([1.0 / HALF, 1.0 / HALF])
        mirror = np.concatenate([side, np.ones_like(side)], axis=1)  # x flips, y does not
        own = self.racket[area, team] * mirror * scale
        own_v = self.racket_velocity[area, team] * mirror / 10.0
        ball = self.ball[area] * mirror * scale
        ball_v = self.ball_velocity[area] * mirror / 10.0
        other = self.racket[area, 1 - team] * mirror * scale
        return [np.concatenate([own, own_v, ball, ball_v, other], axis=1).astype(np.float32)]

    # --- the teacher ----------------------------------------------------------
    def _heuristic(self, rows):
        rows = np.asarray(rows)
        area, team = rows // 2, rows % 2
        side = self._side[team]
        x, y = self.ball[area, 0] * side, self.ball[area, 1]  # own frame
        vx, vy = self.ball_velocity[area, 0] * side, self.ball_velocity[area, 1]
        me = self.racket[area, team, 0] * side
        # When the ball next passes racket height on its way down.
        disc = vy ** 2 + 2 * GRAVITY * np.maximum(y - RACKET_HEIGHT, 0.0)
        t = (vy + np.sqrt(disc)) / GRAVITY
        landing = x + vx * t
        coming = (self.last_hit[area] != team) & (landing < 0)
        target = np.where(coming, landing - 0.15 + self.aim[area, team], -4.0)
        run = np.clip((target - me) / (RUN_SPEED * DT), -1.0, 1.0)
        # At the hit: still for a mid-court return; from deep, running in just enough to
        # land the ball mid-court (the return speed needed, (4 - x) / 1.37 s of flight).
        needed = np.clip(2.0 * ((4.0 - me) / 1.37 - RETURN_SPEED[0]), 0.0, RUN_SPEED)
        run = np.where(coming & (t < 0.25), needed / RUN_SPEED, run)
        jump = np.full(len(rows), -1.0)
        action = np.stack([run, jump], axis=1).astype(np.float32)
        return ActionTuple(action, np.zeros((len(rows), 0), np.int32))
