"""tftrainers.load_policy: from a run (its checkpoint, a Keras model) and from its .onnx and
SavedModel exports (no config), the same actions on NumPy batches; bad sources and bad
batches are one line."""
import os

import numpy as np
import pytest

import tftrainers

BASIC = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "ppo", "Basic.yaml")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    return tftrainers.train(BASIC, run_id="p", results_dir=str(results), seed=1, verbose=0,
                            max_steps=400, summary_freq=200)


def test_a_run_and_its_exports_give_the_same_actions(run):
    rng = np.random.default_rng(0)
    obs = np.eye(20, dtype=np.float32)[rng.integers(0, 20, 64)]
    from_run = tftrainers.load_policy(run)
    assert from_run.behavior_name == "Basic" and from_run.keras_model is not None
    assert from_run.spec.action_spec.discrete_branches == (3,)
    actions = from_run(obs)
    assert actions.shape == (64, 1) and actions.dtype == np.int32
    for source in (run.exports["Basic"]["onnx"], run.exports["Basic"]["savedmodel"],
                   os.path.join(run.path, "Basic", "saved_model")):
        exported = tftrainers.load_policy(source)
        assert exported.behavior_name == "Basic" and exported.keras_model is None
        assert exported.spec.observation_specs[0].shape == (20,)
        assert exported.spec.action_spec == from_run.spec.action_spec
        np.testing.assert_array_equal(exported(obs), actions, err_msg=source)
    # A mask forbids: with the policy's choice masked out, it picks another action.
    mask = np.zeros((64, 3), bool)
    mask[np.arange(64), actions[:, 0]] = True
    masked = from_run(obs, mask=mask)
    assert not np.any(masked[:, 0] == actions[:, 0])
    # Sampled actions are actions too.
    sampled = tftrainers.load_policy(run.exports["Basic"]["onnx"])(obs, deterministic=False)
    assert sampled.shape == (64, 1) and set(np.unique(sampled)) <= {0, 1, 2}


def test_bad_sources_and_batches_are_one_line(run, tmp_path):
    policy = tftrainers.load_policy(run.exports["Basic"]["onnx"])
    cases = [
        (lambda: tftrainers.load_policy(tmp_path / "nothing"),
         f"{tmp_path / 'nothing'}: no such run folder, .onnx, .keras or .tflite file or SavedModel folder"),
        (lambda: tftrainers.load_policy(tmp_path / "x.onnx"),
         f"{tmp_path / 'x.onnx'}: no such ONNX file"),
        (lambda: tftrainers.load_policy(str(tmp_path)),
         f"{tmp_path}: no SavedModel (saved_model.pb) in it or in a numbered version folder"),
        (lambda: tftrainers.load_policy(run, behavior="Nope"),
         f"{run.path}: no behavior 'Nope'; the run has Basic"),
        (lambda: policy(np.zeros((4, 19), np.float32)),
         f"{policy.source}: observation 0 has shape [4, 19]; expected [n, 20] (a batch of n)"),
        (lambda: policy(np.zeros((4, 20), np.float32), mask=np.zeros((4, 2), bool)),
         f"{policy.source}: mask has shape [4, 2]; expected [4, 3] (True = forbidden) or one "
         f"[n, size] array per branch [3]"),
    ]
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    cases.append((lambda: tftrainers.load_policy(tmp_path / "broken.onnx"),
                  f"{tmp_path / 'broken.onnx'}: not a readable ONNX model"))
    for call, message in cases:
        with pytest.raises((tftrainers.TrainingError, ValueError)) as error:
            call()
        assert str(error.value).startswith(message), str(error.value)
        assert "\n" not in str(error.value)
