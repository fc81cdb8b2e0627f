"""A region of many sites on one machine (part (b) of the region section,
``bench/region.py``): a netpeerd per site with the in-memory dataplane
(``netpeer serve --dataplane memory``), its own SQLite store, and real gRPC
links to its neighbours (each site linked to the next two and the previous
two around a ring: two links per site, four per site's side), each link
through a relay the benchmark can cut (``netpeer_dev.simulated.LinkCutter``).

Every site holds ``networks`` networks: ``pairs`` Bound cross-site pairs on
each of its links, ``samples`` more pairs per link whose first half is made
(for the binds), networks kept for the partitions, and the rest Bound in
pairs within the site. The stores are prepared in-process (two sites at a
time, one process each), then the netpeerds start and bind the cross-site
pairs themselves (each link's first exchange is a full copy).

Measured: how long the region takes from the start of its netpeerds until
every pair is Bound on both sides; the binds of the sample pairs (second
consent to Bound on both sides, as the sites' watch streams report it)
across all links; the partitions: ``cut`` links are cut, ``K`` new pairs
are consented on each side of each cut link (so K changes wait on each
side), the links heal, and the time until every new pair is Bound on both
sides and both ends of every cut link have acknowledged every change; and
the resident memory of every netpeerd.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.deploy import load_average, rss_kib
from bench.region_pairs import Watcher, figures
from bench.scale import log
from netpeer_dev.simulated import SimulatedRegion

BATCH = 1000
#: Partition networks per namespace: under ``quotas.site_attachments_per_namespace`` (250 by default),
#: which counts a namespace's networks attached to one link.
PART_NS = 200


def part_ns(k: int, j: int) -> str:
    """The namespace of the ``j``-th partition network of round ``k``."""
    return f"part{k}-{j // PART_NS}"


def part_namespaces(ks: list[int]) -> list[str]:
    return sorted({part_ns(k, j) for k in ks for j in range(0, k, PART_NS)})


def ring(count: int) -> tuple[list[str], list[tuple[str, str]]]:
    """Site names and links: each site to the next two around a ring."""
    names = [f"s{i:02d}" for i in range(count)]
    links = set()
    for i in range(count):
        for step in (1, 2):
            j = (i + step) % count
            if j != i:
                links.add(tuple(sorted((names[i], names[j]))))
    return names, sorted(links)


def subnet(index: int) -> str:
    """A /28 of 10.0.0.0/8 per network of the region, none overlapping another."""
    return f"10.{(index >> 12) & 255}.{(index >> 4) & 255}.{(index & 15) << 4}/28"


@dataclasses.dataclass
class SitePlan:
    """What one site's store holds before its netpeerd starts."""

    name: str
    networks: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)   # (ns, name, subnet)
    #: (ns, network, peering, remote_site, remote_ns, remote_network); remote_site "" : within the site
    halves: list[tuple[str, str, str, str, str, str]] = dataclasses.field(default_factory=list)

    def network(self, ns: str, name: str, index: int) -> None:
        self.networks.append((ns, name, subnet(index)))


@dataclasses.dataclass
class Plan:
    names: list[str]
    links: list[tuple[str, str]]
    sites: dict[str, SitePlan]
    cut: list[tuple[str, str]]
    ks: list[int]
    expected_bound: dict[str, int]           # Bound halves per site once the region has converged
    samples: list[tuple[str, str, int]]      # (first site, second site, k) of every sample pair


