"""netpeerd's CPU at rest in consecutive windows, out of process.

``python -m bench.at_rest_windows 1000 [WINDOWS]`` seeds a deployment of
that many networks (no chassis), starts netpeerd from this tree with a 3 s
sweep interval, and after its first sweep prints its CPU (% of a core) in
WINDOWS consecutive 15 s windows (each sweep compares what changed and a
slice of the slow full pass, ``full_sweep_interval``).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta

from bench.deploy import ROOT, Deployment, Topology, load_average
from bench.scale import cpu_seconds

WINDOW_S = 15.0


def main(n: int, windows: int) -> None:
    with Deployment(chassis=False, settings={"sweep_interval": timedelta(seconds=3)}) as d:
        d.start_ovn()
        d.seed(Topology(n))
        d.wait_sb(1800)
        os.chdir(d.dir)   # netpeerd runs ``python -m``: its working directory comes first on its path
        pid = d.netpeerd.spawn(extra_env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "dev")])})
        d.netpeerd.wait_ready(900, sweep=True)
        for w in range(windows):
            c0 = cpu_seconds(pid)
            time.sleep(WINDOW_S)
            print(f"{n} networks, window {w}: {100 * (cpu_seconds(pid) - c0) / WINDOW_S:.1f}% of a core "
                  f"(load {load_average()[0]})", flush=True)
        d.stop_netpeerd()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000, int(sys.argv[2]) if len(sys.argv) > 2 else 4)
