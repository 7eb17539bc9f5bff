"""SAC's critics: twin Q networks with one head per reward stream (ML-Agents 1.x layout).

    q1 = QNetwork(spec, ["extrinsic"], hidden_units=128, num_layers=2, name="q1")
    q = q1(obs, continuous_action)        # {"extrinsic": [B, sum(branches) or 1]}

Continuous actions (the env's scale, tanh of the Gaussian sample) enter the body beside the
observations, before the hidden layers, as one more vector input. With memory a Q network
has its own LSTM after the hidden layers (ML-Agents' Q networks take ``network_settings``
whole), run over each training sequence from a zero state (ML-Agents': no Q memory is kept
while acting, so there is none to store). Discrete actions are not
inputs: each head gives one value per action of every branch (``sum(branches)`` outputs),
and the losses pick or weight them (``losses.taken_q``, ``losses.expected_q``). The state
value network and its target are the PPO critic's class (``networks.Critic``).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tftrainers.envs.base import BehaviorSpec, ObservationSpec
from tftrainers.networks.body import NetworkBody

#: The name of the continuous action input of a Q network's body.
ACTION_INPUT = "continuous_action"


class QNetwork(keras.Model):
    """Q(s, a) for every reward stream (see the module doc).

    Args:
        spec: the behavior's spec.
        stream_names: reward streams, one head each.
        hidden_units, num_layers, normalize, vis_encode_type, goal_conditioning, encoder,
            memory_size: ``network_settings`` (``memory_size`` 0: no LSTM).
    """

    def __init__(self, spec: BehaviorSpec, stream_names: Sequence[str], hidden_units: int = 128,
                 num_layers: int = 2, normalize: bool = False, vis_encode_type: str = "simple",
                 goal_conditioning: str = "hyper", encoder=None, name: str | None = "q",
                 memory_size: int = 0, **kwargs):
        super().__init__(name=name, **kwargs)
        action_spec = spec.action_spec
        self.continuous_size = action_spec.continuous_size
        self.branches = tuple(action_spec.discrete_branches)
        specs = list(spec.observation_specs)
        if self.continuous_size:
            specs.append(ObservationSpec((self.continuous_size,), ACTION_INPUT))
        self.body = NetworkBody(specs, hidden_units, num_layers, normalize, vis_encode_type,
                                memory_size, name="body", goal_conditioning=goal_conditioning,
                                encoder=encoder)
        self.stream_names = tuple(stream_names)
        width = int(sum(self.branches)) or 1
        self._heads = []
        for stream in self.stream_names:
            head = keras.layers.Dense(width, name=f"{stream}_q")
            head.build((None, self.body.encoding_size))
            setattr(self, f"q_{stream}", head)  # an attribute: checkpointed by name
            self._heads.append(head)
        self.built = True

    def call(self, obs: Sequence[tf.Tensor], continuous_action: Optional[tf.Tensor] = None,
             sequence_length: int = 1) -> Dict[str, tf.Tensor]:
        """obs: one [B, *shape] per spec; continuous_action: [B, c] in [-1, 1] (None
        without continuous actions) -> {stream: [B, sum(branches) or 1]}. With memory the
        B rows are B / L sequences of L = ``sequence_length`` steps, each run from a zero
        state."""
        inputs = list(obs) + ([continuous_action] if self.continuous_size else [])
        encoding, _ = self.body(inputs, sequence_length=sequence_length)
        return {s: head(encoding) for s, head in zip(self.stream_names, self._heads)}

    def copy_normalization(self, body: NetworkBody) -> None:
        """Takes the policy body's observation statistics (the action input has none to
        take: its normalizer, if any, stays the identity up to the clip)."""
        self.body.copy_normalization(body)


def trainable(*models) -> Tuple[tf.Variable, ...]:
    """The trainable variables of ``models``, in order."""
    return tuple(v for m in models for v in m.trainable_variables)
