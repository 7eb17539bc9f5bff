"""Console entry points. Every error is one line (``--debug`` adds the traceback).

Exit codes: 0 done; 1 the run failed (the env raised or sent bad data, an update was not
finite, an internal error); 2 usage, config or file problems; 128 + signum when stopped by
a signal (130 SIGINT, 143 SIGTERM; training saves first).

``learn_main`` / ``evaluate_main`` / ``export_main`` return an exit code (tests call them);
the installed commands run them through ``_run_and_exit``.
"""
from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import traceback
from typing import Callable, Dict, List, NoReturn, Optional, Sequence

from tftrainers.console import quiet_dependencies, quiet_tensorflow_import
from tftrainers.signals import Interrupted, held, signal_name, stop_signals


_debug = {"on": False}  # the running command's --debug


def _one_line(message) -> str:
    return " ".join(str(message).split("\n")).strip()


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2); every command takes
    ``--debug``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_argument("--debug", action="store_true",
                          help="show the full traceback of an error")

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        _debug["on"] = parsed.debug
        return parsed

    def error(self, message):
        if _debug["on"] and sys.exc_info()[0] is not None:
            traceback.print_exc()
        self.exit(2, f"{self.prog}: error: {_one_line(message)}\n")


def _command(prog: str, interrupted: str = "", hold: bool = False):
    """Wraps a command's main: SIGINT/SIGTERM handled from its first line (before
    TensorFlow is imported; with ``hold``, held until the command checks, see signals.py),
    and every error that reaches here printed as one line."""
    def wrap(main):
        @functools.wraps(main)
        def run(argv: Optional[List[str]] = None) -> int:
            _debug["on"] = False
            with stop_signals(prog, hold=hold) as stop:
                try:
                    code = main(argv)
                    stop.check()  # held to the end (a dry run): still stopped by it
                    return code
                except Interrupted as stop:
                    print(f"{prog}: interrupted by {signal_name(stop.signum)}{interrupted}",
                          file=sys.stderr)
                    return stop.exit_code
                except OSError as error:  # a file problem not named more precisely on the way
                    if _debug["on"]:
                        traceback.print_exc()
                    where = f"{error.filename}: " if error.filename else ""
                    print(f"{prog}: error: {where}{_one_line(error.strerror or error)}",
                          file=sys.stderr)
                    return 2
                except Exception as error:  # pylint: disable=broad-except
                    if _debug["on"]:
                        traceback.print_exc()
                    code = getattr(error, "exit_code", None)
                    hint = "" if _debug["on"] else "; --debug shows the traceback"
                    message = str(error) if code is not None else (
                        f"{type(error).__name__}: {error} (an internal error{hint})")
                    print(f"{prog}: error: {_one_line(message)}", file=sys.stderr)
                    return code or 1
        return run
    return wrap


def _warn(line: str) -> None:
    print(line, file=sys.stderr)


def parse_env_args(items: Sequence[str]) -> Dict[str, object]:
    """``["obs=visual", "length=10"]`` -> ``{"obs": "visual", "length": 10}`` (YAML scalars)."""
    import yaml  # here: the commands' module loads before their signal handlers exist
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env-args takes key=value pairs, got '{item}'")
        out[key] = yaml.safe_load(value) if value else ""
    return out


def _add_env_arguments(parser: argparse.ArgumentParser) -> None:
    from tftrainers.envs import ENV_ID_HELP
    parser.add_argument("env_id", help=f"the environment: {ENV_ID_HELP}")
    parser.add_argument("--env-args", nargs="*", default=[], metavar="KEY=VALUE",
                        help="the environment's own arguments, e.g. obs=visual")
    parser.add_argument("--num-areas", type=int, default=None,
                        help="training areas of a built-in env, or copies of a gym or "
                             "pettingzoo env")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env and the policy")
    parser.add_argument("--base-port", type=int, default=None,
                        help="a Unity build's port (default 5005)")
    parser.add_argument("--no-graphics", action="store_true",
                        help="run a Unity build with -nographics -batchmode")
    parser.add_argument("--timeout-wait", type=int, default=60, metavar="SECONDS",
                        help="how long to wait for each message of a Unity build")


