"""Several clients at once against one service, checked against the model.

N threads, each with its own gRPC channel and token, fire random operations
on a small shared universe (so they collide). The service records the order
in which it serialized the writes (under its own write lock). Replaying the
log through the reference model must reproduce every outcome the clients got
and, at the end, the service's exact state; the invariants hold (OVN
included); what the clients were told equals what the service logged
(nothing lost, nothing invented). Meanwhile a repair sweep runs in a loop and
must never find anything to repair.

NETPEER_CONCURRENCY_THREADS (default 6), _OPS per thread and round
(default 120), _ROUNDS (default 3).
"""

from __future__ import annotations

import collections
import copy
import itertools
import os
import random
import statistics
import threading
import time
from datetime import timedelta

from netpeer import errors
from netpeer.api.client import Client
from netpeer.core.models import Route, TokenLimits
from netpeer.service.budget import Budgets
from tests.trust import report
from tests.trust.invariants import Checker
from tests.trust.model import Model, diff, service_view

THREADS = int(os.environ.get("NETPEER_CONCURRENCY_THREADS", "6"))
OPS = int(os.environ.get("NETPEER_CONCURRENCY_OPS", "120"))
ROUNDS = int(os.environ.get("NETPEER_CONCURRENCY_ROUNDS", "3"))
NAMESPACES = ("a", "b", "c")
NETWORKS = ("n1", "n2")
PEERINGS = ("p1", "p2")
V4 = ("10.0.0.0/16", "10.0.1.0/24", "10.1.0.0/24", "10.2.0.0/24", "10.3.0.0/24")
V6 = ("fd00::/48", "fd00:0:0:1::/64", "fd01::/64")


def prefix(r) -> str:
    return r.prefix if isinstance(r, Route) else str(r).split()[0]


def apply(model: Model, entry: dict) -> str:
    """The model's outcome for one logged service call."""
    m, a, kw = entry["method"], entry["args"], entry["kwargs"]
    if m == "create_network":
        ns, name, subnets = a[:3]
        routes = a[3] if len(a) > 3 else kw.get("routes", ())
        uid = entry["result"].network.uid if entry.get("code") == "OK" else None
        return model.create_network(ns, name, list(subnets), [prefix(r) for r in routes], uid)
    if m == "update_network":
        subnets, routes = kw.get("subnets"), kw.get("routes")
        return model.update_network(a[0], a[1], None if subnets is None else list(subnets),
                                    None if routes is None else [prefix(r) for r in routes])
    if m == "delete_network":
        return model.delete_network(a[0], a[1])
    if m == "create_peering":
        ns, net, name, rns, rnet, ruid = a[:6]
        return model.create_peering(ns, net, name, rns, rnet, ruid)
    if m == "delete_peering":
        return model.delete_peering(*a[:3])
    if m == "update_peering":
        return model.update_peering(*a[:3])
    raise ValueError(m)


def key_of(method: str, args) -> tuple:
    return (method,) + tuple(args[:3] if "peering" in method else args[:2])


class Worker(threading.Thread):
    def __init__(self, endpoint, token, seed, ops, barrier, uids):
        super().__init__(name=f"worker-{seed}")
        self.client = Client(endpoint, token, timeout=60)
        self.rng = random.Random(seed)
        self.ops, self.barrier, self.uids = ops, barrier, uids
        self.seen: collections.Counter = collections.Counter()
        self.reads = 0
        self.error: BaseException | None = None

    def run(self):
        try:
            self.barrier.wait(30)
            for _ in range(self.ops):
                self.step()
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            self.client.close()

    def step(self):
        r, c = self.rng, self.client
        ns, net, name = r.choice(NAMESPACES), r.choice(NETWORKS), r.choice(PEERINGS)
        kind = r.choices(["create_network", "update_network", "delete_network", "create_peering",
                          "delete_peering", "update_peering", "read"], [14, 14, 9, 34, 16, 5, 8])[0]
        subnets = r.sample(V4 + V6, r.randint(1, 2))
        routes = r.sample(V4 + ("10.9.0.0/16",), r.randint(0, 1))
        if kind == "read":
            for call in (lambda: c.get_network(ns, net), lambda: c.list_peerings(ns, net), lambda: c.list_networks(ns)):
                try:
                    call()
                except errors.NotFound:
                    pass
            self.reads += 1
            return
        if kind == "create_network":
            args, fn = (ns, net), lambda: c.create_network(ns, net, subnets, routes)
        elif kind == "update_network":
            which = r.choice(["subnets", "routes", "both"])
            args = (ns, net)
            fn = lambda: c.update_network(ns, net, subnets=subnets if which != "routes" else None,  # noqa: E731
                                          routes=routes if which != "subnets" else None)
        elif kind == "delete_network":
            args, fn = (ns, net), lambda: c.delete_network(ns, net)
        elif kind == "create_peering":
            rns, rnet = r.choice(NAMESPACES), r.choice(NETWORKS)
            pin = r.choice([None] * 8 + ["known"])
            uid = r.choice(sorted(self.uids)) if pin and self.uids else None
            args = (ns, net, name)
            fn = lambda: c.create_peering(ns, net, name, rnet, rns, remote_uid=uid)  # noqa: E731
        elif kind == "delete_peering":
            args, fn = (ns, net, name), lambda: c.delete_peering(ns, net, name)
        else:
            args, fn = (ns, net, name), lambda: c.update_peering(ns, net, name, ttl=timedelta(days=2))
        try:
            out = fn()
            code = "OK"
            if kind == "create_network":
                self.uids.add(out["uid"])
        except errors.NetpeerError as exc:
            code = type(exc).__name__
        self.seen[key_of(kind, args) + (code,)] += 1


