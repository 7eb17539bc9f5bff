"""The learner's side of the env workers: start them, feed trainers, survive their faults.

    pool = WorkerPool(ProcessLauncher(), "builtin:Ball3D", {"step_latency_ms": 5}, None,
                      num_envs=4, seed=0, behaviors={"Ball3D": trainer.acting_setup()})
    for manager in pool.managers["Ball3D"]:
        trainer.subscribe(manager)          # a WorkerManager per worker: queue in, weights out
    pool.start()
    try:
        while not trainer.done:
            pool.check()                    # restarts a worker that raised, died or hung
            trainer.advance()               # drains what the workers sent, publishes weights
            pool.wait(0.05)                 # until something arrives
    finally:
        pool.close()                        # stops every worker: no process left behind

Workers run ``acting.workers.run_worker``: a worker process (``ProcessLauncher``) and a Ray
actor (``RayLauncher``) differ only in how they are started and killed; both connect back
to this pool's ``Listener`` and speak the same messages. A reader thread takes what they
send as it arrives, so workers never wait for the learner's update to finish, and the
learner never waits for the slowest worker: it takes whatever has arrived.

How far behind the learner the acting runs: a worker applies new weights between two
env steps, and sends at most ``2 x buffer_size / num_envs`` trajectory steps per weight
version before it waits for the next (``BehaviorSetup.steps_per_version``). So an update
uses trajectories that ended under the weights it updates or the version before (the
steps in flight while the previous update ran), as in-process; a trajectory that ended
under older weights (a worker that fell behind) is dropped when drained, and counted. As
in-process and in ML-Agents, a trajectory longer than the steps between two updates
began under older weights still.

Faults: a worker whose env raises, whose process dies, or that sends nothing for
``timeout_wait`` seconds is killed and started again with a fresh env and seed
(``worker_seed``); what it had not yet sent (its unfinished trajectories) dies with it,
and its agents get new ids, so no trajectory or agent memory mixes two envs. One log line
names the worker and the cause. After ``max_restarts`` restarts of one worker, ``check``
raises ``WorkerFailed``. Bad env data (``EnvDataError``) is not retried: it ends the run,
as in-process.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Listener, wait
from typing import Dict, List, Optional

import numpy as np

from tftrainers.acting.actor import WeightUpdate
from tftrainers.acting.workers import BehaviorSetup, WorkerSetup, worker_seed
from tftrainers.envs.checks import EnvDataError
from tftrainers.processing import EpisodeStats, Trajectory

#: ids of worker ``serial``'s agents: ``serial * AGENT_ID_STRIDE + its own id``.
AGENT_ID_STRIDE = 1 << 32


class WorkerFailed(RuntimeError):
    """An env worker failed more often than ``max_worker_restarts`` allows (one line)."""


class _VersionedQueue:
    """A WorkerManager's queue: items with the version of the weights that acted them."""

    def __init__(self, manager: "WorkerManager"):
        self._manager = manager
        self._items: List[tuple] = []
        self._lock = threading.Lock()

    def put(self, item, version: Optional[int]) -> None:
        with self._lock:
            self._items.append((item, version))

    def drain(self) -> list:
        """Everything that arrived, oldest first, without trajectories whose last step was
        acted by weights more than one version older than the ones published last."""
        with self._lock:
            items, self._items = self._items, []
        floor = self._manager.version - 1
        out = []
        for item, version in items:
            if version is not None and version < floor:
                self._manager.pool.stale_steps += len(item)
                continue
            out.append(item)
        return out


class WorkerManager:
    """What a Trainer subscribes for one worker and behavior: the worker's AgentManager
    seen from the learner (``queue``, ``set_weights``, ``stop_recording``)."""

    def __init__(self, pool: "WorkerPool", index: int, behavior_name: str):
        self.pool = pool
        self.index = index
        self.behavior_name = behavior_name
        self.version = 0
        self.queue = _VersionedQueue(self)

    def set_weights(self, update: WeightUpdate) -> None:
        self.version = max(self.version, int(update.version))
        self.pool.send_weights(self.index, self.behavior_name, update)

    def stop_recording(self) -> None:
        self.pool.stop_recording(self.index, self.behavior_name)

    def state(self) -> None:
        """Acting noise lives in the workers; a resumed run reseeds them (nothing to keep)."""
        return None

    def set_state(self, state) -> None:
        """Nothing to restore: ``state`` keeps nothing (see there)."""


