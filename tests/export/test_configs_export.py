"""Every built-in config's policy exports within the contract and matches its SavedModel."""
import os

import numpy as np
import pytest

from tftrainers.envs import make
from tftrainers.export import export_onnx, export_savedmodel
from tftrainers.settings import load_run_options
from tftrainers.trainers.policy import Policy

from .helpers import Exported, contract_feeds, deterministic_names, keras_deterministic, \
    random_inputs
from .test_contract import BATCH, check_values

CONFIGS = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "ppo")


@pytest.mark.parametrize("config,env_args", [
    ("Basic.yaml", {}), ("Ball3D.yaml", {}), ("GridWorld.yaml", {}),
    ("GridWorld.yaml", {"obs": "visual"}), ("GridWorldGrid.yaml", {"obs": "grid"}),
    ("Hallway.yaml", {}), ("Sorter.yaml", {}), ("BasicGoal.yaml", {})])
def test_config_policies_export_within_the_contract(tmp_path, config, env_args):
    options = load_run_options(os.path.join(CONFIGS, config))
    env = make(options.env_settings.env_path, **env_args)
    (name, spec), = env.behavior_specs.items()
    settings = options.settings_for(name)
    policy = Policy(spec, settings.network_settings, seed=1)
    exported = Exported(policy, None, export_onnx(policy, str(tmp_path / f"{name}.onnx")),
                        export_savedmodel(policy, str(tmp_path / "saved_model"), 1))
    rng = np.random.default_rng(0)
    obs, masks, memory = random_inputs(policy, BATCH, rng)
    feeds = contract_feeds(spec, obs, masks, memory)
    onnx_out, saved_out = exported.run_onnx(feeds), exported.run_savedmodel(feeds)
    check_values(policy, onnx_out)
    check_values(policy, saved_out, rows=True)
    expected = keras_deterministic(policy, obs, masks, memory)
    for output in deterministic_names(policy):
        np.testing.assert_allclose(onnx_out[output], saved_out[output], atol=1e-5)
        np.testing.assert_allclose(onnx_out[output], expected[output], atol=1e-5)
    if masks is not None:  # masked actions are never chosen, sampled or not
        for output in ("discrete_actions", "deterministic_discrete_actions"):
            chosen = onnx_out[output][:, 0]
            assert np.all(masks[np.arange(BATCH), chosen] == 1.0)
    for output in ("continuous_actions", "deterministic_continuous_actions"):
        if output in onnx_out:
            assert np.all(np.abs(onnx_out[output]) <= 1.0)
