"""Packets across an LXD-style router peering, built with plain ovn-nbctl.

This pins down, on the real dataplane, the OVN rows netpeer is meant to
produce. Per network, the LXD way:

    logical router  lr-<n>, router port lrp-<n> = gateway MAC, 10.71.<i>.1/24, fd71:<i>::1/64
    logical switch  ls-<n>, switch port lsp-<n>-lr of type router (addresses "router")
    instance port   vm-<n>, addresses "MAC 10.71.<i>.10 fd71:<i>::10"
    address sets    np_<n>_ip4 / np_<n>_ip6: the network's prefixes

A peering of <l> and <r> adds, on each router:

    peer port       lrp-<l>-<r> = the router's LAN MAC, gateway/32, gateway/128, peer=lrp-<r>-<l>
    static routes   <r>'s prefixes via <r>'s gateway, output port lrp-<l>-<r>
    policies        600 allow  ip4 && ip4.dst == $np_<r>_ip4 && ip4.src == $np_<l>_ip4   (+ ip6)
                    550 drop   ip4 && ip4.dst == $np_<r>_ip4                            (+ ip6)
                    500 allow  inport == "lrp-<l>-<r>" && ip4 && ip4.src == $np_<r>_ip4 (+ ip6)
                    450 drop   inport == "lrp-<l>-<r>"

The instance switch ports have no port security, so a spoofed source gets
as far as the router and the router policies are what stops it.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemons
from tests.support import Instances


pytestmark = pytest.mark.chassis

OUT_ALLOW, OUT_DROP, IN_ALLOW, IN_DROP = 600, 550, 500, 450


@dataclass(frozen=True)
class Net:
    name: str
    index: int

    @property
    def v4(self) -> str:
        return f"10.71.{self.index}.0/24"

    @property
    def v6(self) -> str:
        return f"fd71:{self.index}::/64"

    @property
    def gw4(self) -> str:
        return f"10.71.{self.index}.1"

    @property
    def gw6(self) -> str:
        return f"fd71:{self.index}::1"

    @property
    def router_mac(self) -> str:
        return f"02:71:00:00:{self.index:02x}:01"

    @property
    def vm_mac(self) -> str:
        return f"02:71:00:00:{self.index:02x}:10"

    @property
    def vm4(self) -> str:
        return f"10.71.{self.index}.10"

    @property
    def vm6(self) -> str:
        return f"fd71:{self.index}::10"

    @property
    def router(self) -> str:
        return f"lr-{self.name}"

    @property
    def lan_port(self) -> str:
        return f"lrp-{self.name}"

    def peer_port(self, other: "Net") -> str:
        return f"lrp-{self.name}-{other.name}"

    def aset(self, version: int) -> str:
        # Address set names must be identifiers: no '-'.
        return f"np_{self.name}_ip{version}"


A, B, C = Net("a", 1), Net("b", 2), Net("c", 3)


def create_network(d: OvnDaemons, n: Net) -> None:
    d.nbctl(
        "lr-add", n.router,
        "--", "lrp-add", n.router, n.lan_port, n.router_mac, f"{n.gw4}/24", f"{n.gw6}/64",
        "--", "ls-add", f"ls-{n.name}",
        "--", "lsp-add", f"ls-{n.name}", f"lsp-{n.name}-lr",
        "--", "lsp-set-type", f"lsp-{n.name}-lr", "router",
        "--", "lsp-set-addresses", f"lsp-{n.name}-lr", "router",
        "--", "lsp-set-options", f"lsp-{n.name}-lr", f"router-port={n.lan_port}",
        "--", "lsp-add", f"ls-{n.name}", f"vm-{n.name}",
        "--", "lsp-set-addresses", f"vm-{n.name}", f"{n.vm_mac} {n.vm4} {n.vm6}",
        "--", "create", "Address_Set", f"name={n.aset(4)}", f'addresses="{n.v4}"',
        "--", "create", "Address_Set", f"name={n.aset(6)}", f'addresses="{n.v6}"',
    )


def add_vm(inst: Instances, n: Net) -> str:
    return inst.add(n.name, f"vm-{n.name}", n.vm_mac, [f"{n.vm4}/24", f"{n.vm6}/64"], [n.gw4, n.gw6])


def _half(l: Net, r: Net) -> list[str]:
    """ovn-nbctl commands for l's side of the peering with r (port and routes)."""
    port = l.peer_port(r)
    return [
        "--", "lrp-add", l.router, port, l.router_mac, f"{l.gw4}/32", f"{l.gw6}/128", f"peer={r.peer_port(l)}",
        "--", "lr-route-add", l.router, r.v4, r.gw4, port,
        "--", "lr-route-add", l.router, r.v6, r.gw6, port,
    ]


