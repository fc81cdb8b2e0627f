"""Cross-site peerings on the real dataplane (one gateway per site), driven
through each site's netpeerd:

    east: A (team-a, 10.1.0.0/24, fd00:a::/64)   C (team-c, 10.3.0.0/24, fd00:c::/64)
          E (team-e, 10.5.0.0/24, fd00:e::/64)   (within-site reference)
    west: B (team-b, 10.2.0.0/24, fd00:b::/64)   D (team-d, 10.4.0.0/24, fd00:d::/64)

Traffic crosses only between Bound pairs, never transitively, never with a
spoofed source; between the sites the WAN carries nothing but WireGuard.
"""

from __future__ import annotations

import ipaddress
import json
import statistics
import time
from dataclasses import dataclass

import pytest

from netpeer_dev import netns as nsx
from netpeer_dev.instances import Instance
from netpeer_dev.multisite import MultiSiteStack
from tests.packets.helpers import add_secondary, arrives, reach, wait_count
from tests.sites.helpers import World, drop_packets
from tests.support import wait_until

pytestmark = pytest.mark.chassis

NETS = {"a": ("east", "10.1.0.0/24", "fd00:a::/64"), "c": ("east", "10.3.0.0/24", "fd00:c::/64"),
        "e": ("east", "10.5.0.0/24", "fd00:e::/64"),
        "b": ("west", "10.2.0.0/24", "fd00:b::/64"), "d": ("west", "10.4.0.0/24", "fd00:d::/64")}


@dataclass
class Topo:
    w: World
    multi: MultiSiteStack
    nets: dict[str, dict]
    vms: dict[str, Instance]

    def site(self, k: str) -> str:
        return NETS[k][0]

    def consent(self, k: str, other: str) -> dict:
        """``k``'s half towards ``other`` (peering ``to-<other>``), cross-site when the sites differ."""
        remote = f"team-{other}/net-{other}"
        if self.site(other) != self.site(k):
            remote = f"{self.site(other)}:{remote}"
        return self.w.consent(self.site(k), f"team-{k}", f"net-{k}", f"to-{other}", remote)

    def withdraw(self, k: str, other: str) -> None:
        self.w.withdraw(self.site(k), f"team-{k}", f"net-{k}", f"to-{other}")

    def wait(self, k: str, other: str, phase: str, reason: str | None = None, timeout: float = 15.0) -> dict:
        return self.w.wait_phase(self.site(k), f"team-{k}", f"net-{k}", f"to-{other}", phase, reason, timeout)

    def bind(self, x: str, y: str) -> None:
        self.consent(x, y)
        self.consent(y, x)
        self.wait(x, y, "Bound")
        self.wait(y, x, "Bound")

    def unbind(self, x: str, y: str) -> None:
        self.withdraw(x, y)
        self.withdraw(y, x)


@pytest.fixture(scope="module")
def topo(world: World, multi: MultiSiteStack) -> Topo:
    nets = {k: world.network(site, f"team-{k}", f"net-{k}", v4, v6) for k, (site, v4, v6) in NETS.items()}
    vms = {k: world.vm(NETS[k][0], nets[k], f"vm-{k}") for k in NETS}
    for k, vm in vms.items():
        gw = str(ipaddress.ip_network(NETS[k][1])[1])
        assert reach(vm, gw), f"vm-{k} cannot reach its own gateway {gw}"
    return Topo(world, multi, nets, vms)


# A phase is the control plane's word; the chassis apply it a moment later (longer on a loaded machine):
# traffic is judged once it has settled, within SETTLE seconds.
SETTLE = 15.0


def _talks(src: Instance, dst: Instance) -> None:
    for v in (4, 6):
        deadline = time.monotonic() + SETTLE
        while not reach(src, dst.address(v), count=1, timeout=0.5):
            assert time.monotonic() < deadline, f"{src.name} -> {dst.address(v)} failed for {SETTLE:.0f} s"
        assert reach(src, dst.address(v), count=3), f"{src.name} -> {dst.address(v)} failed"


def _silent(src: Instance, dst: Instance) -> None:
    for v in (4, 6):
        deadline = time.monotonic() + SETTLE
        while arrives(src, dst, dst.address(v), count=2):
            assert time.monotonic() < deadline, f"{src.name} -> {dst.address(v)} still arrives after {SETTLE:.0f} s"


def _first_ping(src: Instance, address: str, t0: float, timeout: float = 15.0, step: float = 0.05) -> float:
    while True:
        if nsx.ping(src.netns, address, count=1, timeout=step, source=src.address(4)):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"{src.name} -> {address}: no answer within {timeout:.0f} s")


