"""Real packets through netpeerd's own OVN rows.

Here ``ovn`` (overriding tests/conftest.py's) also runs a chassis:
ovs-vswitchd with the userspace datapath in its own network namespace, and
ovn-controller. ``netpeerd`` (tests/conftest.py) is the real service, store,
OVN backend and gRPC server on a unix socket; tenants talk to it through
the API. Instances are the dev tooling's (``netpeer.dev.instances.Fleet``):
a switch port tagged ``kind=instance`` plus a network namespace on br-int.

Every fixture undoes what it made, in reverse order, even when the test
fails: instances (switch ports, veths, namespaces) before the daemons, the
daemons by pid, then the chassis namespace; the finalizers then check that
no namespace, veth or daemon of the test is left. A missing component
(not root, no OVN/OVS package, no ``ip``) fails the test; nothing here skips.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from netpeer.api.client import Client
from netpeer.dev import netns as nsx
from netpeer.dev.instances import Fleet, Instance
from netpeer.ovn import names
from netpeer.ovn.daemons import OvnDaemons, _alive
from tests.conftest import Netpeerd
from tests.functional.conftest_ovn import require_ovn

pytestmark = pytest.mark.chassis


@pytest.fixture
def ovn(state_dir: Path) -> Iterator[OvnDaemons]:
    """OVN central plus a chassis, stopped by pid afterwards; checks nothing survives."""
    require_ovn(chassis=True)
    daemons = OvnDaemons(state_dir / "ovn")
    pids: dict[str, int] = {}
    try:
        daemons.start(chassis=True)
        pids = daemons.pids()
        yield daemons
    finally:
        daemons.stop()
        alive = {name: pid for name, pid in pids.items() if _alive(pid)}
        assert not alive, f"daemons still running after stop: {alive}"
        assert not daemons.chassis_netns_exists(), f"chassis namespace {daemons.chassis_netns} left behind"


def _root_links_with_alias(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "-d", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return [line.split(":")[1].strip() for line in out.splitlines() if f"alias netpeer:{prefix}" in line]


@pytest.fixture
def fleet(ovn: OvnDaemons, state_dir: Path) -> Iterator[Fleet]:
    """Instances of this test (namespaces ``np<6 random hex>-<name>``), all deleted afterwards."""
    f = Fleet(ovn, state_dir, owner="netpeer", prefix=f"np{secrets.token_hex(3)}")
    try:
        yield f
    finally:
        f.delete_all()
        run_netns = Path("/run/netns")
        left = [n.name for n in run_netns.iterdir() if n.name.startswith(f"{f.prefix}-")] \
            if run_netns.is_dir() else []
        assert not left, f"namespaces left behind: {left}"
        assert not _root_links_with_alias(f.prefix), "veths left in the root namespace"


class World:
    """Tenants talking to netpeerd, and their instances."""

    def __init__(self, netpeerd: Netpeerd, fleet: Fleet):
        self.d = netpeerd
        self.ovn = netpeerd.ovn
        self.fleet = fleet
        self._clients: dict[str, Client] = {}

    def tenant(self, namespace: str) -> Client:
        if namespace not in self._clients:
            self._clients[namespace] = self.d.tenant(namespace)
        return self._clients[namespace]

    def network(self, namespace: str, name: str, *subnets: str, routes: tuple[str, ...] = ()) -> dict:
        return self.tenant(namespace).create_network(namespace, name, list(subnets), list(routes))

    def consent(self, namespace: str, network: str, name: str, remote: str) -> dict:
        rns, _, rnet = remote.rpartition("/")
        return self.tenant(namespace).create_peering(namespace, network, name, rnet, rns or namespace)

    def withdraw(self, namespace: str, network: str, name: str) -> None:
        self.tenant(namespace).delete_peering(namespace, network, name)

    def phase(self, namespace: str, network: str, name: str) -> str:
        return self.tenant(namespace).get_peering(namespace, network, name)["phase"]

    def vm(self, network: dict, name: str, ips: list[str] | None = None) -> Instance:
        return self.fleet.add(network, name, ips)

    def sync(self) -> None:
        """Wait until ovn-controller has applied everything netpeerd committed."""
        self.ovn.wait_hv_sync()

    def close(self) -> None:
        for c in self._clients.values():
            c.close()


@pytest.fixture
def world(netpeerd: Netpeerd, fleet: Fleet) -> Iterator[World]:
    w = World(netpeerd, fleet)
    try:
        yield w
    finally:
        w.close()


# ------------------------------------------------------------------ packets

def reach(src: Instance, address: str, count: int = 2, timeout: float = 1.0) -> bool:
    """Echo reply received, sending from the instance's own address of that family
    (explicit: IPv6 source selection would prefer a spoofed secondary address)."""
    version = ipaddress.ip_address(address).version
    return nsx.ping(src.netns, address, count=count, timeout=timeout, source=src.address(version))


def arrives(src: Instance, dst: Instance, address: str, source: str | None = None, count: int = 2) -> bool:
    """Whether echo requests from ``src`` (from ``source``, default its own
    address) reach ``dst``'s kernel: counted there, so a request that arrives
    but whose reply is lost still counts."""
    version = ipaddress.ip_address(address).version
    before = nsx.echo_requests_received(dst.netns, version)
    nsx.ping(src.netns, address, count=count, timeout=0.5, source=source or src.address(version))
    time.sleep(0.2)
    return nsx.echo_requests_received(dst.netns, version) > before


def wait_reach(src: Instance, address: str, timeout: float = 15.0) -> float:
    """Ping every ~0.2 s until one is answered; return the seconds it took.
    Fails the test after ``timeout``."""
    start = time.monotonic()
    while True:
        if reach(src, address, count=1, timeout=0.2):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            pytest.fail(f"{src.name} -> {address}: no answer within {timeout:.0f}s")


def add_secondary(inst: Instance, *addresses: str) -> None:
    """Extra host addresses on the instance's eth0 (for spoofing with ping -I)."""
    for a in addresses:
        nsx.add_address(inst.netns, f"{a}/{32 if ipaddress.ip_address(a).version == 4 else 128}")


