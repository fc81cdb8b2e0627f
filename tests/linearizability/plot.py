"""A picture of a violation: the calls of the group around the operation
lincheck could not place, one row per client, each call a bar from its
invocation to its answer, with the faults of the moment shaded. For pages
that cannot hold Porcupine's interactive visualisation (its HTML is what
lincheck writes next to the history).

    python -m tests.linearizability.plot HISTORY SUMMARY.json OUT.png [--violation N] [--before CALLS]

``SUMMARY.json`` is lincheck's output. Needs matplotlib (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _label(r: dict) -> str:
    a = r.get("args", {})
    where = "/".join(x for x in (a.get("ns"), a.get("network"), a.get("peering")) if x)
    if r["f"] == "create_peerings":
        where = "[" + ", ".join(f"{h['ns']}/{h['network']}/{h['peering']}" for h in a["halves"]) + "]"
    if r["f"] in ("create_network", "update_network"):
        where += " " + ",".join(a.get("subnets", []) + a.get("routes", []))
    if r["outcome"] == "info":
        said = "no answer"
    elif r["outcome"] == "fail":
        said = r.get("error", "")
    elif r["f"] == "create_peerings":
        said = " ".join(f"{p['phase']}/{p['reason']}" for p in r["result"]["peerings"])
    elif r["f"] in ("get_peering", "create_peering", "get_half", "unpin_peering"):
        said = f"{r['result']['phase']}/{r['result']['reason']}"
    elif r["f"] == "status":
        said = "leading" if r["result"]["leading"] else "not leading"
    elif r["f"] == "list_networks":
        said = "[" + " ".join(n["name"] + "".join(f" {p['name']}:{p['phase']}" for p in n["peerings"])
                              for n in r["result"]["networks"]) + "]"
    else:
        said = "ok"
    return f"{r['f']} {where} => {said}".replace("  ", " ")


READS = ("get_peering", "list_networks", "get_half", "status")


def touches(read: dict, write: dict) -> bool:
    """Whether ``write`` changes something ``read`` answers about."""
    a, b = read.get("args", {}), write.get("args", {})
    if read["f"] == "status":
        return False
    if read["f"] == "list_networks":
        return b.get("ns") == a.get("ns") or b.get("remote_ns") == a.get("ns")
    same_network = (b.get("ns"), b.get("network")) == (a.get("ns"), a.get("network"))
    return same_network and (b.get("peering") in (None, a.get("peering")))


def draw(history: Path, summary: dict, out: Path, index: int = 0, before: int = 7) -> Path:
    """One row per call: the one that cannot be placed (red), the calls of
    its group running at the same time, and the ``before`` calls that
    answered last before it began (what it should have seen)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    v = summary["violations"][index]
    records = [json.loads(line) for line in history.read_text().splitlines() if line.strip()]
    lease = v["group"] == "lease"
    ops = [r for r in records if r["type"] == "op" and (r["f"] == "status" if lease else r.get("group") == v["group"])]
    culprit = records[v["line"] - 1]
    end = {id(r): (r["return"] if r["outcome"] != "info" and r.get("return") else culprit["return"]) for r in ops}
    concurrent = [r for r in ops if r["call"] <= culprit["return"] and end[id(r)] >= culprit["call"]]
    done = sorted((r for r in ops if end[id(r)] < culprit["call"]), key=lambda r: end[id(r)])
    earlier = done[-before:]
    # And the last writes on what the call reads, however long ago (a stale read shows its write there).
    touching = [r for r in done if r["outcome"] == "ok" and r["f"] not in READS and touches(culprit, r)][-3:]
    rows = sorted({id(r): r for r in earlier + concurrent + touching}.values(), key=lambda r: r["call"])
    t0 = min(r["call"] for r in rows)
    fig, ax = plt.subplots(figsize=(12, 1.3 + 0.32 * len(rows)))
    for n in (r for r in records if r["type"] == "nemesis"):
        if n["start"] <= culprit["return"] and n.get("end", n["start"]) >= t0:
            ax.axvspan((max(n["start"], t0) - t0) / 1e6, (min(n.get("end", n["start"]), culprit["return"]) - t0) / 1e6,
                       color="#fde2c8", zorder=0, label=f"{n['kind']} {n['target']}")
    colours = {"ok": "#9ecae1", "fail": "#d9d9d9", "info": "#fdae6b"}
    labels = []
    nodes = {r.get("node") for r in ops}
    for y, r in enumerate(rows):
        colour = "#e34a33" if r is culprit else colours[r["outcome"]]
        ax.barh(y, max((end[id(r)] - r["call"]) / 1e6, 0.3), left=(r["call"] - t0) / 1e6, height=0.55,
                color=colour, edgecolor="black", linewidth=0.4)
        node = f" @{r['node']}" if len(nodes) > 1 else ""
        labels.append(f"client {r['process']}{node}: {_label(r)}"[:110])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r is culprit:
            tick.set_color("#b30000")
    ax.invert_yaxis()
    ax.set_xlabel("milliseconds")
    ax.set_title(f"lincheck: {summary['verdict']} (group {v['group']}: {v['linearized']} of {v['operations']} "
                 "operations linearized).\nRed: the first call that no order of the others explains. Above it: "
                 "the calls answered just before it began,\nand the last writes on what it reads", fontsize=9, loc="left")
    fig.tight_layout()
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.linearizability.plot")
    p.add_argument("history", type=Path)
    p.add_argument("summary", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--violation", type=int, default=0)
    p.add_argument("--before", type=int, default=7)
    args = p.parse_args(argv)
    try:
        summary = json.loads(args.summary.read_text())
        if not summary.get("violations"):
            raise ValueError(f"{args.summary}: names no violation")
        draw(args.history, summary, args.out, args.violation, args.before)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        print(f"plot: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
