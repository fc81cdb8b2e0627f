"""HA gateways across sites: two gateway chassis (priorities 20 and 10) and a
hypervisor per site, BFD at 100 ms x 3. While a pinger runs across a Bound
cross-site pair, kill -9 the active gateway's ovs-vswitchd: the standby
takes over and traffic resumes; the outage is measured. Restarting the
killed gateway fails back to it (measured too)."""

from __future__ import annotations

import os
import signal
import statistics
import time

import pytest

from netpeer_dev.multisite import MultiSiteStack
from tests.packets.helpers import reach, wait_reach
from tests.sites.helpers import Pinger, World, longest_gap
from tests.support import wait_until

pytestmark = [pytest.mark.chassis, pytest.mark.slow]
HA = True
KILLS = int(os.environ.get("NETPEER_SITES_KILLS", "10"))
# Longest wait for traffic after a takeover or a fail-back before the test fails.
RESUME_S = 20.0


def _states(multi: MultiSiteStack, site: str) -> dict[str, str]:
    return {g.chassis: g.state for g in multi.sites.gateway_status() if g.site == site}


def _wait_state(multi: MultiSiteStack, site: str, chassis: str, state: str, timeout: float = 20.0) -> float:
    t0 = time.monotonic()
    wait_until(lambda: _states(multi, site), timeout, lambda states: f"{chassis} not {state}: {states}", step=0.05,
               until=lambda states: states.get(chassis) == state)
    return time.monotonic() - t0


def test_failover_and_failback(multi: MultiSiteStack, world: World, measurements) -> None:
    a = world.network("east", "team-a", "net-a", "10.1.0.0/24", "fd00:a::/64")
    b = world.network("west", "team-b", "net-b", "10.2.0.0/24", "fd00:b::/64")
    va, vb = world.vm("east", a, "vm-a"), world.vm("west", b, "vm-b")
    assert va.netns and multi.sites.hypervisor("east").system_id == "east-hv"
    t0 = time.monotonic()
    world.consent("east", "team-a", "net-a", "to-b", "west:team-b/net-b")
    world.consent("west", "team-b", "net-b", "to-a", "east:team-a/net-a")
    wait_reach(va, vb.address(4), timeout=30)
    measurements.add("HA: both consents -> first ping across sites (first transit ports of the sites)",
                     round(time.monotonic() - t0, 3))
    assert reach(va, vb.address(6)) and reach(vb, va.address(4)) and reach(vb, va.address(6))
    for site in ("east", "west"):
        _wait_state(multi, site, f"{site}-gw1", "active")
        assert _states(multi, site) == {f"{site}-gw1": "active", f"{site}-gw2": "standby"}

    outages, failbacks, takeovers = [], [], []
    for i in range(KILLS):
        site = ("east", "west")[i % 2]
        gw1 = multi.sites.chassis[site]["gw1"]
        pid = gw1.pid("ovs-vswitchd")
        assert pid is not None
        pinger = Pinger(va, vb.address(4))
        time.sleep(0.5)   # not polling: the pinger's first answers, before the fault
        t_kill = time.time()
        os.kill(pid, signal.SIGKILL)
        takeovers.append(_wait_state(multi, site, f"{site}-gw2", "active"))
        # Traffic must resume; how soon is a figure (the outage), not a limit
        # on how fast the machine is: wait for it, the pinger still running.
        wait_reach(va, vb.address(4), timeout=RESUME_S)
        time.sleep(1.5)   # not polling: traffic goes on a while, for the pinger's gap to be whole
        replies = pinger.stop()
        assert replies and replies[-1][0] > t_kill + 1.0, f"kill {i} ({site}): no traffic after the failover"
        gap, lost = longest_gap(replies, after=t_kill)
        outages.append(gap)
        assert _states(multi, site)[f"{site}-gw1"] == "down"

        pinger = Pinger(va, vb.address(4))
        time.sleep(0.5)   # not polling: the pinger's first answers, before the fault
        t_start = time.time()
        gw1.start(timeout=60)
        _wait_state(multi, site, f"{site}-gw1", "active", timeout=30)
        wait_reach(va, vb.address(4), timeout=RESUME_S)
        time.sleep(1.5)   # not polling: traffic goes on a while, for the pinger's gap to be whole
        replies = pinger.stop()
        assert replies and replies[-1][0] > t_start + 1.0, f"restart {i} ({site}): no traffic after the fail-back"
        failbacks.append(longest_gap(replies, after=t_start)[0])
        print(f"kill {i} {site}: outage {gap:.3f} s ({lost} lost), fail-back {failbacks[-1]:.3f} s, "
              f"load {os.getloadavg()[0]:.1f}")

    def figures(xs):
        return {"p50": round(statistics.median(xs), 3), "max": round(max(xs), 3), "samples": [round(x, 3) for x in xs]}
    measurements.add(f"HA failover outage, kill -9 of the active gateway's ovs-vswitchd, {KILLS} kills", figures(outages))
    measurements.add("HA: standby seen active in SB after the kill", figures(takeovers))
    measurements.add(f"HA fail-back outage when the killed gateway returns, {KILLS} restarts", figures(failbacks))
    # Traffic must resume every time (checked above); the times are figures, not pass/fail.
    assert reach(va, vb.address(6)) and reach(vb, va.address(4))