# ------------------------------------------------------------------ counters

def policy_uuid(ovn: OvnDaemons, ident: str) -> str:
    """The NB Logical_Router_Policy netpeerd made with ``netpeer:id`` = ident."""
    out = ovn.nbctl("--bare", "--columns=_uuid", "find", "Logical_Router_Policy",
                    f'external_ids:"{names.ID}"="{ident}"').split()
    assert len(out) == 1, f"expected one policy {ident}, found {out}"
    return out[0]


def _json_rows(text: str) -> list[dict]:
    data = json.loads(text)
    return [dict(zip(data["headings"], row)) for row in data["data"]]


@dataclass(frozen=True)
class PolicyFlows:
    """The OpenFlow flows ovn-controller installed for one NB router policy.

    northd turns the policy into a logical flow in stage ``lr_in_policy``
    with the same priority and match; identical logical flows of several
    routers (two networks' drop policies towards the same peer) are merged
    into one with a datapath group, so the flows of *this* router are the
    ones whose cookie is that logical flow (first 32 bits of its uuid) and
    whose metadata is the router's datapath tunnel key."""

    lflows: tuple[str, ...]
    metadata: int

    def packets(self, ovn: OvnDaemons) -> int:
        total = 0
        for lf in self.lflows:
            proc = subprocess.run(["ovs-ofctl", "dump-flows", "br-int", f"cookie=0x{lf[:8]}/-1"], env=ovn.env(),
                                  capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, f"ovs-ofctl dump-flows failed: {proc.stderr.strip()}"
            for line in proc.stdout.splitlines():
                meta = re.search(r"\bmetadata=0x([0-9a-f]+)", line)
                count = re.search(r"\bn_packets=(\d+)", line)
                if meta and count and int(meta.group(1), 16) == self.metadata:
                    total += int(count.group(1))
        return total


def policy_flows(ovn: OvnDaemons, ident: str) -> PolicyFlows:
    """The flows of netpeerd's policy ``ident`` (``policy/<uid>/<peer uid>/<what>``) on its router."""
    rows = _json_rows(ovn.nbctl("--format=json", "--columns=priority,match,external_ids", "find",
                                "Logical_Router_Policy", f'external_ids:"{names.ID}"="{ident}"'))
    assert len(rows) == 1, f"expected one policy {ident}, found {len(rows)}"
    priority, match = rows[0]["priority"], rows[0]["match"]
    uid = ident.split("/")[1]
    lflows = [r["_uuid"][1] for r in _json_rows(ovn.sbctl(
        "--format=json", "--columns=_uuid,match", "find", "Logical_Flow", "external_ids:stage-name=lr_in_policy",
        f"priority={priority}")) if r["match"] == match]
    assert lflows, f"no logical flow for policy {ident} ({match})"
    keys = ovn.sbctl("--bare", "--columns=tunnel_key", "find", "Datapath_Binding",
                     f'external_ids:name="{names.router(uid)}"').split()
    assert len(keys) == 1, f"no datapath for router {names.router(uid)}"
    return PolicyFlows(tuple(lflows), int(keys[0]))


def wait_count(read, at_least: int, timeout: float = 5.0) -> int:
    """OpenFlow statistics of the userspace datapath are pushed up by the
    revalidators about twice a second: poll until ``read()`` >= at_least."""
    deadline = time.monotonic() + timeout
    value = read()
    while value < at_least and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


def trace(ovn: OvnDaemons, src: Instance, dst_mac: str, source: str, destination: str) -> str:
    """``ovn-trace`` of an ICMP echo request from ``src``'s switch port."""
    version = ipaddress.ip_address(destination).version
    ip = "ip4" if version == 4 else "ip6"
    icmp = "icmp4.type == 8" if version == 4 else "icmp6.type == 128"
    flow = (f'inport == "{src.port}" && eth.src == {src.mac} && eth.dst == {dst_mac} && '
            f"{ip}.src == {source} && {ip}.dst == {destination} && ip.ttl == 64 && {icmp}")
    proc = subprocess.run(["ovn-trace", f"--db={ovn.sb_remote}", names.switch(src.uid), flow], env=ovn.env(),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"ovn-trace failed: {proc.stderr.strip()}"
    return proc.stdout