class Sweeper(threading.Thread):
    """The repair sweep, in a loop, while the clients write: OVN always
    equals the store between writes, so it never has anything to do."""

    def __init__(self, service):
        super().__init__(name="sweeper", daemon=True)
        self.service, self.stop, self.sweeps, self.repaired, self.errors = service, threading.Event(), 0, 0, 0

    def run(self):
        while not self.stop.is_set():
            rep = self.service.repair()
            self.sweeps += 1
            self.repaired += rep.repaired_rows
            self.errors += rep.errors
            time.sleep(0.01)   # not polling: sweeps back to back, with a breath between


def test_concurrent_clients_agree_with_the_model(recorded):
    d = recorded
    service = d.service
    # The consent rules are checked here, not the per-token budget of conflicts told (test_budgets.py).
    service.budgets = Budgets(TokenLimits(conflict_disclosures_per_minute=10_000))
    check = Checker(d)
    token = d.token(*NAMESPACES)
    model = Model()
    replayed = 0
    client_seen: collections.Counter = collections.Counter()
    uids: set[str] = set()
    base_seed = int(os.environ.get("NETPEER_CONCURRENCY_SEED", "0")) or random.randrange(1 << 30)
    started = time.monotonic()
    sweeper = Sweeper(service)
    sweeper.start()
    reads = 0
    try:
        for rnd in range(ROUNDS):
            barrier = threading.Barrier(THREADS)
            workers = [Worker(d.endpoint, token, base_seed + rnd * 1000 + i, OPS, barrier, uids)
                       for i in range(THREADS)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(300)
                assert not w.is_alive(), f"{w.name} hung"
                assert w.error is None, f"{w.name} (seed {base_seed}): {w.error!r}"
                client_seen += w.seen
                reads += w.reads
            # Replay what the service serialized since the last round.
            log = service.log
            assert len({e["seq"] for e in log}) == len(log)
            for entry in log[replayed:]:
                expected = apply(model, entry)
                assert entry["code"] == expected, (
                    f"seed {base_seed}, write #{entry['seq']} {entry['method']}{entry['args'][:6]} "
                    f"{entry['kwargs']}: service {entry['code']}, model {expected}")
            replayed = len(log)
            problems = diff(model.view(), service_view(service))
            assert not problems, f"seed {base_seed}, after round {rnd + 1}:\n{problems}"
            check(via_nbctl=True)
    finally:
        sweeper.stop.set()
        sweeper.join(30)
    elapsed = time.monotonic() - started
    # Calls refused before any state was read: the model refuses them too.
    for entry in service.prelock:
        assert apply(copy.deepcopy(model), entry) == entry["code"], entry
    # What the clients were told is exactly what the service did.
    log = service.log
    server_seen = collections.Counter(key_of(e["method"], e["args"]) + (e["code"],)
                                      for e in log + service.prelock)
    assert server_seen == client_seen, (server_seen - client_seen, client_seen - server_seen)
    assert sweeper.sweeps > 0 and sweeper.repaired == 0 and sweeper.errors == 0, \
        (sweeper.sweeps, sweeper.repaired, sweeper.errors)
    acked = sum(1 for e in log if e["code"] == "OK")
    groups = [len(list(g)) for _, g in itertools.groupby(log, key=lambda e: e["tx"])]
    nets, peers = check.state()
    report.record("concurrency", "threads x ops x rounds (seed)", f"{THREADS} x {OPS} x {ROUNDS} ({base_seed})")
    report.record("concurrency", "writes serialized / acknowledged OK / refused before reading state",
                  f"{len(log)} / {acked} / {len(service.prelock)}")
    report.record("concurrency", "read rounds (3 reads each)", reads)
    report.record("concurrency", "writes per store transaction (group commit): mean / max",
                  f"{statistics.mean(groups):.2f} / {max(groups)}")
    report.record("concurrency", "outcomes", ", ".join(
        f"{k}: {v}" for k, v in sorted(collections.Counter(e["code"] for e in log).items())))
    report.record("concurrency", "model replay mismatches / operations lost", "0 / 0")
    report.record("concurrency", "repair sweeps run concurrently, rows repaired", f"{sweeper.sweeps}, 0")
    report.record("concurrency", "final state", f"{len(nets)} networks, {len(peers)} peerings "
                  f"({dict(collections.Counter(p.phase for p in peers.values()))})")
    report.record("concurrency", "wall time (s) / writes per second", f"{elapsed:.1f} / {len(log) / elapsed:.0f}")
    check.close()