def _add_unity_arguments(parser: argparse.ArgumentParser) -> None:
    """ML-Agents' flags for Unity players (env_settings.base_port, engine_settings.*)."""
    parser.add_argument("--base-port", type=int, default=None,
                        help="first port of Unity players (worker N: BASE_PORT + N; default "
                             "5005, the Editor 5004)")
    parser.add_argument("--no-graphics", action="store_true", default=None,
                        help="run Unity players with -nographics -batchmode")
    for flag, kind, what in (("width", int, "window width"), ("height", int, "window height"),
                             ("quality-level", int, "Unity quality level"),
                             ("time-scale", float, "simulation speed (default 20)"),
                             ("target-frame-rate", int, "target frame rate (-1: unlimited)"),
                             ("capture-frame-rate", int, "capture frame rate")):
        parser.add_argument(f"--{flag}", type=kind, default=None,
                            help=f"engine_settings.{flag.replace('-', '_')}: the player's "
                                 f"{what}")


def _add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    from tftrainers.evaluate import POLICY_HELP
    parser.add_argument("--policy", required=True, help=POLICY_HELP)
    parser.add_argument("--deterministic", action="store_true",
                        help="take the most likely actions instead of sampling")


def _make_env(parser: argparse.ArgumentParser, args: argparse.Namespace):
    """The env of ``_add_env_arguments``' flags; a bad id or env arg is a usage error."""
    from tftrainers.envs import make
    from tftrainers.envs.unity import is_unity_env_id
    player = {}
    if is_unity_env_id(args.env_id):
        player = {"no_graphics": args.no_graphics, "timeout_wait": args.timeout_wait}
        if args.base_port is not None:
            player["base_port"] = args.base_port
    try:
        return make(args.env_id, seed=args.seed, num_areas=args.num_areas,
                    **parse_env_args(args.env_args), **player)
    except (ValueError, ImportError) as error:
        parser.error(str(error))


def _make_policy(parser: argparse.ArgumentParser, args: argparse.Namespace, env,
                 what: str = "policy"):
    """The policy of ``_add_policy_arguments``' flags (``what="opponent"``: of
    ``--opponent``, seeded apart); an unusable one is a usage error."""
    from tftrainers.evaluate import make_policy
    name, seed = getattr(args, what), args.seed + (what == "opponent")
    try:
        # Held: Ctrl-C while TensorFlow imports would leave its half-built objects behind.
        with held(), quiet_tensorflow_import():
            return make_policy(name, env, seed=seed, deterministic=args.deterministic,
                               what=what)
    except ValueError as error:  # includes ConfigError and CheckpointError
        message = str(error)
        parser.error(f"--opponent {message}" if what == "opponent" and not message.startswith(
            "unknown opponent") else message)