def test_ping_across_sites_only_while_bound(topo: Topo, measurements) -> None:
    vm = topo.vms
    _silent(vm["a"], vm["b"])
    first = topo.consent("a", "b")
    assert first["phase"] == "Pending" and first["remote_site"] == "west", first
    assert topo.wait("a", "b", "Pending", "AwaitingRemote")
    _silent(vm["a"], vm["b"])
    _silent(vm["b"], vm["a"])
    t0 = time.monotonic()
    topo.consent("b", "a")                      # the second consent, in the other site
    took = _first_ping(vm["b"], vm["a"].address(4), t0)
    measurements.add("second consent (west) -> first ping across sites", round(took, 3))
    topo.wait("a", "b", "Bound")
    topo.wait("b", "a", "Bound")
    _talks(vm["a"], vm["b"])
    _talks(vm["b"], vm["a"])
    for v, header in ((4, 28), (6, 48)):   # instance MTU 1300: full-size packets with DF cross GENEVE in WireGuard
        assert nsx.ping(vm["a"].netns, vm["b"].address(v), size=1300 - header), f"full-MTU IPv{v} ping failed"
    # The remote network represented locally: A's site lists B with its site and prefixes.
    shown = json.dumps(topo.w.client("east", "team-a").get_network("team-a", "net-a"))
    assert "west" in shown and "10.2.0.0/24" in shown and "fd00:b::/64" in shown, shown

    topo.withdraw("b", "a")                     # either withdrawal stops traffic
    topo.wait("a", "b", "Pending", "RemoteWithdrawn")
    _silent(vm["a"], vm["b"])
    _silent(vm["b"], vm["a"])
    topo.consent("b", "a")
    topo.wait("a", "b", "Bound")
    _talks(vm["a"], vm["b"])
    topo.withdraw("a", "b")
    topo.wait("b", "a", "Pending", "RemoteWithdrawn")
    _silent(vm["a"], vm["b"])
    _silent(vm["b"], vm["a"])
    topo.consent("a", "b")
    topo.wait("b", "a", "Bound")
    _talks(vm["a"], vm["b"])


def test_unpeered_networks_on_the_same_transit_switch_stay_apart(topo: Topo) -> None:
    """C <-> B and D <-> A Bound too: all four routers sit on np-ts-east-west,
    yet C and D (and A and C, B and D) reach nothing of each other."""
    vm = topo.vms
    topo.bind("c", "b")
    topo.bind("d", "a")
    try:
        _talks(vm["c"], vm["b"])
        _talks(vm["d"], vm["a"])
        for src, dst in (("c", "d"), ("d", "c"), ("a", "c"), ("c", "a"), ("b", "d"), ("d", "b")):
            _silent(vm[src], vm[dst])
    finally:
        topo.unbind("d", "a")
    _silent(vm["d"], vm["a"])


def test_not_transitive(topo: Topo) -> None:
    """east-A <-> west-B <-> east-C (C <-> B still Bound from the test above, or made
    here): A and C never reach each other, through B or otherwise."""
    vm = topo.vms
    if topo.w.peering("east", "team-c", "net-c", "to-b")["phase"] != "Bound":
        topo.bind("c", "b")
    try:
        _talks(vm["a"], vm["b"])
        _talks(vm["c"], vm["b"])
        _silent(vm["a"], vm["c"])
        _silent(vm["c"], vm["a"])
    finally:
        topo.unbind("c", "b")
    _silent(vm["c"], vm["b"])
    _talks(vm["a"], vm["b"])


def test_spoofed_sources_dropped_and_counted(topo: Topo, multi: MultiSiteStack) -> None:
    """A's instance sending from addresses outside A reaches nothing in B: A's
    router drops it (counted on east's chassis). With A's policies gone (east's
    netpeerd stopped, its rows removed by hand), B's router drops it on arrival
    from the other site (counted on west's gateway); B's kernel never sees one."""
    vm, sites = topo.vms, multi.sites
    a_uid, b_uid = topo.nets["a"]["uid"], topo.nets["b"]["uid"]
    spoofed = {"from-b": ("10.2.0.99", "fd00:b::99"), "from-c": ("10.3.0.99", "fd00:c::99"),
               "outside": ("10.99.0.9", "fd99::9")}
    add_secondary(vm["a"], *[x for pair in spoofed.values() for x in pair])
    hv_east = sites.hypervisor("east").system_id.split("-", 1)[1]

    def east_drops() -> int:
        return drop_packets(sites, "east", hv_east, a_uid)

    _talks(vm["a"], vm["b"])
    for label, pair in spoofed.items():
        for source, dst in zip(pair, (vm["b"].address(4), vm["b"].address(6))):
            before = east_drops()
            assert not arrives(vm["a"], vm["b"], dst, source=source, count=3), f"spoofed {source} -> {dst} arrived"
            after = wait_count(east_drops, before + 3)
            assert after >= before + 3, f"A's router counted {after - before} drops of 3 from {source} ({label})"

    def west_drops() -> int:
        return sum(drop_packets(sites, "west", role, b_uid) for role, ch in sites.chassis["west"].items()
                   if ch.gateway)

    east = multi.stacks["east"].netpeerd()
    east.stop()
    try:
        central = sites.central["east"]
        router = f"np-lr-{a_uid}"
        removed = []
        for uuid in central.nbctl("--bare", "--columns=policies", "find", "Logical_Router", f"name={router}").split():
            action, match = central.nbctl("--bare", "--columns=action,match", "list", "Logical_Router_Policy",
                                          uuid).splitlines()[:2]
            if "ip4.dst ==" in match or "ip6.dst ==" in match:
                removed.append(uuid)
        assert removed, "found none of A's outbound policies"
        for uuid in removed:
            central.nbctl("--if-exists", "lr-policy-del", router, uuid)
        central.nbctl("--wait=hv", "sync")
        for source, dst in ((spoofed["outside"][0], vm["b"].address(4)), (spoofed["outside"][1], vm["b"].address(6)),
                            (spoofed["from-c"][0], vm["b"].address(4))):
            before = west_drops()
            assert not arrives(vm["a"], vm["b"], dst, source=source, count=3), f"spoofed {source} passed B's router"
            after = wait_count(west_drops, before + 3)
            assert after >= before + 3, f"B's router counted {after - before} drops of 3 from {source}"
    finally:
        multi.up("1s", lambda m: None)     # east's netpeerd again: its repair puts A's policies back
    deadline = time.monotonic() + 20
    while not reach(vm["a"], vm["b"].address(4), count=1, timeout=0.5):
        assert time.monotonic() < deadline, "A -> B did not come back after east's netpeerd repaired its rows"
    before = east_drops()
    assert not arrives(vm["a"], vm["b"], vm["b"].address(4), source=spoofed["outside"][0], count=3)
    assert wait_count(east_drops, before + 3) >= before + 3


