"""results.json -> a summary (every section), results.md (tables, targets)
and PNG plots.

Why one module of this size: one renderer per section and per plot, each
short, listed in ``SECTIONS`` and ``PLOTS``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

TARGETS = {
    "bulk_ratio": 2.0,            # API within 2x of one raw ovn-nbctl
    "bind_p99_1000_ms": 50.0,     # bind p99 at 1,000 networks
    "bind_p99_growth": 1.2,       # p99 at 10,000 within 1.2x of p99 at 100
    "ttt_p99_1000_ms": 1000.0,    # time to traffic (first ping) p99 at 1,000 networks
    "pulumi_overhead_pct": 10.0,  # provider over the floor: do-nothing stack + the service's own cost
    # netpeerd at 10,000 networks (issue: 1,606 MiB, 38.1 s and 11.5% of a core at 0c7a872)
    "netpeerd_rss_10000_mib": 1606 / 3,  # resident at the end of the size's run, as the 1,606 MiB was
    "netpeerd_start_10000_s": 10.0,      # start -> first completed repair sweep
    "netpeerd_idle_cpu_10000_pct": 1.0,  # CPU of a core at rest, the sweep every 30 s
}


def _sizes(scale: dict) -> list[int]:
    return sorted(int(k) for k in scale)


def _f(x, digits=1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, (int,)) or (isinstance(x, float) and abs(x) >= 100):
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def summarize(data: dict) -> dict:
    """One entry per measured section, with the figures the targets use."""
    s: dict = {"bind": {}, "traffic": {}, "northd": {}, "memory": {}, "cli": {}, "bulk": {}, "pulumi": {},
               "shapes": {}, "targets": {}}
    for shape, sc in _shapes(data).items():
        for n in _sizes(sc):
            _summarize_size(s, f"{shape}/{n}" if shape != "lxd" else str(n), sc[str(n)])
    if "bulk" in data:
        b = data["bulk"]
        s["bulk"] = {"api_s": b["api"]["total_s"], "api_second_consents_s": b["api"]["second_consents_s"],
                     "raw_s": b["raw_s"], "ratio": b["ratio"], "ratio_second_consents": b["ratio_second_consents"],
                     "api_until_sb_s": b["api_until_sb_s"], "raw_until_sb_s": b["raw_until_sb_s"],
                     "rows": b["rows"]}
        if "api_batch" in b:
            s["bulk"].update(batch_s=b["api_batch"]["total_s"], ratio_batch=b["ratio_batch"],
                             batch_until_sb_s=b["batch_until_sb_s"], batch_calls=b["api_batch"]["calls_per_side"])
        if "ovn_alone" in b:
            s["bulk"].update(batch_second_s=b["api_batch"]["second_consents_s"], ovn_alone_s=b["ovn_alone"]["sync_s"],
                             ratio_ovn_alone=b["ratio_ovn_alone"])
    if "pulumi" in data:
        s["pulumi"] = data["pulumi"]["overhead"]
    if "shapes" in data:
        s["shapes"] = {key: _summarize_shape(r) for key, r in data["shapes"].items()}
    if "scale" in data:
        from bench import sizing
        s["sizing"] = sizing.summary(data["scale"])
    if "region" in data:
        from bench import region
        s["region"] = region.summary(data["region"])
    s["targets"] = _targets(s)
    return s


def _mean(values: list, default=None):
    return sum(values) / len(values) if values else default


def _summarize_size(s: dict, key: str, r: dict) -> None:
    """The figures of one deployment size into the summary ``s``."""
    s["bind"][key] = {k: r["bind"]["bind"][k] for k in ("p50_ms", "p99_ms", "max_ms", "n")}
    if "traffic" in r:
        t = r["traffic"]
        s["traffic"][key] = {"ping_p50_ms": t["ping"]["p50_ms"], "ping_p99_ms": t["ping"]["p99_ms"],
                             "hv_p50_ms": t["hv"]["p50_ms"], "hv_p99_ms": t["hv"]["p99_ms"], "n": t["ping"]["n"]}
    nd = r.get("northd_full_recompute", {}).get("stopwatch", {})
    per_bind_runs = r.get("traffic", {}).get("northd", [])
    s["northd"][key] = {
        "full_recompute_build_lflows_ms": nd.get("build_lflows", {}).get("maximum"),
        "full_recompute_loop_ms": nd.get("ovn-northd-loop", {}).get("maximum"),
        "per_bind_lflow_recomputes": _mean([x["engine"].get("lflow", {}).get("recompute", 0) for x in per_bind_runs]),
        "per_bind_build_lflows_ms": _mean([x["stopwatch"].get("build_lflows", {}).get("maximum", 0)
                                           for x in per_bind_runs]),
        "per_bind_loop_ms": _mean([x["stopwatch"].get("ovn-northd-loop", {}).get("maximum", 0)
                                   for x in per_bind_runs]),
        "lflows_total": r.get("lflows", {}).get("after"),
        "lflows_per_peering": r.get("lflows", {}).get("per_peering"),
    }
    s["memory"][key] = {"netpeerd_rss_mib": r["memory_end_kib"]["netpeerd"]["VmRSS"] / 1024,
                        "netpeerd_peak_mib": r["memory_end_kib"]["netpeerd"]["VmHWM"] / 1024,
                        "netpeerd_after_start_mib": (r.get("memory_after_start_kib", {}).get("netpeerd", {})
                                                     .get("VmRSS", 0) / 1024 or None),
                        "netpeerd_start_s": r.get("netpeerd_start_s"),
                        "netpeerd_idle_cpu_pct": r.get("netpeerd_idle_cpu_pct"),
                        **{f"{k}_mib": v / 1024 for k, v in r["memory_end_kib"]["ovn"].items()}}
    if r.get("cli"):
        s["cli"][key] = {k: {"p50_ms": v["p50_ms"], "max_ms": v["max_ms"]} for k, v in r["cli"].items()}


def _summarize_shape(r: dict) -> dict:
    per_bind = r["northd_per_bind"]
    return {
        "lflows": r["lflows"], "lflows_per_peering": r["lflows_per_peering"],
        "full_recompute_build_lflows_ms": r["full_recompute"]["stopwatch"].get("build_lflows", {}).get("maximum"),
        "full_recompute_loop_ms": r["full_recompute"]["stopwatch"].get("ovn-northd-loop", {}).get("maximum"),
        "per_bind_lflow_recomputes": _mean([x["engine"].get("lflow", {}).get("recompute", 0) for x in per_bind], 0),
        "per_bind_build_lflows_ms": _mean([x["stopwatch"].get("build_lflows", {}).get("maximum", 0)
                                           for x in per_bind], 0),
        "per_bind_loop_max_ms": _mean([x["stopwatch"].get("ovn-northd-loop", {}).get("maximum", 0)
                                       for x in per_bind], 0),
        "ping_p50_ms": r["ping"]["p50_ms"], "ping_p99_ms": r["ping"]["p99_ms"],
        "nb_write_p50_ms": r["nb_write"]["p50_ms"],
        "sb_rss_mib": r["daemon_rss_kib"].get("ovsdb-server-sb", 0) / 1024,
        "northd_rss_mib": r["daemon_rss_kib"].get("ovn-northd", 0) / 1024}


def _targets(s: dict) -> dict:
    """One row per target: value, target, met."""
    t: dict = {}
    if s["bulk"]:
        t["bulk within 2x of raw ovn-nbctl"] = {"value": s["bulk"]["ratio"], "target": TARGETS["bulk_ratio"],
                                                "met": s["bulk"]["ratio"] <= TARGETS["bulk_ratio"]}
        if "ratio_batch" in s["bulk"]:
            t["bulk in batches within 2x of raw ovn-nbctl"] = {
                "value": s["bulk"]["ratio_batch"], "target": TARGETS["bulk_ratio"],
                "met": s["bulk"]["ratio_batch"] <= TARGETS["bulk_ratio"]}
    b = s["bind"]
    if "1000" in b:
        t["bind p99 < 50 ms at 1,000 networks"] = {"value": b["1000"]["p99_ms"], "target": TARGETS["bind_p99_1000_ms"],
                                                  "met": b["1000"]["p99_ms"] < TARGETS["bind_p99_1000_ms"]}
    sizes = sorted(int(k) for k in b if "/" not in k)
    if len(sizes) >= 2:
        lo, hi = str(sizes[0]), str(sizes[-1])
        g = b[hi]["p99_ms"] / b[lo]["p99_ms"]
        t[f"bind p99 at {int(hi):,} within 1.2x of p99 at {int(lo):,}"] = {
            "value": g, "target": TARGETS["bind_p99_growth"], "met": g <= TARGETS["bind_p99_growth"]}
    if "1000" in s["traffic"]:
        v = s["traffic"]["1000"]["ping_p99_ms"]
        t["time to traffic p99 < 1 s at 1,000 networks"] = {"value": v, "target": TARGETS["ttt_p99_1000_ms"],
                                                            "met": v < TARGETS["ttt_p99_1000_ms"]}
    big = [k for k in s["memory"] if "/" not in k and int(k) >= 10000]
    if big:
        _netpeerd_targets(t, min(big, key=int), s["memory"][min(big, key=int)])
    if s.get("region"):
        from bench import region
        t.update(region.targets(s["region"]))
    if s["pulumi"]:
        for face in sorted({v.get("face", "dynamic") for v in s["pulumi"].values()}):
            worst = max((v["overhead_pct"], k) for k, v in s["pulumi"].items() if v.get("face", "dynamic") == face)
            t[f"{face} provider overhead < 10% over the floor (do-nothing + service)"] = {
                "value": worst[0], "worst": worst[1], "target": TARGETS["pulumi_overhead_pct"],
                "met": worst[0] < TARGETS["pulumi_overhead_pct"]}
    return t


def _netpeerd_targets(t: dict, key: str, m: dict) -> None:
    """netpeerd's memory, start-up and CPU at rest at one size of 10,000
    networks or more (the smallest such), measured in the scale section."""
    n = f"{int(key):,}"
    rows = (("netpeerd memory at {} networks ≤ 535 MiB", m["netpeerd_rss_mib"], "netpeerd_rss_10000_mib", " MiB"),
            ("start-up at {} networks < 10 s (first sweep completed)", m.get("netpeerd_start_s"),
             "netpeerd_start_10000_s", " s"),
            ("sweep CPU at rest < 1% of a core at {} networks", m.get("netpeerd_idle_cpu_pct"),
             "netpeerd_idle_cpu_10000_pct", "%"))
    for name, value, target, unit in rows:
        if value is not None:
            t[name.format(n)] = {"value": value, "target": TARGETS[target], "unit": unit,
                                 "met": value <= TARGETS[target] if "MiB" in unit else value < TARGETS[target]}


def _shapes(data: dict) -> dict[str, dict]:
    out = {}
    if "scale" in data:
        out["lxd"] = data["scale"]
    for key, value in data.items():
        if key.startswith("scale_") and isinstance(value, dict):
            out[key[len("scale_"):]] = value
    return out


# ------------------------------------------------------------------ markdown

def markdown(data: dict, s: dict) -> str:
    meta = data["meta"]
    m = meta["machine"]
    loads = meta.get("load_samples_1min") or []
    lines = [f"# netpeer benchmark {meta.get('started', '')}", "",
             f"{m['cpus']} CPUs, {m['mem_gib']} GiB, {m['ovn']}, {m['ovs']}, Python {m['python']}, "
             f"git {m['git']}{' (--quick: figures are meaningless)' if meta.get('quick') else ''}. "
             f"Took {meta.get('elapsed_s', 0) / 60:.1f} min. Load average (1 min) at start "
             f"{meta['load_start'][0]:.2f}, during the run mean {sum(loads) / len(loads):.2f} / max {max(loads):.2f}, "
             f"at end {meta.get('load_end', [0])[0]:.2f}." if loads else "", ""]
    lines += ["## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for name, t in s["targets"].items():
        unit = t.get("unit") or ("x" if "within" in name and "ms" not in name
                                 else ("%" if "overhead" in name else " ms"))
        lines.append(f"| {name} | {_f(t['value'], 2)}{unit}{' (' + t['worst'] + ')' if 'worst' in t else ''}"
                     f"{_compared(t, unit)} | {'yes' if t['met'] else '**no**'} |")
    for section in SECTIONS:
        lines += section(data, s)
    return "\n".join(lines) + "\n"


def _compared(t: dict, unit: str) -> str:
    """A row's other measures of the same figure: in-process, and before the change."""
    parts = [f"{label} {_f(t[key], 2)}{unit}" for key, label in (("in_process", "in-process"),
                                                                 ("before", "before, in-process"))
             if t.get(key) is not None]
    if "before" in t and "in_process" not in t:
        parts = [f"before {_f(t['before'], 2)}{unit}"]
    return f" ({'; '.join(parts)})" if parts else ""


