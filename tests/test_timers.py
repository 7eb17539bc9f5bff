"""timers.json: ML-Agents' layout, known totals, and a file and a summary line per run."""
import json
import textwrap
import threading

import pytest

from tftrainers import timers as timers_module
from tftrainers.cli import learn_main
from tftrainers.timers import Timers


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter: ``clock.now`` seconds, moved by hand."""
    class Clock:
        now = 100.0
    monkeypatch.setattr(timers_module, "perf_counter", lambda: Clock.now)
    return Clock


def test_tree_has_ml_agents_layout_with_known_totals(clock):
    timers = Timers()
    for seconds in (1.0, 3.0):
        with timers.timed("update"):
            with timers.timed("targets"):
                clock.now += 0.5
            clock.now += seconds
    with timers.timed("env step"):
        clock.now += 2.0
    timers.set_gauge("workers", 3.0)
    timers.set_gauge("workers", 1.0)
    tree = timers.tree()
    assert tree["name"] == "root" and tree["count"] == 1
    assert set(tree) >= {"name", "gauges", "metadata", "total", "count", "self", "children"}
    assert tree["metadata"]["timer_format_version"] == "0.1.0"
    update = tree["children"]["update"]
    assert (update["total"], update["count"], update["min"], update["max"]) == (5.0, 2, 1.5, 3.5)
    assert update["self"] == 4.0  # 5 less its child's 1
    assert update["children"]["targets"] == {"total": 1.0, "count": 2, "self": 1.0,
                                             "min": 0.5, "max": 0.5}
    assert tree["children"]["env step"]["total"] == 2.0
    assert tree["gauges"]["workers"] == {"value": 1.0, "min": 1.0, "max": 3.0, "count": 2}
    assert timers.largest(2) == [("update", 5.0), ("env step", 2.0)]


def test_begin_end_nests_a_phase_that_spans_calls_and_threads_are_parallel(clock):
    timers = Timers()
    timers.begin("start-up")
    with timers.timed("import tensorflow"):
        clock.now += 4.0
    timers.end("start-up", 6.0)
    with timers.timed("act"):  # after end: under the root again
        clock.now += 1.0

    def update():
        with timers.timed("update"):
            clock.now += 0.0
    thread = threading.Thread(target=update)
    thread.start()
    thread.join()
    tree = timers.tree()
    start = tree["children"]["start-up"]
    assert start["total"] == 6.0 and start["self"] == 2.0
    assert start["children"]["import tensorflow"]["total"] == 4.0
    assert set(tree["children"]) == {"start-up", "act", "update"}
    assert tree["children"]["update"]["is_parallel"] is True
    assert "is_parallel" not in tree["children"]["act"]


def test_summary_line_names_the_three_largest_phases(clock):
    timers = Timers()
    for name, seconds in (("a", 1.0), ("b", 4.0), ("c", 2.0), ("d", 3.0)):
        with timers.timed(name):
            clock.now += seconds
    line = timers.summary_line("x/timers.json")
    assert line.startswith("[INFO] Timers: b 4.0 s (40%), d 3.0 s (30%), c 2.0 s (20%) of 10.0 s")
    assert line.endswith("every phase in x/timers.json.")


CONFIG = """
default_settings:
  trainer_type: ppo
  hyperparameters: {batch_size: 32, buffer_size: 64, num_epoch: 1}
  network_settings: {hidden_units: 8, num_layers: 1}
  max_steps: 300
  checkpoint_interval: 200
  time_horizon: 16
  summary_freq: 100
env_settings:
  env_path: builtin:Basic
"""


@pytest.mark.parametrize("workers", ["inline", "process"])
def test_every_run_writes_timers_json_and_a_summary_line(tmp_path, capsys, workers):
    config = tmp_path / "c.yaml"
    config.write_text(textwrap.dedent(CONFIG))
    code = learn_main([str(config), "--run-id", "t", "--results-dir", str(tmp_path / "r"),
                       "--num-envs", "2", "--workers", workers])
    assert code == 0
    out = capsys.readouterr().out
    with open(tmp_path / "r" / "t" / "run_logs" / "timers.json") as f:
        tree = json.load(f)
    phases = tree["children"]
    assert {"start-up", "act", "env step", "trajectory assembly", "update", "targets",
            "checkpoint", "export"} <= set(phases) if workers == "inline" else (
        {"start-up", "update", "targets", "checkpoint", "export"} <= set(phases))
    # Inline: step 200 and the final save. Env workers deliver up to a weight version's
    # steps per drain, so crossing 200 can fall in the drain that reaches max_steps (one
    # save then); the checkpoint phase is timed either way.
    count = phases["checkpoint"]["count"]
    assert count == 2 if workers == "inline" else count in (1, 2), count
    start = phases["start-up"]
    assert {"import tensorflow", "create trainers"} <= set(start["children"])
    assert 0 < start["total"] < tree["total"]
    if workers == "process":
        worker = start["children"]["worker start-up"]
        gauges = tree["gauges"]
        assert worker["total"] == pytest.approx(gauges["workers.last_connected_s"]["value"])
        assert gauges["workers.first_to_last_s"]["value"] >= 0
    assert len([line for line in out.splitlines() if line.startswith("[INFO] Timers: ")]) == 1
