"""AgentProcessor: env steps of one behavior -> Trajectory objects, assembled on arrays.

The loop that feeds it (one behavior; ``policy`` returns an :class:`ActionInfo`)::

    processor = AgentProcessor(spec, time_horizon=64)
    action_info = None
    while training:
        decision_steps, terminal_steps = env.get_steps(name)
        processor.add_experiences(decision_steps, terminal_steps, action_info)
        action_info = policy(decision_steps)          # for exactly these agents, in any order
        env.set_actions(name, clip_for_env(action_info.actions))
        env.step()
        for trajectory in processor.pop_trajectories():
            trainer.process(trajectory)
        stats = processor.pop_episode_stats()

Step t of an agent is (obs_t, action_t, reward_t): the observation comes with a decision
step, the action with the ``action_info`` of the NEXT call, and the reward with the
agent's next decision or terminal step (``reward`` there is the reward since the agent's
last decision, as in ML-Agents). An agent may skip calls between its decision and its
reward; its step waits. A reward reported with an agent's first decision of an episode
belongs to no action of ours and is dropped, as ML-Agents does.

Trajectories are emitted when an agent has ``time_horizon`` steps (``next_obs`` is its
current observation, which also starts its next trajectory) or when its episode ends
(``next_obs`` is the terminal observation; ``done`` unless ``interrupted``).

Groups (MA-POCA; docs/dev/architecture.md#env-api, #algorithm-facts): once agents report a nonzero
``group_id``, every step
also records, when the actions arrive, the teammates that decided in the same call (their
observations and actions, copied so they outlive the teammates' own trajectories), and
when the rewards arrive, the sum of the teammates' own rewards (those reported in the same
call; a teammate whose reward comes later, having skipped calls, is not counted). An emitted trajectory
carries the teammates present after its last step and whether its group's episode ended
with it (``group_done``): a member that left early (died) ends ``done`` while its group
goes on, and its returns bootstrap from the group's later value. ``EpisodeStats`` say
which episodes ended their group's (``Environment/Group Cumulative Reward``).

Both step conventions of the env API (docs/dev/architecture.md#env-api) take the same path, with no
mode to set:
an agent that ended may sit out a step before its next episode (the built-ins' default),
or, as Unity reports it, be in the terminal AND decision steps of one call with the same
id. Terminal steps are processed first, so the old trajectory closes (with the terminal
reward and group reward) before the decision opens the new one. A group's episode ends
when none of its members with an episode under way decides on: members that left early
and are back in the decision steps of the call the group ends start its next episode.

Performance: every agent id maps to a dense row of preallocated ``[rows, steps, ...]``
arrays; a step is a handful of fancy-indexed writes for all agents at once. The id -> row
mapping is cached while a behavior's agent-id array stays the same (the common case), and
Python loops run only over agents whose trajectory is emitted.
"""
from __future__ import annotations

import queue
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from tftrainers.envs.base import ActionTuple, BehaviorSpec, DecisionSteps, TerminalSteps
from tftrainers.processing.buffer import (BufferKey, Key, StreamField, obs_key, stream_key,
                                          team_obs_key)
from tftrainers.processing.trajectory import LogProbs, Trajectory

__all__ = ["ActionInfo", "AgentProcessor", "EpisodeStats", "TrajectoryQueue"]


class ActionInfo(NamedTuple):
    """What the policy produced for the agents of one ``DecisionSteps``.

    Every array has the agents on axis 0, aligned with ``agent_id`` (any order, but exactly
    the agents of that ``DecisionSteps``). A plain mapping with these keys is accepted too.

    Attributes:
        agent_id: [n] int agent ids.
        actions: ActionTuple, continuous [n, c] float32 RAW Gaussian samples (before the
            clip to [-1, 1] the env receives; the ones the log probs are of), discrete
            [n, branches] int32.
        log_probs: LogProbs, continuous [n, c] and discrete [n, branches] float32. Also
            accepted: an ActionTuple-like pair, a mapping with "continuous"/"discrete", or
            one [n, c + branches] array (continuous columns first).
        values: reward stream name -> [n] float32 value estimates of the observation
            (e.g. {"extrinsic": ..., "curiosity": ...}); may be empty (no critic).
        memory: [n, memory_size] float32 recurrent state the policy READ for this decision
            (its state before the step), or None without memory.
    """

    agent_id: np.ndarray
    actions: ActionTuple
    log_probs: LogProbs
    values: Mapping[str, np.ndarray]
    memory: Optional[np.ndarray] = None


class EpisodeStats(NamedTuple):
    """Finished episodes (terminal steps), one entry each, in the order they ended.

    Attributes:
        agent_id: [E] int64.
        cumulative_reward: [E] float32 sum of the environment rewards of the episode
            (``Environment/Cumulative Reward``).
        group_cumulative_reward: [E] float32 sum of the group rewards the agent received.
        episode_length: [E] int64 number of actions taken (``Environment/Episode Length``).
        interrupted: [E] bool, cut by a step limit.
        group_done: [E] bool, the agent's group's episode ended with this one (no member
            goes on); True for agents without a group.
    """

    agent_id: np.ndarray
    cumulative_reward: np.ndarray
    group_cumulative_reward: np.ndarray
    episode_length: np.ndarray
    interrupted: np.ndarray
    group_done: np.ndarray

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.agent_id)


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


