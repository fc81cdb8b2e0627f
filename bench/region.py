"""The region section of ``make bench`` (``python -m bench --only region``):
a region of many sites, and what the link between two sites costs as the
pairs on it grow, before and after sites exchanged changes instead of
whole sides.

(a) ``bench/region_pairs.py``: one link with 100, 1,000 and 10,000 Bound
    cross-site pairs: bind latency, bytes per bind and the CPU of an
    exchange with nothing changed; before (the commit before the change,
    its own code in its own process) and after, in-process, side by side;
    and after through two real netpeerds (``--dataplane memory``).
(b) ``bench/region_sites.py``: regions of 10 and 20 netpeerds with
    in-memory dataplanes (simulation), 25,000 and 100,000 networks: the
    start, bind p99 across the links, convergence after partitions that
    heal with K changes on each side, memory per site.
(c) ``bench/region_ovn.py``: two sites on real OVN-IC over WireGuard with
    10 and 1,000 Bound cross-site pairs: time to traffic, and the wait of
    a first attachment for ovn-ic's tunnel key.

The figures of (a) and (b) come from the in-memory dataplane (a
simulation: the control planes are real, OVN is not there); those of (c)
from real OVN. ``summary`` and ``targets`` feed the targets table of
``results.md`` (``bench/report.py``); ``markdown`` its section.
"""

from __future__ import annotations

from bench.deploy import load_average
from bench.scale import log

TARGETS = {
    "bind_p99_growth": 1.2,        # p99 at 10,000 pairs within 1.2x of p99 at 100
    "idle_exchange_cpu_ms": 1.0,   # one exchange with nothing changed, at 10,000 pairs
    "bytes_per_bind": 16 * 1024,   # at any size
}


def run(pairs: dict, regions: list[dict], ovn: dict, interval: str = "1s", into: dict | None = None,
        save=lambda: None) -> dict:
    """The whole section, each part kept in ``into`` (and ``save`` called)
    as soon as it is measured; every daemon it starts is stopped by pid,
    every directory removed, also on failure."""
    from bench import region_ovn, region_pairs, region_sites
    out = into if into is not None else {}
    out["load_start"] = load_average()
    out["in_process"] = region_pairs.in_process(
        pairs["sizes"], {int(k): v for k, v in pairs["samples"].items()},
        {int(k): v for k, v in pairs["before_samples"].items()}, pairs["budget_s"], pairs["idle"],
        pairs["idle_budget_s"])
    save()
    log(f"region: two netpeerds per size, {pairs['sizes']} pairs")
    out["netpeerds"] = region_pairs.through_netpeerds(pairs["sizes"], pairs["daemon_samples"], interval,
                                                      pairs["idle_window_s"])
    save()
    out["regions"] = []
    for r in regions:
        out["regions"].append(region_sites.run_region(interval=interval, **r))
        save()
    out["ovn"] = region_ovn.run(**ovn)
    out["load_end"] = load_average()
    save()
    return out


# ---------------------------------------------------------------- summary and targets
def summary(r: dict) -> dict:
    """The figures the targets use, before and after."""
    s: dict = {}
    ip = r.get("in_process", {})
    for when in ("before", "after"):
        sizes = ip.get(when, {}).get("sizes", {})
        s[when] = {n: {"bind_p50_ms": v["bind"].get("p50_ms"), "bind_p99_ms": v["bind"].get("p99_ms"),
                       "bind_n": v["bind"].get("n"), "bytes_per_bind": v["bytes_per_bind"]["max"],
                       "idle_cpu_ms": v["idle_exchange"]["cpu_ms_p50"]} for n, v in sizes.items()}
    nd = r.get("netpeerds", {}).get("sizes", {})
    s["netpeerds"] = {n: {"bind_p50_ms": v["bind"].get("p50_ms"), "bind_p99_ms": v["bind"].get("p99_ms"),
                          "bind_n": v["bind"].get("n"), "bytes_per_bind": v.get("bytes_per_bind"),
                          "idle_cpu_ms": v.get("idle", {}).get("cpu_ms_per_exchange")} for n, v in nd.items()}
    return s


def _growth(sizes: dict) -> tuple[str, str, float] | None:
    keys = sorted((int(k) for k in sizes if sizes[k].get("bind_p99_ms")), key=int)
    if len(keys) < 2:
        return None
    lo, hi = str(keys[0]), str(keys[-1])
    return lo, hi, sizes[hi]["bind_p99_ms"] / sizes[lo]["bind_p99_ms"]


