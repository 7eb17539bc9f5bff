"""Keras building blocks of policies and critics (TensorFlow backend only).

- ``Normalizer``: running mean / variance of vector observations.
- ``VectorInput``, ``make_visual_encoder`` (simple, nature_cnn, resnet, fully_connected).
- ``NetworkBody``: encoders -> hidden layers -> optional LSTM.
- ``ActionModel``: Gaussian + masked categorical heads; ``allowed_action_mask``.
- ``ValueHeads``, ``Critic``, ``SharedCritic`` (value heads on the policy's body),
  ``POCACritic`` (``EntityEmbedding``, ``ResidualSelfAttention``); ``PolicyNetwork``.
"""
from __future__ import annotations

import keras

if keras.backend.backend() != "tensorflow":
    raise ImportError(f"tftrainers needs Keras' TensorFlow backend, but KERAS_BACKEND is "
                      f"'{keras.backend.backend()}'; unset it or set KERAS_BACKEND=tensorflow")

from tftrainers.networks.action_model import (ActionEvaluation, ActionModel, Actions,  # noqa: E402
                                              ActionSample, allowed_action_mask, apply_mask,
                                              gaussian_entropy, gaussian_log_prob, total_entropy)
from tftrainers.networks.body import NetworkBody  # noqa: E402
from tftrainers.networks.attention import EntityEmbedding, ResidualSelfAttention  # noqa: E402
from tftrainers.networks.critics import (Critic, POCACritic, SharedCritic,  # noqa: E402
                                         ValueHeads)
from tftrainers.networks.encoders import (MIN_RESOLUTION, VectorInput, VisualEncoder,  # noqa: E402
                                          make_visual_encoder)
from tftrainers.networks.normalizer import Normalizer  # noqa: E402
from tftrainers.networks.policy_network import PolicyNetwork  # noqa: E402

__all__ = [
    "ActionEvaluation", "ActionModel", "ActionSample", "Actions", "Critic", "EntityEmbedding",
    "MIN_RESOLUTION", "NetworkBody", "Normalizer", "POCACritic", "PolicyNetwork",
    "ResidualSelfAttention", "SharedCritic", "ValueHeads", "VectorInput", "VisualEncoder",
    "allowed_action_mask", "apply_mask", "gaussian_entropy", "gaussian_log_prob",
    "make_visual_encoder", "total_entropy",
]
