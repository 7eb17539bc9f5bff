"""MA-POCA's attention critic: absent members and member order change nothing."""
import numpy as np
import pytest
import tensorflow as tf

from tftrainers.envs.base import ActionSpec, ObservationKind, ObservationSpec
from tftrainers.networks import POCACritic, ResidualSelfAttention

SPECS = [ObservationSpec((5,), "vec"), ObservationSpec((20, 20, 3), "cam", ObservationKind.VISUAL)]
ACTIONS = ActionSpec(2, (3, 2))


@pytest.fixture(scope="module")
def critic():
    critic = POCACritic(SPECS, ACTIONS, ["extrinsic", "curiosity"], hidden_units=32,
                        num_layers=2)
    critic.observe_group_size(3)
    return critic


def group(rng, batch=4, members=3):
    obs = [rng.normal(size=(batch, members, 5)).astype(np.float32),
           rng.random((batch, members, 20, 20, 3)).astype(np.float32)]
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]], np.float32)[:batch]
    return obs, mask


def actions(rng, batch=4, members=2):
    return (rng.normal(size=(batch, members, 2)).astype(np.float32),
            np.stack([rng.integers(0, 3, (batch, members)), rng.integers(0, 2, (batch, members))],
                     axis=-1).astype(np.int32))


def test_an_absent_member_changes_nothing(critic):
    rng = np.random.default_rng(0)
    obs, mask = group(rng)
    cont, disc = actions(rng)
    values = critic.value(obs, mask)
    baselines = critic.baseline([o[:, 0] for o in obs], [o[:, 1:] for o in obs], cont, disc,
                                mask[:, 1:])
    # Whatever an absent slot holds (row 1's third member, row 2's second and third).
    garbage = [o.copy() for o in obs]
    garbage[0][1, 2], garbage[0][2, 1:] = 1e3, -7.0
    garbage[1][2, 1:] = 0.9
    cont2, disc2 = cont.copy(), disc.copy()
    cont2[2], disc2[1, 1] = 5.0, [2, 1]
    for name in values:
        np.testing.assert_array_equal(critic.value(garbage, mask)[name], values[name])
        np.testing.assert_array_equal(critic.baseline(
            [o[:, 0] for o in garbage], [o[:, 1:] for o in garbage], cont2, disc2,
            mask[:, 1:])[name], baselines[name])
    # A present member does change V, and its action changes the baseline.
    moved = [o.copy() for o in obs]
    moved[0][0, 2] += 1.0
    assert critic.value(moved, mask)["extrinsic"][0] != values["extrinsic"][0]
    cont3 = cont.copy()
    cont3[0, 0] += 1.0
    assert critic.baseline([o[:, 0] for o in obs], [o[:, 1:] for o in obs], cont3, disc,
                           mask[:, 1:])["extrinsic"][0] != baselines["extrinsic"][0]


def test_member_order_changes_nothing(critic):
    rng = np.random.default_rng(1)
    obs, mask = group(rng)
    cont, disc = actions(rng)
    values = critic.value(obs, mask)
    order = [2, 0, 1]
    shuffled = critic.value([o[:, order] for o in obs], mask[:, order])
    swap = [1, 0]
    baselines = critic.baseline([o[:, 0] for o in obs], [o[:, 1:] for o in obs], cont, disc,
                                np.ones((4, 2), np.float32))
    swapped = critic.baseline([o[:, 0] for o in obs], [o[:, 1:][:, swap] for o in obs],
                              cont[:, swap], disc[:, swap], np.ones((4, 2), np.float32))
    for name in values:
        np.testing.assert_allclose(shuffled[name], values[name], atol=1e-5)
        np.testing.assert_allclose(swapped[name], baselines[name], atol=1e-5)


