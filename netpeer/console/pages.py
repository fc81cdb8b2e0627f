"""The console's pages, rendered on the server (``string.Template``; every
value escaped with ``html.escape``). No inline script or style: the
scripts are /static files (the Content-Security-Policy allows no other),
and data for them travels in ``<script type="application/json">``
elements, which browsers never run. (The stylesheet's id is the one
cytoscape looks for before it adds a ``<style>`` of its own, which the
policy would refuse: console.css holds that rule instead.)"""

from __future__ import annotations

import json
from html import escape
from string import Template
from typing import Any, Iterable

_LAYOUT = Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>$title · netpeer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/console.css" id="__________cytoscape_stylesheet"></head>
<body data-page="$page"><header><strong>netpeer</strong>$nav</header>
<main>$message$body</main>
$scripts<script src="/static/console.js"></script>
</body></html>
""")


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def layout(page: str, title: str, body: str, *, nav: str = "", message: str = "", error: bool = True,
           graph: bool = False) -> bytes:
    """A whole page; ``graph``: with the graph library's script."""
    note = f'<p class="{"error" if error else "note"}" id="message" role="alert">{e(message)}</p>' if message else ""
    scripts = '<script src="/static/cytoscape.min.js"></script>' if graph else ""
    return _LAYOUT.substitute(page=e(page), title=e(title), nav=nav, message=note, body=body,
                              scripts=scripts).encode()


def nav(caller: dict, csrf: str, namespace: str | None) -> str:
    links = [f'<a href="/networks?namespace={e(ns)}"{" class=current" if ns == namespace else ""}>{e(ns)}</a>'
             for ns in caller["namespaces"]]
    if namespace:
        links.append(f'<a href="/inbox?namespace={e(namespace)}" id="inbox-link">inbox</a>')
    if caller["admin"]:
        elsewhere = namespace and namespace not in caller["namespaces"]
        links += [f'<a href="/networks"{" class=current" if elsewhere else ""}>namespaces</a>',
                  '<a href="/admin">region</a>']
    who = "admin" if caller["admin"] else f"token {caller['token_id']}"
    return (f'<nav>{" ".join(links)}</nav><span class="who">{e(who)}</span>'
            f'<form method="post" action="/signout" class="signout"><input type="hidden" name="csrf" '
            f'value="{e(csrf)}"><button type="submit" id="signout">Sign out</button></form>')


def json_data(element_id: str, data: Any) -> str:
    """Data for the scripts: JSON that cannot end its element (``<`` escaped)."""
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{e(element_id)}">{text}</script>'


def signin(csrf: str, message: str = "", error: bool = True) -> bytes:
    body = f"""<h1>Sign in</h1>
<form method="post" action="/signin" class="signin">
<input type="hidden" name="csrf" value="{e(csrf)}">
<label>API token <input type="password" name="token" id="token" autocomplete="off" required></label>
<button type="submit" id="signin">Sign in</button></form>
<p class="hint">The token your operator gave you (<code>netpeer token create</code>): the console sees what the API
shows this token, nothing more. It stays on the server for the session and is never shown again.</p>"""
    return layout("signin", "Sign in", body, message=message, error=error)


def _phase_cell(p: dict) -> str:
    return (f'<td class="phase {e(p.get("phase", "")).lower()}">{e(p.get("phase"))}</td>'
            f'<td class="dataplane">{e(p.get("dataplane") or "")}</td><td class="reason">{e(p.get("reason"))}</td>')


def remote_label(p: dict) -> str:
    site = f"{p['remote_site']}:" if p.get("remote_site") else ""
    return f"{site}{p['remote_namespace']}/{p['remote_network']}"


