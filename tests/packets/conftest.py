"""Real packets through netpeerd's own OVN rows.

Here ``ovn`` (overriding tests/conftest.py's) also runs a chassis:
ovs-vswitchd with the userspace datapath in its own network namespace, and
ovn-controller. ``netpeerd`` (tests/conftest.py) is the real service, store,
OVN backend and gRPC server on a unix socket; tenants talk to it through
the API. Instances are the dev tooling's (``netpeer_dev.instances.Fleet``):
a switch port tagged ``kind=instance`` plus a network namespace on br-int.

Every fixture undoes what it made, in reverse order, even when the test
fails: instances (switch ports, veths, namespaces) before the daemons, the
daemons by pid, then the chassis namespace; the finalizers then check that
no namespace, veth or daemon of the test is left. A missing component
(not root, no OVN/OVS package, no ``ip``) fails the test; nothing here skips.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from netpeer_dev.daemons import OvnDaemons, alive
from netpeer_dev.instances import Fleet
from tests.packets.helpers import World
from tests.support import Netpeerd, require_ovn

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
        survivors = {name: pid for name, pid in pids.items() if alive(pid)}
        assert not survivors, f"daemons still running after stop: {survivors}"
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
        try:
            f.delete_all()
        finally:
            f.close()
        run_netns = Path("/run/netns")
        left = [n.name for n in run_netns.iterdir() if n.name.startswith(f"{f.prefix}-")] \
            if run_netns.is_dir() else []
        assert not left, f"namespaces left behind: {left}"
        assert not _root_links_with_alias(f.prefix), "veths left in the root namespace"


@pytest.fixture
def world(netpeerd: Netpeerd, fleet: Fleet) -> Iterator[World]:
    w = World(netpeerd, fleet)
    try:
        yield w
    finally:
        w.close()
