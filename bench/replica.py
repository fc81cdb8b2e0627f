"""How long netpeerd's NB replica takes to arrive, alone.

``python -m bench.replica --sizes 2000,10000 --repeat 3`` seeds one OVN
deployment per size (no chassis, ovn-northd paused before the seed so
nothing else computes), then connects netpeer's OVN backend in this process
``--repeat`` times, one after the other, and records for each the wall time
and this process's CPU until the replica is whole, and the rows it holds.
This is the part of netpeerd's start-up (and of every reconnection) that
python-ovs spends building rows; ``bench.at_rest`` measures the whole
start-up. Each run also records what the replica holds once built: the
process's resident size over its size before the connection, the Python
objects it added, and Python's allocator arenas (in use, live bytes, free
bytes it cannot give back). The machine's load average is recorded before
and after. Writes JSON to stdout.

``--collectors netpeerd,python`` alternates, in each repeat, a run with the
garbage collector's thresholds netpeerd sets (``netpeer.daemon.GC_THRESHOLDS``,
the default) and one with Python's own.

Each run then compares every network's desired rows, read from the store,
with the replica, as netpeerd's first sweep does (``first_comparison_s``).

``--clients netpeer,python-ovs`` alternates netpeer's backend (its own
connection, rows as plain values: ``netpeer.ovn.connection``) with
python-ovs's stock IDL as ovsdbapp uses it, replicating the same tables and
columns (no comparison on that side: it is the replica alone).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import tempfile
import time

from bench.deploy import OWNER, Deployment, Topology, load_average, rss_kib
from bench.scale import log
from netpeer.daemon import GC_THRESHOLDS
from netpeer.ovn.backend import COLUMNS, NB_SCHEMA, OvnBackend
from netpeer.ovn.connection import release_free_heap
from netpeer.service.writes import desired_states
from netpeer.store.base import iter_all_networks
from netpeer.store.sqlite import SqliteStore

# The collector's thresholds each run may use: netpeerd's, or Python's defaults.
COLLECTORS = {"netpeerd": GC_THRESHOLDS, "python": (700, 10, 10)}

# Lines of ``sys._debugmallocstats()`` kept, by the key they are reported under.
_ARENA_LINES = {
    "arenas_mib": r"^(\d+) arenas \* \d+ bytes/arena",
    "live_bytes": r"^# bytes in allocated blocks\s*=\s*([\d,]+)",
    "free_blocks_bytes": r"^# bytes in available blocks\s*=\s*([\d,]+)",
    "empty_pools": r"^(\d+) unused pools \*",
}


def arena_stats() -> dict[str, int]:
    """Python's small-object allocator, as ``sys._debugmallocstats()``
    prints it (on file descriptor 2, so it is caught there)."""
    with tempfile.TemporaryFile("w+") as f:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(f.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read()
    out = {}
    for key, pattern in _ARENA_LINES.items():
        m = re.search(pattern, text, re.M)
        out[key] = int(m.group(1).replace(",", "")) if m else None
    return out


def _settled_rss_kib() -> int:
    gc.collect()
    release_free_heap()
    return rss_kib(os.getpid())["VmRSS"]


def replicate(d: Deployment, collector: str = "netpeerd") -> dict:
    """One connection of the backend, timed until its replica is whole,
    with what the replica holds while the backend is still open. The
    garbage collector runs with ``collector``'s thresholds meanwhile."""
    rss0, blocks0 = _settled_rss_kib(), sys.getallocatedblocks()
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTORS[collector])
    t0, c0 = time.monotonic(), time.process_time()
    backend = OvnBackend(d.ovn.nb_remote, owner=OWNER, timeout=600)
    try:
        if not backend.wait_connected(900):
            raise RuntimeError(f"the replica of {d.dir} did not arrive in 900 s")
        out = {"collector": collector, "wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - c0}
        out["rows"] = backend.read(lambda replica: sum(len(rows) for rows in replica.tables.values()))
        out["rss_added_mib"] = (_settled_rss_kib() - rss0) / 1024
        out["objects_added"] = sys.getallocatedblocks() - blocks0
        out["arenas"] = arena_stats()
        _first_comparison(out, lambda: backend.drifted(_desired(d)))
    finally:
        gc.set_threshold(*before)
        backend.close()
    return out


def _desired(d: Deployment) -> dict:
    """Every network's desired state, read from the store as a full comparison reads it."""
    store = SqliteStore(d.store_path)
    try:
        with store.read() as tx:
            return desired_states(tx, [n.uid for n in iter_all_networks(tx)])
    finally:
        store.close()


def _first_comparison(out: dict, compare) -> None:
    """Times a full comparison of every network with the replica (the seed is what netpeer
    would write: anything found is an error)."""
    t0, c0 = time.monotonic(), time.process_time()
    found = compare()
    out["first_comparison_s"], out["first_comparison_cpu_s"] = time.monotonic() - t0, time.process_time() - c0
    if found:
        raise RuntimeError(f"the seed is not what netpeer would write: {len(found)} difference(s)")


def replicate_python_ovs(d: Deployment, collector: str = "netpeerd") -> dict:
    """The same rows as ``replicate``, through python-ovs's stock IDL (the replica alone)."""
    import ovs.poller
    from ovsdbapp.backend.ovs_idl import connection, idlutils
    rss0, blocks0 = _settled_rss_kib(), sys.getallocatedblocks()
    before = gc.get_threshold()
    gc.set_threshold(*COLLECTORS[collector])
    t0, c0 = time.monotonic(), time.process_time()
    helper = idlutils.get_schema_helper(d.ovn.nb_remote, NB_SCHEMA)
    for table, columns in COLUMNS.items():
        helper.register_columns(table, columns)
    idl = connection.OvsdbIdl(d.ovn.nb_remote, helper)
    try:
        while not idl.has_ever_connected():
            idl.run()
            poller = ovs.poller.Poller()
            idl.wait(poller)
            poller.timer_wait(100)   # python-ovs may have work that no socket signals (a reconnection's backoff)
            poller.block()
        out = {"collector": collector, "wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - c0}
        out["rows"] = sum(len(table.rows) for table in idl.tables.values())
        out["rss_added_mib"] = (_settled_rss_kib() - rss0) / 1024
        out["objects_added"] = sys.getallocatedblocks() - blocks0
    finally:
        gc.set_threshold(*before)
        idl.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--collectors", default="netpeerd",
                    help="comma-separated, alternated in each repeat: netpeerd (its thresholds), python (defaults)")
    ap.add_argument("--clients", default="netpeer",
                    help="comma-separated, alternated in each repeat: netpeer (its backend), python-ovs (stock IDL)")
    args = ap.parse_args(argv)
    collectors = args.collectors.split(",")
    for c in collectors:
        if c not in COLLECTORS:
            ap.error(f"--collectors: unknown collector {c!r} (known: {', '.join(COLLECTORS)})")
    clients = {"netpeer": replicate, "python-ovs": replicate_python_ovs}
    chosen = args.clients.split(",")
    for c in chosen:
        if c not in clients:
            ap.error(f"--clients: unknown client {c!r} (known: {', '.join(clients)})")
    results = []
    for n in [int(x) for x in args.sizes.split(",")]:
        with Deployment(chassis=False) as d:
            d.start_ovn()
            d.northd("pause")
            log(f"{n} networks: seeding")
            row = {"networks": n, "seed": d.seed(Topology(n)), "load_before": load_average(), "runs": []}
            for k in range(args.repeat):
                for client in chosen:
                    for c in collectors:
                        row["runs"].append({"client": client, **clients[client](d, c)})
                        log(f"{n} networks, run {k + 1}: {json.dumps(row['runs'][-1])}")
            row["load_after"] = load_average()
            row["us_cpu_per_row"] = {f"{client}/{c}": sorted(1e6 * r["cpu_s"] / r["rows"] for r in row["runs"]
                                                              if r["collector"] == c and r["client"] == client)
                                     for client in chosen for c in collectors}
            results.append(row)
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
