"""The built-ins for variable-length observations (Sorter) and goal signals (BasicGoal), and
observation types in behavior specs."""
import numpy as np
import pytest

from tftrainers.envs import ActionTuple, check_env, make
from tftrainers.envs.base import BehaviorSpec, ObservationKind, ObservationType
from tftrainers.envs.builtin.sorter import MAX_TILES, START


def discrete(*actions):
    a = np.asarray(actions, np.int32).reshape(-1, 1)
    return ActionTuple(np.zeros((len(a), 0), np.float32), a)


@pytest.mark.parametrize("env_id", ["builtin:Sorter", "builtin:BasicGoal"])
def test_they_pass_the_checker(env_id):
    (counts,) = check_env(make(env_id, seed=1, num_areas=3), n_steps=400).values()
    assert counts["decisions"] > 0 and counts["episodes"] > 0


def test_specs_name_the_kind_and_type():
    (sorter,) = make("builtin:Sorter").behavior_specs.values()
    assert [(o.name, o.shape, o.kind) for o in sorter.observation_specs] == [
        ("position", (1,), ObservationKind.VECTOR),
        ("tiles", (MAX_TILES, MAX_TILES + 1), ObservationKind.VARIABLE_LENGTH)]
    (goal,) = make("builtin:BasicGoal").behavior_specs.values()
    assert [o.observation_type for o in goal.observation_specs] == [
        ObservationType.DEFAULT, ObservationType.GOAL_SIGNAL]


def test_behavior_spec_files_carry_the_observation_type():
    (spec,) = make("builtin:BasicGoal").behavior_specs.values()
    data = spec.to_dict()
    assert data["observations"][1]["observation_type"] == "goal_signal"
    assert BehaviorSpec.from_dict(data) == spec
    # A file written before goal signals existed has no observation_type: default.
    for o in data["observations"]:
        del o["observation_type"]
    old = BehaviorSpec.from_dict(data)
    assert [o.observation_type for o in old.observation_specs] == [ObservationType.DEFAULT] * 2


def test_sorter_tiles_visited_in_order_each_pay_once():
    env = make("builtin:Sorter", num_areas=1, seed=4)
    env.reset()
    decision, _ = env.get_steps("Sorter")
    tiles = decision.obs[1][0]
    present = np.abs(tiles).max(axis=1) > 0
    count = int(present.sum())
    assert 1 <= count <= MAX_TILES
    # numbers 1..count, one each; offsets put every tile off the start cell
    numbers = tiles[present, :MAX_TILES].argmax(axis=1) + 1
    assert sorted(numbers) == list(range(1, count + 1))
    assert np.all(tiles[present, MAX_TILES] != 0) and np.all(tiles[~present] == 0)
    total, steps, hits = 0.0, 0, 0
    while True:
        env.set_actions("Sorter", env.heuristic("Sorter", decision))
        env.step()
        decision, terminal = env.get_steps("Sorter")
        steps += 1
        step = terminal if len(terminal) else decision
        total += float(step.reward[0])
        hits += float(step.reward[0]) > 0
        if len(terminal):
            assert not terminal.interrupted[0]
            assert np.all(terminal.obs[1] == 0)  # every tile visited: all rows absent
            break
        # a visited tile leaves the buffer
        assert int((np.abs(decision.obs[1][0]).max(axis=1) > 0).sum()) == count - hits
    assert hits == count
    assert total == pytest.approx(count - 0.01 * steps, abs=1e-5)


def test_sorter_a_tile_out_of_order_pays_nothing():
    env = make("builtin:Sorter", num_areas=1, seed=0)
    env.reset()
    # Put tile 2 right of the start and tile 1 left of it, by hand.
    env.tile_cell[0] = [START + 1, START - 2, -1, -1]
    env.tile_number[0] = [2, 1, -1, -1]
    env.set_actions("Sorter", discrete(2))  # right, onto tile 2: out of order
    env.step()
    decision, _ = env.get_steps("Sorter")
    assert decision.reward[0] == pytest.approx(-0.01)
    np.testing.assert_allclose(decision.obs[1][0][:2, MAX_TILES], [0.0, -0.3], atol=1e-6)
    for action, reward in ((1, -0.01), (1, -0.01), (1, 0.99), (2, -0.01), (2, -0.01)):
        env.set_actions("Sorter", discrete(action))
        env.step()
        decision, terminal = env.get_steps("Sorter")
        assert not len(terminal) and decision.reward[0] == pytest.approx(reward)
    # after tile 1 at START - 2, back right to tile 2 at START + 1: three more steps
    env.set_actions("Sorter", discrete(2))
    env.step()
    _, terminal = env.get_steps("Sorter")
    assert len(terminal) and terminal.reward[0] == pytest.approx(0.99)


@pytest.mark.parametrize("goal,moves,reward", [(0, 1, 0.95), (1, 2, 0.95), (0, 2, -1.05)])
def test_basic_goal_pays_the_signalled_goal(goal, moves, reward):
    env = make("builtin:BasicGoal", num_areas=1)
    env.reset()
    env.goal[0] = goal
    total = 0.0
    for _ in range(5):
        env.set_actions("BasicGoal", discrete(moves))
        env.step()
        decision, terminal = env.get_steps("BasicGoal")
        total += float((terminal if len(terminal) else decision).reward[0])
    assert len(terminal) and total == pytest.approx(reward, abs=1e-6)


def test_an_observation_we_cannot_train_on_is_one_line_at_the_cli(tmp_path, monkeypatch,
                                                                  capsys):
    from tftrainers.cli import learn_main
    from tftrainers.envs.base import ObservationSpec
    from tftrainers.envs.builtin import BUILTIN_ENVS
    from tftrainers.envs.builtin.basic_goal import BasicGoalEnv

    class TargetsAsGoal(BasicGoalEnv):  # a game sending its goal as a BufferSensor
        name = "TargetsAsGoal"

        def observation_specs(self):
            return [ObservationSpec((21,), "position"),
                    ObservationSpec((2, 3), "targets", ObservationKind.VARIABLE_LENGTH,
                                    ObservationType.GOAL_SIGNAL)]

    monkeypatch.setitem(BUILTIN_ENVS, "TargetsAsGoal", TargetsAsGoal)
    config = tmp_path / "c.yaml"
    config.write_text("behaviors:\n  TargetsAsGoal: {trainer_type: ppo, max_steps: 100}\n")
    with pytest.raises(SystemExit) as info:
        learn_main([str(config), "--env", "builtin:TargetsAsGoal", "--run-id", "r",
                    "--results-dir", str(tmp_path / "results")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("observation 'targets' is a variable_length goal signal; goal "
                            "signals must be vector or visual observations"), err
    assert "Traceback" not in "\n".join(err)
