"""Dense row numbers for agent ids, so per-agent state lives in arrays, not dicts."""
from __future__ import annotations

import numpy as np


class AgentRows:
    """Maps agent ids (any ints) to rows 0, 1, 2, ... in order of first appearance.

    ``rows(agent_id)`` is vectorised: one ``searchsorted`` per call, whatever the number of
    agents; new ids get the next free rows.
    """

    def __init__(self):
        self._sorted_ids = np.empty(0, np.int64)
        self._sorted_rows = np.empty(0, np.int64)
        self._last = (None, None)  # the same agents step after step: reuse the answer

    def __len__(self) -> int:
        return len(self._sorted_ids)

    def rows(self, agent_id: np.ndarray) -> np.ndarray:
        """Rows of ``agent_id`` [n] (assigning rows to ids not seen before)."""
        last_ids, last_rows = self._last
        if last_ids is not None and len(last_ids) == len(agent_id) and \
                np.array_equal(last_ids, agent_id):
            return last_rows
        rows = self._lookup(np.asarray(agent_id, np.int64))
        self._last = (np.array(agent_id, copy=True), rows)
        return rows

    def _lookup(self, agent_id: np.ndarray) -> np.ndarray:
        n_known = len(self._sorted_ids)
        pos = np.searchsorted(self._sorted_ids, agent_id)
        known = pos < n_known
        known[known] = self._sorted_ids[pos[known]] == agent_id[known]
        if known.all():
            return self._sorted_rows[pos]
        unknown = agent_id[~known]
        _, first = np.unique(unknown, return_index=True)
        new_ids = unknown[np.sort(first)]  # in order of first appearance
        ids = np.concatenate([self._sorted_ids, new_ids])
        rows = np.concatenate([self._sorted_rows, n_known + np.arange(len(new_ids))])
        order = np.argsort(ids, kind="stable")
        self._sorted_ids, self._sorted_rows = ids[order], rows[order]
        return self._sorted_rows[np.searchsorted(self._sorted_ids, agent_id)]


class AgentMemories:
    """Recurrent memory per agent id, in one array (a row per agent ever seen).

    ``read(agent_id)`` gives the memories [n, memory_size] (zeros for a new agent) with
    their rows; ``write(rows, memory)`` stores the memories after a step; ``forget(ids)``
    zeroes the agents whose episode ended.
    """

    def __init__(self, memory_size: int):
        self.memory_size = memory_size
        self._rows = AgentRows()
        self._memories = np.zeros((0, memory_size), np.float32)

    def _grow(self) -> None:
        if len(self._rows) > len(self._memories):
            extra = np.zeros((2 * len(self._rows) - len(self._memories), self.memory_size),
                             np.float32)
            self._memories = np.concatenate([self._memories, extra])

    def read(self, agent_id: np.ndarray):
        """(rows [n], memories [n, memory_size])."""
        rows = self._rows.rows(agent_id)
        self._grow()
        return rows, self._memories[rows]

    def write(self, rows: np.ndarray, memory: np.ndarray) -> None:
        self._memories[rows] = memory

    def forget(self, agent_id: np.ndarray) -> None:
        if len(agent_id):
            rows, _ = self.read(agent_id)
            self._memories[rows] = 0.0


class EpisodesUnderWay:
    """Which agents of a decision step go on with an episode under way, step after step.

    The env API accepts two step conventions (docs/dev/architecture.md#env-api): an agent that
    ended may sit out
    a step before its next episode, or (as Unity reports it) be in the terminal AND
    decision steps of the same step, and group members that left early come back in the
    step their group ends. Either way, a decision continues an episode only if the agent
    decided before, has not ended since, and does not end in this step; any other
    decision starts an episode. Consumers that ask "does this group go on?" must count
    only continuing members, or a returning member keeps an ended group alive.
    """

    def __init__(self):
        self._rows = AgentRows()
        self._open = np.zeros(0, bool)

    def continuing(self, decision_ids: np.ndarray, terminal_ids: np.ndarray) -> np.ndarray:
        """[len(decision_ids)] bool, and records the step (terminal ids end their episode,
        decision ids have one under way after it)."""
        d_rows = self._rows.rows(np.asarray(decision_ids))
        t_rows = self._rows.rows(np.asarray(terminal_ids)) if len(terminal_ids) else d_rows[:0]
        if len(self._rows) > len(self._open):
            self._open = np.concatenate([self._open,
                                         np.zeros(len(self._rows) - len(self._open), bool)])
        out = self._open[d_rows]  # fancy indexing: a copy
        if len(t_rows):
            out &= ~np.isin(d_rows, t_rows)
            self._open[t_rows] = False
        self._open[d_rows] = True
        return out
