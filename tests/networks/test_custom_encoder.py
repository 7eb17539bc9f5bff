"""network_settings.encoder: a user's Keras layer trains, checkpoints, resumes and exports
through the contract; what cannot work is one line."""
from __future__ import annotations

import json
import os
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tftrainers.cli import evaluate_main, export_main, learn_main
from tftrainers.envs import make
from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from tftrainers.evaluate import evaluate, make_policy
from tftrainers.export import export_keras, export_onnx, export_savedmodel, export_tflite
from tftrainers.networks import Critic, NetworkBody
from tftrainers.networks.custom_encoder import EncoderError, UserEncoder
from tftrainers.settings import ConfigError, NetworkSettings, RunOptions
from tftrainers.trainers.policy import Policy

from export.helpers import (contract_feeds, deterministic_names, keras_deterministic,
                            random_inputs)
from trainers.helpers import drive, make_trainer, trainer_settings, variables
# Under the name the configs use, so that the module is imported once.
from tests.networks.grid_encoders import CellConv

ENCODER = "tests.networks.grid_encoders:CellConv"
# GridWorld's 20x20 image through CellConv. 30k steps, seed 2: mean training reward 0.42
# (-0.23 at 5k steps), 32 s alone on 2 cores. Scored over 200 episodes (one episode's
# return has a spread of about 1, so 40 would leave +-0.16): random -0.23, trained 0.49.
CONFIG = f"""
behaviors:
  GridWorld:
    trainer_type: ppo
    hyperparameters: {{batch_size: 128, buffer_size: 1024, learning_rate: 1.0e-3,
                      beta: 1.0e-3, num_epoch: 3}}
    network_settings: {{hidden_units: 64, num_layers: 1, encoder: "{ENCODER}"}}
    reward_signals: {{extrinsic: {{gamma: 0.9, strength: 1.0}}}}
    max_steps: 30000
    time_horizon: 5
    summary_freq: 10000
    checkpoint_interval: 30000
env_settings: {{env_path: "builtin:GridWorld", env_args: {{obs: visual}}}}
"""


def visual_spec() -> BehaviorSpec:
    return make("builtin:GridWorld", obs="visual").behavior_specs["GridWorld"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("custom_encoder")
    config = root / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(root),
                       "--seed", "2"]) == 0
    return str(root / "r")


def score(policy_name, episodes=200, deterministic=False):
    env = make("builtin:GridWorld", seed=11, obs="visual")
    policy = make_policy(policy_name, env, seed=3, deterministic=deterministic)
    (result,) = evaluate(env, policy, episodes=episodes).values()
    return result["mean_reward"]


def test_a_custom_conv_encoder_learns_visual_gridworld(run):
    random, trained = score("random"), score(run)
    assert trained >= random + 0.4, (trained, random)
    with open(os.path.join(run, "configuration.yaml")) as f:
        recorded = yaml.safe_load(f)["behaviors"]["GridWorld"]["network_settings"]
    assert recorded["encoder"] == ENCODER


