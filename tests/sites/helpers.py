"""What the cross-site tests share: the checks that a stack is complete and
gone, tenants of each site talking to that site's netpeerd, instances,
packet helpers (a timestamped pinger, drop counters of a router's policies)
and the figures the tests measure.

Needs root, the Debian packages ovn-central, ovn-host, openvswitch-switch,
ovn-ic, ovn-ic-db, iproute2, iputils-ping, and wireguard-go built by
scripts/install-wireguard.sh (scripts/setup.sh does all of it). A missing
piece fails the test; nothing here skips.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from netpeer.api.client import Client
from netpeer.ovn import names
from netpeer_dev.daemons import alive
from netpeer_dev.instances import Instance
from netpeer_dev.multisite import MultiSiteStack
from netpeer_dev.sites import Sites
from netpeer_dev.wireguard import WireGuardError, find_wireguard_go
from tests.support import wait_until

TOOLS = ("ovsdb-server", "ovsdb-tool", "ovn-northd", "ovn-nbctl", "ovn-sbctl", "ovs-vswitchd", "ovs-vsctl",
         "ovs-ofctl", "ovn-controller", "ovn-ic", "ovn-ic-nbctl", "ovn-ic-sbctl", "ip", "ping")


def require_sites() -> None:
    """Fail, naming what is missing, when the multi-site stack cannot run here."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("needs root")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [t for t in TOOLS if shutil.which(t, path=path) is None]
    if missing:
        reasons.append("missing " + ", ".join(missing) + " (Debian packages ovn-central, ovn-host, "
                       "openvswitch-switch, ovn-ic, ovn-ic-db, iproute2, iputils-ping)")
    for schema in ("/usr/share/ovn/ovn-ic-nb.ovsschema", "/usr/share/ovn/ovn-ic-sb.ovsschema"):
        if not Path(schema).exists():
            reasons.append(f"missing {schema} (Debian package ovn-ic-db)")
    try:
        find_wireguard_go()
    except WireGuardError as exc:
        reasons.append(str(exc))
    if reasons:
        pytest.fail("; ".join(reasons) + ": run scripts/setup.sh (or `make test`) as root")


# ------------------------------------------------------------------ figures

