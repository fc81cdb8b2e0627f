"""Consent across sites, through each site's netpeerd (no packets): overlap,
a three-way overlap, withdrawal mirrored both ways, a partition of the WAN
and its healing, and bad input refused in one line by the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from netpeer_dev.multisite import MultiSiteStack
from tests.sites.helpers import World
from tests.support import wait_until


def test_overlap_across_sites_fails_on_both_sides_naming_the_prefixes(world: World) -> None:
    world.network("east", "ov-a", "net", "10.50.0.0/24", "fd00:50::/64")
    world.network("west", "ov-b", "net", "10.50.0.0/25")
    world.consent("east", "ov-a", "net", "to-b", "west:ov-b/net")
    world.consent("west", "ov-b", "net", "to-a", "east:ov-a/net")
    a = world.wait_phase("east", "ov-a", "net", "to-b", "Failed", "OverlappingPrefixes")
    b = world.wait_phase("west", "ov-b", "net", "to-a", "Failed", "OverlappingPrefixes")
    for p in (a, b):
        assert "10.50.0.0/24" in p["message"] and "10.50.0.0/25" in p["message"], p


def test_three_way_overlap_across_sites_refused(world: World) -> None:
    """east P is Bound to west Q (10.61.0.0/24); a third network overlapping Q,
    in either site, cannot be Bound to P as well."""
    world.network("east", "tw-p", "net", "10.60.0.0/24")
    world.network("west", "tw-q", "net", "10.61.0.0/24")
    world.consent("east", "tw-p", "net", "to-q", "west:tw-q/net")
    world.consent("west", "tw-q", "net", "to-p", "east:tw-p/net")
    world.wait_phase("east", "tw-p", "net", "to-q", "Bound")
    for site, ns in (("west", "tw-r"), ("east", "tw-s")):
        world.network(site, ns, "net", "10.61.0.128/25")
        remote = "tw-p/net" if site == "east" else "east:tw-p/net"
        world.consent(site, ns, "net", "to-p", remote)
        world.consent("east", "tw-p", "net", f"to-{ns}", f"{ns}/net" if site == "east" else f"west:{ns}/net")
        third = world.wait_phase(site, ns, "net", "to-p", "Failed", "OverlappingPrefixes")
        assert "10.61.0.0/24" in third["message"] or "10.61.0.128/25" in third["message"], third
        assert world.peering("east", "tw-p", "net", "to-q")["phase"] == "Bound"
        assert world.peering("west", "tw-q", "net", "to-p")["phase"] == "Bound"


def test_withdrawal_is_mirrored(world: World) -> None:
    world.network("east", "wd-a", "net", "10.70.0.0/24")
    world.network("west", "wd-b", "net", "10.71.0.0/24")
    world.consent("east", "wd-a", "net", "to-b", "west:wd-b/net")
    world.consent("west", "wd-b", "net", "to-a", "east:wd-a/net")
    world.wait_phase("east", "wd-a", "net", "to-b", "Bound")
    world.wait_phase("west", "wd-b", "net", "to-a", "Bound")
    world.withdraw("west", "wd-b", "net", "to-a")
    world.wait_phase("east", "wd-a", "net", "to-b", "Pending", "RemoteWithdrawn")


def test_partition_keeps_each_site_working_and_heals(world: World, multi: MultiSiteStack, measurements) -> None:
    """With the WAN cut: a bind within a site still works; a cross-site
    consent stays Pending with RemoteSiteUnreachable; once the WAN is back it
    binds by itself."""
    world.network("east", "pt-a", "net", "10.80.0.0/24")
    world.network("east", "pt-c", "net", "10.82.0.0/24")
    world.network("west", "pt-b", "net", "10.81.0.0/24")
    world.consent("west", "pt-b", "net", "to-a", "east:pt-a/net")
    multi.sites.cut("east")
    try:
        world.consent("east", "pt-a", "net", "to-c", "pt-c/net")
        world.consent("east", "pt-c", "net", "to-a", "pt-a/net")
        world.wait_phase("east", "pt-a", "net", "to-c", "Bound", timeout=10)
        world.consent("east", "pt-a", "net", "to-b", "west:pt-b/net")
        world.wait_phase("east", "pt-a", "net", "to-b", "Pending", "RemoteSiteUnreachable", timeout=30)
        time.sleep(3)   # not polling: several sweeps pass, and the half must stay Pending, with the same reason
        p = world.peering("east", "pt-a", "net", "to-b")
        assert (p["phase"], p["reason"]) == ("Pending", "RemoteSiteUnreachable"), p
        assert "10.81" not in json.dumps(p), p      # nothing of the remote network is revealed
    finally:
        multi.sites.heal("east")
    t0 = time.monotonic()
    world.wait_phase("east", "pt-a", "net", "to-b", "Bound", timeout=60)
    world.wait_phase("west", "pt-b", "net", "to-a", "Bound", timeout=60)
    measurements.add("partition healed -> cross-site pair Bound on both sides", round(time.monotonic() - t0, 2))


def _cli(multi: MultiSiteStack, site: str, *args: str) -> subprocess.CompletedProcess:
    stack = multi.stacks[site]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    env.update(NETPEER_ENDPOINT=stack.endpoint, NETPEER_TOKEN=stack.admin_token())
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_cli_cross_site_peering_and_bad_input(world: World, multi: MultiSiteStack) -> None:
    world.network("east", "cli-a", "net-a", "10.90.0.0/24")
    world.network("west", "cli-b", "net-b", "10.91.0.0/24")
    ok = _cli(multi, "east", "-n", "cli-a", "-o", "json", "peering", "create", "net-a", "to-b", "west:cli-b/net-b")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["remote_site"] == "west"
    ok = _cli(multi, "west", "-n", "cli-b", "peering", "create", "net-b", "to-a", "east:cli-a/net-a")
    assert ok.returncode == 0, ok.stderr
    world.wait_phase("east", "cli-a", "net-a", "to-b", "Bound")
    # Once Programmed, nothing changes the half by itself (the chassis' acknowledgement stamps it once).
    wait_until(lambda: world.peering("east", "cli-a", "net-a", "to-b")["dataplane"] == "Programmed", 30,
               "never Programmed", step=0.05)
    before = world.client("east", "cli-a").list_peerings("cli-a", "net-a")
    for remote, value in (("nosuch:cli-b/net-b", "nosuch"), ("West:cli-b/net-b", "West"),
                          ("east:cli-a/net-a", "east")):
        bad = _cli(multi, "east", "-n", "cli-a", "peering", "create", "net-a", "bad", remote)
        assert bad.returncode != 0, (remote, bad.stdout)
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and value in lines[0], (remote, bad.stderr)
    assert world.client("east", "cli-a").list_peerings("cli-a", "net-a") == before
