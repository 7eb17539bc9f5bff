"""``tftrainers-plot``: learning curves of one or more runs, drawn from their CSV logs.

Every run writes ``results/RUN/run_logs/<Behavior>.csv`` (one row per summary, a column per
stat; see stats.py). This command reads those files only: no TensorFlow, no event files::

    tftrainers-plot results/ball3d                                # cumulative reward
    tftrainers-plot results/ppo_s0 results/ppo_s1 results/ppo_s2 --out ppo.svg
    tftrainers-plot results/a results/b --stat "Policy/Entropy" "Losses/Value Loss"
    tftrainers-plot results/ppo_s* results/cur_s* --label "PPO" "PPO + curiosity" \
        --title "Pyramids" --out pyramids.svg

Runs whose ``configuration.yaml`` files are equal but for the seed and the run id are one
curve: the median over those runs, with the range between their lowest and highest value
shaded. Other runs are overlaid, a curve each. One panel per stat. ``--label`` names the
curves (default: the runs' common folder name), ``--x`` puts a stat on the x axis instead of
the step (``--x "Teacher Labels"``), and a stat ``A|B`` is, for each run, the first of A and
B it logged (``"Group Cumulative Reward|Cumulative Reward"`` compares POCA's group return
with PPO's return on the group reward).

The functions below (:func:`read_run`, :func:`group_runs`, :func:`plot`) are what the
command runs; they raise :class:`PlotError` with the one-line message the command prints.
"""
from __future__ import annotations

import csv
import math
import os
import re
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from tftrainers.cli import _command, _Parser, _run_and_exit

CUMULATIVE_REWARD = "Environment/Cumulative Reward"


class PlotError(ValueError):
    """A run or stat that cannot be drawn; the message is one line naming it."""

    exit_code = 2