_NO_EPISODES = EpisodeStats(*(_read_only(np.zeros(0, dtype)) for dtype in (
    np.int64, np.float32, np.float32, np.int64, bool, bool)))

# Internal per-step field: row + 1 of each teammate slot (0 = empty), for their rewards.
_TEAM_ROWS = "team_rows"


class TrajectoryQueue:
    """Thread-safe FIFO of trajectories from an AgentProcessor to a trainer.

    Args:
        behavior_name: the behavior whose trajectories it carries.
        maxsize: 0 for unbounded; otherwise ``put`` blocks while full (a threaded trainer
            then slows the env loop instead of letting memory grow).
    """

    def __init__(self, behavior_name: str = "", maxsize: int = 0):
        self.behavior_name = behavior_name
        self._queue: "queue.Queue[Trajectory]" = queue.Queue(maxsize)

    def put(self, trajectory: Trajectory) -> None:
        self._queue.put(trajectory)

    def get_nowait(self) -> Trajectory:
        """Raises ``queue.Empty`` when there is none."""
        return self._queue.get_nowait()

    def drain(self) -> List[Trajectory]:
        """Every trajectory queued so far, oldest first."""
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def empty(self) -> bool:
        return self._queue.empty()

    def __len__(self) -> int:
        return self._queue.qsize()


# ----------------------------------------------------------------------------- action_info


def _well_formed(info: ActionInfo, spec: BehaviorSpec) -> bool:
    """Whether ``info`` already has exactly the arrays ``_coerce_action_info`` returns."""
    ids, actions, log_probs = info.agent_id, info.actions, info.log_probs
    if type(ids) is not np.ndarray or ids.ndim != 1 or ids.dtype.kind not in "iu":
        return False
    if type(actions) is not ActionTuple or type(log_probs) is not LogProbs:
        return False
    n, c, b = len(ids), spec.action_spec.continuous_size, spec.action_spec.discrete_size
    for array, width, dtype in ((actions.continuous, c, np.float32),
                                (actions.discrete, b, np.int32),
                                (log_probs.continuous, c, np.float32),
                                (log_probs.discrete, b, np.float32)):
        if type(array) is not np.ndarray or array.dtype != dtype or array.shape != (n, width):
            return False
    memory = info.memory
    return (not info.values and (memory is None or (
        type(memory) is np.ndarray and memory.dtype == np.float32 and memory.ndim == 2
        and len(memory) == n)))


def _coerce_action_info(info: Union[ActionInfo, Mapping], spec: BehaviorSpec) -> ActionInfo:
    """Checks ``action_info`` once at the boundary; returns float32/int32 arrays."""
    if type(info) is ActionInfo and _well_formed(info, spec):  # the policy's own: as is
        return info
    if isinstance(info, ActionInfo):
        get = info._asdict().get
    elif isinstance(info, Mapping):
        unknown = set(info) - set(ActionInfo._fields)
        if unknown:
            raise ValueError(f"action_info: unknown keys {sorted(unknown)}; allowed "
                             f"{list(ActionInfo._fields)}")
        get = info.get
    else:
        raise TypeError(f"action_info must be an ActionInfo or a mapping, got "
                        f"{type(info).__name__}")
    agent_id = get("agent_id")
    if agent_id is None or get("actions") is None or get("log_probs") is None:
        raise ValueError("action_info needs 'agent_id', 'actions' and 'log_probs'")
    agent_id = np.asarray(agent_id)
    if agent_id.ndim != 1 or (agent_id.size and not np.issubdtype(agent_id.dtype, np.integer)):
        raise ValueError(f"action_info['agent_id']: expected a 1-D int array, got "
                         f"{agent_id.dtype} of shape {agent_id.shape}")
    n = len(agent_id)
    c, b = spec.action_spec.continuous_size, spec.action_spec.discrete_size

    def pair(name, value, discrete_dtype):
        if isinstance(value, Mapping):
            value = (value.get("continuous"), value.get("discrete"))
        elif isinstance(value, np.ndarray):
            if value.shape != (n, c + b):
                raise ValueError(f"action_info['{name}']: expected shape {(n, c + b)}, got "
                                 f"{value.shape}")
            value = (value[:, :c], value[:, c:])
        if not isinstance(value, tuple) or len(value) != 2:
            raise ValueError(f"action_info['{name}']: expected a (continuous, discrete) pair, "
                             f"got {type(value).__name__}")
        out = []
        for part, array, size, dtype in (("continuous", value[0], c, np.float32),
                                         ("discrete", value[1], b, discrete_dtype)):
            if array is None and size == 0:
                array = np.zeros((n, 0), dtype)
            array = np.asarray(array)
            if array.shape != (n, size):
                raise ValueError(f"action_info['{name}'].{part}: expected shape {(n, size)}, "
                                 f"got {array.shape}")
            out.append(array.astype(dtype, copy=False))
        return out

    actions = ActionTuple(*pair("actions", get("actions"), np.int32))
    log_probs = LogProbs(*pair("log_probs", get("log_probs"), np.float32))
    values = {}
    for name, v in (get("values") or {}).items():
        v = np.asarray(v, np.float32)
        if v.size != n or v.ndim > 2:
            raise ValueError(f"action_info['values']['{name}']: expected shape ({n},), got "
                             f"{v.shape}")
        values[str(name)] = v.reshape(n)
    memory = get("memory")
    if memory is not None:
        memory = np.asarray(memory, np.float32)
        if memory.ndim == 3 and memory.shape[1] == 1:  # the exported [n, 1, m] layout
            memory = memory[:, 0]
        if memory.ndim != 2 or memory.shape[0] != n:
            raise ValueError(f"action_info['memory']: expected shape ({n}, memory_size), got "
                             f"{memory.shape}")
    return ActionInfo(agent_id, actions, log_probs, values, memory)


