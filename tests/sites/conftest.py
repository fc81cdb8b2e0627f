"""Two sites on one machine (``netpeer_dev.multisite``): per site NB, SB,
northd, ovn-ic, chassis and a real netpeerd; IC NB/SB; WireGuard over a
simulated WAN. One stack per test module (started once, stopped by pid at
the end, with every namespace, veth, key and socket checked gone); a module
sets ``HA = True`` for two gateway chassis and a hypervisor per site, and
``REPLICAS = N`` for N netpeerd replicas per site on PostgreSQL.

Tenants drive each site's netpeerd through the API (``tests.sites.helpers.World``);
the figures the tests measure go to ``results/sites/`` with the load average.
``NETPEER_KEEP_STACK=1`` keeps the stack running for debugging (stop it with
``netpeer dev down --state-dir DIR``).
"""

from __future__ import annotations

import os
import shutil
from typing import Iterator

import pytest

from netpeer_dev.multisite import MultiSiteStack
from tests.sites.helpers import Measurements, World, all_pids, leftovers, require_sites
from tests.support import short_tmpdir

SWEEP = "1s"
_MEASUREMENTS = Measurements()


@pytest.fixture(scope="session")
def measurements() -> Iterator[Measurements]:
    yield _MEASUREMENTS
    _MEASUREMENTS.write()


def start_multi(ha: bool, sites: tuple[str, ...] = ("east", "west"), replicas: int = 1) -> MultiSiteStack:
    require_sites()
    multi = MultiSiteStack(short_tmpdir("npx-"), list(sites), ha=ha, replicas=replicas)
    try:
        multi.up(SWEEP, lambda m: None)   # a failed start of the sites stops what it started
    except BaseException:
        if multi.sites.manifest.exists():  # the sites came up, something after them did not
            multi.down(purge=False, say=lambda m: None)
        if multi.pg is not None:
            multi.pg.remove()
        if os.environ.get("NETPEER_KEEP_STATE") != "1":   # keep it (and its logs) only when asked
            shutil.rmtree(multi.dir, ignore_errors=True)
        raise
    return multi


def stop_multi(multi: MultiSiteStack, pids: dict[str, int], credential_watch=None, mark: int = 0) -> None:
    """Down by pid, then check nothing is left; the state dir goes too."""
    if os.environ.get("NETPEER_KEEP_STACK") == "1":
        print(f"\nkeeping the stack in {multi.dir}: netpeer dev down --state-dir {multi.dir}")
        return
    try:
        multi.down(purge=False, say=lambda m: None)
        left = leftovers(multi.sites, pids)
        assert not left, f"left behind by dev down: {left}"
        if credential_watch is not None:
            leaks = credential_watch.leaks(multi.dir, since=mark)
            assert not leaks, f"a credential was logged: {leaks[:3]}"
    finally:
        if os.environ.get("NETPEER_KEEP_STATE") != "1":
            if multi.pg is not None:   # its directory is outside the state dir (PostgreSQL runs as postgres)
                multi.pg.remove()
            shutil.rmtree(multi.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def multi(request, credential_watch) -> Iterator[MultiSiteStack]:
    """A running two-site stack for the module (``HA`` from the module)."""
    mark = credential_watch.mark()
    stack = start_multi(getattr(request.module, "HA", False), replicas=getattr(request.module, "REPLICAS", 1))
    pids = all_pids(stack)
    try:
        yield stack
    finally:
        now = MultiSiteStack.open(stack.dir) or stack   # a test may have added or retired a site
        stop_multi(now, {**pids, **all_pids(now)}, credential_watch, mark)


@pytest.fixture(scope="module")
def world(multi: MultiSiteStack) -> Iterator[World]:
    w = World(multi)
    try:
        yield w
    finally:
        w.close()
