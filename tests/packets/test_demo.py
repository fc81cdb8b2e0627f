"""`make demo` / `make demo-down` (python -m netpeer_dev.demo up|down) in a private
dev state directory: the real pulumi CLI, the dev stack with a chassis, the
two example stacks, instances and pings; a re-run; a teardown that leaves
nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netpeer_dev.daemons import OvnDaemons, alive
from tests.support import require_ovn

pytestmark = [pytest.mark.chassis, pytest.mark.pulumi]
ROOT = Path(__file__).resolve().parents[2]


def demo(action: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netpeer_dev.demo", action, "--checkout", str(ROOT)], env=env, capture_output=True,
                          text=True, timeout=900)


def test_demo_up_rerun_down(state_dir: Path) -> None:
    require_ovn(chassis=True)
    directory = state_dir / "dev"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETPEER_", "PULUMI_"))}
    env["NETPEER_DEV_DIR"] = str(directory)
    daemons = OvnDaemons(directory / "ovn")
    pids: list[int] = []
    try:
        first = demo("up", env)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        out = first.stdout
        assert "tenant A's peering to-b: Pending (AwaitingRemote)" in out
        assert "no route (not peered)" in out
        assert "tenant B's peering to-a: Bound (Bound)" in out
        assert "vm-a->vm-b IPv4 ok  vm-a->vm-b IPv6 ok  vm-b->vm-a IPv4 ok  vm-b->vm-a IPv6 ok" in out
        assert "second consent (peering Bound) -> first ping 10.2.0.10:" in out
        run = json.loads((directory / "demo" / "last-run.json").read_text())
        assert run["rerun"] is False and 0 < run["consent_to_first_ping_s"] < 30
        assert all(run["pings"].values())
        pids = list(daemons.pids().values())
        assert len(pids) == 6
        # Nothing written into the repository.
        root = Path(__file__).resolve().parents[2]
        assert not list((root / "examples").glob("*/Pulumi.*.yaml"))

        again = demo("up", env)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert "already Bound" in again.stdout and "IPv6 ok" in again.stdout
        assert set(daemons.pids().values()) == set(pids)   # the same daemons, re-used
        listed = subprocess.run([sys.executable, "-m", "netpeer.cli.main", "dev", "instance", "list", "-o", "json"],
                                env=env, capture_output=True, text=True, check=True).stdout
        assert [i["name"] for i in json.loads(listed)] == ["vm-a", "vm-b"]   # re-used, not duplicated
    finally:
        down = demo("down", env)
    assert down.returncode == 0, down.stdout[-3000:] + down.stderr[-3000:]
    assert "tenant-a: 3 resources deleted" in down.stdout and "tenant-b: 3 resources deleted" in down.stdout
    assert "processes still alive: none" in down.stdout and "namespaces left: none" in down.stdout
    assert not directory.exists()
    assert not [p for p in pids if alive(p)]
    assert not daemons.chassis_netns_exists()
