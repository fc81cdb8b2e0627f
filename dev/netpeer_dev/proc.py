"""What every dev tool needs of processes: finding a binary, whether a pid
is alive, its command line, signalling it and waiting for it to die, and
the lock that keeps two tools from starting or stopping one state
directory at once. A process counts as ours only while its command
line names our pidfile (``cmdline``), so a reused pid is never signalled;
nothing is ever killed by name.

Only the standard library is used.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import time
from pathlib import Path

__all__ = ["OvnDaemonError", "StateLock", "alive", "cmdline", "find_binary", "send_signal", "wait_dead"]

# Which Debian package ships each tool we run, for error messages.
_PACKAGE_OF = {
    "ovsdb-server": "openvswitch-common",
    "ovsdb-tool": "openvswitch-common",
    "ovs-appctl": "openvswitch-common",
    "ovs-vsctl": "openvswitch-switch",
    "ovs-vswitchd": "openvswitch-switch",
    "ovn-northd": "ovn-central",
    "ovn-nbctl": "ovn-common",
    "ovn-sbctl": "ovn-common",
    "ovn-controller": "ovn-host",
    "ip": "iproute2",
}

# Directories searched after $PATH: the daemons live in sbin, which a
# non-login or non-root PATH may lack.
_EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin")


class OvnDaemonError(RuntimeError):
    """A daemon could not be started, stopped or talked to; the message is one clear line."""


def find_binary(name: str) -> str:
    """The path of the tool ``name`` (``$PATH``, then the sbin and bin
    directories); ``OvnDaemonError`` naming its Debian package if none."""
    path = shutil.which(name)
    if path is None:
        extra = os.pathsep.join(_EXTRA_BIN_DIRS)
        path = shutil.which(name, path=extra)
    if path is None:
        raise OvnDaemonError(f"{name} not found: install the Debian package {_PACKAGE_OF.get(name, 'ovn-central')}")
    return path


def _process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from /proc, or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # "pid (comm) S ...": comm may contain spaces and parentheses.
    try:
        return stat[stat.rindex(")") + 2]
    except (ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie.

    Detached daemons are reparented to PID 1; an init that reaps lazily
    leaves killed daemons as zombies for a while, which must count as dead.
    A killed process with several threads shows its first thread as a zombie
    at once while the others still exit, and keeps its files until the last
    one has (its listening sockets still accept, then reset, connections:
    measured up to 0.16 s for a process of 30 threads): it counts as alive
    until then.
    """
    state = _process_state(pid)
    if state is None or state in ("X", "x"):
        return False
    if state != "Z":
        return True
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid`` (empty when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def send_signal(pid: int, sig: signal.Signals) -> None:
    """``os.kill``, where a process already gone is not an error."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_dead(pid: int, timeout: float) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


class StateLock:
    """An exclusive flock on a file in a state dir, so two processes never
    start or stop the same state dir at once."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd: int | None = None

    def __enter__(self) -> "StateLock":
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
