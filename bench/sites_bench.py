"""The cross-site section of ``make bench``: two sites on one machine
(``netpeer_dev.multisite``: per site NB, SB, northd, ovn-ic, chassis and a
netpeerd; WireGuard over a simulated WAN), measured, never judged:

- bring-up of the two-site stack from nothing (``dev up --sites`` without
  the CLI process), and its teardown;
- time to traffic: the second consent -> the first answered ping, across
  the sites (east A <-> west B: the consent in west, the ping from west)
  and, in the same run, within a site (east A <-> east C), p50/p99;
- with HA gateways (a second stack): the ping outage when the active
  gateway's ovs-vswitchd is killed with SIGKILL while a pinger runs,
  p50/max over the kills alternating sites, and the fail-back outage.

The load average is recorded with every figure (the machine is shared).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.deploy import load_average
from netpeer.api.client import Client
from netpeer_dev import netns as nsx
from netpeer_dev.multisite import MultiSiteStack

SWEEP = "1s"


def log(msg: str) -> None:
    import sys
    print(f"bench: {time.strftime('%H:%M:%S')} sites: {msg}", file=sys.stderr, flush=True)


def _figures(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    v = sorted(xs)
    return {"n": len(v), "p50_ms": round(statistics.median(v) * 1000, 1),
            "p99_ms": round(v[min(len(v) - 1, int(0.99 * len(v)))] * 1000, 1), "max_ms": round(v[-1] * 1000, 1),
            "samples_ms": [round(x * 1000, 1) for x in v]}


class _Tenants:
    def __init__(self, multi: MultiSiteStack) -> None:
        self.multi = multi
        self.clients = {s: Client(st.endpoint, st.admin_token(), timeout=30) for s, st in multi.stacks.items()}

    def network(self, site, ns, name, *subnets):
        return self.clients[site].create_network(ns, name, list(subnets))

    def consent(self, site, ns, net, name, rsite, rns, rnet):
        return self.clients[site].create_peering(ns, net, name, remote_network=rnet, remote_namespace=rns,
                                                 remote_site="" if rsite == site else rsite)

    def withdraw(self, site, ns, net, name):
        self.clients[site].delete_peering(ns, net, name)

    def phase(self, site, ns, net, name):
        return self.clients[site].get_peering(ns, net, name)["phase"]

    def vm(self, site, network, name):
        with self.multi.fleet(site) as fleet:
            return fleet.add(network, name)

    def close(self):
        for c in self.clients.values():
            c.close()


def _first_ping(netns: str, address: str, t0: float, timeout: float = 20.0) -> float | None:
    while time.monotonic() - t0 < timeout:
        if nsx.ping(netns, address, count=1, timeout=0.05):
            return time.monotonic() - t0
    return None


def _until_silent(netns: str, address: str, timeout: float = 15.0) -> None:
    t0 = time.monotonic()
    while nsx.ping(netns, address, count=1, timeout=0.2) and time.monotonic() - t0 < timeout:
        time.sleep(0.05)


def _start(ha: bool) -> tuple[MultiSiteStack, float]:
    multi = MultiSiteStack(Path(tempfile.mkdtemp(prefix="npx-", dir="/tmp")), ["east", "west"], ha=ha)
    t0 = time.monotonic()
    multi.up(SWEEP, lambda m: None)
    return multi, time.monotonic() - t0


def _stop(multi: MultiSiteStack) -> float:
    t0 = time.monotonic()
    try:
        multi.down(purge=False, say=lambda m: None)
    finally:
        shutil.rmtree(multi.dir, ignore_errors=True)
    return time.monotonic() - t0


def time_to_traffic(multi: MultiSiteStack, samples: int) -> dict:
    t = _Tenants(multi)
    try:
        a = t.network("east", "b-a", "net", "10.1.0.0/24")
        b = t.network("west", "b-b", "net", "10.2.0.0/24")
        c = t.network("east", "b-c", "net", "10.3.0.0/24")
        va, vb, vc = t.vm("east", a, "vm-a"), t.vm("west", b, "vm-b"), t.vm("east", c, "vm-c")
        t.consent("east", "b-a", "net", "to-b", "west", "b-b", "net")
        cross, within, missed = [], [], 0
        for _ in range(samples):
            t0 = time.monotonic()
            t.consent("west", "b-b", "net", "to-a", "east", "b-a", "net")
            took = _first_ping(vb.netns, va.address(4), t0)
            cross.append(took) if took is not None else None
            missed += took is None
            t.withdraw("west", "b-b", "net", "to-a")
            _until_silent(vb.netns, va.address(4))

            t.consent("east", "b-a", "net", "to-c", "east", "b-c", "net")
            t0 = time.monotonic()
            t.consent("east", "b-c", "net", "to-a", "east", "b-a", "net")
            took = _first_ping(vc.netns, va.address(4), t0)
            within.append(took) if took is not None else None
            missed += took is None
            t.withdraw("east", "b-c", "net", "to-a")
            t.withdraw("east", "b-a", "net", "to-c")
            _until_silent(vc.netns, va.address(4))
        return {"cross_site": _figures(cross), "within_site": _figures(within), "missed": missed,
                "load": load_average()}
    finally:
        t.close()


def failover(multi: MultiSiteStack, kills: int) -> dict:
    t = _Tenants(multi)
    try:
        a = t.network("east", "f-a", "net", "10.1.0.0/24")
        b = t.network("west", "f-b", "net", "10.2.0.0/24")
        va, vb = t.vm("east", a, "vm-a"), t.vm("west", b, "vm-b")
        t.consent("east", "f-a", "net", "to-b", "west", "f-b", "net")
        t0 = time.monotonic()
        t.consent("west", "f-b", "net", "to-a", "east", "f-a", "net")
        first = _first_ping(va.netns, vb.address(4), t0, timeout=60)
        outages, failbacks, failed = [], [], 0
        for i in range(kills):
            site = ("east", "west")[i % 2]
            gw1 = multi.sites.chassis[site]["gw1"]
            pid = gw1.pid("ovs-vswitchd")
            if pid is None:
                failed += 1
                continue
            p = _Pinger(va.netns, vb.address(4))
            time.sleep(0.5)
            t_kill = time.time()
            os.kill(pid, signal.SIGKILL)
            time.sleep(3.0)
            outages.append(_gap(p.stop(), t_kill))
            p = _Pinger(va.netns, vb.address(4))
            time.sleep(0.5)
            t_start = time.time()
            gw1.start(timeout=60)
            time.sleep(3.0)
            failbacks.append(_gap(p.stop(), t_start))
            log(f"kill {i} ({site}): outage {outages[-1]:.3f} s, fail-back {failbacks[-1]:.3f} s")
        return {"first_ping_after_consent_s": None if first is None else round(first, 3),
                "outage": _figures(outages), "failback": _figures(failbacks), "kills": kills,
                "not_killed": failed, "load": load_average()}
    finally:
        t.close()


class _Pinger:
    def __init__(self, netns: str, dst: str) -> None:
        self.proc = subprocess.Popen(["ip", "netns", "exec", netns, "ping", "-n", "-D", "-i", "0.01", "-W", "1", dst],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def stop(self) -> list[float]:
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return [float(m.group(1)) for m in re.finditer(r"^\[(\d+\.\d+)\] \d+ bytes from", out, re.M)]


def _gap(times: list[float], after: float) -> float:
    """Longest time between two consecutive replies that ends after ``after``
    (no reply after it at all: the whole rest of the run)."""
    times = sorted(times)
    gaps = [b - a for a, b in zip(times, times[1:]) if b >= after]
    return max(gaps) if gaps else float("nan")


def run(ttt_samples: int = 20, kills: int = 10, bringups: int = 2) -> dict:
    """The whole section (each stack stopped by pid at the end, even on failure)."""
    out: dict = {"bring_up_s": [], "teardown_s": [], "load_start": load_average()}
    for i in range(bringups):
        log(f"bring-up {i + 1}/{bringups}")
        multi, took = _start(ha=False)
        out["bring_up_s"].append(round(took, 2))
        try:
            if i == 0:
                log(f"time to traffic, {ttt_samples} samples across and within sites")
                out["time_to_traffic"] = time_to_traffic(multi, ttt_samples)
        finally:
            out["teardown_s"].append(round(_stop(multi), 2))
    log("HA gateways")
    multi, took = _start(ha=True)
    out["bring_up_ha_s"] = round(took, 2)
    try:
        if kills:
            out["failover"] = failover(multi, kills)
    finally:
        out["teardown_ha_s"] = round(_stop(multi), 2)
    out["load_end"] = load_average()
    return out


def markdown(r: dict) -> list[str]:
    lines = ["## Cross-site (two sites on one machine, OVN-IC over WireGuard)", "",
             f"Bring-up of the two-site stack with a netpeerd per site: {', '.join(f'{x:.1f}' for x in r['bring_up_s'])} s"
             f" (HA gateways: {r.get('bring_up_ha_s', float('nan')):.1f} s); teardown "
             f"{', '.join(f'{x:.1f}' for x in r['teardown_s'])} s. Load at start {r['load_start'][0]:.1f}, "
             f"at end {r['load_end'][0]:.1f}.", ""]
    ttt = r.get("time_to_traffic")
    if ttt:
        lines += ["| second consent -> first ping | samples | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
        for key, label in (("cross_site", "across sites (east <-> west)"), ("within_site", "within a site (same run)")):
            f = ttt[key]
            if f.get("n"):
                lines.append(f"| {label} | {f['n']} | {f['p50_ms']} | {f['p99_ms']} | {f['max_ms']} |")
        lines.append("")
    fo = r.get("failover")
    if fo and fo["outage"].get("n"):
        lines += [f"Gateway failover (kill -9 of the active gateway's ovs-vswitchd, {fo['outage']['n']} kills "
                  f"alternating sites, BFD 100 ms x 3): outage p50 {fo['outage']['p50_ms']} ms, max "
                  f"{fo['outage']['max_ms']} ms; fail-back p50 {fo['failback']['p50_ms']} ms, max "
                  f"{fo['failback']['max_ms']} ms (load {fo['load'][0]:.1f}).", ""]
    return lines


def plot(plt, r: dict):
    ttt = r.get("time_to_traffic")
    fo = r.get("failover")
    if not ttt and not fo:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    if ttt:
        data = [ttt[k].get("samples_ms", []) for k in ("cross_site", "within_site")]
        axes[0].boxplot(data)
        axes[0].set_xticks([1, 2], ["across sites", "within a site"])
        axes[0].set_ylabel("ms")
        axes[0].set_title("second consent → first ping", fontsize=9)
    if fo and fo["outage"].get("n"):
        axes[1].boxplot([fo["outage"]["samples_ms"], fo["failback"]["samples_ms"]])
        axes[1].set_xticks([1, 2], ["failover", "fail-back"])
        axes[1].set_ylabel("ms")
        axes[1].set_title("ping outage, kill -9 of the active gateway", fontsize=9)
    fig.suptitle("Cross-site (two sites on one machine)", fontsize=10)
    return fig
