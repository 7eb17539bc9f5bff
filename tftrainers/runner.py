"""From resolved settings to a finished run: results folder, environment, trainers, loop.

    options = load_run_options("configs/ppo/Ball3D.yaml", overrides={"run_id": "ball"})
    run_training(options)       # results/ball/{configuration.yaml, run_logs/, Ball3D/...}

The loop, once per env step: for each behavior, hand its decision and terminal steps to
its AgentManager (the acting side), which checks them at the boundary (``envs.checks``),
records them and answers with actions from one policy call; step the env; let each
trainer advance (drain its managers' trajectories, update when its buffer is full, publish
the new weights, write stats and checkpoints).

What can go wrong, and what the run does then:
- SIGINT / SIGTERM (``signals``): during start-up the signal is held and start-up stops at
  its next ``stop.check()``, between steps that leave nothing half-made (exit 128 + signum,
  nothing to save); in the loop, the loop stops, every trainer saves, exit 128 + signum.
  The Python API (``api.train``) installs no handler: its ``StopFlag`` is set by callbacks,
  and a KeyboardInterrupt in the loop saves every trainer and is raised again.
- The env raises, or sends bad data (NaN/inf, a wrong shape or dtype), or an update is not
  finite (refused, weights kept): every trainer saves what is finite, then ``RunFailed``
  (one line naming the env and the env step; exit code 1).
- The run folder (``run_folder``): unsafe run ids, --force on a folder that is not a run,
  and a second process on the same run are refused before anything is written.
"""
from __future__ import annotations

import os

from tftrainers.run_folder import CONFIG_FILE, RunError, RunFolder, write_atomically
# The TensorFlow-free part of a run; its names are importable from here as before.
from tftrainers.run_setup import (SLOW_STEP_MS, EnvStepError, RunFailed,  # noqa: F401
                                  environment_parameters_of, env_args_of, env_label,
                                  env_target, make_env, make_env_instance, measure_step_ms,
                                  open_env, open_folder_for_player, record_configuration,
                                  resolve_seed, unwritable)
from tftrainers.settings import ConfigError, RunOptions
from tftrainers.signals import signal_name, stop_signals
from tftrainers.timers import TIMERS, TIMERS_FILE, process_start_time

#: Whether a run started in this process already (the next one's start-up is timed from
#: its own start, not the process's).
_RUNS_STARTED = []


def run_training(options: RunOptions, log=print, env=None, stop=None,
                 callbacks=None) -> int:
    """Runs the training (or inference) described by ``options``.

    Everything a user can get wrong (the env id and args, a behavior without settings, the
    run folder) is checked before TensorFlow is imported, and before ``--force`` removes an
    earlier run.

    Args:
        env: an env object or factory (the Python API), instead of ``env_path``.
        stop: what stops the run (``signals.StopSignals`` or the API's ``StopFlag``);
            None installs the command's SIGINT/SIGTERM handlers (``stop_signals``).
        callbacks: the API's ``CallbackList`` (summaries, checkpoints), or None.

    Returns:
        0, or 128 + the signal number when SIGINT/SIGTERM stopped it (after saving).

    Raises:
        RunError: the run folder (one line, a usage error).
        RunFailed: the env failed or sent bad data, or an update was not finite; every
            trainer saved what it could first.
        KeyboardInterrupt: (only without signal handlers: the Python API) after every
            trainer saved.
    """
    if stop is None:
        # Held: a signal during start-up stops it at the next ``stop.check()``, never
        # inside TensorFlow's import, a network's construction or a file being written.
        with stop_signals("tftrainers-learn", hold=True) as stop:
            return run_training(options, log, env, stop, callbacks)
    _start_timers()
    stop.check()
    seed = resolve_seed(options)
    # A Unity player writes its log into the run folder: opened first (below otherwise).
    folder = open_folder_for_player(options) if env is None else None
    try:
        with TIMERS.timed("open env"):
            env_object, mode = open_env(options, seed, env)
    except BaseException:
        if folder is not None:
            folder.close()
        raise
    try:
        try:
            stop.check()
            settings = {name: options.settings_for(name)
                        for name in sorted(env_object.behavior_specs)}
            from tftrainers.trainers.ghost.teams import check_self_play
            check_self_play(settings, env_object.behavior_specs, options.tf_settings.act_runtime)
            parameters = environment_parameters_of(options, seed, env_object)
        except BaseException:
            if folder is not None:
                folder.close()
            raise
        # Checked, locked, cleared with --force: before TensorFlow, so a refusal is quick.
        folder = folder or RunFolder.open(options.checkpoint_settings)
        try:
            try:
                # A resume writes it once its checks have passed (see ``_run``).
                if not options.checkpoint_settings.resume:
                    write_atomically(os.path.join(folder.path, CONFIG_FILE),
                                     options.to_yaml())
                os.makedirs(os.path.join(folder.path, "run_logs"), exist_ok=True)
            except OSError as error:
                raise unwritable(error, folder.path) from None
            stop.check()
            with TIMERS.timed("import tensorflow"):
                _configure_tensorflow(options, log)
            stop.check()
            return _run(options, folder, env_object, mode, settings, seed, stop, log,
                        env_label(options, env), env, callbacks, parameters)
        finally:
            folder.close()
    finally:
        env_object.close()


