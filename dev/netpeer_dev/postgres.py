"""A private PostgreSQL cluster from Debian's packages, without systemd.

``initdb`` / ``pg_ctl`` of ``postgresql-15`` (or the newest version found
under /usr/lib/postgresql), one data directory, clients on a unix socket in
that directory only (``listen_addresses = ''``), trust authentication (only
the socket's directory permissions let anyone in). PostgreSQL refuses to run
as root, so when we are root the cluster runs as the ``postgres`` system
user (created by the Debian package), and its directory lives where that
user can reach it: ``/var/tmp/netpeer-pg-<hash of the owner directory>``
(a state directory under /root is out of its reach). The postmaster is
found again through ``postmaster.pid`` and stopped by that pid only.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from netpeer_dev.proc import alive, cmdline

PACKAGE = "postgresql-15"


class PostgresError(RuntimeError):
    """The cluster could not be made, started, stopped or reached; one line."""


def bin_dir() -> Path:
    """Where initdb and pg_ctl are (the newest installed major version)."""
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*/bin") if (p / "initdb").exists()),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not versions:
        raise PostgresError(f"PostgreSQL is not installed (no {root}/*/bin/initdb): apt-get install {PACKAGE} "
                            "(scripts/setup.sh does)")
    return versions[-1]


class PgCluster:
    """One cluster for the state directory ``owner_dir`` (the dev stack's, a test's)."""

    def __init__(self, owner_dir: str | os.PathLike, port: int = 5432):
        self.owner_dir = Path(owner_dir).absolute()
        digest = hashlib.sha256(str(self.owner_dir).encode()).hexdigest()[:10]
        self.dir = Path(f"/var/tmp/netpeer-pg-{digest}") if os.geteuid() == 0 else self.owner_dir / "pg"
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = port
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    # ------------------------------------------------------------ names
    @property
    def socket_dir(self) -> Path:
        return self.dir

    def url(self, database: str = "netpeer") -> str:
        return f"postgresql:///{database}?host={self.socket_dir}&port={self.port}&user={self.user}"

    @property
    def pid(self) -> int | None:
        """The postmaster's pid, while it runs (first line of postmaster.pid)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        if not alive(pid):
            return None
        return pid if any(str(self.data) in part for part in cmdline(pid)) else None

    # ------------------------------------------------------------ lifecycle
    def _run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        kwargs = {}
        if os.geteuid() == 0:
            kwargs = {"user": self.user, "group": pwd.getpwnam(self.user).pw_gid, "extra_groups": []}
        try:
            out = subprocess.run([str(bin_dir() / argv[0]), *argv[1:]], capture_output=True, text=True,
                                 timeout=timeout, stdin=subprocess.DEVNULL, cwd="/", **kwargs)
        except subprocess.TimeoutExpired:
            raise PostgresError(f"{argv[0]} did not finish within {timeout:.0f}s (log: {self.log})") from None
        if out.returncode != 0:
            lines = (out.stderr or out.stdout).strip().splitlines() or ["(no output)"]
            raise PostgresError(f"{argv[0]} failed: {lines[-1]} (log: {self.log})")
        return out

    def init(self) -> None:
        """Creates the cluster (once)."""
        if (self.data / "PG_VERSION").exists():
            return
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(self.user)
            except KeyError:
                raise PostgresError(f"no '{self.user}' user: apt-get install {PACKAGE} creates it") from None
            self.dir.mkdir(mode=0o700, exist_ok=True)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        else:
            self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "--encoding=UTF8",
                  "--locale=C", "--no-sync")

    def start(self, timeout: float = 60) -> int:
        """Starts the postmaster (creating the cluster and the ``netpeer``
        database if needed); its pid."""
        self.init()
        if self.pid is None:
            (self.data / "postmaster.pid").unlink(missing_ok=True)
            options = (f"-k {self.socket_dir} -c listen_addresses='' -p {self.port} -c max_connections=200 "
                       "-c shared_buffers=64MB")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                      "-t", str(int(timeout)), "start", timeout=timeout + 10)
        self.wait_ready(timeout)
        self.create_database("netpeer")
        return self.pid

    def wait_ready(self, timeout: float = 60) -> None:
        import psycopg
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                if time.monotonic() > deadline:
                    raise PostgresError(f"PostgreSQL in {self.dir} does not answer: {exc}") from None
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """Creates database ``name`` unless it exists; its URL."""
        import psycopg
        with psycopg.connect(self.url("postgres"), autocommit=True) as db:
            if not db.execute("SELECT 1 FROM pg_database WHERE datname=%s", (name,)).fetchone():
                db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        with psycopg.connect(self.url("postgres"), autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def kill(self, sig: signal.Signals = signal.SIGKILL, timeout: float = 30) -> int | None:
        """Signals the postmaster (by its pid) and waits until it is gone;
        SIGQUIT is PostgreSQL's immediate shutdown (a crash, recovered from
        the WAL at the next start), SIGINT its fast clean one."""
        pid = self.pid
        if pid is None:
            return None
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while alive(pid):
            if time.monotonic() > deadline:
                raise PostgresError(f"postgres (pid {pid}) still runs {timeout:.0f}s after signal {sig!r}")
            time.sleep(0.02)
        return pid

    def stop(self) -> None:
        """Fast shutdown, by pid; SIGKILL if it does not go within 20 s."""
        try:
            self.kill(signal.SIGINT, timeout=20)
        except PostgresError:
            self.kill(signal.SIGKILL, timeout=10)

    def remove(self) -> None:
        """Stops the cluster and deletes its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
