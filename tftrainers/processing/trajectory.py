"""Trajectory: one agent's contiguous steps, as arrays, from AgentProcessor to a trainer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional

import numpy as np

from tftrainers.envs.base import ActionTuple, allowed_action_mask
from tftrainers.processing.buffer import (BufferKey, Key, StreamField, next_obs_key, obs_key,
                                          stream_key, team_obs_key)

__all__ = ["LogProbs", "Trajectory", "allowed_action_mask"]


class LogProbs(NamedTuple):
    """Log probabilities of the actions taken, per continuous dimension and per branch.

    continuous: [n, continuous_size] float32, log density of each raw Gaussian sample.
    discrete: [n, num_branches] float32, log probability of the index chosen in each branch.
    """

    continuous: np.ndarray
    discrete: np.ndarray


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Steps ``0..T-1`` of one agent, ending at an episode end or at ``time_horizon``.

    Step t: the agent saw ``obs[i][t]``, took ``actions[t]`` and then received
    ``rewards[t]``; the observation after the last step is ``next_obs``.

    Attributes:
        obs: per observation spec, [T, *shape] float32.
        next_obs: per observation spec, [*shape] float32, the observation after step T-1:
            the final observation if the episode ended, else the one the agent's next
            trajectory starts from. The critic's value of it bootstraps returns unless
            ``done``.
        actions: continuous [T, c] float32 raw (pre-clip) samples; discrete [T, b] int32.
        log_probs: continuous [T, c], discrete [T, b] float32 (see :class:`LogProbs`).
        action_mask: [T, sum(branches)] float32, 1 = allowed, as the policy saw it.
        rewards: [T] float32 environment reward for the action at step t.
        values: reward stream name -> [T] float32 value estimates from acting.
        memory: [T, memory_size] float32 recurrent state the policy read at step t, or None.
        group_id: [T] int32, 0 = no group.
        group_reward: [T] float32 reward of the agent's group for step t.
        done: the episode really ended after step T-1 (terminal and not interrupted):
            bootstrap with 0.
        interrupted: the episode was cut by a step limit after step T-1: bootstrap with
            ``V(next_obs)``. Both are False when ``time_horizon`` cut the trajectory.
        agent_id: the env's agent id.

    Group fields (MA-POCA), set by AgentProcessor once a behavior's agents report groups
    (None otherwise). K teammate slots per step; slot k of step t holds a member of the
    agent's group present at step t (``teammate_mask`` 1) or nothing (0: the member left
    the group, or the group is smaller):

        teammate_obs: per observation spec, [T, K, *shape] float32, what the teammates saw
            at step t.
        teammate_actions: continuous [T, K, c] float32 (raw samples), discrete
            [T, K, b] int32, what they did at step t.
        teammate_mask: [T, K] float32.
        groupmate_rewards: [T] float32, the sum of the teammates' own rewards for step t.
        next_teammate_obs: per observation spec, [K, *shape]: the teammates present after
            the last step (those still playing, or, when the group's episode ended, its
            last members), with ``next_teammate_mask`` [K].
        group_done: the agent's group's episode ended with this trajectory (True for an
            agent without a group whose episode ended). An agent that leaves before its
            group (dies) has ``done`` but not ``group_done``: its returns bootstrap from
            the group's value after it left (docs/dev/architecture.md#algorithm-facts).
    """

    obs: List[np.ndarray]
    next_obs: List[np.ndarray]
    actions: ActionTuple
    log_probs: LogProbs
    action_mask: np.ndarray
    rewards: np.ndarray
    values: Dict[str, np.ndarray]
    memory: Optional[np.ndarray]
    group_id: np.ndarray
    group_reward: np.ndarray
    done: bool
    interrupted: bool
    agent_id: int
    teammate_obs: Optional[List[np.ndarray]] = None
    teammate_actions: Optional[ActionTuple] = None
    teammate_mask: Optional[np.ndarray] = None
    groupmate_rewards: Optional[np.ndarray] = None
    next_teammate_obs: Optional[List[np.ndarray]] = None
    next_teammate_mask: Optional[np.ndarray] = None
    group_done: bool = False

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def episode_ended(self) -> bool:
        """The agent's episode ended after the last step (really or by a step limit)."""
        return self.done or self.interrupted

    def next_obs_per_step(self) -> List[np.ndarray]:
        """Per observation spec, [T, *shape]: the observation after each step."""
        return [np.concatenate([o[1:], n[None]], axis=0) for o, n in zip(self.obs, self.next_obs)]

    def to_fields(self) -> Dict[Key, np.ndarray]:
        """The steps as :class:`~tftrainers.processing.buffer.AgentBuffer` fields, [T, ...].

        Holds OBS / NEXT_OBS per observation, actions, log probs, action mask,
        environment and group rewards, DONE, per-stream VALUES and MEMORY (when used),
        and with groups TEAM_OBS per observation, the teammates' actions, TEAM_MASK and
        GROUPMATE_REWARDS.
        The trainer adds advantages and returns before appending to its buffer.
        """
        fields: Dict[Key, np.ndarray] = {}
        for i, (o, n) in enumerate(zip(self.obs, self.next_obs_per_step())):
            fields[obs_key(i)] = o
            fields[next_obs_key(i)] = n
        done = np.zeros(len(self), np.float32)
        if self.done and len(self):
            done[-1] = 1.0
        fields.update({
            BufferKey.CONTINUOUS_ACTION: self.actions.continuous,
            BufferKey.DISCRETE_ACTION: self.actions.discrete,
            BufferKey.CONTINUOUS_LOG_PROBS: self.log_probs.continuous,
            BufferKey.DISCRETE_LOG_PROBS: self.log_probs.discrete,
            BufferKey.ACTION_MASK: self.action_mask,
            BufferKey.ENVIRONMENT_REWARDS: self.rewards,
            BufferKey.GROUP_ID: self.group_id,
            BufferKey.GROUP_REWARD: self.group_reward,
            BufferKey.DONE: done,
        })
        for name, v in self.values.items():
            fields[stream_key(StreamField.VALUES, name)] = v
        if self.memory is not None:
            fields[BufferKey.MEMORY] = self.memory
        if self.teammate_mask is not None:
            for i, o in enumerate(self.teammate_obs):
                fields[team_obs_key(i)] = o
            fields[BufferKey.TEAM_CONTINUOUS_ACTION] = self.teammate_actions.continuous
            fields[BufferKey.TEAM_DISCRETE_ACTION] = self.teammate_actions.discrete
            fields[BufferKey.TEAM_MASK] = self.teammate_mask
            fields[BufferKey.GROUPMATE_REWARDS] = self.groupmate_rewards
        return fields
