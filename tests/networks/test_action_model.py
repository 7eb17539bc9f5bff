from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs.base import ActionSpec
from tftrainers.networks import ActionModel, Actions, allowed_action_mask, total_entropy

from .helpers import random_allowed_masks


def _zero_heads(model: ActionModel) -> None:
    """Zero weights: uniform logits and a zero Gaussian mean, whatever the encoding."""
    for head in model.branch_heads + ((model.mean,) if model.mean is not None else ()):
        for weight in head.weights:
            weight.assign(tf.zeros_like(weight))


def test_masked_actions_are_never_sampled(rng):
    branches = (3, 5, 1)
    model = ActionModel(4, ActionSpec(1, branches))
    batch = 256
    masks = random_allowed_masks(rng, batch, branches)
    # Large encodings give peaked logits, so masking (not luck) must keep actions out.
    encoding = rng.normal(0, 30.0, (batch, 4)).astype(np.float32)
    split = np.split(masks, np.cumsum(branches)[:-1], axis=1)
    sample_fn = tf.function(model.sample)
    for _ in range(20):
        sample = sample_fn(encoding, masks)
        discrete = sample.discrete.numpy()
        assert discrete.dtype == np.int32 and discrete.shape == (batch, len(branches))
        for b, branch_mask in enumerate(split):
            assert np.all(branch_mask[np.arange(batch), discrete[:, b]] == 1.0)
        assert np.all(np.isfinite(sample.log_probs_discrete.numpy()))
        assert np.all(sample.log_probs_discrete.numpy() <= 1e-6)


def test_deterministic_picks_argmax_among_allowed(rng):
    branches = (4, 6)
    model = ActionModel(5, ActionSpec(0, branches))
    batch = 64
    encoding = rng.normal(0, 5.0, (batch, 5)).astype(np.float32)
    masks = random_allowed_masks(rng, batch, branches)
    chosen = model.deterministic(encoding, masks).discrete.numpy()
    offset = 0
    for b, (size, head) in enumerate(zip(branches, model.branch_heads)):
        logits = head(encoding).numpy()
        allowed = masks[:, offset:offset + size] == 1.0
        expected = np.where(allowed, logits, -np.inf).argmax(axis=1)
        np.testing.assert_array_equal(chosen[:, b], expected)
        offset += size


def test_gaussian_log_prob_per_dimension_known_answer():
    model = ActionModel(2, ActionSpec.create_continuous(2))
    # mean = encoding @ I + [0.5, -1]; log std = [0.3, -0.2]
    model.mean.kernel.assign(np.eye(2, dtype=np.float32))
    model.mean.bias.assign([0.5, -1.0])
    model.log_std.assign([0.3, -0.2])
    encoding = np.array([[0.0, 0.0], [1.0, 2.0]], np.float32)
    actions = np.array([[1.0, -1.0], [0.0, 0.5]], np.float32)
    log_probs, _, entropy = model.evaluate(encoding, None, Actions(actions, None))

    def log_density(x, mu, log_sigma):
        return (-0.5 * ((x - mu) / math.exp(log_sigma)) ** 2 - log_sigma
                - 0.5 * math.log(2 * math.pi))

    means = [[0.5, -1.0], [1.5, 1.0]]
    expected = [[log_density(actions[i, d], means[i][d], [0.3, -0.2][d]) for d in range(2)]
                for i in range(2)]
    np.testing.assert_allclose(log_probs.numpy(), expected, rtol=1e-6, atol=1e-6)
    # Continuous entropy: the mean over dimensions of 0.5 * log(2 pi e sigma^2).
    per_dim = [0.5 * math.log(2 * math.pi * math.e * math.exp(2 * s)) for s in (0.3, -0.2)]
    np.testing.assert_allclose(entropy.numpy(), [np.mean(per_dim)] * 2, rtol=1e-6)