# ----------------------------------------------------------------------------- groups


def _teammates(focal_groups: np.ndarray, pool_groups: np.ndarray, focal_ids: np.ndarray,
               pool_ids: np.ndarray) -> np.ndarray:
    """For each focal agent, the pool entries of its group other than itself.

    Args:
        focal_groups, focal_ids: [n] group and agent id of each focal agent.
        pool_groups, pool_ids: [p] of each candidate (group 0: never a teammate).

    Returns:
        [n, k] int64 pool indices, teammates in agent id order (stable slots whatever
        order the env lists agents in), -1 after each agent's last teammate (k = the most
        teammates any focal agent has).
    """
    focal_groups = np.asarray(focal_groups)
    order = np.argsort(pool_ids, kind="stable")
    match = ((pool_groups[order][None, :] == focal_groups[:, None])
             & (focal_groups[:, None] != 0)
             & (np.asarray(pool_ids)[order][None, :] != np.asarray(focal_ids)[:, None]))
    counts = match.sum(axis=1)
    width = int(counts.max()) if len(counts) else 0
    out = np.full((len(focal_groups), width), -1, np.int64)
    j, p = np.nonzero(match)  # row-major: each agent's teammates in id order
    if len(j):
        rank = np.arange(len(j)) - np.repeat(np.cumsum(counts) - counts, counts)
        out[j, rank] = order[p]
    return out


# ----------------------------------------------------------------------------- processor


