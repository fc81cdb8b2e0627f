"""What the fault tests share: netpeerd as a real process
(``netpeer_dev.process.NetpeerdProcess``), a model-based
workload over several tenants, and the checks that the store matches what
was acknowledged and that OVN matches the store.

The workload never produces an operation the service should refuse: every
network gets prefixes nobody else ever had, names are never reused, and a
network is deleted only when it has no peerings of its own. So every call
either succeeds or fails because of the fault being injected, and the model
(networks with their prefixes, peerings, and which ones are Bound) says
exactly what the store must hold.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import random
import statistics
import time
from typing import Callable

import netaddr

from netpeer.api.client import Client
from netpeer.core import consent
from netpeer.ovn import rows as dataplane
from netpeer.core.models import NetworkKey, PeeringKey, Phase
from netpeer.ovn import names
from netpeer.service.writes import desired_states
from netpeer.store.base import Transaction, iter_all_networks
from netpeer_dev.process import NetpeerdProcess
from tests.support import wait_until

OWNER = "netpeer"


# --------------------------------------------------------------------- netpeerd
def tokens(daemon: NetpeerdProcess, namespaces: list[str]) -> dict[str, str]:
    """A token per namespace, minted with the daemon's admin token."""
    with Client(daemon.endpoint, daemon.admin_token, timeout=30) as admin:
        return {ns: admin.create_token([ns])["token"] for ns in namespaces}


# --------------------------------------------------------------------- model
def _canon(prefixes) -> tuple[str, ...]:
    return tuple(sorted(str(netaddr.IPNetwork(str(p)).cidr) for p in prefixes))


@dataclasses.dataclass(frozen=True)
class Op:
    """One API call of the workload and how to tell afterwards whether it
    took effect (for the one call in flight when a fault hit)."""

    kind: str            # create_network update_network delete_network create_peering delete_peering
    ns: str
    network: str
    peering: str = ""
    remote_ns: str = ""
    remote_network: str = ""
    subnets: tuple[str, ...] = ()
    routes: tuple[str, ...] = ()

    def run(self, client: Client) -> None:
        if self.kind == "create_network":
            client.create_network(self.ns, self.network, list(self.subnets), list(self.routes))
        elif self.kind == "update_network":
            client.update_network(self.ns, self.network, subnets=list(self.subnets), routes=list(self.routes))
        elif self.kind == "delete_network":
            client.delete_network(self.ns, self.network)
        elif self.kind == "create_peering":
            client.create_peering(self.ns, self.network, self.peering, self.remote_network, self.remote_ns)
        elif self.kind == "delete_peering":
            client.delete_peering(self.ns, self.network, self.peering)
        else:  # pragma: no cover
            raise ValueError(self.kind)

    def took_effect(self, tx: Transaction) -> bool:
        if self.kind in ("create_network", "update_network", "delete_network"):
            net = tx.get_network(NetworkKey(self.ns, self.network))
            if self.kind == "create_network":
                return net is not None
            if self.kind == "delete_network":
                return net is None
            return net is not None and _canon(net.subnets) == _canon(self.subnets) \
                and _canon(r.prefix for r in net.routes) == _canon(self.routes)
        got = tx.get_peering(PeeringKey(self.ns, self.network, self.peering))
        return (got is not None) == (self.kind == "create_peering")