class Curve(NamedTuple):
    """One stat of one behavior of one run: ``steps`` [n] and ``values`` [n], NaN-free."""

    run: str
    behavior: str
    stat: str
    steps: np.ndarray
    values: np.ndarray


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_run(run: str, behavior: Optional[str] = None,
             x: Optional[str] = None) -> Dict[str, Dict[str, Curve]]:
    """Reads a run folder's CSV logs.

    Args:
        run: The run folder (``results/RUN``).
        behavior: Read only this behavior (default: every behavior the run logged).
        x: A stat (a column, or its name after the ``/``) to use as the curves' ``steps``
            instead of the step column, e.g. ``"Teacher Labels"``.

    Returns:
        ``{behavior: {stat: Curve}}``; a stat's curve holds the summaries that have a value.

    Raises:
        PlotError: If the folder does not exist, or holds no summary of the behavior(s), or
            a behavior did not log ``x``.
    """
    if not os.path.isdir(run):
        raise PlotError(f"{run}: no such run folder")
    logs = os.path.join(run, "run_logs")
    files = sorted(name for name in os.listdir(logs) if name.endswith(".csv")) \
        if os.path.isdir(logs) else []
    if behavior is not None:
        files = [name for name in files if name[:-4] == behavior]
        if not files:
            raise PlotError(f"{run}: no CSV log of behavior {behavior!r} in "
                            f"{os.path.join(run, 'run_logs')}")
    curves: Dict[str, Dict[str, Curve]] = {}
    for name in files:
        with open(os.path.join(logs, name), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            continue
        steps = np.array([_number(row.get("step")) for row in rows])
        if x is not None:
            column = find_stat([c for c in rows[0] if c not in ("step", None)], x)
            if column is None:
                raise PlotError(f"--x {x}: {run} did not log it for {name[:-4]}; logged: "
                                f"{', '.join(c for c in rows[0] if c is not None)}")
            steps = np.array([_number(row.get(column)) for row in rows])
        stats = {}
        for column in rows[0]:
            if column in ("step", None):
                continue
            values = np.array([_number(row.get(column)) for row in rows])
            keep = np.isfinite(values) & np.isfinite(steps)
            if keep.any():
                stats[column] = Curve(run, name[:-4], column, steps[keep], values[keep])
        if stats:
            curves[name[:-4]] = stats
    if not curves:
        raise PlotError(f"{run}: the run has no summary yet (no rows in "
                        f"{os.path.join(run, 'run_logs', '*.csv')})")
    return curves


def find_stat(stats: Sequence[str], wanted: str) -> Optional[str]:
    """The column ``wanted`` names: itself, or the one stat whose name after the ``/`` is it
    (case-insensitive), so ``--stat "Cumulative Reward"`` works. ``A|B`` names the first of
    A and B that ``stats`` holds."""
    for choice in wanted.split("|"):
        choice = choice.strip()
        if choice in stats:
            return choice
        short = [s for s in stats if s.split("/")[-1].lower() == choice.lower()]
        if len(short) == 1:
            return short[0]
    return None


def _identity(run: str) -> Optional[str]:
    """The run's configuration without its seed and run id (None: none to compare)."""
    import yaml
    path = os.path.join(run, "configuration.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict):
        return None
    for section, keys in (("env_settings", ("seed",)),
                          ("checkpoint_settings", ("run_id", "resume", "force", "results_dir"))):
        if isinstance(config.get(section), dict):
            for key in keys:
                config[section].pop(key, None)
    return yaml.safe_dump(config, sort_keys=True)


def group_runs(runs: Sequence[str]) -> List[List[str]]:
    """Groups runs that differ only by seed (and run id), in the order first seen."""
    groups: Dict[object, List[str]] = {}
    for i, run in enumerate(runs):
        identity = _identity(run)
        groups.setdefault(identity if identity is not None else ("alone", i), []).append(run)
    return list(groups.values())


def _label(runs: Sequence[str], behavior: str, several_behaviors: bool,
           name: Optional[str] = None) -> str:
    names = [os.path.basename(os.path.normpath(run)) for run in runs]
    if name is not None:
        label = name if len(names) == 1 else f"{name} ({len(names)} seeds)"
    elif len(names) == 1:
        label = names[0]
    else:
        # ball3d_s0, ball3d_s1 -> ball3d; ppo_seed1, ppo_seed2 -> ppo; Pyramids0 -> Pyramids
        prefix = re.sub(r"([_\-. ]+(seed|s))?[_\-. ]*$", "", os.path.commonprefix(names))
        label = f"{prefix or names[0]} ({len(names)} seeds)"
    return f"{label}: {behavior}" if several_behaviors else label


def _short_number(value: float, _position=None) -> str:
    """An axis tick: 250000 -> 250k, 1500000 -> 1.5M, 0.5 -> 0.5."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def band(curves: Sequence[Curve]) -> tuple:
    """Median, min and max of curves over the steps they all cover.

    Returns:
        ``(steps [m], median [m], low [m], high [m])``: the steps are those of the curve with
        the fewest summaries, clipped to the common range (runs of one budget end a few
        steps apart: the band still reaches the earliest end); every curve is interpolated
        to them.
    """
    start = max(c.steps[0] for c in curves)
    stop = min(c.steps[-1] for c in curves)
    base = min(curves, key=lambda curve: len(curve.steps))
    steps = np.unique(np.clip(base.steps, start, stop))
    table = np.stack([np.interp(steps, c.steps, c.values) for c in curves])
    return steps, np.median(table, axis=0), table.min(axis=0), table.max(axis=0)


def plot(runs: Sequence[str], stats: Sequence[str] = (CUMULATIVE_REWARD,), out: str = "curves.png",
         behavior: Optional[str] = None, title: Optional[str] = None,
         labels: Optional[Sequence[str]] = None, x: Optional[str] = None,
         ylabels: Optional[Sequence[str]] = None, xlabel: Optional[str] = None) -> str:
    """Draws ``stats`` of ``runs`` into ``out`` (.png or .svg) and returns its path.

    Args:
        labels: The curves' names in the legend, one per curve in the order drawn (groups of
            runs in the order first seen, each behavior in turn); a group of several seeds
            gets `` (N seeds)`` appended. Default: the runs' common folder name.
        x: A stat for the x axis instead of the step (see :func:`read_run`).
        ylabels: The panels' y-axis labels, one per stat (default: the columns drawn).
        xlabel: The x-axis label (default: ``steps``, or ``x``).

    Raises:
        PlotError: For a missing or empty run, a stat no run logged, a bad ``out``, or
            ``labels`` / ``ylabels`` whose count is not the curves' / the stats'.
    """
    extension = os.path.splitext(out)[1].lower()
    if extension not in (".png", ".svg"):
        raise PlotError(f"--out {out}: the file must end with .png or .svg")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise PlotError(f"--out {out}: no such folder {folder}")
    if ylabels is not None and len(ylabels) != len(stats):
        raise PlotError(f"--ylabel: {len(ylabels)} labels for {len(stats)} stats; give one "
                        "per --stat")
    data = {run: read_run(run, behavior, x) for run in runs}
    behaviors = list(dict.fromkeys(b for curves in data.values() for b in curves))
    groups = group_runs(runs)
    keys = [(i, name) for i, group in enumerate(groups) for name in behaviors
            if any(name in data[run] for run in group)]
    if labels is not None and len(labels) != len(keys):
        drawn = "; ".join(_label([run for run in groups[i] if name in data[run]], name,
                                 len(behaviors) > 1) for i, name in keys)
        raise PlotError(f"--label: {len(labels)} labels for {len(keys)} curves ({drawn}); "
                        "give one per curve, in that order")
    names = dict(zip(keys, labels)) if labels is not None else {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise PlotError('matplotlib is not installed; pip install -e ".[plot]"') from None

    figure, axes = plt.subplots(len(stats), 1, figsize=(8, 3.6 * len(stats)), squeeze=False)
    for panel, (axis, wanted) in enumerate(zip(axes[:, 0], stats)):
        drawn, columns = 0, []
        for i, group in enumerate(groups):
            for name in behaviors:
                curves = []
                for run in group:
                    logged = data[run].get(name, {})
                    column = find_stat(list(logged), wanted)
                    if column is not None:
                        curves.append(logged[column])
                        columns.append(column)
                if not curves:
                    continue
                label = _label([c.run for c in curves], name, len(behaviors) > 1,
                               names.get((i, name)))
                if len(curves) == 1:
                    axis.plot(curves[0].steps, curves[0].values, label=label)
                else:
                    steps, median, low, high = band(curves)
                    line, = axis.plot(steps, median, label=label, linewidth=2)
                    axis.fill_between(steps, low, high, color=line.get_color(), alpha=0.15,
                                      linewidth=0)
                    for curve in curves:  # each seed, thin: the median can hide one
                        axis.plot(curve.steps, curve.values, color=line.get_color(),
                                  linewidth=0.8, alpha=0.45)
                drawn += 1
        if not drawn:
            logged = sorted({s for curves in data.values() for c in curves.values() for s in c})
            raise PlotError(f"--stat {wanted}: no run logged it; logged: {', '.join(logged)}")
        axis.set_xlabel(xlabel or (x if x is not None else "steps"))
        axis.xaxis.set_major_formatter(FuncFormatter(_short_number))
        axis.set_ylabel(ylabels[panel] if ylabels is not None
                        else " / ".join(dict.fromkeys(columns)))
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize="small")
    if title:
        axes[0, 0].set_title(title)
    figure.tight_layout()
    try:
        figure.savefig(out)
    except OSError as error:
        raise PlotError(f"--out {out}: {error.strerror or error}") from None
    finally:
        plt.close(figure)
    return out


@_command("tftrainers-plot")
def plot_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-plot RUN [RUN ...]``: draws learning curves; prints the file written."""
    parser = _Parser(prog="tftrainers-plot",
                     description="Draw learning curves of runs from their CSV logs "
                                 "(results/RUN/run_logs/*.csv). Runs that differ only by seed "
                                 "are one curve: their median, the min-max range shaded.")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders, e.g. results/RUN")
    parser.add_argument("--stat", nargs="+", default=[CUMULATIVE_REWARD], metavar="NAME",
                        help="stats to draw, a panel each: a CSV column, or its name after the "
                             "'/'; 'A|B': for each run, the first of A and B it logged "
                             f"(default: {CUMULATIVE_REWARD})")
    parser.add_argument("--behavior", default=None,
                        help="draw one behavior (default: every behavior of the runs)")
    parser.add_argument("--out", default="curves.png", metavar="FILE.png|FILE.svg",
                        help="the picture to write (default: curves.png)")
    parser.add_argument("--title", default=None, help="a title over the first panel")
    parser.add_argument("--label", nargs="+", default=None, metavar="NAME",
                        help="the curves' names in the legend, one per curve in the order "
                             "drawn (runs that differ only by seed are one curve, in the order "
                             "first given); ' (N seeds)' is appended to a curve of N seeds "
                             "(default: the runs' common folder name)")
    parser.add_argument("--x", default=None, metavar="NAME",
                        help="a stat for the x axis instead of the step, e.g. 'Teacher Labels'")
    parser.add_argument("--xlabel", default=None, metavar="TEXT",
                        help="the x-axis label (default: steps, or the --x stat)")
    parser.add_argument("--ylabel", nargs="+", default=None, metavar="TEXT",
                        help="the y-axis labels, one per --stat (default: the stats' names)")
    args = parser.parse_args(argv)
    # A PlotError leaves through _command: one line, exit code 2.
    print(plot(args.runs, args.stat, args.out, behavior=args.behavior, title=args.title,
               labels=args.label, x=args.x, ylabels=args.ylabel,
               xlabel=args.xlabel))
    return 0


def main() -> None:
    _run_and_exit(plot_main)


if __name__ == "__main__":
    sys.exit(plot_main())