@_command("tftrainers-evaluate")
def evaluate_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-evaluate ENV_ID --policy P [--opponent O]``: prints one JSON line per
    behavior (with ``--opponent``: one for the matches), last."""
    from tftrainers.evaluate import evaluate, evaluate_matches, team_behaviors

    parser = _Parser(prog="tftrainers-evaluate",
                     description="Run whole episodes of a policy and report its return.")
    _add_env_arguments(parser)
    _add_policy_arguments(parser)
    parser.add_argument("--opponent", default=None,
                        help="in a game of two teams (builtin:Tennis, builtin:SoccerTwos), "
                             "play matches against this policy and report wins, draws and "
                             "losses: the policy plays team 0 in half the matches, team 1 in "
                             "the other half; the same forms as --policy")
    parser.add_argument("--first-to", type=int, default=1, metavar="N",
                        help="with --opponent: a match is won by the first team to win N "
                             "episodes (rallies, goals) of its area; 1: every episode is a "
                             "match")
    parser.add_argument("--episodes", type=int, default=10,
                        help="episodes per behavior (with --opponent: matches)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if args.first_to < 1:
        parser.error(f"--first-to must be >= 1, got {args.first_to}")
    if args.first_to > 1 and args.opponent is None:
        parser.error("--first-to counts matches against an --opponent; give one")
    with _make_env(parser, args) as env:
        if args.opponent is not None:
            try:
                team_behaviors(env)
            except ValueError as error:
                parser.error(str(error))
            policy = _make_policy(parser, args, env)
            opponent = _make_policy(parser, args, env, what="opponent")
            result = evaluate_matches(env, policy, opponent, matches=args.episodes,
                                      first_to=args.first_to)
            first_to = f" (first to {args.first_to})" if args.first_to > 1 else ""
            print(f"{result['behavior']}: {result['matches']} matches{first_to} of {args.policy} "
                  f"against {args.opponent}: {result['wins']} won, {result['draws']} drawn, "
                  f"{result['losses']} lost (win rate {result['win_rate']:.3f}), mean return "
                  f"{result['mean_return']:.3f} +- {result['std_return']:.3f}",
                  file=sys.stderr)
            print(json.dumps(result))
            return 0
        policy = _make_policy(parser, args, env)
        try:
            results = evaluate(env, policy, episodes=args.episodes)
        except ValueError as error:
            parser.error(str(error))
    for result in results.values():
        group = (f", {result['group_episodes']} group episodes, mean group reward "
                 f"{result['mean_group_reward']:.3f} +- {result['std_group_reward']:.3f}"
                 if "mean_group_reward" in result else "")
        print(f"{result['behavior']}: {result['episodes']} episodes, mean reward "
              f"{result['mean_reward']:.3f} +- {result['std_reward']:.3f}, mean length "
              f"{result['mean_episode_length']:.1f}{group}", file=sys.stderr)
    for result in results.values():
        print(json.dumps(result))
    return 0


@_command("tftrainers-learn", interrupted=" before training started; nothing to save",
          hold=True)
def learn_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-learn CONFIG``: train (or run in inference) as ``mlagents-learn`` does."""
    from tftrainers.api import TrainingError, TrainingFailed, resolve_options, train_options

    parser = _Parser(prog="tftrainers-learn",
                     description="Train behaviors from an ML-Agents-style YAML config.")
    parser.add_argument("config", help="the YAML config (ML-Agents schema)")
    parser.add_argument("--env", dest="env_path", default=None,
                        help="the environment, overriding env_settings.env_path: builtin:NAME, "
                             "gym:ID, pettingzoo:MODULE.ENV, python:MODULE:NAME or the path of a "
                             "Unity build (none anywhere: the Unity Editor)")
    parser.add_argument("--env-args", nargs="*", default=None, metavar="KEY=VALUE",
                        help="overrides env_settings.env_args, e.g. obs=visual; for a Unity "
                             "build, the player's own arguments")
    parser.add_argument("--run-id", default=None, help="results go to RESULTS_DIR/RUN_ID")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--resume", action="store_true", default=None,
                       help="continue the run RUN_ID from its latest checkpoint")
    group.add_argument("--force", action="store_true", default=None,
                       help="overwrite the run RUN_ID if it exists")
    parser.add_argument("--initialize-from", default=None, metavar="RUN",
                        help="start from the weights of run RUN (at step 0)")
    parser.add_argument("--inference", action="store_true", default=None,
                        help="run the policy without training it")
    parser.add_argument("--num-envs", type=int, default=None,
                        help="environment instances (inline: one env with NUM_ENVS x "
                             "NUM_AREAS areas; with workers: one instance per worker)")
    parser.add_argument("--workers", choices=("auto", "inline", "process"), default=None,
                        help="where the instances step (env_settings.workers; auto: worker "
                             "processes when NUM_ENVS > 1 and the env is slow)")
    parser.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                        help="run the env workers as Ray actors (auto: the running cluster, "
                             "else a local one)")
    parser.add_argument("--timeout-wait", type=int, default=None, metavar="SECONDS",
                        help="restart an env worker silent this long (default 60)")
    parser.add_argument("--num-areas", type=int, default=None,
                        help="training areas per instance (built-in envs)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (-1: random)")
    parser.add_argument("--results-dir", default=None, help="folder of all runs (results)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the resolved configuration as YAML and exit")
    _add_unity_arguments(parser)
    args = parser.parse_args(argv)
    try:
        overrides = {key: getattr(args, key) for key in (
            "env_path", "run_id", "resume", "force", "initialize_from", "inference", "num_envs",
            "num_areas", "seed", "results_dir", "workers", "ray_address", "timeout_wait",
            "base_port", "no_graphics", "width", "height", "quality_level", "time_scale",
            "target_frame_rate", "capture_frame_rate")}
        if args.env_args is not None:
            # key=value items are env arguments; anything else, a Unity player's arguments.
            overrides["env_args"] = (parse_env_args(args.env_args)
                                     if all("=" in a and not a.startswith("=")
                                            for a in args.env_args) else list(args.env_args))
        # The Python API does the rest (tftrainers.train): argv is only parsed here.
        options = resolve_options(args.config, None, {k: v for k, v in overrides.items()
                                                      if v is not None})
        for note in options.notes:
            print(f"[NOTE] {note}", file=sys.stderr)
        if args.dry_run:
            print(options.to_yaml(), end="")
            return 0
        return train_options(options, signals=True).exit_code
    except TrainingFailed:
        raise  # exit code 1, printed by ``_command``
    except (TrainingError, ValueError) as error:  # ConfigError; bad env ids and env args
        parser.error(str(error))


