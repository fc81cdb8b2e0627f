"""Pulumi overhead of both faces of netpeer's provider, with the real CLI
(``scripts/install-pulumi.sh``), offline, as tests/e2e runs it.

For each size (resources: half networks, half peerings that bind them in
pairs) and each face, ``pulumi up`` / ``refresh`` / ``up`` with no changes /
``destroy`` are timed for netpeer's resources and for a do-nothing resource
of the same shape served the same way:

- dynamic face: a Python program, netpeer's dynamic providers against
  ``bench/pulumi_noop.py`` (a do-nothing dynamic resource);
- plugin face: a YAML program, ``pulumi-resource-netpeer`` against
  ``bench/noop_plugin.py`` (a do-nothing plugin on the same Python server).

Every operation is timed until the CLI returns and until the system is
quiescent again (``ovn-nbctl --wait=sb sync``: ovn-northd has turned the NB
changes into logical flows). On two shared cores northd's work after a write
competes with whichever stack runs, so the overhead is computed on the
second: the stacks and the direct calls are all measured to quiescence.

The do-nothing resources get the same inputs and give outputs of the same
names and sizes as netpeer's, so the engine's own work (serialising, diffing,
checkpointing the state) is the same for both. The floor of a face is the
do-nothing stack's time (Pulumi's own cost per resource) plus the service's
own cost for the calls netpeer's provider makes in that operation, made
directly with one client at the provider's concurrency (same run). The
overhead is netpeer's time over that floor.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from bench.deploy import ADMIN_TOKEN, ROOT, Deployment
from netpeer.api.client import Client

PASSPHRASE = "netpeer-bench"
OPS = ("up", "refresh", "up (no changes)", "destroy")
# face -> (netpeer kind, do-nothing kind, concurrency of the provider's calls)
FACES = {"dynamic": ("netpeer", "noop", 8),      # netpeer's dynamic-provider host serves 8 calls at once
         "plugin": ("plugin", "noop-plugin", 8)}  # the engine runs 8 steps at once on 2 cores (4 x CPUs)


def toolchain() -> Path:
    """The CLI's bin directory, with the YAML host linked next to it."""
    outs = {}
    for script in ("install-pulumi.sh", "install-pulumi-languages.sh"):
        out = subprocess.run(["bash", str(ROOT / "scripts" / script)], capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/{script} failed: {out.stderr.strip().splitlines()[-1:]}")
        outs[script] = out.stdout.strip().splitlines()[-1]
    return Path(outs["install-pulumi.sh"])


def layout(count: int) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(network, subnet) and (network, peering, remote network): network 2k and 2k+1 consent to each other."""
    nets = count // 2
    networks = [(f"n{i}", f"10.{100 + i // 256}.{i % 256}.0/24") for i in range(nets)]
    peerings = []
    for k in range(count - nets):
        j = k ^ 1 if (k ^ 1) < nets else (k + 1) % nets
        peerings.append((f"n{k % nets}", f"to-n{j}", f"n{j}"))
    return networks, peerings


def yaml_program(kind: str, count: int, ns: str) -> str:
    """The plugin faces' program: COUNT resources of package ``netpeer`` or ``noop``, as YAML."""
    pkg = "netpeer" if kind == "plugin" else "noop"
    networks, peerings = layout(count)
    doc = {"name": f"bench-{kind}", "runtime": "yaml", "resources": {}}
    for name, subnet in networks:
        doc["resources"][name] = {"type": f"{pkg}:index:Network",
                                  "properties": {"namespace": ns, "name": name, "subnets": [subnet]}}
    for k, (net, name, remote) in enumerate(peerings):
        doc["resources"][f"p{k}"] = {"type": f"{pkg}:index:NetworkPeering", "properties": {
            "namespace": ns, "network": f"${{{net}.name}}", "name": name, "remoteNetwork": f"${{{remote}.name}}"}}
    return json.dumps(doc, indent=1)  # JSON is YAML


def install_noop_plugin(env: dict[str, str], binary: Path, work: Path) -> None:
    d = work / "noop-plugin"
    d.mkdir(exist_ok=True)
    launcher = d / "pulumi-resource-noop"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bench.noop_plugin "$@"\n')
    launcher.chmod(0o755)
    subprocess.run(["tar", "-C", str(d), "-czf", str(d / "noop.tgz"), "pulumi-resource-noop"], check=True)
    subprocess.run([str(binary / "pulumi"), "plugin", "install", "resource", "noop", "0.0.1", "--file",
                    str(d / "noop.tgz"), "--reinstall", "--non-interactive"], env=env, check=True,
                   capture_output=True)


class Stack:
    def __init__(self, kind: str, count: int, workdir: Path, binary: Path, endpoint: str):
        self.dir = workdir / f"{kind}-{count}"
        ns = f"pb-{kind}-{count}"
        if kind in ("plugin", "noop-plugin"):
            self.dir.mkdir(parents=True)
            (self.dir / "Pulumi.yaml").write_text(yaml_program(kind, count, ns))
        else:
            shutil.copytree(Path(__file__).parent / "programs" / kind, self.dir)
            project = self.dir / "Pulumi.yaml"
            project.write_text(project.read_text().replace("VENV", sys.prefix))
        home, backend = workdir / "home", workdir / "backend"
        home.mkdir(exist_ok=True)
        backend.mkdir(exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("NETPEER_", "PULUMI_"))}
        self.env.update(PATH=f"{binary}:{self.env.get('PATH', '')}", PULUMI_HOME=str(home),
                        PULUMI_BACKEND_URL=f"file://{backend}", PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
                        PULUMI_SKIP_UPDATE_CHECK="true", PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
                        PULUMI_SKIP_CONFIRMATIONS="true", NO_COLOR="1", PULUMI_PYTHON_CMD=sys.executable,
                        PYTHONPATH=str(ROOT))
        if kind == "plugin":
            subprocess.run(["bash", str(ROOT / "scripts/install-pulumi-plugin.sh")], check=True, capture_output=True,
                           env={**self.env, "NETPEER_PYTHON": sys.executable})
        elif kind == "noop-plugin":
            install_noop_plugin(self.env, binary, workdir)
        self.run("stack", "init", f"bench-{count}")  # one backend for all stacks of a run
        if kind in ("netpeer", "noop"):
            self.run("config", "set", "count", str(count))
            self.run("config", "set", "namespace", ns)
        self.run("config", "set", "netpeer:endpoint", endpoint)
        self.run("config", "set", "--secret", "netpeer:token", ADMIN_TOKEN)

    def run(self, *args: str, timeout: float = 900) -> float:
        t = time.perf_counter()
        proc = subprocess.run(["pulumi", *args, "--non-interactive", "--color", "never"], cwd=self.dir,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        elapsed = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"pulumi {' '.join(args)} in {self.dir} failed ({proc.returncode}):\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return elapsed

    def resources(self) -> int:
        proc = subprocess.run(["pulumi", "stack", "export"], cwd=self.dir, env=self.env, capture_output=True,
                              text=True, timeout=120, check=True)
        res = json.loads(proc.stdout)["deployment"].get("resources", [])
        return sum(1 for r in res if r["type"].startswith(("pulumi-python:dynamic", "netpeer:index",
                                                            "noop:index")))

    def timed(self, op: str, settle: Callable[[], object]) -> dict[str, float]:
        """One operation from a quiescent system, timed until the CLI returns
        and until the dataplane has also done what it started (``settle``)."""
        settle()
        t = time.perf_counter()
        returned = self.run("destroy" if op == "destroy" else op.split()[0], "--yes", "--skip-preview")
        settle()
        return {"returned": returned, "settled": time.perf_counter() - t}


class DirectCalls:
    """The service's own time for the calls netpeer's provider makes in each
    operation (the core's exact calls: a network is created with one call and
    read with two once it has a peering), made directly with one shared
    client at ``concurrency``, networks before the peerings that need them."""

    def __init__(self, endpoint: str, count: int, ns: str, concurrency: int, settle: Callable[[], object]):
        self.ns, self.settle = ns, settle
        self.networks, self.peerings = layout(count)
        self.client = Client(endpoint, ADMIN_TOKEN)
        self.pool = ThreadPoolExecutor(concurrency)
        idle = []
        for _ in range(3):  # what a settle costs when there is nothing to wait for: counted once, not twice
            t = time.perf_counter()
            settle()
            idle.append(time.perf_counter() - t)
        self.idle = min(idle)

    def close(self) -> None:
        self.pool.shutdown()
        self.client.close()

    def _timed(self, *phases) -> dict[str, float]:
        self.settle()
        t = time.perf_counter()
        for fn, items in phases:
            list(self.pool.map(lambda x: fn(*x), items))
        returned = time.perf_counter() - t
        self.settle()
        return {"returned": returned, "settled": max(returned, time.perf_counter() - t - self.idle)}

    def timed(self, op: str, _settle=None) -> dict[str, float]:
        c, ns = self.client, self.ns

        def read_network(name, _subnet):
            if c.get_network(ns, name)["peering_count"]:
                c.list_peerings(ns, name)
        if op == "up":
            return self._timed((lambda name, subnet: c.create_network(ns, name, [subnet], [], ""), self.networks),
                               (lambda net, name, remote: c.create_peering(ns, net, name, remote, None, None, None,
                                                                           ""), self.peerings))
        if op == "refresh":
            return self._timed((read_network, self.networks),
                               (lambda net, name, _r: c.get_peering(ns, net, name), self.peerings))
        if op == "destroy":
            return self._timed((lambda net, name, _r: c.delete_peering(ns, net, name), self.peerings),
                               (lambda name, _s: c.delete_network(ns, name), self.networks))
        return {"returned": 0.0, "settled": 0.0}   # up with no changes: check and diff are the provider's own


def run(counts: list[int], reps: int = 1) -> dict:
    """Each repetition makes fresh stacks and runs the operations in turn,
    interleaved (netpeer's stack, the do-nothing one, the direct calls, the
    order flipped every other repetition) so that bursts of load from other
    work on the machine land on all three alike."""
    binary = toolchain()
    out: dict = {"counts": counts, "reps": reps, "runs": {}, "service": {}}
    # No periodic sweep during the runs (netpeerd sweeps once at start): it would land on any stack.
    with Deployment(chassis=False, sweep_interval="1h") as d:
        d.start_ovn()
        d.start_netpeerd()
        work = d.dir / "pulumi"
        work.mkdir()
        for count in counts:
            for rep in range(reps):
                for face, (kind, noop, concurrency) in FACES.items():
                    runners = {k: Stack(k, count, work / f"r{rep}", binary, d.endpoint) for k in (kind, noop)}
                    runners["service"] = DirectCalls(d.endpoint, count, f"pb-direct-{face}-{count}-{rep}",
                                                     concurrency, d.wait_sb)
                    order = list(runners) if rep % 2 == 0 else list(reversed(runners))
                    line = []
                    for op in OPS:
                        for k in order:
                            secs = runners[k].timed(op, d.wait_sb)
                            key = f"{face}-{count}" if k == "service" else f"{k}-{count}"
                            out["service" if k == "service" else "runs"].setdefault(key, {}).setdefault(
                                op, []).append(secs)
                            line.append(f"{k} {op} {secs['returned']:.1f}s")
                            if op == "up" and k != "service" and runners[k].resources() != count:
                                raise RuntimeError(f"{k}-{count}: {runners[k].resources()} resources, expected {count}")
                    runners["service"].close()
                    print(f"bench: pulumi {face}-{count} rep {rep}: " + ", ".join(line), file=sys.stderr, flush=True)
    out["overhead"] = overhead(out, counts)
    return out


def overhead(out: dict, counts: list[int]) -> dict:
    """Per face, operation and size (median of the repetitions): seconds until
    the system is quiescent again for netpeer's stack, the do-nothing stack
    and the service's direct calls; the floor (do-nothing + service) and
    netpeer's overhead over it; and, as the user sees it, seconds until the
    CLI returned and the overhead over the do-nothing stack alone."""
    def best(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)
    table = {}
    for count in counts:
        for face, (kind, noop, _) in FACES.items():
            for op in OPS:
                a, b = out["runs"][f"{kind}-{count}"][op], out["runs"][f"{noop}-{count}"][op]
                svc = out["service"][f"{face}-{count}"][op]
                floor = best(b, "settled") + best(svc, "settled")
                table[f"{face} {op} {count}"] = {
                    "face": face, "op": op, "count": count, "netpeer_s": best(a, "settled"),
                    "noop_s": best(b, "settled"), "service_s": best(svc, "settled"), "floor_s": floor,
                    "overhead_pct": (best(a, "settled") / floor - 1) * 100,
                    "netpeer_returned_s": best(a, "returned"), "noop_returned_s": best(b, "returned"),
                    "service_returned_s": best(svc, "returned"),
                    "over_noop_pct": (best(a, "returned") / best(b, "returned") - 1) * 100}
    return table
