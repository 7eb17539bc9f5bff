"""SAC in every run mode: env workers (processes, Ray), the Python API,
``--initialize-from``, ``--inference``, and the ONNX and SavedModel exports evaluated."""
import json
import os

import numpy as np
import pytest
import yaml

import tftrainers
from tftrainers.checkpoint import Checkpointer
from tftrainers.cli import evaluate_main, learn_main

# Basic on a tiny budget: the run modes are checked, not the learning.
CONFIG = {
    "behaviors": {"Basic": {
        "trainer_type": "sac",
        "hyperparameters": {"batch_size": 16, "buffer_size": 2000, "steps_per_update": 4.0,
                            "learning_rate": 1e-3},
        "network_settings": {"hidden_units": 16, "num_layers": 1},
        "max_steps": 300, "time_horizon": 8, "summary_freq": 100,
        "checkpoint_interval": 300}},
    "env_settings": {"env_path": "builtin:Basic", "seed": 1},
    "tf_settings": {"jit_compile": False},
}
SAC_STATS = {"Losses/Q1 Loss", "Losses/Policy Loss", "Policy/Discrete Entropy Coeff"}


def write_config(tmp_path, name="sac.yaml", **behavior):
    data = json.loads(json.dumps(CONFIG))
    data["behaviors"]["Basic"].update(behavior)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def last_step(results, run_id):
    directory = os.path.join(results, run_id, "Basic", "checkpoints")
    return Checkpointer(directory, "Basic").checkpoints()[-1]["step"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One short SAC run (results folder, run id "a"), shared by the tests that read it."""
    tmp_path = tmp_path_factory.mktemp("sac_run")
    results = str(tmp_path / "results")
    assert learn_main([write_config(tmp_path), "--run-id", "a", "--results-dir",
                       results]) == 0
    return tmp_path, results


@pytest.mark.parametrize("workers", ["process", pytest.param("ray", marks=pytest.mark.ray)])
def test_env_workers_train_sac(tmp_path, capsys, workers):
    if workers == "ray":
        pytest.importorskip("ray")
        flags = ["--ray-address", "auto"]
    else:
        flags = ["--workers", "process"]
    results = str(tmp_path / "r")
    assert learn_main([write_config(tmp_path), "--run-id", "w", "--results-dir", results,
                       "--num-envs", "2", *flags]) == 0
    out = capsys.readouterr().out
    kind = "Ray actor" if workers == "ray" else "worker process"
    assert f"[INFO] Env workers: 2 x {kind}" in out
    assert last_step(results, "w") >= 300
    stats = tftrainers.Run(os.path.join(results, "w")).stats()
    assert SAC_STATS <= set(stats)
    if workers == "ray":
        import ray
        assert not ray.is_initialized()


def test_the_python_api_trains_sac(tmp_path):
    run = tftrainers.train(write_config(tmp_path), run_id="api",
                           results_dir=str(tmp_path / "r"), verbose=0, max_steps=200)
    assert run.exit_code == 0 and run.behaviors == ["Basic"]
    assert set(run.exports["Basic"]) == {"onnx", "savedmodel"}
    stats = run.stats()
    assert SAC_STATS <= set(stats) and stats["step"][-1] >= 200


def test_initialize_from_copies_the_sac_policy_only(trained, tmp_path):
    source_dir, results = trained
    from tftrainers.trainers.sac import trainer as sac_trainer
    seen = {}
    original = sac_trainer.SACTrainer.initialize_from

    def spy(self, run_dir):
        policy = self.policy.flat_weights().copy()
        critic = [v.numpy().copy() for v in self.optimizer.q1.variables]
        original(self, run_dir)
        seen["policy_changed"] = not np.array_equal(policy, self.policy.flat_weights())
        seen["critic_same"] = all(np.array_equal(a, v.numpy()) for a, v in
                                  zip(critic, self.optimizer.q1.variables))
        seen["step"] = self.step
    sac_trainer.SACTrainer.initialize_from = spy
    try:
        assert learn_main([write_config(tmp_path, max_steps=100), "--run-id", "b",
                           "--results-dir", results, "--initialize-from", "a"]) == 0
    finally:
        sac_trainer.SACTrainer.initialize_from = original
    assert seen == {"policy_changed": True, "critic_same": True, "step": 0}
    assert last_step(results, "b") >= 100


def test_inference_runs_the_sac_policy_without_training(trained, tmp_path):
    source_dir, results = trained
    checkpoints = os.path.join(results, "a", "Basic", "checkpoints")
    before = sorted(os.listdir(checkpoints))
    assert learn_main([write_config(source_dir), "--run-id", "a", "--results-dir", results,
                       "--inference", "--resume"]) == 0
    assert sorted(os.listdir(checkpoints)) == before  # nothing trained, nothing saved


def test_onnx_and_savedmodel_exports_evaluate_as_the_run(trained, capsys):
    _, results = trained
    behavior = os.path.join(results, "a", "Basic")
    step = last_step(results, "a")
    forms = {"run": os.path.join(results, "a"),
             "onnx": os.path.join(behavior, f"Basic-{step}.onnx"),
             "savedmodel": os.path.join(behavior, "saved_model", str(step))}
    rewards = {}
    for form, policy in forms.items():
        capsys.readouterr()
        assert evaluate_main(["builtin:Basic", "--policy", policy, "--episodes", "20",
                              "--seed", "5", "--deterministic"]) == 0
        rewards[form] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])[
            "mean_reward"]
    # The same deterministic policy (tanh of the mean, argmax) in three runtimes.
    assert rewards["onnx"] == pytest.approx(rewards["run"], abs=1e-6), rewards
    assert rewards["savedmodel"] == pytest.approx(rewards["run"], abs=1e-6), rewards


DEMOS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "configs", "demos")


@pytest.mark.parametrize("behavior", [
    {"reward_signals": {"gail": {"demo_path": os.path.join(DEMOS, "GridWorld.demo")}}},
    {"behavioral_cloning": {"demo_path": os.path.join(DEMOS, "GridWorld.demo")}},
])
def test_demonstrations_that_do_not_fit_a_sac_behavior_are_one_line(tmp_path, capsys,
                                                                    behavior):
    with pytest.raises(SystemExit) as exit_info:
        learn_main([write_config(tmp_path, **behavior), "--run-id", "bad", "--results-dir",
                    str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2
    assert "\n" not in err and "GridWorld.demo: observation 0 is" in err, err