def _md_bind(data: dict, s: dict) -> list[str]:
    if not s["bind"]:
        return []
    lines = ["", "## Bind latency through the API (second consent → Bound, NB committed)", "",
              "| deployment | networks | Bound pairs | samples | p50 ms | p99 ms | max ms | unbind p50 ms |",
              "|---|---|---|---|---|---|---|---|"]
    for shape, sc in _shapes(data).items():
        for n in _sizes(sc):
            r = sc[str(n)]
            lines.append(f"| {shape} | {n:,} | {r['bound_pairs']:,} | {r['bind']['bind']['n']} | "
                         f"{_f(r['bind']['bind']['p50_ms'])} | {_f(r['bind']['bind']['p99_ms'])} | "
                         f"{_f(r['bind']['bind']['max_ms'])} | {_f(r['bind']['unbind']['p50_ms'])} |")
    return lines


def _md_traffic(data: dict, s: dict) -> list[str]:
    if not s["traffic"]:
        return []
    lines = ["", "## Time to traffic (second consent → ...)", "",
              "| deployment | networks | samples | chassis applied (hv_cfg) p50 / p99 ms | first ping p50 / p99 ms |",
              "|---|---|---|---|---|"]
    for shape, sc in _shapes(data).items():
        for n in _sizes(sc):
            t = sc[str(n)].get("traffic")
            if t:
                lines.append(f"| {shape} | {n:,} | {t['ping']['n']} | {_f(t['hv']['p50_ms'])} / {_f(t['hv']['p99_ms'])} | "
                             f"{_f(t['ping']['p50_ms'])} / {_f(t['ping']['p99_ms'])} |")
    return lines