def test_entropy_known_answers():
    branches = (4, 3)
    model = ActionModel(3, ActionSpec(2, branches))
    _zero_heads(model)
    model.log_std.assign([0.0, 0.7])
    encoding = np.ones((2, 3), np.float32)
    # Second row: branch 0 allows 2 of its 4 actions, branch 1 all 3.
    masks = np.array([[1, 1, 1, 1, 1, 1, 1], [1, 0, 0, 1, 1, 1, 1]], np.float32)
    sample = model.sample(encoding, masks)
    gaussian = [0.5 * math.log(2 * math.pi * math.e * math.exp(2 * s)) for s in (0.0, 0.7)]
    np.testing.assert_allclose(sample.entropy_continuous.numpy(), [gaussian] * 2, rtol=1e-6)
    np.testing.assert_allclose(sample.entropy_discrete.numpy(),
                               [[math.log(4), math.log(3)], [math.log(2), math.log(3)]],
                               rtol=1e-6)
    # Uniform over allowed actions: log prob = -log(number allowed).
    np.testing.assert_allclose(sample.log_probs_discrete.numpy(),
                               [[-math.log(4), -math.log(3)], [-math.log(2), -math.log(3)]],
                               rtol=1e-6)
    expected_total = np.mean(gaussian) + np.array([math.log(4) + math.log(3),
                                                   math.log(2) + math.log(3)])
    np.testing.assert_allclose(sample.entropy.numpy(), expected_total, rtol=1e-6)
    _, _, entropy = model.evaluate(encoding, masks, Actions(sample.continuous, sample.discrete))
    np.testing.assert_allclose(entropy.numpy(), expected_total, rtol=1e-6)


def test_evaluate_matches_the_sample_log_probs(rng):
    model = ActionModel(4, ActionSpec(3, (2, 5)))
    encoding = rng.normal(size=(32, 4)).astype(np.float32)
    masks = random_allowed_masks(rng, 32, (2, 5))
    sample = model.sample(encoding, masks)
    evaluation = model.evaluate(encoding, masks, Actions(sample.continuous, sample.discrete))
    np.testing.assert_allclose(evaluation.log_probs_continuous.numpy(),
                               sample.log_probs_continuous.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(evaluation.log_probs_discrete.numpy(),
                               sample.log_probs_discrete.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(evaluation.entropy.numpy(),
                               total_entropy(sample.entropy_continuous,
                                             sample.entropy_discrete).numpy(), rtol=1e-6)


def test_env_actions_are_clipped_and_scaled(rng):
    raw = np.concatenate([rng.normal(0, 10.0, (100, 2)), [[3.0, -3.0], [1.5, -0.3]]])
    env = ActionModel.env_actions(raw.astype(np.float32)).numpy()
    assert np.all(env >= -1.0) and np.all(env <= 1.0)
    np.testing.assert_allclose(env[-2:], [[1.0, -1.0], [0.5, -0.1]], rtol=1e-6)
    np.testing.assert_allclose(env, np.clip(raw, -3, 3) / 3, rtol=1e-6)


def test_allowed_action_mask_from_env_masks():
    env_masks = [np.array([[True, False], [False, False]]),
                 np.array([[False, False, True], [True, True, False]])]
    np.testing.assert_array_equal(allowed_action_mask(env_masks, (2, 3), 2),
                                  [[0, 1, 1, 1, 0], [1, 1, 0, 0, 1]])
    np.testing.assert_array_equal(allowed_action_mask(None, (2, 3), 2), np.ones((2, 5)))
    with pytest.raises(ValueError, match="per discrete branch"):
        allowed_action_mask(env_masks[:1], (2, 3), 2)


def test_given_noise_samples_the_same_distribution_and_respects_masks():
    import tensorflow as tf
    from tftrainers.envs import ActionSpec
    from tftrainers.networks.action_model import ActionNoise
    model = ActionModel(4, ActionSpec(1, (3,)))
    rng = np.random.default_rng(0)
    n = 20000
    encoding = tf.constant(np.tile(rng.normal(size=(1, 4)), (n, 1)), tf.float32)
    masks = tf.constant(np.tile([[1.0, 0.0, 1.0]], (n, 1)), tf.float32)
    noise = ActionNoise(tf.constant(rng.standard_normal((n, 1)), tf.float32),
                        tf.constant(rng.uniform(1e-12, 1.0, (n, 3)), tf.float32))
    sample = model.sample(encoding, masks, noise)
    counts = np.bincount(sample.discrete.numpy()[:, 0], minlength=3) / n
    probs = tf.nn.softmax(model.masked_logits(encoding[:1], masks[:1])[0]).numpy()[0]
    assert counts[1] == 0.0
    np.testing.assert_allclose(counts, probs, atol=0.015)
    mean = model.mean(encoding[:1]).numpy()[0, 0]
    std = np.exp(model.log_std.numpy()[0])
    np.testing.assert_allclose(sample.continuous.numpy()[:, 0],
                               mean + std * noise.gaussian.numpy()[:, 0], rtol=1e-5, atol=1e-6)