def policies(l: Net, r: Net) -> list[tuple[int, str, str]]:
    """(priority, match, action) of l's anti-spoofing policies towards/from r."""
    port = l.peer_port(r)
    rows = []
    for v in (4, 6):
        rows += [
            (OUT_ALLOW, f"ip{v} && ip{v}.dst == ${r.aset(v)} && ip{v}.src == ${l.aset(v)}", "allow"),
            (OUT_DROP, f"ip{v} && ip{v}.dst == ${r.aset(v)}", "drop"),
            (IN_ALLOW, f'inport == "{port}" && ip{v} && ip{v}.src == ${r.aset(v)}', "allow"),
        ]
    rows.append((IN_DROP, f'inport == "{port}"', "drop"))
    return rows


def _policy_cmds(l: Net, r: Net, only: tuple[int, ...] | None = None) -> list[str]:
    cmds: list[str] = []
    for prio, match, action in policies(l, r):
        if only is None or prio in only:
            cmds += ["--", "lr-policy-add", l.router, str(prio), match, action]
    return cmds


def peer(d: OvnDaemons, l: Net, r: Net, with_policies: bool = True) -> None:
    """Both halves of the peering in one NB transaction."""
    cmds = _half(l, r) + _half(r, l)
    if with_policies:
        cmds += _policy_cmds(l, r) + _policy_cmds(r, l)
    d.nbctl(*cmds[1:])


def add_policies(d: OvnDaemons, l: Net, r: Net) -> None:
    d.nbctl(*(_policy_cmds(l, r) + _policy_cmds(r, l))[1:])


def add_policies_subset(d: OvnDaemons, l: Net, r: Net, only: tuple[int, ...]) -> None:
    d.nbctl(*_policy_cmds(l, r, only)[1:])


def del_policies(d: OvnDaemons, l: Net, r: Net, only: tuple[int, ...] | None = None) -> None:
    cmds: list[str] = []
    for prio, match, _ in policies(l, r):
        if only is None or prio in only:
            cmds += ["--", "--if-exists", "lr-policy-del", l.router, str(prio), match]
    d.nbctl(*cmds[1:])


def unpeer(d: OvnDaemons, l: Net, r: Net) -> None:
    """Remove every row the peering added, on both routers, in one transaction."""
    cmds: list[str] = []
    for x, y in ((l, r), (r, l)):
        cmds += ["--", "--if-exists", "lrp-del", x.peer_port(y)]
        cmds += ["--", "--if-exists", "lr-route-del", x.router, y.v4]
        cmds += ["--", "--if-exists", "lr-route-del", x.router, y.v6]
        for prio, match, _ in policies(x, y):
            cmds += ["--", "--if-exists", "lr-policy-del", x.router, str(prio), match]
    d.nbctl(*cmds[1:])


def reach(ns: str, address: str, **kw) -> bool:
    return nsx.ping(ns, address, count=kw.pop("count", 2), timeout=kw.pop("timeout", 1.0), **kw)


def legit(ns: str, n: Net, dst: str, **kw) -> bool:
    """``reach`` from the instance address of network ``n`` (explicit source)."""
    source = n.vm6 if ":" in dst else n.vm4
    return reach(ns, dst, source=source, **kw)


def arrives(src_ns: str, dst_ns: str, dst: str, source: str) -> bool:
    """Send echo requests from ``source`` (a spoofed address on src_ns's eth0)
    and tell whether any reached dst_ns's kernel (no reply can come back)."""
    version = ipaddress.ip_address(dst).version
    before = nsx.echo_requests_received(dst_ns, version)
    nsx.ping(src_ns, dst, count=2, timeout=0.5, source=source)
    time.sleep(0.2)
    return nsx.echo_requests_received(dst_ns, version) > before


@pytest.fixture
def two_networks(ovn_chassis: OvnDaemons, instances: Instances) -> tuple[OvnDaemons, str, str]:
    d = ovn_chassis
    for n in (A, B):
        create_network(d, n)
    ns_a, ns_b = add_vm(instances, A), add_vm(instances, B)
    d.wait_hv_sync()
    return d, ns_a, ns_b


