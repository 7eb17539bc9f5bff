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
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.envs.base import ObservationKind, ObservationSpec
from tftrainers.networks.custom_encoder import make_user_encoder
from tftrainers.networks.encoders import VectorInput, make_visual_encoder
from tftrainers.networks.layers import kaiming_normal, swish, track_layers


class NetworkBody(keras.layers.Layer):
    """Encodes a list of observations into one vector, optionally through an LSTM.

    Args:
        observation_specs: one spec per observation, in the env's order (vector or visual;
            variable-length observations are not supported yet).
        hidden_units: width of the hidden layers (and of each visual encoding).
        num_layers: number of hidden Dense + swish layers after the concatenation.
        normalize: keep running mean/variance of vector observations and normalise them.
        vis_encode_type: ``simple``, ``nature_cnn``, ``resnet`` or ``fully_connected``.
        memory_size: 0 for no memory; otherwise an even size, the LSTM having
            ``memory_size // 2`` units.
        encoder: ``network_settings.encoder`` (``MODULE:NAME`` or the object), a user's
            Keras layer replacing the built-in encoder where it says
            (``custom_encoder``); None for the built-in encoders only.

    Raises:
        ValueError: on an unsupported observation, a too-small image, or an odd memory size.
    """

    def __init__(self, observation_specs: Sequence[ObservationSpec], hidden_units: int = 128,
                 num_layers: int = 2, normalize: bool = False, vis_encode_type: str = "simple",
                 memory_size: int = 0, encoder=None, name: str | None = None, **kwargs):
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
            else:
                raise ValueError(f"observation '{spec.name}' is {spec.kind.value}; the network "
                                 f"body supports vector and visual observations only")
        self.encoders = track_layers(self, "encoder", encoders)

        size = sum(encoder.output_size for encoder in self.encoders)
        hidden = []
        for i in range(self.num_layers):
            dense = keras.layers.Dense(self.hidden_units, kernel_initializer=kaiming_normal(1.0),
                                       name=f"hidden_{i}")
            dense.build((None, size))
            size = self.hidden_units
            hidden.append(dense)
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
        encodings = [encoder(o) for encoder, o in zip(self.encoders, obs)]
        x = encodings[0] if len(encodings) == 1 else tf.concat(encodings, axis=-1)
        for dense in self.hidden_layers:
            x = swish(dense(x))
        return x

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
