"""The web console in Chromium: ``python -m bench.console [--networks N]
[--peerings N] [--samples N]``.

One netpeerd in this process with its console on loopback and the
dataplane in memory (``--dataplane memory``: the console's pages do not
depend on the dataplane, and filling 1,000 networks into OVN would measure
OVN). Namespace team-a holds ``--networks`` networks, ``--peerings`` of
them peered with networks of team-b (half of the pairs Bound). Debian's
Chromium (through Playwright, the system browser) then loads the networks
page ``--samples`` times and reports, as medians and worst:

- ``server_ms``: the page's HTML from netpeerd (outside the browser);
- ``dom_ms``: navigation start to DOMContentLoaded;
- ``graph_ms``: navigation start to the graph drawn (cytoscape's ready,
  the layout done);
- ``zoom_ms``, ``pan_ms``: a zoom or a pan of the graph to its next frame
  painted, measured in the page;
- ``click_ms``: a click on a node to its handler having run, measured from
  here (it includes Playwright's round trip).

Prints one ``[console] {json}`` line with the load average; nothing is
asserted (docs/performance.md, "The web console", gives the figures).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.deploy import load_average

ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

FRAME = """async ([what, amount]) => {
  const cy = window.netpeerGraph.cy;
  const t0 = performance.now();
  if (what === 'zoom') { cy.zoom({level: cy.zoom() * amount, renderedPosition: {x: 400, y: 240}}); }
  else { cy.panBy({x: amount, y: amount / 2}); }
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""


def _stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "worst": round(max(values), 1), "n": len(values)}


def fill(client, networks: int, peerings: int) -> None:
    from concurrent import futures
    with futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: client.create_network("team-a", f"net-{i:04d}", [f"10.{i // 250}.{i % 250}.0/24"]),
                      range(networks)))
        list(pool.map(lambda i: client.create_network("team-b", f"peer-{i:04d}",
                                                      [f"10.{100 + i // 250}.{i % 250}.0/24"]), range(peerings)))
    halves = [{"namespace": "team-a", "network": f"net-{i:04d}", "name": f"to-b-{i}", "remote_namespace": "team-b",
               "remote_network": f"peer-{i:04d}"} for i in range(peerings)]
    halves += [{"namespace": "team-b", "network": f"peer-{i:04d}", "name": f"to-a-{i}",
                "remote_namespace": "team-a", "remote_network": f"net-{i:04d}"} for i in range(0, peerings, 2)]
    for start in range(0, len(halves), 500):
        client.create_peerings(halves[start:start + 500])


def _server_ms(url: str, cookie: str) -> float:
    """The whole networks page from netpeerd, outside the browser (ms)."""
    import http.client
    host, port = url[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    t0 = time.perf_counter()
    conn.request("GET", "/networks?namespace=team-a", headers={"Cookie": f"netpeer_session={cookie}"})
    conn.getresponse().read()
    conn.close()
    return (time.perf_counter() - t0) * 1000


def measure(url: str, token: str, samples: int) -> dict:
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="np-bench-chromium-")
    out: dict[str, list[float]] = {k: [] for k in ("server_ms", "dom_ms", "graph_ms", "zoom_ms", "pan_ms",
                                                   "click_ms")}
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(profile, executable_path=shutil.which("chromium"),
                                                           headless=True, args=ARGS,
                                                           viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(url + "/signin")
            page.fill("#token", token)
            page.click("#signin")
            page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready", timeout=120000)
            for _ in range(samples):
                page.goto(url + "/networks?namespace=team-a")
                page.wait_for_function("() => window.netpeerGraph && window.netpeerGraph.ready", timeout=120000)
                timing = page.evaluate("[performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd, "
                                       "window.netpeerGraph.drawnAt]")
                out["dom_ms"].append(timing[0])
                out["graph_ms"].append(timing[1])
                for i in range(10):
                    out["zoom_ms"].append(page.evaluate(FRAME, ["zoom", 1.2 if i % 2 else 1 / 1.2]))
                    out["pan_ms"].append(page.evaluate(FRAME, ["pan", 40 if i % 2 else -40]))
                for i in range(5 if page.evaluate("window.netpeerGraph.cy.nodes('.own').length") else 0):
                    node = page.evaluate("(() => { const all = window.netpeerGraph.cy.nodes('.own'); "
                                         "const n = all[%d %% all.length]; "
                                         "const p = n.renderedPosition(); const b = document.getElementById("
                                         "'graph').getBoundingClientRect(); return [n.id(), b.left + p.x, "
                                         "b.top + p.y]; })()" % (i * 7))
                    page.evaluate("window.netpeerGraph.tapped = null")
                    t0 = time.perf_counter()
                    page.mouse.click(node[1], node[2])
                    page.wait_for_function("() => window.netpeerGraph.tapped !== null", timeout=10000)
                    out["click_ms"].append((time.perf_counter() - t0) * 1000)
            elements = page.evaluate("window.netpeerGraph.cy.elements().length")
            cookie = next(c["value"] for c in context.cookies() if c["name"] == "netpeer_session")
            out["server_ms"] = [_server_ms(url, cookie) for _ in range(samples)]
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return {**{k: _stats(v) for k, v in out.items() if v}, "graph_elements": elements}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench.console")
    p.add_argument("--networks", type=int, default=1000)
    p.add_argument("--peerings", type=int, default=200)
    p.add_argument("--samples", type=int, default=5)
    args = p.parse_args(argv)
    from netpeer.api.client import Client
    from netpeer.config import Config
    from netpeer.daemon import Daemon
    from netpeer.core import validate
    from netpeer.core.models import Quotas
    d = Path(tempfile.mkdtemp(prefix="np-bc-", dir="/tmp"))
    admin = "np_admin_" + "b" * 40
    (d / "admin.token").write_text(admin + "\n")
    config = Config(listen=f"unix://{d / 'np.sock'}", store=d / "netpeer.db", ovn_nb="unix:/nonexistent",
                    admin_token_file=d / "admin.token", console_listen="127.0.0.1:0", log_level="WARNING",
                    sweep_interval=validate.ttl("sweep_interval", "1h"),
                    quotas=Quotas(networks_per_namespace=max(1000, args.networks)))
    daemon = Daemon(config, dataplane="memory").start()
    try:
        with Client(config.listen, admin, timeout=60) as c:
            deadline = time.monotonic() + 30
            while not daemon.server.ready and time.monotonic() < deadline:
                time.sleep(0.1)
            token = c.create_token(["team-a"])["token"]
            t0 = time.monotonic()
            fill(c, args.networks, args.peerings)
            filled = time.monotonic() - t0
        figures = measure(f"http://127.0.0.1:{daemon.console_server.port}", token, args.samples)
        record = {"networks": args.networks, "peerings": args.peerings, "fill_s": round(filled, 1), **figures,
                  "load_average": load_average()}
        print(f"[console] {json.dumps(record)}", flush=True)
    finally:
        daemon.stop()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
