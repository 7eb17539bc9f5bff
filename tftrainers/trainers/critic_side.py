"""The critic side of an actor-critic trainer: the critic's estimates for the targets.

    side = ValueEstimator(policy, critic, streams, normalize=True)
    side.update_normalization(obs)                 # the actor's and the critic's normalizers
    estimates = side.critic_values(trajectories, obs)   # per step, bootstraps, critic memory
    side.set_weights(published)                    # after an update: the ONNX runner's copy

Separate from the update (``ppo/update.py``: losses, compiled step, guard, schedules) so
that each algorithm composes what it needs: PPO a ``ValueEstimator`` and ``PPOUpdate``,
MA-POCA a ``GroupEstimator`` (``poca/optimizer.py``) and the same ``PPOUpdate`` with its
own loss. The critic network itself is shared: the update trains the one these read.

``CriticSide`` holds what every critic side needs: the critic, the normalizer update of
actor and critic in one call, and with ``network_settings.memory`` the recurrent replay:
the critic's state carried through each agent's trajectories (``AgentMemories``, zeros
after an episode end), stored at every step for the update, and the bootstrap value of a
cut trajectory taken with the state after its last step (as ML-Agents'). A subclass sets
``_trace_fn``, the compiled trace ``replay`` runs.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np
import tensorflow as tf

from tftrainers.acting import OnnxRunner
from tftrainers.envs.agent_rows import AgentMemories
from tftrainers.processing import Trajectory
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.tf_utils.onnx_function import OnnxExportError, convert_to_onnx, flat_values
from tftrainers.trainers.policy import Policy, obs_signature, unflatten_obs


class CriticValues(NamedTuple):
    """The critic's estimates for a batch of trajectories (concatenated in order).

    step: {stream: [steps]} value of every step; bootstrap: {stream: [trajectories]} value
    of each trajectory's ``next_obs``; memory: [steps, critic_state_size] the critic's state
    at every step (None without memory). (``GroupEstimator``'s replay: step and bootstrap are
    (values, baselines) pairs of such dicts.)
    """

    step: object
    bootstrap: object
    memory: Optional[np.ndarray]


class CriticSide:
    """A critic and its estimates for trajectories (see the module docstring).

    Args:
        policy: the actor (its normalizer is updated with the critic's).
        critic: the critic network (its ``state_size``: the recurrent state stored per step,
            0 without memory).
        streams: the reward streams, in order.
        normalize: ``network_settings.normalize``.
    """

    def __init__(self, policy: Policy, critic, streams: Sequence[str], normalize: bool):
        self.policy = policy
        self.critic = critic
        self.streams = tuple(streams)
        self.memory_size = policy.memory_size  # the critic's own LSTM, as the actor's
        # The critic's recurrent state stored at every step for the update (PPO: its LSTM's;
        # POCA: the value's and the baseline's), carried per agent across trajectories.
        self.critic_state_size = critic.state_size
        self._critic_memories = AgentMemories(self.critic_state_size)
        self._trace_fn: Optional[CompiledFunction] = None  # set by a recurrent subclass
        self._normalize_fn = (tf.function(self._update_normalization,
                                          input_signature=[obs_signature(policy.spec)],
                                          autograph=False)
                              if normalize else None)
        self._critic_stale = False

    def _update_normalization(self, obs):
        self.policy.actor.update_normalization(obs)
        self.critic.update_normalization(obs)
        return tf.constant(0)

    def update_normalization(self, obs: List[np.ndarray]) -> None:
        """Adds observations to the actor's and the critic's normalizers (one call)."""
        if self._normalize_fn is not None and len(obs[0]):
            self._normalize_fn(obs)
            self._critic_stale = True

    def weights_changed(self) -> None:
        """The critic's variables changed outside an update (a restore)."""
        self._critic_stale = True

    def set_weights(self, published: np.ndarray) -> None:
        """An update's new actor and critic values (``PPOUpdate.published``, flat): what a
        copy of the critic outside TensorFlow needs (nothing here)."""

    def replay(self, trajectories: Sequence[Trajectory], inputs: Sequence[np.ndarray],
               after: Sequence[np.ndarray]) -> CriticValues:
        """Runs ``trajectories`` through the critic's memory (``self._trace_fn``), each from
        the state its agent's previous trajectory left (zeros after an episode end), with
        one more step after its last for the bootstrap; keeps the states for the next
        trajectories and for the update.

        Args:
            trajectories: in the order of ``inputs``.
            inputs: what the trace reads per step, each [steps, ...], the trajectories'
                steps concatenated.
            after: the same fields for the step after each trajectory, each [n, ...].

        Returns:
            CriticValues: ``step`` and ``bootstrap`` have the structure of the trace's
            outputs (PPO: {stream: ...}), at every step and after each trajectory; ``memory``
            the state [steps, critic_state_size] each step was read with.
        """
        n_steps = len(inputs[0])
        # Trajectories of one agent within a batch are in order; each one after the first
        # starts from where the one before ended, so they run in waves: wave k holds each
        # agent's k-th trajectory of the batch.
        lengths = np.array([len(t) for t in trajectories])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        agents = np.array([t.agent_id for t in trajectories], np.int64)
        wave = np.zeros(len(trajectories), np.int64)
        seen: Dict[int, int] = {}
        for j, agent in enumerate(agents.tolist()):
            wave[j] = seen.get(agent, -1) + 1
            seen[agent] = int(wave[j])
        step = bootstrap = None
        memory = np.zeros((n_steps, self.critic_state_size), np.float32)
        for k in range(int(wave.max()) + 1):
            members = np.flatnonzero(wave == k)
            rows, first = self._critic_memories.read(agents[members])
            width = int(lengths[members].max()) + 1
            grid = []
            for x, last in zip(inputs, after):
                block = np.zeros((len(members), width, *x.shape[1:]), x.dtype)
                for r, j in enumerate(members.tolist()):
                    block[r, :lengths[j]] = x[starts[j]:starts[j] + lengths[j]]
                    block[r, lengths[j]] = last[j]
                grid.append(block.reshape(len(members) * width, *x.shape[1:]))
            outputs, states = self._trace_fn(grid, first, width)
            outputs = tf.nest.map_structure(lambda v: v.numpy(), outputs)
            if step is None:
                step = tf.nest.map_structure(lambda v: np.zeros(n_steps, np.float32), outputs)
                bootstrap = tf.nest.map_structure(
                    lambda v: np.zeros(len(trajectories), np.float32), outputs)
            states = states.numpy()
            ends = lengths[members]
            real = np.arange(width)[None, :] < ends[:, None]
            index = np.concatenate([np.arange(starts[j], starts[j] + lengths[j])
                                    for j in members.tolist()])
            for v, at, after_last in zip(tf.nest.flatten(outputs), tf.nest.flatten(step),
                                         tf.nest.flatten(bootstrap)):
                at[index] = v[real]
                after_last[members] = v[np.arange(len(members)), ends]
            memory[index] = states[:, :width][real]
            # Each agent's state for its next trajectory; forgotten after an episode end.
            final = states[np.arange(len(members)), ends]
            ended = np.array([trajectories[j].episode_ended for j in members.tolist()])
            self._critic_memories.write(rows, np.where(ended[:, None], 0.0, final))
        return CriticValues(step, bootstrap, memory)


class ValueEstimator(CriticSide):
    """PPO's critic side: V per stream for every step and each trajectory's bootstrap.

    Without memory the values come from the critic converted to ONNX and run in
    onnxruntime (cheaper per update than a TensorFlow call; its weights arrive with each
    update's published vector), or from TensorFlow; with memory from the critic's LSTM
    trace (``replay``).

    Args: as ``CriticSide``, and
        shared: the critic is value heads on the policy's body (``shared_critic``): its
            values read the actor's variables too.
        critic_runtime: "onnxruntime" or "tensorflow" (memoryless critic values).
    """

    def __init__(self, policy: Policy, critic, streams: Sequence[str], normalize: bool,
                 shared: bool = False, critic_runtime: str = "onnxruntime"):
        super().__init__(policy, critic, streams, normalize)
        spec, f32 = policy.spec, tf.float32
        actor_size = sum(int(np.prod(v.shape)) for v in policy.variables)
        # What the critic's values read: the published vector from _critic_offset on (a
        # shared critic reads the actor's body as well as its heads, so all of it).
        self._critic_variables = (policy.variables + list(critic.variables) if shared
                                  else list(critic.variables))
        self._critic_offset = 0 if shared else actor_size
        # Critic values, once per update over whole trajectories.
        self._critic_runner: Optional[OnnxRunner] = None
        self._read_critic = flat_values(self._critic_variables)
        if self.memory_size:
            self._trace_fn = CompiledFunction(self._trace, [
                obs_signature(spec), tf.TensorSpec([None, self.critic_state_size], f32),
                tf.TensorSpec([], tf.int32)], jit_compile=False)
        else:
            self._obs_sizes = [int(np.prod(o.shape)) for o in spec.observation_specs]
            if critic_runtime == "onnxruntime":
                try:
                    self._critic_runner = OnnxRunner(
                        convert_to_onnx(self._values_packed, sum(self._obs_sizes),
                                        self._critic_variables), self._read_critic())
                except (ImportError, OnnxExportError):
                    self._critic_runner = None  # TensorFlow computes them instead
            # Values are computed once per update for many trajectories: not worth an XLA
            # compile per batch size.
            self._values_fn = CompiledFunction(self._values, [obs_signature(spec)],
                                               jit_compile=False)

    def set_weights(self, published: np.ndarray) -> None:
        if self._critic_runner is not None:
            self._critic_runner.set_weights(published[self._critic_offset:])
            self._critic_stale = False

    def _values(self, obs):
        values, _ = self.critic(obs)
        return values

    def _values_packed(self, packed):
        values = self._values(unflatten_obs(tf.split(packed, self._obs_sizes, axis=1),
                                            self.policy.spec))
        return tf.stack([values[name] for name in self.streams], axis=1)

    def values(self, obs: List[np.ndarray]) -> Dict[str, np.ndarray]:
        """Critic values {stream: [n]} of a batch of observations (memoryless critic)."""
        if self._critic_runner is None:
            return {k: v.numpy() for k, v in self._values_fn(obs).items()}
        if self._critic_stale:
            self._critic_runner.set_weights(self._read_critic())
            self._critic_stale = False
        n = len(obs[0])
        packed = np.concatenate([o.reshape(n, -1) for o in obs], axis=1, dtype=np.float32)
        out = self._critic_runner(packed)
        return {name: out[:, i] for i, name in enumerate(self.streams)}

    def critic_values(self, trajectories: Sequence[Trajectory],
                      obs: Sequence[np.ndarray]) -> CriticValues:
        """Values of every step of ``trajectories`` and of their ``next_obs``.

        Args:
            trajectories: in the order of ``obs``, their observations concatenated (per
                observation spec).
        """
        n_steps = len(obs[0])
        if not self.memory_size:
            # One call on the steps followed by each trajectory's next observation.
            values = self.values([np.concatenate([o, np.stack([t.next_obs[i]
                                                               for t in trajectories])])
                                  for i, o in enumerate(obs)])
            return CriticValues({k: v[:n_steps] for k, v in values.items()},
                                {k: v[n_steps:] for k, v in values.items()}, None)
        # With memory, as ML-Agents: each trajectory runs through the critic's LSTM from
        # the state its agent's previous trajectory left, its next observation as one more
        # step (the bootstrap value is taken with the state after the last real step).
        return self.replay(trajectories, list(obs),
                           [np.stack([t.next_obs[i] for t in trajectories])
                            for i in range(len(obs))])

    def _trace(self, inputs, memory, steps):
        """The compiled trace ``replay`` calls: (outputs {stream: [N, T]}, states
        [N, T + 1, critic_state_size]) of N trajectories of T steps (``Critic.trace``)."""
        return self.critic.trace(inputs, memory, steps)
