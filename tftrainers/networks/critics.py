"""Value estimation: one value head per reward stream, the PPO critic and MA-POCA's.

Usage::

    critic = Critic(spec.observation_specs, ["extrinsic", "curiosity"], hidden_units=128,
                    num_layers=2, normalize=True)
    values, _ = critic(obs_list)          # {"extrinsic": [B], "curiosity": [B]}

The PPO critic has its own body (ML-Agents' default, non-shared critic), so it keeps its
own normalizer; update it together with the policy's (``update_normalization``). With
``shared_critic: true`` the critic is ``SharedCritic``: value heads on the policy's body.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.envs.base import ObservationSpec
from tftrainers.networks.attention import (EntityEmbedding, ResidualSelfAttention,
                                            small_linear_gain)
from tftrainers.networks.body import NetworkBody, build_lstm, run_lstm, trace_lstm
from tftrainers.networks.layers import swish, track_layers


class ValueHeads(keras.layers.Layer):
    """One Dense(1) per reward stream.

    Args:
        stream_names: reward signal names (e.g. ``extrinsic``, ``curiosity``), unique.
        encoding_size: size of the encoding the heads read.
    """

    def __init__(self, stream_names: Sequence[str], encoding_size: int,
                 name: str | None = None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.stream_names = tuple(stream_names)
        if not self.stream_names:
            raise ValueError("value heads need at least one reward stream")
        if len(set(self.stream_names)) != len(self.stream_names):
            raise ValueError(f"reward stream names must be unique, got {list(stream_names)}")
        self._heads = {}
        for stream in self.stream_names:
            if not stream.isidentifier():
                raise ValueError(f"reward stream name '{stream}' must be a Python identifier "
                                 f"(letters, digits, underscores)")
            head = keras.layers.Dense(1, name=f"{stream}_value")
            head.build((None, int(encoding_size)))
            # Its own attribute, so tf.train.Checkpoint sees it (Keras 3 does not
            # checkpoint layers held in a dict attribute).
            setattr(self, f"value_{stream}", head)
            self._heads[stream] = head
        self.built = True

    def call(self, encoding: tf.Tensor) -> Dict[str, tf.Tensor]:
        """[B, encoding_size] -> {stream: [B] float32}."""
        return {stream: head(encoding)[:, 0] for stream, head in self._heads.items()}


class Critic(keras.Model):
    """Value network: its own ``NetworkBody`` and ``ValueHeads``.

    Args:
        observation_specs: the behavior's observation specs.
        stream_names: reward streams to estimate a value for.
        hidden_units, num_layers, normalize, vis_encode_type, memory_size,
            goal_conditioning, encoder: as ``NetworkBody`` (ML-Agents ``network_settings``).
    """

    def __init__(self, observation_specs: Sequence[ObservationSpec], stream_names: Sequence[str],
                 hidden_units: int = 128, num_layers: int = 2, normalize: bool = False,
                 vis_encode_type: str = "simple", memory_size: int = 0, encoder=None,
                 name: str | None = "critic", goal_conditioning: str = "hyper", **kwargs):
        super().__init__(name=name, **kwargs)
        self.body = NetworkBody(observation_specs, hidden_units, num_layers, normalize,
                                vis_encode_type, memory_size, name="body",
                                goal_conditioning=goal_conditioning, encoder=encoder)
        self.value_heads = ValueHeads(stream_names, self.body.encoding_size, name="value_heads")
        self.built = True

    @property
    def stream_names(self) -> Tuple[str, ...]:
        return self.value_heads.stream_names

    @property
    def memory_size(self) -> int:
        return self.body.memory_size

    @property
    def state_size(self) -> int:
        """Width of the recurrent state stored per step for the update (0 without memory)."""
        return self.memory_size

    def call(self, obs: Sequence[tf.Tensor], memory: Optional[tf.Tensor] = None,
             sequence_length: int = 1) -> Tuple[Dict[str, tf.Tensor], Optional[tf.Tensor]]:
        """Value estimates.

        Args:
            obs: one [B, *shape] float32 per observation spec (B = N * sequence_length).
            memory: [N, memory_size] critic memory at each sequence start, or None.
            sequence_length: Python int L (see ``NetworkBody``).

        Returns:
            ({stream: [B] float32}, new memory [N, memory_size] or None).
        """
        encoding, new_memory = self.body(obs, memory=memory, sequence_length=sequence_length)
        return self.value_heads(encoding), new_memory

    def trace(self, obs: Sequence[tf.Tensor], memory: tf.Tensor,
              steps: int) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
        """Values of whole trajectories with memory carried through every step.

        Args:
            obs: one [N * T, *shape] float32 per spec: N trajectories of T steps, in order.
            memory: [N, memory_size], each trajectory's critic memory before its first step.
            steps: T (a tensor or int).

        Returns:
            ({stream: [N, T]}, states [N, T + 1, memory_size]) (see ``trace_lstm``).
        """
        return traced_values(self.value_heads, self.body.lstm_cell, self.body.features(obs),
                             memory, steps)

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """See ``NetworkBody.update_normalization``."""
        self.body.update_normalization(obs)


class _Borrowed:
    """Holds a layer another model owns. A plain object: neither Keras nor tf.train sees
    through it, so the layer's variables are listed, checkpointed and trained once, under
    their owner."""

    def __init__(self, layer):
        self.layer = layer


class SharedCritic(Critic):
    """Value heads on the policy's own ``NetworkBody`` (PPO ``shared_critic: true``, ML-Agents'
    ``SharedActorCritic``): the critic has no body of its own, so the value loss trains the
    body the actions are computed from.

    Its variables are the value heads only; the body stays the policy's (its variables,
    normalizer and checkpoint entry). Same interface as ``Critic``; with memory it runs the
    body's LSTM from its own state (the critic's memory), as ML-Agents does.

    Usage::

        critic = SharedCritic(policy.actor.body, ["extrinsic"])
        values, _ = critic(obs_list)                 # {"extrinsic": [B]}
        values = critic.value_heads(encoding)        # from an encoding the actor computed

    Args:
        body: the policy network's body.
        stream_names: reward streams to estimate a value for.
    """

    def __init__(self, body: NetworkBody, stream_names: Sequence[str],
                 name: str | None = "critic", **kwargs):
        # Not Critic.__init__: that builds a body of its own.
        keras.Model.__init__(self, name=name, **kwargs)
        self._body = _Borrowed(body)
        self.value_heads = ValueHeads(stream_names, body.encoding_size, name="value_heads")
        self.built = True

    @property
    def body(self) -> NetworkBody:
        return self._body.layer

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """Nothing: the normalizer is the policy's, updated with the policy (updating it here
        too would count every observation twice)."""


def traced_values(heads: ValueHeads, cell: keras.layers.LSTMCell, x: tf.Tensor,
                  memory: tf.Tensor, steps) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """Value heads over the LSTM ``cell`` run through whole trajectories.

    Args:
        x: [N * T, F] features of N trajectories of T steps, in order.
        memory: [N, memory_size], each trajectory's state before its first step.
        steps: T (a tensor or int).

    Returns:
        ({stream: [N, T]}, states [N, T + 1, memory_size]) (see ``trace_lstm``).
    """
    encoding, states = trace_lstm(cell, tf.reshape(x, [-1, steps, x.shape[-1]]), memory)
    flat = tf.reshape(encoding, [-1, encoding.shape[-1]])
    return {k: tf.reshape(v, [-1, steps]) for k, v in heads(flat).items()}, states


class POCACritic(keras.Model):
    """MA-POCA's centralised critic: group value V and per-member baselines b_i.

    Every member's observations go through one shared observation encoder (the encoders
    of a ``NetworkBody`` without hidden layers). The value V(s) embeds each present
    member's encoding as an observation-only entity; the baseline b_i(s, a_-i) embeds
    member i that way and each teammate j with its action a_j as an observation+action
    entity (two ``EntityEmbedding`` s). Either set of entities then goes through the same
    ``ResidualSelfAttention`` (absent members masked, masked mean pool), then
    ``num_layers`` Dense + swish layers started small (``small_linear_gain``), with memory
    an LSTM (``memory_size // 2`` units), then the normalised member count
    ``2 n / max_n - 1`` (``max_n``: the largest group seen, a non-trainable weight) as one
    more input of the heads, all as ML-Agents' ``MultiAgentNetworkBody``; and the same
    ``ValueHeads``: value and baseline share one
    head per reward stream and the LSTM's weights (docs/dev/architecture.md#algorithm-facts), but
    not its state: V and
    each b_i carry their own memory.

    Usage::

        critic = POCACritic(spec.observation_specs, spec.action_spec, ["extrinsic"])
        values = critic.value(group_obs, group_mask)        # {stream: [B]}
        baselines = critic.baseline(own_obs, team_obs, team_actions, team_mask)
        # with memory_size > 0: B = N sequences of L steps, memory at each sequence start
        values = critic.value(group_obs, group_mask, value_memory, sequence_length=L)
        # whole trajectories, the state at every step (what the update's sequences start from)
        values, states = critic.trace(critic.value_features(group_obs, group_mask),
                                      value_memory, steps=T)

    Args:
        observation_specs, action_spec: the behavior's (every member shares them).
        stream_names: reward streams.
        hidden_units, num_layers, normalize, vis_encode_type, memory_size, encoder:
            ``network_settings``.
        num_heads: attention heads (4, as ML-Agents).
    """

    def __init__(self, observation_specs: Sequence[ObservationSpec], action_spec,
                 stream_names: Sequence[str], hidden_units: int = 128, num_layers: int = 2,
                 normalize: bool = False, vis_encode_type: str = "simple", num_heads: int = 4,
                 memory_size: int = 0, encoder=None, name: str | None = "poca_critic",
                 **kwargs):
        super().__init__(name=name, **kwargs)
        if memory_size < 0 or memory_size % 2:
            raise ValueError(f"memory_size must be 0 (no memory) or a positive even number "
                             f"(h and c halves of the LSTM state), got {memory_size}")
        self.observation_specs = tuple(observation_specs)
        self.action_spec = action_spec
        self.memory_size = int(memory_size)
        self.encoder = NetworkBody(observation_specs, hidden_units, 0, normalize,
                                   vis_encode_type, 0, encoder=encoder,
                                   name="observation_encoder")
        size = self.encoder.encoding_size
        action_size = action_spec.continuous_size + int(sum(action_spec.discrete_branches))
        units = int(hidden_units)
        self.obs_embedding = EntityEmbedding(size, units, name="obs_embedding")
        self.obs_action_embedding = EntityEmbedding(size + action_size, units,
                                                    name="obs_action_embedding")
        self.attention = ResidualSelfAttention(units, num_heads, name="attention")
        hidden, width = [], units
        for i in range(int(num_layers)):
            # ML-Agents' MultiAgentNetworkBody: these layers start as small as the
            # attention's, so V and b_i start near 0 and follow the returns from below.
            dense = keras.layers.Dense(units, kernel_initializer=small_linear_gain(units),
                                       name=f"hidden_{i}")
            dense.build((None, width))
            hidden.append(dense)
            width = units
        self.hidden_layers = track_layers(self, "hidden", hidden)
        if self.memory_size:
            self.lstm_cell, self._lstm_sequence = build_lstm(self.memory_size, width)
            width = self.memory_size // 2
        # + 1: the member count, appended after the hidden layers (and the LSTM).
        self.value_heads = ValueHeads(stream_names, width + 1, name="value_heads")
        self.max_members = self.add_weight(shape=(), initializer="ones", trainable=False,
                                           name="max_members")
        self.built = True

    @property
    def stream_names(self) -> Tuple[str, ...]:
        return self.value_heads.stream_names

    @property
    def state_size(self) -> int:
        """Width of the recurrent state stored per step for the update: the value's memory
        then the baseline's, ``2 * memory_size`` (0 without memory)."""
        return 2 * self.memory_size

    def _encode(self, obs: Sequence[tf.Tensor]) -> tf.Tensor:
        """One [B, N, *shape] tensor per spec -> [B, N, encoding] (shared encoder)."""
        shape = tf.shape(obs[0])
        flat = [tf.reshape(o, tf.concat([[-1], tf.shape(o)[2:]], axis=0)) for o in obs]
        flat = [tf.ensure_shape(f, [None, *spec.shape])
                for f, spec in zip(flat, self.observation_specs)]
        x = self.encoder.features(flat)
        return tf.reshape(x, [shape[0], shape[1], x.shape[-1]])

    def _flat_actions(self, continuous: tf.Tensor, discrete: tf.Tensor) -> tf.Tensor:
        """[B, N, c] raw and [B, N, branches] int -> [B, N, c + sum(branches)] (one-hot)."""
        parts = [continuous]
        for i, size in enumerate(self.action_spec.discrete_branches):
            parts.append(tf.one_hot(discrete[..., i], int(size), dtype=tf.float32))
        return tf.concat(parts, axis=-1)

    def _pooled(self, entities: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        """Attention, masked pool and hidden layers, then the normalised member count as
        the last column: [B, F + 1] (the count skips the memory and goes to the heads)."""
        x = self.attention(entities, mask)
        for dense in self.hidden_layers:
            x = swish(dense(x))
        count = tf.reduce_sum(mask, axis=1, keepdims=True)
        return tf.concat([x, 2.0 * count / self.max_members - 1.0], axis=1)

    def value_features(self, group_obs: Sequence[tf.Tensor], group_mask: tf.Tensor) -> tf.Tensor:
        """V's encoding before the memory, [B, F] (arguments as ``value``)."""
        return self._pooled(self.obs_embedding(self._encode(group_obs)), group_mask)

    def baseline_features(self, own_obs: Sequence[tf.Tensor], team_obs: Sequence[tf.Tensor],
                          team_continuous: tf.Tensor, team_discrete: tf.Tensor,
                          team_mask: tf.Tensor) -> tf.Tensor:
        """b_i's encoding before the memory, [B, F] (arguments as ``baseline``)."""
        own = self.obs_embedding(self._encode([o[:, None] for o in own_obs]))
        team = self._encode(team_obs)
        team = self.obs_action_embedding(tf.concat(
            [team, self._flat_actions(team_continuous, team_discrete)], axis=-1))
        mask = tf.concat([tf.ones_like(team_mask[:, :1]), team_mask], axis=1)
        return self._pooled(tf.concat([own, team], axis=1), mask)

    def heads(self, features: tf.Tensor, memory: Optional[tf.Tensor] = None,
              sequence_length: int = 1) -> Dict[str, tf.Tensor]:
        """Values {stream: [B]} of ``value_features`` or ``baseline_features`` [B, F]: with
        memory, N sequences of L = ``sequence_length`` steps from ``memory`` [N,
        memory_size] (None: zeros)."""
        if self.memory_size:
            x, _ = run_lstm(self.lstm_cell, self._lstm_sequence, features[:, :-1], memory,
                            int(sequence_length))
            features = tf.concat([x, features[:, -1:]], axis=1)
        return self.value_heads(features)

    def trace(self, features: tf.Tensor, memory: tf.Tensor,
              steps) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
        """Values of whole trajectories, memory carried through every step.

        Args:
            features: [N * T, F] ``value_features`` or ``baseline_features`` of N
                trajectories of T steps, in order.
            memory: [N, memory_size] the (value or baseline) memory before each first step.
            steps: T.

        Returns:
            ({stream: [N, T]}, states [N, T + 1, memory_size]) (see ``trace_lstm``).
        """
        x = tf.reshape(features[:, :-1], [-1, steps, features.shape[-1] - 1])
        encoding, states = trace_lstm(self.lstm_cell, x, memory)
        flat = tf.concat([tf.reshape(encoding, [-1, encoding.shape[-1]]), features[:, -1:]],
                         axis=1)
        return ({k: tf.reshape(v, [-1, steps]) for k, v in self.value_heads(flat).items()},
                states)

    def value(self, group_obs: Sequence[tf.Tensor], group_mask: tf.Tensor,
              memory: Optional[tf.Tensor] = None,
              sequence_length: int = 1) -> Dict[str, tf.Tensor]:
        """V of the group's state.

        Args:
            group_obs: per observation spec [B, M, *shape]: every member's observation.
            group_mask: [B, M] float32, 1 = the member is present.
            memory, sequence_length: with memory, see ``heads``.

        Returns:
            {stream: [B] float32}.
        """
        return self.heads(self.value_features(group_obs, group_mask), memory, sequence_length)

    def baseline(self, own_obs: Sequence[tf.Tensor], team_obs: Sequence[tf.Tensor],
                 team_continuous: tf.Tensor, team_discrete: tf.Tensor,
                 team_mask: tf.Tensor, memory: Optional[tf.Tensor] = None,
                 sequence_length: int = 1) -> Dict[str, tf.Tensor]:
        """Member i's counterfactual baseline b_i(own observation, teammates' obs and actions).

        Args:
            own_obs: per spec [B, *shape]; team_obs: per spec [B, K, *shape];
            team_continuous: [B, K, c] raw; team_discrete: [B, K, branches] int32;
            team_mask: [B, K] float32, 1 = present.
            memory, sequence_length: with memory, see ``heads`` (the baseline's own memory).

        Returns:
            {stream: [B] float32}.
        """
        return self.heads(self.baseline_features(own_obs, team_obs, team_continuous,
                                                 team_discrete, team_mask),
                          memory, sequence_length)

    def both_features(self, own_obs: Sequence[tf.Tensor], team_obs: Sequence[tf.Tensor],
                      team_continuous: tf.Tensor, team_discrete: tf.Tensor,
                      team_mask: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """``value_features`` of the group (member i and its teammates) and member i's
        ``baseline_features``, [B, F] each, from one encoding of every member's observation:
        member i's observation-only entity is the same in both, and the teammates'
        encodings feed V's entities and the baseline's observation+action entities. Same
        results as the two calls (the encoder, the widest layer, then runs once per member
        instead of twice for member i). Arguments as ``baseline``."""
        group_obs = [tf.concat([o[:, None], t], axis=1) for o, t in zip(own_obs, team_obs)]
        mask = tf.concat([tf.ones_like(team_mask[:, :1]), team_mask], axis=1)
        encoded = self._encode(group_obs)  # [B, 1 + K, encoding], member i first
        entities = self.obs_embedding(encoded)
        team = self.obs_action_embedding(tf.concat(
            [encoded[:, 1:], self._flat_actions(team_continuous, team_discrete)], axis=-1))
        return (self._pooled(entities, mask),
                self._pooled(tf.concat([entities[:, :1], team], axis=1), mask))

    def value_and_baseline(self, own_obs: Sequence[tf.Tensor], team_obs: Sequence[tf.Tensor],
                           team_continuous: tf.Tensor, team_discrete: tf.Tensor,
                           team_mask: tf.Tensor, value_memory: Optional[tf.Tensor] = None,
                           baseline_memory: Optional[tf.Tensor] = None,
                           sequence_length: int = 1
                           ) -> Tuple[Dict[str, tf.Tensor], Dict[str, tf.Tensor]]:
        """``value`` of the group (member i and its teammates) and member i's ``baseline``
        from ``both_features``; with memory, each from its own state (see ``heads``).

        Returns: ({stream: [B]} values, {stream: [B]} baselines).
        """
        value_features, baseline_features = self.both_features(
            own_obs, team_obs, team_continuous, team_discrete, team_mask)
        return (self.heads(value_features, value_memory, sequence_length),
                self.heads(baseline_features, baseline_memory, sequence_length))

    def observe_group_size(self, members: tf.Tensor) -> None:
        """Raises ``max_n`` to ``members`` (the largest group in a batch) if it is larger."""
        self.max_members.assign(tf.maximum(self.max_members, tf.cast(members, tf.float32)))

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """Adds [n, *shape] observations per spec to the encoder's running statistics."""
        self.encoder.update_normalization(obs)
