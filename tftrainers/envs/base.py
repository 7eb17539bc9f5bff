"""The environment API, shaped like ``mlagents_envs.base_env``.

An environment holds one or more *behaviors*; each behavior has many agents that
ask for decisions together. The loop that drives any environment::

    env = tftrainers.envs.make("builtin:Ball3D", seed=0)
    env.reset()
    while training:
        for name, spec in env.behavior_specs.items():
            decision_steps, terminal_steps = env.get_steps(name)
            # terminal_steps: agents whose episode ended in the last step (last obs, reward)
            # decision_steps: agents that need an action now
            env.set_actions(name, policy(decision_steps))   # ActionTuple, one row per agent
        env.step()
    env.close()

Conventions (the same as ML-Agents):
- observations are float32 arrays ``[n_agents, *shape]``, one per ObservationSpec;
  visual observations are HWC floats in [0, 1];
- ``action_mask`` holds one bool array ``[n_agents, branch_size]`` per discrete branch,
  ``True`` meaning the action is *masked* (forbidden);
- ``TerminalSteps.interrupted`` is True when the episode was cut by a step limit and
  did not really end (the value after it should still be bootstrapped);
- ``group_id`` 0 means the agent is in no group; ``group_reward`` is the reward the
  whole group received, reported for every member.

Unlike Unity, an agent id is never in decision and terminal steps of the same step:
an agent whose episode ended shows up in the next step's decision steps with the first
observation of its new episode (gymnasium's next-step autoreset). The env checker
(``check_env``) holds every implementation to these rules.
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np


class ObservationKind(enum.Enum):
    VECTOR = "vector"  # [size]
    VISUAL = "visual"  # [height, width, channels], floats in [0, 1]
    VARIABLE_LENGTH = "variable_length"  # [max_entities, entity_size], zero rows absent


class ObservationType(enum.Enum):
    DEFAULT = "default"
    GOAL_SIGNAL = "goal_signal"


@dataclass(frozen=True)
class ObservationSpec:
    """Shape, name and kind of one observation (without the agent dimension)."""

    shape: Tuple[int, ...]
    name: str
    kind: ObservationKind = ObservationKind.VECTOR
    observation_type: ObservationType = ObservationType.DEFAULT

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        expected_rank = {ObservationKind.VECTOR: 1, ObservationKind.VISUAL: 3,
                         ObservationKind.VARIABLE_LENGTH: 2}[self.kind]
        if len(self.shape) != expected_rank or min(self.shape) <= 0:
            raise ValueError(
                f"observation '{self.name}': a {self.kind.value} observation needs a shape of "
                f"{expected_rank} positive dimensions, got {self.shape}")


@dataclass(frozen=True)
class ActionSpec:
    """Continuous and discrete parts of a behavior's action (hybrid allowed).

    continuous_size: number of continuous actions, each in [-1, 1].
    discrete_branches: size of each discrete branch; an action picks one index per branch.
    """

    continuous_size: int = 0
    discrete_branches: Tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "discrete_branches", tuple(int(b) for b in self.discrete_branches))
        if self.continuous_size < 0 or any(b < 1 for b in self.discrete_branches):
            raise ValueError(f"invalid action spec: continuous_size={self.continuous_size}, "
                             f"discrete_branches={self.discrete_branches}")
        if self.continuous_size == 0 and not self.discrete_branches:
            raise ValueError("an action spec needs continuous actions or discrete branches")

    @classmethod
    def create_continuous(cls, size: int) -> "ActionSpec":
        return cls(size, ())

    @classmethod
    def create_discrete(cls, branches: Sequence[int]) -> "ActionSpec":
        return cls(0, tuple(branches))

    @property
    def discrete_size(self) -> int:
        return len(self.discrete_branches)

    def is_continuous(self) -> bool:
        return self.continuous_size > 0

    def is_discrete(self) -> bool:
        return self.discrete_size > 0

    def empty_action(self, n_agents: int) -> "ActionTuple":
        return ActionTuple(np.zeros((n_agents, self.continuous_size), np.float32),
                           np.zeros((n_agents, self.discrete_size), np.int32))

    def random_action(self, n_agents: int, rng: np.random.Generator,
                      action_mask: Optional[Sequence[np.ndarray]] = None) -> "ActionTuple":
        """Uniform random actions; masked discrete actions are never drawn."""
        continuous = rng.uniform(-1.0, 1.0, (n_agents, self.continuous_size)).astype(np.float32)
        discrete = np.zeros((n_agents, self.discrete_size), np.int32)
        for b, size in enumerate(self.discrete_branches):
            if action_mask:
                allowed = ~action_mask[b]
                # Pick the k-th allowed action with k uniform over the allowed count.
                counts = allowed.sum(axis=1)
                k = np.floor(rng.random(n_agents) * np.maximum(counts, 1)).astype(np.int64)
                rank = np.cumsum(allowed, axis=1) - 1
                pick = np.argmax((rank == k[:, None]) & allowed, axis=1)
                discrete[:, b] = pick
            else:
                discrete[:, b] = rng.integers(0, size, n_agents)
        return ActionTuple(continuous, discrete)


@dataclass(frozen=True)
class BehaviorSpec:
    observation_specs: Tuple[ObservationSpec, ...]
    action_spec: ActionSpec

    def __post_init__(self):
        object.__setattr__(self, "observation_specs", tuple(self.observation_specs))

    def to_dict(self) -> dict:
        """Plain data (JSON-ready), so a trained policy can be rebuilt without its env."""
        return {"observations": [{"name": o.name, "shape": list(o.shape), "kind": o.kind.value}
                                 for o in self.observation_specs],
                "continuous_size": self.action_spec.continuous_size,
                "discrete_branches": list(self.action_spec.discrete_branches)}

    @classmethod
    def from_dict(cls, data: dict) -> "BehaviorSpec":
        try:
            observations = tuple(ObservationSpec(tuple(o["shape"]), o["name"],
                                                 ObservationKind(o["kind"]))
                                 for o in data["observations"])
            return cls(observations, ActionSpec(int(data["continuous_size"]),
                                                tuple(data["discrete_branches"])))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a behavior spec: {error}") from error


class ActionTuple(NamedTuple):
    """Actions for ``n`` agents: continuous ``[n, c]`` float32, discrete ``[n, branches]`` int32."""

    continuous: np.ndarray
    discrete: np.ndarray


def _empty_group_fields(n: int) -> Tuple[np.ndarray, np.ndarray]:
    return np.zeros(n, np.int32), np.zeros(n, np.float32)


class _AgentSteps:
    """What decision and terminal steps share: agents on axis 0, lookup by agent id."""

    def __post_init__(self):
        if self.group_id is None or self.group_reward is None:
            self.group_id, self.group_reward = _empty_group_fields(len(self.agent_id))

    def __len__(self) -> int:
        return len(self.agent_id)

    @property
    def agent_id_to_index(self) -> Dict[int, int]:
        if self._index is None:
            self._index = {int(a): i for i, a in enumerate(self.agent_id)}
        return self._index


@dataclass
class DecisionSteps(_AgentSteps):
    """Agents that need an action. Every array has the agents on axis 0."""

    obs: List[np.ndarray]
    reward: np.ndarray  # [n] float32, reward since the agent's last decision
    agent_id: np.ndarray  # [n] int32
    action_mask: List[np.ndarray]  # per discrete branch: [n, branch] bool, True = masked
    group_id: np.ndarray = None  # [n] int32, 0 = no group
    group_reward: np.ndarray = None  # [n] float32
    _index: Optional[Dict[int, int]] = field(default=None, repr=False, compare=False)
    _allowed: Optional[np.ndarray] = field(default=None, repr=False, compare=False)

    def allowed_mask(self, discrete_branches: Sequence[int]) -> np.ndarray:
        """``allowed_action_mask`` of these steps, computed once for every reader (the
        AgentProcessor and the policy): [n, sum(branches)] float32, 1 = allowed. Read-only."""
        if self._allowed is None:
            self._allowed = allowed_action_mask(self.action_mask, discrete_branches, len(self))
        return self._allowed

    @classmethod
    def empty(cls, spec: BehaviorSpec) -> "DecisionSteps":
        return cls([np.zeros((0, *o.shape), np.float32) for o in spec.observation_specs],
                   np.zeros(0, np.float32), np.zeros(0, np.int32),
                   [np.zeros((0, b), bool) for b in spec.action_spec.discrete_branches])


@dataclass
class TerminalSteps(_AgentSteps):
    """Agents whose episode ended in the last step, with their final observation."""

    obs: List[np.ndarray]
    reward: np.ndarray  # [n] float32
    interrupted: np.ndarray  # [n] bool: cut by a step limit, not a real end
    agent_id: np.ndarray  # [n] int32
    group_id: np.ndarray = None
    group_reward: np.ndarray = None
    _index: Optional[Dict[int, int]] = field(default=None, repr=False, compare=False)

    @classmethod
    def empty(cls, spec: BehaviorSpec) -> "TerminalSteps":
        return cls([np.zeros((0, *o.shape), np.float32) for o in spec.observation_specs],
                   np.zeros(0, np.float32), np.zeros(0, bool), np.zeros(0, np.int32))


class BaseEnv(abc.ABC):
    """An environment with one or more behaviors (see the module docstring for the loop)."""

    @property
    @abc.abstractmethod
    def behavior_specs(self) -> Mapping[str, BehaviorSpec]:
        """Behavior name -> BehaviorSpec."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Start new episodes for every agent."""

    @abc.abstractmethod
    def step(self) -> None:
        """Advance the simulation with the actions set since the last step."""

    @abc.abstractmethod
    def get_steps(self, behavior_name: str) -> Tuple[DecisionSteps, TerminalSteps]:
        """The agents of a behavior that need a decision, and those whose episode ended."""

    @abc.abstractmethod
    def set_actions(self, behavior_name: str, actions: ActionTuple) -> None:
        """Actions for every agent in the current decision steps, in their order."""

    def heuristic(self, behavior_name: str, decision_steps: DecisionSteps) -> ActionTuple:
        """The teacher policy (Unity's ``Heuristic()``); it may read the env's hidden state."""
        raise ValueError(f"{type(self).__name__} has no heuristic policy for behavior "
                         f"'{behavior_name}'")

    def close(self) -> None:
        """Release the environment's resources."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def allowed_action_mask(action_mask: Optional[Sequence[np.ndarray]],
                        discrete_branches: Sequence[int], n_agents: int) -> np.ndarray:
    """Env masks -> the network's and ONNX's mask: ``[n, sum(branches)]`` float32, 1 = allowed.

    Args:
        action_mask: one bool ``[n, branch]`` array per branch, True = masked (as in
            ``DecisionSteps.action_mask``); None or an empty list allows every action.
        discrete_branches: the branch sizes.
        n_agents: n.
    """
    total = int(sum(discrete_branches))
    if action_mask is None or not len(action_mask):
        return np.ones((n_agents, total), np.float32)
    if len(action_mask) != len(discrete_branches):
        raise ValueError(f"expected an action mask per discrete branch "
                         f"({len(discrete_branches)}), got {len(action_mask)}")
    return np.concatenate([~np.asarray(m, bool).reshape(n_agents, b)
                           for m, b in zip(action_mask, discrete_branches)],
                          axis=1).astype(np.float32)


def validate_actions(behavior_name: str, spec: ActionSpec, actions: ActionTuple,
                     n_agents: int) -> ActionTuple:
    """Checks actions at the env boundary; returns them as float32 / int32 arrays.

    Raises:
        ValueError: naming the behavior, what was expected and what was given.
    """
    if not isinstance(actions, ActionTuple):
        raise ValueError(f"set_actions('{behavior_name}'): expected an ActionTuple, "
                         f"got {type(actions).__name__}")
    continuous, discrete = actions.continuous, actions.discrete
    expected = {"continuous": (n_agents, spec.continuous_size),
                "discrete": (n_agents, spec.discrete_size)}
    out = []
    for part, array, kind in (("continuous", continuous, np.floating),
                              ("discrete", discrete, np.integer)):
        shape = expected[part]
        if array is None:
            if shape[1] == 0:
                out.append(np.zeros(shape, np.float32 if part == "continuous" else np.int32))
                continue
            raise ValueError(f"set_actions('{behavior_name}'): expected {part} actions of shape "
                             f"{shape}, got None")
        array = np.asarray(array)
        if array.shape != shape:
            raise ValueError(f"set_actions('{behavior_name}'): expected {part} actions of shape "
                             f"{shape}, got {array.shape}")
        if array.size and not np.issubdtype(array.dtype, kind):
            want = "float" if part == "continuous" else "int"
            raise ValueError(f"set_actions('{behavior_name}'): expected {part} actions of an "
                             f"{want} dtype, got {array.dtype}")
        out.append(array.astype(np.float32 if part == "continuous" else np.int32, copy=False))
    continuous, discrete = out
    if continuous.size and not np.all(np.isfinite(continuous)):
        raise ValueError(f"set_actions('{behavior_name}'): continuous actions must be finite, "
                         f"got NaN or inf")
    for b, size in enumerate(spec.discrete_branches):
        column = discrete[:, b]
        if column.size and (column.min() < 0 or column.max() >= size):
            bad = column[(column < 0) | (column >= size)][0]
            raise ValueError(f"set_actions('{behavior_name}'): discrete branch {b} takes indices "
                             f"0..{size - 1}, got {int(bad)}")
    return ActionTuple(continuous, discrete)
