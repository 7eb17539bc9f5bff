"""SoccerTwos: two teams of two agents play football on a small field (ML-Agents' SoccerTwos,
seen from above).

Each area is a field 16 long (``x`` from -8 to 8) and 10 wide (env args ``field_length``
and ``field_width``), with a goal 3 wide in the middle of each end; team 0 (behavior `SoccerTwos?team=0`) defends the goal at ``x = -8``
and attacks the one at ``x = 8``, team 1 (`SoccerTwos?team=1`) the other way round. The
two agents of a team are a group (group ids unique per team and area). Agents are discs
(radius 0.4) that overlap each other freely; the ball (radius 0.25) rolls with friction
(its speed falls by 5% a step) and bounces off the walls. An agent that touches the ball
pushes it away from itself at 3 a second, or kicks it at 9 a second when it moved
forwards in that step. A decision every 0.1 s. Each kick-off places the teams in their
halves at random spots, facing the other goal, and the ball near the centre.

Rewards (group rewards, as ML-Agents): a goal gives the scoring team 1 - (steps so far /
``max_steps``) (ML-Agents' accumulated time penalty) and the team that concedes -1; the
goal ends the episode of all four agents (a real end). The only individual reward is
ML-Agents' shaping for touching the ball, 0.2 * environment parameter ``ball_touch`` to the
player that touches it (default 0: none).
400 steps at most (env arg ``max_steps``; interrupted, a draw). The score of the area's
matches is kept in ``score`` ([areas, 2] goals by team 0 and team 1) and ``winner``
([areas], -1 until a goal).

Observation (16), in the team's own frame (rotated half a turn for team 1, so both teams
attack towards positive ``x``): own position (2) and heading (cos, sin), the ball's position
and velocity (4), the ball's position relative to the agent in the agent's own axes (2,
ahead and to the left), the teammate's position (2) and both opponents' positions (4);
positions / half the field's length (8), velocities in units a step. ML-Agents' agents see through ray sensors; a
small vector of positions keeps the game about play, not perception. Actions, 3 discrete
branches of 3 as ML-Agents': forward/back (none, forward 3.5 a second, back 2.5),
sideways (none, right, left, 2.5 a second), rotate (none, left, right, 20 degrees).

The heuristic team: the agent nearer the ball chases it, going round behind it and
running through it towards the opponent's goal (a kick); its teammate guards its own goal,
on the line from the goal to the ball.
"""
from __future__ import annotations

import numpy as np

from tftrainers.envs.area_env import GroupAreaEnv
from tftrainers.envs.base import ActionSpec, ActionTuple, ObservationSpec
from tftrainers.envs.teams import TeamEnvMixin

LENGTH, WIDTH = 8.0, 5.0  # half the field's length and width
GOAL_HALF = 1.5
AGENT_RADIUS, BALL_RADIUS = 0.4, 0.25
TOUCH = AGENT_RADIUS + BALL_RADIUS
FORWARD, BACK, SIDE, TURN = 0.35, 0.25, 0.25, np.radians(20.0)  # per step
PUSH, KICK = 0.3, 0.9  # ball speed per step after a touch, after a kick
FRICTION = 0.95
AGENTS = 4  # per area: rows 4a + 2t + k, team t, member k


