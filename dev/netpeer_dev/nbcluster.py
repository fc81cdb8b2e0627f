"""OVN central for replicas: the NB database as a three-member Raft cluster,
a standalone SB and ovn-northd, without systemd, in one directory.

Members are created with ``ovsdb-tool create-cluster`` / ``join-cluster``
(Raft and clients on unix sockets); each daemon runs ``--detach`` with a
pidfile of its own, is found again through it (only while the live
process's command line names that pidfile) and stopped by that pid.
Layout: ``nb{i}.db nb{i}.sock nb{i}.ctl nb{i}.raft nb{i}.pid nb{i}.log``,
``sb.*``, ``northd.*``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from netpeer_dev.proc import OvnDaemonError, alive, cmdline, find_binary

NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")


@dataclass(frozen=True)
class Member:
    """One daemon of the directory, identified by its pidfile."""

    name: str          # as `netpeer dev status` shows it
    pidfile: Path
    log: Path

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and alive(pid) and f"--pidfile={self.pidfile}" in cmdline(pid) else None

    def signal(self, sig: signal.Signals, timeout: float = 10.0) -> int | None:
        """Sends ``sig`` and waits until the process is gone; the pid it had."""
        pid = self.pid()
        if pid is None:
            return None
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return pid
        deadline = time.monotonic() + timeout
        while alive(pid):
            if time.monotonic() > deadline:
                raise OvnDaemonError(f"{self.name} (pid {pid}) still alive {timeout:.0f}s after {sig!r}")
            time.sleep(0.01)
        return pid

    def stop(self) -> None:
        try:
            self.signal(signal.SIGTERM, timeout=5)
        except OvnDaemonError:
            self.signal(signal.SIGKILL, timeout=5)


class NbCluster:
    """NB as a Raft cluster of ``size`` members; SB and northd standalone."""

    def __init__(self, directory: str | os.PathLike, size: int = 3):
        self.dir = Path(directory).absolute()
        self.size = size
        self.sb = Member("ovsdb-server-sb", self.dir / "sb.pid", self.dir / "sb.log")
        self.northd = Member("ovn-northd", self.dir / "northd.pid", self.dir / "northd.log")

    def member(self, i: int) -> Member:
        return Member(f"ovsdb-server-nb-{i}", self.dir / f"nb{i}.pid", self.dir / f"nb{i}.log")

    def members(self) -> range:
        return range(1, self.size + 1)

    def ctl(self, i: int) -> Path:
        return self.dir / f"nb{i}.ctl"

    def _raft(self, i: int) -> str:
        return f"unix:{self.dir / f'nb{i}.raft'}"

    @property
    def nb_remote(self) -> str:
        """Every member, comma-separated: clients find the leader."""
        return ",".join(f"unix:{self.dir / f'nb{i}.sock'}" for i in self.members())

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.dir / 'sb.sock'}"

    def run(self, *argv: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
        try:
            out = subprocess.run([find_binary(argv[0]), *argv[1:]], stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=timeout, cwd=self.dir,
                                 env=dict(os.environ, OVS_RUNDIR=str(self.dir), OVN_RUNDIR=str(self.dir)))
        except subprocess.TimeoutExpired:
            raise OvnDaemonError(f"{' '.join(argv[:4])} timed out after {timeout:.0f}s") from None
        if check and out.returncode != 0:
            raise OvnDaemonError(f"{' '.join(argv[:4])} failed: {(out.stderr or out.stdout).strip()[-300:]}")
        return out

    def nbctl(self, *args: str, timeout: float = 30.0) -> str:
        secs = max(1, int(timeout))
        return self.run("ovn-nbctl", f"--db={self.nb_remote}", f"--timeout={secs}", *args, timeout=secs + 5).stdout

    # ------------------------------------------------------------ start
    def _spawn(self, proc: Member, binary: str, *args: str) -> int:
        proc.pidfile.unlink(missing_ok=True)
        self.run(binary, "--detach", "--no-chdir", f"--pidfile={proc.pidfile}", f"--log-file={proc.log}",
                 "-vconsole:off", *args)
        for _ in range(250):
            pid = proc.pid()
            if pid is not None:
                return pid
            time.sleep(0.02)
        raise OvnDaemonError(f"{proc.name} exited right after starting; see {proc.log}")

    def start_member(self, i: int) -> int:
        """Starts member ``i`` on its database file (it rejoins the cluster)."""
        for name in (f"nb{i}.ctl", f"nb{i}.sock"):
            (self.dir / name).unlink(missing_ok=True)
        return self._spawn(self.member(i), "ovsdb-server", f"--remote=punix:{self.dir / f'nb{i}.sock'}",
                           f"--unixctl={self.ctl(i)}", str(self.dir / f"nb{i}.db"))

    def start(self, timeout: float = 60.0) -> None:
        """Creates the cluster the first time, starts what is not running and
        waits for a leader and for northd to catch up."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for schema in (NB_SCHEMA, SB_SCHEMA):
            if not schema.exists():
                raise OvnDaemonError(f"{schema} is missing: install the Debian package ovn-central")
        if not (self.dir / "nb1.db").exists():
            self.run("ovsdb-tool", "create-cluster", str(self.dir / "nb1.db"), str(NB_SCHEMA), self._raft(1))
            for i in self.members():
                if i > 1:
                    self.run("ovsdb-tool", "join-cluster", str(self.dir / f"nb{i}.db"), "OVN_Northbound",
                             self._raft(i), self._raft(1))
        for i in self.members():
            if self.member(i).pid() is None:
                self.start_member(i)
        self.wait_leader(timeout)
        self.wait_members_joined(timeout)
        if self.sb.pid() is None:
            if not (self.dir / "sb.db").exists():
                self.run("ovsdb-tool", "create", str(self.dir / "sb.db"), str(SB_SCHEMA))
            (self.dir / "sb.sock").unlink(missing_ok=True)
            self._spawn(self.sb, "ovsdb-server", f"--remote=punix:{self.dir / 'sb.sock'}",
                        f"--unixctl={self.dir / 'sb.ctl'}", str(self.dir / "sb.db"))
        if self.northd.pid() is None:
            self._spawn(self.northd, "ovn-northd", f"--ovnnb-db={self.nb_remote}", f"--ovnsb-db={self.sb_remote}",
                        f"--unixctl={self.dir / 'northd.ctl'}")
        self.nbctl("--wait=sb", "sync", timeout=timeout)

    # ------------------------------------------------------------ raft
    def _status(self, i: int) -> dict[str, str]:
        """Member ``i``'s ``cluster/status`` as fields; {} when it does not answer."""
        if self.member(i).pid() is None:
            return {}
        out = self.run("ovs-appctl", "-t", str(self.ctl(i)), "--timeout=5", "cluster/status", "OVN_Northbound",
                       timeout=10, check=False)
        if out.returncode != 0:
            return {}
        fields = {}
        for line in out.stdout.splitlines():
            key, sep, value = line.partition(":")
            if sep and not line.startswith(" "):
                fields.setdefault(key.strip(), value.strip())
        return fields

    def role(self, i: int) -> str | None:
        """leader, follower, candidate; None when member ``i`` does not answer."""
        return self._status(i).get("Role")

    def wait_members_joined(self, timeout: float = 30.0) -> None:
        """Until every running member says it is a cluster member."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = [i for i in self.members() if self.member(i).pid() is not None]
            if all(self._status(i).get("Status") == "cluster member" for i in running):
                return
            time.sleep(0.05)
        raise OvnDaemonError(f"NB members did not all join the cluster within {timeout:.0f}s; see {self.dir}/nb*.log")

    def kill(self, i: int) -> int:
        """SIGKILL member ``i`` by its pidfile's pid; waits until it is gone."""
        pid = self.member(i).signal(signal.SIGKILL)
        if pid is None:
            raise OvnDaemonError(f"ovsdb-server-nb-{i} is not running")
        return pid

    def transfer_leadership(self, i: int) -> None:
        """Asks leader ``i`` to hand leadership to another member (what it does
        before writing a snapshot)."""
        self.run("ovs-appctl", "-t", str(self.ctl(i)), "cluster/failure-test", "transfer-leadership")

    def leader(self) -> int | None:
        return next((i for i in self.members() if self.role(i) == "leader"), None)

    def wait_leader(self, timeout: float = 30.0, exclude: int | None = None) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None and leader != exclude:
                return leader
            time.sleep(0.05)
        raise OvnDaemonError(f"no NB leader after {timeout:.0f}s; see {self.dir}/nb*.log")

    # ------------------------------------------------------------ stop
    def procs(self) -> list[Member]:
        return [*(self.member(i) for i in self.members()), self.sb, self.northd]

    def stop(self) -> None:
        """Stops every process by pid, northd first."""
        errors = []
        for proc in reversed(self.procs()):
            try:
                proc.stop()
            except OvnDaemonError as exc:
                errors.append(str(exc))
        if errors:
            raise OvnDaemonError("; ".join(errors))
