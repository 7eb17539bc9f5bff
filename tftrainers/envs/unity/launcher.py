"""Finding a Unity build and starting its player, as ``mlagents-learn`` does.

    exe = resolve_build("Builds/Game")            # Builds/Game.x86_64, Builds/Game.app/..., ...
    args = player_args(exe, port=5005, no_graphics=True,
                       log_file="results/run/run_logs/Player-0.log", extra=["--level", "2"])
    process = launch(args)                        # its own session: closed with its children

The player reads the port after ``--mlagents-port`` and connects to the trainer's server
there; ``-nographics -batchmode`` run it headless; ``-logFile`` is where Unity writes its log
(left out when the user's own arguments name one).
"""
from __future__ import annotations

import glob
import os
import signal
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

#: What a build path may be completed with, in the order they are tried.
BUILD_SUFFIXES = (".x86_64", ".x86", ".app/Contents/MacOS/*", ".exe")


class UnityBuildError(ValueError):
    """A build path that names no runnable build (one line, a usage error)."""

    exit_code = 2


def _candidates(path: str) -> List[str]:
    found = [path] if os.path.isfile(path) else []
    for suffix in BUILD_SUFFIXES:
        head, star, _ = suffix.partition("*")
        pattern = glob.escape(path + head) + star
        found += sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    return found


def resolve_build(path: str) -> str:
    """The executable of the build ``path``: the path itself, ``PATH.x86_64``, ``PATH.x86``,
    ``PATH.app/Contents/MacOS/*``, ``PATH.exe``, or a folder holding exactly one of these.

    Raises:
        UnityBuildError: nothing runnable there (naming what was looked for), several
            builds in a folder, or a file that is not executable.
    """
    given = os.path.expanduser(str(path))
    stripped = given.rstrip("/\\")
    if stripped.endswith(".app") and os.path.isdir(stripped):  # Game.app: as Game
        stripped = stripped[:-len(".app")]
    found = _candidates(stripped)
    if not found and os.path.isdir(stripped):
        inside = []
        for entry in sorted(os.listdir(stripped)):
            full = os.path.join(stripped, entry)
            if entry.endswith(".app") and os.path.isdir(full):
                inside += _candidates(full[:-4])
            elif entry.endswith((".x86_64", ".x86", ".exe")) and os.path.isfile(full):
                inside.append(full)
        if len(inside) > 1:
            raise UnityBuildError(
                f"Unity build {path}: the folder holds {len(inside)} builds "
                f"({', '.join(os.path.basename(p) for p in inside[:4])}); give the path of one")
        found = inside
    if not found:
        tried = ", ".join([stripped] + [stripped + s for s in BUILD_SUFFIXES])
        raise UnityBuildError(
            f"Unity build {path}: no such build (looked for {tried}, or a folder holding "
            f"one); env ids that are not builds: builtin:NAME, gym:ID, pettingzoo:MODULE.ENV")
    exe = found[0]
    if not os.access(exe, os.X_OK):
        raise UnityBuildError(f"Unity build {path}: {exe} is not executable (chmod +x {exe})")
    return exe


def player_args(exe: str, port: int, no_graphics: bool = False,
                log_file: Optional[str] = None, extra: Sequence[str] = ()) -> List[str]:
    """The player's command line, as ML-Agents builds it."""
    args = [exe]
    if no_graphics:
        args += ["-nographics", "-batchmode"]
    args += ["--mlagents-port", str(port)]
    if log_file and not any(str(a).lower() == "-logfile" for a in extra):
        args += ["-logFile", log_file]
    return args + [str(a) for a in extra]


#: Linux: started through util-linux's ``setpriv --pdeathsig KILL``, a player is killed when
#: the process that launched it dies, even by SIGKILL (a hung env worker the pool kills), so
#: none outlives its trainer. (Not ``preexec_fn``: a fork with gRPC's threads running can
#: crash the child before it execs.) Elsewhere a player quits when the trainer's server goes.
_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


def launch(args: Sequence[str]) -> subprocess.Popen:
    """Starts the player in its own session (Ctrl-C at the terminal reaches the trainer,
    which closes the player; ``stop`` reaches the player's children too), its standard
    streams closed: it writes its log to ``-logFile``."""
    command = list(args)
    if _SETPRIV:
        command = [_SETPRIV, "--pdeathsig", "KILL", "--"] + command
    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def stop(process: Optional[subprocess.Popen], wait_s: float = 5.0) -> Optional[int]:
    """Waits up to ``wait_s`` for the player to quit (it does once told to), then kills its
    whole session. Returns its exit code."""
    if process is None:
        return None
    try:
        return process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    return process.wait()


__all__ = ["BUILD_SUFFIXES", "UnityBuildError", "launch", "player_args", "resolve_build", "stop"]
