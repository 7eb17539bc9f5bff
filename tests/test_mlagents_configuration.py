"""The configuration.yaml that mlagents-learn 1.x (release 20-22) writes into every results
folder runs unchanged, with one note line per reason for the keys that change nothing here.

tests/data/mlagents_configuration.yaml is that file, key for key in ML-Agents' order, as
written for config/ppo/3DBall.yaml run with ``--torch-device cpu --no-graphics`` and
3DBall_randomize's environment parameters plus a curriculum; the behavior carries our
built-in's name (Ball3D) and the run is shortened here (max_steps, buffer_size).
"""
import os
import re

import yaml

from tftrainers.cli import learn_main

DATA = os.path.join(os.path.dirname(__file__), "data", "mlagents_configuration.yaml")


def expected_notes(path):
    return [f"[NOTE] {path}: {text}" for text in (
        "torch_settings.device 'cpu' is read as tf_settings.device 'cpu' (tftrainers runs on "
        "TensorFlow)",
        "behaviors.Ball3D.reward_signals.extrinsic.network_settings is accepted but has no "
        "effect here: the extrinsic reward has no network (ML-Agents ignores it too)",
        "env_settings.base_port is accepted but has no effect here: the port of a Unity "
        "player (a build or the Editor); built-in, gym and pettingzoo environments have none",
        "env_settings.max_lifetime_restarts, env_settings.restarts_rate_limit_n, "
        "env_settings.restarts_rate_limit_period_s are accepted but have no effect here: Unity "
        "player settings (crash restart rate limits); env workers here restart as "
        "env_settings.max_worker_restarts says",
        "engine_settings is accepted but has no effect here: Unity player settings (window, "
        "quality, time scale, frame rates, graphics), sent to a Unity build or the Editor; "
        "built-in, gym and pettingzoo environments have no player")]


def test_ml_agents_resolved_configuration_runs_unchanged(tmp_path, capsys):
    with open(DATA) as f:
        text = f.read()
    for old, new in (("max_steps: 500000", "max_steps: 2400"),
                     ("buffer_size: 12000", "buffer_size: 1200"),
                     ("summary_freq: 12000", "summary_freq: 1200")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    config = tmp_path / "configuration.yaml"
    config.write_text(text)
    assert learn_main([str(config), "--env", "builtin:Ball3D", "--results-dir",
                       str(tmp_path / "results")]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == expected_notes(config)
    run = tmp_path / "results" / "ball3d"  # checkpoint_settings.run_id
    assert (run / "Ball3D.onnx").stat().st_size > 0
    assert re.search(r"\[INFO\] Ball3D\. Step: 12\d\d\. ", out)  # summary_freq 1200
    written = yaml.safe_load((run / "configuration.yaml").read_text())
    assert written["tf_settings"]["device"] == "cpu"
    assert written["environment_parameters"]["scale"]["curriculum"][1]["value"] == {
        "sampler_type": "gaussian", "sampler_parameters": {"seed": 6218, "mean": 2.0,
                                                           "st_dev": 0.5}}