def targets(s: dict) -> dict:
    """Rows of the targets table: value (after), before, target, met."""
    t: dict = {}
    grown = _growth(s.get("netpeerds", {}))
    if grown:
        lo, hi, g = grown
        extra = {}
        for key, when in (("in_process", "after"), ("before", "before")):
            other = _growth(s.get(when, {}))
            if other and other[:2] == (lo, hi):
                extra[key] = other[2]
        t[f"cross-site bind p99 at {int(hi):,} pairs within 1.2x of p99 at {int(lo):,} (through netpeerds)"] = {
            "value": g, "target": TARGETS["bind_p99_growth"], "unit": "x", "met": g <= TARGETS["bind_p99_growth"],
            **extra}
    after = s.get("after", {})
    if after:
        top = max(after, key=int)
        v = after[top]["idle_cpu_ms"]
        before = s.get("before", {}).get(top, {}).get("idle_cpu_ms")
        t[f"CPU of an exchange with nothing changed < 1 ms at {int(top):,} pairs"] = {
            "value": v, "target": TARGETS["idle_exchange_cpu_ms"], "unit": " ms",
            "met": v < TARGETS["idle_exchange_cpu_ms"], **({"before": before} if before is not None else {})}
        sent = [x["bytes_per_bind"] for x in after.values()]
        sent += [x["bytes_per_bind"] for x in s.get("netpeerds", {}).values() if x.get("bytes_per_bind") is not None]
        worst = max(sent)
        before = max((x["bytes_per_bind"] for x in s.get("before", {}).values()), default=None)
        t["bytes on the link per bind < 16 KB at any size"] = {
            "value": worst / 1024, "target": TARGETS["bytes_per_bind"] / 1024, "unit": " KB",
            "met": worst < TARGETS["bytes_per_bind"],
            **({"before": before / 1024} if before is not None else {})}
    return t


# ---------------------------------------------------------------- markdown
def _f(x, digits=1) -> str:
    if x is None:
        return "–"
    if isinstance(x, (int, float)) and abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def _kb(n) -> str:
    return "–" if n is None else (f"{n / 1024:,.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:,.2f} MB")


def _load(x) -> str:
    return "–" if not x else f"{x[0]:.1f}"


def markdown(r: dict) -> list[str]:
    lines = ["## Region: many sites, and one link as its pairs grow", "",
             f"Load average (1 min) {_load(r.get('load_start'))} at the start of the section, "
             f"{_load(r.get('load_end'))} at its end. (a) and (b) run netpeerd on the in-memory dataplane "
             "(a simulation: real stores, consent and gRPC links, no OVN); (c) runs on real OVN-IC.", ""]
    lines += _md_in_process(r.get("in_process"))
    lines += _md_netpeerds(r.get("netpeerds"))
    lines += _md_regions(r.get("regions"))
    lines += _md_ovn(r.get("ovn"))
    return lines


