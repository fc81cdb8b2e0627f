"""The deployments a run works against, the faults each can inject, and
what must hold of each once the run is over.

- ``SqliteStack``: one netpeerd on SQLite, OVN with a chassis. Fault:
  ``kill`` (kill -9 netpeerd, start it again).
- ``ReplicaStack``: two netpeerd replicas on one PostgreSQL, an NB Raft
  cluster of three and a chassis on its SB. Faults: ``kill-leader``, ``kill-follower`` (kill -9 the
  replica that holds the sweeper lease, or the other, and start it again),
  ``pause-leader`` (SIGSTOP the leader for longer than its lease, then
  SIGCONT), ``restart-postgres`` (immediate shutdown, then start),
  ``kill-nb-leader`` (kill -9 the NB Raft leader, start it again once
  another leads).
- ``SitesStack`` (tests/linearizability/sites.py): two sites.

Every process is started by the stack and stopped by its own pid in
``stop`` (a paused one is continued first); every directory is removed.
A fault the stack cannot inject is refused with one line.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import shutil
import signal
import time
from datetime import timedelta
from pathlib import Path

from netpeer import errors
from netpeer.api.client import Client
from netpeer.ovn.backend import OvnBackend
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.nbcluster import NbCluster
from netpeer_dev.postgres import PgCluster
from netpeer_dev.process import NetpeerdProcess
from tests.faults.harness import wait_ovn_matches_store
from tests.linearizability.history import History, now
from tests.linearizability.planted import PlantedNetpeerd
from tests.support import ADMIN_TOKEN, netpeerd_config, wait_dataplane_connected, wait_until

LEASE_S = 2.0


class FaultRefused(ValueError):
    """A fault the stack cannot inject."""


def check_faults(stack_name: str, wanted: list[str], possible: tuple[str, ...]) -> list[str]:
    for kind in wanted:
        if kind not in possible:
            raise FaultRefused(f"fault {kind!r} cannot be injected into the {stack_name} stack "
                               f"(it can: {', '.join(possible)})")
    return wanted


def _process(directory: Path, ovn_nb: str, plant: str | None, **config) -> NetpeerdProcess:
    cfg = netpeerd_config(directory, ovn_nb, **config)
    if plant:
        return PlantedNetpeerd(cfg, directory, ADMIN_TOKEN, plant=plant)
    return NetpeerdProcess(cfg, directory, ADMIN_TOKEN)

@dataclasses.dataclass
class Final:
    """What was checked once the run was over."""

    ovn_matches_store_s: float = 0.0
    pings: dict = dataclasses.field(default_factory=dict)


class SqliteStack:
    """One netpeerd on SQLite (optionally a planted build), OVN with a chassis."""

    name = "sqlite"
    FAULTS = ("kill",)

    def __init__(self, directory: Path, plant: str | None = None, chassis: bool = True):
        self.dir = Path(directory)
        self.plant = plant
        self.chassis = chassis
        self.ovn = OvnDaemons(self.dir / "ovn")
        self.daemon = _process(self.dir / "netpeerd", self.ovn.nb_remote, plant, sweep_interval="2s",
                               ovn_timeout="5s")
        self.lease_s = 0.0

    def start(self) -> None:
        self.ovn.start(chassis=self.chassis)
        self.daemon.start(sweep=True)

    @property
    def endpoints(self) -> dict[str, str]:
        return {"netpeerd": self.daemon.endpoint}

    def inject(self, kind: str, history: History, rnd: random.Random) -> None:
        check_faults(self.name, [kind], self.FAULTS)
        start = now()
        self.daemon.kill9()
        killed = now()
        self.daemon.spawn()
        self.daemon.wait_ready()
        history.nemesis("kill", "netpeerd", start, now(), f"kill -9, serving again after {(now() - killed) / 1e9:.2f}s")

    def final(self, sample: int = 4, seed: int = 0) -> Final:
        from netpeer.store.sqlite import SqliteStore
        from tests.linearizability.pings import ping_sample
        wait_dataplane_connected([self.daemon])
        store = SqliteStore(self.daemon.config.store)
        checker = OvnBackend(self.ovn.nb_remote)
        try:
            assert checker.wait_connected(30), "the checker cannot reach OVN NB"
            took = wait_ovn_matches_store(store, checker, timeout=30, content=True)
            pings = ping_sample(store, self.ovn, self.dir / "instances", sample, seed) if self.chassis else {}
        finally:
            checker.close()
            store.close()
        return Final(took, pings)

    def stop(self) -> None:
        try:
            self.daemon.stop()
        finally:
            self.ovn.stop()

    def logs_clean(self) -> None:
        self.daemon.assert_no_internal_errors()


class ClusterChassis(OvnDaemons):
    """A chassis (the Open_vSwitch ovsdb-server, ovs-vswitchd, ovn-controller)
    on the SB of an NB Raft cluster, which runs none: where the replicas'
    pings go. Only the chassis daemons are started here, and stopped."""

    CHASSIS = ("ovsdb-server", "ovs-vswitchd", "ovn-controller")

    def __init__(self, state_dir: Path, cluster: NbCluster):
        super().__init__(state_dir)
        self.cluster = cluster

    @property
    def nb_remote(self) -> str:
        return self.cluster.nb_remote

    @property
    def sb_remote(self) -> str:
        return self.cluster.sb_remote

    def start(self, chassis: bool = True, timeout: float = 60.0, progress=None) -> None:
        deadline = time.monotonic() + timeout
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            self._start_chassis(deadline, progress or (lambda message: None))

    def running(self, chassis: bool = False) -> bool:
        return all(s.running for s in self.status() if s.name in self.CHASSIS)


class ReplicaStack:
    """Two netpeerd replicas on PostgreSQL and an NB Raft cluster of three."""

    name = "replicas"
    FAULTS = ("kill-leader", "kill-follower", "pause-leader", "restart-postgres", "kill-nb-leader")

    def __init__(self, directory: Path, plant: str | None = None, replicas: int = 2,
                 pg: PgCluster | None = None, url: str | None = None):
        """``pg`` and ``url``: a running PostgreSQL and a database of the run's
        (kept running at the end); by default the stack makes its own."""
        self.dir = Path(directory)
        self.plant = plant
        self.nb = NbCluster(self.dir / "nb")
        self.chassis = ClusterChassis(self.dir / "chassis", self.nb)
        self.own_pg = pg is None
        self.pg = pg or PgCluster(self.dir / "pg", port=5432)
        self.url = url
        self.lease_s = LEASE_S
        self.daemons: list[NetpeerdProcess] = []
        self.count = replicas
        self.paused: set[int] = set()

    def start(self) -> None:
        self.nb.start()
        self.chassis.start()
        if self.own_pg:
            self.pg.start()
        url = self.url or self.pg.create_database("netpeer")
        for i in range(self.count):
            d = _process(self.dir / f"r{i + 1}", self.nb.nb_remote, self.plant, sweep_interval="2s",
                         ovn_timeout="4s", leader_lease=timedelta(seconds=LEASE_S))
            d.config = dataclasses.replace(d.config, store=url)
            self.daemons.append(d)
        for d in self.daemons:
            d.start()
        wait_dataplane_connected(self.daemons)
        self._wait_leader()

    @property
    def endpoints(self) -> dict[str, str]:
        return {f"r{i + 1}": d.endpoint for i, d in enumerate(self.daemons)}

    def _leaders(self) -> list[int]:
        out = []
        for i, d in enumerate(self.daemons):
            if i in self.paused or d.pid is None:
                continue
            try:
                with Client(d.endpoint, ADMIN_TOKEN, timeout=2) as c:
                    if c.status()["leading"]:
                        out.append(i)
            except errors.NetpeerError:
                pass
        return out

    def _wait_leader(self, timeout: float = 120.0) -> int:
        return wait_until(self._leaders, timeout, lambda leaders: f"no single leader among the replicas: {leaders}",
                          step=0.05, until=lambda leaders: len(leaders) == 1)[0]

    def inject(self, kind: str, history: History, rnd: random.Random) -> None:
        check_faults(self.name, [kind], self.FAULTS)
        if kind in ("kill-leader", "kill-follower", "pause-leader"):
            leader = self._wait_leader()
            victim = leader if kind != "kill-follower" else (leader + 1) % len(self.daemons)
            d, target = self.daemons[victim], f"r{victim + 1}"
            start = now()
            if kind == "pause-leader":
                pause = LEASE_S * rnd.uniform(1.5, 2.5)
                self.paused.add(victim)
                d.proc.send_signal(signal.SIGSTOP)
                time.sleep(pause)   # not polling: the pause is the fault
                # Longer than the lease is not enough on a loaded machine: until another replica leads.
                took_over = self._wait_leader()
                d.proc.send_signal(signal.SIGCONT)
                self.paused.discard(victim)
                history.nemesis(kind, target, start, now(), f"SIGSTOP for {(now() - start) / 1e9:.1f}s (lease "
                                f"{LEASE_S:.0f}s; r{took_over + 1} led meanwhile)")
                return
            d.kill9()
            time.sleep(rnd.uniform(0.0, LEASE_S))   # not polling: the replica stays dead a while
            d.spawn()
            d.wait_ready()
            history.nemesis(kind, target, start, now(), "kill -9, then started again")
        elif kind == "restart-postgres":
            start = now()
            self.pg.kill(signal.SIGQUIT)      # immediate shutdown: a crash, recovered from the WAL
            time.sleep(rnd.uniform(0.2, 1.0))   # not polling: the store stays down a while
            self.pg.start()
            history.nemesis(kind, "postgresql", start, now(), "immediate shutdown, then started again")
        else:
            start = now()
            leader = self.nb.leader()
            if leader is None:
                leader = self.nb.wait_leader(120)
            self.nb.member(leader).signal(signal.SIGKILL)
            self.nb.wait_leader(120, exclude=leader)
            self.nb.start_member(leader)
            history.nemesis(kind, f"nb{leader}", start, now(), "kill -9 of the NB Raft leader, restarted "
                            "once another led")

    def final(self, sample: int = 3, seed: int = 0) -> Final:
        from netpeer.store.postgres import PostgresStore
        from tests.linearizability.pings import ping_sample
        wait_dataplane_connected(self.daemons)
        store = PostgresStore(self.daemons[0].config.store)
        checker = OvnBackend(self.nb.nb_remote)
        try:
            assert checker.wait_connected(30), "the checker cannot reach OVN NB"
            took = wait_ovn_matches_store(store, checker, timeout=30, content=True)
            pings = ping_sample(store, self.chassis, self.dir / "instances", sample, seed)
        finally:
            checker.close()
            store.close()
        return Final(took, pings)

    def stop(self) -> None:
        try:
            for i, d in enumerate(self.daemons):
                if i in self.paused and d.pid is not None:
                    d.proc.send_signal(signal.SIGCONT)
                d.stop()
        finally:
            try:
                try:
                    self.chassis.stop()
                finally:
                    self.nb.stop()
            finally:
                if self.own_pg:
                    self.pg.remove()
                elif self.pg.pid is None:   # a shared one, left as it was found: running
                    self.pg.start()

    def logs_clean(self) -> None:
        for d in self.daemons:
            d.assert_no_internal_errors()


def remove(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def nemesis(stack, history: History, kinds: list[str], rnd: random.Random, deadline: float,
            every: tuple[float, float] = (1.0, 3.0), quiet_end: float = 2.0, rounds: int = 0) -> collections.Counter:
    """Injects the faults of ``kinds`` one after another, a random ``every``
    seconds apart, until ``deadline`` (less ``quiet_end``) and at least
    ``rounds`` rounds: each kind once per round, the rounds in random orders."""
    done: collections.Counter = collections.Counter()
    order: list[str] = []
    while True:
        wait = rnd.uniform(*every)
        complete = sum(done.values()) >= rounds * len(kinds)
        if complete and time.monotonic() + wait + quiet_end > deadline:
            return done
        time.sleep(wait)   # not polling: the time between two faults
        if not order:
            order = rnd.sample(kinds, len(kinds))
        kind = order.pop()
        stack.inject(kind, history, rnd)
        done[kind] += 1