def test_ping_flows_only_while_peered(two_networks: tuple[OvnDaemons, str, str]) -> None:
    d, ns_a, ns_b = two_networks
    # Positive control: each instance reaches its own router, v4 and v6.
    for ns, n in ((ns_a, A), (ns_b, B)):
        assert reach(ns, n.gw4) and reach(ns, n.gw6), f"{ns} cannot reach its own gateway"
    # Not peered: no path.
    for dst in (B.vm4, B.vm6):
        assert not reach(ns_a, dst, count=1), f"{dst} reachable before peering"
    for dst in (A.vm4, A.vm6):
        assert not reach(ns_b, dst, count=1), f"{dst} reachable before peering"

    peer(d, A, B)
    d.wait_hv_sync()
    for dst in (B.vm4, B.vm6):
        assert reach(ns_a, dst), f"a -> {dst} failed while peered"
    for dst in (A.vm4, A.vm6):
        assert reach(ns_b, dst), f"b -> {dst} failed while peered"
    # The peer's gateway answers too (it is inside the peer's prefixes).
    assert reach(ns_a, B.gw4) and reach(ns_a, B.gw6)
    # Large packets at the instance MTU (1400) with DF set cross too.
    for dst in (B.vm4, B.vm6):
        payload = 1400 - (28 if ":" not in dst else 48)
        assert nsx.ping(ns_a, dst, size=payload), f"full-MTU ping to {dst} failed"
        assert not nsx.ping(ns_a, dst, size=payload + 1, timeout=0.5), "DF not honoured"

    unpeer(d, A, B)
    d.wait_hv_sync()
    assert d.nbctl("lr-policy-list", A.router).strip() == ""
    assert "lrp-a-b" not in d.nbctl("show")
    for dst in (B.vm4, B.vm6):
        assert not reach(ns_a, dst, count=1), f"{dst} still reachable after unpeering"
    for dst in (A.vm4, A.vm6):
        assert not reach(ns_b, dst, count=1), f"{dst} still reachable after unpeering"
    # The networks themselves still work.
    assert reach(ns_a, A.gw4) and reach(ns_b, B.gw6)


def test_spoofed_sources_do_not_arrive(ovn_chassis: OvnDaemons, instances: Instances) -> None:
    d = ovn_chassis
    for n in (A, B, C):
        create_network(d, n)
    ns_a, ns_b, ns_c = (add_vm(instances, n) for n in (A, B, C))
    # a's instance also holds an address outside every network, and one of b's.
    outside4, outside6 = "10.71.99.9", "fd71:99::9"
    b_range4, b_range6 = "10.71.2.99", "fd71:2::99"
    # c's instance holds an address from a's range (c is peered with b, a is not involved).
    a_range4, a_range6 = "10.71.1.77", "fd71:1::77"
    for ns, addrs in ((ns_a, (outside4, outside6, b_range4, b_range6)), (ns_c, (a_range4, a_range6))):
        for addr in addrs:
            nsx.add_address(ns, f"{addr}/{32 if ':' not in addr else 128}")

    # The instances send from their own address unless told otherwise (IPv6
    # source selection would pick fd71:2::99 for b's prefix: longest match).
    # Control: peered without policies, a spoofed source does reach b (the
    # measurement works, and nothing else stops it).
    peer(d, A, B, with_policies=False)
    d.wait_hv_sync()
    assert legit(ns_a, A, B.vm4) and legit(ns_a, A, B.vm6)
    assert arrives(ns_a, ns_b, B.vm4, outside4)
    assert arrives(ns_a, ns_b, B.vm6, outside6)

    # With the policies on both routers: legit traffic flows, spoofed does not.
    add_policies(d, A, B)
    d.wait_hv_sync()
    assert legit(ns_a, A, B.vm4) and legit(ns_a, A, B.vm6) and legit(ns_b, B, A.vm4) and legit(ns_b, B, A.vm6)
    for dst, src in ((B.vm4, outside4), (B.vm6, outside6), (B.vm4, b_range4), (B.vm6, b_range6)):
        assert not arrives(ns_a, ns_b, dst, src), f"spoofed {src} -> {dst} arrived"

    # b's inbound check alone (a's outbound check removed) still stops it.
    del_policies(d, A, B, only=(OUT_ALLOW, OUT_DROP))
    d.wait_hv_sync()
    assert legit(ns_a, A, B.vm4) and legit(ns_a, A, B.vm6)
    for dst, src in ((B.vm4, outside4), (B.vm6, outside6)):
        assert not arrives(ns_a, ns_b, dst, src), f"spoofed {src} -> {dst} passed b's inbound check"
    add_policies_subset(d, A, B, (OUT_ALLOW, OUT_DROP))

    # A third network peered with b cannot pose as a.
    peer(d, C, B)
    d.wait_hv_sync()
    assert legit(ns_c, C, B.vm4) and legit(ns_c, C, B.vm6)
    assert legit(ns_b, B, C.vm4) and legit(ns_b, B, C.vm6)
    for dst, src in ((B.vm4, a_range4), (B.vm6, a_range6)):
        assert not arrives(ns_c, ns_b, dst, src), f"c posing as a ({src}) reached b"
    # ... nor does peering with b give c a path to a (no transit).
    assert not legit(ns_c, C, A.vm4, count=1) and not legit(ns_c, C, A.vm6, count=1)
    # and a <-> b still fine.
    assert legit(ns_a, A, B.vm4) and legit(ns_b, B, A.vm6)


