"""Value estimation: one value head per reward stream, and the PPO critic.

Usage::

    critic = Critic(spec.observation_specs, ["extrinsic", "curiosity"], hidden_units=128,
                    num_layers=2, normalize=True)
    values, _ = critic(obs_list)          # {"extrinsic": [B], "curiosity": [B]}

The PPO critic has its own body (ML-Agents' default, non-shared critic), so it keeps its
own normalizer; update it together with the policy's (``update_normalization``).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.envs.base import ObservationSpec
from tftrainers.networks.body import NetworkBody


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
        hidden_units, num_layers, normalize, vis_encode_type, memory_size: as
            ``NetworkBody`` (ML-Agents ``network_settings``).
    """

    def __init__(self, observation_specs: Sequence[ObservationSpec], stream_names: Sequence[str],
                 hidden_units: int = 128, num_layers: int = 2, normalize: bool = False,
                 vis_encode_type: str = "simple", memory_size: int = 0,
                 name: str | None = "critic", **kwargs):
        super().__init__(name=name, **kwargs)
        self.body = NetworkBody(observation_specs, hidden_units, num_layers, normalize,
                                vis_encode_type, memory_size, name="body")
        self.value_heads = ValueHeads(stream_names, self.body.encoding_size, name="value_heads")
        self.built = True

    @property
    def stream_names(self) -> Tuple[str, ...]:
        return self.value_heads.stream_names

    @property
    def memory_size(self) -> int:
        return self.body.memory_size

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
            ({stream: [N, T]}, states [N, T + 1, memory_size]) (see
            ``NetworkBody.memory_trace``).
        """
        x = self.body.features(obs)
        x = tf.reshape(x, [-1, steps, x.shape[-1]])
        encoding, states = self.body.memory_trace(x, memory)
        flat = tf.reshape(encoding, [-1, encoding.shape[-1]])
        values = {k: tf.reshape(v, [-1, steps]) for k, v in self.value_heads(flat).items()}
        return values, states

    def update_normalization(self, obs: Sequence[tf.Tensor]) -> None:
        """See ``NetworkBody.update_normalization``."""
        self.body.update_normalization(obs)
