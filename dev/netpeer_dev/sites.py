"""Several OVN sites on one machine, joined by OVN Interconnection over WireGuard.

(Over 400 lines: start, status and stop of one stack read the same manifest and
names; split, each half would need the other's internals.)

:class:`Sites` starts, as root, with nothing outside its state directory and
its own network namespaces (see ``netpeer_dev.wan`` for the underlay)::

    ic/                     IC NB + IC SB (two ovsdb-servers)
    <site>/ovn/             the site's NB, SB, ovn-northd and ovn-ic (NB_Global.name = the site)
    <site>/<role>/          a chassis: ovsdb-server, ovs-vswitchd (userspace datapath, in
                            namespace <prefix>-<site>-<role>), ovn-controller
                            ha=True:  gw1 (gateway, priority 20), gw2 (gateway, 10), hv (instances)
                            ha=False: gw (the gateway, also hosts the instances)
    <site>/wg/              the site router's wireguard-go: key (0600), pidfile, log
    <site>/links/           the site link relay's unix sockets towards the other sites
    sites.json              what was made: prefix, sites and their indices, namespaces (the
                            teardown reads it; `netpeer dev site add|retire` change it)

and the rows an operator creates once per site (:func:`operator_commands`):
a transit switch ``np-ts-<a>-<b>`` per pair of sites in IC NB,
``NB_Global`` name and options (no route exchange through OVN-IC, BFD tuned
for sub-second gateway failover) and the ``HA_Chassis_Group`` ``np-gw-<site>``
of the site's gateways. Everything per network (transit ports, routes,
policies) is netpeerd's.

Names carry the stack's prefix ``npx<6 hex>`` (a hash of the state dir);
WireGuard interfaces are ``wg<6 hex><site index>`` (unique on the machine:
wireguard-go's UAPI directory is shared). Nothing is killed by name.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

from netpeer_dev.proc import OvnDaemonError, alive
from netpeer_dev.operator import BFD, MAX_SITES, gateway_group, operator_commands, transit_switch, validate_sites
from netpeer_dev.site_ovn import IcDatabases, SiteCentral, SiteChassis, check_ic_installed
from netpeer_dev.sitelink import PORT as LINK_PORT, Relay
from netpeer_dev.wan import UNDERLAY, SitePlan, Underlay, WanError
from netpeer_dev.wireguard import PORT as WG_PORT, Peer, WireGuard, WireGuardError, find_wireguard_go

__all__ = ["Sites", "SitesError", "GatewayStatus", "TunnelStatus", "ProcessStatus"]

KEEPALIVE = 5                 # WireGuard persistent keepalive, seconds
_PRIORITY = {"gw1": 20, "gw2": 10, "gw": 10}


class SitesError(RuntimeError):
    """The multi-site stack could not be started, stopped or read; one line."""



@dataclasses.dataclass(frozen=True)
class ProcessStatus:
    role: str          # "ic/ovsdb-server-ic-nb", "east/ovn-northd", "east/gw1/ovs-vswitchd", "east/wireguard-go"
    pid: int | None
    running: bool


@dataclasses.dataclass(frozen=True)
class GatewayStatus:
    site: str
    chassis: str
    priority: int
    state: str                 # "active" (binds the transit ports), "standby", or "down" (daemons dead)
    ports: tuple[str, ...]     # chassisredirect ports it binds


@dataclasses.dataclass(frozen=True)
class TunnelStatus:
    site: str                  # the router's site
    peer: str                  # the other site
    interface: str
    latest_handshake: float | None
    rx_bytes: int
    tx_bytes: int
    state: str                 # "up" (handshake < 180 s ago), "down", "cut" (WAN port down), "bypassed", "stopped"


class Sites:
    """A multi-site OVN-IC stack in ``state_dir`` (see the module docstring)."""

    #: Seconds without progress in the interconnection before every ovn-ic is woken (``wait_interconnected``).
    NUDGE_AFTER = 3.0

    def __init__(self, state_dir: str | os.PathLike, sites: Iterable[str] = ("east", "west"), ha: bool = False,
                 bfd: tuple[int, int, int] = BFD, keepalive: int = KEEPALIVE,
                 indices: dict[str, int] | None = None) -> None:
        self.state_dir = Path(state_dir).absolute()
        names = validate_sites(list(sites), "sites")
        self.ha, self.bfd, self.keepalive = ha, bfd, keepalive
        roles = ("gw1", "gw2", "hv") if ha else ("gw",)
        # A site's index (its addresses, its WireGuard interface, its links' blocks) is kept for its
        # life: sites added to or retired from a running stack leave the others' alone.
        indices = indices or {n: i for i, n in enumerate(names)}
        if sorted(indices) != sorted(names) or len(set(indices.values())) != len(names) or \
                not all(0 <= i < MAX_SITES for i in indices.values()):
            raise SitesError(f"site indices {indices} do not fit the sites {names}")
        self.plans = [SitePlan(n, indices[n], roles) for n in names]
        self.id = hashlib.sha256(os.fsencode(str(self.state_dir))).hexdigest()[:6]
        self.prefix = f"npx{self.id}"
        self.net = Underlay(self.prefix, self.plans, self.wg_interface)
        self.ic = IcDatabases(self.state_dir / "ic")
        self.central = {p.name: SiteCentral(self.state_dir / p.name / "ovn") for p in self.plans}
        self.chassis = {p.name: {role: SiteChassis(
            self.state_dir / p.name / role, self.central[p.name], self.net.netns(p.name, role),
            system_id=f"{p.name}-{role}", encap_cidr=p.encap_cidr(role), next_hop=p.router_lan_ip,
            route_to=str(UNDERLAY), gateway=role != "hv") for role in roles} for p in self.plans}
        self.wg = {p.name: WireGuard(self.state_dir / p.name / "wg", self.net.netns(p.name, "rt"),
                                     self.wg_interface(p.name)) for p in self.plans}
        self.timings: dict[str, float] = {}
        self._ic_lock = threading.Lock()

    @classmethod
    def open(cls, state_dir: str | os.PathLike) -> "Sites | None":
        """The stack recorded in ``state_dir/sites.json``, or None."""
        manifest = Path(state_dir).absolute() / "sites.json"
        if not manifest.exists():
            return None
        data = json.loads(manifest.read_text())
        return cls(state_dir, data["sites"], ha=data["ha"], indices=data.get("indices"))

    # ------------------------------------------------------------ names
    @property
    def site_names(self) -> list[str]:
        return [p.name for p in self.plans]

    @property
    def indices(self) -> dict[str, int]:
        return {p.name: p.index for p in self.plans}

    def plan(self, site: str) -> SitePlan:
        for p in self.plans:
            if p.name == site:
                return p
        raise KeyError(site)

    def wg_interface(self, site: str) -> str:
        return f"wg{self.id}{self.plan(site).index}"

    def gateways(self, site: str) -> list[SiteChassis]:
        return [c for c in self.chassis[site].values() if c.gateway]

    def hypervisor(self, site: str) -> SiteChassis:
        """The chassis that hosts instances: ``hv`` with HA, else the one gateway."""
        return self.chassis[site].get("hv") or self.chassis[site]["gw"]

    def link_socket(self, site: str, other: str) -> Path:
        """Where ``site``'s netpeerd reaches ``other``'s (the site link relay)."""
        return self.relay(site).socket(other)

    @property
    def manifest(self) -> Path:
        return self.state_dir / "sites.json"

    # ------------------------------------------------------------ start
    def start(self, netpeerd_sockets: Callable[[str], Sequence[Path]], timeout: float = 120.0,
              progress: Callable[[str], None] | None = None) -> None:
        """Bring the stack up, or what of it is not running (idempotent).
        ``netpeerd_sockets(site)``: where that site's netpeerd (or each of its
        replicas) serves the other sites (the site link relay forwards their
        connections to the first that accepts). Raises SitesError after stopping what
        a first start made; records phase times in :attr:`timings`."""
        say = progress or (lambda m: None)
        if os.geteuid() != 0:
            raise SitesError("the multi-site stack needs root (network namespaces, tun devices)")
        try:
            check_ic_installed()
            find_wireguard_go()
        except (WireGuardError, OvnDaemonError) as exc:
            raise SitesError(str(exc)) from None
        t0 = time.monotonic()
        deadline = t0 + timeout
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        fresh = self._prepare_manifest()
        try:
            if fresh:
                say("network namespaces, veths, bridges")
                self.net.build()
            self.timings["network"] = time.monotonic() - t0
            say("WireGuard between the site routers")
            self._start_wireguard(deadline)
            self.timings["wireguard"] = time.monotonic() - t0
            say("IC NB and IC SB")
            self.ic.start(timeout=max(1.0, deadline - time.monotonic()))
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.plans)) as pool:
                for f in [pool.submit(self.start_site, p, deadline, say) for p in self.plans]:
                    f.result()
            self.timings["sites"] = time.monotonic() - t0
            say("waiting for the transit switches and the other sites' gateways")
            self.wait_interconnected(deadline)
            self.timings["interconnected"] = time.monotonic() - t0
            self._wait_handshakes(deadline)
            self.timings["tunnels"] = time.monotonic() - t0
            self._start_links(netpeerd_sockets, deadline)
        except (OvnDaemonError, WireGuardError, WanError, RuntimeError) as exc:
            if fresh:
                self._stop_quietly(say)
            if isinstance(exc, SitesError):
                raise
            raise SitesError(str(exc)) from None
        except BaseException:
            if fresh:
                self._stop_quietly(say)
            raise

    def _stop_quietly(self, say: Callable[[str], None]) -> None:
        try:
            self.stop()
        except Exception as exc:   # keep the original error
            say(f"cleanup after the failed start also failed: {exc}")

    def _prepare_manifest(self) -> bool:
        """True for a fresh stack (manifest written before anything is made, so a
        failed start still removes it all); False when it exists already."""
        namespaces = self.net.namespaces()
        if self.manifest.exists():
            data = json.loads(self.manifest.read_text())
            if (data["sites"], data["ha"]) != (self.site_names, self.ha):
                ha = " with HA gateways" if data["ha"] else ""
                raise SitesError(f"{self.state_dir} holds the sites {','.join(data['sites'])}{ha}: "
                                 "`netpeer dev down` first, or another --state-dir")
            present = [ns for ns in namespaces if Path("/run/netns", ns).exists()]
            if len(present) == len(namespaces):
                return False
            if present:
                raise SitesError(f"the stack in {self.state_dir} is partly gone ({len(present)} of "
                                 f"{len(namespaces)} namespaces): `netpeer dev down` first")
        self.write_manifest()
        return True

    def write_manifest(self) -> None:
        """Records what this stack is: its sites, their indices, and the
        namespaces the teardown deletes."""
        namespaces = self.net.namespaces()
        data = {"prefix": self.prefix, "sites": self.site_names, "ha": self.ha, "indices": self.indices,
                "namespaces": namespaces, "wg_interfaces": [self.wg_interface(s) for s in self.site_names]}
        tmp = self.manifest.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.manifest)

    def _start_wireguard(self, deadline: float) -> None:
        fresh = [p for p in self.plans if self.wg[p.name].pid is None]
        publics = {p.name: self.wg[p.name].public_key() for p in self.plans}
        for p in fresh:
            self.wg[p.name].start(timeout=max(1.0, deadline - time.monotonic()))
        for p in fresh:
            self.wg[p.name].configure([Peer(publics[q.name], f"{q.wan_ip}:{WG_PORT}", (str(q.lan),))
                                       for q in self.plans if q is not p])
        # Keepalives only once every router knows its peers (setting one sends a
        # keepalive at once, which starts a handshake; too early, the retry comes
        # after REKEY_TIMEOUT, 5 s), and only on one side of each pair first: two
        # crossing initiations make wireguard-go reject the response to its own
        # (again a 5 s retry). The other side's keepalive once the handshake is done.
        if fresh:
            for p in self.plans:
                self.wg[p.name].set_keepalive([publics[q.name] for q in self.plans if q.index > p.index],
                                              self.keepalive)
        self.net.set_tunnel_bypass(False)
        (self.state_dir / "tunnel-bypassed").unlink(missing_ok=True)
        self._publics = publics

    def _wait_handshakes(self, deadline: float) -> None:
        while True:
            down = [(t.site, t.peer) for t in self.tunnel_status() if t.latest_handshake is None]
            if not down:
                break
            if time.monotonic() > deadline:
                raise SitesError(f"no WireGuard handshake between {down}; see wireguard-go.log in <site>/wg")
            time.sleep(0.02)
        for p in self.plans:
            self.wg[p.name].set_keepalive([self._publics[q.name] for q in self.plans if q.index < p.index],
                                          self.keepalive)

    def start_site(self, p: SitePlan, deadline: float, say: Callable[[str], None]) -> None:
        """One site's NB, SB, ovn-northd, ovn-ic and chassis, and the rows its
        operator makes (``operator_commands``); idempotent."""
        central = self.central[p.name]
        say(f"{p.name}: NB, SB, ovn-northd, ovn-ic")
        central.start(timeout=max(1.0, deadline - time.monotonic()))
        central.start_ic(self.ic.nb_remote, self.ic.sb_remote, timeout=max(1.0, deadline - time.monotonic()))
        chassis = list(self.chassis[p.name].values())
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(chassis)) as pool:
            for f in [pool.submit(c.start, True, max(1.0, deadline - time.monotonic()), say) for c in chassis]:
                f.result()
        gateways = [(c.system_id, _PRIORITY[role]) for role, c in self.chassis[p.name].items() if c.gateway]
        for tool, args in operator_commands(p.name, self.site_names, gateways, self.bfd):
            if tool == "ovn-ic-nbctl":
                with self._ic_lock:   # two sites adding the same switch at once: a constraint violation
                    self.ic.ic_nbctl(*args)
            elif args[0] != "ha-chassis-group-add" or not central.nbctl(
                    "--bare", "--columns=name", "find", "HA_Chassis_Group", f"name={gateway_group(p.name)}").strip():
                central.nbctl(*args)   # ha-chassis-group-add has no --may-exist

    def wait_interconnected(self, deadline: float) -> None:
        """Every site's NB has its transit switches and its SB every other site's gateways.

        Two sites' ``ovn-ic`` registering at the same moment may both insert
        the transit switch's datapath binding into the IC SB with the same
        tunnel key; the loser's whole transaction (its AZ registration too)
        fails, and OVN 23.03's ``ovn-ic`` does not try again until something
        it monitors changes. So when nothing moved for a while, touch the IC
        NB (an external id nobody reads): every ``ovn-ic`` wakes and retries."""
        stalled, last, nudges = time.monotonic(), None, 0
        while True:
            missing = []
            for s in self.site_names:
                switches = set(self.central[s].nbctl("--bare", "--columns=name", "list", "Logical_Switch").split())
                missing += [f"{s}: {transit_switch(s, o)}" for o in self.site_names
                            if o != s and transit_switch(s, o) not in switches]
                remote = set(self.central[s].sbctl("--bare", "--columns=name", "find", "Chassis",
                                                   "other_config:is-remote=true").split())
                missing += [f"{s}: gateway {c.system_id}" for o in self.site_names if o != s
                            for c in self.gateways(o) if c.system_id not in remote]
            if not missing:
                return
            now = time.monotonic()
            if now > deadline:
                raise SitesError(f"never appeared: {', '.join(missing)}; see ovn-ic.log in <site>/ovn")
            if missing != last:
                stalled, last = now, missing
            elif now - stalled > self.NUDGE_AFTER:
                nudges += 1
                self.ic.ic_nbctl("set", "IC_NB_Global", ".", f"external_ids:netpeer-dev-nudge={nudges}")
                stalled = now
            time.sleep(0.05)

    # ------------------------------------------------------------ site links
    def relay(self, site: str) -> Relay:
        """The site link relay of ``site`` (in its router namespace)."""
        p = self.plan(site)
        return Relay(self.state_dir / site / "links", self.net.netns(site, "rt"), f"{p.router_lan_ip}:{LINK_PORT}",
                     {q.name: f"{q.router_lan_ip}:{LINK_PORT}" for q in self.plans if q is not p})

    def _start_links(self, netpeerd_sockets: Callable[[str], Sequence[Path]], deadline: float) -> None:
        for p in self.plans:
            self.relay(p.name).start(netpeerd_sockets(p.name))
        for p in self.plans:
            self.relay(p.name).wait(deadline)

    # ------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop every process of the stack by pid, delete every namespace it
        made (with their veths, bridges, taps and WireGuard interfaces), remove
        the WireGuard keys, UAPI and relay sockets. Databases and logs stay.
        Safe to call twice or after a failed start."""
        errors: list[str] = []

        def attempt(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except Exception as exc:   # keep going: stop as much as possible
                errors.append(f"{what}: {exc}")

        for p in self.plans:
            attempt(f"{p.name} site link", self.relay(p.name).stop)
            for role, ch in self.chassis[p.name].items():
                attempt(f"{p.name}/{role}", ch.stop)
        for p in self.plans:
            attempt(f"{p.name} OVN", self.central[p.name].stop)
        attempt("IC databases", self.ic.stop)
        for p in self.plans:
            attempt(f"{p.name} wireguard-go", self.wg[p.name].stop)
        if self.manifest.exists():
            errors += self.net.delete(json.loads(self.manifest.read_text()).get("namespaces", []))
            if not errors:
                self.manifest.unlink()
        (self.state_dir / "tunnel-bypassed").unlink(missing_ok=True)
        if errors:
            raise SitesError("; ".join(errors))

    # ------------------------------------------------------------ WAN
    def set_tunnel_bypass(self, bypass: bool) -> None:
        """Underlay through WireGuard (False) or in clear over the WAN (True, to prove a capture can fail)."""
        self.net.set_tunnel_bypass(bypass)
        marker = self.state_dir / "tunnel-bypassed"
        marker.write_text("1\n") if bypass else marker.unlink(missing_ok=True)

    def cut(self, site: str | None = None) -> None:
        """Partition: ``site`` (default the first) loses the WAN (tunnel and site link)."""
        self.net.cut(site or self.plans[0].name)

    def heal(self, site: str | None = None) -> None:
        self.net.heal(site or self.plans[0].name)

    def start_capture(self, seconds: float, interface: str | None = None) -> subprocess.Popen:
        """Count what crosses the WAN in the background (``netpeer_dev.wan.capture_script``)."""
        return self.net.start_capture(seconds, interface)

    # ------------------------------------------------------------ status
    def processes(self) -> list[ProcessStatus]:
        out = [ProcessStatus(f"ic/{s.name}", s.pid, s.running) for s in self.ic.status()]
        for p in self.plans:
            out += [ProcessStatus(f"{p.name}/{s.name}", s.pid, s.running) for s in self.central[p.name].status()]
            for role, ch in self.chassis[p.name].items():
                out += [ProcessStatus(f"{p.name}/{role}/{s.name}", s.pid, s.running) for s in ch.status()]
            pid = self.wg[p.name].pid
            out.append(ProcessStatus(f"{p.name}/wireguard-go", pid, pid is not None))
            pid = self.relay(p.name).pid
            out.append(ProcessStatus(f"{p.name}/sitelink", pid, pid is not None))
        return out

    def pids(self) -> dict[str, int]:
        return {p.role: p.pid for p in self.processes() if p.pid is not None}

    def gateway_status(self) -> list[GatewayStatus]:
        """Per gateway chassis: priority, and whether it binds the site's
        chassisredirect ports (active) now, from the site's SB."""
        out = []
        for p in self.plans:
            central = self.central[p.name]
            bound: dict[str, list[str]] = {}
            if central.running():
                names = {r[0]: r[1] for r in _rows(central.sbctl("--format=json", "--columns=_uuid,name",
                                                                 "list", "Chassis"))}
                for port, chassis in _rows(central.sbctl("--format=json", "--columns=logical_port,chassis", "find",
                                                         "Port_Binding", "type=chassisredirect")):
                    if chassis:
                        bound.setdefault(names.get(chassis, chassis), []).append(port)
            for role, ch in self.chassis[p.name].items():
                if not ch.gateway:
                    continue
                up = ch.pid("ovs-vswitchd") is not None and ch.pid("ovn-controller") is not None
                ports = tuple(sorted(bound.get(ch.system_id, [])))
                out.append(GatewayStatus(p.name, ch.system_id, _PRIORITY[role],
                                         "down" if not up else "active" if ports else "standby", ports))
        return out

    def tunnel_status(self) -> list[TunnelStatus]:
        out = []
        bypassed = (self.state_dir / "tunnel-bypassed").exists()
        cut = {}
        for p in self.plans:
            try:
                cut[p.name] = self.net.is_cut(p.name)
            except WanError:
                cut[p.name] = False
        for p in self.plans:
            wg = self.wg[p.name]
            states = []
            if wg.pid is not None:
                try:
                    states = wg.peers()
                except WireGuardError:
                    states = []
            by_endpoint = {s.endpoint: s for s in states}
            for q in self.plans:
                if q is p:
                    continue
                st = by_endpoint.get(f"{q.wan_ip}:{WG_PORT}")
                if st is None:
                    out.append(TunnelStatus(p.name, q.name, wg.interface, None, 0, 0, "stopped"))
                    continue
                fresh = st.latest_handshake is not None and time.time() - st.latest_handshake < 180
                state = "bypassed" if bypassed else "cut" if cut.get(p.name) or cut.get(q.name) else \
                    "up" if fresh else "down"
                out.append(TunnelStatus(p.name, q.name, wg.interface, st.latest_handshake, st.rx_bytes,
                                        st.tx_bytes, state))
        return out


def _rows(text: str) -> list[tuple]:
    """(first, second) column values of ovn-*ctl --format=json output, uuids unwrapped."""
    def value(v):
        if isinstance(v, list) and len(v) == 2 and v[0] == "uuid":
            return v[1]
        if isinstance(v, list) and v and v[0] == "set":
            return v[1][0][1] if v[1] else None
        return v
    return [tuple(value(c) for c in row) for row in json.loads(text)["data"]]