class SoccerTwosEnv(TeamEnvMixin, GroupAreaEnv):
    name = "SoccerTwos"
    agents_per_area = AGENTS
    default_num_areas = 16
    max_episode_steps = 400
    env_arg_defaults = {"max_steps": 400, "field_length": 2 * LENGTH, "field_width": 2 * WIDTH}
    #: ML-Agents' ``ball_touch``: a player that touches the ball gets 0.2 * ball_touch.
    environment_parameter_defaults = {"ball_touch": 0.0}

    def __init__(self, seed: int = 0, num_areas: int | None = None, **env_args):
        super().__init__(seed, num_areas, **env_args)
        self.max_episode_steps = self.args["max_steps"]
        if self.max_episode_steps < 1:
            raise ValueError(f"builtin:SoccerTwos: env arg max_steps must be >= 1, got "
                             f"{self.max_episode_steps}")
        # Half the field's length and width; the goal stays 3 wide, the players' size too.
        self.length, self.width = self.args["field_length"] / 2, self.args["field_width"] / 2
        if self.length < 3.0 or self.width < GOAL_HALF + 0.5:
            raise ValueError(f"builtin:SoccerTwos: env args field_length must be >= 6 and "
                             f"field_width >= 4, got {self.args['field_length']:g} and "
                             f"{self.args['field_width']:g}")
        # A group per team and area (POCA trains each team's group).
        self._group_ids = (self._all_rows // 2 + 1).astype(np.int32)
        a = self.num_areas
        self.position = np.zeros((a, AGENTS, 2))  # world frame
        self.heading = np.zeros((a, AGENTS))
        self.ball = np.zeros((a, 2))
        self.ball_velocity = np.zeros((a, 2))
        self.clock = np.zeros(a, np.int64)
        self.score = np.zeros((a, 2), np.int64)
        self.winner = np.full(a, -1)
        self._team = np.array([0, 0, 1, 1])
        self._side = np.array([1.0, 1.0, -1.0, -1.0])  # world -> own frame, per member

    def team_of_rows(self, rows):
        return (np.asarray(rows) // 2) % 2

    def observation_specs(self):
        return [ObservationSpec((16,), "players_and_ball")]

    def action_spec(self):
        return ActionSpec.create_discrete([3, 3, 3])

    # --- episodes -------------------------------------------------------------
    def _reset_agents(self, rows):
        areas = np.unique(np.asarray(rows) // AGENTS)
        n, rng = len(areas), self.rng
        own = np.stack([-rng.uniform(1.5, 6.0, (n, AGENTS)) * (self.length / LENGTH),
                        rng.uniform(-self.width + 1.0, self.width - 1.0, (n, AGENTS))], axis=2)
        self.position[areas] = own * self._side[None, :, None]
        self.heading[areas] = np.where(self._team == 0, 0.0, np.pi)[None]
        self.ball[areas] = rng.uniform(-0.5, 0.5, (n, 2))
        self.ball_velocity[areas] = 0.0
        self.clock[areas] = 0

    # --- dynamics -------------------------------------------------------------
    def _act_group(self, rows, actions):
        rows = np.asarray(rows)
        areas = np.unique(rows // AGENTS)
        choice = np.zeros((self.num_areas, AGENTS, 3), np.int64)
        choice[rows // AGENTS, rows % AGENTS] = actions.discrete
        choice = choice[areas]
        position, heading = self.position[areas], self.heading[areas]
        ball, velocity = self.ball[areas], self.ball_velocity[areas]
        heading = heading + np.select([choice[..., 2] == 1, choice[..., 2] == 2],
                                      [TURN, -TURN], 0.0)
        heading = (heading + np.pi) % (2 * np.pi) - np.pi
        ahead = np.stack([np.cos(heading), np.sin(heading)], axis=2)
        left = np.stack([-ahead[..., 1], ahead[..., 0]], axis=2)
        forward = np.select([choice[..., 0] == 1, choice[..., 0] == 2], [FORWARD, -BACK], 0.0)
        sideways = np.select([choice[..., 1] == 1, choice[..., 1] == 2], [-SIDE, SIDE], 0.0)
        position = position + ahead * forward[..., None] + left * sideways[..., None]
        limit = np.array([self.length - AGENT_RADIUS, self.width - AGENT_RADIUS])
        position = np.clip(position, -limit, limit)

        # The agent nearest the ball among those touching it pushes or kicks it.
        offset = ball[:, None, :] - position
        gap = np.linalg.norm(offset, axis=2)
        touching = gap < TOUCH
        kicker = np.argmin(np.where(touching, gap, np.inf), axis=1)
        touched = np.flatnonzero(touching.any(axis=1))
        touch_reward = np.zeros((len(areas), AGENTS))
        if len(touched):
            k = kicker[touched]
            touch_reward[touched, k] = 0.2 * self.parameter_values["ball_touch"][
                areas[touched] * AGENTS]
            direction = offset[touched, k] / np.maximum(gap[touched, k], 1e-6)[:, None]
            speed = np.where(forward[touched, k] > 0, KICK, PUSH)
            velocity[touched] = direction * speed[:, None]
            ball[touched] = position[touched, k] + direction * TOUCH
        ball = ball + velocity
        velocity = velocity * FRICTION
        # Goals, then walls.
        in_mouth = np.abs(ball[:, 1]) < GOAL_HALF - BALL_RADIUS
        scored = np.where(in_mouth & (ball[:, 0] > self.length), 0,
                          np.where(in_mouth & (ball[:, 0] < -self.length), 1, -1))
        for axis, edge in ((0, self.length - BALL_RADIUS), (1, self.width - BALL_RADIUS)):
            out = (np.abs(ball[:, axis]) > edge) & (scored < 0)
            ball[out, axis] = np.sign(ball[out, axis]) * (2 * edge - np.abs(ball[out, axis]))
            velocity[out, axis] *= -1.0

        self.clock[areas] += 1
        self.position[areas], self.heading[areas] = position, heading
        self.ball[areas], self.ball_velocity[areas] = ball, velocity
        group_reward = np.zeros((self.num_areas, 2))
        goal = np.flatnonzero(scored >= 0)
        if len(goal):
            who, where = scored[goal], areas[goal]
            group_reward[where, who] = 1.0 - self.clock[where] / self.max_episode_steps
            group_reward[where, 1 - who] = -1.0
            self.score[where, who] += 1
            self.winner[where] = who
        done = np.zeros(self.num_areas, bool)
        done[areas[goal]] = True
        where = np.searchsorted(areas, rows // AGENTS)
        reward = touch_reward[where, rows % AGENTS].astype(np.float32)
        return reward, group_reward, np.zeros(len(rows), bool), done

    def _act(self, rows, actions):
        # GroupAreaEnv's, with a group reward per team: [areas, 2].
        reward, group_reward, left, done = self._act_group(rows, actions)
        area = self._area_of[rows]
        self._step_group_reward = group_reward[area, self.team_of_rows(rows)].astype(np.float32)
        if self.args["shared_reward"]:
            reward = reward + self._step_group_reward
        return reward, left | done[area]

    # --- observations ---------------------------------------------------------
    def _frames(self, rows):
        rows = np.asarray(rows)
        area, member = rows // AGENTS, rows % AGENTS
        return area, member, self._side[member][:, None]

    def _observe(self, rows):
        area, member, side = self._frames(rows)
        me = self.position[area, member] * side
        heading = self.heading[area, member] + np.where(side[:, 0] < 0, np.pi, 0.0)
        ahead = np.stack([np.cos(heading), np.sin(heading)], axis=1)
        ball = self.ball[area] * side
        ball_v = self.ball_velocity[area] * side
        rel = ball - me
        rel_own = np.stack([(rel * ahead).sum(1), rel[:, 0] * -ahead[:, 1] +
                            rel[:, 1] * ahead[:, 0]], axis=1)
        team_first = (member // 2) * 2
        mate = self.position[area, team_first + (1 - member % 2)] * side
        opponents = 2 - team_first
        other = np.concatenate([self.position[area, opponents] * side,
                                self.position[area, opponents + 1] * side], axis=1)
        scale = self.length
        obs = np.concatenate([me / scale, ahead, ball / scale, ball_v, rel_own / scale,
                              mate / scale, other / scale], axis=1)
        return [obs.astype(np.float32)]

    # --- the teacher ----------------------------------------------------------
    def _heuristic(self, rows):
        area, member, side = self._frames(rows)
        me = self.position[area, member] * side
        heading = self.heading[area, member] + np.where(side[:, 0] < 0, np.pi, 0.0)
        ball = self.ball[area] * side
        mate_index = (member // 2) * 2 + (1 - member % 2)
        mate = self.position[area, mate_index] * side
        mine = np.linalg.norm(ball - me, axis=1)
        theirs = np.linalg.norm(ball - mate, axis=1)
        chaser = (mine < theirs) | ((mine == theirs) & (member % 2 == 0))
        # Chaser: behind the ball on the line from the opponent's goal, then through it.
        goal = np.array([self.length, 0.0])
        aim = goal - ball
        aim /= np.maximum(np.linalg.norm(aim, axis=1, keepdims=True), 1e-6)
        behind = ball - aim * (TOUCH + 0.35)
        along = ((me - ball) * aim).sum(1)  # < 0: on the right side of the ball
        across = np.abs((me - ball)[:, 0] * aim[:, 1] - (me - ball)[:, 1] * aim[:, 0])
        lined_up = (along < 0) & (across < 0.15)
        normal = np.stack([-aim[:, 1], aim[:, 0]], axis=1)
        which = np.sign(((me - ball) * normal).sum(1, keepdims=True) + 1e-9)
        around = ball - aim * 0.8 + normal * which * 1.2  # pass the ball on the side
        target = np.where(lined_up[:, None], ball + aim,
                          np.where((along > -0.3)[:, None], around, behind))
        # Guard: on the line from its own goal to the ball, 2.5 out of the goal.
        own_goal = np.array([-self.length, 0.0])
        to_ball = ball - own_goal
        guard = own_goal + to_ball / np.maximum(np.linalg.norm(to_ball, axis=1,
                                                               keepdims=True), 1e-6) * 2.5
        target = np.where(chaser[:, None], target, guard)
        limit = np.array([self.length - AGENT_RADIUS, self.width - AGENT_RADIUS])
        target = np.clip(target, -limit, limit)  # a ball along a wall: push it along
        way = target - me
        # Far away: face the way and run. Near the ball: face the opponent's goal (through
        # the ball) and step there sideways and forwards, so that a run-in is a kick.
        near = chaser & (np.linalg.norm(ball - me, axis=1) < 1.6)
        facing = np.where(near, np.arctan2(aim[:, 1], aim[:, 0]),
                          np.arctan2(way[:, 1], way[:, 0]))
        turn = (facing - heading + np.pi) % (2 * np.pi) - np.pi
        rotate = np.where(turn > TURN / 2, 1, np.where(turn < -TURN / 2, 2, 0))
        ahead = np.stack([np.cos(heading), np.sin(heading)], axis=1)
        f = (way * ahead).sum(1)
        l = way[:, 1] * ahead[:, 0] - way[:, 0] * ahead[:, 1]
        move = np.where(f > 0.12, 1, np.where(f < -0.12, 2, 0))
        move = np.where(near | (np.abs(turn) < 1.2), move, 0)
        sideways = np.where(l > 0.12, 2, np.where(l < -0.12, 1, 0))
        discrete = np.stack([move, sideways, rotate], axis=1).astype(np.int32)
        return ActionTuple(np.zeros((len(rows), 0), np.float32), discrete)