class Model:
    """What the store must hold after the acknowledged operations."""

    def __init__(self, tenants: list[str], seed: int, max_networks_per_tenant: int = 8,
                 prefix_offset: int = 0):
        """``prefix_offset`` keeps the prefixes of several models (one per
        concurrent client) apart."""
        self.tenants = tenants
        self.rnd = random.Random(seed)
        self.cap = max_networks_per_tenant
        self.networks: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self.peerings: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._names = 0
        self._prefixes = prefix_offset

    # -- generation
    def _alloc(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Prefixes never used before (so never overlapping anything)."""
        self._prefixes += 1
        c = self._prefixes
        assert c < 16384
        subnets = [f"10.{c // 256}.{c % 256}.0/24"]
        if self.rnd.random() < 0.4:
            subnets.append(f"fd00:{c:x}::/64")
        routes = [f"100.{64 + c // 256}.{c % 256}.0/24"] if self.rnd.random() < 0.3 else []
        return tuple(subnets), tuple(routes)

    def _own_peerings(self, key: tuple[str, str]) -> list[tuple[str, str, str]]:
        return [p for p in self.peerings if p[:2] == key]

    def next_op(self) -> Op:
        rnd = self.rnd
        nets = list(self.networks)
        choices: list[tuple[float, Callable[[], Op]]] = []
        small = [ns for ns in self.tenants if sum(1 for n in nets if n[0] == ns) < self.cap]
        if small:
            def create_network():
                ns = rnd.choice(small)
                self._names += 1
                subnets, routes = self._alloc()
                return Op("create_network", ns, f"n{self._names}", subnets=subnets, routes=routes)
            choices.append((3.0 if len(nets) < 6 else 1.5, create_network))
        if nets:
            def update_network():
                ns, name = rnd.choice(nets)
                subnets, routes = self._alloc()
                return Op("update_network", ns, name, subnets=subnets, routes=routes)
            choices.append((2.0, update_network))
        # A half whose other half is missing: creating the other half binds.
        pending = [(p, r) for p, r in self.peerings.items()
                   if r in self.networks and (r[0], r[1], f"to-{p[0]}-{p[1]}") not in self.peerings]
        free = [(a, b) for a in nets for b in nets
                if a != b and (a[0], a[1], f"to-{b[0]}-{b[1]}") not in self.peerings]
        if free:
            def create_peering():
                if pending and rnd.random() < 0.6:
                    p, r = rnd.choice(pending)
                    a, b = r, p[:2]
                else:
                    a, b = rnd.choice(free)
                return Op("create_peering", a[0], a[1], f"to-{b[0]}-{b[1]}", b[0], b[1])
            choices.append((4.0, create_peering))
        if self.peerings:
            def delete_peering():
                ns, net, name = rnd.choice(sorted(self.peerings))
                return Op("delete_peering", ns, net, name)
            choices.append((2.0, delete_peering))
        lonely = [n for n in nets if not self._own_peerings(n)]
        if lonely and len(nets) > 3:
            def delete_network():
                ns, name = rnd.choice(lonely)
                return Op("delete_network", ns, name)
            choices.append((1.5, delete_network))
        total = sum(w for w, _ in choices)
        x = rnd.random() * total
        for w, make in choices:
            x -= w
            if x <= 0:
                return make()
        return choices[-1][1]()

    # -- effects
    def apply(self, op: Op) -> None:
        key = (op.ns, op.network)
        if op.kind in ("create_network", "update_network"):
            self.networks[key] = (_canon(op.subnets), _canon(op.routes))
        elif op.kind == "delete_network":
            del self.networks[key]
        elif op.kind == "create_peering":
            self.peerings[(op.ns, op.network, op.peering)] = (op.remote_ns, op.remote_network)
        elif op.kind == "delete_peering":
            del self.peerings[(op.ns, op.network, op.peering)]

    def bound(self, key: tuple[str, str, str]) -> bool:
        rns, rnet = self.peerings[key]
        return (rns, rnet, f"to-{key[0]}-{key[1]}") in self.peerings

    # -- checks
    def diff_store(self, tx: Transaction, only: list[str] | None = None) -> list[str]:
        """Every way the store differs from the model: an acknowledged write
        missing (lost), a write that was refused or never made present, a
        wrong phase. Empty when they agree. ``only``: compare these
        namespaces only (when several models share one store)."""
        out = []
        stored = {(n.namespace, n.name): n for n in iter_all_networks(tx)
                  if only is None or n.namespace in only}
        for key, (subnets, routes) in self.networks.items():
            net = stored.get(key)
            if net is None:
                out.append(f"network {key} acknowledged but missing")
            elif (_canon(net.subnets), _canon(r.prefix for r in net.routes)) != (subnets, routes):
                out.append(f"network {key}: store has {net.subnets} {net.routes}, acknowledged {subnets} {routes}")
        for key in stored.keys() - self.networks.keys():
            out.append(f"network {key} in the store but deleted or never acknowledged")
        have = {}
        for key in stored:
            for p in tx.peerings_of(NetworkKey(*key)):
                have[(p.namespace, p.network, p.name)] = p
        for key, remote in self.peerings.items():
            p = have.get(key)
            if p is None:
                out.append(f"peering {key} acknowledged but missing")
                continue
            if (p.remote_namespace, p.remote_network) != remote:
                out.append(f"peering {key} points at {p.remote_namespace}/{p.remote_network}, not {remote}")
            want = Phase.BOUND if self.bound(key) else Phase.PENDING
            if p.phase != want:
                out.append(f"peering {key} is {p.phase.value} ({p.reason}), expected {want.value}")
        for key in have.keys() - self.peerings.keys():
            out.append(f"peering {key} in the store but deleted or never acknowledged")
        return out

    def counts(self) -> dict[str, int]:
        return {"networks": len(self.networks), "peerings": len(self.peerings),
                "bound_pairs": sum(1 for k in self.peerings if self.bound(k)) // 2}


# --------------------------------------------------------------------- OVN vs store
def expected_ids(tx: Transaction, owner: str = OWNER) -> collections.Counter:
    """netpeer:id of every OVN row the store implies (core.dataplane)."""
    want = collections.Counter()
    for net in iter_all_networks(tx):
        for row in dataplane.network_rows(owner, net, consent.bound_peers(tx, net.key)):
            want[row.ident] += 1
    return want


def actual_ids(backend) -> collections.Counter:
    """netpeer:id of every netpeer-owned NB row, counted (duplicates show as > 1)."""
    return collections.Counter(row.get(names.ID) for rows in backend.owned_rows().values() for row in rows)


def diff_ovn(want: collections.Counter, have: collections.Counter) -> list[str]:
    out = [f"duplicate OVN rows for {k} (x{n})" for k, n in have.items() if n > 1]
    out += [f"orphan OVN row {k}" for k in sorted(have.keys() - want.keys(), key=str)]
    out += [f"missing OVN row {k}" for k in sorted(want.keys() - have.keys(), key=str)]
    return out


def wait_ovn_matches_store(store, backend, timeout: float = 15.0, content: bool = False) -> float:
    """Until the netpeer-owned NB rows are exactly the rows the store implies
    (no duplicate, no orphan, none missing), as seen by ``backend``'s own
    replica; with ``content``, also until no network's rows differ from what
    the store implies (a write whose OVN transaction committed while its store
    commit failed leaves rows the daemons' sweep puts back). Returns how long
    it took; raises with the differences."""
    def problems() -> list[str]:
        with store.read() as tx:
            want = expected_ids(tx)
            desired = desired_states(tx, [n.uid for n in iter_all_networks(tx)]) if content else {}
        found = diff_ovn(want, actual_ids(backend)) if backend.connected else ["checker not connected"]
        if not found and desired:
            found = [f"network {uid}: OVN rows differ from the store" for uid in sorted(backend.drifted(desired))]
        return found
    start = time.monotonic()
    wait_until(problems, timeout, lambda found: f"OVN does not match the store: {len(found)} problem(s): "
               f"{found[:10]}", until=lambda found: not found)
    return time.monotonic() - start


# --------------------------------------------------------------------- figures
def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    v = sorted(values)
    return {"n": len(v), "median": round(statistics.median(v), 3),
            "p90": round(v[min(len(v) - 1, int(0.9 * len(v)))], 3), "max": round(v[-1], 3)}


def publish(request, test: str, figures: dict) -> None:
    """Print the figures of a fault test on the terminal (one JSON line) and,
    when NETPEER_FAULTS_REPORT names a file, append them there."""
    line = json.dumps({"test": test, **figures}, sort_keys=True)
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n[faults] {line}")
    path = os.environ.get("NETPEER_FAULTS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