def _start_timers() -> None:
    """Starts the run's timers: from the process's start for its first run (the Python
    start and the imports before this call are then the start-up's first phase), else
    from now. The "start-up" phase stays open until the first env step."""
    import time
    now = time.time()
    start = None if _RUNS_STARTED else process_start_time()
    _RUNS_STARTED.append(now)
    TIMERS.reset(start if start is not None and start <= now else now)
    TIMERS.begin("start-up")
    if start is not None and start <= now:
        TIMERS.add("python start and imports", now - TIMERS.start_wall)


def _first_step() -> None:
    """Closes the "start-up" phase: process (or run) start to the first env step."""
    TIMERS.end("start-up", TIMERS.elapsed())


def _write_timers(run_dir: str, log) -> None:
    """The final timers.json and its summary line (a failed write is a note, not a
    failure: the run's results are saved already)."""
    path = os.path.join(run_dir, "run_logs", TIMERS_FILE)
    try:
        TIMERS.write(path)
    except OSError as error:
        log(f"[WARNING] {path}: not written ({error.strerror or error})")
        return
    log(TIMERS.summary_line(path))


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


def _run(options: RunOptions, folder: RunFolder, env, mode: str, settings, seed: int, stop,
         log, env_id: str, target=None, callbacks=None, parameters=None) -> int:
    import dataclasses
    import time
    import numpy as np
    from tftrainers.runs import check_compatible
    from tftrainers.trainers.context import TrainerContext
    from tftrainers.trainers.registry import create_trainer
    from tftrainers.stats import ConsoleWriter, CSVWriter, ProgressDisplay, TensorBoardWriter

    cs, ts = options.checkpoint_settings, options.tf_settings
    run_dir = folder.path
    removed = folder.remove_leftovers()
    if removed:
        log(f"[INFO] Removed {len(removed)} leftover(s) of an interrupted run: "
            f"{', '.join(os.path.relpath(p, run_dir) for p in removed[:5])}"
            f"{', ...' if len(removed) > 5 else ''}")
    progress = ProgressDisplay()
    if getattr(log, "silent", False):  # the API's verbose=0: no status line either
        progress.enabled = False
    # The summary lines follow ``log`` when a caller routes the run's lines elsewhere.
    console = ConsoleWriter(progress=progress, log=None if log is print else log)
    writers = [TensorBoardWriter(run_dir), console, CSVWriter(run_dir)]
    if callbacks is not None:
        writers.append(callbacks.writer)  # last: the files have the summary when it runs
    context = TrainerContext(run_dir, seed=seed, writers=tuple(writers), progress=progress,
                             inference=cs.inference, jit_compile=ts.jit_compile,
                             act_runtime=ts.act_runtime, log=log)
    trainers = {}
    controller = None  # self-play: which behavior's team learns (trainers/ghost)
    creating = time.perf_counter()
    try:
        for index, (name, spec, teams) in enumerate(_learners(env.behavior_specs, settings)):
            behavior = teams[min(teams)] if teams else name  # whose settings
            # Before any checkpoint is read: a changed setting is named, not a tensor.
            if cs.resume:
                check_compatible(run_dir, name, spec, settings[behavior], "resume")
            elif cs.initialize_from:
                check_compatible(os.path.join(cs.results_dir, cs.initialize_from), name, spec,
                                 settings[behavior], "initialize")
            elif settings[behavior].init_path:
                check_compatible(settings[behavior].init_path, name, spec, settings[behavior],
                                 "initialize")
            trainers[name] = create_trainer(
                name, spec, settings[behavior], dataclasses.replace(context, seed=seed + index))
            if teams:  # self-play: one learner for the teams of ``name``
                from tftrainers.trainers.ghost.trainer import GhostController, GhostTrainer
                controller = controller or GhostController()
                trainers[name] = GhostTrainer(trainers[name], teams, controller)
            if cs.resume:
                trainers[name].restore_latest()
            elif cs.initialize_from:
                trainers[name].initialize_from(os.path.join(cs.results_dir, cs.initialize_from))
            elif settings[behavior].init_path:
                trainers[name].initialize_from(settings[behavior].init_path)
            stop.check()
        TIMERS.add("create trainers", time.perf_counter() - creating)
        if controller is not None and cs.resume:
            controller.restored()  # one learning team, as the checkpoints say
        curriculum = _start_curriculum(parameters, options, trainers, log)
        if cs.resume:  # every check passed: from here the run trains with these settings
            record_configuration(options, run_dir, log)
        managers, pool = {}, None
        if mode == "inline":
            for name, trainer in trainers.items():
                for behavior in _acting_behaviors(name, trainer):
                    managers[behavior] = (trainer.create_agent_manager(env, behavior)
                                          if behavior != name else
                                          trainer.create_agent_manager(env))
                    trainer.subscribe(managers[behavior])
            _connect_imitation(env, trainers, managers)
        else:
            imitating = [n for n, t in settings.items() if t.trainer_type == "bc"]
            if imitating:
                raise ConfigError(f"behaviors.{imitating[0]}: trainer_type bc runs its teacher "
                                  f"in the learner's process; use env_settings.workers: inline "
                                  f"(env workers run ppo and poca behaviors)")
        log(f"[INFO] Run '{cs.run_id}': results in {run_dir}; behaviors "
            f"{', '.join(trainers)} on {env_id} (seed {seed}).")
        if callbacks is not None:
            callbacks.start(trainers, stop)
        try:
            try:
                if mode != "inline":
                    env.close()  # it gave the specs; the workers run their own instances
                    with TIMERS.timed("launch workers"):
                        pool = _start_workers(options, mode, seed, trainers, log, target,
                                              env_id, curriculum)
                stop.defer()  # from here a signal stops the loop, and everything saves
                # Finite data whose sums overflow (rewards of 1e38) end in a refused update,
                # named in one line; NumPy's warnings on the way would only be noise.
                with np.errstate(over="ignore", invalid="ignore"):
                    if pool is None:
                        _loop(env, managers, trainers, stop, env_id, curriculum, log)
                    else:
                        _loop_workers(pool, trainers, stop, curriculum, log)
            finally:
                if pool is not None:
                    pool.close()  # before saving: no worker outlives a failed save
                    log(_workers_summary(pool))
        except KeyboardInterrupt:
            # Only without signal handlers (the Python API; the commands turn SIGINT into
            # ``stop.requested``): what was trained is saved, then the interrupt goes on.
            notes = _save_all(trainers, log, final=True)
            log(f"[INFO] Interrupted (KeyboardInterrupt): {notes}; continue with "
                f"resume=True.")
            raise
        except Exception as error:  # pylint: disable=broad-except
            # Whatever stopped the loop, what was trained is saved first.
            notes = _save_all(trainers, log)
            raise _failure(error, notes) from error
        notes = _save_all(trainers, log, final=True)
        _write_timers(run_dir, log)
        if callbacks is not None and callbacks.error is not None:
            raise RunFailed(f"{callbacks.error}; {notes}") from callbacks.error
        if stop.requested and stop.signum is not None:
            log(f"[INFO] Interrupted by {signal_name(stop.signum)}: {notes}; continue with "
                f"--resume.")
        elif stop.requested:
            log(f"[INFO] Stopped by {stop.reason}: {notes}.")
        return stop.exit_code
    finally:
        for writer in writers:
            writer.close()


