"""``python -m bench.metrics_timeline [--out FILE.png]``: netpeerd's metrics
during a short workload, scraped every half second from its Prometheus
endpoint and drawn (docs/img/metrics.png): what an operator's dashboard shows.

The workload: 40 networks created, 40 pairs bound by two tenants, 20
consents that fail on overlapping prefixes, then every pair withdrawn.
"""

from __future__ import annotations

import argparse
import re
import socket
import threading
import time
import urllib.request
from pathlib import Path

from bench.deploy import ADMIN_TOKEN, Deployment, load_average


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(url: str) -> dict[str, float]:
    out = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def workload(client, n: int = 40) -> None:
    for i in range(n):
        client.create_network("a", f"a{i}", [f"10.1.{i}.0/24"])
        client.create_network("b", f"b{i}", [f"10.2.{i}.0/24"])
    time.sleep(2)
    for i in range(n):
        client.create_peering("a", f"a{i}", "to-b", f"b{i}", "b")
        client.create_peering("b", f"b{i}", "to-a", f"a{i}", "a")
    time.sleep(2)
    for i in range(n // 2):   # overlapping prefixes: both halves Failed
        client.create_network("c", f"c{i}", [f"10.1.{i}.0/25"])
        client.create_peering("c", f"c{i}", "to-a", f"a{i}", "a")
        client.create_peering("a", f"a{i}", "to-c", f"c{i}", "c")
    time.sleep(2)
    for i in range(n):
        client.delete_peering("a", f"a{i}", "to-b")
    time.sleep(2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.metrics_timeline")
    p.add_argument("--out", default="results/metrics.png")
    args = p.parse_args(argv)
    port = _free_port()
    samples: list[tuple[float, dict]] = []
    with Deployment(chassis=False, settings={"metrics_listen": f"127.0.0.1:{port}"}) as d:
        d.start_ovn()
        d.start_netpeerd()
        url = f"http://127.0.0.1:{port}/metrics"
        done = threading.Event()

        def sampler():
            t0 = time.monotonic()
            while not done.is_set():
                samples.append((time.monotonic() - t0, scrape(url)))
                done.wait(0.5)
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        time.sleep(2)
        from netpeer.api.client import Client
        with Client(d.endpoint, ADMIN_TOKEN) as c:
            workload(c)
        done.set()
        thread.join(5)
    draw(samples, Path(args.out), load_average())
    print(f"wrote {args.out} ({len(samples)} scrapes)")
    return 0


def _rate(samples, key_filter) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        total = sum(v for k, v in b.items() if key_filter(k)) - sum(v for k, v in a.items() if key_filter(k))
        xs.append(t1)
        ys.append(total / (t1 - t0))
    return xs, ys


def _quantile(samples, method: str, q: float) -> tuple[list[float], list[float]]:
    """Latency quantile of ``method`` per interval, from the histogram's buckets."""
    xs, ys = [], []
    bound = re.compile(r'le="([^"]+)"')
    for (_, a), (t1, b) in zip(samples, samples[1:]):
        buckets = sorted((float(bound.search(k).group(1).replace("+Inf", "inf")), b[k] - a.get(k, 0))
                         for k in b if k.startswith("netpeer_rpc_duration_seconds_bucket")
                         and f'method="{method}"' in k)
        total = buckets[-1][1] if buckets else 0
        if total <= 0:
            continue
        le = next(le for le, n in buckets if n >= q * total)
        xs.append(t1)
        ys.append(le * 1000)
    return xs, ys


def draw(samples, out: Path, load) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.4))
    ax = axes[0][0]
    for method in ("CreateNetwork", "CreatePeering", "DeletePeering"):
        ax.plot(*_rate(samples, lambda k, m=method: k.startswith("netpeer_rpc_requests_total")
                       and f'method="{m}"' in k), label=method)
    ax.set_title("RPCs per second (netpeer_rpc_requests_total)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[0][1]
    for q in (0.5, 0.99):
        ax.step(*_quantile(samples, "CreatePeering", q), where="post", label=f"CreatePeering p{int(q * 100)}")
    ax.set_title("latency, ms (netpeer_rpc_duration_seconds, bucket bound)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1][0]
    for phase in ("Pending", "Bound", "Failed"):
        ax.plot([t for t, _ in samples], [s.get(f'netpeer_peerings{{phase="{phase}"}}', 0) for _, s in samples],
                label=phase)
    ax.set_title("peerings by phase (netpeer_peerings)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1][1]
    ax.plot(*_rate(samples, lambda k: k.startswith('netpeer_ovn_transaction_seconds_count{kind="sync"}')),
            label="OVN NB transactions/s")
    ax.plot(*_rate(samples, lambda k: k == "netpeer_programmed_peerings_total"), label="peerings programmed/s")
    ax.set_title("OVN side (netpeer_ovn_transaction_seconds, netpeer_programmed_peerings_total)", fontsize=9)
    ax.legend(fontsize=7)
    for row in axes:
        for a in row:
            a.set_xlabel("seconds", fontsize=8)
            a.tick_params(labelsize=7)
    fig.suptitle(f"netpeerd's metrics during a short workload (load average {load[0]:.1f})", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