class AgentProcessor:
    """Assembles one behavior's trajectories from decision and terminal steps.

    Args:
        behavior_spec: the behavior's observation and action specs.
        time_horizon: steps after which a trajectory is emitted even though the episode
            goes on (ML-Agents ``time_horizon``).
        stream_names: reward streams whose values ``action_info`` carries; None to take
            them from the first ``action_info`` (they are then fixed).
        behavior_name: used in messages.
    """

    _INITIAL_STEP_CAPACITY = 32
    _INITIAL_ROW_CAPACITY = 16

    def __init__(self, behavior_spec: BehaviorSpec, time_horizon: int,
                 stream_names: Optional[Sequence[str]] = None, behavior_name: str = ""):
        if int(time_horizon) < 1:
            raise ValueError(f"time_horizon must be >= 1, got {time_horizon}")
        self._spec = behavior_spec
        self._horizon = int(time_horizon)
        self._name = behavior_name
        self._stream_names: Optional[Tuple[str, ...]] = (
            None if stream_names is None else tuple(str(s) for s in stream_names))
        self._memory_size: Optional[int] = None  # unknown until the first action_info

        # id -> row: sorted ids with their rows, for vectorised searchsorted look-ups.
        self._map_ids = np.zeros(0, np.int64)
        self._map_rows = np.zeros(0, np.int64)
        self._generation = 0  # bumped whenever the mapping changes; invalidates the cache
        self._cache: Dict[str, Tuple[int, np.ndarray, np.ndarray]] = {}
        self._free_rows: List[int] = []
        self._rows_used = 0

        rows, steps = self._INITIAL_ROW_CAPACITY, min(self._horizon, self._INITIAL_STEP_CAPACITY)
        # Per row: steps completed, and the state of the step at index length.
        self._length = np.zeros(rows, np.int64)
        self._awaiting = np.zeros(rows, bool)  # obs recorded, waiting for an action
        self._pending = np.zeros(rows, bool)  # acted, waiting for the reward
        self._ep_reward = np.zeros(rows, np.float64)
        self._ep_group_reward = np.zeros(rows, np.float64)
        self._ep_length = np.zeros(rows, np.int64)
        self._row_agent = np.zeros(rows, np.int64)  # agent id of each mapped row

        a = behavior_spec.action_spec
        self._branches = a.discrete_branches
        n_mask = int(sum(a.discrete_branches))
        self._steps: Dict[Key, np.ndarray] = {}
        for i, o in enumerate(behavior_spec.observation_specs):
            self._steps[obs_key(i)] = np.zeros((rows, steps, *o.shape), np.float32)
        for key, width, dtype in (
                (BufferKey.CONTINUOUS_ACTION, a.continuous_size, np.float32),
                (BufferKey.DISCRETE_ACTION, a.discrete_size, np.int32),
                (BufferKey.CONTINUOUS_LOG_PROBS, a.continuous_size, np.float32),
                (BufferKey.DISCRETE_LOG_PROBS, a.discrete_size, np.float32),
                (BufferKey.ACTION_MASK, n_mask, np.float32)):
            self._steps[key] = np.zeros((rows, steps, width), dtype)
        self._steps[BufferKey.ENVIRONMENT_REWARDS] = np.zeros((rows, steps), np.float32)
        self._steps[BufferKey.GROUP_REWARD] = np.zeros((rows, steps), np.float32)
        self._steps[BufferKey.GROUP_ID] = np.zeros((rows, steps), np.int32)
        if self._stream_names is not None:
            for name in self._stream_names:
                self._steps[stream_key(StreamField.VALUES, name)] = np.zeros((rows, steps),
                                                                             np.float32)

        self._team_width = 0  # teammate slots per step; 0 until the first group
        self._team_cache: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None
        self._trajectories: List[Trajectory] = []
        self._queues: List[TrajectoryQueue] = []
        self._episode_stats: List[Tuple[np.ndarray, ...]] = []

    # ------------------------------------------------------------------ public

    @property
    def time_horizon(self) -> int:
        return self._horizon

    def publish_trajectory_queue(self, trajectory_queue: TrajectoryQueue) -> None:
        """Sends every future trajectory to ``trajectory_queue`` (instead of pop_trajectories)."""
        self._queues.append(trajectory_queue)

    def add_experiences(self, decision_steps: DecisionSteps, terminal_steps: TerminalSteps,
                        action_info: Union[ActionInfo, Mapping, None] = None) -> None:
        """Records one env step of the behavior.

        Args:
            decision_steps: agents that need an action now; their observations start
                their next steps.
            terminal_steps: agents whose episode ended since the last call.
            action_info: what the policy produced for the PREVIOUS call's decision steps
                (see :class:`ActionInfo`); None on the first call or if nobody acted.

        Raises:
            ValueError: if ``action_info`` is malformed or names agents that were not
                waiting for an action.
        """
        if action_info is not None:
            info = _coerce_action_info(action_info, self._spec)
            if len(info.agent_id):
                self._record_actions(info)
        if self._team_width:
            self._record_groupmate_rewards(terminal_steps, decision_steps)
        # Terminal first: should an env report an id in both (Unity does, for an agent
        # that ended and restarted), the old episode closes before the new one starts.
        if len(terminal_steps):
            self._process_terminal(terminal_steps, decision_steps)
        if len(decision_steps):
            self._process_decisions(decision_steps, terminal_steps)

    def pop_trajectories(self) -> List[Trajectory]:
        """Trajectories emitted since the last call (when no queue is published to)."""
        out, self._trajectories = self._trajectories, []
        return out

    def pop_episode_stats(self) -> EpisodeStats:
        """Episodes that ended since the last call."""
        if not self._episode_stats:  # most env steps: one shared (read-only) empty answer
            return _NO_EPISODES
        parts, self._episode_stats = self._episode_stats, []
        return EpisodeStats(*(np.concatenate(column) for column in zip(*parts)))

    def end_episodes(self) -> None:
        """Emits every agent's steps so far as interrupted trajectories and forgets them.

        For a forced env reset or the end of training: the steps stay usable (bootstrapped
        from the observation the agent last decided on). No episode stats are recorded,
        and an action still waiting for its reward is dropped.
        """
        rows = self._map_rows[self._length[self._map_rows] > 0]
        if rows.size:
            slot = self._length[rows]
            next_obs = [self._steps[obs_key(i)][rows, slot]
                        for i in range(len(self._spec.observation_specs))]
            flags = np.zeros(rows.size, bool)
            self._emit(rows, next_obs, done=flags, interrupted=~flags, group_done=flags,
                       next_team=None)
        self._reset_rows(self._map_rows)

    # ------------------------------------------------------------------ rows

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        """Rows of ``ids``; -1 for ids without a row. [n] int64."""
        ids = ids.astype(np.int64, copy=False)
        if not len(self._map_ids):
            return np.full(len(ids), -1, np.int64)
        pos_clipped = np.minimum(np.searchsorted(self._map_ids, ids), len(self._map_ids) - 1)
        found = self._map_ids[pos_clipped] == ids
        return np.where(found, self._map_rows[pos_clipped], -1)

    def _rows(self, ids: np.ndarray, slot: str, create: bool) -> np.ndarray:
        """Rows of ``ids``, cached per ``slot`` while ``ids`` and the mapping are unchanged."""
        cached = self._cache.get(slot)
        if (cached is not None and cached[0] == self._generation
                and cached[1].shape == ids.shape and np.array_equal(cached[1], ids)):
            return cached[2]
        rows = self._lookup(ids)
        if create:
            new = rows < 0
            if new.any():
                rows[new] = self._allocate(ids[new].astype(np.int64), keep=rows[~new])
        self._cache[slot] = (self._generation, ids.copy(), rows)
        return rows

    def _allocate(self, new_ids: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """Gives each new id a row: a free one, else the next unused, growing if needed.

        ``keep``: rows of the same request, not to be reclaimed even if idle (an agent
        coming back for a new episode has an idle row until it is recorded).
        """
        k = len(new_ids)
        if len(self._free_rows) < k and self._rows_used + k - len(self._free_rows) > len(
                self._length):
            self._reclaim_idle_rows(keep)
        take = min(k, len(self._free_rows))
        rows = np.empty(k, np.int64)
        if take:
            rows[:take] = self._free_rows[-take:]
            del self._free_rows[-take:]
        fresh = k - take
        if fresh:
            needed = self._rows_used + fresh
            if needed > len(self._length):
                self._grow_rows(max(needed, 2 * len(self._length)))
            rows[take:] = np.arange(self._rows_used, needed)
            self._rows_used = needed
        ids = np.concatenate([self._map_ids, new_ids])
        all_rows = np.concatenate([self._map_rows, rows])
        order = np.argsort(ids, kind="stable")
        self._map_ids, self._map_rows = ids[order], all_rows[order]
        self._generation += 1
        self._row_agent[rows] = new_ids
        self._reset_rows(rows)
        return rows

    def _reclaim_idle_rows(self, keep: np.ndarray) -> None:
        """Frees the rows of agents whose episode ended and who have not come back.

        Rows stay mapped after an episode end because the id normally returns next step;
        envs that retire ids (Unity agents destroyed and respawned) would otherwise grow
        the arrays forever.
        """
        mapped = self._map_rows
        idle = ~self._awaiting[mapped] & ~self._pending[mapped] & (self._length[mapped] == 0)
        idle &= ~np.isin(mapped, keep)
        if idle.any():
            self._free_rows.extend(mapped[idle].tolist())
            self._map_ids, self._map_rows = self._map_ids[~idle], mapped[~idle]
            self._generation += 1

    def _grow_rows(self, capacity: int) -> None:
        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity, *a.shape[1:]), a.dtype)
            out[:len(a)] = a
            return out

        for name in ("_length", "_awaiting", "_pending", "_ep_reward", "_ep_group_reward",
                     "_ep_length", "_row_agent"):
            setattr(self, name, grow(getattr(self, name)))
        for key in self._steps:
            self._steps[key] = grow(self._steps[key])

    def _ensure_step_capacity(self, max_slot: int) -> None:
        capacity = next(iter(self._steps.values())).shape[1]
        if max_slot < capacity:
            return
        # Grow by doubling up to time_horizon: a long horizon with visual observations
        # should not reserve its full size for every agent up front.
        capacity = min(self._horizon, max(max_slot + 1, 2 * capacity))
        for key, a in self._steps.items():
            out = np.zeros((a.shape[0], capacity, *a.shape[2:]), a.dtype)
            out[:, :a.shape[1]] = a
            self._steps[key] = out

    def _reset_rows(self, rows: np.ndarray) -> None:
        self._length[rows] = 0
        self._awaiting[rows] = False
        self._pending[rows] = False
        self._ep_reward[rows] = 0.0
        self._ep_group_reward[rows] = 0.0
        self._ep_length[rows] = 0

    # ------------------------------------------------------------------ steps

    def _step_shape(self) -> Tuple[int, int]:
        return next(iter(self._steps.values())).shape[:2]

    def _record_actions(self, info: ActionInfo) -> None:
        rows = self._rows(info.agent_id, "actions", create=False)
        bad = rows < 0
        bad[~bad] = ~self._awaiting[rows[~bad]]
        if bad.any():
            raise ValueError(
                f"AgentProcessor({self._name!r}): action_info has agent ids "
                f"{info.agent_id[bad][:10].tolist()} that were not in the previous decision "
                f"steps (or already acted); action_info must be for exactly the agents of "
                f"the previous call's decision_steps")
        self._check_streams(info)
        slot = self._length[rows]
        s = self._steps
        s[BufferKey.CONTINUOUS_ACTION][rows, slot] = info.actions.continuous
        s[BufferKey.DISCRETE_ACTION][rows, slot] = info.actions.discrete
        s[BufferKey.CONTINUOUS_LOG_PROBS][rows, slot] = info.log_probs.continuous
        s[BufferKey.DISCRETE_LOG_PROBS][rows, slot] = info.log_probs.discrete
        for name, v in info.values.items():
            s[stream_key(StreamField.VALUES, name)][rows, slot] = v
        if info.memory is not None:
            s[BufferKey.MEMORY][rows, slot] = info.memory
        self._awaiting[rows] = False
        self._pending[rows] = True
        if self._team_width or (s[BufferKey.GROUP_ID][rows, slot] != 0).any():
            self._record_team(rows, slot)

    def _check_streams(self, info: ActionInfo) -> None:
        """Fixes value streams and memory size on first use; later calls must match."""
        names = tuple(info.values)
        if self._stream_names is None:
            self._stream_names = names
            rows, steps = self._step_shape()
            for name in names:
                self._steps[stream_key(StreamField.VALUES, name)] = np.zeros((rows, steps),
                                                                             np.float32)
        elif set(names) != set(self._stream_names):
            raise ValueError(f"AgentProcessor({self._name!r}): action_info['values'] has "
                             f"streams {sorted(names)}, expected {sorted(self._stream_names)}")
        size = 0 if info.memory is None else info.memory.shape[1]
        if self._memory_size is None:
            self._memory_size = size
            if size:
                rows, steps = self._step_shape()
                self._steps[BufferKey.MEMORY] = np.zeros((rows, steps, size), np.float32)
        elif size != self._memory_size:
            raise ValueError(f"AgentProcessor({self._name!r}): action_info['memory'] has "
                             f"size {size}, earlier calls had {self._memory_size}")

    # ------------------------------------------------------------------ groups

    def _ensure_team_width(self, width: int) -> None:
        """Makes room for ``width`` teammate slots per step (allocated on the first group)."""
        if width <= self._team_width:
            return
        rows, steps = self._step_shape()
        a = self._spec.action_spec
        fields = {team_obs_key(i): (o.shape, np.float32)
                  for i, o in enumerate(self._spec.observation_specs)}
        fields.update({BufferKey.TEAM_CONTINUOUS_ACTION: ((a.continuous_size,), np.float32),
                       BufferKey.TEAM_DISCRETE_ACTION: ((a.discrete_size,), np.int32),
                       BufferKey.TEAM_MASK: ((), np.float32), _TEAM_ROWS: ((), np.int64)})
        for key, (shape, dtype) in fields.items():
            out = np.zeros((rows, steps, width, *shape), dtype)
            if self._team_width:
                out[:, :, :self._team_width] = self._steps[key]
            self._steps[key] = out
        if not self._team_width:
            self._steps[BufferKey.GROUPMATE_REWARDS] = np.zeros((rows, steps), np.float32)
        self._team_width = width

    def _record_team(self, rows: np.ndarray, slot: np.ndarray) -> None:
        """Copies, into step ``slot`` of each of ``rows`` (agents that just acted), the
        observations and actions of the teammates that acted in the same call."""
        group = self._steps[BufferKey.GROUP_ID][rows, slot]
        cached = self._team_cache
        # The same agents in the same groups, step after step (the common case): reuse.
        if (cached is not None and cached[0].shape == rows.shape
                and np.array_equal(cached[0], rows) and np.array_equal(cached[1], group)):
            mates = cached[2]
        else:
            ids = self._row_agent[rows]
            mates = _teammates(group, group, ids, ids)
            self._team_cache = (rows.copy(), group.copy(), mates)
        self._ensure_team_width(max(mates.shape[1], 1))
        s, width = self._steps, self._team_width
        present = mates >= 0
        mate_rows = rows[np.maximum(mates, 0)]  # [n, k]
        mate_slots = self._length[mate_rows]
        k = mates.shape[1]
        for i in range(len(self._spec.observation_specs)):
            s[team_obs_key(i)][rows, slot, :k] = s[obs_key(i)][mate_rows, mate_slots]
        for team, own in ((BufferKey.TEAM_CONTINUOUS_ACTION, BufferKey.CONTINUOUS_ACTION),
                          (BufferKey.TEAM_DISCRETE_ACTION, BufferKey.DISCRETE_ACTION)):
            s[team][rows, slot, :k] = s[own][mate_rows, mate_slots]
        mask = np.zeros((len(rows), width), np.float32)
        mask[:, :k] = present
        s[BufferKey.TEAM_MASK][rows, slot] = mask
        team_rows = np.zeros((len(rows), width), np.int64)
        team_rows[:, :k] = np.where(present, mate_rows + 1, 0)
        s[_TEAM_ROWS][rows, slot] = team_rows

    def _record_groupmate_rewards(self, ts: TerminalSteps, ds: DecisionSteps) -> None:
        """Each pending step's sum of its teammates' rewards (for the same step)."""
        ids = np.concatenate([np.asarray(ts.agent_id), np.asarray(ds.agent_id)])
        rewards = np.concatenate([np.asarray(ts.reward), np.asarray(ds.reward)])
        rows = self._lookup(ids)
        # An id in both closes its old episode with the terminal reward (listed first).
        rows, first = np.unique(rows, return_index=True)
        rewards = rewards[first]
        keep = (rows >= 0)
        keep[keep] = self._pending[rows[keep]]
        rows, rewards = rows[keep], rewards[keep]
        if not len(rows):
            return
        got = np.zeros(len(self._length) + 1, np.float32)  # index 0: an empty slot
        got[rows + 1] = rewards
        slot = self._length[rows]
        team_rows = self._steps[_TEAM_ROWS][rows, slot]
        self._steps[BufferKey.GROUPMATE_REWARDS][rows, slot] = got[team_rows].sum(axis=1)

    def _next_teams(self, focal_ids: np.ndarray, focal_groups: np.ndarray, ts: TerminalSteps,
                    ds: DecisionSteps) -> Tuple[List[np.ndarray], np.ndarray, np.ndarray]:
        """The teammates present after the last step of the trajectories being emitted.

        A group goes on if a member whose episode is under way (it has acted in it) and
        does not end now decides in this call: its next teammates are those members.
        Otherwise its episode ended now, and its next teammates are the members ending
        with it (their terminal observations). A decision that starts an episode never
        keeps a group going: envs that report steps as Unity does list an agent that
        ended and restarted in this call in both steps, and members that left early come
        back in the call their group ends, with their old ids.

        Returns:
            per observation spec [n, width, *shape], mask [n, width], group_done [n].
        """
        ds_ids, ts_ids = np.asarray(ds.agent_id), np.asarray(ts.agent_id)
        ds_groups, ts_groups = np.asarray(ds.group_id), np.asarray(ts.group_id)
        continuing = self._under_way(ds_ids)
        if len(ts_ids):
            continuing &= ~np.isin(ds_ids, ts_ids)
        live_groups = ds_groups[continuing]
        group_done = ~np.isin(focal_groups, live_groups[live_groups != 0])
        pool_groups = np.concatenate([ds_groups[continuing], ts_groups])
        pool_ids = np.concatenate([ds_ids[continuing], ts_ids])
        # Ending members count only for groups that ended; continuing ones only otherwise.
        pool_use = np.concatenate([np.ones(int(continuing.sum()), bool),
                                   ~np.isin(ts_groups, live_groups)])
        pool_groups = np.where(pool_use, pool_groups, 0)
        mates = _teammates(focal_groups, pool_groups, focal_ids, pool_ids)
        self._ensure_team_width(max(mates.shape[1], 1))
        width, present = self._team_width, mates >= 0
        pick = np.maximum(mates, 0)
        obs = []
        for i in range(len(self._spec.observation_specs)):
            pool = np.concatenate([np.asarray(ds.obs[i])[continuing], np.asarray(ts.obs[i])])
            out = np.zeros((len(focal_ids), width, *pool.shape[1:]), np.float32)
            if len(pool):
                out[:, :mates.shape[1]] = np.where(
                    present.reshape(*present.shape, *[1] * (pool.ndim - 1)), pool[pick], 0.0)
            obs.append(out)
        mask = np.zeros((len(focal_ids), width), np.float32)
        mask[:, :mates.shape[1]] = present
        return obs, mask, group_done

    def _under_way(self, ids: np.ndarray) -> np.ndarray:
        """[n] bool: the agent has acted in its current episode (it is not new, and has
        not ended since). Rows are reset when an episode ends, so a member that left early
        and is back for its group's next episode reads False."""
        rows = self._lookup(ids)
        known = rows >= 0
        r = rows[known]
        out = np.zeros(len(ids), bool)
        out[known] = self._pending[r] | (self._ep_length[r] > 0)
        return out

    def _complete_steps(self, rows: np.ndarray, reward: np.ndarray,
                        group_reward: np.ndarray) -> None:
        """Gives the agents that acted the reward their action earned."""
        pending = self._pending[rows]
        if not pending.any():
            return
        rows, reward, group_reward = rows[pending], reward[pending], group_reward[pending]
        slot = self._length[rows]
        self._steps[BufferKey.ENVIRONMENT_REWARDS][rows, slot] = reward
        self._steps[BufferKey.GROUP_REWARD][rows, slot] = group_reward
        self._length[rows] += 1
        self._pending[rows] = False
        self._ep_reward[rows] += reward
        self._ep_group_reward[rows] += group_reward
        self._ep_length[rows] += 1

    def _process_terminal(self, ts: TerminalSteps, ds: DecisionSteps) -> None:
        rows = self._lookup(np.asarray(ts.agent_id))
        index = np.flatnonzero(rows >= 0)  # an agent never seen has no steps to close
        rows = rows[index]
        interrupted = np.asarray(ts.interrupted, bool)[index]
        self._complete_steps(rows, np.asarray(ts.reward)[index],
                             np.asarray(ts.group_reward)[index])
        groups = np.asarray(ts.group_id)[index]
        next_team = None
        if self._team_width or (groups != 0).any():
            next_team = self._next_teams(np.asarray(ts.agent_id)[index], groups, ts, ds)
            group_done = next_team[2]
        else:
            group_done = np.ones(len(rows), bool)
        ended = self._ep_length[rows] > 0
        if ended.any():
            r = rows[ended]
            self._episode_stats.append((
                np.asarray(ts.agent_id)[index][ended].astype(np.int64),
                self._ep_reward[r].astype(np.float32),
                self._ep_group_reward[r].astype(np.float32),
                self._ep_length[r].copy(),
                interrupted[ended].copy(),
                group_done[ended].copy()))
        has_steps = self._length[rows] > 0
        if has_steps.any():
            pick = index[has_steps]
            self._emit(rows[has_steps], [np.asarray(o)[pick] for o in ts.obs],
                       done=~interrupted[has_steps], interrupted=interrupted[has_steps],
                       group_done=group_done[has_steps],
                       next_team=None if next_team is None else (
                           [o[has_steps] for o in next_team[0]], next_team[1][has_steps]))
        # The row stays mapped: the id normally comes back next step for a new episode.
        self._reset_rows(rows)

    def _process_decisions(self, ds: DecisionSteps, ts: TerminalSteps) -> None:
        ids = np.asarray(ds.agent_id)
        rows = self._rows(ids, "decisions", create=True)
        self._complete_steps(rows, np.asarray(ds.reward), np.asarray(ds.group_reward))
        full = np.flatnonzero(self._length[rows] >= self._horizon)
        if full.size:
            flags = np.zeros(full.size, bool)
            next_team = None
            if self._team_width:
                obs, mask, _ = self._next_teams(ids[full], np.asarray(ds.group_id)[full], ts, ds)
                next_team = (obs, mask)
            self._emit(rows[full], [np.asarray(o)[full] for o in ds.obs], done=flags,
                       interrupted=flags, group_done=flags, next_team=next_team)
            self._length[rows[full]] = 0
        slot = self._length[rows]
        self._ensure_step_capacity(int(slot.max()))
        s = self._steps
        for i, o in enumerate(ds.obs):
            s[obs_key(i)][rows, slot] = o
        s[BufferKey.ACTION_MASK][rows, slot] = ds.allowed_mask(self._branches)
        s[BufferKey.GROUP_ID][rows, slot] = ds.group_id
        self._awaiting[rows] = True

    def _emit(self, rows: np.ndarray, next_obs: List[np.ndarray], done: np.ndarray,
              interrupted: np.ndarray, group_done: np.ndarray,
              next_team: Optional[Tuple[List[np.ndarray], np.ndarray]]) -> None:
        """Builds the trajectories of ``rows`` (steps 0..length-1) and hands them out.

        One gather per field for all rows, then per-trajectory views into it: copies of
        the processor's storage, so the rows can be reused at once.
        """
        lengths = self._length[rows]
        longest = int(lengths.max())
        block = {key: a[rows, :longest] for key, a in self._steps.items()}
        # Bound once: the loop below runs per trajectory.
        obs = [block[obs_key(i)] for i in range(len(self._spec.observation_specs))]
        values = [(name, block[stream_key(StreamField.VALUES, name)])
                  for name in self._stream_names or ()]
        memory = block.get(BufferKey.MEMORY)
        c_act, d_act = block[BufferKey.CONTINUOUS_ACTION], block[BufferKey.DISCRETE_ACTION]
        c_logp = block[BufferKey.CONTINUOUS_LOG_PROBS]
        d_logp = block[BufferKey.DISCRETE_LOG_PROBS]
        mask, reward = block[BufferKey.ACTION_MASK], block[BufferKey.ENVIRONMENT_REWARDS]
        group_id, group_reward = block[BufferKey.GROUP_ID], block[BufferKey.GROUP_REWARD]
        agent_ids = self._row_agent[rows].tolist()
        done, interrupted = np.asarray(done).tolist(), np.asarray(interrupted).tolist()
        group_done = np.asarray(group_done).tolist()
        width = self._team_width
        if width:
            team_obs = [block[team_obs_key(i)] for i in range(len(obs))]
            team_c = block[BufferKey.TEAM_CONTINUOUS_ACTION]
            team_d = block[BufferKey.TEAM_DISCRETE_ACTION]
            team_mask, mate_rewards = block[BufferKey.TEAM_MASK], block[BufferKey.GROUPMATE_REWARDS]
            if next_team is None:  # no teammates known after the last step (end_episodes)
                next_team = ([np.zeros((len(rows), width, *o.shape[3:]), np.float32)
                              for o in team_obs], np.zeros((len(rows), width), np.float32))
        for j, n in enumerate(lengths.tolist()):
            group = {}
            if width:
                group = dict(
                    teammate_obs=[o[j, :n] for o in team_obs],
                    teammate_actions=ActionTuple(team_c[j, :n], team_d[j, :n]),
                    teammate_mask=team_mask[j, :n], groupmate_rewards=mate_rewards[j, :n],
                    next_teammate_obs=[o[j] for o in next_team[0]],
                    next_teammate_mask=next_team[1][j])
            trajectory = Trajectory(
                obs=[o[j, :n] for o in obs],
                next_obs=[o[j] for o in next_obs],
                actions=ActionTuple(c_act[j, :n], d_act[j, :n]),
                log_probs=LogProbs(c_logp[j, :n], d_logp[j, :n]),
                action_mask=mask[j, :n],
                rewards=reward[j, :n],
                values={name: v[j, :n] for name, v in values},
                memory=None if memory is None else memory[j, :n],
                group_id=group_id[j, :n],
                group_reward=group_reward[j, :n],
                done=bool(done[j]),
                interrupted=bool(interrupted[j]),
                agent_id=agent_ids[j],
                group_done=bool(group_done[j]),
                **group,
            )
            if self._queues:
                for q in self._queues:
                    q.put(trajectory)
            else:
                self._trajectories.append(trajectory)
