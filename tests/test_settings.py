"""Tests for tftrainers.settings: ML-Agents keys/defaults, strict loading, round trip."""
import dataclasses
import textwrap

import pytest
import yaml

from tftrainers import settings as S
from tftrainers.settings import (BCSettings, ConfigError, CuriositySettings, GAILSettings,
                                 MemorySettings, NetworkSettings, POCASettings, PPOSettings,
                                 RunOptions, TrainerSettings,
                                 load_run_options)

# The 3DBall config shipped with ML-Agents (config/ppo/3DBall.yaml), verbatim.
BALL3D = """
behaviors:
  3DBall:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 12000
      learning_rate: 3.0e-4
      beta: 0.001
      epsilon: 0.2
      lambd: 0.99
      num_epoch: 3
      learning_rate_schedule: linear
    network_settings:
      normalize: true
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
    reward_signals:
      extrinsic:
        gamma: 0.99
        strength: 1.0
    keep_checkpoints: 5
    max_steps: 500000
    time_horizon: 1000
    summary_freq: 12000
"""


def write(tmp_path, text, name="x.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def load(tmp_path, text, overrides=None):
    return load_run_options(write(tmp_path, text), overrides)


def load_error(tmp_path, text, overrides=None):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_run_options(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def ball(hyper="", behavior="", top=""):
    """A small valid config with extra lines in hyperparameters/behavior/top level."""
    return ("behaviors:\n  Ball3D:\n    trainer_type: ppo\n    hyperparameters:\n"
            "      batch_size: 64\n" + textwrap.indent(textwrap.dedent(hyper), " " * 6)
            + textwrap.indent(textwrap.dedent(behavior), " " * 4) + textwrap.dedent(top))


# ------------------------------------------------------------------------------ defaults


def test_defaults_match_ml_agents():
    t = TrainerSettings()
    assert t.trainer_type == "ppo"
    assert isinstance(t.hyperparameters, PPOSettings)
    h = t.hyperparameters
    assert (h.batch_size, h.buffer_size, h.learning_rate, h.beta, h.epsilon, h.lambd,
            h.num_epoch) == (1024, 10240, 3e-4, 5e-3, 0.2, 0.95, 3)
    assert (h.learning_rate_schedule, h.beta_schedule, h.epsilon_schedule) == ("linear",) * 3
    assert h.shared_critic is False
    assert (t.keep_checkpoints, t.checkpoint_interval, t.max_steps, t.time_horizon,
            t.summary_freq, t.threaded) == (5, 500000, 500000, 64, 50000, False)
    assert t.init_path is None and t.self_play is None and t.behavioral_cloning is None
    assert t.reward_signals == {"extrinsic": S.ExtrinsicSettings(gamma=0.99, strength=1.0)}
    n = t.network_settings
    assert (n.normalize, n.hidden_units, n.num_layers, n.vis_encode_type, n.memory,
            n.goal_conditioning_type, n.deterministic) == (
                False, 128, 2, "simple", None, "hyper", False)
    assert MemorySettings() == MemorySettings(sequence_length=64, memory_size=128)
    assert CuriositySettings().learning_rate == 3e-4
    assert S.RNDSettings().learning_rate == 1e-4
    g = GAILSettings(demo_path="d.demo")
    assert (g.gamma, g.strength, g.learning_rate, g.use_actions,
            g.use_vail) == (0.99, 1.0, 3e-4, False, False)
    bc = S.BehavioralCloningSettings(demo_path="d.demo")
    assert (bc.steps, bc.strength, bc.samples_per_update, bc.num_epoch, bc.batch_size) == (
        0, 1.0, 0, None, None)
    e = S.EnvironmentSettings()
    assert (e.env_path, e.env_args, e.base_port, e.num_envs, e.num_areas, e.seed,
            e.max_lifetime_restarts, e.restarts_rate_limit_n,
            e.restarts_rate_limit_period_s) == (None, None, 5005, 1, None, -1, 10, 1, 60)
    g = S.EngineSettings()
    assert (g.width, g.height, g.quality_level, g.time_scale, g.target_frame_rate,
            g.capture_frame_rate, g.no_graphics) == (84, 84, 5, 20, -1, 60, False)
    c = S.CheckpointSettings()
    assert (c.run_id, c.initialize_from, c.load_model, c.resume, c.force, c.train_model,
            c.inference, c.results_dir) == ("ppo", None, False, False, False, False, False,
                                            "results")
    r = RunOptions()
    assert r.behaviors == {} and r.default_settings is None and r.debug is False
    assert r.tf_settings.device is None and r.environment_parameters is None


def test_hyperparameter_class_and_schedules_follow_the_trainer():
    assert isinstance(TrainerSettings(trainer_type="poca").hyperparameters, POCASettings)
    assert isinstance(TrainerSettings(trainer_type="bc").hyperparameters, BCSettings)
    assert not hasattr(POCASettings(), "shared_critic")
    assert POCASettings().leaver_bootstrap == "remaining"
    team = RunOptions.from_dict({"behaviors": {"Team": {
        "trainer_type": "poca", "hyperparameters": {"leaver_bootstrap": "group"}}}})
    assert team.behaviors["Team"].hyperparameters.leaver_bootstrap == "group"
    assert [f.name for f in dataclasses.fields(BCSettings)] == [
        "batch_size", "buffer_size", "num_epoch", "batches_per_epoch", "learning_rate",
        "learning_rate_schedule", "teacher", "brain_to_imitate", "demo_path", "mode",
        "teacher_agents", "steps", "continuous_loss"]
    h = PPOSettings(learning_rate_schedule="constant")
    assert (h.beta_schedule, h.epsilon_schedule) == ("constant", "constant")
    h = PPOSettings(learning_rate_schedule="constant", beta_schedule="linear")
    assert (h.beta_schedule, h.epsilon_schedule) == ("linear", "constant")


def test_no_shared_mutable_defaults():
    a, b = TrainerSettings(), TrainerSettings()
    a.reward_signals["curiosity"] = CuriositySettings()
    a.network_settings.hidden_units = 7
    assert b.reward_signals.keys() == {"extrinsic"}
    assert b.network_settings.hidden_units == 128
    assert RunOptions().behaviors is not RunOptions().behaviors


def test_every_field_has_one_line_help():
    classes = [c for c in vars(S).values()
               if isinstance(c, type) and dataclasses.is_dataclass(c) and c is not S._Settings]
    assert len(classes) >= 17
    for cls in classes:
        helps = cls.field_help()
        assert helps.keys() == {f.name for f in dataclasses.fields(cls)}
        for name, text in helps.items():
            assert text.strip() and "\n" not in text, (cls.__name__, name)


# ------------------------------------------------------------------------------- loading


def test_ml_agents_3dball_config_loads_unchanged(tmp_path):
    options = load(tmp_path, BALL3D)
    t = options.behaviors["3DBall"]
    h = t.hyperparameters
    assert isinstance(h, PPOSettings)
    assert (h.batch_size, h.buffer_size, h.learning_rate, h.beta, h.epsilon, h.lambd,
            h.num_epoch) == (64, 12000, 3e-4, 0.001, 0.2, 0.99, 3)
    assert (h.learning_rate_schedule, h.beta_schedule, h.epsilon_schedule) == ("linear",) * 3
    assert t.network_settings == NetworkSettings(normalize=True)
    assert t.reward_signals == {"extrinsic": S.ExtrinsicSettings()}
    assert (t.keep_checkpoints, t.max_steps, t.time_horizon, t.summary_freq) == (
        5, 500000, 1000, 12000)
    assert options.settings_for("3DBall") is t
    assert options.checkpoint_settings.run_id == "ppo"


def test_yaml11_number_strings_and_legacy_floats_are_read_as_numbers(tmp_path):
    options = load(tmp_path, ball("learning_rate: 3e-4\nbeta: 5e-3\n",
                                  "max_steps: 5.0e5\ntime_horizon: 1e3\n"))
    t = options.behaviors["Ball3D"]
    assert t.hyperparameters.learning_rate == pytest.approx(3e-4)
    assert isinstance(t.hyperparameters.learning_rate, float)
    assert t.hyperparameters.beta == pytest.approx(5e-3)
    assert t.max_steps == 500000 and isinstance(t.max_steps, int)
    assert t.time_horizon == 1000 and isinstance(t.time_horizon, int)


def test_ints_are_accepted_where_floats_are_expected(tmp_path):
    t = load(tmp_path, ball("learning_rate: 1\nlambd: 1\n")).behaviors["Ball3D"]
    assert t.hyperparameters.learning_rate == 1.0
    assert isinstance(t.hyperparameters.lambd, float)


def test_hyperparameters_are_parsed_after_trainer_type_whatever_the_key_order(tmp_path):
    options = load(tmp_path, """
        behaviors:
          Team:
            hyperparameters: {batch_size: 32, buffer_size: 320}
            trainer_type: poca
          Clone:
            hyperparameters: {batch_size: 16, num_epoch: 5}
            trainer_type: bc
    """)
    assert options.behaviors["Team"].hyperparameters == POCASettings(
        batch_size=32, buffer_size=320)
    assert options.behaviors["Clone"].hyperparameters == BCSettings(batch_size=16, num_epoch=5)


def test_schedules_default_to_learning_rate_schedule_in_files(tmp_path):
    h = load(tmp_path, ball("learning_rate_schedule: constant\nepsilon_schedule: linear\n")
             ).behaviors["Ball3D"].hyperparameters
    assert (h.beta_schedule, h.epsilon_schedule) == ("constant", "linear")


def test_reward_signals_curiosity_rnd_gail_and_deprecated_encoding_size(tmp_path):
    options = load(tmp_path, ball(behavior="""
        reward_signals:
          extrinsic: {gamma: 0.9}
          curiosity: {strength: 0.02, encoding_size: 256}
          rnd: {encoding_size: 32, network_settings: {hidden_units: 16}}
          gail: {demo_path: demos/x.demo, encoding_size: 64, use_actions: true}
        behavioral_cloning: {demo_path: demos/x.demo, strength: 0.5, steps: 150000}
    """))
    signals = options.behaviors["Ball3D"].reward_signals
    assert list(signals) == ["extrinsic", "curiosity", "rnd", "gail"]
    assert signals["extrinsic"] == S.ExtrinsicSettings(gamma=0.9)
    assert isinstance(signals["curiosity"], CuriositySettings)
    assert signals["curiosity"].strength == 0.02
    assert signals["curiosity"].network_settings.hidden_units == 256
    assert not hasattr(signals["curiosity"], "encoding_size")
    # An explicit network_settings.hidden_units wins over the deprecated key.
    assert signals["rnd"].network_settings.hidden_units == 16
    assert signals["gail"].network_settings.hidden_units == 64
    assert signals["gail"].use_actions is True
    bc = options.behaviors["Ball3D"].behavioral_cloning
    assert (bc.demo_path, bc.strength, bc.steps) == ("demos/x.demo", 0.5, 150000)


def test_memory_settings_and_raw_sections(tmp_path):
    options = load(tmp_path, ball(behavior="""
        network_settings: {memory: {memory_size: 256}}
        self_play: {save_steps: 50000, team_change: 200000, window: 10}
    """, top="""
        environment_parameters:
          wall_height:
            curriculum:
              - {name: Lesson0, value: 1.5,
                 completion_criteria: {behavior: Ball3D, measure: progress}}
    """))
    t = options.behaviors["Ball3D"]
    assert t.network_settings.memory == MemorySettings(sequence_length=64, memory_size=256)
    assert t.self_play == S.SelfPlaySettings(save_steps=50000, team_change=200000, window=10)
    assert S.SelfPlaySettings(save_steps=300).team_change == 1500  # ML-Agents' default
    (lesson,) = options.environment_parameters["wall_height"].curriculum
    assert lesson == S.LessonSettings(
        name="Lesson0", value=S.SamplerSettings(sampler_type="constant",
                                                sampler_parameters=S.ConstantSampler(value=1.5)),
        completion_criteria=S.CompletionCriteriaSettings(behavior="Ball3D", measure="progress"))


def test_empty_sections_mean_defaults(tmp_path):
    options = load(tmp_path, "behaviors:\n  Ball3D:\nenv_settings:\n")
    assert options.behaviors["Ball3D"] == TrainerSettings()
    assert options.env_settings == S.EnvironmentSettings()


def test_env_args_mapping_or_key_value_list(tmp_path):
    as_map = load(tmp_path, "behaviors: {}\nenv_settings:\n  env_args: {speed: 2, mode: hard}\n")
    assert as_map.env_settings.env_args == {"speed": 2, "mode": "hard"}
    as_list = load(tmp_path, "behaviors: {}\nenv_settings:\n  env_args: [speed=2, 'q=a=b']\n")
    assert as_list.env_settings.env_args == {"speed": "2", "q": "a=b"}


def test_even_checkpoints_spreads_checkpoints_over_max_steps(tmp_path):
    t = load(tmp_path, ball(behavior="even_checkpoints: true\nmax_steps: 1000\n"
                                     "keep_checkpoints: 4\n")).behaviors["Ball3D"]
    assert t.checkpoint_interval == 250


def test_deprecated_framework_key_is_ignored_with_a_note(tmp_path):
    options = load(tmp_path, ball(behavior="framework: pytorch\n"))
    assert options.behaviors["Ball3D"] == load(tmp_path, ball()).behaviors["Ball3D"]
    assert options.notes == (f"{tmp_path / 'x.yaml'}: behaviors.Ball3D.framework is ignored "
                             f"(ML-Agents deprecated it; TensorFlow is used)",)


# ------------------------------------------------------------------ notes, torch_settings


def test_our_own_configs_load_without_notes(tmp_path):
    assert load(tmp_path, BALL3D).notes == ()
    # ...and so does the configuration.yaml a run writes, whose keys all act here
    options = load(tmp_path, ball(top="env_settings: {num_envs: 2}\n"))
    assert load(tmp_path, options.to_yaml()).notes == ()


def test_keys_without_effect_get_one_note_line_per_reason(tmp_path):
    options = load(tmp_path, ball(behavior="""
        network_settings: {goal_conditioning_type: none}
        reward_signals:
          extrinsic: {network_settings: {hidden_units: 3}}
          curiosity: {network_settings: {goal_conditioning_type: hyper}, encoding_size: 32}
        self_play: {window: 5}
    """, top="""
        env_settings: {env_path: "builtin:Ball3D", base_port: 5006, timeout_wait: 10, seed: 3}
        engine_settings: {no_graphics: true}
        checkpoint_settings: {train_model: false}
        debug: true
    """))
    path = f"{tmp_path / 'x.yaml'}: "
    b = "behaviors.Ball3D."
    assert options.notes == (
        path + f"{b}reward_signals.extrinsic.network_settings is accepted but has no effect "
        f"here: the extrinsic reward has no network (ML-Agents ignores it too)",
        path + f"{b}reward_signals.curiosity.encoding_size is deprecated; read as "
        f"{b}reward_signals.curiosity.network_settings.hidden_units",
        path + "env_settings.base_port is accepted but has no effect here: the port of a Unity "
        "player (a build or the Editor); built-in, gym and pettingzoo environments have none",
        path + "engine_settings is accepted but has no effect here: Unity player settings "
        "(window, quality, time scale, frame rates, graphics), sent to a Unity build or the "
        "Editor; built-in, gym and pettingzoo environments have no player",
        path + "debug is accepted but has no effect here: tftrainers writes no debug log")
    # explicit "off" values (false, null) ask for nothing: no note
    quiet = load(tmp_path, ball(behavior="self_play: null\nbehavioral_cloning: null\n",
                                top="debug: false\nenvironment_parameters: null\n"))
    assert quiet.notes == ()


def test_deterministic_is_noted_while_training_and_used_in_inference(tmp_path):
    text = ball(behavior="network_settings: {deterministic: true}\n")
    assert load(tmp_path, text).notes == (
        f"{tmp_path / 'x.yaml'}: behaviors.Ball3D.network_settings.deterministic has no effect "
        f"while training: it applies with --inference (and tftrainers-evaluate "
        f"--deterministic)",)
    assert load(tmp_path, text, {"inference": True}).notes == ()


@pytest.mark.parametrize("device, tf_device", [("cpu", "cpu"), ("cuda", "gpu"),
                                                ("cuda:1", "gpu"), ("mps", "gpu")])
def test_torch_settings_device_is_read_as_tf_settings_device(tmp_path, device, tf_device):
    options = load(tmp_path, ball(top=f"torch_settings: {{device: '{device}'}}\n"))
    assert options.tf_settings.device == tf_device
    assert options.notes == (f"{tmp_path / 'x.yaml'}: torch_settings.device '{device}' is read "
                             f"as tf_settings.device '{tf_device}' (tftrainers runs on "
                             f"TensorFlow)",)
    assert "torch_settings" not in options.as_dict()


def test_tf_settings_device_wins_over_torch_settings(tmp_path):
    options = load(tmp_path, ball(top="torch_settings: {device: cuda}\n"
                                      "tf_settings: {device: cpu}\n"))
    assert options.tf_settings.device == "cpu"
    assert options.notes == (f"{tmp_path / 'x.yaml'}: torch_settings.device ('cuda') has no "
                             f"effect here: tf_settings.device ('cpu') is given too and wins",)
    assert load(tmp_path, ball(top="torch_settings: {device: null}\n")).notes == ()


def test_novelty_networks_normalize_as_the_behavior_unless_set(tmp_path):
    signals = """
        network_settings: {normalize: true}
        reward_signals:
          extrinsic: {}
          curiosity: {}
          rnd: {network_settings: {normalize: false}}
    """
    options = load(tmp_path, ball(behavior=signals))
    rs = options.behaviors["Ball3D"].reward_signals
    assert rs["curiosity"].network_settings.normalize is True  # from the behavior
    assert rs["rnd"].network_settings.normalize is False  # its own
    plain = load(tmp_path, ball(behavior="reward_signals: {rnd: {}}\n"))
    assert plain.behaviors["Ball3D"].reward_signals["rnd"].network_settings.normalize is False
    # resolved in the written configuration, so a rerun reads the same
    assert load(tmp_path, options.to_yaml()) == options


# ------------------------------------------------------------------------ default_settings


DEFAULTS = """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 256, buffer_size: 2560, beta: 0.01, learning_rate: 1.0e-3}
  network_settings: {hidden_units: 64, normalize: true, memory: {memory_size: 32}}
  reward_signals:
    extrinsic: {gamma: 0.9}
    curiosity: {strength: 0.1}
  max_steps: 1000
behaviors:
  Striker:
    hyperparameters: {batch_size: 128}
    network_settings: {memory: {sequence_length: 16}}
    reward_signals:
      extrinsic: {strength: 2.0}
  Goalie:
    network_settings: {memory: null}
  Team:
    trainer_type: poca
  Clone:
    trainer_type: bc
"""


def test_behaviors_are_deep_merged_over_default_settings(tmp_path):
    options = load(tmp_path, DEFAULTS)
    striker = options.behaviors["Striker"]
    h = striker.hyperparameters
    assert (h.batch_size, h.buffer_size, h.beta, h.learning_rate) == (128, 2560, 0.01, 1e-3)
    n = striker.network_settings
    assert (n.hidden_units, n.normalize) == (64, True)
    assert n.memory == MemorySettings(sequence_length=16, memory_size=32)
    assert striker.reward_signals["extrinsic"] == S.ExtrinsicSettings(gamma=0.9, strength=2.0)
    assert striker.reward_signals["curiosity"].strength == 0.1
    assert striker.max_steps == 1000
    assert options.behaviors["Goalie"].network_settings.memory is None
    assert options.behaviors["Goalie"].network_settings.hidden_units == 64


def test_default_hyperparameters_apply_only_where_the_trainer_has_them(tmp_path):
    options = load(tmp_path, DEFAULTS)
    assert options.behaviors["Team"].hyperparameters == POCASettings(
        batch_size=256, buffer_size=2560, beta=0.01, learning_rate=1e-3)
    assert options.behaviors["Clone"].hyperparameters == BCSettings(
        batch_size=256, buffer_size=2560, learning_rate=1e-3)


def test_settings_for_falls_back_to_default_settings(tmp_path):
    options = load(tmp_path, DEFAULTS)
    assert options.settings_for("Striker") is options.behaviors["Striker"]
    # Unity self-play behavior names carry a team suffix.
    assert options.settings_for("Striker?team=1") is options.behaviors["Striker"]
    fallback = options.settings_for("Unlisted")
    assert fallback == options.default_settings
    assert fallback.hyperparameters.batch_size == 256


def test_settings_for_without_default_settings_names_the_behavior(tmp_path):
    path = write(tmp_path, BALL3D)
    options = load_run_options(path)
    with pytest.raises(ConfigError) as info:
        options.settings_for("Walker")
    message = str(info.value)
    assert message.startswith(f"{path}: behaviors.Walker: ")
    assert "exposes behavior 'Walker'" in message
    assert "no default_settings" in message
    assert "configured behaviors (3DBall)" in message
    assert "\n" not in message


# ---------------------------------------------------------------------------- round trip


def test_to_yaml_round_trip(tmp_path):
    text = DEFAULTS + """
  Curious:
    reward_signals:
      curiosity: {encoding_size: 256}
      gail: {demo_path: d.demo, strength: 0.01}
    behavioral_cloning: {demo_path: d.demo, batch_size: 64}
    self_play: {window: 10}
env_settings: {env_path: "builtin:Ball3D", env_args: [a=1], num_envs: 2, seed: 7}
checkpoint_settings: {run_id: r1, resume: true}
tf_settings: {device: cpu}
environment_parameters: {gravity: {sampler_type: uniform, sampler_parameters: {min_value: 1}}}
debug: true
"""
    options = load(tmp_path, text)
    dumped = options.to_yaml()
    plain = options.as_dict()
    assert yaml.safe_load(dumped) == plain
    # Keys that change nothing here are written only when set to something.
    assert list(plain) == ["default_settings", "behaviors", "env_settings",
                           "checkpoint_settings", "tf_settings", "environment_parameters",
                           "debug"]
    assert "base_port" not in plain["env_settings"]
    # goal_conditioning_type acts (goal signals), so it is written as any other key
    assert plain["behaviors"]["Striker"]["network_settings"]["goal_conditioning_type"] == "hyper"
    # Resolved: merged behaviors with every key, derived defaults filled in.
    striker = plain["behaviors"]["Striker"]
    assert striker["hyperparameters"]["beta_schedule"] == "linear"
    assert striker["network_settings"]["memory"] == {"sequence_length": 16, "memory_size": 32}
    again = load_run_options(write(tmp_path, dumped, "configuration.yaml"))
    assert again == options
    assert again.to_yaml() == dumped


def test_round_trip_of_defaults_only(tmp_path):
    options = load(tmp_path, "behaviors: {}\n")
    assert load(tmp_path, options.to_yaml()) == options == RunOptions()


# ----------------------------------------------------------------------------- overrides


def test_overrides_apply_on_top_of_the_file(tmp_path):
    options = load(tmp_path, BALL3D + "checkpoint_settings: {run_id: from_file}\n", overrides={
        "env_path": "builtin:Ball3D", "env_args": {"difficulty": 3}, "run_id": "cli",
        "resume": True, "initialize_from": None, "inference": True, "num_envs": 4,
        "seed": 11, "results_dir": "out", "device": "cpu"})
    e, c = options.env_settings, options.checkpoint_settings
    assert (e.env_path, e.env_args, e.num_envs, e.seed) == (
        "builtin:Ball3D", {"difficulty": 3}, 4, 11)
    assert (c.run_id, c.resume, c.force, c.inference, c.results_dir, c.initialize_from) == (
        "cli", True, False, True, "out", None)
    assert options.tf_settings.device == "cpu"
    options = load(tmp_path, BALL3D, overrides={"force": True, "initialize_from": "old"})
    c = options.checkpoint_settings
    assert c.force and c.initialize_from == "old"


def test_resume_and_force_together_is_an_error(tmp_path):
    message = load_error(tmp_path, BALL3D, overrides={"resume": True, "force": True})
    assert message.startswith("command line: checkpoint_settings.resume: ")
    assert "allowed: at most one of resume, force" in message
    message = load_error(tmp_path, BALL3D + "checkpoint_settings: {resume: true, force: true}\n")
    assert message.endswith("x.yaml: checkpoint_settings.resume: true together with force: "
                            "true; allowed: at most one of resume, force")


@pytest.mark.parametrize("overrides, expected", [
    ({"num_envs": 0}, "command line: env_settings.num_envs: 0 is out of range; "
                      "allowed: num_envs >= 1"),
    ({"seed": "abc"}, "command line: env_settings.seed: 'abc' is a string; "
                      "allowed: an integer"),
    ({"resume": "yes"}, "command line: checkpoint_settings.resume: 'yes' is a string; "
                        "allowed: true or false"),
    ({"device": "tpu"}, "command line: tf_settings.device: 'tpu' is not a known value; "
                        "allowed: cpu, gpu"),
    ({"max_steps": 5}, "command line: max_steps: unknown override; allowed: env_path, "
                       "env_args, num_envs, num_areas, seed, run_id, resume, force"),
])
def test_bad_overrides(tmp_path, overrides, expected):
    assert load_error(tmp_path, BALL3D, overrides).startswith(expected)


# -------------------------------------------------------------------------------- errors

HP = "behaviors.Ball3D.hyperparameters"
NS = "behaviors.Ball3D.network_settings"
RS = "behaviors.Ball3D.reward_signals"


@pytest.mark.parametrize("text, expected", [
    # unknown keys, with the allowed keys listed
    (ball("batch_sizee: 32\n"),
     f"{HP}.batch_sizee: unknown key for PPOSettings (did you mean batch_size?); "
     "allowed: batch_size, buffer_size, learning_rate, beta, epsilon, lambd, num_epoch, "
     "learning_rate_schedule, beta_schedule, epsilon_schedule, clip_value, max_grad_norm, "
     "advantage_scale_floor, shared_critic"),
    (ball(behavior="max_step: 10\n"), "behaviors.Ball3D.max_step: unknown key for "
     "TrainerSettings (did you mean max_steps?); allowed: trainer_type, hyperparameters,"),
    (ball(behavior="network_settings: {hidden: 3}\n"), f"{NS}.hidden: unknown key"),
    (ball(top="env_settings: {port: 1}\n"), "env_settings.port: unknown key for "
     "EnvironmentSettings (did you mean base_port?); allowed: env_path, env_args, base_port"),
    (ball(top="curriculum: {}\n"), "curriculum: unknown key for RunOptions; allowed: "
     "default_settings, behaviors, env_settings, engine_settings, checkpoint_settings, "
     "tf_settings, environment_parameters, debug"),
    ("behaviors:\n  Team:\n    trainer_type: poca\n    hyperparameters: {shared_critic: true}\n",
     "behaviors.Team.hyperparameters.shared_critic: unknown key for POCASettings"),
    ("behaviors:\n  Team:\n    trainer_type: poca\n    hyperparameters: {leaver_bootstrap: alive}\n",
     "behaviors.Team.hyperparameters.leaver_bootstrap: 'alive' is not a known value; "
     "allowed: group, remaining"),
    (ball("leaver_bootstrap: remaining\n"),
     f"{HP}.leaver_bootstrap: unknown key for PPOSettings"),
    (ball(behavior="reward_signals: {extrinsic: {}, curiousity: {}}\n"),
     f"{RS}.curiousity: unknown key; allowed: extrinsic, curiosity, rnd, gail"),
    (ball(behavior="reward_signals: {extrinsic: {gama: 0.9}}\n"),
     f"{RS}.extrinsic.gama: unknown key for ExtrinsicSettings (did you mean gamma?)"),
    # ML-Agents' torch_settings, read as tf_settings
    (ball(top="torch_settings: {device: tpu}\n"),
     "torch_settings.device: 'tpu' is not a known value; allowed: cpu, cuda, cuda:N, mps or "
     "null"),
    (ball(top="torch_settings: {gpu: true}\n"),
     "torch_settings.gpu: unknown key for TorchSettings; allowed: device"),
    # environment parameters: ML-Agents' samplers and curricula
    (ball(top="environment_parameters: {mass: {sampler_type: beta, sampler_parameters: {}}}\n"),
     "environment_parameters.mass.curriculum[0].value.sampler_type: 'beta' is not a known "
     "value; allowed: uniform, gaussian, multirangeuniform, constant"),
    (ball(top="environment_parameters: {mass: {sampler_type: uniform, sampler_parameters: "
              "{min_value: 3, max_value: 1}}}\n"),
     "environment_parameters.mass.curriculum[0].value.sampler_parameters.min_value: 3.0 is out "
     "of range; allowed: min_value <= max_value (1.0)"),
    (ball(top="environment_parameters: {mass: {sampler_type: uniform, sampler_parameters: "
              "{mean: 1}}}\n"),
     "environment_parameters.mass.curriculum[0].value.sampler_parameters.mean: unknown key for "
     "UniformSampler"),
    (ball(top="environment_parameters: {scale: {sampler_type: multirangeuniform, "
              "sampler_parameters: {intervals: [[1, 2], [4, 3]]}}}\n"),
     "environment_parameters.scale.curriculum[0].value.sampler_parameters.intervals[1]: "
     "[4, 3] is not a [min, max] pair"),
    (ball(top="environment_parameters:\n  wall:\n    curriculum:\n"
              "      - {name: L0, value: 1}\n      - {name: L1, value: 2}\n"),
     "environment_parameters.wall.curriculum[0].completion_criteria: is missing; allowed: "
     "completion_criteria on every lesson but the last"),
    (ball(top="environment_parameters:\n  wall:\n    curriculum:\n"
              "      - {name: L0, value: 1, completion_criteria: {behavior: Ball3D, "
              "measure: progress, threshold: 2}}\n      - {name: L1, value: 2}\n"),
     "environment_parameters.wall.curriculum[0].completion_criteria.threshold: 2.0 is out of "
     "range; allowed: 0 <= threshold <= 1 when measure is progress"),
    (ball(top="environment_parameters: {wall: {curriculum: 3}}\n"),
     "environment_parameters.wall.curriculum: 3 is a number; allowed: a list"),
    # wrong types
    (ball("learning_rate: fast\n"),
     f"{HP}.learning_rate: 'fast' is a string; allowed: a number"),
    (ball("learning_rate: [0.1]\n"), f"{HP}.learning_rate: [0.1] is a list; allowed: a number"),
    (ball("num_epoch: true\n"), f"{HP}.num_epoch: true is a boolean; allowed: an integer"),
    (ball("num_epoch: 2.5\n"), f"{HP}.num_epoch: 2.5 is not a whole number; allowed: an integer"),
    (ball("num_epoch: '3x'\n"), f"{HP}.num_epoch: '3x' is a string; allowed: an integer"),
    (ball("learning_rate: .nan\n"), f"{HP}.learning_rate: nan is not a finite number"),
    (ball(behavior="threaded: 1\n"), "behaviors.Ball3D.threaded: 1 is a number; "
     "allowed: true or false"),
    (ball(behavior="network_settings: [1]\n"), f"{NS}: [1] is a list; allowed: a mapping "
     "with keys normalize, hidden_units"),
    (ball(behavior="init_path: 3\n"), "behaviors.Ball3D.init_path: 3 is a number; "
     "allowed: a string"),
    (ball(behavior="reward_signals: [extrinsic]\n"), f"{RS}: ['extrinsic'] is a list; "
     "allowed: a mapping"),
    ("behaviors: [Ball3D]\n", "behaviors: ['Ball3D'] is a list; allowed: a mapping"),
    ("behaviors:\n  Ball3D: 3\n", "behaviors.Ball3D: 3 is a number; allowed: a mapping with "
     "keys trainer_type"),
    (ball(top="env_settings: {env_args: [speed]}\n"), "env_settings.env_args[0]: 'speed' is "
     "not a 'key=value' string; allowed: a mapping {key: value} or a list of 'key=value'"),
    (ball(top="env_settings: {env_args: {a: [1]}}\n"), "env_settings.env_args.a: [1] is a "
     "list; allowed: a string, number or boolean"),
    (ball(top="debug: null\n"), "debug: got null; allowed: true or false"),
    # out of range, with the rule
    (ball("lambd: 1.5\n"), f"{HP}.lambd: 1.5 is out of range; allowed: 0 <= lambd <= 1"),
    (ball("epsilon: 1\n"), f"{HP}.epsilon: 1.0 is out of range; allowed: 0 < epsilon < 1"),
    (ball("batch_size: 0\n"), f"{HP}.batch_size: 0 is out of range; allowed: batch_size >= 1"),
    (ball("buffer_size: 32\n"), f"{HP}.buffer_size: 32 is out of range; allowed: "
     "buffer_size >= batch_size (64)"),
    (ball("learning_rate: 0\n"), f"{HP}.learning_rate: 0.0 is out of range; "
     "allowed: learning_rate > 0"),
    (ball("beta: -1.0e-3\n"), f"{HP}.beta: -0.001 is out of range; allowed: beta >= 0"),
    (ball("num_epoch: 0\n"), f"{HP}.num_epoch: 0 is out of range; allowed: num_epoch >= 1"),
    (ball(behavior="reward_signals: {extrinsic: {gamma: 1.01}}\n"),
     f"{RS}.extrinsic.gamma: 1.01 is out of range; allowed: 0 <= gamma <= 1"),
    (ball(behavior="reward_signals: {curiosity: {strength: -1}}\n"),
     f"{RS}.curiosity.strength: -1.0 is out of range; allowed: strength >= 0"),
    (ball(behavior="time_horizon: 0\n"), "behaviors.Ball3D.time_horizon: 0 is out of range; "
     "allowed: time_horizon >= 1"),
    (ball(behavior="max_steps: -1\n"), "behaviors.Ball3D.max_steps: -1 is out of range; "
     "allowed: max_steps >= 0"),
    (ball(behavior="summary_freq: 0\n"), "behaviors.Ball3D.summary_freq: 0 is out of range"),
    (ball(behavior="keep_checkpoints: 0\n"), "behaviors.Ball3D.keep_checkpoints: 0 is out of "
     "range; allowed: keep_checkpoints >= 1"),
    (ball(behavior="checkpoint_interval: 0\n"), "behaviors.Ball3D.checkpoint_interval: 0 is "
     "out of range; allowed: checkpoint_interval >= 1"),
    (ball(behavior="network_settings: {hidden_units: 0}\n"),
     f"{NS}.hidden_units: 0 is out of range; allowed: hidden_units >= 1"),
    (ball(behavior="network_settings: {num_layers: -1}\n"),
     f"{NS}.num_layers: -1 is out of range; allowed: num_layers >= 0"),
    (ball(behavior="network_settings: {memory: {sequence_length: 0}}\n"),
     f"{NS}.memory.sequence_length: 0 is out of range; allowed: sequence_length >= 1"),
    (ball(behavior="network_settings: {memory: {memory_size: 63}}\n"),
     f"{NS}.memory.memory_size: 63 is out of range; allowed: memory_size > 0 and "
     "divisible by 2"),
    (ball(behavior="network_settings: {memory: {sequence_length: 128}}\n"),
     "behaviors.Ball3D.network_settings.memory.sequence_length: 128 is out of range; "
     "allowed: network_settings.memory.sequence_length <= hyperparameters.batch_size (64)"),
    (ball(top="env_settings: {num_envs: 0}\n"), "env_settings.num_envs: 0 is out of range"),
    # choices
    (ball("learning_rate_schedule: cosine\n"), f"{HP}.learning_rate_schedule: 'cosine' is "
     "not a known value; allowed: linear, constant"),
    (ball("beta_schedule: Linear\n"), f"{HP}.beta_schedule: 'Linear' is not a known value"),
    (ball(behavior="network_settings: {vis_encode_type: vgg}\n"),
     f"{NS}.vis_encode_type: 'vgg' is not a known value; allowed: simple, nature_cnn, "
     "resnet, match3, fully_connected"),
    (ball(behavior="network_settings: {goal_conditioning_type: film}\n"),
     f"{NS}.goal_conditioning_type: 'film' is not a known value; allowed: hyper, none"),
    ("behaviors:\n  Ball3D:\n    trainer_type: td3\n    hyperparameters: {tau: 0.005}\n",
     "behaviors.Ball3D.trainer_type: 'td3' is not a known value; allowed: ppo, poca, sac, bc"),
    # SAC's keys, checked as PPO's
    ("behaviors:\n  Ball3D:\n    trainer_type: sac\n    hyperparameters: {tau: 0}\n",
     "behaviors.Ball3D.hyperparameters.tau: 0.0 is out of range; allowed: 0 < tau <= 1"),
    ("behaviors:\n  Ball3D:\n    trainer_type: sac\n    hyperparameters: {steps_per_update: -1}\n",
     "behaviors.Ball3D.hyperparameters.steps_per_update: -1.0 is out of range; allowed: "
     "steps_per_update > 0"),
    ("behaviors:\n  Ball3D:\n    trainer_type: sac\n    hyperparameters: {batch_size: 512, "
     "buffer_size: 256}\n", "behaviors.Ball3D.hyperparameters.buffer_size: 256 is out of range; "
     "allowed: buffer_size >= batch_size (512)"),
    ("behaviors:\n  Ball3D:\n    trainer_type: sac\n    hyperparameters: {beta: 0.01}\n",
     "behaviors.Ball3D.hyperparameters.beta: unknown key"),
    (ball(top="tf_settings: {device: cuda}\n"),
     "tf_settings.device: 'cuda' is not a known value; allowed: cpu, gpu"),
    # required keys
    (ball(behavior="reward_signals: {gail: {strength: 0.1}}\n"),
     f"{RS}.gail.demo_path: required key is missing; allowed: Path to a .demo file"),
    (ball(behavior="behavioral_cloning: {strength: 0.1}\n"),
     "behaviors.Ball3D.behavioral_cloning.demo_path: required key is missing"),
    # errors in default_settings are reported there, not in every behavior
    ("default_settings: {hyperparameters: {lambd: 2}}\nbehaviors: {A: {}}\n",
     "default_settings.hyperparameters.lambd: 2.0 is out of range; allowed: 0 <= lambd <= 1"),
])
def test_config_errors_name_file_key_value_and_allowed(tmp_path, text, expected):
    message = load_error(tmp_path, text)
    assert message.startswith(str(tmp_path / "x.yaml") + ": " + expected), message


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such config file$"):
        load_run_options(path)


@pytest.mark.parametrize("text, expected", [
    ("behaviors:\n  a: b: c\n", ": not valid YAML (mapping values are not allowed here at "
                                "line 2, column 7)"),
    ("behaviors: [unclosed\n", ": not valid YAML ("),
    ("- behaviors\n- env_settings\n", ": the top level is a list, not a mapping; allowed: a "
                                      "mapping with keys default_settings, behaviors,"),
    ("just some words\n", ": the top level is a string, not a mapping"),
    ("", ": the top level is empty; allowed: a mapping with keys default_settings"),
])
def test_files_that_are_not_a_yaml_mapping(tmp_path, text, expected):
    assert load_error(tmp_path, text).startswith(str(tmp_path / "x.yaml") + expected)


def test_binary_file_and_directory(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x80\x81\xff\x00binary")
    with pytest.raises(ConfigError, match="model.onnx: not a text file"):
        load_run_options(str(path))
    with pytest.raises(ConfigError, match="is a directory, not a config file"):
        load_run_options(str(tmp_path))


def test_config_error_is_a_value_error_and_always_one_line():
    assert issubclass(ConfigError, ValueError)
    assert str(ConfigError("a\nb\r\nc")) == "a b c"
    with pytest.raises(ConfigError) as info:
        RunOptions.from_dict({"behaviors": {"B": {"init_path": ["x\ny"] * 30}}}, source="s")
    assert "\n" not in str(info.value) and str(info.value).startswith("s: behaviors.B.init_path")
