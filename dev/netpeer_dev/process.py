"""netpeerd as a child process: the one launcher of the dev stack, the
benchmarks and the tests that need a real process (to kill -9 it, to measure
it alone).

``NetpeerdProcess`` writes its configuration (``netpeer.daemon.Config``),
runs ``netpeer serve --config FILE``, waits until it answers (and, if asked,
until its first sweep completed, read through the status call), and stops it
by its own pid. A pidfile lets a later command (``netpeer dev down``) find
the process again; a pid is trusted only while its command line still names
this configuration file (pids are recycled).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from netpeer import errors
from netpeer.api.client import Client
from netpeer.config import Config
from netpeer_dev.proc import alive


class NetpeerdProcess:
    """One netpeerd process for ``config``, reachable with ``admin_token``.

    ``directory`` holds ``netpeerd.toml``, ``netpeerd.log`` and
    ``netpeerd.pid``."""

    #: The module run as ``python -m MODULE serve --config FILE`` (the tests
    #: of tests/linearizability run a build with a fault planted in it).
    module = "netpeer.cli.main"

    def __init__(self, config: Config, directory: str | os.PathLike, admin_token: str):
        self.config = config
        self.dir = Path(directory)
        self.admin_token = admin_token
        self.config_file = self.dir / "netpeerd.toml"
        self.log = self.dir / "netpeerd.log"
        self.pidfile = self.dir / "netpeerd.pid"
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return self.config.listen

    @property
    def socket(self) -> Path | None:
        return Path(self.config.listen[len("unix://"):]) if self.config.listen.startswith("unix://") else None

    # ------------------------------------------------------------ lifecycle
    @property
    def pid(self) -> int | None:
        """The running process's pid (ours, or the one the pidfile names), or None."""
        if self.proc is not None:
            return self.proc.pid if self.proc.poll() is None else None
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not alive(pid):
            return None
        try:  # a recycled pid is not ours
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        return pid if str(self.config_file).encode() in cmdline else None

    def spawn(self, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> int:
        """Starts the process (without waiting for it) with ``args`` after
        ``serve --config FILE`` (``--adopt-ovn``...); its pid."""
        if self.pid is not None:
            raise errors.FailedPrecondition(f"netpeerd of {self.dir} is already running (pid {self.pid})")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config.write(self.config_file)
        if self.socket is not None:
            self.socket.unlink(missing_ok=True)
        env = dict(os.environ, **(extra_env or {}))
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, "serve", "--config", str(self.config_file), *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
        self.pidfile.write_text(f"{self.proc.pid}\n")
        return self.proc.pid

    def client(self, timeout: float = 30.0) -> Client:
        return Client(self.endpoint, self.admin_token, timeout=timeout)

    def wait_ready(self, timeout: float = 60.0, sweep: bool = False, poll: float = 0.02) -> dict:
        """Waits until netpeerd answers (and, with ``sweep``, until its first
        sweep completed), asking every ``poll`` seconds; its status."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                with self.client(timeout=2) as c:
                    status = c.status()
                if not sweep or status["sweeps"] > 0:
                    return status
            except errors.NetpeerError:
                pass
            if time.monotonic() > deadline:
                what = "complete its first sweep" if sweep else "answer"
                raise errors.Unavailable(f"netpeerd did not {what} within {timeout:.0f}s "
                                         f"(log: {self.log}): {self.tail(300)}")
            time.sleep(poll)

    def start(self, timeout: float = 60.0, sweep: bool = False, args: tuple[str, ...] = ()) -> dict:
        self.spawn(args=args)
        return self.wait_ready(timeout, sweep)

    def exit_code(self, timeout: float = 60.0) -> int | None:
        """Waits for the process (spawned by this object) to exit; its exit code."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def status(self) -> dict:
        with self.client(timeout=10) as c:
            return c.status()

    def wait_sweep(self, after: int, timeout: float = 60.0) -> dict:
        """Waits until this process has completed more than ``after`` sweeps;
        the report of the last one (expired, repaired_rows, errors)."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                status = self.status()
                if status["sweeps"] > after:
                    return status["last_sweep"]
            except errors.NetpeerError:
                pass
            if time.monotonic() > deadline:
                raise errors.Unavailable(f"netpeerd did not sweep within {timeout:.0f}s: {self.tail(300)}")
            time.sleep(0.02)

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            lines = self.tail(4000).strip().splitlines() or ["(no output)"]
            if self.proc.returncode == 2:   # refused to start: its one line says why and what to do
                raise errors.FailedPrecondition(lines[-1].removeprefix("netpeerd: "))
            raise errors.Unavailable(f"netpeerd exited with {self.proc.returncode}: {lines[-1]} (log: {self.log})")

    def kill9(self) -> None:
        """SIGKILL, and reap."""
        pid = self.pid
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid, 10)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; by pid only."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not self._wait_gone(pid, timeout):
                os.kill(pid, signal.SIGKILL)
                self._wait_gone(pid, 10)
        self.pidfile.unlink(missing_ok=True)

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.pid == pid:
                try:
                    self.proc.wait(max(0.0, deadline - time.monotonic()))
                    return True
                except subprocess.TimeoutExpired:
                    return False
            if not alive(pid):
                return True
            time.sleep(0.05)
        return not alive(pid)

    # ------------------------------------------------------------ logs
    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"

    def assert_no_internal_errors(self) -> None:
        """The log shows no unexpected exception (an INTERNAL answer is
        logged as "internal error in ..." with its traceback)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        bad = [line for line in text.splitlines() if "internal error" in line or "Traceback" in line]
        assert not bad, f"netpeerd logged unexpected errors: {bad[:5]}\n{self.tail()}"
