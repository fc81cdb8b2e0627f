"""``make demo-sites`` / ``make demo-sites-down``: a peering across two sites.

``python -m netpeer_dev.demo_sites up`` runs, with the real CLI, what two
tenants in two sites do: ``netpeer dev up --sites east,west`` (two OVN sites
joined by OVN Interconnection over WireGuard, a netpeerd per site), team-a
in east creates ``net-a`` and consents to ``west:team-b/net-b`` (Pending),
team-b in west creates ``net-b`` and consents to ``east:team-a/net-a``; both
halves show Bound, an instance in each network pings the other across the
sites (IPv4 and IPv6), and a summary gives the time from the second consent
to the first ping. Re-running is safe: what exists is re-used.

``python -m netpeer_dev.demo_sites down`` runs ``netpeer dev down --purge``
and checks that no process, namespace or state is left.

State: ``$NETPEER_DEMO_SITES_DIR``, else ``$NETPEER_DEV_DIR``, else
``~/.local/state/netpeer/demo-sites``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_DIR = Path.home() / ".local/state/netpeer/demo-sites"
# site, namespace, network, subnets, peering, remote, instance, address
TENANTS = (("east", "team-a", "net-a", ("10.1.0.0/24", "fd00:a::/64"), "to-b", "west:team-b/net-b", "vm-a",
            "10.1.0.10"),
           ("west", "team-b", "net-b", ("10.2.0.0/24", "fd00:b::/64"), "to-a", "east:team-a/net-a", "vm-b",
            "10.2.0.10"))


class DemoError(RuntimeError):
    pass


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def netpeer(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    print(f"$ netpeer {' '.join(args)}", flush=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    proc = subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise DemoError(f"netpeer {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
    return proc


def ping(netns: str, address: str, count: int = 1, timeout: float = 1) -> bool:
    return subprocess.run(["ip", "netns", "exec", netns, "ping", "-n", "-q", "-c", str(count), "-W", f"{timeout:g}",
                           address], capture_output=True).returncode == 0


def up(state: Path) -> int:
    step("two sites, each with its OVN, gateway, WireGuard router and netpeerd")
    t0 = time.monotonic()
    exports = netpeer("dev", "up", "--sites", "east,west", "--state-dir", str(state)).stdout
    env = dict(line[len("export "):].split("=", 1) for line in exports.splitlines() if line.startswith("export "))
    brought_up = time.monotonic() - t0
    print(f"   up in {brought_up:.1f} s")
    tenants = {}
    for site, ns, net, subnets, peering, remote, vm, ip in TENANTS:
        admin = {"NETPEER_ENDPOINT": env[f"NETPEER_ENDPOINT_{site.upper()}"],
                 "NETPEER_TOKEN": env[f"NETPEER_TOKEN_{site.upper()}"]}
        token = json.loads(netpeer("token", "create", "--namespace", ns, "--description", "demo-sites", "-o",
                                   "json", env=admin).stdout)["token"]
        tenants[site] = {**admin, "NETPEER_TOKEN": token}
    for site, ns, net, subnets, peering, remote, vm, ip in TENANTS:
        step(f"{ns} in {site}: network {net} and an instance")
        if netpeer("network", "show", net, "-n", ns, env=tenants[site], check=False).returncode != 0:
            netpeer("network", "create", net, "-n", ns, *[a for s in subnets for a in ("--subnet", s)],
                    env=tenants[site])
        ip6 = subnets[1].split("/")[0] + "a"
        inst = json.loads(netpeer("dev", "instance", "add", f"{ns}/{net}", vm, "--ip", ip, "--ip", ip6,
                                  "--state-dir", str(state), "-o", "json", env=tenants[site]).stdout)
        tenants[site]["netns"] = inst["netns"]
    (a_site, a_ns, a_net, _, a_peering, a_remote, _, a_ip), (b_site, b_ns, b_net, _, b_peering, b_remote, _, b_ip) \
        = TENANTS
    step(f"{a_ns} consents in {a_site}: {a_net} with {a_remote}")
    if netpeer("peering", "show", a_net, a_peering, "-n", a_ns, env=tenants[a_site], check=False).returncode:
        netpeer("peering", "create", a_net, a_peering, a_remote, "-n", a_ns, env=tenants[a_site])
    print(netpeer("peering", "show", a_net, a_peering, "-n", a_ns, env=tenants[a_site]).stdout.rstrip())
    step(f"{b_ns} consents in {b_site}: {b_net} with {b_remote}")
    t_consent = time.monotonic()   # from the start of the CLI process that consents (Python start included)
    if netpeer("peering", "show", b_net, b_peering, "-n", b_ns, env=tenants[b_site], check=False).returncode:
        t_consent = time.monotonic()
        netpeer("peering", "create", b_net, b_peering, b_remote, "-n", b_ns, env=tenants[b_site])
    first_ping = None
    while time.monotonic() - t_consent < 60:
        if ping(tenants[b_site]["netns"], a_ip, timeout=0.2):
            first_ping = time.monotonic() - t_consent
            break
    if first_ping is None:
        raise DemoError(f"no ping from {b_site} to {a_ip} within 60 s of the second consent")
    for site, ns, net, _, peering, *_ in TENANTS:
        shown = json.loads(netpeer("peering", "show", net, peering, "-n", ns, "-o", "json", env=tenants[site]).stdout)
        print(f"   {site}: {ns}/{net} {peering} -> {shown.get('remote_site')}: {shown['phase']} ({shown['reason']})")
        if shown["phase"] != "Bound":
            raise DemoError(f"{site}: {ns}/{net} {peering} is {shown['phase']}, not Bound")
    step("ping across the sites, both ways, IPv4 and IPv6")
    results = []
    for (src, dst, addrs) in ((a_site, b_site, (b_ip, "fd00:b::a")), (b_site, a_site, (a_ip, "fd00:a::a"))):
        for addr in addrs:
            ok = ping(tenants[src]["netns"], addr, count=3, timeout=2)
            results.append(ok)
            print(f"   {src} -> {dst} {addr}: {'ok' if ok else 'FAILED'}")
    step("summary")
    print(f"   dev stack up: {brought_up:.1f} s; second consent (the CLI process) -> first ping across sites: "
          f"{first_ping:.3f} s; pings: {sum(results)}/{len(results)}")
    print(f"   state: {state}; tear down with: make demo-sites-down")
    if not all(results):
        raise DemoError("a ping across the sites failed")
    return 0


def down(state: Path) -> int:
    if not (state / "sites.json").exists():
        print(f"nothing to tear down: {state / 'sites.json'} does not exist")
        if state.exists() and not any(state.iterdir()):
            state.rmdir()
        return 0
    status = json.loads(netpeer("dev", "status", "--state-dir", str(state), "-o", "json").stdout)
    pids = {d["name"]: d["pid"] for d in status["daemons"] if d.get("pid")}
    namespaces = json.loads((state / "sites.json").read_text())["namespaces"]
    netns_of = [i.get("netns") for i in status["instances"] if i.get("netns")]
    step("netpeer dev down --purge")
    proc = netpeer("dev", "down", "--purge", "--state-dir", str(state), check=False)
    sys.stdout.write(proc.stderr)
    step("check: nothing left behind")
    from netpeer_dev.proc import alive as running   # a zombie awaiting its reaper counts as gone
    alive = [f"{n} {p}" for n, p in pids.items() if running(p)]
    left = [ns for ns in namespaces + netns_of if Path("/run/netns", ns).exists()]
    print(f"   processes alive: {alive or 'none'} (of {len(pids)}); namespaces left: {left or 'none'}; "
          f"state dir: {'still there' if state.exists() else 'removed'}")
    if proc.returncode != 0 or alive or left or state.exists():
        raise DemoError("something was left behind")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netpeer_dev.demo_sites", description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("up", "down"))
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.stderr.write("demo-sites: needs root (network namespaces, Open vSwitch, tun devices)\n")
        return 1
    state = Path(os.environ.get("NETPEER_DEMO_SITES_DIR") or os.environ.get("NETPEER_DEV_DIR") or DEFAULT_DIR)
    try:
        return up(state) if args.action == "up" else down(state)
    except DemoError as exc:
        sys.stderr.write(f"\ndemo-sites: error: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