_ECHO_SERVER = r"""
import socket, sys
addr, proto = sys.argv[1], sys.argv[2]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
s = socket.socket(fam, kind)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, 7007))
s.settimeout(15)
if proto == "tcp":
    s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept()
    c.settimeout(15)
    while True:
        data = c.recv(65536)
        if not data:
            break
        c.sendall(data)
    c.close()
else:
    print("ready", flush=True)
    data, peer = s.recvfrom(65536)
    s.sendto(data, peer)
"""

_ECHO_CLIENT = r"""
import socket, sys
addr, proto = sys.argv[1], sys.argv[2]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
payload = bytes(range(256)) * 800   # 200 KiB, many full-size segments
if proto == "tcp":
    s = socket.create_connection((addr, 7007), timeout=5)
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        data = s.recv(65536)
        if not data:
            break
        got += data
else:
    payload = payload[:1200]
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(payload, (addr, 7007))
    got, _ = s.recvfrom(65536)
sys.exit(0 if got == payload else 1)
"""


def _echo(server_ns: str, client_ns: str, addr: str, proto: str) -> bool:
    server = subprocess.Popen(["ip", "netns", "exec", server_ns, sys.executable, "-c", _ECHO_SERVER, addr, proto],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        client = nsx.exec_in(client_ns, sys.executable, "-c", _ECHO_CLIENT, addr, proto, check=False, timeout=30)
        return client.returncode == 0
    finally:
        server.kill()
        server.wait()


def test_tcp_and_udp_cross_the_peering(two_networks: tuple[OvnDaemons, str, str]) -> None:
    """TCP/UDP need TX checksum offload off on the instance's eth0 with the
    userspace datapath; add_instance does that (ping works either way)."""
    d, ns_a, ns_b = two_networks
    assert not nsx.tx_checksum_enabled(ns_a) and not nsx.tx_checksum_enabled(ns_b)
    peer(d, A, B)
    d.wait_hv_sync()
    for addr in (B.vm4, B.vm6):
        for proto in ("tcp", "udp"):
            assert _echo(ns_b, ns_a, addr, proto), f"{proto} to {addr} failed"


def test_instances_are_idempotent_and_cleaned(two_networks: tuple[OvnDaemons, str, str],
                                              instances: Instances) -> None:
    d, ns_a, _ = two_networks
    assert set(nsx.list_instances(f"np{instances.token}-")) == {ns_a, instances.name("b")}
    # add_instance again: same state, still reachable.
    nsx.add_instance(d, ns_a, "vm-a", A.vm_mac, [f"{A.vm4}/24", f"{A.vm6}/64"], [A.gw4, A.gw6])
    nsx.wait_instance_up(d, ns_a)
    assert reach(ns_a, A.gw4) and reach(ns_a, A.gw6)
    host = nsx.host_ifname(ns_a)
    assert len(host) <= 15
    assert d.vsctl("get", "Interface", host, "external_ids:iface-id").strip().strip('"') == "vm-a"
    nsx.delete_instance(d, ns_a)
    assert not nsx.netns_exists(ns_a)
    assert host not in d.vsctl("list-ports", "br-int").split()
    assert subprocess.run(["ip", "link", "show", "dev", host], capture_output=True).returncode != 0
    nsx.delete_instance(d, ns_a)  # safe when absent
    # A namespace netpeer did not create is never touched.
    foreign = instances.name("foreign")
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        subprocess.run(["ip", "-n", foreign, "link", "add", "x0", "type", "veth", "peer", "name", "x1"], check=True)
        with pytest.raises(nsx.NetnsError):
            nsx.delete_instance(d, foreign)
        with pytest.raises(nsx.NetnsError):
            nsx.add_instance(d, foreign, "vm-a", A.vm_mac, [f"{A.vm4}/24"], [A.gw4])
        assert nsx.netns_exists(foreign)
        assert foreign not in nsx.list_instances(f"np{instances.token}-")
    finally:
        subprocess.run(["ip", "netns", "del", foreign], check=False)


def test_instances_reattach_after_chassis_restart(two_networks: tuple[OvnDaemons, str, str]) -> None:
    """stop() deletes the chassis namespace and so cuts the veths; start() plus
    add_instance() (idempotent) brings the same instances back."""
    d, ns_a, ns_b = two_networks
    peer(d, A, B)
    d.wait_hv_sync()
    assert reach(ns_a, B.vm4)
    d.stop()
    assert nsx.netns_exists(ns_a) and not reach(ns_a, A.gw4, count=1, timeout=0.5)
    d.start(chassis=True)
    for ns, n in ((ns_a, A), (ns_b, B)):
        nsx.add_instance(d, ns, f"vm-{n.name}", n.vm_mac, [f"{n.vm4}/24", f"{n.vm6}/64"], [n.gw4, n.gw6])
        nsx.wait_instance_up(d, ns)
    d.wait_hv_sync()
    assert reach(ns_a, B.vm4) and reach(ns_b, A.vm6)
