"""A benchmark deployment: real OVN daemons (central, optionally a chassis)
and netpeerd as its own process (``netpeer_dev.process.NetpeerdProcess``),
in a private temp dir.

Large deployments are *seeded* through the product's own code paths, in
bulk rather than through 30,000 API calls: the store rows with the store's
API, the OVN rows with the OVN backend's sync (the same mapping and the same
writer netpeerd uses, many networks per NB transaction). netpeerd's repair
sweep at start then checks the seed: it must find nothing to repair
(``Deployment.start_netpeerd`` fails otherwise).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Iterator

from netpeer.api.client import Client
from netpeer.core import validate
from netpeer.core.dataplane import NetworkState
from netpeer.core.models import Network, Peering, Phase, Reason, utcnow
from netpeer.config import Config
from netpeer.ovn import names
from netpeer.ovn.backend import OvnBackend
from netpeer.ovn.ports import InstancePort
from netpeer.store.sqlite import SqliteStore
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.process import NetpeerdProcess

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "np_benchadmin_" + "b" * 40
OWNER = "netpeer"


# ---------------------------------------------------------------- topology

@dataclasses.dataclass(frozen=True)
class Topology:
    """``n`` networks in groups of ``group`` (one namespace per group), each
    group a ring of Bound peerings: every network is Bound to two others, so
    there are as many Bound pairs as networks (``group=0``: no peerings).
    Network ``i`` has the IPv4 subnet 10.<i/256>.<i%256>.0/24."""

    n: int
    group: int = 5

    @staticmethod
    def namespace(i: int, group: int = 5) -> str:
        return f"t{i // max(group, 1)}"

    def ns(self, i: int) -> str:
        return self.namespace(i, self.group)

    @staticmethod
    def name(i: int) -> str:
        return f"n{i}"

    @staticmethod
    def subnet(i: int) -> str:
        assert i < 65536
        return f"10.{i // 256}.{i % 256}.0/24"

    @staticmethod
    def gateway(i: int) -> str:
        return f"10.{i // 256}.{i % 256}.1"

    @staticmethod
    def host(i: int, k: int = 10) -> str:
        return f"10.{i // 256}.{i % 256}.{k}"

    def pairs(self) -> Iterator[tuple[int, int]]:
        if self.group < 2:
            return
        for start in range(0, self.n - self.n % self.group, self.group):
            members = list(range(start, start + self.group))
            if self.group == 2:
                yield members[0], members[1]
                continue
            for k, i in enumerate(members):
                yield i, members[(k + 1) % len(members)]

    def peered(self, i: int, j: int) -> bool:
        return self.group >= 2 and i // self.group == j // self.group and i < self.n - self.n % self.group

    def cross_pairs(self, count: int, seed: int = 7, avoid: set[int] | None = None) -> list[tuple[int, int]]:
        """``count`` pairs of networks from different groups, each network used
        once, spread over the whole deployment."""
        import random
        rng = random.Random(seed)
        used = set(avoid or ())
        out = []
        tries = 0
        while len(out) < count:
            tries += 1
            if tries > 100_000:
                raise ValueError(f"cannot find {count} disjoint cross-group pairs among {self.n} networks")
            i, j = rng.randrange(self.n), rng.randrange(self.n)
            if i == j or i in used or j in used or self.peered(i, j):
                continue
            used |= {i, j}
            out.append((i, j))
        return out


def peering_name(j: int) -> str:
    return f"to-n{j}"


# ---------------------------------------------------------------- helpers

def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in KiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def parse_engine_stats(text: str) -> dict[str, dict[str, int]]:
    nodes: dict[str, dict[str, int]] = {}
    node = None
    for line in text.splitlines():
        if line.startswith("Node:"):
            node = line.split()[1]
            nodes[node] = {}
        elif line.startswith("- ") and node:
            key, _, val = line[2:].partition(":")
            nodes[node][key.strip()] = int(val)
    return nodes


def parse_stopwatch(text: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    name = None
    for line in text.splitlines():
        m = re.match(r"Statistics for '([^']+)'", line)
        if m:
            name = m.group(1)
            out[name] = {}
            continue
        m = re.match(r"\s+([A-Za-z0-9 ]+?): ([0-9.]+)", line)
        if m and name:
            out[name][m.group(1).strip().lower().replace(" ", "_")] = float(m.group(2))
    return out


# ---------------------------------------------------------------- deployment

class Deployment:
    def __init__(self, chassis: bool = False, sweep_interval: str = "30s", label: str = "",
                 settings: dict | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="npb-", dir="/tmp"))
        self.ovn = OvnDaemons(self.dir / "ovn")
        self.chassis = chassis
        self.label = label
        token_file = self.dir / "admin.token"
        token_file.write_text(ADMIN_TOKEN + "\n")
        config = Config(listen=f"unix://{self.dir / 'netpeer.sock'}", store=self.dir / "netpeer.db",
                        ovn_nb=self.ovn.nb_remote, admin_token_file=token_file,
                        sweep_interval=validate.ttl("sweep_interval", sweep_interval),
                        ovn_timeout=timedelta(seconds=60))
        self.netpeerd = NetpeerdProcess(dataclasses.replace(config, **(settings or {})), self.dir, ADMIN_TOKEN)
        self.networks: dict[int, Network] = {}
        self.netns: list[str] = []
        self.token = secrets.token_hex(3)

    # ------------------------------------------------------------ lifecycle
    def start_ovn(self) -> None:
        self.ovn.start(chassis=self.chassis, timeout=120)

    @property
    def endpoint(self) -> str:
        return self.netpeerd.endpoint

    @property
    def store_path(self) -> Path:
        return self.netpeerd.config.store

    @property
    def pid(self) -> int:
        return self.netpeerd.pid

    def start_netpeerd(self, wait_sweep: bool = True, timeout: float = 900) -> float:
        """Starts netpeerd; returns how long until its first repair sweep
        completed (s), read through the status call."""
        start = time.monotonic()
        self.netpeerd.spawn()
        status = self.netpeerd.wait_ready(timeout, sweep=wait_sweep)
        if not wait_sweep:
            return 0.0
        first = status["last_sweep"]
        if first["repaired_rows"] or first["errors"]:
            raise RuntimeError(f"the seed is not what netpeerd would write: first sweep {first}")
        return time.monotonic() - start

    def stop_netpeerd(self) -> None:
        self.netpeerd.stop(timeout=20)

    def stop(self) -> None:
        from netpeer_dev import netns as nsx
        errors = []
        for ns in reversed(self.netns):
            try:
                nsx.delete_instance(self.ovn, ns)
            except Exception as exc:  # keep cleaning up
                errors.append(str(exc))
        self.netns.clear()
        try:
            self.stop_netpeerd()
        except Exception as exc:
            errors.append(str(exc))
        try:
            self.ovn.stop()
        except Exception as exc:
            errors.append(str(exc))
        if os.environ.get("NETPEER_BENCH_KEEP") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)
        if errors:
            print(f"bench: cleanup of {self.dir}: {'; '.join(errors)}", file=sys.stderr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # ------------------------------------------------------------ clients
    def client(self, timeout: float = 120) -> Client:
        return Client(self.endpoint, ADMIN_TOKEN, timeout=timeout)

    def netpeerd_rss(self) -> dict[str, int]:
        return rss_kib(self.netpeerd.pid)

    def daemon_rss(self) -> dict[str, int]:
        return {name: rss_kib(pid)["VmRSS"] for name, pid in self.ovn.pids().items()}

    # ------------------------------------------------------------ seeding
    def seed(self, topo: Topology, chunk: int = 500) -> dict[str, float]:
        """Writes ``topo`` into the store and OVN before netpeerd starts."""
        t0 = time.monotonic()
        now = utcnow()
        nets = {}
        for i in range(topo.n):
            nets[i] = Network(topo.ns(i), topo.name(i), str(uuid.uuid4()), (topo.subnet(i),),
                              create_time=now, update_time=now)
        peers: dict[int, list[Network]] = {i: [] for i in nets}
        names_: dict[int, list[tuple[str, str]]] = {i: [] for i in nets}   # (peer uid, peering name)
        store = SqliteStore(self.store_path)
        try:
            with store.write() as tx:
                for net in nets.values():
                    tx.put_network(net)
                for i, j in topo.pairs():
                    for a, b in ((i, j), (j, i)):
                        na, nb = nets[a], nets[b]
                        tx.put_peering(Peering(na.namespace, na.name, peering_name(b), nb.namespace, nb.name,
                                               na.uid, nb.uid, timedelta(days=7), "", Phase.BOUND, Reason.BOUND,
                                               f"peered with {nb.key}", now, now, 2))
                        peers[a].append(nb)
                        names_[a].append((nb.uid, peering_name(b)))
        finally:
            store.close()
        t1 = time.monotonic()
        with self.backend(timeout=600) as backend:
            ids = list(nets)
            for k in range(0, len(ids), chunk):
                backend.sync({nets[i].uid: NetworkState(nets[i], tuple(sorted(peers[i], key=lambda n: n.key)),
                                                        tuple(sorted(names_[i])))
                              for i in ids[k:k + chunk]})
        t2 = time.monotonic()
        self.networks = nets
        return {"store_s": t1 - t0, "ovn_s": t2 - t1}

    @contextlib.contextmanager
    def backend(self, timeout: float = 120):
        """netpeer's OVN backend on this deployment's NB (as netpeerd connects)."""
        backend = OvnBackend(self.ovn.nb_remote, owner=OWNER, timeout=timeout)
        try:
            if not backend.wait_connected(60):
                raise RuntimeError(f"cannot reach the OVN NB of {self.dir}")
            yield backend
        finally:
            backend.close()

    def resync_networks_from_store(self) -> None:
        """Networks (with uids) as the store has them, for deployments built through the API."""
        store = SqliteStore(self.store_path)
        try:
            with store.read() as tx:
                from netpeer.store.base import iter_all_networks
                for net in iter_all_networks(tx):
                    self.networks[int(net.name[1:])] = net
        finally:
            store.close()

    # ------------------------------------------------------------ OVN probes
    def northd(self, *args: str) -> str:
        # ovn-northd answers between two runs of its loop: at 10,000 networks
        # one run (a full recompute on OVN 23.03) takes a minute or more.
        out = subprocess.run(["ovn-appctl", "-t", "ovn-northd", "--timeout=900", *args], env=self.ovn.env(),
                             capture_output=True, text=True, timeout=910)
        return out.stdout

    def northd_reset(self) -> None:
        self.northd("inc-engine/clear-stats")
        self.northd("stopwatch/reset")

    def northd_stats(self) -> dict:
        engine = parse_engine_stats(self.northd("inc-engine/show-stats"))
        watch = parse_stopwatch(self.northd("stopwatch/show"))
        return {"engine": {k: v for k, v in engine.items() if k in ("northd", "lflow", "sync_to_sb_addr_set")},
                "stopwatch": {k: v for k, v in watch.items()
                              if k in ("ovn-northd-loop", "build_lflows", "lflows_to_sb", "ovnnb_db_run",
                                       "ovnsb_db_run", "build_flows_ctx")}}

    def count_lflows(self) -> int:
        out = subprocess.run(f"ovn-sbctl --db={self.ovn.sb_remote} --timeout=300 --bare --columns=_uuid "
                             f"list Logical_Flow | grep -c .", shell=True, env=self.ovn.env(),
                             capture_output=True, text=True, timeout=600)
        return int(out.stdout.strip() or 0)

    def wait_sb(self, timeout: float = 600) -> float:
        t = time.monotonic()
        self.ovn.nbctl("--wait=sb", "sync", timeout=timeout)
        return time.monotonic() - t

    def wait_hv(self, timeout: float = 600) -> float:
        t = time.monotonic()
        self.ovn.nbctl("--wait=hv", "sync", timeout=timeout)
        return time.monotonic() - t

    # ------------------------------------------------------------ instances
    def add_instance(self, i: int, k: int = 10) -> tuple[str, str]:
        return self.add_instances([i], k)[0]

    def add_instances(self, nets: list[int], k: int = 10) -> list[tuple[str, str]]:
        """A network namespace on each network's switch with address .k;
        returns [(netns, address)]. All switch ports in one NB transaction:
        on OVN 23.03 each NB change is a full ovn-northd recompute."""
        from netpeer_dev import netns as nsx
        ports = []
        for i in nets:
            net = self.networks[i]
            ports.append((InstancePort(uid=net.uid, namespace=net.namespace, network=net.name, instance=f"b{k}",
                                       mac=names.instance_mac(net.uid, f"b{k}"), ips=(Topology.host(i, k),)),
                          None))
        with self.backend(timeout=600) as backend:
            backend.ports.put_many(ports)
        out = []
        for i, (port, _) in zip(nets, ports):
            netns = f"npb{self.token}-{i}-{k}"
            self.netns.append(netns)
            nsx.add_instance(self.ovn, netns, port.name, port.mac, [f"{port.ips[0]}/24"], [Topology.gateway(i)])
            out.append((netns, port.ips[0]))
        for netns, _ in out:
            nsx.wait_instance_up(self.ovn, netns, timeout=600)
        return out
