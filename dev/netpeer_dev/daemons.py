"""Start and stop real OVN / Open vSwitch daemons in a private state directory.

Longer than 400 lines: it is one class, ``OvnDaemons``, that owns the whole
lifecycle of one deployment's daemons (spawn, find again by pidfile, stop by
pid, chassis namespace); split, the rules that make stopping safe (a pid counts
only while its command line names our pidfile) would be scattered. What other
tools need of processes is in ``netpeer_dev.proc``.

No systemd, no ``ovn-ctl``, no TCP ports: every daemon runs ``--detach`` with a
pidfile, a log file and unix sockets inside one state directory, so several
independent deployments (one per test, one per developer) can live on one
machine, and a user can read every log in one place.

Layout of the state directory (the names ``ovn-ctl`` uses, so the plain
``ovn-nbctl`` / ``ovn-sbctl`` / ``ovs-vsctl`` / ``ovn-appctl`` find this
instance once :meth:`OvnDaemons.env` is in their environment)::

    ovnnb_db.db  ovnnb_db.sock  ovnnb_db.ctl  ovnnb_db.pid  ovsdb-server-nb.log
    ovnsb_db.db  ovnsb_db.sock  ovnsb_db.ctl  ovnsb_db.pid  ovsdb-server-sb.log
    ovn-northd.pid  ovn-northd.log
    conf.db  db.sock  ovsdb-server.pid  ovsdb-server.log          (chassis)
    ovs-vswitchd.pid  ovs-vswitchd.log  br-int.mgmt               (chassis)
    ovn-controller.pid  ovn-controller.log                        (chassis)

The chassis uses the userspace datapath (``datapath_type=netdev``), so it
needs no kernel openvswitch module. That datapath creates persistent tap
devices named ``ovs-netdev`` and ``br-int``, and a second ovs-vswitchd in the
same network namespace fails to create them ("Device or resource busy"). So
ovs-vswitchd runs in a network namespace of its own, the *chassis namespace*
(:attr:`OvnDaemons.chassis_netns`, derived from the state dir): several
chassis (tests, a developer's environment) can run on one host, and the host's
root namespace never sees a tap or veth of ours. The host ends of the
instances' veths live there too (see netpeer_dev.netns). :meth:`OvnDaemons.stop`
deletes that namespace.

Only the standard library is used.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from netpeer_dev.proc import OvnDaemonError, StateLock, alive, cmdline, find_binary, send_signal, wait_dead

__all__ = ["DaemonStatus", "OvnDaemonError", "OvnDaemons", "BRIDGE", "alive"]

#: The integration bridge ovn-controller programs.
BRIDGE = "br-int"

# Longest path the kernel accepts for a unix socket (sun_path is 108 bytes, NUL included).
_SUN_PATH_MAX = 107
# Longest file name we put in the state dir that is a unix socket.
_LONGEST_SOCKET_NAME = "ovn-controller.4194304.ctl"

_OVN_NB_SCHEMA = Path("/usr/share/ovn/ovn-nb.ovsschema")
_OVN_SB_SCHEMA = Path("/usr/share/ovn/ovn-sb.ovsschema")
_OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")

_SCHEMA_PACKAGE = {
    _OVN_NB_SCHEMA: "ovn-central",
    _OVN_SB_SCHEMA: "ovn-central",
    _OVS_SCHEMA: "openvswitch-switch",
}

@dataclass(frozen=True)
class DaemonStatus:
    """What one daemon of a state directory is doing.

    ``detail`` is the daemon's socket (or log file) path, for people.
    """

    name: str
    pid: int | None
    running: bool
    detail: str


@dataclass(frozen=True)
class _Daemon:
    """Static description of one daemon inside the state directory."""

    name: str          # as shown in status(), e.g. "ovsdb-server-nb"
    binary: str        # executable name
    pidfile: str       # file name inside the state dir
    logfile: str
    detail: str        # socket (or log) file name shown in status()
    chassis: bool      # part of the chassis (not of central)


_NB = _Daemon("ovsdb-server-nb", "ovsdb-server", "ovnnb_db.pid", "ovsdb-server-nb.log", "ovnnb_db.sock", False)
_SB = _Daemon("ovsdb-server-sb", "ovsdb-server", "ovnsb_db.pid", "ovsdb-server-sb.log", "ovnsb_db.sock", False)
_NORTHD = _Daemon("ovn-northd", "ovn-northd", "ovn-northd.pid", "ovn-northd.log", "ovn-northd.log", False)
_OVSDB = _Daemon("ovsdb-server", "ovsdb-server", "ovsdb-server.pid", "ovsdb-server.log", "db.sock", True)
_VSWITCHD = _Daemon("ovs-vswitchd", "ovs-vswitchd", "ovs-vswitchd.pid", "ovs-vswitchd.log", "br-int.mgmt", True)
_CONTROLLER = _Daemon("ovn-controller", "ovn-controller", "ovn-controller.pid", "ovn-controller.log",
                      "ovn-controller.log", True)

#: Start order; stop goes the other way.
_ALL = (_NB, _SB, _NORTHD, _OVSDB, _VSWITCHD, _CONTROLLER)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class OvnDaemons:
    """OVN central (NB + SB ovsdb-server, ovn-northd) and optionally a chassis
    (ovsdb-server for Open_vSwitch, ovs-vswitchd userspace datapath,
    ovn-controller) in one state directory.

    Every daemon is found again through its pidfile and only counts as ours
    when the live process's command line names that pidfile, so a stale
    pidfile whose pid was reused is never signalled. Nothing is ever killed
    by name.
    """

    def __init__(self, state_dir: str | os.PathLike) -> None:
        self.state_dir = Path(state_dir).absolute()
        longest = self.state_dir / _LONGEST_SOCKET_NAME
        if len(os.fsencode(str(longest))) > _SUN_PATH_MAX:
            raise OvnDaemonError(
                f"state directory {self.state_dir} is too long for unix sockets "
                f"(socket paths must stay under 108 bytes): use a short path such as "
                f"tempfile.mkdtemp(prefix='np-', dir='/tmp')")
        self._system_id: str | None = None
        digest = hashlib.sha256(os.fsencode(str(self.state_dir))).hexdigest()
        self._chassis_netns = f"npch-{digest[:10]}"

    # ------------------------------------------------------------------ paths

    def _path(self, name: str) -> Path:
        return self.state_dir / name

    @property
    def nb_socket(self) -> Path:
        """The NB ovsdb-server's unix socket."""
        return self._path("ovnnb_db.sock")

    @property
    def sb_socket(self) -> Path:
        """The SB ovsdb-server's unix socket."""
        return self._path("ovnsb_db.sock")

    @property
    def ovs_socket(self) -> Path:
        """The Open_vSwitch ovsdb-server's unix socket (chassis)."""
        return self._path("db.sock")

    @property
    def nb_remote(self) -> str:
        """OVSDB remote of the NB database, e.g. ``unix:/tmp/np-x/ovnnb_db.sock``."""
        return f"unix:{self.nb_socket}"

    @property
    def sb_remote(self) -> str:
        """OVSDB remote of the SB database."""
        return f"unix:{self.sb_socket}"

    @property
    def ovs_remote(self) -> str:
        """OVSDB remote of the local Open_vSwitch database (chassis)."""
        return f"unix:{self.ovs_socket}"

    @property
    def bridge(self) -> str:
        """The integration bridge (always ``br-int``)."""
        return BRIDGE

    @property
    def chassis_netns(self) -> str:
        """The network namespace ovs-vswitchd runs in (and the instances' veth host
        ends live in): ``npch-<10 hex digits of a hash of the state dir>``."""
        return self._chassis_netns

    def chassis_netns_exists(self) -> bool:
        """True when the chassis namespace exists."""
        return Path("/run/netns", self._chassis_netns).exists()

    @property
    def system_id(self) -> str | None:
        """The chassis name (``external_ids:system-id``) once the chassis was started."""
        if self._system_id is None:
            path = self._path("system-id")
            if path.exists():
                self._system_id = path.read_text().strip() or None
        return self._system_id

    def log_file(self, name: str) -> Path:
        """The log file of daemon ``name`` (as in :meth:`status`)."""
        return self._path(self._spec(name).logfile)

    @staticmethod
    def _spec(name: str) -> _Daemon:
        for spec in _ALL:
            if spec.name == name:
                return spec
        raise KeyError(name)

    # ------------------------------------------------------------ environment

    def env(self) -> dict[str, str]:
        """A full environment (a copy of ``os.environ``) whose OVS_*/OVN_* directory
        variables, ``OVN_NB_DB`` and ``OVN_SB_DB`` point into the state dir, so the
        plain tools (``ovn-nbctl``, ``ovn-sbctl``, ``ovs-vsctl``, ``ovs-appctl -t
        ovs-vswitchd``, ``ovn-appctl -t ovn-controller``) talk to this instance."""
        env = dict(os.environ)
        state = str(self.state_dir)
        for prefix in ("OVS", "OVN"):
            for kind in ("RUNDIR", "DBDIR", "LOGDIR", "SYSCONFDIR"):
                env[f"{prefix}_{kind}"] = state
        env["OVN_NB_DB"] = self.nb_remote
        env["OVN_SB_DB"] = self.sb_remote
        return env

    # ------------------------------------------------------------- pid files

    def _pid(self, spec: _Daemon) -> int | None:
        """The live pid of ``spec`` in this state dir, or None."""
        pidfile = self._path(spec.pidfile)
        try:
            pid = int(pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if pid <= 0 or not alive(pid):
            return None
        # Only ours when the process was started with this very pidfile.
        if f"--pidfile={pidfile}" not in cmdline(pid):
            return None
        return pid

    def _lock(self) -> StateLock:
        return StateLock(self._path(".lock"))

    # --------------------------------------------------------------- running

    def _run(self, argv: list[str], timeout: float, what: str | None = None) -> str:
        """Run a short-lived tool; return stdout or raise OvnDaemonError with its stderr."""
        binary = find_binary(argv[0])
        try:
            proc = subprocess.run([binary, *argv[1:]], env=self.env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise OvnDaemonError(f"{what or argv[0]} timed out after {timeout:.0f}s "
                                 f"(is the database running? see logs in {self.state_dir})") from None
        if proc.returncode in (-signal.SIGALRM, 128 + signal.SIGALRM) or "(Alarm clock)" in proc.stderr:
            # The tool's own --timeout fired.
            raise OvnDaemonError(f"{what or argv[0]} timed out (is every daemon running? "
                                 f"see logs in {self.state_dir})")
        if proc.returncode != 0:
            message = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit status {proc.returncode}"
            raise OvnDaemonError(f"{what or argv[0]} failed: {message}")
        return proc.stdout

    def _ctl(self, tool: str, db_option: str, args: tuple[str, ...], timeout: float) -> str:
        seconds = max(1, int(timeout))
        return self._run([tool, db_option, f"--timeout={seconds}", *args], seconds + 5,
                         what=f"{tool} {' '.join(args[:3])}".strip())

    def nbctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``ovn-nbctl --db=<nb_remote> ARGS`` and return its stdout.

        Raises OvnDaemonError (with ovn-nbctl's error line) on failure or timeout.
        """
        return self._ctl("ovn-nbctl", f"--db={self.nb_remote}", args, timeout)

    def sbctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``ovn-sbctl --db=<sb_remote> ARGS`` and return its stdout."""
        return self._ctl("ovn-sbctl", f"--db={self.sb_remote}", args, timeout)

    def vsctl(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``ovs-vsctl --db=<ovs_remote> ARGS`` against the chassis' Open_vSwitch database."""
        if self._pid(_OVSDB) is None:
            raise OvnDaemonError(f"the chassis is not running in {self.state_dir}: start(chassis=True) first")
        return self._ctl("ovs-vsctl", f"--db={self.ovs_remote}", args, timeout)

    def wait_hv_sync(self, timeout: float = 30) -> None:
        """Block until ovn-controller has applied everything committed to NB so far
        (``ovn-nbctl --wait=hv sync``). Chassis only."""
        if self._pid(_CONTROLLER) is None:
            raise OvnDaemonError(f"ovn-controller is not running in {self.state_dir}: start(chassis=True) first")
        self.nbctl("--wait=hv", "sync", timeout=timeout)

    def wait_sb_sync(self, timeout: float = 30) -> None:
        """Block until ovn-northd has translated everything committed to NB so far
        into SB (``ovn-nbctl --wait=sb sync``)."""
        self.nbctl("--wait=sb", "sync", timeout=timeout)

    # ------------------------------------------------------------------ start

    def _spawn(self, spec: _Daemon, args: list[str], deadline: float, netns: str | None = None) -> int:
        """Start one daemon with --detach (inside ``netns`` if given); return its pid."""
        binary = find_binary(spec.binary)
        pidfile = self._path(spec.pidfile)
        logfile = self._path(spec.logfile)
        errfile = self._path(f"{spec.name}.stderr")
        pidfile.unlink(missing_ok=True)
        argv = [binary, "--detach", "--no-chdir", f"--pidfile={pidfile}", f"--log-file={logfile}",
                "-vconsole:err", *args]
        if netns is not None:
            # ip execs the daemon, so its command line (and pidfile check) stay the same.
            argv = [find_binary("ip"), "netns", "exec", netns, *argv]
        remaining = max(1.0, deadline - time.monotonic())
        # stdout/stderr go to a file, not a pipe: a detached child keeps its
        # stdio until it is ready, and a pipe would tie us to it.
        with open(errfile, "w") as err:
            try:
                proc = subprocess.run(argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=err,
                                      stderr=subprocess.STDOUT, cwd=self.state_dir, timeout=remaining)
                returncode = proc.returncode
            except subprocess.TimeoutExpired:
                returncode = None
        if returncode != 0:
            self._stop_one(spec)   # the half-started child, if any
            reason = _last_line(errfile.read_text()) if errfile.exists() else ""
            if returncode is None:
                reason = f"not ready after {remaining:.0f}s" + (f" ({reason})" if reason else "")
            raise OvnDaemonError(f"{spec.name} failed to start: {reason or f'exit status {returncode}'}; "
                                 f"see {logfile}")
        errfile.unlink(missing_ok=True)
        for _ in range(50):
            pid = self._pid(spec)
            if pid is not None:
                return pid
            time.sleep(0.02)
        raise OvnDaemonError(f"{spec.name} exited right after starting; see {logfile}")

    def _ensure_db(self, db: Path, schema: Path) -> None:
        """Create ``db`` from ``schema``, or convert it when the schema is newer."""
        if not schema.exists():
            raise OvnDaemonError(f"{schema} not found: install the Debian package {_SCHEMA_PACKAGE[schema]}")
        if not db.exists() or db.stat().st_size == 0:
            db.unlink(missing_ok=True)
            self._run(["ovsdb-tool", "create", str(db), str(schema)], 30)
            return
        needs = self._run(["ovsdb-tool", "needs-conversion", str(db), str(schema)], 30,
                          what=f"checking {db}").strip()
        if needs == "yes":
            self._run(["ovsdb-tool", "convert", str(db), str(schema)], 60, what=f"converting {db}")

    def _start_db(self, spec: _Daemon, db: str, schema: Path, socket: Path, ctl: str | None,
                  deadline: float, progress: Callable[[str], None]) -> None:
        if self._pid(spec) is not None:
            progress(f"{spec.name} already running")
            return
        progress(f"starting {spec.name}")
        self._ensure_db(self._path(db), schema)
        self._remove_stale(spec)
        args = [f"--remote=punix:{socket}"]
        if ctl:
            args.append(f"--unixctl={self._path(ctl)}")
        self._spawn(spec, [*args, str(self._path(db))], deadline)

    def _remove_stale(self, spec: _Daemon) -> None:
        """Remove the sockets and pidfile a dead daemon left behind."""
        names = {
            _NB.name: ["ovnnb_db.sock", "ovnnb_db.ctl"],
            _SB.name: ["ovnsb_db.sock", "ovnsb_db.ctl"],
            _OVSDB.name: ["db.sock"],
            _VSWITCHD.name: [f"{BRIDGE}.mgmt", f"{BRIDGE}.snoop"],
        }.get(spec.name, [])
        for name in names:
            self._path(name).unlink(missing_ok=True)
        pidfile = self._path(spec.pidfile)
        try:
            old = int(pidfile.read_text().strip())
        except (FileNotFoundError, ValueError):
            old = None
        if old is not None:
            self._path(f"{spec.binary}.{old}.ctl").unlink(missing_ok=True)
        pidfile.unlink(missing_ok=True)

    def start(self, chassis: bool = False, timeout: float = 30.0,
              progress: Callable[[str], None] | None = None) -> None:
        """Start what is not running yet and wait until it works.

        Idempotent: daemons already running (pidfile + live pid) are kept;
        databases are created from the installed schemas on first start (and
        converted if the schema is newer). Waits until NB and SB answer and
        ovn-northd has caught up (``ovn-nbctl --wait=sb sync``), all bounded by
        ``timeout``. With ``chassis=True`` also starts the Open_vSwitch
        ovsdb-server and ovs-vswitchd (inside :attr:`chassis_netns`, created
        here), creates br-int with
        ``datapath_type=netdev`` and the external_ids ovn-controller needs
        (system-id, ovn-remote=<sb_remote>, ovn-encap-type=geneve,
        ovn-encap-ip=127.0.0.1, ovn-bridge-datapath-type=netdev), then starts
        ovn-controller and waits until the chassis is registered in SB and has
        caught up (``--wait=hv sync``).

        Raises OvnDaemonError with a one-line message on failure.
        """
        say = progress or (lambda message: None)
        deadline = time.monotonic() + timeout
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            self._start_db(_NB, "ovnnb_db.db", _OVN_NB_SCHEMA, self.nb_socket, "ovnnb_db.ctl", deadline, say)
            self._start_db(_SB, "ovnsb_db.db", _OVN_SB_SCHEMA, self.sb_socket, "ovnsb_db.ctl", deadline, say)
            if self._pid(_NORTHD) is None:
                say("starting ovn-northd")
                self._remove_stale(_NORTHD)
                self._spawn(_NORTHD, [f"--ovnnb-db={self.nb_remote}", f"--ovnsb-db={self.sb_remote}"], deadline)
            else:
                say("ovn-northd already running")
            say("waiting for ovn-northd to connect (--wait=sb sync)")
            self._wait_sync("sb", deadline)
            if chassis:
                self._start_chassis(deadline, say)

    def _wait_sync(self, level: str, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OvnDaemonError(f"timed out before --wait={level} sync; see logs in {self.state_dir}")
        try:
            self.nbctl(f"--wait={level}", "sync", timeout=remaining)
        except OvnDaemonError as exc:
            who = "ovn-northd" if level == "sb" else "ovn-controller"
            raise OvnDaemonError(f"{who} did not catch up within the start timeout ({exc}); "
                                 f"see {self.log_file(who)}") from None

    def _ensure_chassis_netns(self) -> None:
        if not self.chassis_netns_exists():
            self._run(["ip", "netns", "add", self.chassis_netns], 30)
        self._path("chassis-netns").write_text(self.chassis_netns + "\n")
        self._run(["ip", "-n", self.chassis_netns, "link", "set", "dev", "lo", "up"], 30)

    def _delete_chassis_netns(self) -> None:
        """Delete the chassis namespace (and with it every tap and veth end in it)."""
        marker = self._path("chassis-netns")
        if not (marker.exists() and marker.read_text().strip() == self.chassis_netns):
            return   # not created by this state dir
        if self.chassis_netns_exists():
            self._run(["ip", "netns", "del", self.chassis_netns], 30)
        marker.unlink(missing_ok=True)

    def _start_chassis(self, deadline: float, say: Callable[[str], None]) -> None:
        self._start_db(_OVSDB, "conf.db", _OVS_SCHEMA, self.ovs_socket, None, deadline, say)

        def vsctl(*args: str) -> str:
            remaining = max(1.0, deadline - time.monotonic())
            return self._ctl("ovs-vsctl", f"--db={self.ovs_remote}", args, remaining)

        system_id = vsctl("--no-wait", "--if-exists", "get", "Open_vSwitch", ".",
                          "external_ids:system-id").strip().strip('"')
        if not system_id:
            system_id = self.system_id or f"np-{uuid.uuid4().hex[:12]}"
        self._system_id = system_id
        self._path("system-id").write_text(system_id + "\n")
        vsctl("--no-wait", "init", "--", "set", "Open_vSwitch", ".",
              f"external_ids:system-id={system_id}",
              f"external_ids:ovn-remote={self.sb_remote}",
              "external_ids:ovn-encap-type=geneve",
              "external_ids:ovn-encap-ip=127.0.0.1",
              "external_ids:ovn-bridge-datapath-type=netdev")

        if self._pid(_VSWITCHD) is None:
            self._ensure_chassis_netns()
            say(f"starting ovs-vswitchd (userspace datapath, netns {self.chassis_netns})")
            self._remove_stale(_VSWITCHD)
            self._spawn(_VSWITCHD, [self.ovs_remote], deadline, netns=self.chassis_netns)
        else:
            say("ovs-vswitchd already running")
        vsctl("--may-exist", "add-br", BRIDGE, "--",
              "set", "Bridge", BRIDGE, "datapath_type=netdev", "fail-mode=secure",
              "other-config:disable-in-band=true")

        if self._pid(_CONTROLLER) is None:
            say("starting ovn-controller")
            self._remove_stale(_CONTROLLER)
            self._spawn(_CONTROLLER, [self.ovs_remote], deadline)
        else:
            say("ovn-controller already running")

        say(f"waiting for chassis {system_id} in SB")
        while True:
            remaining = deadline - time.monotonic()
            found = self.sbctl("--bare", "--columns=name", "find", "Chassis", f"name={system_id}",
                               timeout=max(1.0, remaining)).strip()
            if found:
                break
            if remaining <= 0:
                raise OvnDaemonError(f"chassis {system_id} did not register in SB; "
                                     f"see {self.log_file('ovn-controller')}")
            time.sleep(0.1)
        say("waiting for ovn-controller to catch up (--wait=hv sync)")
        self._wait_sync("hv", deadline)

    # ------------------------------------------------------------------- stop

    def _stop_one(self, spec: _Daemon, term_timeout: float = 5.0) -> None:
        pid = self._pid(spec)
        if pid is not None:
            if spec is _VSWITCHD:
                # "exit --cleanup" removes the datapath ports, including the
                # persistent br-int tap that a plain SIGTERM leaves behind.
                ctl = self._path(f"ovs-vswitchd.{pid}.ctl")
                if ctl.exists():
                    try:
                        self._run(["ovs-appctl", f"--target={ctl}", "--timeout=5", "exit", "--cleanup"], 8)
                    except OvnDaemonError:
                        pass
                    wait_dead(pid, term_timeout)
            if alive(pid):
                send_signal(pid, signal.SIGTERM)
                if not wait_dead(pid, term_timeout):
                    send_signal(pid, signal.SIGKILL)
                    if not wait_dead(pid, 5.0):
                        raise OvnDaemonError(f"{spec.name} (pid {pid}) did not die after SIGKILL")
        self._remove_stale(spec)

    def stop(self) -> None:
        """Stop every daemon of this state dir, chassis first.

        Each daemon is found by the pid in its pidfile (and only if that
        process was started with that pidfile), sent SIGTERM (ovs-vswitchd is
        first asked to ``exit --cleanup``), given a few seconds, then
        SIGKILLed. Pidfiles and stale sockets are removed, and so is the
        chassis namespace, which cuts the veths of instances still attached
        (delete them first; ``add_instance`` re-attaches after a restart).
        Databases and logs stay. Safe to call when nothing runs or the state
        dir does not exist.
        """
        if not self.state_dir.exists():
            return
        errors = []
        with self._lock():
            for spec in reversed(_ALL):
                try:
                    self._stop_one(spec)
                except OvnDaemonError as exc:
                    errors.append(str(exc))
            if not errors:
                try:
                    self._delete_chassis_netns()
                except OvnDaemonError as exc:
                    errors.append(str(exc))
        if errors:
            raise OvnDaemonError("; ".join(errors))

    # ----------------------------------------------------------------- status

    def status(self) -> list[DaemonStatus]:
        """One entry per daemon (central and chassis), in start order."""
        result = []
        for spec in _ALL:
            pid = self._pid(spec)
            result.append(DaemonStatus(name=spec.name, pid=pid, running=pid is not None,
                                       detail=str(self._path(spec.detail))))
        return result

    def running(self, chassis: bool = False) -> bool:
        """True when all central daemons (and with ``chassis``, the chassis ones) run."""
        return all(self._pid(spec) is not None for spec in _ALL if chassis or not spec.chassis)

    def pids(self) -> dict[str, int]:
        """Live pids by daemon name."""
        return {s.name: s.pid for s in self.status() if s.pid is not None}

    def __repr__(self) -> str:
        return f"OvnDaemons({str(self.state_dir)!r})"