def networks(namespace: str, rows: list[dict], peerings: dict[str, list[dict]], graph: dict, csrf: str,
             graph_ready: bool) -> str:
    """The namespace's networks, the graph of their peerings and a form to consent to one."""
    table = []
    for n in rows:
        table.append(f'<tr class="network" data-network="{e(n["name"])}"><th>{e(n["name"])}</th>'
                     f'<td>{e(", ".join(n["subnets"]))}</td><td class="count">{len(peerings.get(n["name"], []))}'
                     f'</td></tr>')
    prows = []
    for net, items in sorted(peerings.items()):
        for p in items:
            href = f"/peering?namespace={e(namespace)}&amp;network={e(net)}&amp;name={e(p['name'])}"
            prows.append(f'<tr class="peering" data-peering="{e(net)}/{e(p["name"])}"><td>{e(net)}</td>'
                         f'<td><a href="{href}">{e(p["name"])}</a></td><td>{e(remote_label(p))}</td>'
                         f'{_phase_cell(p)}</tr>')
    missing = "" if graph_ready else ('<p class="error" id="graph-missing">The graph library is not installed on '
                                      "this netpeerd (scripts/setup.sh puts cytoscape.min.js in console_assets): "
                                      "the tables below show everything.</p>")
    options = "".join(f'<option value="{e(n["name"])}">{e(n["name"])}</option>' for n in rows[:2000])
    return f"""<h1>Namespace {e(namespace)}</h1>
{missing}<div id="graph" aria-label="graph of the peerings"></div>
{json_data("graph-data", graph)}
<section><h2>Peerings</h2><table id="peerings"><thead><tr><th>network</th><th>peering</th><th>remote</th>
<th>phase</th><th>dataplane</th><th>reason</th></tr></thead><tbody>{"".join(prows)}</tbody></table></section>
<section><h2>Consent to a peering</h2>
<form method="post" action="/peerings" class="consent"><input type="hidden" name="csrf" value="{e(csrf)}">
<input type="hidden" name="namespace" value="{e(namespace)}">
<label>network <select name="network" id="consent-network">{options}</select></label>
<label>name <input name="name" id="consent-name" required></label>
<label>remote namespace <input name="remote_namespace" id="consent-remote-namespace"></label>
<label>remote network <input name="remote_network" id="consent-remote-network" required></label>
<label>remote site <input name="remote_site" id="consent-remote-site"></label>
<button type="submit" id="consent">Consent</button></form></section>
<section><h2>Networks ({len(rows)})</h2><table id="networks"><thead><tr><th>network</th><th>subnets</th>
<th>peerings</th></tr></thead><tbody>{"".join(table)}</tbody></table></section>"""


def inbox(namespace: str, requests: list[dict], csrf: str) -> str:
    """The requests to the namespace's networks, each with accept and dismiss."""
    rows = "".join(_request_row(namespace, r, csrf) for r in requests)
    return f"""<h1>Inbox of {e(namespace)}</h1>
<p class="hint">Halves of other namespaces naming your networks, with no matching half yet. Accepting creates the
matching half (so both halves exist, as always); dismissing hides the request from this list. The requester sees no
difference either way.</p>
<table id="requests" data-namespace="{e(namespace)}" data-csrf="{e(csrf)}"><thead><tr><th>to network</th>
<th>from</th><th>prefixes</th><th>created</th><th>expires</th><th>accept as</th><th></th></tr></thead>
<tbody>{rows}</tbody></table>
<p id="no-requests"{' hidden' if requests else ''}>No request is waiting.</p>"""


def accept_name(r: dict) -> str:
    """A name for the half that accepting ``r`` creates (the user may change it)."""
    return f"from-{r['requester_namespace']}-{r['requester_network']}"[:63].rstrip("-.")


def _request_row(namespace: str, r: dict, csrf: str) -> str:
    hidden = (f'<input type="hidden" name="csrf" value="{e(csrf)}"><input type="hidden" name="namespace" '
              f'value="{e(namespace)}"><input type="hidden" name="network" value="{e(r["network"])}">'
              f'<input type="hidden" name="request" value="{e(r["id"])}">')
    return (f'<tr class="request" data-request="{e(r["id"])}"><td>{e(r["network"])}</td>'
            f'<td>{e(r["requester_namespace"])}/{e(r["requester_network"])} ({e(r["requester_peering"])})</td>'
            f'<td>{e(", ".join(r["prefixes"]))}</td><td>{e(r["create_time"])}</td><td>{e(r["expires_at"])}</td>'
            f'<td><form method="post" action="/inbox/accept" class="accept">{hidden}'
            f'<input name="name" value="{e(accept_name(r))}" required><button type="submit">Accept</button></form></td>'
            f'<td><form method="post" action="/inbox/dismiss" class="dismiss">{hidden}'
            f'<button type="submit">Dismiss</button></form></td></tr>')


def pick_namespace(message: str = "") -> str:
    return """<h1>Namespaces</h1><form method="get" action="/networks"><label>namespace
<input name="namespace" id="namespace" required></label><button type="submit">Show</button></form>"""


