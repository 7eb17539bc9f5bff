"""Variable-length observations (entity attention) and goal signals (hypernetwork) in the
network body, the policy and MA-POCA's critic."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs.base import (ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec,
                                  ObservationType)
from tftrainers.networks import NetworkBody, POCACritic, PolicyNetwork
from tftrainers.networks.attention import entity_mask
from tftrainers.networks.conditioning import HyperDense

from .helpers import vector_spec

ENTITIES = ObservationSpec((5, 3), "entities", ObservationKind.VARIABLE_LENGTH)
GOAL = ObservationSpec((2,), "goal", observation_type=ObservationType.GOAL_SIGNAL)


def entities(rng, batch=6, present=(5, 3, 1, 0, 4, 2)):
    """[batch, 5, 3]: row b has its first present[b] entities, the rest zero rows."""
    x = rng.normal(size=(batch, 5, 3)).astype(np.float32)
    x[np.arange(5)[None, :] >= np.array(present)[:, None]] = 0.0
    return x


def test_entity_mask_marks_zero_rows_absent():
    x = np.array([[[0, 0], [1e-6, 0], [0, -2]]], np.float32)
    np.testing.assert_array_equal(entity_mask(x).numpy(), [[0, 1, 1]])


def test_absent_entities_and_entity_order_change_nothing(rng):
    body = NetworkBody([vector_spec(4), ENTITIES], hidden_units=16, num_layers=2)
    vec, ent = rng.normal(size=(6, 4)).astype(np.float32), entities(rng)
    out = body([vec, ent])[0].numpy()
    # Present entities moved to other rows, absent ones between them: the same encoding.
    order = rng.permutation(5)
    np.testing.assert_allclose(body([vec, ent[:, order]])[0].numpy(), out, atol=1e-5)
    # A present entity's features do matter, in every row that has one.
    changed = ent.copy()
    changed[:, 0] += 1.0 * (np.abs(ent[:, 0]).max(axis=1) > 0)[:, None]
    diff = np.abs(body([vec, changed])[0].numpy() - out).max(axis=1)
    assert np.all(diff[[0, 1, 2, 4, 5]] > 1e-4) and diff[3] == 0.0
    # The self vector enters every entity's embedding: the vector observation matters too.
    assert np.abs(body([vec + 1.0, ent])[0].numpy() - out).max() > 1e-3


def test_a_body_of_entities_alone(rng):
    body = NetworkBody([ENTITIES], hidden_units=8, num_layers=1)
    assert body.self_embedding is None
    out = body([entities(rng)])[0].numpy()
    assert out.shape == (6, 8) and np.all(np.isfinite(out))  # row 3 has no entity at all


def test_entities_are_not_normalised(rng):
    body = NetworkBody([vector_spec(2), ENTITIES], 8, 1, normalize=True)
    vec = rng.normal(3.0, 2.0, (50, 2)).astype(np.float32)
    body.update_normalization([vec, rng.normal(size=(50, 5, 3)).astype(np.float32)])
    assert not hasattr(body.encoders[1], "normalizer")
    np.testing.assert_allclose(body.encoders[0].normalizer.mean.numpy(), vec.mean(0), rtol=1e-5)


def test_hyper_dense_known_answer(rng):
    layer = HyperDense(input_size=3, units=2, goal_size=2, hidden_units=4, num_layers=2)
    for v in layer.trainable_variables:
        v.assign(rng.normal(size=v.shape).astype(np.float32))
    x = rng.normal(size=(5, 3)).astype(np.float32)
    goal = rng.normal(size=(5, 2)).astype(np.float32)
    (w0, b0), (w1, b1) = [(d.kernel.numpy(), d.bias.numpy()) for d in layer.hyper_layers]
    h = goal @ w0 + b0
    h = h / (1 + np.exp(-h))
    h = h @ w1 + b1
    h = h / (1 + np.exp(-h))
    h = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + 1e-5)
    kernel = (h @ layer.weights_out.kernel.numpy() + layer.weights_out.bias.numpy())
    kernel = kernel.reshape(5, 3, 2)
    expected = np.einsum("bi,bio->bo", x, kernel) + layer.bias.numpy()
    np.testing.assert_allclose(layer(x, goal).numpy(), expected, rtol=1e-4, atol=1e-4)


def test_hyper_dense_starts_on_a_dense_layers_scale(rng):
    layer = HyperDense(input_size=64, units=32, goal_size=4, hidden_units=64)
    bound = np.sqrt(1.0 / (64 * 64))
    assert np.abs(layer.weights_out.kernel.numpy()).max() <= bound
    assert not np.any(layer.weights_out.bias.numpy()) and not np.any(layer.bias.numpy())


@pytest.mark.parametrize("specs,conditioning,num_layers,hyper", [
    ([vector_spec(4), GOAL], "hyper", 2, True),
    ([vector_spec(4), GOAL], "none", 2, False),
    ([vector_spec(4), vector_spec(2, "plain")], "hyper", 2, False),  # no goal signal
    ([vector_spec(4), GOAL], "hyper", 0, False),  # no hidden layer to condition
])
def test_goal_conditioning_makes_the_last_hidden_layer(specs, conditioning, num_layers, hyper):
    body = NetworkBody(specs, 8, num_layers, goal_conditioning=conditioning)
    kinds = [type(layer).__name__ for layer in body.hidden_layers]
    assert body.hyper == hyper
    assert kinds == ["Dense"] * (num_layers - hyper) + ["HyperDense"] * hyper


def test_the_goal_selects_the_function(rng):
    body = NetworkBody([vector_spec(4), GOAL], 8, 2)
    vec = np.repeat(rng.normal(size=(1, 4)).astype(np.float32), 2, axis=0)
    goals = np.eye(2, dtype=np.float32)
    a, b = body([vec, goals])[0].numpy()
    assert np.abs(a - b).max() > 1e-3
    # The goal also enters as an input: the first layer reads concat(vector, goal).
    assert body.hidden_layers[0].kernel.shape == (6, 8)


def test_policy_and_poca_critic_take_entities_and_goals(rng):
    specs = (vector_spec(4), ENTITIES, GOAL)
    spec = BehaviorSpec(specs, ActionSpec(1, (3,)))
    policy = PolicyNetwork(spec, hidden_units=16, num_layers=2)
    obs = [rng.normal(size=(6, 4)).astype(np.float32), entities(rng),
           np.eye(2, dtype=np.float32)[rng.integers(0, 2, 6)]]
    out = policy(obs, tf.ones((6, 3)))
    assert out["discrete_action"].shape == (6, 1)
    assert isinstance(policy.body.hidden_layers[-1], HyperDense)

    critic = POCACritic(specs, spec.action_spec, ["extrinsic"], hidden_units=16, num_layers=1)
    critic.observe_group_size(2)
    group = [np.stack([o, o[::-1]], axis=1) for o in obs]  # [6, 2 members, ...]
    mask = np.array([[1, 1]] * 3 + [[1, 0]] * 3, np.float32)
    values = critic.value(group, mask)["extrinsic"].numpy()
    # An absent member changes nothing, whatever its entities hold.
    noisy = [g.copy() for g in group]
    noisy[1][3:, 1] = rng.normal(size=noisy[1][3:, 1].shape)
    np.testing.assert_allclose(critic.value(noisy, mask)["extrinsic"].numpy(), values,
                               atol=1e-5)


def test_gradients_reach_every_entity_and_hyper_weight(rng):
    body = NetworkBody([vector_spec(4), ENTITIES, GOAL], 8, 2)
    obs = [rng.normal(size=(6, 4)).astype(np.float32), entities(rng),
           np.eye(2, dtype=np.float32)[rng.integers(0, 2, 6)]]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(body(obs)[0] ** 2)
    grads = tape.gradient(loss, body.trainable_variables)
    missing = [v.path for v, g in zip(body.trainable_variables, grads) if g is None]
    assert not missing


# --- what the networks refuse: one line naming the observation ------------------------------
def test_a_variable_length_goal_signal_is_refused():
    goal_entities = ObservationSpec((5, 3), "targets", ObservationKind.VARIABLE_LENGTH,
                                    ObservationType.GOAL_SIGNAL)
    with pytest.raises(ValueError) as info:
        NetworkBody([vector_spec(2), goal_entities], 8, 1)
    assert str(info.value) == ("observation 'targets' is a variable_length goal signal; goal "
                               "signals must be vector or visual observations")


def test_an_unknown_kind_or_conditioning_is_refused():
    odd = ObservationSpec((3,), "lidar")
    object.__setattr__(odd, "kind", "point_cloud")
    with pytest.raises(ValueError) as info:
        NetworkBody([odd], 8, 1)
    assert str(info.value) == ("observation 'lidar' is of kind 'point_cloud'; the networks take "
                               "vector, visual and variable_length observations")
    with pytest.raises(ValueError, match="unknown goal_conditioning_type 'film'; expected one "
                                         "of hyper, none"):
        NetworkBody([vector_spec(2)], 8, 1, goal_conditioning="film")


def test_checkpoint_names_of_plain_bodies_are_unchanged():
    # Adding entities and goals must not rename a plain body's variables (old checkpoints).
    body = NetworkBody([vector_spec(3)], 8, 2)
    paths = sorted(v.path for v in body.weights)
    assert all(p.split("/")[-2].startswith(("hidden_", "vector_input_", "normalizer"))
               for p in paths), paths
    assert len(keras.tree.flatten(body.trainable_variables)) == 4
