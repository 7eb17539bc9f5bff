"""Exports at checkpoints, tftrainers-export, and evaluating what was shipped."""
import json
import os
import shutil
import textwrap

import pytest

from tftrainers.cli import evaluate_main, export_main, learn_main

CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 128}
    network_settings: {hidden_units: 16, num_layers: 1}
    max_steps: 12000
    time_horizon: 3
    checkpoint_interval: 4000
    keep_checkpoints: 2
    reward_signals: {extrinsic: {gamma: 0.9}}
env_settings: {env_path: "builtin:Basic", seed: 1}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("export_runs")
    config = root / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(root)]) == 0
    return str(root / "r")


def score(capsys, *argv):
    assert evaluate_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])["mean_reward"]


def test_training_writes_ml_agents_export_layout(run):
    behavior_dir = os.path.join(run, "Basic")
    onnx = sorted((f for f in os.listdir(behavior_dir) if f.endswith(".onnx")),
                  key=lambda f: int(f[len("Basic-"):-len(".onnx")]))
    versions = sorted(os.listdir(os.path.join(behavior_dir, "saved_model")), key=int)
    assert len(onnx) == 2 and len(versions) == 2  # keep_checkpoints
    assert onnx[-1] == f"Basic-{versions[-1]}.onnx" and int(versions[-1]) >= 12000
    assert os.path.isfile(os.path.join(run, "Basic.onnx"))
    assert os.path.isfile(os.path.join(behavior_dir, "saved_model", versions[-1],
                                       "saved_model.pb"))


def test_shipped_models_score_like_the_checkpoint(run, capsys):
    args = ["builtin:Basic", "--episodes", "16", "--deterministic", "--policy"]
    checkpoint = score(capsys, *args, run)
    onnx = score(capsys, *args, os.path.join(run, "Basic.onnx"))
    savedmodel = score(capsys, *args, os.path.join(run, "Basic", "saved_model"))
    assert checkpoint == pytest.approx(onnx, abs=1e-6) == pytest.approx(savedmodel, abs=1e-6)


def test_export_on_demand(run, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert export_main([run, "--output", out, "--format", "onnx", "--opset", "9"]) == 0
    written = capsys.readouterr().out.split()
    assert written[-1] == os.path.join(out, "Basic.onnx") and os.path.isfile(written[-1])
    assert not os.path.exists(os.path.join(out, "Basic", "saved_model"))


def fails(capsys, main, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


def test_export_errors(run, tmp_path, capsys):
    assert "--opset 16 is not supported; allowed: 9..15" in fails(
        capsys, export_main, [run, "--opset", "16"])
    assert "no behavior 'Ball3D'; the run has Basic" in fails(
        capsys, export_main, [run, "--behavior", "Ball3D"])
    assert "not a training run" in fails(capsys, export_main, [str(tmp_path)])
    empty = tmp_path / "empty"
    shutil.copytree(run, empty)
    shutil.rmtree(empty / "Basic" / "checkpoints")
    assert "no checkpoint of behavior 'Basic'" in fails(capsys, export_main, [str(empty)])
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    checkpoints = broken / "Basic" / "checkpoints"
    for folder in checkpoints.iterdir():
        for f in folder.glob("ckpt.data*"):
            f.write_bytes(b"garbage")
    assert "the checkpoint cannot be read" in fails(capsys, export_main, [str(broken)])


def truncated(path):
    data = next(path.glob("ckpt.data*"))
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])


def emptied(path):
    next(path.glob("ckpt.data*")).write_bytes(b"")


def scrambled(path):
    data = next(path.glob("ckpt.data*"))
    data.write_bytes(bytes(b ^ 0x5A for b in data.read_bytes()))  # same size


def garbled_index(path):
    (path / "ckpt.index").write_bytes(b"not a tensor bundle index" * 8)


@pytest.mark.parametrize("damage", [truncated, emptied, scrambled, garbled_index,
                                    shutil.rmtree])
def test_export_of_a_run_whose_newest_checkpoint_is_damaged_says_which_it_used(
        run, tmp_path, capsys, damage):
    from tftrainers.checkpoint import Checkpointer
    copy = tmp_path / "r"
    shutil.copytree(run, copy)
    checkpoints = copy / "Basic" / "checkpoints"
    older, newest = [e["step"] for e in Checkpointer(str(checkpoints), "Basic").checkpoints()]
    damage(checkpoints / f"Basic-{newest}")
    capsys.readouterr()
    assert export_main([str(copy), "--output", str(tmp_path / "out"), "--format",
                        "savedmodel"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"[WARNING] Basic: {checkpoints}/Basic-{newest}")
    assert err[0].endswith(f"; using the newest intact checkpoint {checkpoints}/Basic-{older} "
                           f"(step {older})")
    assert os.listdir(tmp_path / "out" / "Basic" / "saved_model") == [str(older)]


def test_evaluating_a_model_on_the_wrong_env_names_the_input(run, capsys):
    err = fails(capsys, evaluate_main, ["builtin:GridWorld", "--policy",
                                        os.path.join(run, "Basic.onnx")])
    assert "model input obs_0 has shape [?, 20]" in err and "[75]" in err


def test_tf_serving_request_script_builds_a_checked_body(run, tmp_path):
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "export", "tf_serving_request.py")
    versions = sorted(os.listdir(os.path.join(run, "Basic", "saved_model")), key=int)
    model = os.path.join(run, "Basic", "saved_model", versions[-1])
    out = tmp_path / "request.json"
    done = subprocess.run([sys.executable, script, model, "--env", "builtin:Basic", "--rows", "3",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    body = json.loads(out.read_text())
    assert body["signature_name"] == "serving_default" and len(body["instances"]) == 3
    assert set(body["instances"][0]) == {"obs_0", "action_masks"}
    response = json.loads(done.stderr.strip().splitlines()[-1])
    assert len(response["predictions"]) == 3
    assert response["predictions"][0]["version_number"] == [3.0]
    assert response["predictions"][0]["deterministic_discrete_actions"][0] in (0, 1, 2)


def test_export_keras_and_tflite_score_like_the_checkpoint(run, tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    out = str(tmp_path / "formats")
    assert export_main([run, "--output", out, "--format", "keras", "tflite"]) == 0
    written = capsys.readouterr().out.split()
    latest = [os.path.join(out, f"Basic{suffix}") for suffix in (".keras", ".tflite",
                                                                 ".int8.tflite")]
    assert set(latest) <= set(written) and all(os.path.isfile(p) for p in written)
    assert not os.path.exists(os.path.join(out, "Basic.onnx"))
    args = ["builtin:Basic", "--episodes", "16", "--deterministic", "--policy"]
    checkpoint = score(capsys, *args, run)
    for path in latest:
        assert score(capsys, *args, path) == pytest.approx(checkpoint, abs=1e-6), path
