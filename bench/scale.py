"""What one deployment size costs: bind latency through the API, time to
traffic (chassis and first ping), ovn-northd's work per bind, logical flows
per peering, netpeerd's memory, and the CLI's per-command latency."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time

from netpeer_dev.netns import Pinger
from bench.deploy import ROOT, ADMIN_TOKEN, Deployment, Topology, load_average, peering_name


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank), in the values' unit."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def summary(values_s: list[float]) -> dict:
    ms = [v * 1000 for v in values_s]
    return {"n": len(ms), "p50_ms": pct(ms, 50), "p90_ms": pct(ms, 90), "p99_ms": pct(ms, 99),
            "max_ms": max(ms) if ms else float("nan"), "mean_ms": statistics.fmean(ms) if ms else float("nan"),
            "samples_ms": [round(x, 3) for x in ms]}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"bench: {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ bind latency

def first_consents(d: Deployment, topo: Topology, pairs: list[tuple[int, int]]) -> None:
    with d.client() as c:
        for i, j in pairs:
            r = c.create_peering(topo.ns(i), topo.name(i), peering_name(j), topo.name(j), topo.ns(j))
            assert r["phase"] == "Pending", r


def bind(c, topo: Topology, i: int, j: int) -> float:
    """The second consent (j's), which binds the pair; returns seconds."""
    t = time.perf_counter()
    r = c.create_peering(topo.ns(j), topo.name(j), peering_name(i), topo.name(i), topo.ns(i))
    elapsed = time.perf_counter() - t
    assert r["phase"] == "Bound", r
    return elapsed


def unbind(c, topo: Topology, i: int, j: int) -> float:
    t = time.perf_counter()
    c.delete_peering(topo.ns(j), topo.name(j), peering_name(i))
    return time.perf_counter() - t


def bind_latency(d: Deployment, topo: Topology, pairs: list[tuple[int, int]], samples: int) -> dict:
    binds, unbinds = [], []
    with d.client() as c:
        for s in range(samples):
            i, j = pairs[s % len(pairs)]
            binds.append(bind(c, topo, i, j))
            unbinds.append(unbind(c, topo, i, j))
    return {"bind": summary(binds), "unbind": summary(unbinds)}


# ------------------------------------------------------------------ time to traffic

def reachable(netns: str, address: str, timeout: float = 0.3) -> bool:
    from netpeer_dev import netns as nsx
    return nsx.ping(netns, address, count=1, timeout=timeout)


def wait_unreachable(netns: str, address: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while reachable(netns, address):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{address} still reachable from {netns} {timeout}s after the unbind")


def time_to_traffic(d: Deployment, topo: Topology, instances: list[tuple[int, int, str, str, str, str]],
                    samples: int, timeout: float = 600) -> dict:
    """``instances``: (i, j, netns_i, ip_i, netns_j, ip_j) with i's first consent given.
    Per sample: a pinger runs in i's namespace; the second consent is sent;
    as soon as it answers, ``ovn-nbctl --wait=hv sync`` starts in a thread.
    Recorded: the API call, the first echo reply, and the return of the
    --wait (hv_cfg caught up: the chassis applied everything up to then).
    On OVN 23.03 the nb_cfg bump of --wait is itself a full ovn-northd
    recompute, queued behind the bind's, so the hv figure is an upper
    bound; the ping is the ground truth. Then unbind, and wait until the
    peer is unreachable again."""
    ping_s, hv_s, api_s, northd = [], [], [], []
    with d.client() as c:
        d.wait_hv(timeout)
        for s in range(samples):
            i, j, ns_i, ip_i, ns_j, ip_j = instances[s % len(instances)]
            assert not reachable(ns_i, ip_j), f"{ip_j} reachable from {ns_i} before the bind"
            d.northd_reset()
            pinger = Pinger(ns_i, ip_j)
            hv_done: list[float] = []
            try:
                time.sleep(0.05)
                t0 = time.time()
                api_s.append(bind(c, topo, i, j))
                waiter = threading.Thread(target=lambda: (d.wait_hv(timeout), hv_done.append(time.time())))
                waiter.start()
                first = pinger.first_reply(timeout)
                northd_stats = d.northd_stats()
                waiter.join(timeout + 10)
            finally:
                pinger.stop()
            if first is None:
                raise RuntimeError(f"no ping reply from {ip_j} within {timeout}s of the bind")
            ping_s.append(first - t0)
            if hv_done:
                hv_s.append(hv_done[0] - t0)
            northd.append(northd_stats)
            unbind(c, topo, i, j)
            wait_unreachable(ns_i, ip_j, timeout)
    return {"api": summary(api_s), "ping": summary(ping_s), "hv": summary(hv_s), "northd": northd}


# ------------------------------------------------------------------ northd cost

def northd_idle(d: Deployment) -> dict:
    """One forced full recompute, timed by northd's own stopwatch."""
    d.northd_reset()
    d.northd("inc-engine/recompute")
    d.wait_sb()
    return d.northd_stats()


def lflows_per_peering(d: Deployment, topo: Topology, pairs: list[tuple[int, int]]) -> dict:
    """Logical flows before and after binding ``pairs`` (both consents through the API)."""
    d.wait_sb()
    before = d.count_lflows()
    first_consents(d, topo, pairs)
    with d.client() as c:
        for i, j in pairs:
            bind(c, topo, i, j)
    d.wait_sb()
    after = d.count_lflows()
    return {"before": before, "after": after, "pairs": len(pairs),
            "per_peering": (after - before) / len(pairs)}


# ------------------------------------------------------------------ CLI

def cli_latency(d: Deployment, topo: Topology, reps: int, free: tuple[int, int]) -> dict:
    """Wall time of whole ``netpeer`` processes, as a user or script sees it."""
    env = dict(os.environ, NETPEER_ENDPOINT=d.endpoint, NETPEER_TOKEN=ADMIN_TOKEN, PYTHONPATH=str(ROOT))
    exe = [sys.executable, "-m", "netpeer.cli.main"]
    i, j = free
    ns, net = topo.ns(i), topo.name(i)
    commands = {
        "token whoami": ["token", "whoami"],
        "network list": ["network", "list", "-n", ns],
        "network show": ["network", "show", net, "-n", ns],
        "peering list": ["peering", "list", net, "-n", ns],
        "peering create (Pending)": ["peering", "create", net, "cli-probe", f"{topo.ns(j)}/{topo.name(j)}",
                                     "-n", ns],
        "peering delete": ["peering", "delete", net, "cli-probe", "-n", ns],
        "network create": ["network", "create", "cli-probe-net", "--subnet", "192.168.77.0/24", "-n", ns],
        "network delete": ["network", "delete", "cli-probe-net", "-n", ns],
    }
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(reps):
        for name, args in commands.items():
            t = time.perf_counter()
            proc = subprocess.run(exe + args, env=env, capture_output=True, text=True, timeout=120)
            times[name].append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise RuntimeError(f"netpeer {' '.join(args)} failed: {proc.stderr.strip()}")
    # Python start-up alone, for scale.
    base = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import netpeer.cli.main"], env=env, check=True)
        base.append(time.perf_counter() - t)
    out = {name: summary(v) for name, v in times.items()}
    out["(python + imports only)"] = summary(base)
    return out


# ------------------------------------------------------------------ one size

def run_size(n: int, *, bind_samples: int, ttt_samples: int, lflow_pairs, cli_reps: int,
             chassis: bool = True, settings: dict | None = None) -> dict:
    topo = Topology(n)
    lflow_pairs = lflow_pairs.get(n, 10 if n < 5000 else 0) if isinstance(lflow_pairs, dict) else lflow_pairs
    result: dict = {"networks": n, "bound_pairs": sum(1 for _ in topo.pairs()), "load_before": load_average()}
    with Deployment(chassis=chassis, settings=settings) as d:
        log(f"{n} networks: starting OVN")
        d.start_ovn()
        log(f"{n} networks: seeding {result['bound_pairs']} Bound pairs")
        # ovn-northd runs meanwhile: one chunk at a time is much gentler on
        # it than one giant first computation (which at 10,000 networks
        # outlasts its own database probes and starts over).
        result["seed"] = d.seed(topo)
        result["seed"]["northd_first_compute_s"] = d.wait_sb(1800)
        log(f"{n} networks: starting netpeerd")
        result["netpeerd_start_s"] = d.start_netpeerd()
        result["memory_after_start_kib"] = {"netpeerd": d.netpeerd_rss(), "ovn": d.daemon_rss()}
        # What netpeerd costs at rest (the periodic repair sweep, every 30 s).
        idle = 35 if n >= 1000 else 5  # the sweep runs every 30 s
        c0, t0 = cpu_seconds(d.pid), time.monotonic()
        time.sleep(idle)
        result["netpeerd_idle_cpu_pct"] = 100 * (cpu_seconds(d.pid) - c0) / (time.monotonic() - t0)

        n_inst = 2 if chassis else 0
        pool = max(2, min(20, n // 3 - n_inst - lflow_pairs - 1))
        taken = topo.cross_pairs(n_inst + pool + lflow_pairs + 1, seed=n)
        inst_pairs, bind_pairs = taken[:n_inst], taken[n_inst:n_inst + pool]
        lflow_set, cli_pair = taken[n_inst + pool:n_inst + pool + lflow_pairs], taken[-1]

        first_consents(d, topo, bind_pairs)
        log(f"{n} networks: {bind_samples} binds")
        result["bind"] = bind_latency(d, topo, bind_pairs, bind_samples)
        if chassis and ttt_samples:
            log(f"{n} networks: instances")
            made = d.add_instances([x for pair in inst_pairs for x in pair])
            instances = [(i, j, *made[2 * k], *made[2 * k + 1]) for k, (i, j) in enumerate(inst_pairs)]
            first_consents(d, topo, inst_pairs)
            log(f"{n} networks: {ttt_samples} time-to-traffic samples")
            result["traffic"] = time_to_traffic(d, topo, instances, ttt_samples)
        if lflow_pairs:
            log(f"{n} networks: logical flows per peering")
            result["lflows"] = lflows_per_peering(d, topo, lflow_set)
        else:
            result["lflows"] = {"after": d.count_lflows()}
        if cli_reps:
            log(f"{n} networks: CLI")
            result["cli"] = cli_latency(d, topo, cli_reps, cli_pair)
        result["memory_end_kib"] = {"netpeerd": d.netpeerd_rss(), "ovn": d.daemon_rss()}
        result["load_after"] = load_average()
    return result
