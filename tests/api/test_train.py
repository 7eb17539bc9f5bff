"""tftrainers.train on a built-in env: the CLI's run folder and results, callbacks that stop
a run, Ctrl-C, two runs in one process, and the one-line errors."""
import os

import numpy as np
import pytest
import yaml

import tftrainers
from tftrainers.cli import learn_main

BASIC = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "ppo", "Basic.yaml")
TINY = dict(max_steps=600, summary_freq=200, checkpoint_interval=400, verbose=0, seed=3)
# What depends on the seed alone (not on time).
LEARNED = ["Environment/Cumulative Reward", "Losses/Policy Loss", "Losses/Value Loss",
           "Policy/Entropy"]


def files(run_dir):
    out = set()
    for root, dirs, names in os.walk(run_dir):
        for name in names:
            if name.startswith("events.out") or name == "run.lock":
                continue
            out.add(os.path.relpath(os.path.join(root, name), run_dir))
    return out


def test_train_writes_the_clis_run_and_two_runs_in_one_process_do_not_leak(tmp_path):
    results = str(tmp_path / "results")
    first = tftrainers.train(BASIC, run_id="a", results_dir=results, **TINY)
    second = tftrainers.train(BASIC, run_id="b", results_dir=results, **TINY)
    # The same seed gives the same training whatever ran before it in the process.
    a, b = first.stats(), second.stats()
    assert list(a["step"]) == list(b["step"]) and a["step"][-1] >= 600
    for stat in LEARNED:
        np.testing.assert_allclose(a[stat], b[stat], rtol=1e-5, err_msg=stat)
    # The command line writes the same folder, from the same code path (given the config
    # train recorded).
    config = yaml.safe_load(open(os.path.join(first.path, "configuration.yaml")))
    assert config["behaviors"]["Basic"]["max_steps"] == 600
    assert config["env_settings"]["seed"] == 3
    cli_config = tmp_path / "tiny.yaml"
    cli_config.write_text(yaml.safe_dump(config))
    assert learn_main([str(cli_config), "--run-id", "c", "--results-dir", results]) == 0
    cli = tftrainers.Run(os.path.join(results, "c"))
    assert files(cli.path) == files(first.path)
    for stat in LEARNED:
        np.testing.assert_allclose(cli.stats()[stat], a[stat], rtol=1e-5, err_msg=stat)
    assert first.exit_code == 0 and first.stopped_by is None
    assert first.behaviors == ["Basic"]
    assert first.checkpoints["Basic"].endswith(os.path.join("checkpoints", "Basic-" + str(
        a["step"][-1])))
    assert set(first.exports["Basic"]) == {"onnx", "savedmodel"}


def test_a_callback_sees_summaries_and_checkpoints_and_stops_the_run(tmp_path):
    seen = []

    class Watch(tftrainers.Callback):
        def on_start(self, run):
            seen.append(("start", run.run_id))

        def on_checkpoint(self, behavior, step, path):
            seen.append(("checkpoint", step, os.path.isdir(path)))

        def on_end(self, run):
            seen.append(("end", run.checkpoints["Basic"] is not None))

    stop = tftrainers.StopOnReward(-10.0)  # reached at the first summary
    run = tftrainers.train(BASIC, run_id="s", results_dir=str(tmp_path), callbacks=[
        Watch(), stop, lambda behavior, step, stats: seen.append(("summary", step))],
        **dict(TINY, max_steps=5000))
    assert run.stopped_by == "callback StopOnReward(-10)"
    assert 200 <= stop.reached_at < 400
    step = int(run.stats()["step"][-1])
    assert step < 400  # stopped at the next env step
    assert seen[0] == ("start", "s") and seen[-1] == ("end", True)
    assert ("summary", stop.reached_at) in seen
    assert [s for s in seen if s[0] == "checkpoint"] == [("checkpoint", step, True)]
    assert run.checkpoints["Basic"].endswith(f"Basic-{step}")


def test_ctrl_c_saves_then_raises(tmp_path):
    def interrupt(behavior, step, stats):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tftrainers.train(BASIC, run_id="k", results_dir=str(tmp_path), callbacks=[interrupt],
                         **TINY)
    run = tftrainers.Run(tmp_path / "k")
    assert run.checkpoints["Basic"] is not None  # saved before the interrupt went on
    # The lock is released: a second start is refused for the run that exists, not as a
    # run in use.
    with pytest.raises(tftrainers.TrainingError, match="exists"):
        tftrainers.train(BASIC, run_id="k", results_dir=str(tmp_path), **TINY)


def test_a_callback_that_raises_fails_the_run_after_saving(tmp_path):
    def broken(behavior, step, stats):
        raise ZeroDivisionError("no")

    with pytest.raises(tftrainers.TrainingFailed) as failed:
        tftrainers.train(BASIC, run_id="f", results_dir=str(tmp_path), callbacks=[broken],
                         **TINY)
    message = str(failed.value)
    assert message.startswith("callback broken.on_summary raised ZeroDivisionError: no; "
                              "checkpoints saved: Basic at step "), message
    causes, error = [], failed.value
    while error is not None:
        causes.append(type(error))
        error = error.__cause__
    assert ZeroDivisionError in causes
    assert tftrainers.Run(tmp_path / "f").checkpoints["Basic"] is not None


@pytest.mark.parametrize("kwargs, message", [
    (dict(max_step=10), "max_step: not a setting; allowed: a command-line name (env_path, "),
    (dict(max_steps=-1), "<config dict>: behaviors.Basic.max_steps: -1 is "),
    (dict(behaviors__Basic__hyperparameters__batch_sise=8),
     "<config dict>: behaviors.Basic.hyperparameters.batch_sise: unknown key"),
    (dict(env="builtin:Nope"), "unknown built-in env 'Nope'; built-ins: "),
    (dict(run_id="../x"), "run id '../x' contains a path separator; allowed: "),
])
def test_bad_input_is_one_line_before_anything_trains(tmp_path, kwargs, message):
    config = yaml.safe_load(open(BASIC))
    with pytest.raises(tftrainers.TrainingError) as error:
        tftrainers.train(config, results_dir=str(tmp_path), **kwargs)
    assert type(error.value) is tftrainers.TrainingError
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)
    assert not os.listdir(tmp_path)


def test_overrides_by_path_dict_and_behavior_key():
    from tftrainers.api import resolve_options
    options = resolve_options(BASIC, "builtin:Basic", {
        "max_steps": 123, "hyperparameters__batch_size": 16,
        "behaviors.Basic.network_settings.hidden_units": 7,
        "behaviors": {"Basic": {"reward_signals": {"extrinsic": {"gamma": 0.5}}}},
        "tf_settings__jit_compile": False, "num_envs": 2})
    basic = options.behaviors["Basic"]
    assert (basic.max_steps, basic.hyperparameters.batch_size,
            basic.network_settings.hidden_units) == (123, 16, 7)
    assert basic.reward_signals["extrinsic"].gamma == 0.5
    assert basic.reward_signals["extrinsic"].strength == 1.0  # merged, not replaced
    assert options.tf_settings.jit_compile is False and options.env_settings.num_envs == 2


def test_importing_the_api_imports_no_tensorflow():
    import subprocess
    import sys
    code = ("import sys, tftrainers\n"
            "tftrainers.train, tftrainers.load_policy, tftrainers.Run, tftrainers.Callback\n"
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules\n"
            "assert sorted(tftrainers.__all__) == sorted(set(dir(tftrainers)) & set("
            "tftrainers.__all__))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__))))))
    assert done.returncode == 0, done.stderr
