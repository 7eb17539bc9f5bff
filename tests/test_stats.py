"""Stats writers: console line, live display only on a terminal, CSV, TensorBoard names."""
import csv
import glob
import io
import os

import pytest

from tftrainers.stats import (ConsoleWriter, CSVWriter, ProgressDisplay, StatsReporter,
                              TensorBoardWriter)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_console_line_has_ml_agents_fields():
    out = io.StringIO()
    stats = StatsReporter("Ball3D", [ConsoleWriter(out)])
    stats.add_stat("Environment/Cumulative Reward", [1.0, 3.0])
    stats.write_stats(1200)
    line = out.getvalue().strip()
    assert line.startswith("[INFO] Ball3D. Step: 1200. Time Elapsed: ")
    assert "Mean Reward: 2.000. Std of Reward: 1.000." in line and "Steps/s:" in line


def test_console_lines_follow_the_callers_log():
    # A benchmark that runs trainings in its own process routes their lines away.
    out, lines = io.StringIO(), []
    stats = StatsReporter("Basic", [ConsoleWriter(out, log=lines.append)])
    stats.add_stat("Environment/Cumulative Reward", 0.5)
    stats.write_stats(100)
    assert out.getvalue() == ""
    assert len(lines) == 1 and lines[0].startswith("[INFO] Basic. Step: 100.")


def test_progress_display_only_on_a_terminal():
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        display = ProgressDisplay(stream, min_interval=0.0)
        display.update("Ball3D", 5000, 10000, 42.0, 1000.0)
    shown = terminal.getvalue()
    assert shown.startswith("\r") and "5000/10000 steps (50.0%)" in shown
    assert "reward 42.000" in shown and "1000 steps/s" in shown and "00:00:05 left" in shown
    assert pipe.getvalue() == ""


def test_csv_rows_and_new_columns(tmp_path):
    stats = StatsReporter("Basic", [CSVWriter(str(tmp_path))])
    stats.add_stat("Environment/Cumulative Reward", 0.5)
    stats.write_stats(100)
    stats.add_stat("Environment/Cumulative Reward", 0.7)
    stats.set_stat("Losses/Value Loss", 0.25)
    stats.write_stats(200)
    with open(tmp_path / "run_logs" / "Basic.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [100, 200]
    assert rows[1]["Losses/Value Loss"] == "0.25" and rows[0]["Losses/Value Loss"] == ""


def test_tensorboard_events_use_ml_agents_names(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    writer = TensorBoardWriter(str(tmp_path))
    stats = StatsReporter("Basic", [writer])
    stats.add_stat("Environment/Cumulative Reward", 0.9)
    stats.set_stat("Policy/Learning Rate", 3e-4)
    stats.write_stats(50)
    writer.close()
    (events,) = glob.glob(os.path.join(tmp_path, "Basic", "events.out.tfevents.*"))
    accumulator = EventAccumulator(events)
    accumulator.Reload()
    # Scalars (simple_value), as ML-Agents' writer records them: TensorBoard's scalar view.
    assert {"Environment/Cumulative Reward", "Policy/Learning Rate",
            "Environment/Steps per Second"} <= set(accumulator.Tags()["scalars"])
    (event,) = accumulator.Scalars("Policy/Learning Rate")
    assert event.step == 50 and event.value == pytest.approx(3e-4)


def test_a_games_stats_keep_their_aggregation(tmp_path):
    """Unity's stats channel: 0 average, 1 most recent, 2 sum, 3 histogram."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    writer, csv_writer = TensorBoardWriter(str(tmp_path)), CSVWriter(str(tmp_path))
    stats = StatsReporter("Game", [writer, csv_writer])
    stats.add_environment_stats({"Game/Avg": [(1.0, 0), (3.0, 0)], "Game/Last": [(1.0, 1),
                                                                                  (5.0, 1)],
                                 "Game/Sum": [(2.0, 2), (4.0, 2)],
                                 "Game/Hist": [(1.0, 3), (2.0, 3), (6.0, 3)]})
    stats.add_environment_stats({"Game/Sum": [(1.0, 2)]})
    summaries = stats.write_stats(10)
    assert {k: s.mean for k, s in summaries.items()} == {
        "Game/Avg": 2.0, "Game/Last": 5.0, "Game/Sum": 7.0, "Game/Hist": 3.0}
    stats.add_environment_stats({"Game/Sum": [(1.0, 2)]})
    assert stats.write_stats(20)["Game/Sum"].mean == 1.0  # a new period starts from zero
    writer.close()
    (events,) = glob.glob(os.path.join(tmp_path, "Game", "events.out.tfevents.*"))
    accumulator = EventAccumulator(events)
    accumulator.Reload()
    assert "Game/Hist" in accumulator.Tags()["histograms"]
    (event,) = accumulator.Histograms("Game/Hist")
    assert event.histogram_value.num == 3 and event.histogram_value.max == 6.0
    with open(os.path.join(tmp_path, "run_logs", "Game.csv")) as f:
        first = next(csv.DictReader(f))
    assert float(first["Game/Hist"]) == 3.0 and float(first["Game/Sum"]) == 7.0
