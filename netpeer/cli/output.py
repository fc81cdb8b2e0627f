"""Tables for people (like ``lxc network peer ls``) and JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], *(len(line) for line in v.split("\n")))
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [sep, "|" + "|".join(f" {h:<{w}} " for h, w in zip(headers, widths)) + "|", sep]
    for row in cells:
        lines = [v.split("\n") for v in row]
        for k in range(max(len(x) for x in lines) if lines else 1):
            out.append("|" + "|".join(f" {(x[k] if k < len(x) else ''):<{w}} " for x, w in zip(lines, widths)) + "|")
    out.append(sep)
    return "\n".join(out)


def emit(data: Any, fmt: str, render) -> None:
    if fmt == "json":
        json.dump(data, sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(data) + "\n")


def remote(p: dict) -> str:
    """[SITE:]NS/NETWORK of a peering's remote network."""
    where = f"{p['remote_namespace']}/{p['remote_network']}"
    return f"{p['remote_site']}:{where}" if p.get("remote_site") else where


def _peer(x: dict) -> str:
    where = f"{x['namespace']}/{x['name']}"
    return f"{x['site']}:{where}" if x.get("site") else where


_PEERING_COLUMNS = ["NAME", "DESCRIPTION", "PEER", "STATE", "REASON", "DATAPLANE", "SINCE", "EXPIRES"]


def _peering_row(p: dict) -> list:
    return [p["name"], p["description"], remote(p), p["phase"], p["reason"], p.get("dataplane", ""),
            p["last_phase_transition_time"], p["expires_at"] or ""]


def peerings_table(items: list[dict]) -> str:
    return table(_PEERING_COLUMNS, [_peering_row(p) for p in items])


def batch_table(items: list[dict]) -> str:
    """``peerings_table`` with each peering's network first: a batch spans networks."""
    return table(["NETWORK", *_PEERING_COLUMNS], [[p["network"], *_peering_row(p)] for p in items])


def peering_detail(p: dict) -> str:
    keys = ["name", "namespace", "network", "remote_site", "remote_namespace", "remote_network", "remote_uid", "phase",
            "reason", "message", "dataplane", "programmed_at", "last_phase_transition_time", "expires_at", "ttl",
            "description", "create_time"]
    width = max(len(k) for k in keys)
    return "\n".join(f"{k + ':':<{width + 1}} {'' if p.get(k) is None else p.get(k)}" for k in keys)


def requests_table(items: list[dict]) -> str:
    """The requests to a namespace's networks (``netpeer peering requests``)."""
    return table(["NETWORK", "REQUEST", "FROM", "PREFIXES", "CREATED", "EXPIRES"],
                 [[r["network"], r["id"], f"{r['requester_namespace']}/{r['requester_network']}",
                   "\n".join(r["prefixes"]), r["create_time"], r["expires_at"] or ""] for r in items])


def networks_table(items: list[dict]) -> str:
    return table(["NAME", "UID", "SUBNETS", "ROUTES", "PEERINGS", "BOUND PEERS", "DESCRIPTION"],
                 [[n["name"], n["uid"], "\n".join(n["subnets"]), "\n".join(n["routes"]), len(n["peerings"]),
                   "\n".join(_peer(x) for x in n["peered_networks"]), n["description"]]
                  for n in items])


def network_detail(n: dict) -> str:
    lines = [f"name:        {n['name']}", f"namespace:   {n['namespace']}", f"uid:         {n['uid']}",
             f"description: {n['description']}", "subnets:"] + [f"  - {s}" for s in n["subnets"]]
    lines += ["routes:"] + [f"  - {r}" for r in n["routes"]]
    lines += ["peerings:"] + [
        f"  - {p['name']}: {remote(p)} {p['phase']} ({p['reason']}) "
        f"since {p['last_phase_transition_time']}" for p in n["peerings"]]
    more = n.get("peering_count", 0) - len(n["peerings"])
    if more > 0:
        lines.append(f"  ... and {more} more (netpeer peering list {n['name']})")
    lines += ["peered_networks:"] + [
        f"  - {_peer(x)} ({x['uid']})" + (f": {', '.join(x['prefixes'])}" if x.get("prefixes") else "")
        for x in n["peered_networks"]]
    return "\n".join(lines)


