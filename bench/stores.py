"""The stores side by side, in one run: SQLite (one netpeerd), PostgreSQL
with one replica, PostgreSQL with two replicas, each on its own fresh OVN
(standalone NB: the figure is the store's and the serialization's, not
Raft's) and, for PostgreSQL, a fresh database of one private cluster.

Per variant:
- bind latency: the second consent of a pair (``CreatePeering`` that binds),
  one at a time, p50/p99, among networks already carrying Bound pairs;
- bulk apply: 2,000 consents (1,000 pairs among 500 networks) from 32
  clients at once (with two replicas, spread over both);
- writes per group commit (from netpeerd's metrics).

And the price of the cross-replica serialization itself, on one connection:
a write transaction with and without the advisory lock, uncontended, and
with two connections taking turns.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from netpeer.api.client import Client
from netpeer.config import Config
from netpeer.core import validate
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.postgres import PgCluster
from netpeer_dev.process import NetpeerdProcess

from bench.bulk import pair_list
from bench.deploy import ADMIN_TOKEN
from bench.scale import log

VARIANTS = ("sqlite", "postgresql x1", "postgresql x2")


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Variant:
    """One deployment: OVN, a store, one or two netpeerd."""

    def __init__(self, kind: str, pg: PgCluster | None):
        self.kind = kind
        self.dir = Path(tempfile.mkdtemp(prefix="npbs-", dir="/tmp"))
        self.ovn = OvnDaemons(self.dir / "ovn")
        (self.dir / "admin.token").write_text(ADMIN_TOKEN + "\n")
        count = 2 if kind.endswith("x2") else 1
        store = self.dir / "netpeer.db" if kind == "sqlite" else \
            pg.create_database(f"bench_{kind.replace(' ', '_')}_{int(time.time())}")
        self.daemons = []
        for i in range(count):
            d = self.dir / f"r{i + 1}"
            d.mkdir()
            config = Config(listen=f"unix://{d / 'netpeer.sock'}", store=store, ovn_nb=self.ovn.nb_remote,
                            admin_token_file=self.dir / "admin.token",
                            sweep_interval=validate.ttl("sweep_interval", "1h"), ovn_timeout=timedelta(seconds=60),
                            metrics_listen=f"127.0.0.1:{_free_port()}")
            self.daemons.append(NetpeerdProcess(config, d, ADMIN_TOKEN))

    @property
    def endpoints(self) -> list[str]:
        return [d.endpoint for d in self.daemons]

    def start(self) -> None:
        self.ovn.start(timeout=120)
        for d in self.daemons:
            d.start(timeout=120)

    def stop(self) -> None:
        for d in self.daemons:
            d.stop(timeout=20)
        self.ovn.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def client(self, k: int = 0) -> Client:
        """A client listing every replica, starting with replica ``k``."""
        eps = self.endpoints
        k %= len(eps)
        return Client(",".join(eps[k:] + eps[:k]), ADMIN_TOKEN, timeout=300)

    def groups(self) -> tuple[float, float]:
        """(writes, write groups) summed over the replicas' metrics."""
        writes = groups = 0.0
        for d in self.daemons:
            text = urllib.request.urlopen(f"http://{d.config.metrics_listen}/metrics", timeout=10).read().decode()
            for name, value in re.findall(r"^(netpeer_write_group_size_(?:sum|count)) ([0-9.e+]+)$", text, re.M):
                if name.endswith("sum"):
                    writes += float(value)
                else:
                    groups += float(value)
        return writes, groups


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def _measure(v: Variant, networks: int, pairs: int, concurrency: int, binds: int) -> dict:
    out: dict = {}
    with v.client() as admin:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda i: admin.create_network(f"ns{i % 20}", f"n{i}", [f"10.{i // 256}.{i % 256}.0/24"]),
                          range(networks + 2 * binds)))
        out["create_networks_s"] = time.perf_counter() - t0
    plist = pair_list(networks, pairs)
    clients = [v.client(k) for k in range(concurrency)]
    errors: list[str] = []
    turn = threading.local()
    counter = iter(range(10 ** 9))
    lock = threading.Lock()

    def consent(args):
        i, j = args
        if not hasattr(turn, "c"):
            with lock:
                turn.c = clients[next(counter) % len(clients)]
        try:
            turn.c.create_peering(f"ns{i % 20}", f"n{i}", f"to-{j}", f"n{j}", f"ns{j % 20}")
        except Exception as exc:   # reported, not hidden
            errors.append(str(exc))
    writes0, groups0 = v.groups()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(consent, plist + [(j, i) for i, j in plist]))
    out["bulk_s"] = time.perf_counter() - t0
    writes1, groups1 = v.groups()
    for c in clients:
        c.close()
    if errors:
        raise RuntimeError(f"{len(errors)} consents failed, first: {errors[0]}")
    out["bulk_consents"] = 2 * len(plist)
    out["bulk_per_s"] = out["bulk_consents"] / out["bulk_s"]
    out["writes_per_group"] = (writes1 - writes0) / max(1.0, groups1 - groups0)
    # Bind latency: the second consent, one at a time, on fresh pairs (alternating replicas).
    lat = []
    for k in range(binds):
        a, b = networks + 2 * k, networks + 2 * k + 1
        with v.client(k) as c:
            c.create_peering(f"ns{a % 20}", f"n{a}", "p", f"n{b}", f"ns{b % 20}")
            t0 = time.perf_counter()
            phase = c.create_peering(f"ns{b % 20}", f"n{b}", "p", f"n{a}", f"ns{a % 20}")["phase"]
            lat.append(time.perf_counter() - t0)
        if phase != "Bound":
            raise RuntimeError(f"bind {k} answered {phase}")
    out["bind_p50_ms"] = 1000 * statistics.median(lat)
    out["bind_p99_ms"] = 1000 * _pct(lat, 0.99)
    out["binds"] = len(lat)
    return out


