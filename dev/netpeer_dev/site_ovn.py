"""The OVN daemons of a multi-site stack, beyond one site's central:
the IC NB and IC SB databases, each site's ``ovn-ic``, and gateway /
hypervisor chassis that live in network namespaces of their own.

All of them reuse :class:`netpeer_dev.daemons.OvnDaemons`' process handling:
detached spawn with a pidfile and a log in a state directory, a pid that
counts only while its command line names that pidfile, stop by pid.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable

from netpeer_dev.daemons import (
    _CONTROLLER, _OVSDB, _OVS_SCHEMA, _VSWITCHD, BRIDGE, DaemonStatus, OvnDaemonError, OvnDaemons, _Daemon,
)
from netpeer_dev.wan import ip_batch

__all__ = ["IcDatabases", "SiteCentral", "SiteChassis", "IC_NB_SCHEMA", "IC_SB_SCHEMA", "find_ic_tool"]

IC_NB_SCHEMA = Path("/usr/share/ovn/ovn-ic-nb.ovsschema")
IC_SB_SCHEMA = Path("/usr/share/ovn/ovn-ic-sb.ovsschema")

_IC_NB = _Daemon("ovsdb-server-ic-nb", "ovsdb-server", "ovn_ic_nb_db.pid", "ovsdb-server-ic-nb.log",
                 "ovn_ic_nb_db.sock", False)
_IC_SB = _Daemon("ovsdb-server-ic-sb", "ovsdb-server", "ovn_ic_sb_db.pid", "ovsdb-server-ic-sb.log",
                 "ovn_ic_sb_db.sock", False)
_OVN_IC = _Daemon("ovn-ic", "ovn-ic", "ovn-ic.pid", "ovn-ic.log", "ovn-ic.log", False)


def find_ic_tool(name: str) -> str:
    """Path of ``ovn-ic``, ``ovn-ic-nbctl`` or ``ovn-ic-sbctl``; OvnDaemonError naming the package."""
    path = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin:/bin:/sbin")
    if path is None:
        raise OvnDaemonError(f"{name} not found: install the Debian package {'ovn-ic' if name == 'ovn-ic' else 'ovn-common'}")
    return path


def check_ic_installed() -> None:
    """OvnDaemonError (one line, naming the package) when OVN-IC is not installed."""
    for tool in ("ovn-ic", "ovn-ic-nbctl", "ovn-ic-sbctl"):
        find_ic_tool(tool)
    for schema in (IC_NB_SCHEMA, IC_SB_SCHEMA):
        if not schema.exists():
            raise OvnDaemonError(f"{schema} not found: install the Debian package ovn-ic-db")


class IcDatabases(OvnDaemons):
    """The interconnection databases (IC NB, IC SB): two ovsdb-servers in ``state_dir``."""

    @property
    def nb_remote(self) -> str:
        return f"unix:{self.state_dir / _IC_NB.detail}"

    @property
    def sb_remote(self) -> str:
        return f"unix:{self.state_dir / _IC_SB.detail}"

    def start(self, chassis: bool = False, timeout: float = 30.0,
              progress: Callable[[str], None] | None = None) -> None:
        """Start what is not running (idempotent) and initialise IC NB."""
        check_ic_installed()
        deadline = time.monotonic() + timeout
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            for spec, db, schema in ((_IC_NB, "ovn_ic_nb_db.db", IC_NB_SCHEMA), (_IC_SB, "ovn_ic_sb_db.db", IC_SB_SCHEMA)):
                if self._pid(spec) is not None:
                    continue
                if not (self.state_dir / db).exists():
                    self._run(["ovsdb-tool", "create", str(self.state_dir / db), str(schema)], 30)
                sock = self.state_dir / spec.detail
                sock.unlink(missing_ok=True)
                ctl = self.state_dir / spec.detail.replace(".sock", ".ctl")
                self._spawn(spec, [f"--remote=punix:{sock}", f"--unixctl={ctl}", str(self.state_dir / db)], deadline)
        self.ic_nbctl("init")   # idempotent

    def _ic_ctl(self, tool: str, remote: str, args: tuple[str, ...], timeout: float) -> str:
        seconds = max(1, int(timeout))
        return self._run([find_ic_tool(tool), f"--db={remote}", f"--timeout={seconds}", *args], seconds + 5,
                         what=f"{tool} {' '.join(args[:3])}".strip())

    def ic_nbctl(self, *args: str, timeout: float = 30.0) -> str:
        """``ovn-ic-nbctl --db=<IC NB> ARGS``; its stdout."""
        return self._ic_ctl("ovn-ic-nbctl", self.nb_remote, args, timeout)

    def ic_sbctl(self, *args: str, timeout: float = 30.0) -> str:
        """``ovn-ic-sbctl --db=<IC SB> ARGS``; its stdout."""
        return self._ic_ctl("ovn-ic-sbctl", self.sb_remote, args, timeout)

    def stop(self) -> None:
        if not self.state_dir.exists():
            return
        errors = []
        with self._lock():
            for spec in (_IC_SB, _IC_NB):
                try:
                    self._stop_one(spec)
                except OvnDaemonError as exc:
                    errors.append(str(exc))
                (self.state_dir / spec.detail).unlink(missing_ok=True)
                (self.state_dir / spec.detail.replace(".sock", ".ctl")).unlink(missing_ok=True)
        if errors:
            raise OvnDaemonError("; ".join(errors))

    def status(self) -> list[DaemonStatus]:
        return [DaemonStatus(s.name, self._pid(s), self._pid(s) is not None, str(self.state_dir / s.detail))
                for s in (_IC_NB, _IC_SB)]

    def running(self, chassis: bool = False) -> bool:
        return all(self._pid(s) is not None for s in (_IC_NB, _IC_SB))


class SiteCentral(OvnDaemons):
    """A site's NB, SB and ovn-northd (OvnDaemons) plus its ``ovn-ic``."""

    def start_ic(self, ic_nb: str, ic_sb: str, timeout: float = 30.0) -> None:
        """Start ovn-ic between this site and the IC databases (idempotent)."""
        with self._lock():
            if self._pid(_OVN_IC) is None:
                self._remove_stale(_OVN_IC)
                self._spawn(_OVN_IC, [f"--ovnnb-db={self.nb_remote}", f"--ovnsb-db={self.sb_remote}",
                                      f"--ic-nb-db={ic_nb}", f"--ic-sb-db={ic_sb}"], time.monotonic() + timeout)

    def ic_pid(self) -> int | None:
        return self._pid(_OVN_IC)

    def status(self) -> list[DaemonStatus]:
        central = [s for s in super().status() if s.name in ("ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd")]
        pid = self._pid(_OVN_IC)
        return central + [DaemonStatus("ovn-ic", pid, pid is not None, str(self.state_dir / _OVN_IC.logfile))]

    def stop(self) -> None:
        if not self.state_dir.exists():
            return
        errors = []
        with self._lock():
            try:
                self._stop_one(_OVN_IC)
            except OvnDaemonError as exc:
                errors.append(str(exc))
        try:
            super().stop()
        except OvnDaemonError as exc:
            errors.append(str(exc))
        if errors:
            raise OvnDaemonError("; ".join(errors))


