"""How long netpeerd's NB replica takes to arrive, alone.

``python -m bench.replica --sizes 2000,10000 --repeat 3`` seeds one OVN
deployment per size (no chassis, ovn-northd paused before the seed so
nothing else computes), then connects netpeer's OVN backend in this process
``--repeat`` times, one after the other, and records for each the wall time
and this process's CPU until the replica is whole, and the rows it holds.
This is the part of netpeerd's start-up (and of every reconnection) that
python-ovs spends building rows; ``bench.at_rest`` measures the whole
start-up. The machine's load average is recorded before and after. Writes
JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.deploy import OWNER, Deployment, Topology, load_average
from bench.scale import log
from netpeer.ovn.backend import OvnBackend


def replicate(d: Deployment) -> dict:
    """One connection of the backend, timed until its replica is whole."""
    t0, c0 = time.monotonic(), time.process_time()
    backend = OvnBackend(d.ovn.nb_remote, owner=OWNER, timeout=600)
    try:
        if not backend.wait_connected(900):
            raise RuntimeError(f"the replica of {d.dir} did not arrive in 900 s")
        out = {"wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - c0}
        out["rows"] = sum(len(table.rows) for table in backend._api.idl.tables.values())
    finally:
        backend.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    results = []
    for n in [int(x) for x in args.sizes.split(",")]:
        with Deployment(chassis=False) as d:
            d.start_ovn()
            d.northd("pause")
            log(f"{n} networks: seeding")
            row = {"networks": n, "seed": d.seed(Topology(n)), "load_before": load_average(), "runs": []}
            for k in range(args.repeat):
                row["runs"].append(replicate(d))
                log(f"{n} networks, run {k + 1}: {json.dumps(row['runs'][-1])}")
            row["load_after"] = load_average()
            row["us_cpu_per_row"] = sorted(1e6 * r["cpu_s"] / r["rows"] for r in row["runs"])
            results.append(row)
    json.dump(results, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