class ProcessLauncher:
    """Starts workers as local processes: a fresh interpreter each (``python -m
    tftrainers.acting.workers``), without the learner's TensorFlow and threads, and a
    direct child of the learner with nothing else in between."""

    host = "127.0.0.1"
    kind = "worker process"

    def start(self, address, authkey: bytes, index: int, serial: int):
        process = subprocess.Popen(
            [sys.executable, "-m", "tftrainers.acting.workers", str(address[0]),
             str(address[1]), str(index), str(serial)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, close_fds=True)
        try:
            process.stdin.write(json.dumps({"authkey": authkey.hex(),
                                            "sys_path": sys.path}).encode() + b"\n")
            process.stdin.close()
        except OSError:
            pass  # it died at once: exit_cause says how
        return process

    @staticmethod
    def exit_cause(process) -> Optional[str]:
        """None while it runs; else how it ended, in words."""
        code = process.poll()
        if code is None:
            return None
        if code < 0:
            try:
                return f"its process was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"its process was killed by signal {-code}"
        return f"its process exited with code {code}"

    @staticmethod
    def stop(process, timeout: float) -> None:
        """Waits up to ``timeout`` s for the process to end, then kills it."""
        try:
            process.wait(max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def close(self) -> None:
        """Nothing shared to release: ``stop`` ends each process on its own."""


class RayLauncher:
    """Starts workers as Ray actors on the cluster at ``address`` (``auto``: the running
    cluster, else a local one that ``close`` shuts down again)."""

    kind = "Ray actor"

    def __init__(self, address: str, num_envs: int):
        try:
            import ray
        except ImportError:
            raise ImportError("env_settings.ray_address: Ray is not installed; install it "
                              "with pip install 'tftrainers[ray]'") from None
        self.ray = ray
        self.started_cluster = False
        if not ray.is_initialized():
            quiet = dict(include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR)
            if address == "auto":
                try:
                    ray.init(address="auto", **quiet)
                except ConnectionError:  # no cluster running: a local one, for this run
                    # Env workers mostly wait for their env: one scheduling slot each.
                    ray.init(num_cpus=max(os.cpu_count() or 1, num_envs), **quiet)
                    self.started_cluster = True
            else:
                try:
                    ray.init(address=address, **quiet)
                except (ConnectionError, ValueError, RuntimeError) as error:
                    raise ConnectionError(f"env_settings.ray_address: cannot connect to the "
                                          f"Ray cluster at {address} ({error})") from None
        self.host = ray.util.get_node_ip_address()
        from tftrainers.acting.workers import RayWorkerHost
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0)(RayWorkerHost)

    def start(self, address, authkey: bytes, index: int, serial: int):
        actor = self._actor_class.remote()
        return actor, actor.run.remote(address, authkey, index, serial)

    def exit_cause(self, handle) -> Optional[str]:
        _, ref = handle
        ready, _ = self.ray.wait([ref], timeout=0)
        if not ready:
            return None
        try:
            self.ray.get(ref)
        except Exception as error:  # pylint: disable=broad-except
            return f"its Ray actor died ({type(error).__name__})"
        return "its Ray actor returned"

    def stop(self, handle, timeout: float) -> None:
        actor, ref = handle
        self.ray.wait([ref], timeout=max(timeout, 0.0))
        self.ray.kill(actor, no_restart=True)

    def close(self) -> None:
        if self.started_cluster:
            self.ray.shutdown()


class _Slot:
    """One worker position: its current start (serial), process or actor, connection."""

    def __init__(self, index: int):
        self.index = index
        self.serial = -1
        self.handle = None
        self.conn = None
        self.pid: Optional[int] = None
        self.failure: Optional[tuple] = None  # (kind, line) from the reader thread
        self.last_seen = 0.0
        self.restarts = 0
        self.seed = 0
        self.env_steps = 0  # as the worker's current start counts them


def _renumbered_trajectory(item: Trajectory, offset: int, n: int, k: int) -> Trajectory:
    group = item.group_id
    return dataclasses.replace(
        item, agent_id=offset + int(item.agent_id),
        group_id=np.where(group == 0, 0, group.astype(np.int64) * n + k).astype(np.int32))


def _renumbered_episodes(item: EpisodeStats, offset: int, n: int, k: int) -> EpisodeStats:
    del n, k  # no group ids
    # (its __len__ counts episodes, which _replace would trip over)
    return EpisodeStats(offset + item.agent_id.astype(np.int64), *tuple(item)[1:])


#: Queue items that name agents (ids) or groups: renumbered per worker so that ids of two
#: workers, or of a worker's envs before and after a restart, never meet. Other kinds
#: (ActingStats, EnvironmentStats) pass as they are.
_RENUMBER = {Trajectory: _renumbered_trajectory, EpisodeStats: _renumbered_episodes}


class WorkerPool:
    """``num_envs`` env workers feeding one ``WorkerManager`` per worker and behavior.

    Args:
        launcher: ``ProcessLauncher()`` or ``RayLauncher(address, num_envs)``.
        env_id, env_args, num_areas: each worker's env (one instance).
        num_envs: workers.
        seed: the run seed; worker seeds derive from it (``worker_seed``).
        behaviors: behavior -> ``BehaviorSetup`` (from ``Trainer.acting_setup``).
        timeout_wait: seconds a worker may be silent (or take to start) before it is
            restarted.
        max_restarts: restarts allowed per worker.
        log: where the one-line notes go.
    """

    def __init__(self, launcher, env_id: str, env_args: Optional[dict],
                 num_areas: Optional[int], num_envs: int, seed: int,
                 behaviors: Dict[str, BehaviorSetup], timeout_wait: float = 60.0,
                 max_restarts: int = 5, log=print):
        self.launcher = launcher
        self.env_id = env_id
        self.env_args = dict(env_args or {})
        self.num_areas = num_areas
        self.num_envs = int(num_envs)
        self.seed = int(seed)
        self.behaviors = dict(behaviors)
        self.timeout_wait = float(timeout_wait)
        self.max_restarts = int(max_restarts)
        self.log = log
        self.managers: Dict[str, List[WorkerManager]] = {
            name: [WorkerManager(self, k, name) for k in range(self.num_envs)]
            for name in self.behaviors}
        self._latest = {name: b.update for name, b in self.behaviors.items()}
        self._recording = {name: b.recording for name, b in self.behaviors.items()}
        self._environment_parameters: Optional[dict] = None
        self.slots = [_Slot(k) for k in range(self.num_envs)]
        self._next_serial = self.num_envs
        self._lock = threading.RLock()
        self._closing = False
        self._arrived = threading.Event()
        self._last_check = 0.0
        self.env_steps = 0
        self.stale_steps = 0
        self.restarts = 0
        # Seconds from ``start`` to each worker position's first connection (start-up).
        self.connected_after: Dict[int, float] = {}
        self._started_at = 0.0
        self._authkey = secrets.token_bytes(32)
        # Every worker connects at once: a backlog of 1 (the default) lets the kernel drop
        # the handshake of the third and later, which then wait in Client() until
        # timeout_wait restarts them (an 8-worker run went 60 s on 7).
        self._listener = Listener((launcher.host, 0), family="AF_INET",
                                  backlog=max(2 * self.num_envs, 16), authkey=self._authkey)
        self.address = self._listener.address
        self._threads: List[threading.Thread] = []

    # --- start and stop ---------------------------------------------------------------------
    def start(self) -> None:
        self._started_at = time.monotonic()
        for target, name in ((self._accept, "workers-accept"), (self._read, "workers-read")):
            thread = threading.Thread(target=target, daemon=True, name=name)
            thread.start()
            self._threads.append(thread)
        for slot in self.slots:
            self._launch(slot, serial=slot.index)

    def _launch(self, slot: _Slot, serial: Optional[int] = None) -> None:
        if serial is None:
            serial, self._next_serial = self._next_serial, self._next_serial + 1
        with self._lock:
            slot.serial = serial
            slot.seed = worker_seed(self.seed, slot.index, serial)
            slot.conn, slot.pid, slot.failure, slot.env_steps = None, None, None, 0
            slot.last_seen = time.monotonic()  # the start-up counts against timeout_wait
        slot.handle = self.launcher.start(self.address, self._authkey, slot.index, serial)

    def close(self, timeout: float = 5.0) -> None:
        """Stops every worker (a stop message, then a kill after ``timeout`` s), and the
        threads and the cluster this pool started. Safe to call more than once."""
        if self._closing:
            return
        self._closing = True
        with self._lock:
            conns = [slot.conn for slot in self.slots if slot.conn is not None]
        for conn in conns:
            try:
                conn.send(("stop",))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + timeout
        for slot in self.slots:
            if slot.handle is not None:
                self.launcher.stop(slot.handle, deadline - time.monotonic())
        for conn in conns:
            conn.close()
        try:  # wakes an accept thread waiting in accept(), which then sees _closing
            socket.create_connection(self.address, timeout=1.0).close()
        except OSError:
            pass
        self._listener.close()
        for thread in self._threads:
            thread.join(2.0)
        self.launcher.close()

    # --- threads: connections in, messages in ------------------------------------------------
    def _accept(self) -> None:
        while not self._closing:
            try:
                conn = self._listener.accept()
            except (OSError, EOFError, multiprocessing.AuthenticationError):
                if self._closing:
                    return
                continue
            if self._closing:
                conn.close()
                return
            try:
                if not conn.poll(self.timeout_wait):
                    conn.close()
                    continue
                _, index, serial, pid = conn.recv()
                with self._lock:  # no weights published between this setup and the next
                    slot = self.slots[index]
                    if slot.serial != serial or slot.failure is not None:
                        conn.close()  # a start that was given up on
                        continue
                    conn.send(self._setup(slot))
                    slot.conn, slot.pid = conn, pid
                    slot.last_seen = time.monotonic()
                    self.connected_after.setdefault(index, slot.last_seen - self._started_at)
            except (OSError, EOFError, ValueError, IndexError, TypeError):
                conn.close()

    def _setup(self, slot: _Slot) -> WorkerSetup:
        behaviors = {name: b._replace(seed=worker_seed(b.seed, slot.index, slot.serial),
                                      update=self._latest[name],
                                      recording=self._recording[name],
                                      steps_per_version=self._share(b.steps_per_version))
                     for name, b in self.behaviors.items()}
        return WorkerSetup(self.env_id, self.env_args, self.num_areas, slot.seed, behaviors,
                           environment_parameters=self._parameters_for(slot.index))

    def _parameters_for(self, index: int) -> Optional[dict]:
        from tftrainers.envs.parameters import for_worker
        if self._environment_parameters is None:
            return None
        return for_worker(self._environment_parameters, index)

    def send_environment_parameters(self, samplers: dict) -> None:
        """New environment parameters (a lesson changed) to every worker, each reseeded for
        its index (``envs.parameters.worker_sampler_seed``); workers that start later get
        them with their setup."""
        with self._lock:
            self._environment_parameters = dict(samplers)
            for slot in self.slots:
                self._send(slot, ("environment_parameters", self._parameters_for(slot.index)))

    def _share(self, steps: int) -> int:
        """A worker's share of the steps one weight version may act: twice an even share,
        so the others can fill in for a slow worker and the learner never waits for it,
        while no update takes much more than two buffers."""
        return -(-2 * steps // self.num_envs) if steps > 0 else 0

    def _read(self) -> None:
        while not self._closing:
            with self._lock:
                live = {slot.conn: slot for slot in self.slots
                        if slot.conn is not None and slot.failure is None}
            if not live:
                time.sleep(0.02)
                continue
            for conn in wait(list(live), timeout=0.1):
                slot = live[conn]
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    with self._lock:
                        if slot.conn is conn and slot.failure is None:
                            slot.failure = ("exit", None)
                    continue
                with self._lock:
                    if slot.conn is not conn:
                        continue  # restarted meanwhile: what the old one said is void
                    slot.last_seen = time.monotonic()
                    try:
                        if message[0] == "items":
                            self._deliver(slot, message[1], message[2])
                        elif message[0] == "error":
                            slot.failure = (message[1], message[2])
                    except Exception as error:  # pylint: disable=broad-except
                        # A message we cannot use: that worker restarts, this thread goes on.
                        slot.failure = ("internal", f"sent what the learner could not read "
                                        f"({type(error).__name__}: {error})")
                self._arrived.set()

    def _deliver(self, slot: _Slot, env_steps: int, items: list) -> None:
        offset = slot.serial * AGENT_ID_STRIDE
        n, k = self.num_envs, slot.index
        self.env_steps += env_steps - slot.env_steps
        slot.env_steps = env_steps
        for name, item, version in items:
            renumber = _RENUMBER.get(type(item))
            if renumber is not None:
                item = renumber(item, offset, n, k)
            self.managers[name][slot.index].queue.put(item, version)

    # --- what the learner calls --------------------------------------------------------------
    def connected_all(self) -> bool:
        """Whether every worker position has connected at least once."""
        return len(self.connected_after) == self.num_envs

    def wait(self, timeout: float) -> bool:
        """Waits up to ``timeout`` s for something from a worker; True if it came."""
        arrived = self._arrived.wait(timeout)
        self._arrived.clear()
        return arrived

    def send_weights(self, index: int, behavior: str, update: WeightUpdate) -> None:
        with self._lock:
            if update.version >= self._latest[behavior].version:
                self._latest[behavior] = update
            self._send(self.slots[index], ("weights", behavior, update))

    def stop_recording(self, index: int, behavior: str) -> None:
        with self._lock:
            self._recording[behavior] = False
            self._send(self.slots[index], ("stop_recording", behavior))

    def _send(self, slot: _Slot, message: tuple) -> None:
        if slot.conn is None or slot.failure is not None:
            return  # a worker still starting gets it with its setup
        try:
            slot.conn.send(message)
        except (OSError, ValueError):
            slot.failure = ("exit", None)

    def check(self, every: float = 0.2) -> None:
        """Restarts workers that raised, died or went silent (at most every ``every`` s).

        Raises:
            EnvDataError: a worker's env sent bad data (the run stops, as in-process).
            WorkerFailed: a worker failed after ``max_restarts`` restarts.
        """
        now = time.monotonic()
        if now - self._last_check < every:
            return
        self._last_check = now
        for slot in self.slots:
            with self._lock:
                failure, silent = slot.failure, now - slot.last_seen
            cause = None
            if failure is not None:
                kind, line = failure
                if kind == "data":
                    raise EnvDataError(line)
                if kind == "exit":
                    self.launcher.stop(slot.handle, 1.0)  # to read how it ended
                    cause = self.launcher.exit_cause(slot.handle) or "its connection closed"
                else:
                    cause = line
            elif slot.handle is not None:
                cause = self.launcher.exit_cause(slot.handle)
                if cause is None and silent > self.timeout_wait:
                    cause = (f"did not answer within {self.timeout_wait:g} s "
                             f"(env_settings.timeout_wait)")
            if cause is not None:
                self._restart(slot, cause)

    def _restart(self, slot: _Slot, cause: str) -> None:
        with self._lock:
            conn, slot.conn = slot.conn, None
            slot.failure = ("restarting", cause)
        if conn is not None:
            conn.close()
        self.launcher.stop(slot.handle, 0.0)
        slot.restarts += 1
        from tftrainers.envs.python_env import describe
        env_id = describe(self.env_id)  # an id, or a factory given to the Python API
        name = f"env worker {slot.index} ({self.launcher.kind} of {env_id})"
        if cause.startswith(env_id):  # the env's own line names it already
            name = f"env worker {slot.index} ({self.launcher.kind})"
        if slot.restarts > self.max_restarts:
            raise WorkerFailed(f"{name} failed {slot.restarts} times, more than "
                               f"env_settings.max_worker_restarts ({self.max_restarts}); "
                               f"last: {cause}")
        self._launch(slot)
        self.restarts += 1
        self.log(f"[WARNING] {name}: {cause}; restarted with a fresh env and seed {slot.seed}, "
                 f"its unfinished trajectories dropped (restart {slot.restarts} of "
                 f"{self.max_restarts})")

    def pids(self) -> List[int]:
        """Process ids of the workers connected now (for tests and diagnostics)."""
        with self._lock:
            return [slot.pid for slot in self.slots if slot.pid is not None]


__all__ = ["AGENT_ID_STRIDE", "ProcessLauncher", "RayLauncher", "WorkerFailed",
           "WorkerManager", "WorkerPool"]