class Measurements:
    """Figures the tests measure, each with the load average at that moment;
    written at the end of the session to ``$NETPEER_SITES_RESULTS`` or
    ``results/sites/<timestamp>.json``."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def add(self, name: str, value, unit: str = "s", **extra) -> None:
        item = {"name": name, "value": value, "unit": unit, "load1": round(os.getloadavg()[0], 2), **extra}
        self.items.append(item)
        print(f"\nMEASURED {name}: {value} {unit} (load {item['load1']}) {extra or ''}")

    def write(self) -> None:
        if self.items:
            target = os.environ.get("NETPEER_SITES_RESULTS")
            path = Path(target) if target else Path("results/sites") / time.strftime("%Y%m%dT%H%M%S.json")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.items, indent=2) + "\n")


# ------------------------------------------------------------------ clean

def leftovers(sites: Sites, pids: dict[str, int]) -> list[str]:
    """What of ``sites`` is still there: processes, namespaces, keys, secrets, sockets."""
    out = [f"process {role} (pid {pid}) still running" for role, pid in pids.items() if alive(pid)]
    run_netns = Path("/run/netns")
    if run_netns.is_dir():
        out += [f"namespace {n.name}" for n in run_netns.iterdir() if n.name.startswith(sites.prefix + "-")]
    out += [f"key {p}" for p in sites.state_dir.rglob("*.key")]
    out += [f"secret {p}" for p in sites.state_dir.rglob("*.secret")]
    out += [f"socket {p}" for p in sites.state_dir.rglob("*.sock")]
    sockdir = Path(find_wireguard_go()[1])
    if sockdir.is_dir():
        out += [f"UAPI socket {p}" for p in sockdir.glob(f"wg{sites.id}*.sock")]
    return out


def all_pids(multi: MultiSiteStack) -> dict[str, int]:
    pids = multi.sites.pids()
    for name, stack in multi.stacks.items():
        for label, netpeerd in stack.netpeerds().items():
            if netpeerd.pid:
                pids[f"{name}/{label}"] = netpeerd.pid
    if multi.pg is not None and multi.pg.pid:
        pids["postgres"] = multi.pg.pid
    return pids


# ------------------------------------------------------------------ tenants

def split_remote(remote: str) -> tuple[str, str, str]:
    """``[SITE:]NS/NETWORK`` -> (site, ns, network)."""
    site, _, rest = remote.rpartition(":")
    ns, _, net = rest.partition("/")
    return site, ns, net


class World:
    """Tenants of every site of a running multi-site stack, talking to their
    site's netpeerd through the API, and their instances."""

    def __init__(self, multi: MultiSiteStack) -> None:
        self.multi = multi
        self._clients: dict[tuple[str, str], Client] = {}
        self._tokens: dict[tuple[str, str], str] = {}

    def admin(self, site: str) -> Client:
        return self.client(site, "")

    def token(self, site: str, namespace: str) -> str:
        if (site, namespace) not in self._tokens:
            stack = self.multi.stacks[site]
            with Client(stack.endpoint, stack.admin_token(), timeout=30) as admin:
                self._tokens[(site, namespace)] = admin.create_token([namespace])["token"]
        return self._tokens[(site, namespace)]

    def client(self, site: str, namespace: str) -> Client:
        """The tenant ``namespace`` of ``site`` ("" : that site's admin)."""
        key = (site, namespace)
        if key not in self._clients:
            stack = self.multi.stacks[site]
            token = self.token(site, namespace) if namespace else stack.admin_token()
            self._clients[key] = Client(stack.endpoint, token, timeout=30)
        return self._clients[key]

    def network(self, site: str, namespace: str, name: str, *subnets: str, routes: tuple[str, ...] = ()) -> dict:
        return self.client(site, namespace).create_network(namespace, name, list(subnets), list(routes))

    def consent(self, site: str, namespace: str, network: str, name: str, remote: str) -> dict:
        """``remote``: ``[SITE:]NS/NETWORK`` as on the CLI."""
        rsite, rns, rnet = split_remote(remote)
        return self.client(site, namespace).create_peering(namespace, network, name, remote_network=rnet,
                                                           remote_namespace=rns, remote_site=rsite)

    def withdraw(self, site: str, namespace: str, network: str, name: str) -> None:
        self.client(site, namespace).delete_peering(namespace, network, name)

    def peering(self, site: str, namespace: str, network: str, name: str) -> dict:
        return self.client(site, namespace).get_peering(namespace, network, name)

    def wait_phase(self, site: str, namespace: str, network: str, name: str, phase: str,
                   reason: str | None = None, timeout: float = 15.0) -> dict:
        """Poll the peering until it is ``phase`` (and ``reason``); it, or fail naming what it is."""
        return wait_until(lambda: self.peering(site, namespace, network, name), timeout,
                          lambda p: f"{site}:{namespace}/{network}/{name} is {p['phase']} ({p.get('reason')}), "
                                    f"expected {phase} ({reason})", step=0.05,
                          until=lambda p: p["phase"] == phase and (reason is None or p.get("reason") == reason))

    def vm(self, site: str, network: dict, name: str, ips: list[str] | None = None) -> Instance:
        """An instance of ``network`` on ``site``'s instance chassis."""
        with self.multi.fleet(site) as fleet:
            return fleet.add(network, name, ips)

    def delete_vm(self, site: str, name: str) -> None:
        with self.multi.fleet(site) as fleet:
            fleet.delete(name)

    def close(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()


# ------------------------------------------------------------------ packets

def _json_rows(text: str) -> list[dict]:
    data = json.loads(text)
    return [dict(zip(data["headings"], row)) for row in data["data"]]


def drop_packets(sites: Sites, site: str, chassis: str, network_uid: str) -> int:
    """Packets dropped so far by the drop policies of the network's router, on
    one chassis of ``site`` (OpenFlow statistics of the logical flows northd
    made of every ``drop`` Logical_Router_Policy of that router)."""
    central = sites.central[site]
    router = names.router(network_uid)
    uuids = central.nbctl("--bare", "--columns=policies", "find", "Logical_Router", f"name={router}").split()
    policies = []
    for uuid in uuids:
        policies += _json_rows(central.nbctl("--format=json", "--columns=priority,match,action", "list",
                                             "Logical_Router_Policy", uuid))
    drops = [(p["priority"], p["match"]) for p in policies if p["action"] == "drop"]
    keys = central.sbctl("--bare", "--columns=tunnel_key", "find", "Datapath_Binding",
                         f'external_ids:name="{router}"').split()
    assert len(keys) == 1, f"no datapath for router {router} in {site}"
    lflows = [r["_uuid"][1] for r in _json_rows(central.sbctl(
        "--format=json", "--columns=_uuid,priority,match", "find", "Logical_Flow",
        "external_ids:stage-name=lr_in_policy")) if (r["priority"], r["match"]) in drops]
    ch = sites.chassis[site][chassis]
    total = 0
    for lf in lflows:
        proc = subprocess.run(["ovs-ofctl", "dump-flows", "br-int", f"cookie=0x{lf[:8]}/-1"], env=ch.env(),
                              capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, f"ovs-ofctl dump-flows failed: {proc.stderr.strip()}"
        for line in proc.stdout.splitlines():
            meta = re.search(r"\bmetadata=0x([0-9a-f]+)", line)
            count = re.search(r"\bn_packets=(\d+)", line)
            if meta and count and int(meta.group(1), 16) == int(keys[0]):
                total += int(count.group(1))
    return total


class Pinger:
    """``ping -D -i INTERVAL`` from an instance in the background; ``stop()``
    (SIGINT to its own pid) returns (receive time, icmp_seq) of every reply."""

    def __init__(self, src: Instance, dst: str, interval: float = 0.01) -> None:
        self.proc = subprocess.Popen(["ip", "netns", "exec", src.netns, "ping", "-n", "-D", "-i", f"{interval:g}",
                                      "-W", "1", "-I", src.address(ipaddress.ip_address(dst).version), dst],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stop(self) -> list[tuple[float, int]]:
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        replies = []
        for line in out.splitlines():
            m = re.match(r"\[(\d+\.\d+)\] \d+ bytes from .*icmp_seq=(\d+)", line)
            if m:
                replies.append((float(m.group(1)), int(m.group(2))))
        return replies


def longest_gap(replies: list[tuple[float, int]], after: float | None = None) -> tuple[float, int]:
    """(longest time between two consecutive replies ending after ``after``, requests lost in it)."""
    replies = sorted(replies)
    best, lost = 0.0, 0
    for (t1, s1), (t2, s2) in zip(replies, replies[1:]):
        if after is not None and t2 < after:
            continue
        if t2 - t1 > best:
            best, lost = t2 - t1, s2 - s1 - 1
    return best, lost
