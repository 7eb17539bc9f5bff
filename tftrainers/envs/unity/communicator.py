"""The trainer's end of ML-Agents' gRPC protocol: a server the Unity player calls.

    comm = Communicator(port=5005, timeout_wait=60, where="Unity build Game (worker 0, ...)")
    comm.start()                          # listening before the player starts
    message = comm.receive(poll=process.poll)   # the player's call (UnityMessageProto)
    comm.answer(reply)                    # the answer to that call: our next input
    comm.close()                          # answers a pending call with 400, stops the server

The player (the client) calls ``Exchange`` once per message, one call at a time: each call
carries its output, and the answer to it is the trainer's next input. So the trainer
never sends first: ``receive`` waits for a call, ``answer`` releases it. The gRPC thread
that runs ``Exchange`` hands the call over and waits for its answer (two queues).
"""
from __future__ import annotations

import os
import queue
import socket
import threading
import weakref
import time
from concurrent import futures
from typing import Callable, Optional

# gRPC's own info lines (e.g. about fork() while launching a player) are not ours to show;
# its errors still are. Set before gRPC's core starts (it reads it once).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
# Launching a player forks this process; gRPC's fork handlers are for children that go on
# using gRPC, which a player (it execs at once) never does.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402

from tftrainers.envs.unity.communicator_objects.header_pb2 import HeaderProto  # noqa: E402
from tftrainers.envs.unity.communicator_objects.unity_message_pb2 import (  # noqa: E402
    UnityMessageProto)
from tftrainers.envs.unity.communicator_objects.unity_to_external_pb2_grpc import (  # noqa
    UnityToExternalProtoServicer, add_UnityToExternalProtoServicer_to_server)

#: gRPC's default message cap is 4 MiB; visual observations of many agents exceed it.
MAX_MESSAGE_BYTES = 512 * 1024 * 1024
STATUS_OK, STATUS_CLOSE = 200, 400


class UnityEnvironmentError(RuntimeError):
    """The player failed: exited, crashed, hung, never connected, or broke the protocol.
    One line naming the build, the worker and the player's log (exit code 1)."""

    exit_code = 1


class UnityTimeout(UnityEnvironmentError):
    """No message from the player within ``timeout_wait`` seconds."""


class UnityExited(UnityEnvironmentError):
    """The player's process ended, or it said it is quitting."""


class _Servicer(UnityToExternalProtoServicer):
    def __init__(self, comm: "Communicator"):
        self.comm = comm

    def Exchange(self, request, context):  # noqa: N802 (gRPC's name)
        comm = self.comm
        if comm.closed:
            return _close_message()
        comm.calls.put(request)
        while True:
            try:
                return comm.answers.get(timeout=0.5)
            except queue.Empty:
                if comm.closed or not context.is_active():
                    return _close_message()


def _close_message() -> UnityMessageProto:
    message = UnityMessageProto()
    message.header.CopyFrom(HeaderProto(status=STATUS_CLOSE))
    return message


def port_in_use(port: int) -> bool:
    """True when something listens on ``port`` already (checked before gRPC binds, whose
    own error does not say why)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("localhost", port))
        except OSError:
            return True
    return False


_OPEN: "weakref.WeakSet[Communicator]" = weakref.WeakSet()
_EXIT_HOOK = []


def _close_at_exit() -> None:
    """At interpreter exit, before thread pools are joined: a program that never closed its
    env would otherwise wait forever on the gRPC thread holding the player's call. Its
    players are told to quit."""
    for comm in list(_OPEN):
        comm.closed = True


def _hook_exit() -> None:
    # Registered after the gRPC server's thread pool exists, so that it runs before the
    # pool's own exit hook joins the pool's threads (they run in reverse order).
    register = getattr(threading, "_register_atexit", None)
    if register is not None and not _EXIT_HOOK:
        register(_close_at_exit)
        _EXIT_HOOK.append(True)


class Communicator:
    """One player's connection (see the module docstring)."""

    def __init__(self, port: int, timeout_wait: float, where: str):
        self.port = port
        self.timeout_wait = timeout_wait
        self.where = where
        self.calls: "queue.Queue[UnityMessageProto]" = queue.Queue()
        self.answers: "queue.Queue[UnityMessageProto]" = queue.Queue()
        self.closed = False
        self.pending = False  # a call of the player's waits for our answer
        self.server = None

    def start(self) -> None:
        if port_in_use(self.port):
            raise UnityEnvironmentError(
                f"{self.where}: port {self.port} is in use (another run or player holds it); "
                f"pick another with --base-port (env_settings.base_port) or stop the other run")
        options = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.so_reuseport", 0)]
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="unity-grpc"),
            options=options)
        add_UnityToExternalProtoServicer_to_server(_Servicer(self), self.server)
        _OPEN.add(self)
        _hook_exit()
        try:
            self.server.add_insecure_port(f"[::]:{self.port}")
        except RuntimeError as error:
            raise UnityEnvironmentError(
                f"{self.where}: cannot listen on port {self.port} ({error}); pick another "
                f"with --base-port") from None
        self.server.start()

    def receive(self, poll: Optional[Callable[[], Optional[int]]] = None,
                waiting_for: str = "a message") -> UnityMessageProto:
        """The player's next call; its answer is due through ``answer``.

        Raises:
            UnityTimeout: nothing within ``timeout_wait`` seconds.
            UnityExited: the process ended (``poll`` returned its exit code) or the player
                called with status 400 (it is quitting).
        """
        deadline = time.monotonic() + self.timeout_wait
        while True:
            try:
                message = self.calls.get(timeout=min(0.25, self.timeout_wait))
                break
            except queue.Empty:
                code = poll() if poll is not None else None
                if code is not None:
                    raise UnityExited(f"{self.where}: the player exited with code {code} while "
                                      f"the trainer waited for {waiting_for}")
                if time.monotonic() >= deadline:
                    raise UnityTimeout(
                        f"{self.where}: no answer from the player within {self.timeout_wait:g} "
                        f"s (waiting for {waiting_for}; --timeout-wait sets the limit)")
        self.pending = True
        if message.header.status == STATUS_CLOSE:
            self.answer(_close_message())
            raise UnityExited(f"{self.where}: the player closed the connection (it is "
                              f"quitting) while the trainer waited for {waiting_for}")
        return message

    def answer(self, message: UnityMessageProto) -> None:
        self.pending = False
        self.answers.put(message)

    def close(self) -> None:
        """Tells a waiting player to quit (status 400) and stops the server."""
        if self.pending:
            self.answer(_close_message())
        self.closed = True
        if self.server is not None:
            # A short grace: the 400 answer above goes out before the server stops.
            self.server.stop(0.5).wait(2.0)
            self.server = None


__all__ = ["Communicator", "MAX_MESSAGE_BYTES", "STATUS_CLOSE", "STATUS_OK", "UnityEnvironmentError",
           "UnityExited", "UnityTimeout", "port_in_use"]