def plan(sites: int, networks: int, pairs: int, samples: int, ks: list[int], cut: int) -> Plan:
    """Who holds which network and which half (deterministic)."""
    names, links = ring(sites)
    site_plans = {n: SitePlan(n) for n in names}
    counter = {n: 0 for n in names}
    index = [0]

    def new(site: str, ns: str, name: str) -> None:
        site_plans[site].network(ns, name, index[0])
        index[0] += 1
        counter[site] += 1

    bound = {n: 0 for n in names}
    cross = {n: 0 for n in names}
    for a, b in links:
        for _ in range(pairs):
            ja, jb = cross[a], cross[b]
            cross[a] += 1
            cross[b] += 1
            new(a, f"x{ja // 100}", f"n{ja}")
            new(b, f"x{jb // 100}", f"n{jb}")
            site_plans[a].halves.append((f"x{ja // 100}", f"n{ja}", "p", b, f"x{jb // 100}", f"n{jb}"))
            site_plans[b].halves.append((f"x{jb // 100}", f"n{jb}", "p", a, f"x{ja // 100}", f"n{ja}"))
            bound[a] += 1
            bound[b] += 1
    sample_pairs = []
    for a, b in links:
        for k in range(samples):
            new(a, "smp", f"{b}-{k}")
            new(b, "smp", f"{a}-{k}")
            site_plans[a].halves.append(("smp", f"{b}-{k}", "p", b, "smp", f"{a}-{k}"))
            sample_pairs.append((a, b, k))
    # Cut links that share no site, spread around the ring.
    chosen: list[tuple[str, str]] = []
    used: set[str] = set()
    step = max(1, len(links) // max(1, cut))
    for i in list(range(0, len(links), step)) + list(range(len(links))):
        a, b = links[i]
        if len(chosen) < cut and a not in used and b not in used:
            chosen.append((a, b))
            used |= {a, b}
    for a, b in chosen:
        for k in ks:
            for j in range(k):
                new(a, part_ns(k, j), f"{b}-k{k}-{j}")
                new(b, part_ns(k, j), f"{a}-k{k}-{j}")
    for site in names:
        left = networks - counter[site]
        if left < 0:
            raise ValueError(f"site {site} needs {counter[site]} networks, more than {networks}: fewer pairs or K")
        base = counter[site]
        for j in range(left - left % 2):
            new(site, f"l{j // 100}", f"n{j}")
        for j in range(0, left - left % 2, 2):
            site_plans[site].halves.append((f"l{j // 100}", f"n{j}", "p", "", f"l{(j + 1) // 100}", f"n{j + 1}"))
            site_plans[site].halves.append((f"l{(j + 1) // 100}", f"n{j + 1}", "p", "", f"l{j // 100}", f"n{j}"))
            bound[site] += 2
        if left % 2:   # one more network, alone
            new(site, "solo", "n0")
        assert counter[site] == networks, (site, counter[site], base)
    return Plan(names, links, site_plans, chosen, list(ks), bound, sample_pairs)


def prepare_site(store: str, name: str, capacities: dict[str, int], networks: list, halves: list) -> float:
    """Builds one site's store in this process (the service's own code, no
    link running); the seconds it took. Run in a process of its own."""
    import logging
    from netpeer.core.models import Caller, Quotas
    from netpeer.service import Service, Settings, batch
    from netpeer.service.memory import MemoryDataplane
    from netpeer.store.sqlite import SqliteStore
    logging.basicConfig(level=logging.ERROR)
    admin = Caller("admin", frozenset(), True)
    t0 = time.monotonic()
    svc = Service(SqliteStore(Path(store)), MemoryDataplane(),
                  Settings(quotas=Quotas(networks_per_namespace=10_000_000, pending_peerings_per_namespace=10_000_000)))
    svc.link_sites(name, capacities, transport=None)
    svc.sites.prepare()
    try:
        # Concurrent writers share commits (the write queue's group commit), as tenants' calls do.
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: svc.create_network(admin, n[0], n[1], [n[2]]), networks))
        for start in range(0, len(halves), BATCH):
            svc.create_peerings(admin, [batch.PeeringRequest(ns, net, p, rnet, rns, remote_site=rsite)
                                        for ns, net, p, rsite, rns, rnet in halves[start:start + BATCH]])
    finally:
        svc.store.close()
    return time.monotonic() - t0


def _bound(site) -> int:
    value = site.metric("netpeer_peerings", 'phase="Bound"')
    return int(value or 0)


def _links(site) -> dict[str, dict]:
    return {x["site"]: x for x in site.process.status()["sites"]}


def _wait(what: str, fn, timeout: float, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"region: timed out waiting for {what}")
        time.sleep(poll)


