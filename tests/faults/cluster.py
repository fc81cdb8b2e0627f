"""A three-member clustered OVN northbound database (Raft over unix sockets)
with a standalone southbound database and ovn-northd, in one temp directory,
for fault tests.

Every process is started with ``--detach`` and a pidfile of its own, found
again through that pidfile (and only when the live process's command line
names it), and stopped by pid: nothing is ever signalled by name. Raft
traffic, clients and northd all use unix sockets in the state directory.

Layout::

    nb1.db nb1.sock nb1.ctl nb1.raft nb1.pid nb1.log     (members 1..3)
    sb.db  sb.sock  sb.ctl  sb.pid  sb.log
    northd.pid northd.log
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
TOOLS = ("ovsdb-server", "ovsdb-tool", "ovs-appctl", "ovn-northd", "ovn-nbctl", "ovn-sbctl")
_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"


class ClusterError(RuntimeError):
    """A cluster process could not be started, stopped or queried."""


def require_tools() -> None:
    """Raise (never skip) when the OVN/OVS tools or schemas are missing."""
    missing = [t for t in TOOLS if shutil.which(t, path=_PATH) is None]
    missing += [str(s) for s in (NB_SCHEMA, SB_SCHEMA) if not s.exists()]
    if missing:
        raise ClusterError("missing " + ", ".join(missing) + ": install ovn-central, ovn-common and "
                           "openvswitch-common (scripts/setup.sh or `make test`)")
    if os.geteuid() != 0:
        raise ClusterError("the OVN fault tests need root (they run ovsdb-server and ovn-northd)")


def _bin(name: str) -> str:
    path = shutil.which(name, path=_PATH)
    if path is None:
        raise ClusterError(f"{name} not found")
    return path


def alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (detached daemons are
    reparented to an init that may reap them late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZXx"


def _cmdline(pid: int) -> list[str]:
    try:
        return [p.decode(errors="replace") for p in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if p]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


@dataclass(frozen=True)
class Proc:
    """One daemon of the cluster directory: its pidfile identifies it."""

    name: str
    pidfile: Path
    log: Path

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if pid > 0 and alive(pid) and f"--pidfile={self.pidfile}" in _cmdline(pid):
            return pid
        return None

    def signal(self, sig: signal.Signals, timeout: float = 10.0) -> int | None:
        """Send ``sig`` to the daemon (if it runs) and wait until it is gone;
        return the pid it had."""
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
                raise ClusterError(f"{self.name} (pid {pid}) still alive {timeout:.0f}s after signal {sig!r}")
            time.sleep(0.01)
        return pid

    def stop(self) -> None:
        try:
            self.signal(signal.SIGTERM, timeout=5)
        except ClusterError:
            self.signal(signal.SIGKILL, timeout=5)


class OvnCluster:
    """NB as a three-member Raft cluster; SB and ovn-northd standalone."""

    def __init__(self, state_dir: str | os.PathLike, members: int = 3) -> None:
        require_tools()
        self.dir = Path(state_dir).absolute()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.size = members
        self.sb = Proc("sb", self.dir / "sb.pid", self.dir / "sb.log")
        self.northd = Proc("northd", self.dir / "northd.pid", self.dir / "northd.log")

    # ---------------------------------------------------------------- names
    def member(self, i: int) -> Proc:
        return Proc(f"nb{i}", self.dir / f"nb{i}.pid", self.dir / f"nb{i}.log")

    def members(self) -> range:
        return range(1, self.size + 1)

    def _db(self, i: int) -> Path:
        return self.dir / f"nb{i}.db"

    def _sock(self, i: int) -> Path:
        return self.dir / f"nb{i}.sock"

    def ctl(self, i: int) -> Path:
        return self.dir / f"nb{i}.ctl"

    def _raft(self, i: int) -> str:
        return f"unix:{self.dir / f'nb{i}.raft'}"

    @property
    def nb_remote(self) -> str:
        """Every member, comma-separated, as clients list a cluster."""
        return ",".join(f"unix:{self._sock(i)}" for i in self.members())

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.dir / 'sb.sock'}"

    @property
    def sb_db(self) -> Path:
        return self.dir / "sb.db"

    def env(self) -> dict[str, str]:
        env = dict(os.environ, PATH=_PATH)
        for prefix in ("OVS", "OVN"):
            for kind in ("RUNDIR", "DBDIR", "LOGDIR", "SYSCONFDIR"):
                env[f"{prefix}_{kind}"] = str(self.dir)
        env["OVN_NB_DB"] = self.nb_remote
        env["OVN_SB_DB"] = self.sb_remote
        return env

    # ---------------------------------------------------------------- tools
    def run(self, *argv: str, timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run([_bin(argv[0]), *argv[1:]], env=self.env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{' '.join(argv[:4])} timed out after {timeout:.0f}s") from None
        if check and proc.returncode != 0:
            raise ClusterError(f"{' '.join(argv[:4])} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    def nbctl(self, *args: str, timeout: float = 30.0) -> str:
        """``ovn-nbctl`` against the cluster (it finds the leader among the remotes)."""
        secs = max(1, int(timeout))
        return self.run("ovn-nbctl", f"--db={self.nb_remote}", f"--timeout={secs}", *args,
                        timeout=secs + 5).stdout

    def sbctl(self, *args: str, timeout: float = 30.0) -> str:
        secs = max(1, int(timeout))
        return self.run("ovn-sbctl", f"--db={self.sb_remote}", f"--timeout={secs}", *args,
                        timeout=secs + 5).stdout

    def wait_sb_sync(self, timeout: float = 60.0) -> None:
        self.nbctl("--wait=sb", "sync", timeout=timeout)

    # ---------------------------------------------------------------- start
    def _spawn(self, proc: Proc, binary: str, *args: str) -> int:
        proc.pidfile.unlink(missing_ok=True)
        self.run(binary, "--detach", "--no-chdir", f"--pidfile={proc.pidfile}", f"--log-file={proc.log}",
                 "-vconsole:off", *args)
        for _ in range(250):
            pid = proc.pid()
            if pid is not None:
                return pid
            time.sleep(0.02)
        raise ClusterError(f"{proc.name} exited right after starting; see {proc.log}")

    def start_member(self, i: int) -> int:
        """Start member ``i`` on its existing database file (or rejoin with it)."""
        self.ctl(i).unlink(missing_ok=True)
        self._sock(i).unlink(missing_ok=True)
        return self._spawn(self.member(i), "ovsdb-server", f"--remote=punix:{self._sock(i)}",
                           f"--unixctl={self.ctl(i)}", str(self._db(i)))

    def start_sb(self, fresh: bool = False) -> int:
        if fresh or not self.sb_db.exists():
            self.sb_db.unlink(missing_ok=True)
            self.run("ovsdb-tool", "create", str(self.sb_db), str(SB_SCHEMA))
        (self.dir / "sb.sock").unlink(missing_ok=True)
        return self._spawn(self.sb, "ovsdb-server", f"--remote=punix:{self.dir / 'sb.sock'}",
                           f"--unixctl={self.dir / 'sb.ctl'}", str(self.sb_db))

    def start_northd(self) -> int:
        return self._spawn(self.northd, "ovn-northd", f"--ovnnb-db={self.nb_remote}",
                           f"--ovnsb-db={self.sb_remote}", f"--unixctl={self.dir / 'northd.ctl'}")

    def start(self, timeout: float = 60.0) -> None:
        """Create the cluster (member 1 creates it, the others join), start
        everything and wait until there is a leader and northd has caught up."""
        self.run("ovsdb-tool", "create-cluster", str(self._db(1)), str(NB_SCHEMA), self._raft(1))
        for i in self.members():
            if i > 1:
                self.run("ovsdb-tool", "join-cluster", str(self._db(i)), "OVN_Northbound", self._raft(i),
                         self._raft(1))
        for i in self.members():
            self.start_member(i)
        self.wait_leader(timeout)
        self.wait_members_joined(timeout)
        self.start_sb(fresh=True)
        self.start_northd()
        self.wait_sb_sync(timeout)

    # ---------------------------------------------------------------- raft
    def status(self, i: int) -> str | None:
        """``cluster/status OVN_Northbound`` of member ``i``, or None when it does not answer."""
        if self.member(i).pid() is None:
            return None
        proc = self.run("ovs-appctl", "-t", str(self.ctl(i)), "--timeout=5", "cluster/status", "OVN_Northbound",
                        timeout=10, check=False)
        return proc.stdout if proc.returncode == 0 else None

    def leader(self) -> int | None:
        """The member that says it is the leader (None during an election)."""
        for i in self.members():
            out = self.status(i)
            if out and "Role: leader" in out:
                return i
        return None

    def wait_leader(self, timeout: float = 30.0, exclude: int | None = None) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.leader()
            if leader is not None and leader != exclude:
                return leader
            time.sleep(0.05)
        raise ClusterError(f"no NB leader{'' if exclude is None else f' other than nb{exclude}'} "
                           f"after {timeout:.0f}s; see {self.dir}/nb*.log")

    def wait_members_joined(self, timeout: float = 30.0) -> None:
        """Until every running member reports ``Status: cluster member``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = [self.status(i) or "" for i in self.members() if self.member(i).pid() is not None]
            if all("Status: cluster member" in s for s in states):
                return
            time.sleep(0.05)
        raise ClusterError(f"members did not all join the cluster within {timeout:.0f}s")

    def kill(self, i: int) -> int:
        """SIGKILL member ``i`` (by its pidfile's pid); wait until it is gone."""
        pid = self.member(i).signal(signal.SIGKILL)
        if pid is None:
            raise ClusterError(f"nb{i} is not running")
        return pid

    def transfer_leadership(self, i: int) -> None:
        """Ask leader ``i`` to hand leadership to another member (what it does
        before writing a snapshot)."""
        self.run("ovs-appctl", "-t", str(self.ctl(i)), "cluster/failure-test", "transfer-leadership")

    # ---------------------------------------------------------------- stop
    def stop(self) -> None:
        """Stop every process of this directory by pid, northd first."""
        errors = []
        for proc in [self.northd, self.sb, *(self.member(i) for i in self.members())]:
            try:
                proc.stop()
            except ClusterError as exc:
                errors.append(str(exc))
        if errors:
            raise ClusterError("; ".join(errors))

    def pids(self) -> dict[str, int]:
        procs = [self.northd, self.sb, *(self.member(i) for i in self.members())]
        return {p.name: pid for p in procs if (pid := p.pid()) is not None}
