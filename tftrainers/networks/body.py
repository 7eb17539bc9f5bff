"""The network body shared by policies and critics (ML-Agents ``NetworkBody``).

observations -> one encoder each -> concat -> ``num_layers`` x Dense(hidden_units, swish)
-> optional LSTM (``memory_size // 2`` units). Usage::

    body = NetworkBody(spec.observation_specs, hidden_units=128, num_layers=2,
                       normalize=True, vis_encode_type="simple", memory_size=0)
    encoding, _ = body(obs_list)                       # [B, 128]
    body.update_normalization(obs_list)                # running mean/var of vector obs

With memory the recurrent state is one tensor, ``memory`` [B, memory_size] =
concat(h, c), as in ML-Agents and the exported ``recurrent_in`` / ``recurrent_out``::

    # acting: one step per agent
    encoding, memory = body(obs_list, memory=memory)
    # training: a flat batch of N sequences of length L, rows [seq0 t0..tL-1, seq1 t0.., ...];
    # memory holds the stored memory at the first step of each sequence, [N, memory_size]
    encoding, last_memory = body(obs_list, memory=first_memories, sequence_length=L)
    # encoding: [N * L, memory_size // 2], last_memory: [N, memory_size]

Variable-length observations (``ObservationKind.VARIABLE_LENGTH``, ML-Agents'
BufferSensor, [B, max_entities, entity_size], absent entities zero rows) are pooled by
attention, as ML-Agents' ``ObservationEncoder``: the other observations' encodings are
embedded into one "self" vector (``EntityEmbedding``, 128 units); every entity is
embedded together with that self vector (one ``EntityEmbedding`` per variable-length
observation); the entities of all of them go through one ``ResidualSelfAttention``
(absent ones masked) whose masked mean pool (128) joins the concatenation.

Goal signals (``ObservationType.GOAL_SIGNAL``) are encoded like any observation and
joined to the concatenation; with ``goal_conditioning="hyper"`` (the default) the last
hidden layer is in addition a ``HyperDense`` whose weights are made from the goal
encodings (ML-Agents' ``ConditionalEncoder`` with one conditional layer).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.envs.base import ObservationKind, ObservationSpec, ObservationType
from tftrainers.networks.attention import EntityEmbedding, ResidualSelfAttention, entity_mask
from tftrainers.networks.conditioning import HyperDense
from tftrainers.networks.custom_encoder import make_user_encoder
from tftrainers.networks.encoders import VectorInput, make_visual_encoder
from tftrainers.networks.layers import kaiming_normal, swish, track_layers

#: Size of the entity embeddings and of the attention over them (ML-Agents'
#: ``ATTENTION_EMBEDDING_SIZE``, independent of hidden_units).
ENTITY_EMBEDDING_SIZE = 128
#: Values of ``network_settings.goal_conditioning_type``.
GOAL_CONDITIONING_TYPES = ("hyper", "none")


class NetworkBody(keras.layers.Layer):
    """Encodes a list of observations into one vector, optionally through an LSTM.

    Args:
        observation_specs: one spec per observation, in the env's order (vector, visual or
            variable-length; goal signals vector or visual).
        hidden_units: width of the hidden layers (and of each visual encoding).
        num_layers: number of hidden Dense + swish layers after the concatenation.
        normalize: keep running mean/variance of vector observations and normalise them.
        vis_encode_type: ``simple``, ``nature_cnn``, ``resnet`` or ``fully_connected``.
        memory_size: 0 for no memory; otherwise an even size, the LSTM having
            ``memory_size // 2`` units.
        goal_conditioning: ``hyper`` (the last hidden layer's weights are made from the
            goal signals) or ``none`` (goal signals are plain inputs). No effect without
            goal signals or hidden layers.
        encoder: ``network_settings.encoder`` (``MODULE:NAME`` or the object), a user's
            Keras layer replacing the built-in encoder where it says
            (``custom_encoder``); None for the built-in encoders only.

    Raises:
        ValueError: on an unsupported observation, a too-small image, or an odd memory size.
    """

    def __init__(self, observation_specs: Sequence[ObservationSpec], hidden_units: int = 128,
                 num_layers: int = 2, normalize: bool = False, vis_encode_type: str = "simple",
                 memory_size: int = 0, encoder=None, name: str | None = None,
                 goal_conditioning: str = "hyper", **kwargs):
        super().__init__(name=name, **kwargs)
        if memory_size < 0 or memory_size % 2:
            raise ValueError(f"memory_size must be 0 (no memory) or a positive even number "
                             f"(h and c halves of the LSTM state), got {memory_size}")
        if not observation_specs:
            raise ValueError("a network body needs at least one observation")
        self.observation_specs = tuple(observation_specs)
        self.hidden_units = int(hidden_units)
        self.num_layers = int(num_layers)
        self.memory_size = int(memory_size)

        if goal_conditioning not in GOAL_CONDITIONING_TYPES:
            raise ValueError(f"unknown goal_conditioning_type '{goal_conditioning}'; expected "
                             f"one of {', '.join(GOAL_CONDITIONING_TYPES)}")
        check_observations(self.observation_specs)
        self._variable_length = tuple(s.kind == ObservationKind.VARIABLE_LENGTH
                                      for s in self.observation_specs)
        encoders = []
        for i, spec in enumerate(self.observation_specs):
            user = (make_user_encoder(encoder, spec, normalize, name=f"user_encoder_{i}")
                    if encoder is not None else None)
            if user is not None:
                encoders.append(user)
            elif spec.kind == ObservationKind.VECTOR:
                encoders.append(VectorInput(spec.shape[0], normalize, name=f"vector_input_{i}"))
            elif spec.kind == ObservationKind.VISUAL:
                encoders.append(make_visual_encoder(vis_encode_type, spec.shape, hidden_units,
                                                    obs_name=spec.name,
                                                    name=f"visual_encoder_{i}"))
            elif spec.kind == ObservationKind.VARIABLE_LENGTH:
                encoders.append(None)  # embedded with the others' encodings, below
        # The other encodings, concatenated: the "self" vector entities are embedded with.
        self_size = sum(e.output_size for e in encoders if e is not None)
        for i, spec in enumerate(self.observation_specs):
            if self._variable_length[i]:
                entity_size = spec.shape[1] + (ENTITY_EMBEDDING_SIZE if self_size else 0)
                encoders[i] = EntityEmbedding(entity_size, ENTITY_EMBEDDING_SIZE,
                                              name=f"entity_embedding_{i}")
        self.encoders = track_layers(self, "encoder", encoders)
        self.self_embedding = self.attention = None
        size = self_size
        if any(self._variable_length):
            if self_size:
                self.self_embedding = EntityEmbedding(self_size, ENTITY_EMBEDDING_SIZE,
                                                      name="self_embedding")
            self.attention = ResidualSelfAttention(ENTITY_EMBEDDING_SIZE, name="entity_attention")
            size += ENTITY_EMBEDDING_SIZE

        self._goals = tuple(s.observation_type == ObservationType.GOAL_SIGNAL
                            for s in self.observation_specs)
        goal_size = sum(e.output_size for e, goal in zip(self.encoders, self._goals) if goal)
        self.hyper = bool(goal_conditioning == "hyper" and goal_size and self.num_layers)
        hidden = []
        for i in range(self.num_layers):
            if self.hyper and i == self.num_layers - 1:
                layer = HyperDense(size, self.hidden_units, goal_size, self.hidden_units,
                                   name=f"hyper_{i}")
            else:
                layer = keras.layers.Dense(self.hidden_units,
                                           kernel_initializer=kaiming_normal(1.0),
                                           name=f"hidden_{i}")
                layer.build((None, size))
            size = self.hidden_units
            hidden.append(layer)
        self.hidden_layers = track_layers(self, "hidden", hidden)

        self.lstm_cell = None
        self._lstm_sequence = None
        if self.memory_size:
            self.lstm_cell, self._lstm_sequence = build_lstm(self.memory_size, size)
            size = self.memory_size // 2
        self.encoding_size = size
        self.built = True

    @property
    def lstm_units(self) -> int:
        return self.memory_size // 2

    def call(self, obs: Sequence[tf.Tensor], memory: Optional[tf.Tensor] = None,
             sequence_length: int = 1) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
        """Encodes a batch.

        Args:
            obs: one tensor per observation spec, [B, *shape] float32 (B = N * L).
            memory: [N, memory_size] float32, the state before the first step of each
                sequence; None means zeros. Ignored without memory.
            sequence_length: L, a Python int; the batch is N sequences of L steps.

        Returns:
            encoding: [B, encoding_size] (encoding_size = memory_size // 2 with memory,
                else hidden_units, or the concatenated input size when num_layers is 0).
            new_memory: [N, memory_size], the state after the last step of each sequence;
                None without memory.
        """
        if len(obs) != len(self.encoders):
            raise ValueError(f"expected {len(self.encoders)} observations "
                             f"({', '.join(s.name for s in self.observation_specs)}), "
                             f"got {len(obs)}")
        x = self.features(obs)
        if not self.memory_size:
            return x, None
        return run_lstm(self.lstm_cell, self._lstm_sequence, x, memory, int(sequence_length))

    def features(self, obs: Sequence[tf.Tensor]) -> tf.Tensor:
        """The part before the memory: encoders, concatenation, hidden layers ([B, F])."""
        encodings, goals, entity_inputs = [], [], []
        for encoder, o, variable, goal in zip(self.encoders, obs, self._variable_length,
                                              self._goals):
            if variable:
                entity_inputs.append((encoder, o))
                continue
            encodings.append(encoder(o))
            if goal:
                goals.append(encodings[-1])
        if entity_inputs:
            encodings.append(self._pooled_entities(encodings, entity_inputs))
        x = _concat(encodings)
        for layer in self.hidden_layers:
            x = swish(layer(x, _concat(goals)) if isinstance(layer, HyperDense) else layer(x))
        return x

    def _pooled_entities(self, encodings, entity_inputs) -> tf.Tensor:
        """The variable-length observations' entities, each embedded with the self vector,
        attended together and mean-pooled over the present ones: [B, 128]."""
        self_vector = (self.self_embedding(_concat(encodings))
                       if self.self_embedding is not None else None)
        embedded, masks = [], []
        for encoder, entities in entity_inputs:
            masks.append(entity_mask(entities))
            if self_vector is not None:
                count = int(entities.shape[1])
                repeated = tf.tile(self_vector[:, None, :], [1, count, 1])
                entities = tf.concat([repeated, entities], axis=-1)
            embedded.append(encoder(entities))
        return self.attention(_concat(embedded, axis=1), _concat(masks, axis=1))

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """Adds a batch of observations (one [n, *shape] per spec) to the running statistics
        of the vector observations. A graph op; no-op when ``normalize`` is off."""
        for encoder, o in zip(self.encoders, obs):
            if isinstance(encoder, VectorInput) or hasattr(encoder, "update_normalization"):
                encoder.update_normalization(o)

    def copy_normalization(self, other: "NetworkBody") -> None:
        """Takes the normalisation statistics of another body built for the same specs."""
        for mine, theirs in zip(self.encoders, other.encoders):
            if getattr(mine, "normalizer", None) is not None \
                    and getattr(theirs, "normalizer", None) is not None:
                mine.normalizer.copy_from(theirs.normalizer)


def check_observations(observation_specs: Sequence[ObservationSpec]) -> None:
    """Refuses, in one line naming the observation, what the networks cannot take: an
    unknown kind, or a goal signal that is variable-length (the goal must be one vector).

    Raises:
        ValueError: naming the observation, what it is and what is supported.
    """
    for spec in observation_specs:
        if not isinstance(spec.kind, ObservationKind):
            raise ValueError(f"observation '{spec.name}' is of kind {spec.kind!r}; the networks "
                             f"take vector, visual and variable_length observations")
        if not isinstance(spec.observation_type, ObservationType):
            raise ValueError(f"observation '{spec.name}' has type {spec.observation_type!r}; "
                             f"the networks take default and goal_signal observations")
        if (spec.kind == ObservationKind.VARIABLE_LENGTH
                and spec.observation_type == ObservationType.GOAL_SIGNAL):
            raise ValueError(f"observation '{spec.name}' is a variable_length goal signal; "
                             f"goal signals must be vector or visual observations")


def _concat(tensors, axis: int = -1) -> tf.Tensor:
    return tensors[0] if len(tensors) == 1 else tf.concat(tensors, axis=axis)


# The LSTM as functions of the cell, so that every network with memory (this body, MA-POCA's
# critic) runs the same code while its cell stays its own attribute (checkpoint names).

def build_lstm(memory_size: int, input_size: int
               ) -> Tuple[keras.layers.LSTMCell, keras.layers.RNN]:
    """An LSTM cell of ``memory_size // 2`` units over ``input_size`` features, and the
    RNN that runs it over sequences (single steps, as in acting and export, call the cell
    directly so exported graphs have no loop)."""
    # unit_forget_bias (on by default) matches ML-Agents' forget_bias=1.0.
    cell = keras.layers.LSTMCell(memory_size // 2, name="lstm")
    cell.build((None, input_size))
    sequence = keras.layers.RNN(cell, return_sequences=True, return_state=True,
                                name="lstm_sequence")
    sequence.build((None, None, input_size))
    return cell, sequence


def run_lstm(cell: keras.layers.LSTMCell, sequence: keras.layers.RNN, x: tf.Tensor,
             memory: Optional[tf.Tensor], sequence_length: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """The LSTM over a flat batch of N sequences of L steps.

    Args:
        x: [N * L, F] features, rows [seq0 t0..tL-1, seq1 t0.., ...].
        memory: [N, 2 * units] concat(h, c) before each sequence's first step; None: zeros.
        sequence_length: L, a Python int.

    Returns:
        output [N * L, units] (h at every step) and the state after each sequence [N, 2 * units].
    """
    if sequence_length < 1:
        raise ValueError(f"sequence_length must be >= 1, got {sequence_length}")
    units = cell.units
    if memory is None:
        n_sequences = tf.shape(x)[0] // sequence_length
        memory = tf.zeros(tf.stack([n_sequences, 2 * units]), x.dtype)
    h, c = tf.split(memory, 2, axis=-1)
    if sequence_length == 1:
        out, (h, c) = cell(x, [h, c])
        return out, tf.concat([h, c], axis=-1)
    sequences = tf.reshape(x, [-1, sequence_length, x.shape[-1]])
    out, h, c = sequence(sequences, initial_state=[h, c])
    return tf.reshape(out, [-1, units]), tf.concat([h, c], axis=-1)


def trace_lstm(cell: keras.layers.LSTMCell, x: tf.Tensor,
               memory: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
    """Runs the LSTM over whole trajectories, keeping the state at every step.

    Args:
        x: [N, T, F] features of N trajectories of T steps.
        memory: [N, 2 * units], the state before each trajectory's first step.

    Returns:
        output [N, T, units] and the states [N, T + 1, 2 * units]: before step 0, ...,
        and after the last step (what a trajectory that stops at any step hands on, and
        what each training sequence starts from).
    """
    h, c = tf.split(memory, 2, axis=-1)

    def step(state, x_t):
        h_t, c_t = state
        _, (h_t, c_t) = cell(x_t, [h_t, c_t])
        return h_t, c_t
    hs, cs = tf.scan(step, tf.transpose(x, [1, 0, 2]), initializer=(h, c))
    states = tf.transpose(tf.concat([hs, cs], axis=-1), [1, 0, 2])
    # An LSTM's output is its h.
    return tf.transpose(hs, [1, 0, 2]), tf.concat([memory[:, None], states], axis=1)
