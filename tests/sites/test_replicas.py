"""Two sites whose netpeerd runs as two replicas each on PostgreSQL
(``netpeer dev up --sites east,west --replicas 2``), on the real stack:
OVN-IC, WireGuard, the site link relays.

Through the CLI as an operator runs it: the export lines name every replica,
``dev status`` shows each replica with its role, a second ``dev up`` changes
nothing, and another number of replicas is refused in one line.

Then the fault: a cross-site pair Bound and pinging, kill -9 of the replica
that leads east (it runs east's links). A new cross-site pair, created through
the endpoints ``dev up`` printed, binds on both sides and pings within the
lease plus a few exchanges; the first pair pings on; the survivor leads; the
killed replica comes back with ``dev up``, and both sites' outboxes and
mirrors equal the whole side computed from scratch (``tests.sitecheck``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from netpeer.store.base import open_store
from netpeer_dev.multisite import LEASE, MultiSiteStack
from tests.packets.helpers import reach
from tests.sitecheck import link_problems
from tests.sites.helpers import Pinger, World, all_pids, longest_gap
from tests.support import wait_until

pytestmark = pytest.mark.chassis

REPLICAS = 2            # the module's stack (tests/sites/conftest.py)
SETTLE = 30.0           # a phase is the control plane's word; the chassis follow a moment later (longer when loaded)


def dev(multi: MultiSiteStack, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``netpeer dev ARGS --state-dir DIR`` as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "dev", *args, "--state-dir", str(multi.dir)],
                          env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"netpeer dev {' '.join(args)} failed: {proc.stderr[-3000:]}"
    return proc


def replicas(multi: MultiSiteStack, site: str) -> dict[str, dict]:
    """``site``'s replicas as ``netpeer dev status -o json`` shows them (its
    exit status is 3 while one is stopped)."""
    data = json.loads(dev(multi, "status", "-o", "json", check=False).stdout)
    [entry] = [s for s in data["sites"] if s["name"] == site]
    return {r["name"]: r for r in entry["replicas"]}


def wait_for(what: str, check, timeout: float):
    return wait_until(check, timeout, what, step=0.1)


def settled(src, address: str) -> None:
    deadline = time.monotonic() + SETTLE
    while not reach(src, address, count=1, timeout=0.5):
        assert time.monotonic() < deadline, f"{src.name} -> {address} failed for {SETTLE:.0f} s"


def test_dev_up_with_replicas_as_an_operator_sees_it(multi: MultiSiteStack) -> None:
    pids = all_pids(multi)
    again = dev(multi, "up", "--sites", "east,west")
    exports = dict(line.removeprefix("export ").split("=", 1) for line in again.stdout.splitlines())
    for site in ("east", "west"):
        assert exports[f"NETPEER_ENDPOINT_{site.upper()}"] == ",".join(
            f"unix://{multi.dir / site / f'netpeerd-{i}' / 'netpeer.sock'}" for i in (1, 2))
        for i in (1, 2):
            config = (multi.dir / site / f"netpeerd-{i}" / "netpeerd.toml").read_text()
            assert f'store = "postgresql:///netpeer_{site}?' in config, config
            assert f'listen = "unix://{multi.dir / site / f"netpeerd-{i}" / "site.sock"}"' in config, config
    assert all_pids(multi) == pids, "a second dev up restarted something"
    other = dev(multi, "up", "--sites", "east,west", "--replicas", "3", check=False)
    assert other.returncode != 0 and other.stderr.strip().splitlines() == [
        f"error: --replicas: 3 differs from the 2 netpeerd per site of the stack in {multi.dir}: "
        "`netpeer dev down` first to change it"], other.stderr
    assert all_pids(multi) == pids
    status = dev(multi, "status", "-o", "json")
    daemons = {d["name"]: d for d in json.loads(status.stdout)["daemons"]}
    assert daemons["postgres"]["state"] == "running" and daemons["postgres"]["role"] == "database"
    for site in ("east", "west"):
        roles = sorted(daemons[f"{site}/netpeerd-{i}"]["role"] for i in (1, 2))
        assert roles == ["leader", "replica"], daemons
    text = dev(multi, "status").stdout
    assert "ROLE" in text and "leader" in text and "2 netpeerd replicas per site" in text, text


def test_a_sites_leader_replica_killed_its_exchanges_go_on(multi: MultiSiteStack, world: World,
                                                          measurements) -> None:
    a = world.network("east", "team-a", "net-a", "10.1.0.0/24")
    b = world.network("west", "team-b", "net-b", "10.2.0.0/24")
    world.consent("east", "team-a", "net-a", "to-b", "west:team-b/net-b")
    world.consent("west", "team-b", "net-b", "to-a", "east:team-a/net-a")
    world.wait_phase("east", "team-a", "net-a", "to-b", "Bound")
    world.wait_phase("west", "team-b", "net-b", "to-a", "Bound")
    vm_a, vm_b = world.vm("east", a, "vm-a"), world.vm("west", b, "vm-b")
    settled(vm_a, vm_b.address(4))
    east = multi.stacks["east"]
    leader = wait_for("one leader in east", lambda: [n for n, r in replicas(multi, "east").items()
                                                      if r["role"] == "leader"], 15)[0]
    [survivor] = [n for n in east.netpeerds() if n != leader]
    victim = east.netpeerds()[leader]
    victim_pid = victim.pid
    pinger = Pinger(vm_a, vm_b.address(4), interval=0.05)   # the first pair, all along
    try:
        killed_at = time.time()
        victim.kill9()
        killed = time.monotonic()
        # A new pair, through the endpoints `dev up` printed (the client moves on from the dead replica).
        c = world.network("east", "team-c", "net-c", "10.3.0.0/24")
        d = world.network("west", "team-d", "net-d", "10.4.0.0/24")
        world.consent("east", "team-c", "net-c", "to-d", "west:team-d/net-d")
        world.consent("west", "team-d", "net-d", "to-c", "east:team-c/net-c")
        world.wait_phase("east", "team-c", "net-c", "to-d", "Bound", timeout=LEASE.total_seconds() + 20)
        world.wait_phase("west", "team-d", "net-d", "to-c", "Bound", timeout=20)
        bound = time.monotonic() - killed
        vm_c, vm_d = world.vm("east", c, "vm-c"), world.vm("west", d, "vm-d")
        settled(vm_c, vm_d.address(4))
        pings = time.monotonic() - killed
        wait_for("the survivor to lead east", lambda: replicas(multi, "east")[survivor]["role"] == "leader",
                 LEASE.total_seconds() + 10)
        leads = time.monotonic() - killed
        assert reach(vm_d, vm_c.address(4), count=3)
    finally:
        replies = pinger.stop()
    after = [t for t, _ in replies if t > killed_at]
    assert after and after[-1] > killed_at + pings - 1.0, "the first pair stopped answering after the kill"
    gap, lost = longest_gap(replies, after=killed_at)
    # Within the lease plus a few exchanges (sweep 1 s), generous for a loaded machine.
    assert bound < LEASE.total_seconds() + 10, bound
    assert gap < 5.0, (gap, lost)

    # The killed replica comes back with `dev up`; the survivor keeps the lease.
    dev(multi, "up", "--sites", "east,west")
    restarted = time.monotonic()
    back = replicas(multi, "east")
    assert back[leader]["state"] == "running" and back[leader]["pid"] not in (None, victim_pid), back
    assert (back[leader]["role"], back[survivor]["role"]) == ("replica", "leader"), back
    stores = {site: open_store(multi.stacks[site].config(replica=1).store, upgrade=False) for site in ("east", "west")}
    try:
        wait_until(lambda: link_problems(stores), 15,   # an exchange may still be on its way
                   lambda problems: f"the sites' links disagree: {problems[:4]}", step=0.1,
                   until=lambda problems: not problems)
        agreed = time.monotonic() - restarted
    finally:
        for store in stores.values():
            store.close()
    assert world.peering("east", "team-a", "net-a", "to-b")["phase"] == "Bound"
    assert reach(vm_a, vm_b.address(4), count=3) and reach(vm_d, vm_c.address(4), count=3)
    for stack in multi.stacks.values():
        for netpeerd in stack.netpeerds().values():
            netpeerd.assert_no_internal_errors()
    measurements.add("sites on replicas: east's leader replica killed (lease 3 s, sweep 1 s)", {
        "new_pair_bound_both_sides_s": round(bound, 2), "new_pair_pings_s": round(pings, 2),
        "killed": leader, "survivor_leads_s": round(leads, 2), "first_pair_longest_gap_s": round(gap, 3),
        "first_pair_lost": lost,
        "links_agree_after_restart_s": round(agreed, 2)})