def _md_northd(data: dict, s: dict) -> list[str]:
    if not s["northd"]:
        return []
    lines = ["", "## ovn-northd per bind and logical flows", "",
              "| deployment | networks | lflow recomputes per bind | build_lflows per bind ms | "
              "longest northd loop per bind ms | logical flows | flows per peering |", "|---|---|---|---|---|---|---|"]
    for key, v in s["northd"].items():
        shape, n = (key.split("/") + [None])[:2] if "/" in key else ("lxd", key)
        lines.append(f"| {shape} | {int(n):,} | {_f(v['per_bind_lflow_recomputes'])} | "
                     f"{_f(v['per_bind_build_lflows_ms'])} | {_f(v['per_bind_loop_ms'])} | "
                     f"{_f(v['lflows_total'])} | {_f(v['lflows_per_peering'])} |")
    return lines


def _md_memory(data: dict, s: dict) -> list[str]:
    if not s["memory"]:
        return []
    lines = ["", "## Memory (resident, MiB) and start-up", "",
              "| deployment | networks | netpeerd after start | netpeerd at the end | netpeerd peak | "
              "netpeerd start + first sweep s | netpeerd CPU at rest | NB ovsdb | SB ovsdb | ovn-northd |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for key, v in s["memory"].items():
        shape, n = (key.split("/") + [None])[:2] if "/" in key else ("lxd", key)
        lines.append(f"| {shape} | {int(n):,} | {_f(v.get('netpeerd_after_start_mib'))} | "
                     f"{_f(v['netpeerd_rss_mib'])} | {_f(v['netpeerd_peak_mib'])} | "
                     f"{_f(v.get('netpeerd_start_s'))} | {_f(v.get('netpeerd_idle_cpu_pct'))}% | "
                     f"{_f(v.get('ovsdb-server-nb_mib'))} | "
                     f"{_f(v.get('ovsdb-server-sb_mib'))} | {_f(v.get('ovn-northd_mib'))} |")
    return lines


def _md_bulk(data: dict, s: dict) -> list[str]:
    if not s["bulk"]:
        return []
    lines: list[str] = []
    b = s["bulk"]
    bulk = data["bulk"]
    lines += ["", f"## Bulk apply: {bulk['pairs']:,} peerings (Bound pairs) among {bulk['networks']} networks", "",
              "| path | NB written s | until SB s |", "|---|---|---|",
              f"| API, {bulk['pairs'] * 2:,} consents, {bulk['api_concurrency']} concurrent clients | "
              f"{_f(b['api_s'], 2)} (second consents alone {_f(b['api_second_consents_s'], 2)}) | {_f(b['api_until_sb_s'], 2)} |",
              f"| ovn-nbctl, {b['rows']:,} rows in {bulk.get('nbctl_invocations', 1)} process(es) | "
              f"{_f(b['raw_s'], 2)} | {_f(b['raw_until_sb_s'], 2)} |",
              f"| ratio | **{_f(b['ratio'], 2)}x** (second consents alone {_f(b['ratio_second_consents'], 2)}x) | |"]
    if "batch_s" in b:
        lines += [f"| API in batches (`BatchCreatePeerings`, {b['batch_calls']} call(s) per side) | "
                  f"{_f(b['batch_s'], 2)} | {_f(b['batch_until_sb_s'], 2)} |",
                  f"| ratio, batches | **{_f(b['ratio_batch'], 2)}x** | |"]
    if "ovn_alone_s" in b:
        lines += [f"| netpeer's OVN layer alone, the binds' rows in one transaction (second batch: "
                  f"{_f(b['batch_second_s'], 2)}) | {_f(b['ovn_alone_s'], 2)} | |",
                  f"| ratio, OVN layer alone | {_f(b['ratio_ovn_alone'], 2)}x | |"]
    return lines


def _md_pulumi(data: dict, s: dict) -> list[str]:
    if not s["pulumi"]:
        return []
    lines = ["", "## Pulumi (real CLI, local backend)", "",
             "Medians. Seconds until quiescent (the CLI returned and ovn-northd caught up); the floor is the "
             "do-nothing stack plus the service's own calls. Last two columns: until the CLI returned.", "",
             "| face | operation | resources | netpeer s | do-nothing s | service s | floor s | over floor | "
             "netpeer returned s | over do-nothing (returned) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for v in s["pulumi"].values():
        lines.append(f"| {v.get('face', 'dynamic')} | {v.get('op', '')} | {v.get('count', '')} | "
                     f"{_f(v['netpeer_s'], 2)} | {_f(v['noop_s'], 2)} | {_f(v.get('service_s', 0), 2)} | "
                     f"{_f(v.get('floor_s', v['noop_s']), 2)} | {_f(v['overhead_pct'])}% | "
                     f"{_f(v.get('netpeer_returned_s', v['netpeer_s']), 2)} | "
                     f"{_f(v.get('over_noop_pct', v['overhead_pct']))}% |")
    return lines


def _md_tofu(data: dict, s: dict) -> list[str]:
    if "tofu" not in data:
        return []
    from bench import tofu_bench
    return ["", *tofu_bench.markdown(data["tofu"])]


def _md_shapes(data: dict, s: dict) -> list[str]:
    if not s.get("shapes"):
        return []
    lines = ["", "## OVN shapes side by side (raw ovn-nbctl, same deployment, same chassis probe)", "",
              "| shape | networks | logical flows | flows per peering | full recompute build_lflows / loop ms | "
              "lflow recomputes per bind | build_lflows per bind ms | first ping p50 / p99 ms | SB RSS MiB |",
              "|---|---|---|---|---|---|---|---|---|"]
    for key, v in s["shapes"].items():
        shape, n = key.split("/")
        lines.append(f"| {shape} | {int(n):,} | {_f(v['lflows'])} | {_f(v['lflows_per_peering'])} | "
                     f"{_f(v['full_recompute_build_lflows_ms'])} / {_f(v['full_recompute_loop_ms'])} | "
                     f"{_f(v['per_bind_lflow_recomputes'])} | {_f(v['per_bind_build_lflows_ms'])} | "
                     f"{_f(v['ping_p50_ms'])} / {_f(v['ping_p99_ms'])} | {_f(v['sb_rss_mib'])} |")
    return lines


def _md_sites(data: dict, s: dict) -> list[str]:
    if "sites" not in data:
        return []
    from bench import sites_bench
    return ["", *sites_bench.markdown(data["sites"])]


def _md_region(data: dict, s: dict) -> list[str]:
    if "region" not in data:
        return []
    from bench import region
    return ["", *region.markdown(data["region"])]


def _md_linearizability(data: dict, s: dict) -> list[str]:
    if "linearizability" not in data:
        return []
    from tests.linearizability.longrun import markdown as lin_markdown
    body = lin_markdown(data["linearizability"]).splitlines()
    return ["", "## Linearizability under faults", "", *body[2:]]


def _md_sizing(data: dict, s: dict) -> list[str]:
    if not s.get("sizing"):
        return []
    from bench import sizing
    return ["", *sizing.markdown(s["sizing"])]


def _md_cli(data: dict, s: dict) -> list[str]:
    if not s["cli"]:
        return []
    lines = ["", "## CLI per command (whole process, wall time)", ""]
    for key, cmds in s["cli"].items():
        lines += [f"At {key} networks:", "", "| command | p50 ms | max ms |", "|---|---|---|"]
        for name, v in cmds.items():
            lines.append(f"| `netpeer {name}` | {_f(v['p50_ms'])} | {_f(v['max_ms'])} |"
                         if not name.startswith("(") else f"| {name} | {_f(v['p50_ms'])} | {_f(v['max_ms'])} |")
        lines.append("")
    return lines


#: The sections of results.md after the targets, in order.
SECTIONS = [_md_bind, _md_traffic, _md_northd, _md_memory, _md_sizing, _md_bulk, _md_pulumi, _md_tofu,
            _md_shapes, _md_sites, _md_region, _md_cli, _md_linearizability]


# ------------------------------------------------------------------ plots

def plots(data: dict, s: dict, out: Path) -> list[str]:
    """Draws every plot that has data; the file names written to ``out``."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for name, draw in PLOTS:
        fig = draw(plt, data, s)
        if fig is None:
            continue
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append(name)
    return made


def _plot_bind(plt, data: dict, s: dict):
    shapes = _shapes(data)
    if not shapes:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for shape, sc in shapes.items():
        ns = _sizes(sc)
        for q, style in (("p50_ms", "o-"), ("p99_ms", "s--")):
            ax.plot(ns, [sc[str(n)]["bind"]["bind"][q] for n in ns], style, label=f"{shape} {q[:3]}")
    ax.axhline(50, color="red", lw=0.8, ls=":", label="target p99 at 1,000")
    ax.set_xscale("log")
    ax.set_xlabel("networks (as many Bound pairs)")
    ax.set_ylabel("ms")
    ax.set_title("Bind latency through the API")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return fig


def _plot_traffic(plt, data: dict, s: dict):
    shapes = _shapes(data)
    if not any("traffic" in sc[k] for sc in shapes.values() for k in sc):
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for shape, sc in shapes.items():
        ns = [n for n in _sizes(sc) if "traffic" in sc[str(n)]]
        for what, style in (("ping", "o-"), ("hv", "s--")):
            label = f"{shape} {'first ping' if what == 'ping' else 'chassis (hv_cfg)'}"
            ax.plot(ns, [sc[str(n)]["traffic"][what]["p99_ms"] / 1000 for n in ns], style, label=f"{label} p99")
            ax.plot(ns, [sc[str(n)]["traffic"][what]["p50_ms"] / 1000 for n in ns], style, alpha=0.35,
                    label=f"{label} p50")
    ax.axhline(1, color="red", lw=0.8, ls=":", label="target p99 at 1,000")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("networks (as many Bound pairs)")
    ax.set_ylabel("seconds")
    ax.set_title("Time to traffic after the second consent")
    ax.legend(fontsize=7)
    return fig


def _plot_growth(plt, data: dict, s: dict):
    shapes = _shapes(data)
    if not shapes:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for shape, sc in shapes.items():
        ns = _sizes(sc)
        key = (lambda n: str(n)) if shape == "lxd" else (lambda n, shape=shape: f"{shape}/{n}")
        ax.plot(ns, [s["northd"][key(n)]["per_bind_loop_ms"] or 0 for n in ns], "o-",
                label=f"{shape}: ovn-northd per bind (longest loop, ms)")
        ax.plot(ns, [sc[str(n)]["traffic"]["ping"]["p50_ms"] if "traffic" in sc[str(n)] else 0 for n in ns], "^-",
                label=f"{shape}: bind → first ping p50 (ms)")
        ax.plot(ns, [sc[str(n)]["memory_end_kib"]["netpeerd"]["VmRSS"] / 1024 for n in ns], "s--",
                label=f"{shape}: netpeerd RSS (MiB)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("networks (as many Bound pairs)")
    ax.set_ylabel("ms  /  MiB")
    ax.set_title("What grows with the deployment")
    ax.legend(fontsize=8)
    return fig


def _plot_bulk(plt, data: dict, s: dict):
    if not s["bulk"]:
        return None
    b = s["bulk"]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    labels = ["API (all consents)", "API (second consents)", "raw ovn-nbctl"]
    vals = [b["api_s"], b["api_second_consents_s"], b["raw_s"]]
    colors = ["tab:blue", "tab:cyan", "tab:gray"]
    if "batch_s" in b:
        labels.insert(2, "API in batches")
        vals.insert(2, b["batch_s"])
        colors.insert(2, "tab:green")
    if "ovn_alone_s" in b:
        labels.insert(-1, "OVN layer alone (binds)")
        vals.insert(-1, b["ovn_alone_s"])
        colors.insert(-1, "tab:olive")
    ax.barh(labels, vals, color=colors)
    for y, v in enumerate(vals):
        ax.text(v, y, f" {v:.2f}s", va="center", fontsize=8)
    ax.set_xlabel("seconds until NB holds every row")
    ratios = f"one call per consent {b['ratio']:.2f}x" + (f", batches {b['ratio_batch']:.2f}x" if "batch_s" in b else "")
    ax.set_title(f"Bulk apply: {data['bulk']['pairs']:,} peerings\nagainst raw ovn-nbctl: {ratios}", fontsize=10)
    return fig


def _plot_pulumi(plt, data: dict, s: dict):
    if not s["pulumi"]:
        return None
    keys = list(s["pulumi"])
    fig, ax = plt.subplots(figsize=(9.6, 3.6))
    x = range(len(keys))
    ax.bar([i - 0.2 for i in x], [s["pulumi"][k]["netpeer_s"] for k in keys], 0.4, label="netpeer")
    ax.bar([i + 0.2 for i in x], [s["pulumi"][k]["noop_s"] for k in keys], 0.4, label="do-nothing")
    ax.bar([i + 0.2 for i in x], [s["pulumi"][k].get("service_s", 0) for k in keys], 0.4,
           bottom=[s["pulumi"][k]["noop_s"] for k in keys], label="+ service (floor)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(keys, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("seconds")
    ax.set_title("pulumi: netpeer resources vs the floor (do-nothing + service)")
    ax.legend(fontsize=8)
    return fig


def _plot_shapes(plt, data: dict, s: dict):
    if not s.get("shapes"):
        return None
    keys = list(s["shapes"])
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    colors = ["tab:blue" if k.startswith("lxd") else "tab:orange" for k in keys]
    axes[0].bar(keys, [s["shapes"][k]["ping_p50_ms"] for k in keys], color=colors)
    axes[0].set_title("bind → first ping, p50 (ms)", fontsize=9)
    axes[1].bar(keys, [s["shapes"][k]["lflows"] / 1000 for k in keys], color=colors)
    axes[1].set_title("logical flows (thousands)", fontsize=9)
    for ax in axes:
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.suptitle("LXD shape vs shared transit switch (raw ovn-nbctl)", fontsize=10)
    return fig


def _plot_region(plt, data: dict, s: dict):
    if "region" not in data:
        return None
    from bench import region
    return region.plot(plt, data["region"])


def _plot_sizing(plt, data: dict, s: dict):
    if not s.get("sizing"):
        return None
    from bench import sizing
    return sizing.plot(plt, s["sizing"])


def _plot_sites(plt, data: dict, s: dict):
    if "sites" not in data:
        return None
    from bench import sites_bench
    return sites_bench.plot(plt, data["sites"])


#: (file name, drawing function) of every plot.
PLOTS = [("bind_latency.png", _plot_bind), ("time_to_traffic.png", _plot_traffic), ("growth.png", _plot_growth),
         ("bulk.png", _plot_bulk), ("pulumi.png", _plot_pulumi), ("shapes.png", _plot_shapes),
         ("sites.png", _plot_sites), ("sizing.png", _plot_sizing), ("region.png", _plot_region)]


def write(data: dict, out: Path) -> None:
    s = summarize(data)
    data["summary"] = s
    (out / "results.json").write_text(json.dumps(data, indent=1, default=str))
    try:
        made = plots(data, s, out)
    except ImportError:
        made = []
        print("bench: matplotlib is missing (pip install -e '.[bench]'): no plots", flush=True)
    md = markdown(data, s)
    if "stores" in data:
        from bench import stores
        md += "\n## Stores: SQLite, PostgreSQL x1, PostgreSQL x2\n\n" + "\n".join(stores.table(data["stores"])) + "\n"
    if made:
        md += "\n" + "\n".join(f"![{m}]({m})" for m in made) + "\n"
    (out / "results.md").write_text(md)