def lock_cost(pg: PgCluster, rounds: int = 2000) -> dict:
    """µs per write transaction (one UPDATE) without and with the advisory
    lock, uncontended, and with the lock while two connections alternate."""
    import psycopg
    from netpeer.store.postgres import PostgresStore, WRITE_LOCK
    url = pg.create_database(f"bench_lock_{int(time.time())}")
    PostgresStore(url).close()

    def loop(lock: bool, n: int) -> float:
        with psycopg.connect(url, autocommit=True) as db:
            t0 = time.perf_counter()
            for _ in range(n):
                db.execute("BEGIN")
                if lock:
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                db.execute("UPDATE meta SET value=value WHERE key='generation'")
                db.execute("COMMIT")
            return time.perf_counter() - t0
    out = {"plain_us": 1e6 * loop(False, rounds) / rounds, "locked_us": 1e6 * loop(True, rounds) / rounds}
    times: list[float] = []
    threads = [threading.Thread(target=lambda: times.append(loop(True, rounds // 2))) for _ in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["locked_two_connections_us"] = 1e6 * (time.perf_counter() - t0) / rounds
    return out


def run(networks: int = 500, pairs: int = 1000, concurrency: int = 32, binds: int = 200) -> dict:
    owner = Path(tempfile.mkdtemp(prefix="npbpg-", dir="/tmp"))
    pg = PgCluster(owner)
    out: dict = {"networks": networks, "pairs": pairs, "concurrency": concurrency, "variants": {}}
    try:
        pg.start()
        out["lock_cost"] = lock_cost(pg)
        for kind in VARIANTS:
            log(f"stores: {kind}")
            v = Variant(kind, pg)
            try:
                v.start()
                out["variants"][kind] = _measure(v, networks, pairs, concurrency, binds)
            finally:
                v.stop()
    finally:
        pg.remove()
        shutil.rmtree(owner, ignore_errors=True)
    return out


def table(data: dict) -> list[str]:
    """Markdown lines for results.md."""
    rows = ["| | " + " | ".join(VARIANTS) + " |", "|---|" + "---|" * len(VARIANTS)]
    v = data["variants"]

    def line(label, key, fmt):
        rows.append(f"| {label} | " + " | ".join(fmt.format(v[k][key]) if k in v else "–" for k in VARIANTS) + " |")
    line("bind p50 (ms)", "bind_p50_ms", "{:.1f}")
    line("bind p99 (ms)", "bind_p99_ms", "{:.1f}")
    line(f"bulk: {2 * data['pairs']} consents, {data['concurrency']} clients (s)", "bulk_s", "{:.1f}")
    line("bulk throughput (consents/s)", "bulk_per_s", "{:.0f}")
    line("writes per group commit (bulk)", "writes_per_group", "{:.2f}")
    c = data.get("lock_cost")
    if c:
        rows.append("")
        rows.append(f"Write transaction on one connection: {c['plain_us']:.0f} µs without the advisory lock, "
                    f"{c['locked_us']:.0f} µs with it; two connections taking turns: "
                    f"{c['locked_two_connections_us']:.0f} µs per transaction.")
    return rows


__all__ = ["run", "table", "dataclasses"]
