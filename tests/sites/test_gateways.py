"""GetStatus names the site's gateways as OVN has them: each chassis of the
site's HA chassis group with its priority, which one is active and which
standby (from the site's SB, ``[interconnect] ovn_sb``), and after the
active gateway is killed (kill -9 of its ovs-vswitchd, as in
test_failover.py) the one that took over. Only the admin may read it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from netpeer import errors
from netpeer_dev.multisite import MultiSiteStack
from tests.sites.helpers import World
from tests.support import wait_until

pytestmark = [pytest.mark.chassis, pytest.mark.slow]
HA = True


def test_get_status_names_the_active_and_standby_gateways_and_the_one_that_takes_over(
        multi: MultiSiteStack, world: World, measurements) -> None:
    a = world.network("east", "team-a", "net-a", "10.1.0.0/24")
    b = world.network("west", "team-b", "net-b", "10.2.0.0/24")
    world.vm("east", a, "vm-a"), world.vm("west", b, "vm-b")
    world.consent("east", "team-a", "net-a", "to-b", "west:team-b/net-b")
    world.consent("west", "team-b", "net-b", "to-a", "east:team-a/net-a")
    world.wait_phase("east", "team-a", "net-a", "to-b", "Bound", timeout=60)

    seen: list = []

    def gateways() -> list[tuple[str, str, int]]:
        seen[:] = [[(g["chassis"], g["state"], g["priority"]) for g in world.admin("east").status()["gateways"]]]
        return seen[0]

    def reads(expected, when: str) -> None:
        wait_until(lambda: gateways() == expected, 30, lambda _: f"east's gateways never read {expected} {when}: "
                   f"{seen[0]}")

    before = [("east-gw1", "active", 20), ("east-gw2", "standby", 10)]
    reads(before, "once the pair was Bound")
    with pytest.raises(errors.PermissionDenied):
        world.client("east", "team-a").status()
    stack = multi.stacks["east"]
    env = dict(os.environ, NETPEER_ENDPOINT=stack.endpoint, NETPEER_TOKEN=stack.admin_token())

    def printed() -> list[str]:
        out = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "status"], capture_output=True, text=True,
                             env=env, check=True, timeout=60).stdout.splitlines()
        seen[:] = [[line for line in out if line.startswith("  gateway ")]]
        return seen[0]
    # Polled: while BFD settles after the first transit port, OVN may move the binding once more.
    expected = ["  gateway east-gw1: active (priority 20)", "  gateway east-gw2: standby (priority 10)"]
    wait_until(lambda: printed() == expected, 30, lambda _: f"netpeer status never printed {expected}: {seen[0]}")

    gw1 = multi.sites.chassis["east"]["gw1"]
    pid = gw1.pid("ovs-vswitchd")
    assert pid is not None
    t_kill = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    try:
        after = [("east-gw1", "standby", 20), ("east-gw2", "active", 10)]
        reads(after, "after the kill")
        measurements.add("HA: GetStatus names the standby active after the kill", round(time.monotonic() - t_kill, 3))
    finally:
        gw1.start(timeout=60)
    reads(before, "after the fail-back")
