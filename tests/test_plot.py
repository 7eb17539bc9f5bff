"""tftrainers-plot: learning curves from runs' CSV logs; a missing or empty run is one line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tftrainers.plot import PlotError, band, find_stat, group_runs, plot_main, read_run

REWARD = "Environment/Cumulative Reward"


def make_run(root, name, rewards, seed=0, lr=3e-4, behavior="Ball3D", steps=None):
    run = root / name
    (run / "run_logs").mkdir(parents=True)
    (run / "configuration.yaml").write_text(
        f"behaviors:\n  {behavior}:\n    hyperparameters: {{learning_rate: {lr}}}\n"
        f"env_settings:\n  seed: {seed}\ncheckpoint_settings:\n  run_id: {name}\n")
    steps = steps or [1000 * (i + 1) for i in range(len(rewards))]
    lines = [f"step,time_elapsed,steps_per_second,{REWARD},Policy/Entropy"]
    lines += [f"{s},{i},{100},{r},{1.4 - 0.1 * i}" for i, (s, r) in enumerate(zip(steps, rewards))]
    (run / "run_logs" / f"{behavior}.csv").write_text("\n".join(lines) + "\n")
    return str(run)


def test_runs_that_differ_only_by_seed_are_one_group(tmp_path):
    a = make_run(tmp_path, "ppo_s0", [1, 2, 3], seed=0)
    b = make_run(tmp_path, "ppo_s1", [1, 3, 5], seed=1)
    c = make_run(tmp_path, "other", [1, 2, 3], seed=0, lr=1e-3)
    assert group_runs([a, c, b]) == [[a, b], [c]]


def test_the_band_is_median_min_and_max_over_the_common_steps(tmp_path):
    a = read_run(make_run(tmp_path, "s0", [1, 2, 3]))["Ball3D"][REWARD]
    b = read_run(make_run(tmp_path, "s1", [3, 4, 7]))["Ball3D"][REWARD]
    c = read_run(make_run(tmp_path, "s2", [2, 6], steps=[1000, 2000]))["Ball3D"][REWARD]
    steps, median, low, high = band([a, b, c])
    np.testing.assert_array_equal(steps, [1000, 2000])
    np.testing.assert_array_equal(median, [2, 4])
    np.testing.assert_array_equal(low, [1, 2])
    np.testing.assert_array_equal(high, [3, 6])


def run_plot(argv, capsys):
    code = plot_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("extension", ["png", "svg"])
def test_draws_several_runs_and_stats(tmp_path, capsys, extension):
    pytest.importorskip("matplotlib")
    runs = [make_run(tmp_path, f"ppo_s{s}", [s, s + 1, s + 3], seed=s) for s in range(3)]
    runs.append(make_run(tmp_path, "poca", [0, 2, 2], lr=1e-3))
    out = tmp_path / f"curves.{extension}"
    code, stdout, stderr = run_plot([*runs, "--stat", "Cumulative Reward", "Policy/Entropy",
                                     "--out", str(out)], capsys)
    assert code == 0, stderr
    assert stdout.strip() == str(out) and out.stat().st_size > 1000
    if extension == "svg":
        text = out.read_text()
        assert "ppo (3 seeds)" in text and "poca" in text


@pytest.mark.parametrize("case, expected", [
    ("missing", "no such run folder"),
    ("empty", "the run has no summary yet"),
    ("stat", "--stat Policy/Nothing: no run logged it; logged:"),
    ("out", "must end with .png or .svg"),
])
def test_a_missing_or_empty_run_is_one_line(tmp_path, capsys, case, expected):
    good = make_run(tmp_path, "good", [1, 2])
    empty = tmp_path / "empty"
    (empty / "run_logs").mkdir(parents=True)
    (empty / "run_logs" / "Ball3D.csv").write_text("step,time_elapsed\n")
    argv = {"missing": [good, str(tmp_path / "nope")], "empty": [good, str(empty)],
            "stat": [good, "--stat", "Policy/Nothing"],
            "out": [good, "--out", str(tmp_path / "x.jpg")]}[case]
    if case == "stat":
        pytest.importorskip("matplotlib")
    code, stdout, stderr = run_plot([*argv, "--out", str(tmp_path / "c.png")]
                                    if case != "out" else argv, capsys)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and expected in stderr, stderr


def test_read_run_raises_plot_error_for_an_unknown_behavior(tmp_path):
    with pytest.raises(PlotError, match="no CSV log of behavior 'Walker'"):
        read_run(make_run(tmp_path, "r", [1]), behavior="Walker")


def test_the_installed_command(tmp_path):
    pytest.importorskip("matplotlib")
    path = os.path.join(os.path.dirname(sys.executable), "tftrainers-plot")
    if not os.path.exists(path):
        pytest.skip("tftrainers-plot is not installed next to this Python")
    run = make_run(tmp_path, "r", [1, 2, 3])
    done = subprocess.run([path, run, "--out", str(tmp_path / "r.png")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "r.png").exists()
    done = subprocess.run([path, str(tmp_path / "missing")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tftrainers-plot: error: {tmp_path / 'missing'}: no such run folder"]


def test_labels_name_the_curves_and_count_the_seeds(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    runs = [make_run(tmp_path, f"ppo-{s}", [s, s + 1], seed=s) for s in range(3)]
    runs += [make_run(tmp_path, f"cur-{s}", [s, s + 2], seed=s, lr=1e-3) for s in range(2)]
    out = tmp_path / "c.svg"
    code, stdout, stderr = run_plot([*runs, "--label", "PPO alone", "PPO + curiosity",
                                     "--xlabel", "env steps",
                                     "--title", "Pyramids", "--ylabel", "return",
                                     "--out", str(out)], capsys)
    assert code == 0, stderr
    text = out.read_text()
    for shown in ("PPO alone (3 seeds)", "PPO + curiosity (2 seeds)", "Pyramids", "return",
                  "env steps"):
        assert shown in text, shown
    assert "ppo-" not in text and "cur-" not in text


def test_a_label_count_that_is_not_the_curve_count_is_one_line(tmp_path, capsys):
    runs = [make_run(tmp_path, f"ppo_s{s}", [1, 2], seed=s) for s in range(2)]
    runs.append(make_run(tmp_path, "poca", [1, 2], lr=1e-3))
    code, stdout, stderr = run_plot([*runs, "--label", "only one", "--out",
                                     str(tmp_path / "c.png")], capsys)
    assert code == 2 and stdout == ""
    assert stderr.strip().splitlines() == [
        "tftrainers-plot: error: --label: 1 labels for 2 curves (ppo (2 seeds); poca); give "
        "one per curve, in that order"]
    code, _, stderr = run_plot([*runs, "--stat", "Entropy", "--ylabel", "a", "b", "--out",
                                str(tmp_path / "c.png")], capsys)
    assert code == 2 and "--ylabel: 2 labels for 1 stats; give one per --stat" in stderr


def test_x_puts_a_stat_on_the_x_axis(tmp_path):
    run = tmp_path / "bc"
    (run / "run_logs").mkdir(parents=True)
    (run / "run_logs" / "GridWorld.csv").write_text(
        f"step,Policy/Teacher Labels,{REWARD}\n1000,500,0.1\n2000,,0.2\n3000,1500,0.3\n")
    curve = read_run(str(run), x="Teacher Labels")["GridWorld"][REWARD]
    np.testing.assert_array_equal(curve.steps, [500, 1500])  # a row without labels is left out
    np.testing.assert_array_equal(curve.values, [0.1, 0.3])
    with pytest.raises(PlotError, match=r"--x Nothing: .* did not log it for GridWorld; "
                                        r"logged: step, Policy/Teacher Labels"):
        read_run(str(run), x="Nothing")


def test_a_stat_with_alternatives_takes_each_runs_first_logged(tmp_path):
    group = "Environment/Group Cumulative Reward"
    poca = read_run(make_run(tmp_path, "poca", [1, 2]))["Ball3D"]
    assert find_stat([REWARD, group], "Group Cumulative Reward|Cumulative Reward") == group
    assert find_stat(list(poca), "Group Cumulative Reward|Cumulative Reward") == REWARD
    assert find_stat(list(poca), "Group Cumulative Reward|Nothing") is None


def test_the_band_reaches_the_earliest_end_of_runs_that_stop_a_few_steps_apart(tmp_path):
    a = read_run(make_run(tmp_path, "s0", [1, 2, 3], steps=[1000, 2000, 3010]))["Ball3D"][REWARD]
    b = read_run(make_run(tmp_path, "s1", [3, 4, 5], steps=[1000, 2000, 3000]))["Ball3D"][REWARD]
    steps, median, low, high = band([a, b])
    np.testing.assert_array_equal(steps, [1000, 2000, 3000])
    np.testing.assert_allclose(low, [1, 2, 2 + 1000 / 1010])


def test_step_ticks_are_short():
    from tftrainers.plot import _short_number
    assert [_short_number(v) for v in (0, 0.5, 250_000, 1_000_000, 1_500_000, 40_000)] == [
        "0", "0.5", "250k", "1M", "1.5M", "40k"]
