"""Console entry points. Bad usage prints one line and exits with code 2.

``learn_main`` / ``evaluate_main`` / ``export_main`` return an exit code (tests call them);
the installed commands run them through ``_run_and_exit``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Callable, Dict, List, NoReturn, Optional, Sequence

import yaml

from tftrainers.console import quiet_dependencies, quiet_tensorflow_import


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit code 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_env_args(items: Sequence[str]) -> Dict[str, object]:
    """``["obs=visual", "length=10"]`` -> ``{"obs": "visual", "length": 10}`` (YAML scalars)."""
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
                        help="training areas of a built-in env, or copies of a gym env")
    parser.add_argument("--seed", type=int, default=0, help="seed of the env and the policy")


def evaluate_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-evaluate ENV_ID --policy P``: prints one JSON line per behavior, last."""
    from tftrainers.evaluate import POLICY_HELP, evaluate, make_policy
    from tftrainers.envs import make

    parser = _Parser(prog="tftrainers-evaluate",
                     description="Run whole episodes of a policy and report its return.")
    _add_env_arguments(parser)
    parser.add_argument("--policy", required=True, help=POLICY_HELP)
    parser.add_argument("--episodes", type=int, default=10, help="episodes per behavior")
    parser.add_argument("--deterministic", action="store_true",
                        help="take the most likely actions instead of sampling")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    try:
        env = make(args.env_id, seed=args.seed, num_areas=args.num_areas,
                   **parse_env_args(args.env_args))
    except (ValueError, ImportError) as error:
        parser.error(str(error))
    with env:
        try:
            with quiet_tensorflow_import():
                policy = make_policy(args.policy, env, seed=args.seed,
                                     deterministic=args.deterministic)
            results = evaluate(env, policy, episodes=args.episodes)
        except ValueError as error:  # includes ConfigError and CheckpointError
            parser.error(str(error))
    for result in results.values():
        print(f"{result['behavior']}: {result['episodes']} episodes, mean reward "
              f"{result['mean_reward']:.3f} +- {result['std_reward']:.3f}, mean length "
              f"{result['mean_episode_length']:.1f}", file=sys.stderr)
    for result in results.values():
        print(json.dumps(result))
    return 0


def learn_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-learn CONFIG``: train (or run in inference) as ``mlagents-learn`` does."""
    from tftrainers.checkpoint import CheckpointError
    from tftrainers.runner import RunError, run_training
    from tftrainers.settings import ConfigError, load_run_options

    parser = _Parser(prog="tftrainers-learn",
                     description="Train behaviors from an ML-Agents-style YAML config.")
    parser.add_argument("config", help="the YAML config (ML-Agents schema)")
    parser.add_argument("--env", dest="env_path", default=None,
                        help="the environment, overriding env_settings.env_path: builtin:NAME "
                             "or gym:ID")
    parser.add_argument("--env-args", nargs="*", default=None, metavar="KEY=VALUE",
                        help="overrides env_settings.env_args, e.g. obs=visual")
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
                        help="environment instances (built-in and gym envs: one env with "
                             "NUM_ENVS x NUM_AREAS areas)")
    parser.add_argument("--num-areas", type=int, default=None,
                        help="training areas per instance (built-in envs)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (-1: random)")
    parser.add_argument("--results-dir", default=None, help="folder of all runs (results)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the resolved configuration as YAML and exit")
    args = parser.parse_args(argv)
    try:
        overrides = {key: getattr(args, key) for key in (
            "env_path", "run_id", "resume", "force", "initialize_from", "inference", "num_envs",
            "num_areas", "seed", "results_dir")}
        if args.env_args is not None:
            overrides["env_args"] = parse_env_args(args.env_args)
        options = load_run_options(args.config, overrides)
        for note in options.notes:
            print(f"[NOTE] {note}", file=sys.stderr)
        if args.dry_run:
            print(options.to_yaml(), end="")
            return 0
        return run_training(options)
    except (ConfigError, RunError, CheckpointError, ImportError) as error:
        parser.error(str(error))
    except ValueError as error:  # bad env ids and env args surface as ValueError
        parser.error(str(error))


def export_main(argv: Optional[List[str]] = None) -> int:
    """``tftrainers-export results/RUN``: ONNX and SavedModel of a run's latest checkpoints."""
    from tftrainers.checkpoint import CheckpointError
    from tftrainers.export import DEFAULT_OPSET, SUPPORTED_OPSETS
    from tftrainers.export.artifacts import export_policy
    from tftrainers.runs import load_policy, run_behaviors

    parser = _Parser(prog="tftrainers-export",
                     description="Export a training run's latest policies for deployment.")
    parser.add_argument("run", help="the run folder, e.g. results/RUN")
    parser.add_argument("--behavior", default=None, help="one behavior (default: all)")
    parser.add_argument("--format", nargs="+", choices=("onnx", "savedmodel"),
                        default=["onnx", "savedmodel"], help="what to write")
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
            with quiet_tensorflow_import():
                policy, step = load_policy(args.run, behavior, with_step=True)
            for path in export_policy(policy, behavior, args.output or args.run, step,
                                      formats=args.format, opset=args.opset):
                print(path)
    except (CheckpointError, ValueError) as error:
        parser.error(str(error))
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


if __name__ == "__main__":
    sys.exit(evaluate_main())
