"""ML-Agents' small regression tasks, written for our env API (vectorised over agents).

The facts are those of ML-Agents' ``trainers/tests/simple_test_envs.py`` (the envs its
``test_simple_rl.py`` and ``test_hybrid.py`` train on); the code is ours:

- every agent has a position in [-1, 1] per action dimension (a line, or a plane and more
  with several dimensions), starting at 0, and a goal sign, +1 or -1, drawn per episode;
- it observes the goal sign: a vector of ``vec_obs_size`` copies of it and/or images
  filled with it; ``LineEnv(memory=True)`` shows it only while the episode's step count
  (one per dimension per step, as ML-Agents counts) is at most 2, then 0;
- a continuous action moves its dimension by the action clamped to +-step_size; a
  discrete branch (2 actions) moves its dimension by +1 (action 1) or -1 (action 0),
  also clamped; positions are clamped to [-1, 1];
- the episode ends (a real end; there is no step limit) once every dimension is at an
  end; the last reward is SUCCESS_REWARD * mean_d(position_d * goal), every earlier step
  gives -TIME_PENALTY. SUCCESS_REWARD = 1 + 6 * 0.01 (ML-Agents derives the 6 from its
  module constant STEP_SIZE = 0.2, whatever step size an env instance uses);
- ``final_rewards`` lists each finished episode's return (ML-Agents' pass criterion reads
  the last five, ``passes``).

Steps are reported the Unity way, as ML-Agents' test envs do: an agent whose episode ends
is in the terminal steps of that step, and its next episode starts at once, in the decision
steps of the same step. ``LineEnv`` gives the new episode a new agent id (ML-Agents'
SimpleEnvironment does); ``GroupLineEnv`` keeps ids, as ML-Agents' MultiAgentEnvironment
does (see its docstring).

Images hold the goal sign itself, -1 or +1 in every pixel, as ML-Agents' do, although our
API keeps visual observations in [0, 1]: with (goal + 1) / 2 the images of goal -1 are all
zeros, the encoder's output for them is its biases alone, and at the visual tests' learning
rate of 1e-4 the policy hardly learns that goal (the note of 2026-11-25 has the figures;
``signed_images=False`` gives those images). One deliberate difference: goals come from a
NumPy generator seeded by the ``seed`` argument (ML-Agents seeds Python's ``random`` with
its env arguments, so every run of a test sees the same goals).
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from tftrainers.envs.base import (ActionSpec, ActionTuple, BaseEnv, BehaviorSpec, DecisionSteps,
                                  ObservationKind, ObservationSpec, TerminalSteps,
                                  validate_actions)

TIME_PENALTY = 0.01
SUCCESS_REWARD = 1.0 + (int(1.0 / 0.2) + 1) * TIME_PENALTY  # 1.06, as ML-Agents
SHOW_GOAL_STEPS = 2  # MemoryEnvironment's num_show_steps
VISUAL_SHAPE = (20, 20, 3)  # ML-Agents' VIS_OBS_SIZE (channels first there)


def passes(final_rewards: Sequence[float], threshold: float = 0.9, last: int = 5) -> bool:
    """ML-Agents' pass criterion (``check_environment_trains``): the mean of the last five
    final rewards exceeds 0.9."""
    return len(final_rewards) >= last and last_mean(final_rewards, last) > threshold


def last_mean(final_rewards: Sequence[float], last: int = 5) -> float:
    if not len(final_rewards):
        return float("nan")
    return float(np.mean(np.asarray(final_rewards[-last:], np.float64)))


class _Lines:
    """The dynamics both envs share, on arrays [agents, dims]."""

    def __init__(self, n_agents, action_sizes, step_size, vec_obs_size, num_vector, num_visual,
                 memory, seed, signed_images=True):
        self.signed_images = bool(signed_images)
        continuous, discrete = action_sizes
        self.action_spec = ActionSpec(int(continuous), (2,) * int(discrete))
        self.dims = int(continuous) + int(discrete)
        self.step_size = float(step_size)
        self.num_vector, self.num_visual = int(num_vector), int(num_visual)
        self.vec_obs_size, self.memory = int(vec_obs_size), bool(memory)
        specs = [ObservationSpec((self.vec_obs_size,), f"goal_{i}")
                 for i in range(self.num_vector)]
        specs += [ObservationSpec(VISUAL_SHAPE, f"goal_image_{i}", ObservationKind.VISUAL)
                  for i in range(self.num_visual)]
        self.observation_specs = tuple(specs)
        self.rng = np.random.default_rng(seed)
        self.n = int(n_agents)
        self.position = np.zeros((self.n, self.dims))
        self.goal = np.ones(self.n)
        self.count = np.zeros(self.n, np.int64)  # ML-Agents' step_count: +dims per step

    def move(self, rows: np.ndarray, actions: ActionTuple) -> Tuple[np.ndarray, np.ndarray]:
        """Moves the agents in ``rows``; returns (done [k] bool, final reward [k])."""
        delta = np.concatenate([actions.continuous.astype(np.float64),
                                np.where(actions.discrete == 1, 1.0, -1.0)], axis=1)
        delta = np.clip(delta, -self.step_size, self.step_size)
        position = np.clip(self.position[rows] + delta, -1.0, 1.0)
        self.position[rows] = position
        self.count[rows] += self.dims
        done = np.all(np.abs(position) >= 1.0, axis=1)
        final = SUCCESS_REWARD * np.mean(position * self.goal[rows, None], axis=1)
        return done, final

    def observe(self, rows: np.ndarray, goal: np.ndarray | None = None) -> List[np.ndarray]:
        signal = self.goal[rows] if goal is None else goal
        if self.memory:
            signal = np.where(self.count[rows] <= SHOW_GOAL_STEPS, signal, 0.0)
        k = len(rows)
        obs = [np.repeat(signal[:, None], self.vec_obs_size, axis=1).astype(np.float32)
               for _ in range(self.num_vector)]
        image = (signal if self.signed_images else (signal + 1.0) / 2.0).astype(np.float32)
        obs += [np.broadcast_to(image[:, None, None, None], (k, *VISUAL_SHAPE)).copy()
                for _ in range(self.num_visual)]
        return obs

    def mask(self, k: int) -> List[np.ndarray]:
        return [np.zeros((k, 2), bool) for _ in self.action_spec.discrete_branches]


class LineEnv(BaseEnv):
    """ML-Agents' SimpleEnvironment (``memory=True``: its MemoryEnvironment) for
    ``num_agents`` independent agents of behavior ``name``.

    Args:
        action_sizes: (continuous dimensions, discrete branches of 2).
        step_size: the largest move per step (ML-Agents' tests: 0.2; 0.8 for 2D and hybrid).
        num_vector, vec_obs_size, num_visual: the observations (vector of the goal sign,
            20x20x3 images of it).
        memory: show the goal only for the first steps.
        num_agents: agents acting at once (ML-Agents' tests: 1).
        seed: seeds the goals.
    """

    def __init__(self, action_sizes=(1, 0), step_size=0.2, num_vector=1, vec_obs_size=1,
                 num_visual=0, memory=False, num_agents=1, seed=0, name="1D",
                 signed_images=True):
        self.name = name
        self.lines = _Lines(num_agents, action_sizes, step_size, vec_obs_size, num_vector,
                            num_visual, memory, seed, signed_images)
        self._spec = BehaviorSpec(self.lines.observation_specs, self.lines.action_spec)
        n = self.lines.n
        self.agent_id = np.zeros(n, np.int32)
        self._next_id = 0
        self.returns = np.zeros(n)
        self.final_rewards: List[float] = []
        # position * goal per dimension at each end (which dimension ends on the wrong side)
        self.final_outcomes: List[np.ndarray] = []
        self.final_goals: List[np.ndarray] = []
        self._steps = None
        self._actions = None

    @property
    def behavior_specs(self):
        return {self.name: self._spec}

    def _start(self, rows: np.ndarray) -> None:
        lines = self.lines
        lines.goal[rows] = lines.rng.choice([-1.0, 1.0], len(rows))
        lines.position[rows] = 0.0
        lines.count[rows] = 0
        self.returns[rows] = 0.0
        # A new episode is a new agent id, as ML-Agents' SimpleEnvironment numbers them.
        self.agent_id[rows] = self._next_id + np.arange(len(rows), dtype=np.int32)
        self._next_id += len(rows)

    def reset(self) -> None:
        everyone = np.arange(self.lines.n)
        self._start(everyone)
        self._steps = (self._decisions(np.zeros(self.lines.n, np.float32)),
                       TerminalSteps.empty(self._spec))

    def _decisions(self, reward: np.ndarray) -> DecisionSteps:
        everyone = np.arange(self.lines.n)
        return DecisionSteps(self.lines.observe(everyone), reward.astype(np.float32),
                             self.agent_id.copy(), self.lines.mask(self.lines.n))

    def get_steps(self, behavior_name):
        return self._steps

    def set_actions(self, behavior_name, actions):
        self._actions = validate_actions(behavior_name, self._spec.action_spec, actions,
                                         self.lines.n)

    def step(self) -> None:
        everyone = np.arange(self.lines.n)
        actions = self._actions or self._spec.action_spec.empty_action(self.lines.n)
        self._actions = None
        done, final = self.lines.move(everyone, actions)
        reward = np.where(done, final, -TIME_PENALTY)
        self.returns += reward
        terminal = TerminalSteps.empty(self._spec)
        if done.any():
            ended = np.flatnonzero(done)
            self.final_rewards.extend(self.returns[ended].tolist())
            self.final_outcomes.append(self.lines.position[ended] * self.lines.goal[ended, None])
            self.final_goals.append(self.lines.goal[ended].copy())
            # The last observation is the one of the episode that ended (ML-Agents builds it
            # before the reset).
            terminal = TerminalSteps(self.lines.observe(ended), reward[ended].astype(np.float32),
                                     np.zeros(len(ended), bool), self.agent_id[ended].copy())
            self._start(ended)
            reward = np.where(done, 0.0, reward)  # the new episode's first decision
        self._steps = (self._decisions(reward), terminal)


class GroupLineEnv(BaseEnv):
    """ML-Agents' MultiAgentEnvironment: groups of ``group_size`` agents on lines, one goal
    sign per group episode, vectorised over ``num_groups`` groups.

    As ML-Agents reports it (each member is a SimpleEnvironment; facts of its ``step`` and
    ``get_steps``):

    - members keep their agent id across episodes; every member of group g has group id
      g + 1;
    - a member whose dimensions all reach an end before its teammates' leaves: a terminal
      step with reward min(-0.01, its final reward), group reward 0; it is absent from the
      steps after;
    - the member that finishes the group (the last one, in member order, to reach an end)
      gets a terminal step with reward 0 and the group reward = its final reward; the group
      restarts at once: in that same step, every member (those that left early too) asks
      for its first decision of the new episode, with its old id (so the last member is in
      the terminal and the decision steps of one step, with one id);
    - ``final_rewards`` lists the final reward of every member that finished, in order.

    ``unity_steps=False`` reports the way our built-in group envs do instead
    (docs/dev/architecture.md#env-api): the
    group's members that ended sit out one step before the new episode's first decision.
    ML-Agents' env has a quirk we do not copy: after a group restarts mid-loop, members
    later in its loop act a second time in that step.
    """

    def __init__(self, action_sizes=(0, 1), step_size=0.2, num_vector=1, vec_obs_size=1,
                 num_visual=0, num_groups=1, group_size=2, unity_steps=True, seed=0, name="1D",
                 signed_images=True):
        self.name = name
        self.group_size = int(group_size)
        self.num_groups = int(num_groups)
        n = self.num_groups * self.group_size
        self.lines = _Lines(n, action_sizes, step_size, vec_obs_size, num_vector, num_visual,
                            False, seed, signed_images)
        self._spec = BehaviorSpec(self.lines.observation_specs, self.lines.action_spec)
        self.unity_steps = bool(unity_steps)
        self.agent_id = np.arange(n, dtype=np.int32)
        self.group_of = np.arange(n) // self.group_size
        self.group_id = (self.group_of + 1).astype(np.int32)
        self.active = np.zeros(n, bool)  # in the group's current episode, not yet finished
        self._waiting = np.zeros(n, bool)  # built-in way: restarts at the next step
        self.final_rewards: List[float] = []
        self.group_returns: List[float] = []  # group reward of each finished group episode
        self._decision_rows = np.zeros(0, np.int64)
        self._steps = None
        self._actions = None

    @property
    def behavior_specs(self):
        return {self.name: self._spec}

    def _start_groups(self, groups: np.ndarray) -> np.ndarray:
        rows = (groups[:, None] * self.group_size + np.arange(self.group_size)).reshape(-1)
        lines = self.lines
        lines.goal[rows] = np.repeat(lines.rng.choice([-1.0, 1.0], len(groups)), self.group_size)
        lines.position[rows] = 0.0
        lines.count[rows] = 0
        self.active[rows] = True
        return rows

    def reset(self) -> None:
        rows = self._start_groups(np.arange(self.num_groups))
        self._waiting[:] = False
        self._set_steps(rows, np.zeros(len(rows)), np.zeros(len(rows)), None)

    def get_steps(self, behavior_name):
        return self._steps

    def set_actions(self, behavior_name, actions):
        self._actions = validate_actions(behavior_name, self._spec.action_spec, actions,
                                         len(self._decision_rows))

    def _set_steps(self, rows, reward, group_reward, terminal):
        self._decision_rows = rows
        decision = DecisionSteps(self.lines.observe(rows), reward.astype(np.float32),
                                 self.agent_id[rows], self.lines.mask(len(rows)),
                                 self.group_id[rows], group_reward.astype(np.float32))
        self._steps = (decision, terminal if terminal is not None
                       else TerminalSteps.empty(self._spec))

    def step(self) -> None:
        acting = self._decision_rows
        actions = self._actions or self._spec.action_spec.empty_action(len(acting))
        self._actions = None
        restarting = np.zeros(0, np.int64)
        if self._waiting.any():  # built-in way: groups that ended last step start now
            restarting = self._start_groups(np.unique(self.group_of[self._waiting]))
            self._waiting[:] = False
            keep = ~np.isin(acting, restarting)
            acting = acting[keep]
            actions = ActionTuple(actions.continuous[keep], actions.discrete[keep])
        done, final = self.lines.move(acting, actions)
        groups = self.group_of[acting]
        # The group ends when no member is left in its episode after this step.
        self.active[acting[done]] = False
        still = np.bincount(self.group_of[self.active], minlength=self.num_groups)
        group_ends = done & (still[groups] == 0)
        # Its finishing member is the last finisher in member order (ML-Agents' loop order);
        # every other finisher of this step is treated as having left early.
        last = np.zeros(len(acting), bool)
        if group_ends.any():
            ending_rows = np.flatnonzero(group_ends)
            # acting is in row order, so the last index per group is the last member.
            _, first_from_end = np.unique(groups[ending_rows][::-1], return_index=True)
            last[ending_rows[::-1][first_from_end]] = True
        early = done & ~last
        reward = np.where(early, np.minimum(-TIME_PENALTY, final),
                          np.where(last, 0.0, -TIME_PENALTY))
        group_reward = np.where(last, final, 0.0)
        self.final_rewards.extend(final[done].tolist())
        self.group_returns.extend(final[last].tolist())
        terminal = TerminalSteps.empty(self._spec)
        if done.any():
            end = acting[done]
            terminal = TerminalSteps(self.lines.observe(end), reward[done].astype(np.float32),
                                     np.zeros(len(end), bool), self.agent_id[end],
                                     self.group_id[end], group_reward[done].astype(np.float32))
        going = acting[~done]
        going_reward, going_group = reward[~done], group_reward[~done]
        ended_groups = groups[last]
        if len(ended_groups):
            if self.unity_steps:
                new = self._start_groups(ended_groups)
                going = np.concatenate([going, new])
                going_reward = np.concatenate([going_reward, np.zeros(len(new))])
                going_group = np.concatenate([going_group, np.zeros(len(new))])
            else:
                self._waiting[np.isin(self.group_of, ended_groups)] = True
        if len(restarting):
            going = np.concatenate([going, restarting])
            going_reward = np.concatenate([going_reward, np.zeros(len(restarting))])
            going_group = np.concatenate([going_group, np.zeros(len(restarting))])
        order = np.argsort(going, kind="stable")
        self._set_steps(going[order], going_reward[order], going_group[order], terminal)