class SiteChassis(OvnDaemons):
    """One chassis of a site: Open_vSwitch ovsdb-server, ovs-vswitchd
    (userspace datapath) in network namespace ``netns``, ovn-controller on the
    site's SB. Its GENEVE encap address sits on the OVS bridge ``br-phy``
    (port ``phy0``, a veth into the site router's lan bridge): the userspace
    datapath can only send tunnel packets through an OVS bridge. Gateways
    carry ``external_ids:ovn-is-interconn=true`` (else ovn-ic does not publish
    them and the other sites build no tunnel to them).

    Central (NB/SB/northd) belongs to the site's :class:`SiteCentral`, the
    namespace to the stack (never deleted here). Usable as the ``daemons`` of
    ``netpeer_dev.netns.add_instance`` and of an instance ``Fleet``."""

    def __init__(self, state_dir: str | os.PathLike, central: OvnDaemons, netns: str, system_id: str,
                 encap_cidr: str, next_hop: str, route_to: str, gateway: bool) -> None:
        super().__init__(state_dir)
        self.central = central
        self._chassis_netns = netns
        self._system_id = system_id
        self.encap_cidr = encap_cidr
        self.encap_ip = encap_cidr.split("/")[0]
        self.next_hop = next_hop
        self.route_to = route_to
        self.gateway = gateway

    @property
    def nb_remote(self) -> str:
        return self.central.nb_remote

    @property
    def sb_remote(self) -> str:
        return self.central.sb_remote

    @property
    def system_id(self) -> str:
        return self._system_id

    def running(self, chassis: bool = True) -> bool:
        return all(self._pid(s) is not None for s in (_OVSDB, _VSWITCHD, _CONTROLLER))

    def pid(self, name: str) -> int | None:
        """Live pid of ``ovsdb-server``, ``ovs-vswitchd`` or ``ovn-controller``."""
        return self._pid(self._spec(name))

    def status(self) -> list[DaemonStatus]:
        return [s for s in super().status() if s.name in (_OVSDB.name, _VSWITCHD.name, _CONTROLLER.name)]

    def start(self, chassis: bool = True, timeout: float = 60.0,
              progress: Callable[[str], None] | None = None) -> None:
        """Start (or restart) what is not running; idempotent. After a kill -9
        of ovs-vswitchd this brings it back with the same bridges and ports,
        and restarts ovn-controller with it."""
        say = progress or (lambda message: None)
        deadline = time.monotonic() + timeout
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            self._start_db(_OVSDB, "conf.db", _OVS_SCHEMA, self.ovs_socket, None, deadline, say)

            def vsctl(*args: str) -> str:
                return self._ctl("ovs-vsctl", f"--db={self.ovs_remote}", args, max(1.0, deadline - time.monotonic()))

            vsctl("--no-wait", "init", "--", "set", "Open_vSwitch", ".",
                  f"external_ids:system-id={self._system_id}", f"external_ids:hostname={self._system_id}",
                  f"external_ids:ovn-remote={self.sb_remote}", "external_ids:ovn-encap-type=geneve",
                  f"external_ids:ovn-encap-ip={self.encap_ip}", "external_ids:ovn-bridge-datapath-type=netdev",
                  f"external_ids:ovn-is-interconn={'true' if self.gateway else 'false'}")
            self._path("system-id").write_text(self._system_id + "\n")
            restarted = False
            if self._pid(_VSWITCHD) is None:
                say(f"starting ovs-vswitchd of {self._system_id} (netns {self._chassis_netns})")
                self._remove_stale(_VSWITCHD)
                self._spawn(_VSWITCHD, [self.ovs_remote], deadline, netns=self._chassis_netns)
                restarted = True
            if restarted and self._pid(_CONTROLLER) is not None:
                # An ovn-controller that lost its ovs-vswitchd reconnects with a
                # backoff (up to 4 s seen), while the new ovs-vswitchd runs BFD from
                # the database at once: a higher-priority gateway would take its
                # ports back with no flows, a multi-second blackhole. Restart it
                # too, as a service manager binding the two would.
                say(f"restarting ovn-controller of {self._system_id} with its ovs-vswitchd")
                self._stop_one(_CONTROLLER)
            vsctl("--may-exist", "add-br", BRIDGE, "--", "set", "Bridge", BRIDGE, "datapath_type=netdev",
                  "fail-mode=secure", "other-config:disable-in-band=true")
            vsctl("--may-exist", "add-br", "br-phy", "--", "set", "Bridge", "br-phy", "datapath_type=netdev",
                  "other-config:disable-in-band=true", "--", "--may-exist", "add-port", "br-phy", "phy0")
            ip_batch([f"addr replace {self.encap_cidr} dev br-phy", "link set br-phy up",
                      f"route replace {self.route_to} via {self.next_hop} dev br-phy"], netns=self._chassis_netns)
            if self._pid(_CONTROLLER) is None:
                say(f"starting ovn-controller of {self._system_id}")
                self._remove_stale(_CONTROLLER)
                self._spawn(_CONTROLLER, [self.ovs_remote], deadline)
        while not self.central.sbctl("--bare", "--columns=name", "find", "Chassis", f"name={self._system_id}",
                                     timeout=max(1.0, deadline - time.monotonic())).strip():
            if time.monotonic() > deadline:
                raise OvnDaemonError(f"chassis {self._system_id} did not register in its SB; "
                                     f"see {self.log_file('ovn-controller')}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the chassis daemons by pid (the namespace stays: the stack owns it)."""
        if not self.state_dir.exists():
            return
        errors = []
        with self._lock():
            for spec in (_CONTROLLER, _VSWITCHD, _OVSDB):
                try:
                    self._stop_one(spec)
                except OvnDaemonError as exc:
                    errors.append(str(exc))
        if errors:
            raise OvnDaemonError("; ".join(errors))
