"""Fixtures for tests that run real OVN daemons and network namespaces.

Import the fixtures you need into a test module (``from .conftest_ovn import
ovn_central``) or load this file as a plugin. Every test gets its own short
state directory under /tmp (unix socket paths must stay under 108 bytes, so
not pytest's tmp_path), and everything it started, daemons, namespaces and
veths, is removed by finalizers even when the test fails.

A test fails loudly, never skips, when not root or when the OVN/OVS packages
are missing: `make test` installs them (scripts/setup.sh).
Set NETPEER_KEEP_STATE=1 to keep the state directories (and logs).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Iterator

import pytest

from netpeer.dev import netns as nsx
from netpeer.ovn.daemons import OvnDaemonError, OvnDaemons

CENTRAL_TOOLS = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl")
CHASSIS_TOOLS = ("ovs-vswitchd", "ovs-vsctl", "ovs-appctl", "ovn-controller", "ip")


def _missing(tools: tuple[str, ...]) -> list[str]:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [tool for tool in tools if shutil.which(tool, path=path) is None]


def require_ovn(chassis: bool = False) -> None:
    """Fail, with what is missing, when OVN cannot run here."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("needs root")
    missing = _missing(CENTRAL_TOOLS + (CHASSIS_TOOLS if chassis else ()))
    if missing:
        reasons.append("missing " + ", ".join(missing)
                       + " (Debian packages ovn-central, ovn-host, openvswitch-switch, iproute2)")
    if reasons:
        pytest.fail("; ".join(reasons) + ": run scripts/setup.sh (or `make test`) as root")


@pytest.fixture
def ovn_state_dir() -> Iterator[str]:
    """A fresh, short state directory (``/tmp/np-XXXXXXXX``), removed afterwards."""
    path = tempfile.mkdtemp(prefix="np-", dir="/tmp")
    yield path
    if os.environ.get("NETPEER_KEEP_STATE") != "1":
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def ovn_daemons(ovn_state_dir: str) -> Iterator[OvnDaemons]:
    """An OvnDaemons on a fresh state dir, not started; stopped afterwards whatever the test did."""
    require_ovn()
    daemons = OvnDaemons(ovn_state_dir)
    yield daemons
    daemons.stop()


@pytest.fixture
def ovn_central(ovn_daemons: OvnDaemons) -> OvnDaemons:
    """Running NB + SB + ovn-northd."""
    ovn_daemons.start()
    return ovn_daemons


@pytest.fixture
def ovn_chassis(ovn_daemons: OvnDaemons) -> OvnDaemons:
    """Running central plus a chassis (ovs-vswitchd userspace datapath, ovn-controller)."""
    require_ovn(chassis=True)
    ovn_daemons.start(chassis=True)
    return ovn_daemons


@dataclass
class Instances:
    """Creates namespaces attached to br-int and remembers them for cleanup."""

    daemons: OvnDaemons
    token: str = field(default_factory=lambda: secrets.token_hex(3))
    created: list[str] = field(default_factory=list)

    def name(self, short: str) -> str:
        """A namespace name unique to this test run (``np<token>-<short>``)."""
        return f"np{self.token}-{short}"

    def add(self, short: str, iface_id: str, mac: str, addresses: list[str], gateways: list[str],
            mtu: int = 1400, wait: bool = True) -> str:
        netns = self.name(short)
        self.created.append(netns)
        nsx.add_instance(self.daemons, netns, iface_id, mac, addresses, gateways, mtu=mtu)
        if wait:
            nsx.wait_instance_up(self.daemons, netns)
        return netns

    def cleanup(self) -> None:
        errors = []
        for netns in reversed(self.created):
            try:
                nsx.delete_instance(self.daemons, netns)
            except (nsx.NetnsError, OvnDaemonError) as exc:
                errors.append(str(exc))
        self.created.clear()
        if errors:
            raise RuntimeError("; ".join(errors))


@pytest.fixture
def instances(ovn_chassis: OvnDaemons) -> Iterator[Instances]:
    """Factory for instances on the chassis; deletes them before the daemons stop."""
    factory = Instances(ovn_chassis)
    yield factory
    factory.cleanup()

