"""Cross-site pairs on one link, before and after sites exchanged changes
(part (a) of the region section, ``bench/region.py``):

- **In-process, before and after** (``bench/region_probe.py``, run for the
  commit before the link exchanged changes and for this tree, each in its
  own process with its own ``PYTHONPATH``): one more bind at 100, 1,000 and
  10,000 Bound pairs, the bytes it puts on the link, and the CPU of one
  exchange with nothing changed (both sites, encoding and decoding included:
  ``time.process_time`` around the exchange).
- **Through real netpeerds, after** (``netpeer serve --dataplane memory``,
  two processes per size, SQLite stores, gRPC over unix sockets): the
  stores are prepared in-process with the same builder (``region_probe.Link``),
  then the binds go through the API (second consent to Bound on both
  sides, as the sites' watch streams report it), interleaved across the
  sizes; the bytes the link carried while sampling, divided by the binds;
  and netpeerd's own CPU at rest (``/proc/PID/stat`` of both processes)
  over a window, divided by the exchanges in it: an upper bound, since the
  sweeps run at the same interval.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.deploy import ROOT, load_average, rss_kib
from bench.region_probe import _figures as figures
from bench.scale import cpu_seconds, log
from netpeer.api.client import Client
from netpeer_dev.simulated import ADMIN_TOKEN, SimulatedRegion

#: The last commit whose sites exchanged whole sides (SiteService.Exchange):
#: "before". Pinned, so the comparison means the same after this branch is merged.
BEFORE = "458cd908d8b1abf4c1ec903d5aa1ff81ba7d47e1"


# ---------------------------------------------------------------- in-process, before and after
def before_tree(into: Path) -> Path:
    """The ``netpeer`` package of ``BEFORE``, extracted from git (nothing of it is copied into this tree)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "netpeer"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def probe(tree: Path, sizes: list[int], samples: dict[int, int], budget: float, idle: int,
          idle_budget: float) -> dict:
    """``region_probe.py`` on the ``netpeer`` of ``tree``, in a process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    env["PYTHONPATH"] = str(tree)
    load = load_average()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "region_probe.py"),
                           "--sizes", ",".join(map(str, sizes)),
                           "--samples", ",".join(f"{n}={samples[n]}" for n in sizes),
                           "--budget", str(budget), "--idle", str(idle), "--idle-budget", str(idle_budget)],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(f"region_probe on {tree} failed: {proc.stderr[-3000:]}")
    out = json.loads(proc.stdout)
    out.update(load_start=load, load_end=load_average(), took_s=round(time.monotonic() - t0, 1))
    return out


def in_process(sizes: list[int], samples: dict[int, int], before_samples: dict[int, int], budget: float,
               idle: int, idle_budget: float) -> dict:
    """Before (``BEFORE``) and after (this tree), one after the other."""
    tmp = Path(tempfile.mkdtemp(prefix="np-before-"))
    try:
        log(f"region: in-process, before ({BEFORE[:7]}): {sizes} pairs")
        before = probe(before_tree(tmp), sizes, before_samples, budget, idle, idle_budget)
        log(f"region: in-process, after: {sizes} pairs")
        after = probe(ROOT, sizes, samples, budget, idle, idle_budget)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"before_commit": BEFORE, "before": before, "after": after}


# ---------------------------------------------------------------- through netpeerds (after)
class Watcher:
    """When each peering of some namespaces of one site turned Bound, as that
    site's watch streams report it (``time.monotonic()`` of arrival)."""

    def __init__(self, endpoint: str, namespaces: list[str], token: str = ADMIN_TOKEN):
        self.bound: dict[tuple[str, str, str], float] = {}
        self.events = 0
        self._cond = threading.Condition()
        self._clients = [Client(endpoint, token, timeout=30) for _ in namespaces]
        self._started = threading.Semaphore(0)
        self._threads = [threading.Thread(target=self._run, args=(c, ns), daemon=True, name=f"watch-{ns}")
                         for c, ns in zip(self._clients, namespaces)]
        for t in self._threads:
            t.start()
        for _ in self._threads:   # each stream's bookmark: it watches from here on
            if not self._started.acquire(timeout=60):
                raise RuntimeError(f"a watch on {endpoint} did not start")

    def _run(self, client: Client, namespace: str) -> None:
        try:
            for e in client.watch(namespace, resume=False):
                if e["type"] == "Bookmark":
                    self._started.release()
                    continue
                if e.get("kind") == "peering" and e.get("phase") == "Bound":
                    key = (e["namespace"], e["network"], e["name"])
                    with self._cond:
                        self.events += 1
                        self.bound.setdefault(key, time.monotonic())
                        self._cond.notify_all()
        except Exception:   # closed
            pass

    def wait(self, keys, timeout: float = 60.0) -> float | None:
        """The time the last of ``keys`` turned Bound, or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(k in self.bound for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return max(self.bound[k] for k in keys)

    def count(self) -> int:
        with self._cond:
            return len(self.bound)

    def close(self) -> None:
        for c in self._clients:
            c.close()
        for t in self._threads:
            t.join(5)


def _link(status: dict, site: str) -> dict:
    return next(x for x in status["sites"] if x["site"] == site)


def through_netpeerds(sizes: list[int], samples: int, interval: str = "1s", idle_window: float = 20.0) -> dict:
    """Two netpeerds per size, all sizes at once; binds interleaved across the sizes."""
    from bench.region_probe import Link, ns
    root = Path(tempfile.mkdtemp(prefix="np-rp-", dir="/tmp"))
    regions: dict[int, SimulatedRegion] = {}
    watchers: list[Watcher] = []
    clients: list[Client] = []
    out: dict = {"interval": interval, "load_start": load_average(), "sizes": {}}
    try:
        for n in sizes:
            region = regions[n] = SimulatedRegion(root / str(n), ["east", "west"], [("east", "west")],
                                                  sweep_interval=interval, prefixlen=16)
            t0 = time.monotonic()
            link = Link(root / str(n), n, samples,
                        stores={site: region[site].config.store for site in ("east", "west")})
            link.close()
            out["sizes"][str(n)] = {"prepared_s": round(time.monotonic() - t0, 1)}
            log(f"region: {n} pairs prepared for two netpeerds ({out['sizes'][str(n)]['prepared_s']} s)")
        for n, region in regions.items():
            t0 = time.monotonic()
            region.start()
            out["sizes"][str(n)]["start_s"] = round(time.monotonic() - t0, 1)
        for region in regions.values():
            region.wait_linked()   # no sample while a link still backs off from the start
            region.wait_sweeps(3)  # nor while the first sweeps compare every network
        ctx = {}
        for n, region in regions.items():
            east = Watcher(region["east"].config.listen, sorted({ns("a", n + k) for k in range(samples)}))
            west = Watcher(region["west"].config.listen, sorted({ns("b", n + k) for k in range(samples)}))
            watchers += [east, west]
            client = region["west"].client()
            clients.append(client)
            ctx[n] = (east, west, client, [])
        before = {n: _link(regions[n]["west"].process.status(), "east") for n in sizes}
        log(f"region: {samples} binds through netpeerd at each of {sizes} pairs, interleaved")
        t_sampling = time.monotonic()
        for k in range(samples):
            for n in sizes:
                east, west, client, lat = ctx[n]
                i = n + k
                t0 = time.monotonic()
                client.create_peering(ns("b", i), f"n{i}", "p", f"n{i}", ns("a", i), remote_site="east")
                te = east.wait([(ns("a", i), f"n{i}", "p")])
                tw = west.wait([(ns("b", i), f"n{i}", "p")])
                if te is None or tw is None:
                    raise RuntimeError(f"pair n{i} at {n} pairs did not bind within 60 s")
                lat.append(max(te, tw) - t0)
        sampling_s = time.monotonic() - t_sampling
        time.sleep(2 * float(interval.rstrip("s")))   # the last acknowledgements cross
        for n in sizes:
            after = _link(regions[n]["west"].process.status(), "east")
            crossed = (after["bytes_sent"] + after["bytes_received"]
                       - before[n]["bytes_sent"] - before[n]["bytes_received"])
            exchanges = after["exchanges"] - before[n]["exchanges"]
            r = out["sizes"][str(n)]
            r["bind"] = figures(ctx[n][3])
            r["bytes_per_bind"] = round(crossed / samples)
            r["exchanges_while_sampling"] = exchanges
            r["resyncs"] = after["resyncs_sent"] + after["resyncs_received"]
        out["sampling_s"] = round(sampling_s, 1)
        log(f"region: netpeerd CPU at rest per exchange, {idle_window:.0f} s per size")
        for n in sizes:
            r = out["sizes"][str(n)]
            pids = regions[n].pids()
            s0 = _link(regions[n]["west"].process.status(), "east")["exchanges"]
            c0 = sum(cpu_seconds(p) for p in pids.values())
            time.sleep(idle_window)
            c1 = sum(cpu_seconds(p) for p in pids.values())
            s1 = _link(regions[n]["west"].process.status(), "east")["exchanges"]
            r["idle"] = {"window_s": idle_window, "exchanges": s1 - s0, "cpu_s": round(c1 - c0, 3),
                         "cpu_ms_per_exchange": round((c1 - c0) * 1000 / max(1, s1 - s0), 3)}
            r["rss_mib"] = {site: round(rss_kib(pid)["VmRSS"] / 1024, 1) for site, pid in pids.items()}
        out["load_end"] = load_average()
        return out
    finally:
        for w in watchers:
            w.close()
        for c in clients:
            c.close()
        for region in regions.values():
            region.stop()
        shutil.rmtree(root, ignore_errors=True)
