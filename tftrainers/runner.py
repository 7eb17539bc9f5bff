"""From resolved settings to a finished run: results folder, environment, trainers, loop.

    options = load_run_options("configs/ppo/Ball3D.yaml", overrides={"run_id": "ball"})
    run_training(options)       # results/ball/{configuration.yaml, run_logs/, Ball3D/...}

The loop, once per env step: for each behavior, hand its decision and terminal steps to
its trainer, which records them and answers with actions from one compiled policy call;
step the env; let each trainer advance (process finished trajectories, update when its
buffer is full, write stats and checkpoints). Ctrl-C saves every trainer and exits cleanly.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import sys
from typing import Dict, List, Optional

from tftrainers.settings import ConfigError, RunOptions


class RunError(ValueError):
    """A problem with the run's folders or checkpoints; one line for the user."""


def run_dir_of(options: RunOptions) -> str:
    cs = options.checkpoint_settings
    return os.path.join(cs.results_dir, cs.run_id)


def prepare_run_dir(options: RunOptions) -> str:
    """Creates (or, with --force, recreates) the run folder; refuses to clobber a run."""
    cs = options.checkpoint_settings
    run_dir = run_dir_of(options)
    exists = os.path.isdir(run_dir) and os.listdir(run_dir)
    if cs.resume or cs.inference and cs.load_model:
        if not exists:
            raise RunError(f"{run_dir}: no run to resume; start it without --resume")
    elif exists and not cs.inference:
        if not cs.force:
            raise RunError(f"{run_dir}: a run with id '{cs.run_id}' exists; use --resume to "
                           f"continue it, --force to overwrite it, or another --run-id")
        shutil.rmtree(run_dir)
    os.makedirs(os.path.join(run_dir, "run_logs"), exist_ok=True)
    return run_dir


def make_env(options: RunOptions, seed: int):
    """The environment of ``env_settings``: ``num_envs`` instances of built-in and gym envs
    are one env with ``num_envs x num_areas`` areas (see ``envs.make``)."""
    from tftrainers.envs import make
    es = options.env_settings
    if not es.env_path:
        raise ConfigError("no environment: set env_settings.env_path in the config or pass "
                          "--env builtin:NAME / gym:ID")
    return make(es.env_path, seed=seed, num_areas=es.num_areas, num_envs=es.num_envs,
                **(es.env_args or {}))


def resolve_seed(options: RunOptions) -> int:
    seed = options.env_settings.seed
    if seed == -1:  # as ML-Agents: a random seed, recorded in configuration.yaml
        seed = random.SystemRandom().randrange(0, 2**31 - 1)
        options.env_settings.seed = seed
    return seed


def run_training(options: RunOptions, log=print) -> int:
    """Runs the training (or inference) described by ``options``; returns an exit code.

    Everything a user can get wrong (the env id and args, a behavior without settings, the
    run folder) is checked before TensorFlow is imported, and before ``--force`` removes an
    earlier run."""
    cs = options.checkpoint_settings
    seed = resolve_seed(options)
    env = make_env(options, seed)
    try:
        settings = {name: options.settings_for(name) for name in sorted(env.behavior_specs)}
        run_dir = prepare_run_dir(options)
        if not cs.resume:
            with open(os.path.join(run_dir, "configuration.yaml"), "w") as f:
                f.write(options.to_yaml())
        _configure_tensorflow(options, log)
        return _train(options, env, settings, run_dir, seed, log)
    finally:
        env.close()


def _configure_tensorflow(options: RunOptions, log) -> None:
    """Imports TensorFlow (quietly, see console.py) and sets its devices and thread pools."""
    from tftrainers.console import import_tensorflow
    tf = import_tensorflow()
    ts = options.tf_settings
    if ts.device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    elif ts.device == "gpu" and not tf.config.list_physical_devices("GPU"):
        log("[WARNING] tf_settings.device is gpu, but TensorFlow finds no GPU (no CUDA driver "
            "or no TensorFlow GPU build here): training runs on the CPU")
    if ts.num_threads:
        threaded = any(b.threaded for b in options.behaviors.values()) or bool(
            options.default_settings and options.default_settings.threaded)
        try:
            # A threaded update and the act call each need an inter-op thread to overlap.
            # Otherwise every call runs in the caller's thread (a negative count): no
            # hand-off to a pool thread that has gone to sleep between env steps.
            tf.config.threading.set_inter_op_parallelism_threads(
                max(ts.num_threads, 2) if threaded else -1)
            tf.config.threading.set_intra_op_parallelism_threads(ts.num_threads)
        except RuntimeError:  # TF already running in this process (a second run): keep its pools
            pass


def _train(options: RunOptions, env, settings, run_dir: str, seed: int, log) -> int:
    from tftrainers.trainers.registry import create_trainer
    from tftrainers.stats import ConsoleWriter, CSVWriter, ProgressDisplay, TensorBoardWriter

    cs, ts = options.checkpoint_settings, options.tf_settings
    progress = ProgressDisplay()
    writers = [TensorBoardWriter(run_dir), ConsoleWriter(progress=progress), CSVWriter(run_dir)]
    trainers = {}
    try:
        for index, (name, spec) in enumerate(sorted(env.behavior_specs.items())):
            trainers[name] = create_trainer(name, spec, settings[name], run_dir,
                                            seed=seed + index, writers=writers,
                                            progress=progress, inference=cs.inference,
                                            jit_compile=ts.jit_compile,
                                            act_runtime=ts.act_runtime, log=log)
            if cs.resume:
                trainers[name].restore_latest()
            elif cs.initialize_from:
                trainers[name].initialize_from(os.path.join(cs.results_dir, cs.initialize_from))
            elif settings[name].init_path:
                trainers[name].initialize_from(settings[name].init_path)
        log(f"[INFO] Run '{cs.run_id}': results in {run_dir}; behaviors "
            f"{', '.join(trainers)} on {options.env_settings.env_path} (seed {seed}).")
        interrupted = _loop(env, trainers)
        for trainer in trainers.values():
            trainer.save()  # no-op for a trainer that saved its final step already
            latest = trainer.checkpointer.latest()
            if latest and not trainer.inference:
                log(f"[INFO] {trainer.behavior_name}: latest checkpoint {latest}")
        if interrupted:
            log("[INFO] Interrupted: checkpoints saved; continue with --resume.")
        return 0
    finally:
        for writer in writers:
            writer.close()


def _loop(env, trainers) -> bool:
    """Steps until every trainer is done; returns True when stopped by Ctrl-C."""
    stop = {"requested": False}

    def request_stop(signum, frame):
        if stop["requested"]:  # a second Ctrl-C: stop at once (checkpoints may be older)
            raise KeyboardInterrupt
        stop["requested"] = True

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        env.reset()
        while not stop["requested"] and not all(t.done for t in trainers.values()):
            for name, trainer in trainers.items():
                decision, terminal = env.get_steps(name)
                actions = trainer.act(decision, terminal)
                if len(decision):
                    env.set_actions(name, actions)
            env.step()
            for trainer in trainers.values():
                trainer.advance()
    finally:
        signal.signal(signal.SIGINT, previous)
    return stop["requested"]