def test_the_trained_run_exports_every_format_that_acts_alike(run, tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    out = str(tmp_path / "out")
    assert export_main([run, "--output", out, "--format", "keras", "tflite"]) == 0
    capsys.readouterr()
    args = ["builtin:GridWorld", "--env-args", "obs=visual", "--episodes", "12",
            "--deterministic", "--policy"]

    def evaluated(policy):
        assert evaluate_main(args + [policy]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["mean_reward"]
    checkpoint = evaluated(run)
    for path in (os.path.join(run, "GridWorld.onnx"),  # written by training
                 os.path.join(run, "GridWorld", "saved_model"),
                 os.path.join(out, "GridWorld.keras"), os.path.join(out, "GridWorld.tflite")):
        assert evaluated(path) == pytest.approx(checkpoint, abs=1e-6), path


def test_exports_of_a_custom_encoder_match_keras(tmp_path, rng):
    pytest.importorskip("ai_edge_litert")
    from ai_edge_litert.interpreter import Interpreter
    import onnxruntime
    keras.utils.set_random_seed(0)
    policy = Policy(visual_spec(), NetworkSettings(hidden_units=16, num_layers=1,
                                                   encoder=ENCODER), jit_compile=False)
    for variable in policy.actor.trainable_variables:  # actions that depend on the image
        variable.assign(variable + rng.normal(0, 0.3, variable.shape).astype(np.float32))
    obs, masks, memory = random_inputs(policy, 64, rng)
    feeds = contract_feeds(policy.spec, obs, masks, memory)
    names = deterministic_names(policy)
    expected = keras_deterministic(policy, obs, masks, memory)
    assert len(np.unique(expected[names[0]])) > 1
    onnx = onnxruntime.InferenceSession(export_onnx(policy, str(tmp_path / "p.onnx")))
    saved = tf.saved_model.load(export_savedmodel(policy, str(tmp_path / "sm"), 1))
    import tftrainers.export.keras_export  # noqa: F401
    loaded = keras.models.load_model(export_keras(policy, str(tmp_path / "p.keras")))
    lite = Interpreter(model_path=export_tflite(policy, str(tmp_path / "p.tflite")))
    outputs = {
        "onnx": dict(zip(names, onnx.run(names, feeds))),
        "savedmodel": saved.signatures["serving_default"](
            **{k: tf.constant(v) for k, v in feeds.items()}),
        "keras": loaded({k: tf.constant(v) for k, v in feeds.items()}),
        "tflite": lite.get_signature_runner()(**feeds),
    }
    for source, out in outputs.items():
        for name in names:
            np.testing.assert_array_equal(np.asarray(out[name]), expected[name], source)


def test_checkpoints_hold_the_encoder_and_resume_restores_it(tmp_path):
    env = make("builtin:GridWorld", seed=0, num_areas=4, obs="visual")
    env.reset()
    settings = trainer_settings("GridWorld", network_settings={"encoder": ENCODER},
                                max_steps=10000)
    trainer = make_trainer(tmp_path, env, "GridWorld", settings)
    # variables()' order; Keras names a variable by its own layer (cell_conv_N/...)
    paths = [f"{key}/{getattr(v, 'path', v.name)}"
             for key, obj in sorted(trainer.trackables().items()) for v in obj.variables]
    fresh = {name: value for (name, value), path in zip(variables(trainer), paths)
             if "cell_conv" in path}
    owners = {path.split("/")[0] for path in paths if "cell_conv" in path}
    assert owners == {"actor", "critic"}, paths  # each network has its own
    drive(env, trainer, 60)  # 240 steps: updates after 128
    trainer.save()
    saved = variables(trainer)
    restored = make_trainer(tmp_path, env, "GridWorld", settings)
    restored.restore_latest()
    assert restored.step == trainer.step
    for (name, want), (_, got) in zip(saved, variables(restored)):
        np.testing.assert_array_equal(got, want, err_msg=name)
    changed = [name for name, value in saved if name in fresh
               and not np.array_equal(value, fresh[name])]
    assert changed, "the encoder's weights did not train"


def test_an_encoder_onnx_cannot_hold_is_one_warning_and_checkpoints_stay(tmp_path, capsys):
    env = make("builtin:GridWorld", seed=0, num_areas=2, obs="visual")
    env.reset()
    settings = trainer_settings(
        "GridWorld", network_settings={"encoder": "tests.networks.grid_encoders:Bessel"})
    lines = []
    trainer = make_trainer(tmp_path, env, "GridWorld", settings, log=lines.append,
                           jit_compile=False)
    drive(env, trainer, 2)
    assert trainer.save() and trainer.save() is None  # once per step
    trainer.step += 1
    trainer.save()
    behavior_dir = tmp_path / "GridWorld"
    assert len(list((behavior_dir / "saved_model").iterdir())) == 2
    assert not list(behavior_dir.glob("*.onnx"))
    warnings = [line for line in lines if "no ONNX export" in line]
    assert len(warnings) == 1, lines
    assert "could not convert BesselI0e" in warnings[0] and "bessel" in warnings[0]
    assert "SavedModel exports go on" in warnings[0]
    acting = [line for line in lines if "act call runs in TensorFlow" in line]
    assert len(acting) == 1 and "user_encoder_0" in acting[0]


def test_a_one_argument_factory_sees_every_observation():
    spec = BehaviorSpec((ObservationSpec((20, 20, 3), "camera", ObservationKind.VISUAL),
                         ObservationSpec((6,), "vector")), ActionSpec(2, (3,)))
    body = NetworkBody(spec.observation_specs, 16, 1, normalize=True,
                       encoder="tests.networks.grid_encoders:cell_conv_or_builtin")
    camera, vector = body.encoders
    assert isinstance(camera, UserEncoder) and camera.output_size == 32
    assert not isinstance(vector, UserEncoder) and vector.normalizer is not None
    obs = [tf.random.uniform([5, 20, 20, 3]), tf.random.normal([5, 6]) + 4.0]
    body.update_normalization(obs)
    assert float(vector.normalizer.mean.numpy().mean()) > 0.1
    encoding, _ = body(obs)
    assert encoding.shape == (5, 16)


def test_a_layer_object_is_cloned_for_every_network():
    layer = CellConv(filters=4, units=8)
    spec = visual_spec()
    policy = Policy(spec, NetworkSettings(hidden_units=8, num_layers=1, encoder=layer),
                    jit_compile=False)
    critic = Critic(spec.observation_specs, ["extrinsic"], 8, 1, encoder=layer)
    mine, theirs = policy.actor.body.encoders[0].layer, critic.body.encoders[0].layer
    assert mine is not layer and theirs is not layer and mine is not theirs
    assert mine.filters == 4 and not any(w is v for w in mine.weights for v in theirs.weights)


def test_the_working_directory_is_on_the_path(tmp_path, monkeypatch):
    (tmp_path / "my_encoders.py").write_text(textwrap.dedent("""
        import keras
        def small():
            return keras.Sequential([keras.layers.Conv2D(2, 4, strides=4),
                                     keras.layers.Flatten()])
    """))
    monkeypatch.chdir(tmp_path)
    body = NetworkBody(visual_spec().observation_specs, 8, 1, encoder="my_encoders:small")
    assert body.encoders[0].output_size == 2 * 5 * 5


@pytest.mark.parametrize("encoder, message", [
    ("tests.networks.grid_encoders:ListKeeper",
     r"tests.networks.grid_encoders:ListKeeper \(observation 'grid_image'\): a checkpoint "
     r"would "
     r"not save 4 of its 4 weights .*set each one as its own attribute"),
    ("tests.networks.grid_encoders:no_flatten",
     r"returned float32 of shape \(1, 5, 5, 4\); it must return \[batch, features\]"),
    ("no_such_module:Encoder", r"no module 'no_such_module' in the working directory"),
    ("tests.networks.grid_encoders:Missing", r"grid_encoders has no 'Missing'"),
    (lambda a, b: None, r"takes 2 arguments; it must take none .* or one"),
    (lambda: "conv", r"returned str for observation 'grid_image'; it must return a "
                     r"keras.layers.Layer"),
])
def test_encoder_errors_are_one_line(encoder, message):
    with pytest.raises(EncoderError, match=message) as info:
        NetworkBody(visual_spec().observation_specs, 8, 1, encoder=encoder)
    assert len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize("value, message", [
    (3, "network_settings.encoder: 3 is a number"),
    ("SmallConv", "'SmallConv' is not MODULE:NAME"),
])
def test_config_errors_name_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        RunOptions.from_dict({"behaviors": {"B": {"network_settings": {"encoder": value}}}})


def test_learn_cli_says_what_is_wrong_with_the_encoder(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG).replace(ENCODER, "no_such_module:Encoder"))
    with pytest.raises(SystemExit) as info:
        learn_main([str(config), "--run-id", "r", "--results-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "network_settings.encoder: 'no_such_module:Encoder': no module" in err


def test_reward_networks_take_the_encoder_of_their_own_network_settings():
    from tftrainers.rewards.curiosity import CuriosityNetwork
    from tftrainers.rewards.gail import DiscriminatorNetwork
    from tftrainers.rewards.rnd import RNDNetwork
    ns = {"hidden_units": 8, "num_layers": 1, "encoder": ENCODER}
    settings = RunOptions.from_dict({"behaviors": {"GridWorld": {"reward_signals": {
        "extrinsic": {}, "curiosity": {"network_settings": ns},
        "rnd": {"network_settings": ns},
        "gail": {"demo_path": "unused.demo", "network_settings": ns}}}}}
    ).settings_for("GridWorld").reward_signals
    spec = visual_spec()
    bodies = {"curiosity": CuriosityNetwork(spec, settings["curiosity"]).encoder,
              "rnd": RNDNetwork(spec, settings["rnd"].network_settings).body,
              "gail": DiscriminatorNetwork(spec, settings["gail"]).body}
    for name, body in bodies.items():
        assert isinstance(body.encoders[0], UserEncoder), name
        assert isinstance(body.encoders[0].layer, CellConv), name
