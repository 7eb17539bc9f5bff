"""Fixtures of the Unity tests: builds that run the stand-in player, and free ports."""
import os
import random
import socket
import stat
import sys

import pytest

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin_player.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("localhost", port))
        except OSError:
            return False
    return True


def free_ports(count: int = 1) -> int:
    """A base port with ``count`` free ports from it (other test runs share the machine)."""
    for _ in range(200):
        base = random.randrange(20000, 60000)
        if all(_free(base + k) for k in range(count)):
            return base
    raise RuntimeError("no free ports")


def write_build(folder, *standin_args, name="Game.x86_64") -> str:
    """An executable build file in ``folder`` that execs the stand-in player with
    ``standin_args`` and whatever the launcher passes; returns its path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(str(folder), name)
    args = " ".join(f"'{a}'" for a in standin_args)
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\nPYTHONPATH='{ROOT}' exec '{sys.executable}' '{STANDIN}' {args} "
                f"\"$@\"\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def build(tmp_path):
    """``build(*standin_args, folder="Build")`` -> the path of an executable build."""
    def make(*standin_args, folder="Build", name="Game.x86_64"):
        return write_build(tmp_path / folder, *standin_args, name=name)
    return make


@pytest.fixture
def port():
    return free_ports(4)
