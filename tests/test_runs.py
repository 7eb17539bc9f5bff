"""Reading a run folder back: specs, latest policy, and one-line errors."""
import textwrap

import pytest

from tftrainers.checkpoint import CheckpointError
from tftrainers.cli import learn_main
from tftrainers.envs import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec, make
from tftrainers.runs import load_policy, run_behaviors


def test_behavior_spec_round_trip():
    spec = BehaviorSpec((ObservationSpec((8,), "v"),
                         ObservationSpec((20, 20, 3), "img", ObservationKind.VISUAL)),
                        ActionSpec(2, (3, 2)))
    assert BehaviorSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="not a behavior spec"):
        BehaviorSpec.from_dict({"observations": []})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    config = root / "c.yaml"
    config.write_text(textwrap.dedent("""
        behaviors:
          Basic:
            hyperparameters: {batch_size: 32, buffer_size: 64}
            network_settings: {hidden_units: 8, num_layers: 1}
            max_steps: 200
            time_horizon: 8
        env_settings: {env_path: "builtin:Basic"}
        """))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(root)]) == 0
    return str(root / "r")


def test_load_policy_without_an_env(run):
    assert run_behaviors(run) == ["Basic"]
    policy = load_policy(run, "Basic", deterministic=True)
    env = make("builtin:Basic", num_areas=3)
    env.reset()
    _, actions = policy.make_actor("tensorflow").act(env.get_steps("Basic")[0])
    assert actions.discrete.shape == (3, 1)


def test_load_policy_errors_name_the_problem(run, tmp_path):
    with pytest.raises(CheckpointError, match=r"no behavior 'Ball3D'; the run has Basic"):
        load_policy(run, "Ball3D")
    grid = make("builtin:GridWorld").behavior_specs["GridWorld"]
    with pytest.raises(CheckpointError, match=r"behavior 'Basic' does not fit the environment: "
                       r"observation 0 \('grid'\): the checkpoint has vector shape \[20\], "
                       r"the environment has vector shape \[75\]"):
        load_policy(run, "Basic", spec=grid)
    with pytest.raises(CheckpointError, match=r"not a training run"):
        load_policy(str(tmp_path), "Basic")


def test_settings_difference_names_gail_inputs_that_change_the_network():
    from tftrainers.runs import settings_difference
    from tftrainers.settings import RunOptions

    def settings(**gail):
        signal = {"demo_path": "x.demo", "use_actions": True, **gail}
        return RunOptions.from_dict({"behaviors": {"B": {"reward_signals": {
            "extrinsic": {}, "gail": signal}}}}).settings_for("B")
    assert settings_difference(settings(), settings(strength=0.5)) is None  # no new shapes
    assert settings_difference(settings(), settings(use_next_obs=True)) == (
        "reward_signals.gail.use_next_obs: the checkpoint has false, the config has true")
    assert settings_difference(settings(use_vail=True), settings()) == (
        "reward_signals.gail.use_vail: the checkpoint has true, the config has false")
    assert settings_difference(settings(), settings(use_next_obs=True),
                               reward_networks=False) is None  # --initialize-from: policy only
