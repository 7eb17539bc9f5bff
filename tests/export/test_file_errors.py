"""Every file problem a user meets in tftrainers-evaluate, -export and -learn is one line
with exit code 2 (``--debug`` adds the traceback)."""
import errno
import os
import shutil
import textwrap

import pytest

from tftrainers.cli import evaluate_main, export_main, learn_main

CONFIG = """
behaviors:
  Basic:
    hyperparameters: {batch_size: 32, buffer_size: 64}
    network_settings: {hidden_units: 8, num_layers: 1}
    max_steps: 100
    time_horizon: 8
env_settings: {env_path: "builtin:Basic", seed: 0}
tf_settings: {jit_compile: false}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("file_errors")
    config = root / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    assert learn_main([str(config), "--run-id", "r", "--results-dir", str(root)]) == 0
    return root / "r"


def evaluate(policy):
    return ["builtin:Basic", "--episodes", "1", "--policy", str(policy)]


def saved_model(run):
    root = run / "Basic" / "saved_model"
    return root / sorted(os.listdir(root), key=int)[-1]


@pytest.mark.parametrize("content", [b"garbage", None])
def test_garbage_or_truncated_onnx(run, tmp_path, one_line_error, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content if content else (run / "Basic.onnx").read_bytes()[:200])
    err = one_line_error(evaluate_main, evaluate(path))
    assert f"{path}: not a readable ONNX model ([ONNXRuntimeError]" in err


def test_damaged_savedmodel_variables_and_graph(run, tmp_path, one_line_error):
    damaged = tmp_path / "variables"
    shutil.copytree(saved_model(run), damaged)
    for name in os.listdir(damaged / "variables"):
        if name.startswith("variables.data"):
            (damaged / "variables" / name).write_bytes(b"garbage")
    assert f"{damaged}: the SavedModel cannot be read (" in one_line_error(
        evaluate_main, evaluate(damaged))
    broken = tmp_path / "graph"
    shutil.copytree(saved_model(run), broken)
    (broken / "saved_model.pb").write_bytes(b"\x08garbage")
    assert f"{broken}: the SavedModel cannot be read (" in one_line_error(
        evaluate_main, evaluate(broken))


def test_policy_folder_with_no_model(tmp_path, one_line_error):
    assert f"{tmp_path}: no model in this folder: neither a training run (configuration.yaml) " \
           f"nor a SavedModel" in one_line_error(evaluate_main, evaluate(tmp_path))


def test_env_args_and_areas_that_cannot_work(tmp_path, one_line_error):
    assert "gym:CartPole-v1: the env does not take env args foo=1" in one_line_error(
        evaluate_main, ["gym:CartPole-v1", "--policy", "random", "--env-args", "foo=1"])
    err = one_line_error(evaluate_main, ["builtin:Basic", "--policy", "random", "--num-areas",
                                         "200000000"])
    assert "builtin:Basic: num_areas 200000000 means 200000000 agents, which need about" in err
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    results = str(tmp_path / "results")
    assert "gym:CartPole-v1: the env does not take env args foo=1" in one_line_error(
        learn_main, [str(config), "--env", "gym:CartPole-v1", "--env-args", "foo=1",
                     "--results-dir", results])
    assert "need about" in one_line_error(learn_main, [str(config), "--num-areas", "200000000",
                                                      "--results-dir", results, "--force"])


def test_export_output_that_cannot_be_written(run, tmp_path, one_line_error, monkeypatch):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    err = one_line_error(export_main, [str(run), "--output", str(a_file / "out"),
                                       "--format", "onnx"])
    assert "cannot write the export of 'Basic' (Not a directory)" in err

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
    monkeypatch.setattr("tftrainers.export.artifacts.os.makedirs", read_only)
    err = one_line_error(export_main, [str(run), "--output", str(tmp_path / "ro")])
    assert err == (f"tftrainers-export: error: {tmp_path / 'ro' / 'Basic'}: cannot write the "
                   f"export of 'Basic' (Read-only file system)")


def test_debug_shows_the_traceback_and_still_ends_with_the_line(tmp_path, capsys):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"garbage")
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(evaluate(path) + ["--debug"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and err[0].startswith("Traceback")
    assert err[-1].startswith(f"tftrainers-evaluate: error: {path}: not a readable ONNX model")
