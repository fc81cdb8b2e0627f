"""netpeerd at rest, two versions side by side on one deployment.

``python -m bench.at_rest --before DIR [--sizes 1000,10000]`` seeds one
OVN deployment per size (no chassis), then runs netpeerd from ``DIR`` (a
checkout of the code to compare against, e.g. ``git archive`` of a commit)
and from this tree, one after the other on the same store and NB, and
records for each: time until it answers a read and until its first sweep
completed, its resident set next to OVN's daemons, and the CPU its sweeps
take at rest (a window of ``--sweeps`` short intervals, so it holds the
periodic full pass; the % of a core is derived for the 30 s default). The
machine's load average is recorded before and after each. Writes JSON to
stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta

from bench.deploy import ROOT, Deployment, Topology, load_average, rss_kib
from bench.scale import cpu_seconds, log

DEFAULT_INTERVAL_S = 30.0


def _status(d: Deployment) -> dict:
    with d.client(timeout=30) as c:
        return c.status()


def run_version(d: Deployment, label: str, tree: str, sweeps: int, interval: float) -> dict:
    out: dict = {"load_before": load_average()}
    path = os.pathsep.join([tree, os.path.join(tree, "dev")])
    os.chdir(d.dir)   # netpeerd runs ``python -m``: its working directory comes first on its path
    t0 = time.monotonic()
    pid = d.netpeerd.spawn(extra_env={"PYTHONPATH": path})
    d.netpeerd.wait_ready(900, sweep=False)
    out["answers_reads_s"] = time.monotonic() - t0
    # Asked four times a second, not fifty: each status call is a new
    # connection, and once reads are answered, fifty a second take netpeerd's
    # CPU from the start-up this measures.
    first = d.netpeerd.wait_ready(900, sweep=True, poll=0.25)["last_sweep"]
    out["first_sweep_done_s"] = time.monotonic() - t0
    if first["repaired_rows"] or first["errors"]:
        raise RuntimeError(f"{label}: the seed is not what netpeerd would write: first sweep {first}")
    out["rss_after_start_kib"] = rss_kib(pid)
    out["ovn_rss_kib"] = d.daemon_rss()
    # No polling in the window: a status call costs netpeerd more than an
    # idle sweep. The window holds at least ``sweeps`` intervals.
    s0 = _status(d)["sweeps"]
    c0, w0 = cpu_seconds(pid), time.monotonic()
    time.sleep(sweeps * interval + interval / 2)
    cpu, wall = cpu_seconds(pid) - c0, time.monotonic() - w0
    done = _status(d)["sweeps"] - s0
    out["sweeps"] = done
    out["cpu_per_sweep_s"] = cpu / max(done, 1)
    out["core_pct_at_30s_interval"] = 100 * cpu / max(done, 1) / DEFAULT_INTERVAL_S
    out["core_pct_measured"] = 100 * cpu / wall
    out["window"] = {"cpu_s": cpu, "wall_s": wall, "interval_s": interval}
    out["rss_end_kib"] = rss_kib(pid)
    out["load_after"] = load_average()
    d.stop_netpeerd()
    log(f"{label}: {json.dumps(out)}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="a checkout of the code to compare against")
    ap.add_argument("--sizes", default="1000")
    ap.add_argument("--sweeps", type=int, default=10, help="sweeps per window (default: one full pass in)")
    ap.add_argument("--interval", type=float, default=3.0, help="sweep interval while measuring (s)")
    args = ap.parse_args(argv)
    results = []
    for n in [int(x) for x in args.sizes.split(",")]:
        topo = Topology(n)
        settings = {"sweep_interval": timedelta(seconds=args.interval)}
        with Deployment(chassis=False, settings=settings) as d:
            log(f"{n} networks: starting OVN")
            d.start_ovn()
            log(f"{n} networks: seeding")
            seed = d.seed(topo)
            seed["northd_first_compute_s"] = d.wait_sb(1800)
            row = {"networks": n, "bound_pairs": sum(1 for _ in topo.pairs()), "seed": seed}
            for label, tree in (("before", args.before), ("after", str(ROOT))):
                log(f"{n} networks: netpeerd {label}")
                row[label] = run_version(d, label, tree, args.sweeps, args.interval)
            results.append(row)
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