def _learners(specs, settings):
    """``(name, spec, teams)`` per trainer, in the order of the env's behaviors: one per
    behavior, except that the teams of a self-play behavior (``Name?team=N``) share one
    trainer named ``Name`` (``teams``: team id -> behavior; None without self-play)."""
    from tftrainers.trainers.ghost.teams import self_play_teams
    teams = self_play_teams(settings)
    base_of = {behavior: base for base, group in teams.items() for behavior in group.values()}
    learners, seen = [], set()
    for name, spec in sorted(specs.items()):
        base = base_of.get(name)
        if base is None:
            learners.append((name, spec, None))
        elif base not in seen:
            seen.add(base)
            learners.append((base, spec, teams[base]))
    return learners


def _acting_behaviors(name: str, trainer):
    """The env behaviors ``trainer`` acts for: its own, or its teams' (self-play)."""
    return getattr(trainer, "team_behaviors", None) or [name]


def _connect_imitation(env, trainers, managers) -> None:
    """A BC student with ``brain_to_imitate`` records that behavior's steps as labels."""
    for name, trainer in trainers.items():
        source = getattr(trainer, "imitates", None)
        if not source or trainer.inference:
            continue
        key = f"behaviors.{name}.hyperparameters.brain_to_imitate"
        if source == name or source not in managers:
            others = [n for n in managers if n != name]
            raise ConfigError(f"{key}: '{source}' is not another behavior of the environment; "
                              f"it has {', '.join(others) or 'no other behavior'}")
        recorder = trainer.create_recorder(env.behavior_specs[source], source)
        managers[source].add_observer(recorder)
        trainer.subscribe(recorder)


