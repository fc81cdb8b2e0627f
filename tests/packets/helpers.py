"""What the packet tests do and observe: tenants talking to netpeerd with
their instances (``World``), reachability by echo replies, arrival by the
destination kernel's counters, drops by the OpenFlow statistics of one
netpeer policy, and ovn-trace."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import time
from dataclasses import dataclass

import pytest

from netpeer.api.client import Client
from netpeer.ovn import names
from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.instances import Fleet, Instance
from tests.support import Netpeerd


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
    routers (the drop-out policies of two networks whose one peer is the same) are merged
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
    """The flows of netpeerd's policy ``ident``
    (``policy/<uid>/<allow-in|drop-in|allow-out|drop-out>``) on its router."""
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


def wait_count(read, at_least: int, timeout: float = 15.0) -> int:
    """OpenFlow statistics of the userspace datapath are pushed up by the
    revalidators about twice a second: poll until ``read()`` >= at_least."""
    # Not wait_until: the count is returned even when short, for the caller's message.
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
