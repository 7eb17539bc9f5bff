"""An env worker: one env instance and its AgentManagers, stepped in another process.

    # in a worker process or a Ray actor (started by ``acting.worker_pool``):
    run_worker(address, authkey, index=2, serial=7)

The worker connects to the learner's ``multiprocessing.connection.Listener`` (a local
socket for worker processes, the driver's address for Ray actors: the one code path for
both), says hello, receives its ``WorkerSetup`` (env id and args, its seed, and per
behavior the ONNX act program with the current weights), then steps its env as fast as it
goes. Acting happens here, one ONNX call per behavior per env step for the instance's
agents, so only trajectories and stats travel to the learner and only weights come back.

Messages to the learner: ``("hello", index, serial, pid)``; ``("items", env_steps,
[(behavior, item, version), ...])`` with the AgentManagers' queue items
(``Trajectory``, ``EpisodeStats``, ``ActingStats``), sent as they come and at least every
``heartbeat_s`` (so a silent worker is a hung one); ``("error", kind, line)`` when the
env raised (kind ``"env"``) or sent bad data (``"data"``), after which the worker exits.
``version`` is the version of the weights that acted a trajectory's last step (None for
stats): the learner drops trajectories acted entirely by weights two or more versions old.
A worker that has sent ``steps_per_version`` trajectory steps since its weights changed
waits for newer ones (heartbeats go on), so it never runs far ahead of the learner.

Messages from the learner, read by a thread as they arrive (so the learner's sends never
wait for an env step): ``("weights", behavior, WeightUpdate)``, ``("stop_recording",
behavior)``, ``("stop",)``. A closed connection (the learner died) stops the worker too;
worker processes also ask Linux to kill them when their parent dies.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Dict, List, NamedTuple, Optional

import numpy as np

from tftrainers.acting.actor import Actor, WeightUpdate
from tftrainers.acting.agent_manager import (AgentManager, EnvCallError, call_env,
                                             env_error_line, step_env)
from tftrainers.acting.onnx_program import OnnxProgram, OnnxRunner
from tftrainers.envs.base import BehaviorSpec
from tftrainers.processing import Trajectory

HEARTBEAT_S = 1.0


class BehaviorSetup(NamedTuple):
    """What a worker needs to act for one behavior."""

    spec: BehaviorSpec
    memory_size: int
    program: OnnxProgram
    time_horizon: int
    seed: int  # of the acting noise
    update: WeightUpdate  # the weights to start with
    recording: bool = True
    # Trajectory steps the worker sends per weight version before it waits for newer
    # weights (0: no limit, e.g. --inference): keeps workers from running ahead of updates.
    steps_per_version: int = 0
    # Each agent acts with the weights its episode began with (a self-play team:
    # ``Actor(pin_episodes=True)``); the first weights are ``update``.
    pin_episodes: bool = False


class WorkerSetup(NamedTuple):
    """One worker's env and behaviors."""

    env_id: object  # an env id, or a picklable env factory (the Python API)
    env_args: Dict[str, Any]
    num_areas: Optional[int]
    seed: int
    behaviors: Dict[str, BehaviorSetup]
    heartbeat_s: float = HEARTBEAT_S
    # name -> sampler (envs.parameters), already seeded for this worker; set before reset.
    environment_parameters: Optional[Dict[str, Any]] = None


def worker_seed(seed: int, index: int, serial: int) -> int:
    """The seed of worker ``index``'s ``serial``-th start (restarts count on): distinct per
    worker and start, and the same in every run with the run seed ``seed``."""
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(index), int(serial)])
    return int(state.generate_state(1)[0] & 0x7FFFFFFF)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (no orphan even after a kill -9)."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_worker(address, authkey: bytes, index: int, serial: int,
               die_with_parent: bool = True) -> None:
    """Connects to the learner at ``address`` and runs until told to stop (see the module
    docstring). Never raises: what goes wrong is sent to the learner, or the worker exits."""
    from multiprocessing.connection import Client
    # Ctrl-C reaches the whole foreground process group: the learner stops the workers.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if die_with_parent:
        _die_with_parent()
    try:
        conn = Client(address, authkey=authkey)
    except (OSError, EOFError):
        return  # the learner is gone
    try:
        conn.send(("hello", index, serial, os.getpid()))
        setup = conn.recv()
        _Worker(conn, setup, index).run()
    except (OSError, EOFError):
        pass  # the learner closed the connection: nothing left to report to
    finally:
        try:
            conn.close()
        except OSError:
            pass