def _failure(error: Exception, notes: str) -> Exception:
    """The one-line error a failed loop ends with: RunError (exit 2) for a file problem,
    RunFailed (exit 1) for the env, its data, a refused update, or a bug of ours."""
    from tftrainers.checkpoint import CheckpointError
    from tftrainers.envs.checks import EnvDataError
    from tftrainers.export.artifacts import ExportWriteError
    from tftrainers.trainers.finite import NonFiniteUpdateError
    from tftrainers.acting.worker_pool import WorkerFailed
    if isinstance(error, OSError):
        return RunError(f"{error.filename or 'the run folder'}: cannot be written "
                        f"({error.strerror or error}); {notes}")
    if isinstance(error, (CheckpointError, ExportWriteError)):
        return RunError(f"{error}; {notes}")
    if isinstance(error, (EnvStepError, EnvDataError, NonFiniteUpdateError, WorkerFailed)):
        return RunFailed(f"{error}; {notes}")
    reason = (str(error).strip().splitlines() or [""])[0][:300]
    return RunFailed(f"internal error {type(error).__name__}: {reason}; {notes} (--debug "
                     f"shows the traceback)")


def _save_all(trainers, log, final: bool = False) -> str:
    """Saves every trainer that has something to save; returns what happened, in words.
    A trainer whose save fails (weights not finite, a full disk) does not stop the others."""
    saved, failed = [], []
    for trainer in trainers.values():
        try:
            trainer.save()  # no-op for a trainer that saved its step already
            latest = trainer.checkpointer.latest()
        except Exception as error:  # pylint: disable=broad-except
            failed.append(f"{trainer.behavior_name} not saved ({error})")
            continue
        if latest and not trainer.inference:
            saved.append(f"{trainer.behavior_name} at step {trainer.step}")
            if final:
                log(f"[INFO] {trainer.behavior_name}: latest checkpoint {latest}")
    parts = ([f"checkpoints saved: {', '.join(saved)}"] if saved else []) + failed
    return "; ".join(parts) or "nothing to save"


def _start_curriculum(manager, options: RunOptions, trainers, log):
    """The lessons wired to the run's trainers (None without environment_parameters): the
    lessons of a resumed checkpoint restored, each parameter's lesson logged."""
    from tftrainers.environment_parameters import Curriculum
    if manager is None:
        return None
    curriculum = Curriculum(manager, trainers, resume=options.checkpoint_settings.resume)
    for name in manager.parameters:
        log(f"[INFO] {manager.describe(name)}")
    return curriculum


def _lessons_changed(curriculum, log) -> None:
    for line in curriculum.news():
        log(f"[INFO] {line}")


def _loop(env, managers, trainers, stop, env_id: str = "the environment", curriculum=None,
          log=print) -> None:
    """Steps until every trainer is done or a stop signal arrives.

    Raises:
        EnvStepError: an env call raised (naming the env, the call and the env step).
        EnvDataError: an AgentManager found bad data (prefixed with the env and the env
            step).
        NonFiniteUpdateError: an update was refused (prefixed with its behavior).
    """
    from tftrainers.acting import EnvCallError, call_env, env_error_line, step_env
    from tftrainers.envs.checks import EnvDataError
    from tftrainers.trainers.finite import NonFiniteUpdateError
    items = list(trainers.items())
    env_step = 0
    behavior = None
    try:
        if curriculum is not None:
            call_env("set_environment_parameters()", env.set_environment_parameters,
                     curriculum.manager.samplers())
        call_env("reset()", env.reset)
        while not stop.requested and not all(t.done for t in trainers.values()):
            step_env(env, managers)
            env_step += 1
            if env_step == 1:
                _first_step()
            for behavior, trainer in items:
                trainer.advance()
            behavior = None
            if curriculum is not None:
                changed, reset = curriculum.update()
                if changed:
                    _lessons_changed(curriculum, log)
                    call_env("set_environment_parameters()", env.set_environment_parameters,
                             curriculum.manager.samplers())
                    if reset:  # require_reset: every episode ends now, new ones start
                        for manager in managers.values():
                            manager.end_episodes()
                        call_env("reset()", env.reset)
    except EnvCallError as error:  # the env's, not ours (ours pass through as they are)
        raise EnvStepError(f"{env_error_line(env_id, error.call, env_step, error.error)} "
                           f"(--debug shows its traceback)") from error.error
    except EnvDataError as error:
        raise EnvDataError(f"{env_id} at env step {env_step}: {error}") from error
    except NonFiniteUpdateError as error:
        raise NonFiniteUpdateError(f"{behavior}: {error}") from error