@_command("tftrainers-export")
def export_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-export results/RUN``: ONNX and SavedModel (or ``--format`` onnx,
    savedmodel, keras, tflite) of a run's latest checkpoints."""
    from tftrainers.checkpoint import CheckpointError
    from tftrainers.export import DEFAULT_OPSET, SUPPORTED_OPSETS
    from tftrainers.export.artifacts import ALL_FORMATS, FORMATS, export_policy
    from tftrainers.tf_utils.onnx_function import OnnxExportError
    from tftrainers.runs import load_policy, run_behaviors

    parser = _Parser(prog="tftrainers-export",
                     description="Export a training run's latest policies for deployment.")
    parser.add_argument("run", help="the run folder, e.g. results/RUN")
    parser.add_argument("--behavior", default=None, help="one behavior (default: all)")
    parser.add_argument("--format", nargs="+", choices=ALL_FORMATS, default=list(FORMATS),
                        help="what to write: onnx, savedmodel (the default two), keras "
                             "(.keras), tflite (float32 .tflite and dynamic-range quantised "
                             ".int8.tflite)")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                        help=f"ONNX opset, {SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1}"
                             f" (Unity Sentis range); default {DEFAULT_OPSET}")
    parser.add_argument("--output", default=None,
                        help="folder to write to (default: the run folder, as training does)")
    args = parser.parse_args(argv)
    if args.opset not in SUPPORTED_OPSETS:
        parser.error(f"--opset {args.opset} is not supported; allowed: "
                     f"{SUPPORTED_OPSETS.start}..{SUPPORTED_OPSETS.stop - 1}")
    try:
        behaviors = [args.behavior] if args.behavior else run_behaviors(args.run)
        if not behaviors:
            raise CheckpointError(f"{args.run}: the run has no trained behavior")
        for behavior in behaviors:
            # Held: a behavior's files are all written (renamed into place) before Ctrl-C
            # stops the command, never left under their temporary names.
            with held():
                with quiet_tensorflow_import():
                    policy, step, critic = load_policy(args.run, behavior, with_step=True,
                                                       with_critic=True, log=_warn)
                written = export_policy(policy, behavior, args.output or args.run, step,
                                        formats=args.format, opset=args.opset, critic=critic)
            for path in written:
                print(path)
    except (CheckpointError, ValueError, OnnxExportError) as error:
        parser.error(str(error))
    return 0


@_command("tftrainers-record")
def record_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-record ENV_ID --policy P --episodes N --output FILE.demo``: writes a Unity
    ``.demo`` file of whole episodes; prints one JSON line, last."""
    from tftrainers.record import record

    parser = _Parser(prog="tftrainers-record",
                     description="Record demonstrations of a policy to a Unity .demo file.")
    _add_env_arguments(parser)
    _add_policy_arguments(parser)
    parser.add_argument("--episodes", type=int, required=True, help="whole episodes to record")
    parser.add_argument("--output", required=True, metavar="FILE.demo",
                        help="the file to write (replaced if it exists)")
    parser.add_argument("--behavior", default=None,
                        help="the behavior to record (default: the env's only behavior)")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if not args.output.endswith(".demo"):
        parser.error(f"--output must end with .demo (ML-Agents reads only .demo files), "
                     f"got '{args.output}'")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        parser.error(f"--output {args.output}: no such folder {folder}")
    with _make_env(parser, args) as env:
        policy = _make_policy(parser, args, env)
        try:
            summary = record(env, policy, args.output, args.episodes, args.behavior)
        except (ValueError, RuntimeError) as error:
            parser.error(str(error))
        except OSError as error:
            parser.error(f"--output {args.output}: {error.strerror}")
    print(f"{summary.behavior}: recorded {summary.episodes} episodes, {summary.steps} steps, "
          f"mean return {summary.mean_reward:.3f} to {summary.path} "
          f"({os.path.getsize(summary.path) / 1024:.1f} KiB)", file=sys.stderr)
    print(json.dumps(summary._asdict()))
    return 0


def _run_and_exit(main: Callable[[], int]) -> NoReturn:
    """Runs a command and ends the process without the interpreter's teardown, which with
    TensorFlow loaded takes about a second. Everything the commands write (checkpoints,
    exports, stats files) is closed before they return; output streams are flushed here.
    Errors (exit code 2) and Ctrl-C still leave through the normal path."""
    quiet_dependencies()
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def learn() -> NoReturn:
    _run_and_exit(learn_main)


def evaluate() -> NoReturn:
    _run_and_exit(evaluate_main)


def export() -> NoReturn:
    _run_and_exit(export_main)


def record() -> NoReturn:
    _run_and_exit(record_main)


if __name__ == "__main__":
    sys.exit(evaluate_main())
