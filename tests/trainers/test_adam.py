"""FusedAdam against Keras' Adam and tf.clip_by_global_norm, step by step."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.tf_utils.adam import FusedAdam


def make_variables(seed):
    rng = np.random.default_rng(seed)
    shapes = [(3, 4), (4,), (4, 2), (), (2,)]
    return [tf.Variable(rng.normal(size=s).astype(np.float32)) for s in shapes]


def random_gradients(rng, variables, scale):
    return [tf.constant(rng.normal(scale=scale, size=v.shape).astype(np.float32))
            for v in variables]


@pytest.mark.parametrize("clipnorm", [None, 0.5])
def test_matches_keras_adam_over_several_steps(clipnorm):
    ours, theirs = make_variables(0), make_variables(0)
    fused = FusedAdam(ours, learning_rate=1e-2, epsilon=1e-8, global_clipnorm=clipnorm)
    reference = keras.optimizers.Adam(learning_rate=1e-2, epsilon=1e-8)
    reference.build(theirs)
    rng = np.random.default_rng(1)
    for step in range(6):
        if step == 3:  # a schedule changes the rate between steps
            fused.learning_rate.assign(4e-3)
            reference.learning_rate.assign(4e-3)
        grads = random_gradients(rng, ours, scale=3.0)  # norm well above 0.5: clipping bites
        fused.apply_gradients(zip(grads, ours))
        if clipnorm is not None:
            grads, _ = tf.clip_by_global_norm(grads, clipnorm)
        reference.apply_gradients(zip(grads, theirs))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert int(fused.iterations.numpy()) == 6


def test_compiled_step_matches_eager_step():
    eager_vars, graph_vars = make_variables(2), make_variables(2)
    eager = FusedAdam(eager_vars, learning_rate=1e-3, global_clipnorm=1.0)
    graph = FusedAdam(graph_vars, learning_rate=1e-3, global_clipnorm=1.0)
    grads = random_gradients(np.random.default_rng(3), eager_vars, scale=1.0)

    @tf.function(jit_compile=True)
    def step(*g):
        graph.apply_gradients(zip(g, graph_vars))
    for _ in range(3):
        eager.apply_gradients(zip(grads, eager_vars))
        step(*grads)
    for a, b in zip(eager_vars, graph_vars):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)


def test_a_variable_without_gradient_stays_put():
    variables = make_variables(4)
    before = variables[1].numpy().copy()
    adam = FusedAdam(variables, learning_rate=0.1)
    grads = random_gradients(np.random.default_rng(5), variables, scale=1.0)
    grads[1] = None
    for _ in range(3):
        adam.apply_gradients(zip(grads, variables))
    np.testing.assert_array_equal(variables[1].numpy(), before)
    assert not np.allclose(variables[0].numpy(), make_variables(4)[0].numpy())


def test_other_variables_are_refused_with_a_message():
    variables = make_variables(6)
    adam = FusedAdam(variables, learning_rate=0.1, name="policy_adam")
    grads = random_gradients(np.random.default_rng(7), variables, scale=1.0)
    with pytest.raises(ValueError, match="policy_adam: apply_gradients needs the 5 variables"):
        adam.apply_gradients(zip(grads[::-1], variables[::-1]))


def test_checkpoint_round_trip_restores_moments_and_step(tmp_path):
    variables = make_variables(8)
    adam = FusedAdam(variables, learning_rate=0.1)
    grads = random_gradients(np.random.default_rng(9), variables, scale=1.0)
    adam.apply_gradients(zip(grads, variables))
    path = tf.train.Checkpoint(optimizer=adam).write(str(tmp_path / "ckpt"))
    fresh = FusedAdam(make_variables(8), learning_rate=0.5)
    tf.train.Checkpoint(optimizer=fresh).read(path).assert_consumed()
    for a, b in zip(adam.variables, fresh.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(fresh.iterations.numpy()) == 1