def _start_workers(options: RunOptions, mode: str, seed: int, trainers, log, target=None,
                   env_id: str = "", curriculum=None):
    """Starts ``num_envs`` env workers (processes or Ray actors) acting for every trainer."""
    from tftrainers.acting.worker_pool import ProcessLauncher, RayLauncher, WorkerPool
    from tftrainers.tf_utils.onnx_function import OnnxExportError
    es = options.env_settings
    behaviors = {}
    for name, trainer in trainers.items():
        try:
            if name in _acting_behaviors(name, trainer):
                behaviors[name] = trainer.acting_setup()
            else:  # self-play: a setup per team
                behaviors.update(trainer.acting_setups())
        except OnnxExportError as error:
            raise RunError(f"{name}: env workers act with the ONNX act graph, which did not "
                           f"convert ({str(error).splitlines()[0]}); use env_settings.workers: "
                           f"inline") from None
    if mode == "ray":
        try:
            launcher = RayLauncher(es.ray_address, es.num_envs)
        except ConnectionError as error:
            raise RunError(str(error)) from None
    else:
        launcher = ProcessLauncher()
    pool = WorkerPool(launcher, env_target(options, target),
                      env_args_of(options, target), es.num_areas,
                      es.num_envs, seed,
                      behaviors, timeout_wait=es.timeout_wait,
                      max_restarts=es.max_worker_restarts, log=log)
    try:
        for name, trainer in trainers.items():
            for behavior in _acting_behaviors(name, trainer):
                for manager in pool.managers[behavior]:
                    trainer.subscribe(manager)
        if curriculum is not None:
            pool.send_environment_parameters(curriculum.manager.samplers())
        pool.start()
    except BaseException:
        pool.close()
        raise
    log(f"[INFO] Env workers: {es.num_envs} x {launcher.kind}, one {env_id} instance "
        f"each, acting inside.")
    return pool


def _workers_summary(pool) -> str:
    line = (f"[INFO] Env workers: {pool.env_steps} env steps, {pool.restarts} "
            f"restart{'' if pool.restarts == 1 else 's'}")
    if pool.stale_steps:
        line += (f", {pool.stale_steps} steps dropped as acted by weights more than one "
                 f"version old")
    return line + "."


def _time_worker_start(pool) -> bool:
    """Adds the workers' start-up (launch to the last connection) to the timers, with
    the first and the last connection as gauges (seconds after the launch)."""
    after = list(pool.connected_after.values())
    first, last = min(after), max(after)
    TIMERS.add("worker start-up", last, parent="start-up")
    TIMERS.set_gauge("workers.first_connected_s", first)
    TIMERS.set_gauge("workers.last_connected_s", last)
    TIMERS.set_gauge("workers.first_to_last_s", last - first)
    return True


def _loop_workers(pool, trainers, stop, curriculum=None, log=print) -> None:
    """The learner's loop while env workers step: restart failed workers, let each trainer
    take what arrived (never waiting for a slow worker), until done or a stop signal.

    Raises:
        EnvDataError: a worker's env sent bad data (the line names the env and env step).
        WorkerFailed: a worker failed more than ``max_worker_restarts`` times.
        NonFiniteUpdateError: an update was refused (prefixed with its behavior).
    """
    from tftrainers.trainers.finite import NonFiniteUpdateError
    behavior = None
    started = connected = False
    try:
        while not stop.requested and not all(t.done for t in trainers.values()):
            if not started and pool.env_steps:
                _first_step()
                started = True
            if not connected and pool.connected_all():
                connected = _time_worker_start(pool)
            pool.check()
            for behavior, trainer in trainers.items():
                trainer.advance()
            behavior = None
            if curriculum is not None and curriculum.update()[0]:
                # Workers apply new values at each area's next reset (require_reset does
                # not reset them all at once: their episodes are in flight).
                _lessons_changed(curriculum, log)
                pool.send_environment_parameters(curriculum.manager.samplers())
            pool.wait(0.05)
    except NonFiniteUpdateError as error:
        raise NonFiniteUpdateError(f"{behavior}: {error}") from error