def peering(namespace: str, p: dict) -> str:
    fields = [("network", f"{namespace}/{p['network']}"), ("remote", remote_label(p)), ("phase", p["phase"]),
              ("reason", p["reason"]), ("message", p["message"]), ("dataplane", p["dataplane"]),
              ("programmed at", p["programmed_at"]), ("expires at", p["expires_at"]),
              ("created", p["create_time"])]
    dl = "".join(f'<dt>{e(k)}</dt><dd id="f-{e(k.replace(" ", "-"))}">{e(v)}</dd>' for k, v in fields)
    return f"""<h1>Peering {e(p['network'])}/{e(p['name'])}</h1>
<dl class="peering">{dl}</dl>
<h2>History <small>(live)</small></h2>
<ol id="history" data-namespace="{e(namespace)}" data-network="{e(p['network'])}" data-name="{e(p['name'])}"></ol>"""


def admin(status: dict) -> str:
    sites = "".join(
        f'<tr class="site" data-site="{e(s["site"])}"><th>{e(s["site"])}</th>'
        f'<td class="reachable {"yes" if s["reachable"] else "no"}">{"yes" if s["reachable"] else "no"}</td>'
        f'<td>{e(s["last_ok_time"] or "never")}</td><td>{e(s["slots_used"])} / {e(s["capacity"])}</td>'
        f'<td>{e(s["pending_changes"])}</td><td class="last-error">{e(s["last_error"])}</td></tr>'
        for s in status["sites"])
    last = status["last_sweep"] or {}
    leader = status["leader"] or "(one netpeerd, no replicas)"
    connected = "connected" if status["dataplane_connected"] else "NOT connected"
    return f"""<h1>Region</h1>
<dl class="status"><dt>site</dt><dd id="site">{e(status['site'] or '(none)')}</dd>
<dt>version</dt><dd>{e(status['version'])}</dd>
<dt>dataplane</dt><dd>{e(status['dataplane'])} ({connected})</dd>
<dt>replica</dt><dd>{e(status['replica'] or '-')}</dd><dt>leader</dt><dd id="leader">{e(leader)}</dd></dl>
<h2>Links to other sites</h2>
<table id="sites"><thead><tr><th>site</th><th>reachable</th><th>last exchange</th><th>slots used / capacity</th>
<th>pending changes</th><th>last error</th></tr></thead><tbody>{sites}</tbody></table>
<h2>Sweeps</h2>
<dl class="sweeps"><dt>sweeps</dt><dd id="sweeps">{e(status['sweeps'])}</dd>
<dt>last</dt><dd>{e(status['last_sweep_start_time'])} – {e(status['last_sweep_end_time'])}:
expired {e(last.get('expired', 0))}, repaired rows {e(last.get('repaired_rows', 0))},
errors {e(last.get('errors', 0))}</dd>
<dt>in all</dt><dd>expired {e(status['sweep_totals']['expired'])}, repaired rows
{e(status['sweep_totals']['repaired_rows'])}, errors {e(status['sweep_totals']['errors'])}</dd></dl>"""


def graph(namespace: str, rows: Iterable[dict], peerings: dict[str, list[dict]]) -> dict:
    """Cytoscape's elements: this namespace's networks that have peerings,
    and the networks they name, grouped by namespace and site (compound
    nodes) so that remote ones are drawn apart."""
    nodes, edges, groups = {}, [], {}
    for n in rows:
        if peerings.get(n["name"]):
            nodes[f"n:{n['name']}"] = {"data": {"id": f"n:{n['name']}", "label": n["name"]}, "classes": "own"}
    for net, items in peerings.items():
        for p in items:
            remote_ns = p["remote_namespace"] or namespace
            site = p.get("remote_site") or ""
            if remote_ns == namespace and not site:
                target = f"n:{p['remote_network']}"
                nodes.setdefault(target, {"data": {"id": target, "label": p["remote_network"]}, "classes": "own"})
            else:
                group = f"g:{site}/{remote_ns}"
                groups[group] = {"data": {"id": group, "label": f"{remote_ns} @ {site}" if site else remote_ns},
                                 "classes": "group remote-site" if site else "group"}
                target = f"r:{site}/{remote_ns}/{p['remote_network']}"
                nodes[target] = {"data": {"id": target, "label": p["remote_network"], "parent": group},
                                 "classes": "remote"}
            edges.append({"data": {"id": f"e:{net}/{p['name']}", "source": f"n:{net}", "target": target,
                                   "phase": p["phase"], "dataplane": p.get("dataplane") or "",
                                   "label": _edge_label(p)}, "classes": p["phase"].lower()})
    return {"namespace": namespace, "elements": list(groups.values()) + list(nodes.values()) + edges}


def _edge_label(p: dict) -> str:
    return f"{p['phase']}" + (f" · {p['dataplane']}" if p.get("dataplane") else "")
