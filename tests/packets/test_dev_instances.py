"""`netpeer dev up --chassis` and `netpeer dev instance add|list|delete` with the
real command, a real dev stack (daemons started by the CLI, netpeerd as its
own process) in a private state directory; `netpeer dev down` removes the
instances and stops everything by pid."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from netpeer_dev import netns as nsx
from netpeer_dev.daemons import OvnDaemons, alive
from tests.support import require_ovn
from tests.support import run_cli as netpeer

pytestmark = pytest.mark.chassis

CHASSIS = ("ovsdb-server", "ovs-vswitchd", "ovn-controller")




def fails(*args: str, env: dict, says: str) -> str:
    """The command fails with one line on stderr containing ``says``."""
    proc = netpeer(*args, env=env, check=False)
    assert proc.returncode == 1, f"netpeer {' '.join(args)}: exit {proc.returncode}, {proc.stderr}"
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert says in proc.stderr, proc.stderr
    return proc.stderr


def _netns_with_prefix(prefix: str) -> list[str]:
    run = Path("/run/netns")
    return sorted(n.name for n in run.iterdir() if n.name.startswith(prefix)) if run.is_dir() else []


@pytest.fixture
def dev(state_dir: Path):
    require_ovn(chassis=True)
    directory = state_dir / "dev"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    env["NETPEER_DEV_DIR"] = str(directory)
    daemons = OvnDaemons(directory / "ovn")
    pids: list[int] = []
    try:
        up = netpeer("dev", "up", "--chassis", "--sweep-interval", "1s", env=env)
        for line in up.stdout.splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = value
        pids = list(daemons.pids().values())
        yield env
    finally:
        netpeer("dev", "down", "--purge", env=env, check=False)
        assert not [p for p in pids if alive(p)], "daemons left running"
        assert not daemons.chassis_netns_exists(), "chassis namespace left behind"


def test_dev_instances(dev: dict) -> None:
    # The chassis runs and status shows it.
    status = json.loads(netpeer("dev", "status", "-o", "json", env=dev).stdout)
    states = {d["name"]: d for d in status["daemons"]}
    assert all(states[n]["state"] == "running" and states[n]["pid"] for n in CHASSIS + ("netpeerd",)), states
    assert status["chassis"] is True and status["instances"] == []
    table = netpeer("dev", "status", env=dev).stdout
    assert "ovs-vswitchd" in table and "ovn-controller" in table and "chassis:" in table

    token_a = netpeer("token", "create", "--namespace", "team-a", env=dev).stdout.strip()
    token_b = netpeer("token", "create", "--namespace", "team-b", env=dev).stdout.strip()
    a, b = {**dev, "NETPEER_TOKEN": token_a}, {**dev, "NETPEER_TOKEN": token_b}
    net_a = json.loads(netpeer("network", "create", "net-a", "--subnet", "10.51.1.0/24", "--subnet", "fd51:1::/64",
                               "-o", "json", env=a).stdout)
    netpeer("network", "create", "net-b", "--subnet", "10.51.2.0/24", env=b)

    # add: default addresses from .10, the tenant's namespace from its token.
    vm_a = json.loads(netpeer("dev", "instance", "add", "net-a", "vm-a", "-o", "json", env=a).stdout)
    assert {k: vm_a[k] for k in ("name", "network", "namespace", "ips", "state")} == {
        "name": "vm-a", "network": "net-a", "namespace": "team-a", "ips": ["10.51.1.10/24", "fd51:1::a/64"],
        "state": "up"}
    assert vm_a["gateways"] == ["10.51.1.1", "fd51:1::1"] and vm_a["network_uid"] == net_a["uid"]
    prefix = vm_a["netns"].rsplit("-vm-a", 1)[0] + "-"
    assert nsx.netns_exists(vm_a["netns"])
    # NS/NETWORK with the admin token (the one `dev up` exported), and --ip.
    vm_a2 = json.loads(netpeer("dev", "instance", "add", "team-a/net-a", "vm-a2", "--ip", "10.51.1.20", "-o", "json",
                               env=dev).stdout)
    assert vm_a2["ips"] == ["10.51.1.20/24"] and vm_a2["gateways"] == ["10.51.1.1"]
    # Idempotent: the same instance again is re-used as it is.
    again = json.loads(netpeer("dev", "instance", "add", "net-a", "vm-a", "-o", "json", env=a).stdout)
    assert again == vm_a
    vm_b = json.loads(netpeer("dev", "instance", "add", "-n", "team-b", "net-b", "vm-b", "-o", "json", env=dev).stdout)
    assert vm_b["ips"] == ["10.51.2.10/24"]

    # Errors: one line naming the problem; nothing created.
    fails("dev", "instance", "add", "net-a", "vm-a3", "--ip", "10.51.1.20", env=a, says="used by another instance")
    fails("dev", "instance", "add", "net-a", "vm-a3", "--ip", "10.99.0.1", env=a, says="not inside any subnet")
    fails("dev", "instance", "add", "net-a", "vm-a3", "--ip", "10.51.1.1", env=a, says="reserved")
    fails("dev", "instance", "add", "net-a", "vm-a", "--ip", "10.51.1.30", env=a, says="delete it first")
    fails("dev", "instance", "add", "net-b", "vm-a", env=b, says="exists on network team-a/net-a")
    fails("dev", "instance", "add", "nope", "vm-x", env=a, says="nope")
    fails("dev", "instance", "add", "net-a", "vm-x", env=b, says="team-b")   # team-b's token: its own namespace
    fails("dev", "instance", "add", "net-a", "Bad_Name", env=a, says="NAME")
    fails("dev", "instance", "add", "net-a", "vm-x", env=dev, says="--namespace")   # admin: which namespace?
    fails("dev", "instance", "delete", "vm-nope", env=dev, says="not found")
    assert not _netns_with_prefix(prefix + "vm-a3") and not _netns_with_prefix(prefix + "vm-x")

    # list: table and JSON.
    listed = json.loads(netpeer("dev", "instance", "list", "-o", "json", env=dev).stdout)
    assert [i["name"] for i in listed] == ["vm-a", "vm-a2", "vm-b"]
    assert all(set(i) >= {"name", "network", "namespace", "ips", "netns", "state"} for i in listed)
    assert all(i["state"] == "up" for i in listed)
    table = netpeer("dev", "instance", "list", env=dev).stdout
    assert "| vm-a2 " in table and "team-b/net-b" in table and "10.51.1.20/24" in table
    assert "vm-a2" in netpeer("dev", "status", env=dev).stdout

    # The switch ports carry netpeer's tags, kind=instance.
    nb = status["nb_remote"]
    ports = subprocess.run(["ovn-nbctl", f"--db={nb}", "--format=json", "--columns=name,addresses,external_ids",
                            "find", "Logical_Switch_Port", 'external_ids:"netpeer:kind"=instance'],
                           capture_output=True, text=True, check=True).stdout
    rows = {r[0]: dict(r[2][1]) for r in json.loads(ports)["data"]}
    assert set(rows) == {vm_a["port"], vm_a2["port"], vm_b["port"]}
    tags = rows[vm_a["port"]]
    assert tags["netpeer:owner"] == "netpeer" and tags["netpeer:network"] == net_a["uid"]
    assert tags["netpeer:id"] == "instance/vm-a"

    # Real packets inside a network: the gateway and the other instance answer.
    for address in ("10.51.1.1", "fd51:1::1", "10.51.1.20"):
        assert nsx.ping(vm_a["netns"], address, count=2, timeout=1.0), address
    # Not across networks (no peering).
    assert not nsx.ping(vm_a["netns"], "10.51.2.10", count=1, timeout=0.5)

    # netpeerd's sweep (every 1s here) leaves the instance ports alone.
    time.sleep(2.5)   # not polling: at least two sweeps pass, and they must leave the instance ports alone
    server = json.loads(netpeer("status", "-o", "json", env=dev).stdout)
    assert server["sweeps"] >= 2 and server["sweep_totals"]["repaired_rows"] == 0, server
    ports_after = subprocess.run(["ovn-nbctl", f"--db={nb}", "--bare", "--columns=name", "find",
                                  "Logical_Switch_Port", 'external_ids:"netpeer:kind"=instance'],
                                 capture_output=True, text=True, check=True).stdout.split()
    assert sorted(ports_after) == sorted(rows)

    # delete: port, veth and namespace go; the others stay.
    netpeer("dev", "instance", "delete", "vm-a2", env=dev)
    assert not nsx.netns_exists(vm_a2["netns"])
    assert [i["name"] for i in json.loads(netpeer("dev", "instance", "list", "-o", "json", env=dev).stdout)] == [
        "vm-a", "vm-b"]
    assert vm_a2["port"] not in subprocess.run(["ovn-nbctl", f"--db={nb}", "ls-list"], capture_output=True,
                                               text=True).stdout
    assert not nsx.ping(vm_a["netns"], "10.51.1.20", count=1, timeout=0.5)
    fails("dev", "instance", "delete", "vm-a2", env=dev, says="not found")

    # down: instances first, then every daemon; the chassis namespace goes too.
    pids = {d["name"]: d["pid"] for d in status["daemons"]}
    down = netpeer("dev", "down", env=dev)
    assert "deleting instance vm-a" in down.stderr and "deleting instance vm-b" in down.stderr
    assert _netns_with_prefix(prefix) == []
    assert not [name for name, pid in pids.items() if alive(pid)]
    assert json.loads(netpeer("dev", "instance", "list", "-o", "json", env=dev).stdout) == []

    # up again (without --chassis): the stack remembers it wants a chassis.
    netpeer("dev", "up", env=dev)
    status = json.loads(netpeer("dev", "status", "-o", "json", env=dev).stdout)
    assert {d["name"]: d["state"] for d in status["daemons"]}["ovn-controller"] == "running"