def test_wan_carries_only_wireguard(topo: Topo, multi: MultiSiteStack, measurements) -> None:
    """During cross-site pings the WAN sees only WireGuard UDP: no GENEVE, no
    ICMP. The same capture with the tunnel bypassed sees plaintext GENEVE
    with ICMP inside, so the check can fail."""
    vm, sites = topo.vms, multi.sites

    def capture_during_pings() -> dict[str, int]:
        cap = sites.start_capture(8.0)
        time.sleep(0.3)   # not polling: the capture starts listening
        assert nsx.ping(vm["a"].netns, vm["b"].address(4), count=20, timeout=1)
        assert nsx.ping(vm["b"].netns, vm["a"].address(6), count=10, timeout=1)
        out, err = cap.communicate(timeout=30)
        assert cap.returncode == 0, err
        return json.loads(out)

    encrypted = capture_during_pings()
    measurements.add("WAN capture during 30 cross-site pings, tunnel up", encrypted, unit="frames")
    assert encrypted["wireguard"] >= 60, encrypted
    assert encrypted["geneve"] == 0 and encrypted["geneve_icmp"] == 0 and encrypted["icmp"] == 0, encrypted
    assert encrypted["tcp"] == 0 and encrypted["other"] == 0, encrypted
    sites.set_tunnel_bypass(True)
    try:
        deadline = time.monotonic() + 15
        while not reach(vm["a"], vm["b"].address(4), count=1, timeout=0.5):
            assert time.monotonic() < deadline
        clear = capture_during_pings()
        measurements.add("WAN capture during 30 cross-site pings, tunnel bypassed", clear, unit="frames")
        assert clear["geneve"] >= 60 and clear["geneve_icmp"] >= 60, clear
    finally:
        sites.set_tunnel_bypass(False)
    deadline = time.monotonic() + 15
    while not reach(vm["a"], vm["b"].address(4), count=1, timeout=0.5):
        assert time.monotonic() < deadline
    again = capture_during_pings()
    assert again["geneve"] == 0 and again["wireguard"] >= 60, again
    assert all(t.state == "up" and t.rx_bytes > 0 for t in sites.tunnel_status())


def test_time_to_traffic_across_and_within_sites(topo: Topo, measurements) -> None:
    """Second consent -> first answered ping, cross-site (A <-> B) and within
    a site (A <-> E), in the same run: a measurement, not a check of speed."""
    vm = topo.vms
    cross, within = [], []
    for _ in range(int(__import__("os").environ.get("NETPEER_SITES_CYCLES", "5"))):
        topo.withdraw("b", "a")
        topo.wait("a", "b", "Pending", "RemoteWithdrawn")
        wait_until(lambda: not reach(vm["a"], vm["b"].address(4), count=1, timeout=0.2), 30,
                   "A still reaches B after B withdrew", step=0.05)
        t0 = time.monotonic()
        topo.consent("b", "a")
        cross.append(_first_ping(vm["b"], vm["a"].address(4), t0))

        topo.consent("a", "e")
        t0 = time.monotonic()
        topo.consent("e", "a")
        within.append(_first_ping(vm["e"], vm["a"].address(4), t0))
        topo.unbind("a", "e")
        wait_until(lambda: not reach(vm["e"], vm["a"].address(4), count=1, timeout=0.2), 30,
                   "E still reaches A after the unbind", step=0.05)

    def figures(xs):
        xs = sorted(xs)
        return {"p50": round(statistics.median(xs), 3), "p99": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3),
                "max": round(xs[-1], 3), "samples": [round(x, 3) for x in xs]}
    measurements.add("second consent -> first ping, cross-site", figures(cross))
    measurements.add("second consent -> first ping, within a site (same run)", figures(within))
    _talks(vm["a"], vm["b"])
