"""Where netpeerd's CPU goes at rest, per thread.

``python -m bench.at_rest_threads 5000`` seeds a deployment of that many
networks (no chassis), runs netpeerd's ``Daemon`` in this process with a
3 s sweep interval, waits for two sweeps, and prints each thread's CPU
(from ``/proc/self/task``) over 20 s at rest.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from datetime import timedelta

from bench.deploy import Deployment, Topology
from netpeer.daemon import Daemon


def per_thread() -> dict[str, float]:
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for t in threading.enumerate():
        try:
            fields = open(f"/proc/self/task/{t.native_id}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[t.name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main(n: int, seconds: float = 20.0) -> None:
    with Deployment(chassis=False) as d:
        d.start_ovn()
        d.seed(Topology(n))
        d.wait_sb(900)
        daemon = Daemon(dataclasses.replace(d.netpeerd.config, sweep_interval=timedelta(seconds=3))).start()
        try:
            while daemon.service.reconciler.status.sweeps < 2:
                time.sleep(0.1)
            a, t0 = per_thread(), time.process_time()
            time.sleep(seconds)
            b = per_thread()
            print(f"{n} networks: {time.process_time() - t0:.2f} s of CPU in {seconds:g} s at rest")
            for name in sorted(b, key=lambda k: a.get(k, 0) - b[k])[:8]:
                print(f"  {name:30s} {b[name] - a.get(name, 0):.2f} s")
        finally:
            daemon.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