def status_detail(s: dict) -> str:
    def report(r: dict | None) -> str:
        if not r:
            return "none yet"
        return f"{r['expired']} expired, {r['repaired_rows']} OVN rows repaired, {r['errors']} errors"
    return "\n".join([
        f"version:     {s['version']}",
        f"dataplane:   {_dataplane(s.get('dataplane', ''))}{'connected' if s['dataplane_connected'] else 'UNREACHABLE'}",
        f"sweeps:      {s['sweeps']} since start",
        f"last sweep:  {report(s['last_sweep'])}"
        + (f" ({s['last_sweep_start_time']} .. {s['last_sweep_end_time']})" if s["last_sweep"] else ""),
        f"all sweeps:  {report(s['sweep_totals'])}"] + _replica(s) + _sites(s))


def _dataplane(kind: str) -> str:
    """What netpeerd programs, before its state: the simulation says so."""
    return {"": "", "memory": "memory (simulation: no traffic), "}.get(kind, f"{kind}, ")


def _replica(s: dict) -> list[str]:
    if not s.get("replica"):
        return []
    return [f"replica:     {s['replica']}", f"leader:      {s['leader'] or 'none (lease free)'}"
            + (" (this replica)" if s.get("leading") else "")]


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _sites(s: dict) -> list[str]:
    if not s.get("site"):
        return []
    lines = [f"site:        {s['site']}"]
    for x in s.get("sites", []):
        state = "reachable" if x["reachable"] else f"UNREACHABLE ({x['last_error'] or 'not tried yet'})"
        if x.get("diverged"):
            state += "; DIVERGED (a full copy did not match its digest: see the log)"
        lines.append(f"  link to {x['site']}: {state}; last ok {x['last_ok_time'] or 'never'}; "
                     f"{x['exchanges']} exchanges, {x['failures']} failed")
        lines.append(f"    tells {x.get('items_told', 0)} items ({x.get('pending_changes', 0)} changes not yet "
                     f"acknowledged), holds {x.get('items_held', 0)} of theirs; "
                     f"{_bytes(x.get('bytes_sent', 0))} sent, {_bytes(x.get('bytes_received', 0))} received; "
                     f"full copies {x.get('resyncs_sent', 0)} sent, {x.get('resyncs_received', 0)} received")
        top = ", ".join(f"{t['namespace']} {t['slots']}" for t in x.get("top_namespaces", []))
        lines.append(f"    slots: {x.get('slots_used', 0)} of {x.get('capacity', 0)} used"
                     + (f" (most: {top})" if top else ""))
    return lines


def tokens_table(items: list[dict]) -> str:
    return table(["TOKEN ID", "NAMESPACES", "ADMIN", "DESCRIPTION", "CREATED", "EXPIRES"],
                 [[t["token_id"], ", ".join(t["namespaces"]), t["admin"], t["description"], t["create_time"],
                   t["expires_at"] or "never"] for t in items])


def event_line(e: dict) -> str:
    """``REVISION TYPE KIND NS/NETWORK[/PEERING] [PHASE REASON DATAPLANE: MESSAGE]``"""
    if e["type"] == "Bookmark":
        return f"{e['revision']:>8}  Bookmark      (watching from here)"
    what = f"{e['namespace']}/{e['network']}" + (f"/{e['name']}" if e["kind"] != "network" else "")
    line = f"{e['revision']:>8}  {e['type']:<12}  {e['kind']:<7}  {what}"
    if "phase" in e:
        line += f"  {e['phase']} ({e['reason']}) dataplane {e['dataplane']}: {e['message']}"
    return line