def run_region(sites: int, networks: int, pairs: int, samples: int, ks: list[int], cut: int,
               interval: str = "1s", workers: int = 2, settle_s: float = 30.0) -> dict:
    """One region, from nothing to stopped (every netpeerd by pid, every directory removed)."""
    p = plan(sites, networks, pairs, samples, ks, cut)
    root = Path(tempfile.mkdtemp(prefix="np-rg-", dir="/tmp"))
    region = SimulatedRegion(root, p.names, p.links, sweep_interval=interval, cuttable=True, metrics=True,
                             log_level="WARNING")
    out: dict = {"sites": sites, "networks_per_site": networks, "networks": sites * networks,
                 "links": len(p.links), "pairs_per_link": pairs, "cross_site_pairs": len(p.links) * pairs,
                 "local_pairs": sum(p.expected_bound.values()) // 2 - len(p.links) * pairs,
                 "interval": interval, "load_start": load_average()}
    watchers: list[Watcher] = []
    try:
        log(f"region: {sites} sites x {networks} networks: preparing the stores ({workers} at a time)")
        t0 = time.monotonic()
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(workers) as pool:
            jobs = [pool.apply_async(prepare_site, (str(region[n].config.store), n, region[n].capacities,
                                                    p.sites[n].networks, p.sites[n].halves)) for n in p.names]
            took = [job.get() for job in jobs]
        out["prepare_s"] = round(time.monotonic() - t0, 1)
        out["prepare_site_s_p50"] = round(statistics.median(took), 1)

        log(f"region: starting {sites} netpeerds")
        t0 = time.monotonic()
        region.start(timeout=900)
        out["start_s"] = round(time.monotonic() - t0, 1)
        _wait("every pair Bound after the start",
              lambda: all(_bound(region[n]) >= p.expected_bound[n] for n in p.names), 1800, poll=1.0)
        out["converged_after_start_s"] = round(time.monotonic() - t0, 1)
        log(f"region: every pair Bound {out['converged_after_start_s']} s after the start")
        region.wait_linked(timeout=600)
        region.wait_sweeps(3, timeout=600)
        time.sleep(settle_s)   # what the start left to do (the first round of the slow pass) is done

        for n in p.names:
            watchers.append(Watcher(region[n].config.listen, ["smp", *part_namespaces(p.ks)]))
        watch = dict(zip(p.names, watchers))
        lat = []
        load = load_average()
        for a, b, k in p.samples:
            with region[b].client() as c:
                t0 = time.monotonic()
                c.create_peering("smp", f"{a}-{k}", "p", f"{b}-{k}", "smp", remote_site=a)
            ta = watch[a].wait([("smp", f"{b}-{k}", "p")])
            tb = watch[b].wait([("smp", f"{a}-{k}", "p")])
            if ta is None or tb is None:
                raise RuntimeError(f"sample pair {a}/{b}/{k} did not bind within 60 s")
            lat.append(max(ta, tb) - t0)
        out["bind"] = dict(figures(lat), load=load)

        out["partitions"] = []
        for k in ks:
            out["partitions"].append(partition(region, p, watch, k))
        rss = sorted(rss_kib(pid)["VmRSS"] / 1024 for pid in region.pids().values())
        out["rss_mib"] = {"p50": round(statistics.median(rss), 1), "max": round(rss[-1], 1),
                          "min": round(rss[0], 1), "total": round(sum(rss), 1)}
        out["load_end"] = load_average()
        return out
    finally:
        for w in watchers:
            w.close()
        try:
            region.stop()
        finally:
            region.remove()


def partition(region: SimulatedRegion, p: Plan, watch: dict, k: int) -> dict:
    """Cuts ``p.cut``, consents ``k`` new pairs on each side of each cut link,
    heals, and times the region's agreement."""
    log(f"region: partition of {len(p.cut)} link(s), {k} change(s) on each side")
    load = load_average()
    region.cutter.cut(p.cut)
    _wait("the cut links to be seen down",
          lambda: all(not _links(region[a])[b]["reachable"] and not _links(region[b])[a]["reachable"]
                      for a, b in p.cut), 60)
    before = {(a, b): (_links(region[a])[b], _links(region[b])[a]) for a, b in p.cut}
    keys = {}
    for a, b in p.cut:
        for here, there in ((a, b), (b, a)):
            names = [f"{there}-k{k}-{j}" for j in range(k)]
            with region[here].client(timeout=120) as c:
                for start in range(0, k, BATCH):
                    c.create_peerings([{"namespace": part_ns(k, j), "network": name, "name": "p",
                                        "remote_site": there, "remote_namespace": part_ns(k, j),
                                        "remote_network": f"{here}-k{k}-{j}"}
                                       for j, name in enumerate(names[start:start + BATCH], start)])
            keys.setdefault(here, []).extend((part_ns(k, j), name, "p") for j, name in enumerate(names))
    t_heal = time.monotonic()
    region.cutter.heal(p.cut)
    bound_at = max(watch[site].wait(ks, timeout=600) or float("nan") for site, ks in keys.items())

    def acknowledged():
        for a, b in p.cut:
            la, lb = _links(region[a])[b], _links(region[b])[a]
            if not (la["reachable"] and lb["reachable"] and la["pending_changes"] == 0
                    and lb["pending_changes"] == 0):
                return False
        return True
    _wait("both ends of every cut link to acknowledge every change", acknowledged, 600, poll=0.02)
    agreed = time.monotonic()
    after = {(a, b): (_links(region[a])[b], _links(region[b])[a]) for a, b in p.cut}
    crossed = sum(x[side][f] - before[key][side][f] for key, x in after.items() for side in (0, 1)
                  for f in ("bytes_sent",))
    resyncs = sum(x[side]["resyncs_sent"] - before[key][side]["resyncs_sent"] for key, x in after.items()
                  for side in (0, 1))
    return {"k": k, "links_cut": len(p.cut), "changes_per_side_per_link": k,
            "bound_s": round(bound_at - t_heal, 3), "agreed_s": round(agreed - t_heal, 3),
            "bytes": crossed, "full_copies": resyncs, "load": load}