class _Worker:
    def __init__(self, conn, setup: WorkerSetup, index: int = 0):
        self.conn = conn
        self.index = index  # a Unity player's port is base_port + index
        self.setup = setup
        self.stop = threading.Event()
        self.inbox: List[tuple] = []
        self.lock = threading.Lock()
        self.wake = threading.Event()  # a message arrived

    def _read(self) -> None:
        try:
            while True:
                message = self.conn.recv()
                if message[0] == "stop":
                    break
                with self.lock:
                    self.inbox.append(message)
                self.wake.set()
        except (EOFError, OSError):
            pass  # the learner is gone
        self.stop.set()
        self.wake.set()

    def run(self) -> None:
        from tftrainers.envs import make
        from tftrainers.envs.python_env import describe
        from tftrainers.envs.checks import EnvDataError
        setup = self.setup
        threading.Thread(target=self._read, daemon=True, name="worker-inbox").start()
        env = None
        env_step = 0
        try:
            env = call_env("make()", make, setup.env_id, seed=setup.seed,
                           num_areas=setup.num_areas, worker_id=self.index, **setup.env_args)
            managers: Dict[str, AgentManager] = {}
            for name, b in setup.behaviors.items():
                actor = Actor(b.spec, b.memory_size, OnnxRunner(b.program, b.update.flat),
                              seed=b.seed, version=0 if b.pin_episodes else b.update.version,
                              pin_episodes=b.pin_episodes)
                if b.pin_episodes:
                    actor.set_weights(b.update)
                managers[name] = AgentManager(name, b.spec, actor, b.time_horizon,
                                              record=b.recording)
            budget = {name: b.steps_per_version for name, b in setup.behaviors.items()}
            sent = dict.fromkeys(managers, 0)  # steps sent since the weights in use came
            outbox: List[tuple] = []
            last_send = time.monotonic()
            if setup.environment_parameters:
                call_env("set_environment_parameters()", env.set_environment_parameters,
                         setup.environment_parameters)
            call_env("reset()", env.reset)
            while not self.stop.is_set():
                if self.inbox:
                    with self.lock:
                        messages, self.inbox = self.inbox, []
                    for message in messages:
                        if message[0] == "weights":
                            _, name, update = message
                            before = managers[name].actor.version
                            managers[name].set_weights(update)
                            if managers[name].actor.version != before:
                                sent[name] = 0
                        elif message[0] == "stop_recording":
                            managers[message[1]].stop_recording()
                        elif message[0] == "environment_parameters":  # a lesson changed
                            call_env("set_environment_parameters()",
                                     env.set_environment_parameters, message[1])
                limited = [name for name, m in managers.items()
                           if m.recording and budget[name] > 0]
                if limited and all(sent[name] >= budget[name] for name in limited):
                    # Sent its share for these weights: wait for the next ones (heartbeats
                    # go on, so waiting is not hanging).
                    now = time.monotonic()
                    if outbox or now - last_send >= setup.heartbeat_s:
                        self.conn.send(("items", env_step, outbox))
                        outbox, last_send = [], now
                    self.wake.wait(setup.heartbeat_s)
                    self.wake.clear()
                    continue
                step_env(env, managers)
                env_step += 1
                for name, manager in managers.items():
                    for item in manager.queue.drain():
                        if type(item) is Trajectory:
                            outbox.append((name, item, manager.actor.version))
                            sent[name] += len(item)
                        else:
                            outbox.append((name, item, None))
                now = time.monotonic()
                if outbox or now - last_send >= setup.heartbeat_s:
                    self.conn.send(("items", env_step, outbox))
                    outbox, last_send = [], now
        except EnvCallError as error:
            self._report("env", describe(setup.env_id), error.call, env_step, error.error)
        except EnvDataError as error:
            self._report("data", describe(setup.env_id), None, env_step, error)
        except (EOFError, OSError):
            raise  # the connection: the learner is gone
        except Exception as error:  # pylint: disable=broad-except
            self._report("internal", describe(setup.env_id), None, env_step, error)
        finally:
            if env is not None:
                try:
                    env.close()
                except Exception:  # pylint: disable=broad-except
                    pass

    def _report(self, kind: str, env_id: str, calling: Optional[str], env_step: int,
                error: Exception) -> None:
        reason = (str(error).strip().splitlines() or [""])[0][:300]
        if kind == "data":  # one line already; cut, it would lose the shapes at its end
            line = f"{env_id} at env step {env_step}: {error}"
        elif calling:
            line = env_error_line(env_id, calling, env_step, error)
        else:
            line = f"internal error {type(error).__name__}: {reason}"
        try:
            self.conn.send(("error", kind, line))
        except (OSError, EOFError):
            pass


class RayWorkerHost:
    """The Ray actor class of an env worker (``ray.remote(RayWorkerHost)``): ``run`` is the
    same ``run_worker`` a worker process runs."""

    def run(self, address, authkey: bytes, index: int, serial: int) -> None:
        run_worker(address, authkey, index, serial, die_with_parent=False)

    def pid(self) -> int:
        return os.getpid()


__all__ = ["BehaviorSetup", "HEARTBEAT_S", "RayWorkerHost", "WorkerSetup", "run_worker",
           "worker_seed"]


def main() -> None:
    """``python -m tftrainers.acting.workers HOST PORT INDEX SERIAL``: a worker process.
    Its standard input holds one JSON line: ``{"authkey": hex, "sys_path": [...]}`` (the
    learner's import path, so envs importable there import here too)."""
    import json
    import sys
    host, port, index, serial = sys.argv[1:5]
    given = json.loads(sys.stdin.readline())
    sys.path[:] = given["sys_path"]
    run_worker((host, int(port)), bytes.fromhex(given["authkey"]), int(index), int(serial))


if __name__ == "__main__":
    main()