def _md_in_process(ip: dict | None) -> list[str]:
    if not ip:
        return []
    b, a = ip["before"], ip["after"]
    lines = ["### (a) One link, in-process: before and after", "",
             f"Two services in one process each (SQLite stores, in-memory dataplanes, every message encoded "
             f"and decoded as on gRPC); before = {ip['before_commit'][:7]} (whole sides), its own code in its "
             f"own process; after = this tree (changes). Load {_load(b.get('load_start'))} -> "
             f"{_load(b.get('load_end'))} (before), {_load(a.get('load_start'))} -> "
             f"{_load(a.get('load_end'))} (after).",
             "", "| Bound pairs | | binds | bind p50 / p99 ms | bind CPU p50 ms | bytes per bind | "
             "idle exchange CPU ms | idle exchange bytes | build + first exchanges s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n in sorted(a["sizes"], key=int):
        for label, side in (("before", b), ("after", a)):
            v = side["sizes"].get(n)
            if not v:
                continue
            lines.append(f"| {int(n):,} | {label} | {v['bind']['n']} | {_f(v['bind']['p50_ms'])} / "
                         f"{_f(v['bind']['p99_ms'])} | {_f(v['bind_cpu']['p50_ms'])} | "
                         f"{_kb(v['bytes_per_bind']['p50'])} | {_f(v['idle_exchange']['cpu_ms_p50'], 3)} | "
                         f"{_kb(v['idle_exchange']['bytes_p50'])} | {_f(v['build_s'])} + "
                         f"{_f(v['first_exchanges_s'])} |")
    lines.append("")
    return lines


def _md_netpeerds(nd: dict | None) -> list[str]:
    if not nd:
        return []
    lines = ["### (a) One link through two netpeerds (after; `--dataplane memory`)", "",
             f"Binds through the API, interleaved across the sizes ({nd.get('sampling_s')} s of sampling); "
             f"sweep interval {nd.get('interval')}; load {_load(nd.get('load_start'))} -> {_load(nd.get('load_end'))}. "
             "Idle CPU: both netpeerds' CPU over a window at rest divided by the exchanges in it (their sweeps "
             "included: an upper bound).", "",
             "| Bound pairs | binds | bind p50 / p99 / max ms | bytes per bind | exchanges while sampling | "
             "full copies | idle CPU per exchange ms | resident MiB (east / west) |",
             "|---|---|---|---|---|---|---|---|"]
    for n in sorted(nd["sizes"], key=int):
        v = nd["sizes"][n]
        rss = v.get("rss_mib", {})
        lines.append(f"| {int(n):,} | {v['bind']['n']} | {_f(v['bind']['p50_ms'])} / {_f(v['bind']['p99_ms'])} / "
                     f"{_f(v['bind'].get('max_ms'))} | {_kb(v.get('bytes_per_bind'))} | "
                     f"{v.get('exchanges_while_sampling', '–')} | {v.get('resyncs', '–')} | "
                     f"{_f(v.get('idle', {}).get('cpu_ms_per_exchange'), 2)} | "
                     f"{_f(rss.get('east'))} / {_f(rss.get('west'))} |")
    lines.append("")
    return lines


def _md_regions(regions: list | None) -> list[str]:
    if not regions:
        return []
    lines = ["### (b) Regions of simulated sites", "",
             "| sites | networks | links | cross-site pairs | local pairs | stores prepared s | start -> all Bound s | "
             "bind p50 / p99 ms (binds) | resident MiB per site p50 / max |", "|---|---|---|---|---|---|---|---|---|"]
    for g in regions:
        lines.append(f"| {g['sites']} | {g['networks']:,} | {g['links']} | {g['cross_site_pairs']:,} | "
                     f"{g['local_pairs']:,} | {_f(g['prepare_s'])} | {_f(g['converged_after_start_s'])} | "
                     f"{_f(g['bind']['p50_ms'])} / {_f(g['bind']['p99_ms'])} ({g['bind']['n']}) | "
                     f"{_f(g['rss_mib']['p50'])} / {_f(g['rss_mib']['max'])} |")
    lines += ["", "After a partition: links cut, K new pairs consented on each side of each, then healed. "
              "Bound: every new pair Bound on both sides; agreed: both ends of every cut link acknowledged "
              "every change (the last acknowledgement rides on the next exchange, within the sweep interval).", "",
              "| sites | networks | links cut | K per side per link | heal -> Bound s | heal -> agreed s | "
              "bytes across the cut links | full copies |", "|---|---|---|---|---|---|---|---|"]
    for g in regions:
        for p in g["partitions"]:
            lines.append(f"| {g['sites']} | {g['networks']:,} | {p['links_cut']} | {p['k']:,} | "
                         f"{_f(p['bound_s'], 2)} | "
                         f"{_f(p['agreed_s'], 2)} | {_kb(p['bytes'])} | {p['full_copies']} |")
    lines.append("")
    return lines


def _md_ovn(o: dict | None) -> list[str]:
    if not o:
        return []
    lines = ["### (c) Two sites on real OVN-IC over WireGuard", "",
             f"Bring-up {_f(o['bring_up_s'])} s, teardown {_f(o.get('teardown_s'))} s; load "
             f"{_load(o.get('load_start'))} -> {_load(o.get('load_end'))}.", "",
             "| Bound cross-site pairs in place | built s | "
             "second consent -> first ping p50 / p99 ms (samples, missed) | "
             "first attachment -> key p50 / max ms | first attachment -> Programmed p50 / max ms |",
             "|---|---|---|---|---|"]
    for n in sorted(o["sizes"], key=int):
        v = o["sizes"][n]
        if "error" in v:
            lines.append(f"| {int(n):,} | failed: {v['error']} | – | – | – |")
            continue
        if "not_programmed" in v:
            why = "; ".join(f"{site}: {x['programmed']:,} of {x['of']:,} Programmed, its chassis at nb_cfg "
                            + (f"{x['hv_cfg']:,} of {x['nb_cfg']:,}" if x["nb_cfg"] is not None
                               else "unknown (its NB did not answer)")
                            + ", ovs-vswitchd refused "
                            + ", ".join(f"{role} {sum(k.values())}" for role, k in x["vswitchd_refused"].items())
                            + " OpenFlow bundle(s)" for site, x in v["not_programmed"].items())
            lines.append(f"| {int(n):,} | not Programmed in time ({why}) | – | – | – |")
            continue
        ttt, fa = v["time_to_traffic"], v["first_attachment"]
        lines.append(f"| {int(n):,} | {_f(v['built_s'])} | {_f(ttt.get('p50_ms'))} / {_f(ttt.get('p99_ms'))} "
                     f"({ttt['n']}, {ttt['missed']}) | {_f(fa['keyed'].get('p50_ms'))} / "
                     f"{_f(fa['keyed'].get('max_ms'))} | "
                     f"{_f(fa['programmed'].get('p50_ms'))} / {_f(fa['programmed'].get('max_ms'))} |")
    lines.append("")
    return lines


def plot(plt, r: dict):
    """Bind p50 and p99 against the pairs on the link: before and after in-process, and through netpeerds."""
    ip, nd = r.get("in_process"), r.get("netpeerds")
    if not ip:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    series = [("before, in-process", ip["before"]["sizes"], "o"), ("after, in-process", ip["after"]["sizes"], "s")]
    if nd:
        series.append(("after, netpeerds", nd["sizes"], "^"))
    for label, sizes, marker in series:
        ns = sorted((int(n) for n in sizes if sizes[n]["bind"].get("n")))
        for q, style in (("p50_ms", "-"), ("p99_ms", "--")):
            ax.plot(ns, [sizes[str(n)]["bind"][q] for n in ns], marker + style, label=f"{label} {q[:3]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Bound cross-site pairs on the link")
    ax.set_ylabel("ms, second consent → Bound on both sides")
    ax.set_title("Cross-site bind: whole sides (before) and changes (after)")
    ax.legend(fontsize=7)
    return fig