def test_a_lone_member_and_the_member_count():
    critic = POCACritic(SPECS[:1], ACTIONS, ["extrinsic"], hidden_units=8, num_layers=1)
    obs = [np.ones((1, 2, 5), np.float32)]
    one = critic.value(obs, np.array([[1, 0]], np.float32))["extrinsic"]
    # The count 2n/max_n - 1 is an input: the same lone member reads differently once
    # groups of three have been seen.
    critic.observe_group_size(3)
    assert float(critic.max_members.numpy()) == 3.0
    critic.observe_group_size(2)  # never lowered
    assert float(critic.max_members.numpy()) == 3.0
    assert critic.value(obs, np.array([[1, 0]], np.float32))["extrinsic"] != one
    # A baseline with no teammate present is the member alone.
    alone = critic.baseline([obs[0][:, 0]], [obs[0][:, 1:]], np.zeros((1, 1, 2), np.float32),
                            np.zeros((1, 1, 2), np.int32), np.zeros((1, 1), np.float32))
    assert np.isfinite(alone["extrinsic"]).all()


@pytest.mark.parametrize("memory_size", [0, 8])
def test_the_member_count_goes_straight_to_the_heads(memory_size):
    # ML-Agents' MultiAgentNetworkBody appends the count after its hidden layers (and LSTM):
    # the heads read it as one more input. Two members with the same observation pool to
    # what one of them pools to, so V(both) - V(one alone) is exactly the heads' count
    # weight times the count's change (2n/max_n - 1: 1 for two of two, 0 for one).
    critic = POCACritic(SPECS[:1], ACTIONS, ["extrinsic"], hidden_units=8, num_layers=1,
                        memory_size=memory_size)
    critic.observe_group_size(2)
    obs = [np.full((1, 2, 5), 0.3, np.float32)]
    both = critic.value(obs, np.array([[1, 1]], np.float32))["extrinsic"]
    one = critic.value(obs, np.array([[1, 0]], np.float32))["extrinsic"]
    weight = critic.value_heads.value_extrinsic.kernel.numpy()[-1, 0]
    np.testing.assert_allclose(float(both[0] - one[0]), weight, rtol=1e-4, atol=1e-6)


def test_the_critic_starts_as_small_as_ml_agents():
    # ML-Agents starts the attention and entity layers with std sqrt(0.125 / units) and the
    # layers after the attention with std sqrt(0.125 / units) / sqrt(fan_in), so V and b_i
    # start near 0. With hidden_units 64 and one-feature members those stds are 0.0442 and
    # 0.0055, and what the observations add to V starts within 0.01 of nothing: V is the
    # heads' count weight (the count is 1 for a full group).
    units = 64
    critic = POCACritic([ObservationSpec((1,), "goal")], ActionSpec(0, (2,)), ["extrinsic"],
                        hidden_units=units, num_layers=2)
    for layer, std in ((critic.attention.query, (0.125 / units) ** 0.5),
                       (critic.obs_embedding.dense, (0.125 / units) ** 0.5),
                       (critic.hidden_layers[1], (0.125 / units) ** 0.5 / units ** 0.5)):
        kernel = layer.kernel.numpy()
        # A sample std of n draws is off by about 1 / sqrt(2 n): four of those (the entity
        # layer of a one-feature member has only 64 weights), and never tighter than 10%.
        tolerance = max(0.1, 4 / np.sqrt(2 * kernel.size))
        assert abs(float(np.std(kernel)) / std - 1) < tolerance, (layer.name, kernel.size)
    critic.observe_group_size(2)
    obs = [np.array([[[1.0], [1.0]], [[-1.0], [-1.0]]], np.float32)]
    values = critic.value(obs, np.ones((2, 2), np.float32))["extrinsic"].numpy()
    count_weight = critic.value_heads.value_extrinsic.kernel.numpy()[-1, 0]
    np.testing.assert_allclose(values, count_weight, atol=0.01)


def test_heads_must_divide_the_units():
    with pytest.raises(ValueError, match="do not split into 4 heads"):
        ResidualSelfAttention(30)


