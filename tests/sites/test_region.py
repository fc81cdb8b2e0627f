"""The runbook for adding a site (docs/runbook-add-site.md), taken through on
the dev stack with the real CLI: two sites with a cross-site pair Bound and
pinging; ``netpeer dev site add north`` (north's OVN, ovn-ic, gateway,
WireGuard, certificate and netpeerd; east and west link it on SIGHUP); a
pair east-north binds and pings while east-west keeps pinging; ``netpeer
dev site retire north``: the east half shows SiteRetired and stops passing
packets, east-west still pings. East's and west's processes are the same
throughout (no restart); north leaves no process, namespace, key or secret.
North then joins again, and the module's teardown (``netpeer dev down``)
removes the three sites, checked like any other stack."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netpeer_dev.daemons import alive
from netpeer_dev.multisite import MultiSiteStack
from netpeer_dev.operator import transit_switch
from tests.packets.helpers import reach
from tests.sites.helpers import Pinger, World, all_pids, longest_gap

pytestmark = pytest.mark.chassis

SETTLE = 30.0   # a phase is the control plane's word; the chassis follow a moment later (longer when loaded)


def dev(multi: MultiSiteStack, *args: str) -> tuple[float, float, str]:
    """``netpeer dev ARGS --state-dir DIR`` as an operator runs it: (start, end, what it printed on stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "dev", *args, "--state-dir", str(multi.dir)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"netpeer dev {' '.join(args)} failed: {proc.stderr[-3000:]}"
    return start, time.time(), proc.stderr


def settled(src, address: str) -> None:
    deadline = time.monotonic() + SETTLE
    while not reach(src, address, count=1, timeout=0.5):
        assert time.monotonic() < deadline, f"{src.name} -> {address} failed for {SETTLE:.0f} s"


def others(pids: dict[str, int]) -> dict[str, int]:
    return {role: pid for role, pid in pids.items() if not role.startswith("north/")}


def test_a_site_is_added_to_the_running_region_and_retired_again(multi: MultiSiteStack, world: World,
                                                                 measurements) -> None:
    a = world.network("east", "team-a", "net-a", "10.1.0.0/24")
    b = world.network("west", "team-b", "net-b", "10.2.0.0/24")
    world.consent("east", "team-a", "net-a", "to-b", "west:team-b/net-b")
    world.consent("west", "team-b", "net-b", "to-a", "east:team-a/net-a")
    world.wait_phase("east", "team-a", "net-a", "to-b", "Bound")
    vm_a, vm_b = world.vm("east", a, "vm-a"), world.vm("west", b, "vm-b")
    settled(vm_a, vm_b.address(4))
    before = all_pids(multi)
    pinger = Pinger(vm_a, vm_b.address(4), interval=0.05)   # east-west, all along
    windows = {}
    try:
        # The runbook's steps, in its order; east's and west's netpeerds reload on SIGHUP.
        windows["add"] = dev(multi, "site", "add", "north")
        said = windows["add"][2]
        for step in range(1, 9):
            assert f"netpeer dev: {step}. " in said, said
        assert said.index("7. [sites.north] on east, west, then SIGHUP") < said.index("8. checks")
        grown = MultiSiteStack.open(multi.dir)
        assert grown.names == ["east", "west", "north"]
        assert others(all_pids(grown)) == before, "a process of east or west was restarted"
        for site in ("east", "west"):
            log = grown.stacks[site].netpeerd().log.read_text()
            assert "reloaded" in log and "linked north; retired none" in log

        north = World(grown)
        try:
            t0 = time.time()
            c = north.network("north", "team-c", "net-c", "10.3.0.0/24")
            north.consent("east", "team-a", "net-a", "to-c", "north:team-c/net-c")
            north.consent("north", "team-c", "net-c", "to-a", "east:team-a/net-a")
            north.wait_phase("east", "team-a", "net-a", "to-c", "Bound")
            north.wait_phase("north", "team-c", "net-c", "to-a", "Bound")
            vm_c = north.vm("north", c, "vm-c")
            settled(vm_a, vm_c.address(4))
            assert reach(vm_c, vm_a.address(4), count=3)
            windows["north pair"] = (t0, time.time(), "")
            north_pids = {role: pid for role, pid in all_pids(grown).items() if role.startswith("north/")}
            assert len(north_pids) >= 8, north_pids   # NB, SB, northd, ovn-ic, chassis, wireguard-go, relay, netpeerd
        finally:
            north.close()

        windows["retire"] = dev(multi, "site", "retire", "north")
        p = world.peering("east", "team-a", "net-a", "to-c")
        assert (p["phase"], p["reason"]) == ("Pending", "SiteRetired") and "north" in p["message"], p
        assert not reach(vm_a, vm_c.address(4), count=3)
        after = MultiSiteStack.open(multi.dir)
        assert after.names == ["east", "west"] and all_pids(after) == before
        east_nb = after.sites.central["east"]
        switches = east_nb.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split()
        assert transit_switch("east", "north") not in switches and transit_switch("east", "west") in switches
        assert world.peering("east", "team-a", "net-a", "to-b")["phase"] == "Bound"
        assert reach(vm_a, vm_b.address(4), count=3) and reach(vm_b, vm_a.address(4), count=3)
    finally:
        replies = pinger.stop()
    # East-west answered all along: before, during and after each step.
    for what, (start, end, _) in windows.items():
        assert any(start <= t <= end for t, _ in replies), f"no east-west reply while {what} ran"
    assert replies and replies[-1][0] > windows["retire"][1] - 1.0
    gap, lost = longest_gap(replies)
    measurements.add("east-west: longest gap between replies while north was added, peered and retired",
                     round(gap, 3), lost=lost, took={k: round(e - s, 2) for k, (s, e, _) in windows.items()})
    # Nothing of north is left.
    assert not [role for role, pid in north_pids.items() if alive(pid)]
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"{multi.sites.prefix}-north-")]
    assert not (multi.dir / "north").exists() and not (multi.dir / "pki" / "north").exists()
    assert not list((multi.dir / "secrets").glob("*north*"))
    assert not list(Path(multi.dir).rglob("*north*.sock"))
    # North can join again (the same name, its index free again).
    dev(multi, "site", "add", "north")
    assert MultiSiteStack.open(multi.dir).names == ["east", "west", "north"]
