"""Two federated services in one process, measured: the cost of a
cross-site bind and of an exchange with nothing changed, at a given number
of Bound cross-site pairs on the link.

Run as a script, with ``PYTHONPATH`` pointing at the tree to measure
(``bench/region.py`` runs it for the commit before the link exchanged
changes and for this tree, each in its own process)::

    PYTHONPATH=TREE python bench/region_probe.py --sizes 100,1000 --samples 20 --budget 60 --idle 50

It imports nothing but that tree's ``netpeer``, and speaks to both link
protocols (whole sides, ``SiteView``; changes, ``Sync``). Each service has
its own SQLite store and an in-memory dataplane; the link is a direct call
that carries every message as the gRPC link would: encoded to protobuf
bytes (counted) and decoded on the other side. No link thread runs: the
measuring thread starts each exchange itself, as a link thread would after
the commit. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from netpeer.api import convert
from netpeer.core.models import Caller, Quotas
from netpeer.service import Service, batch
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore

ADMIN = Caller("admin", frozenset(), True)
#: What the link tells: changes (``Sync``) or whole sides (``SiteView``).
CHANGES = hasattr(convert, "sync_to_pb")
CAPACITY = 32766          # a /16 transit block
BATCH = 1000


def ns(side: str, index: int) -> str:
    """Tenants of 100 networks each (a namespace's quota check counts its own halves)."""
    return f"{side}{index // 100}"


def subnet(index: int) -> str:
    """A /28 of 10.0.0.0/8 per network, none overlapping another."""
    return f"10.{(index >> 12) & 255}.{(index >> 4) & 255}.{(index & 15) << 4}/28"


class Wire:
    """The link: each message encoded, counted and decoded, as on gRPC."""

    def __init__(self):
        self.services: dict[str, Service] = {}
        self.bytes = 0
        self.messages = 0

    def _carry(self, msg, to_site: str):
        if CHANGES:
            pb = convert.sync_to_pb(msg)
            data = pb.SerializeToString()
            back = convert.sync_from_pb(type(pb).FromString(data))
        else:
            pb = convert.site_view_to_pb(msg, to_site)
            data = pb.SerializeToString()
            back = convert.site_view_from_pb(type(pb).FromString(data))
        self.bytes += len(data)
        self.messages += 1
        return back

    def transport(self, here: str):
        def call(site: str, msg):
            answer = self.services[site].sites.receive(self._carry(msg, site))
            return self._carry(answer, here)
        return call


def _service(store: Path, here: str, other: str, wire: Wire, capacity: int = CAPACITY) -> Service:
    quotas = Quotas(networks_per_namespace=10_000_000, pending_peerings_per_namespace=10_000_000)
    try:   # the probe runs in the tree before the change too, whose Service took its settings as keywords
        from netpeer.service import Settings
    except ImportError:
        svc = Service(SqliteStore(store), MemoryDataplane(), quotas=quotas)
    else:
        svc = Service(SqliteStore(store), MemoryDataplane(), Settings(quotas=quotas))
    svc.link_sites(here, {other: capacity}, transport=wire.transport(here))
    if hasattr(svc.sites, "prepare"):
        svc.sites.prepare()
    wire.services[here] = svc
    return svc


def _bound(svc: Service) -> int:
    counts = svc.phase_counts()
    return sum(v for k, v in counts.items() if str(getattr(k, "value", k)) == "Bound")


def _figures(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    v = sorted(xs)
    return {"n": len(v), "p50_ms": round(statistics.median(v) * 1000, 2),
            "p99_ms": round(v[min(len(v) - 1, int(0.99 * len(v)))] * 1000, 2), "max_ms": round(v[-1] * 1000, 2),
            "samples_ms": [round(x * 1000, 2) for x in v]}


class Link:
    """Two services with ``pairs`` Bound cross-site pairs, and ``samples``
    more networks on each side whose first half (east's) is made. Their
    stores are ``directory``/east.db and west.db, or ``stores`` (site ->
    path: netpeerds go on from them, ``bench/region_pairs.py``)."""

    def __init__(self, directory: Path, pairs: int, samples: int, stores: dict[str, Path] | None = None):
        self.wire = wire = Wire()
        stores = stores or {site: directory / f"{site}.db" for site in ("east", "west")}
        self.east = east = _service(stores["east"], "east", "west", wire)
        self.west = west = _service(stores["west"], "west", "east", wire)
        self.pairs, self.samples = pairs, samples
        self.out: dict = {"pairs": pairs, "protocol": "changes" if CHANGES else "whole sides"}
        t0 = time.perf_counter()
        total = pairs + samples
        # Concurrent writers share commits (the write queue's group commit), as tenants' calls do.
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: (east.create_network(ADMIN, ns("a", i), f"n{i}", [subnet(i)]),
                                     west.create_network(ADMIN, ns("b", i), f"n{i}", [subnet(100_000 + i)])),
                          range(total)))
        # East consents to every pair, the samples' too; west to the pairs that are Bound before sampling.
        for svc, side, other, site, count in ((east, "a", "b", "west", total), (west, "b", "a", "east", pairs)):
            for start in range(0, count, BATCH):
                svc.create_peerings(ADMIN, [batch.PeeringRequest(ns(side, i), f"n{i}", "p", f"n{i}", ns(other, i),
                                                                 remote_site=site)
                                            for i in range(start, min(count, start + BATCH))])
        self.out["build_s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        for _ in range(8):
            west.sites.exchange("east")
            east.sites.exchange("west")
            if _bound(east) == _bound(west) == pairs:
                break
        if not _bound(east) == _bound(west) == pairs:
            raise RuntimeError(f"after 8 rounds of exchanges {_bound(east)} and {_bound(west)} of {pairs} pairs "
                               "are Bound")
        self.settle()   # what binding them changed crosses too
        self.out["first_exchanges_s"] = round(time.perf_counter() - t0, 2)
        self.binds: list[float] = []
        self.bind_cpu: list[float] = []
        self.bind_bytes: list[int] = []
        self.rounds: list[int] = []
        self.idle_cpu: list[float] = []
        self.idle_wall: list[float] = []
        self.idle_bytes: list[int] = []
        self.spent = {"bind": 0.0, "idle": 0.0}

    def settle(self) -> None:
        """Until nothing is left to say either way (acknowledgements)."""
        for _ in range(2):
            self.west.sites.exchange("east")
            self.east.sites.exchange("west")

    def bind(self) -> None:
        """The next sample pair's second consent (west's), then exchanges
        until both sides show it Bound, as west's link thread would run them."""
        east, west, wire = self.east, self.west, self.wire
        i = self.pairs + len(self.binds)
        b0, c0, t0 = wire.bytes, time.process_time(), time.perf_counter()
        west.create_peering(ADMIN, ns("b", i), f"n{i}", "p", ns("a", i), f"n{i}", remote_site="east")
        for r in range(1, 5):
            west.sites.exchange("east")
            if (east.get_peering(ADMIN, ns("a", i), f"n{i}", "p").phase.value == "Bound"
                    and west.get_peering(ADMIN, ns("b", i), f"n{i}", "p").phase.value == "Bound"):
                break
        else:
            raise RuntimeError(f"pair n{i} is not Bound on both sides after 4 exchanges")
        took = time.perf_counter() - t0
        self.binds.append(took)
        self.bind_cpu.append(time.process_time() - c0)
        self.bind_bytes.append(wire.bytes - b0)
        self.rounds.append(r)
        self.spent["bind"] += took
        self.settle()   # what the bind's answer changed is acknowledged (untimed)

    def idle(self) -> None:
        """One exchange with nothing to say, started by either side in turn."""
        b0, c0, t0 = self.wire.bytes, time.process_time(), time.perf_counter()
        if len(self.idle_cpu) % 2:
            self.west.sites.exchange("east")
        else:
            self.east.sites.exchange("west")
        took = time.perf_counter() - t0
        self.idle_wall.append(took)
        self.idle_cpu.append(time.process_time() - c0)
        self.idle_bytes.append(self.wire.bytes - b0)
        self.spent["idle"] += took

    def result(self, budget: float, idle_budget: float) -> dict:
        out = dict(self.out)
        out["bind"] = dict(_figures(self.binds), budget_s=budget)
        out["bind_cpu"] = _figures(self.bind_cpu)
        out["bytes_per_bind"] = {"p50": statistics.median(self.bind_bytes), "max": max(self.bind_bytes),
                                 "exchanges_p50": statistics.median(self.rounds)}
        out["idle_exchange"] = {"n": len(self.idle_cpu),
                                "cpu_ms_p50": round(statistics.median(self.idle_cpu) * 1000, 3),
                                "cpu_ms_mean": round(statistics.mean(self.idle_cpu) * 1000, 3),
                                "wall_ms_p50": round(statistics.median(self.idle_wall) * 1000, 3),
                                "bytes_p50": statistics.median(self.idle_bytes), "budget_s": idle_budget}
        out["bound_pairs_at_end"] = _bound(self.east)
        return out

    def close(self) -> None:
        for svc in (self.east, self.west):
            svc.store.close()


def measure(root: Path, sizes: list[int], samples: dict[int, int], budget: float, idle: int,
            idle_budget: float) -> dict:
    """Every size built first, then sampled in turns (one bind of each size,
    then the next), so that a slower moment of a shared machine falls on
    every size alike; a size stops once it spent ``budget`` seconds on
    binds (``idle_budget`` on idle exchanges), after at least 3 samples."""
    links = {}
    try:
        for n in sizes:
            directory = root / str(n)
            directory.mkdir()
            links[n] = Link(directory, n, samples.get(n, 20))
            print(f"region_probe: {links[n].out['protocol']}: {n} pairs built", file=sys.stderr, flush=True)
        # The build's writes are on disk before the first sample (each commit syncs the WAL).
        os.sync()
        gc.collect()
        for k in range(max(samples.get(n, 20) for n in sizes)):
            for n, link in links.items():
                if k < link.samples and (k < 3 or link.spent["bind"] < budget):
                    link.bind()
        for k in range(idle):
            for link in links.values():
                if k < 3 or link.spent["idle"] < idle_budget:
                    link.idle()
        return {str(n): link.result(budget, idle_budget) for n, link in links.items()}
    finally:
        for link in links.values():
            link.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="region_probe")
    p.add_argument("--sizes", required=True, help="Bound cross-site pairs, comma-separated")
    p.add_argument("--samples", default="20", help="binds per size (N or SIZE=N,...)")
    p.add_argument("--budget", type=float, default=120.0, help="seconds of binds per size, at least 3 samples")
    p.add_argument("--idle", type=int, default=100, help="exchanges with nothing changed per size")
    p.add_argument("--idle-budget", type=float, default=30.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    sizes = [int(x) for x in args.sizes.split(",")]
    samples = dict((int(a), int(b)) for a, b in (x.split("=") for x in args.samples.split(","))) \
        if "=" in args.samples else {n: int(args.samples) for n in sizes}
    root = Path(tempfile.mkdtemp(prefix="np-probe-"))
    try:
        result = {"protocol": "changes" if CHANGES else "whole sides", "python": sys.version.split()[0],
                  "sizes": measure(root, sizes, samples, args.budget, args.idle, args.idle_budget)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