def test_memory_over_sequences_equals_stepping_one_step_at_a_time():
    critic = POCACritic(SPECS, ACTIONS, ["extrinsic"], hidden_units=16, num_layers=1,
                        memory_size=8)
    critic.observe_group_size(3)
    rng = np.random.default_rng(2)
    # Two sequences of three steps, rows [s0 t0..t2, s1 t0..t2]; members come and go.
    obs, _ = group(rng, batch=6)
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 1], [1, 1, 1], [1, 1, 1]],
                    np.float32)
    cont, disc = actions(rng, batch=6)
    start = rng.normal(0, 0.5, (2, 8)).astype(np.float32)
    own, team = [o[:, 0] for o in obs], [o[:, 1:] for o in obs]
    for features, whole in (
            (critic.value_features(obs, mask), critic.value(obs, mask, start, 3)),
            (critic.baseline_features(own, team, cont, disc, mask[:, 1:]),
             critic.baseline(own, team, cont, disc, mask[:, 1:], start, 3))):
        traced, states = critic.trace(features, start, 3)
        np.testing.assert_allclose(whole["extrinsic"], np.reshape(traced["extrinsic"], -1),
                                   atol=1e-5)
        np.testing.assert_array_equal(states[:, 0], start)
        for t in range(3):  # one step from the state before it gives that step's value
            stepped = critic.heads(tf.gather(features, [t, 3 + t]), states[:, t], 1)
            np.testing.assert_allclose(stepped["extrinsic"], traced["extrinsic"][:, t],
                                       atol=1e-5)
    # The memory carries what came before: a different start changes the values.
    other = critic.value(obs, mask, start + 1.0, 3)["extrinsic"]
    assert not np.allclose(other, critic.value(obs, mask, start, 3)["extrinsic"])


def test_critic_memory_size_must_be_even():
    with pytest.raises(ValueError, match="positive even number"):
        POCACritic(SPECS[:1], ACTIONS, ["extrinsic"], hidden_units=8, memory_size=7)


def test_value_and_baseline_in_one_call_match_the_separate_calls(critic):
    # The update and the targets compute both from one encoding of the members.
    rng = np.random.default_rng(3)
    obs, mask = group(rng)
    cont, disc = actions(rng)
    own, team = [o[:, 0] for o in obs], [o[:, 1:] for o in obs]
    values, baselines = critic.value_and_baseline(own, team, cont, disc, mask[:, 1:])
    separate_values = critic.value(obs, mask)
    separate_baselines = critic.baseline(own, team, cont, disc, mask[:, 1:])
    for name in ("extrinsic", "curiosity"):
        np.testing.assert_allclose(values[name], separate_values[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(baselines[name], separate_baselines[name], rtol=1e-5,
                                   atol=1e-6)


def test_value_and_baseline_in_one_call_match_the_separate_calls_with_memory():
    critic = POCACritic(SPECS, ACTIONS, ["extrinsic"], hidden_units=16, num_layers=1,
                        memory_size=8)
    critic.observe_group_size(3)
    rng = np.random.default_rng(4)
    obs, _ = group(rng, batch=6)  # two sequences of three steps; members come and go
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 1], [1, 1, 1], [1, 1, 1]],
                    np.float32)
    cont, disc = actions(rng, batch=6)
    own, team = [o[:, 0] for o in obs], [o[:, 1:] for o in obs]
    value_memory, baseline_memory = rng.normal(0, 0.5, (2, 2, 8)).astype(np.float32)
    values, baselines = critic.value_and_baseline(own, team, cont, disc, mask[:, 1:],
                                                  value_memory, baseline_memory, 3)
    np.testing.assert_allclose(values["extrinsic"],
                               critic.value(obs, mask, value_memory, 3)["extrinsic"],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        baselines["extrinsic"],
        critic.baseline(own, team, cont, disc, mask[:, 1:], baseline_memory, 3)["extrinsic"],
        rtol=1e-5, atol=1e-6)
