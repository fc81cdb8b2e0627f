"""The crash-consistency workload on two replicas: kill -9 a random replica
at random points (first test), restart PostgreSQL and kill the NB Raft
leader (second test).

Two netpeerd processes share one PostgreSQL database and one NB Raft
cluster of three. Three tenants run the fault tests' model workload
(tests/faults/harness.py), one call at a time, their clients spread over
both replicas (each lists both endpoints, in different orders). At each kill
point the fault hits while a call is in flight; the workload goes on through
the survivor. A call the fault left in doubt (its connection broke after it
was sent; clients never re-send such a write) is looked up in the store
under the write lock (so a commit in progress has finished) and the model
follows the store for that call only. After each fault is over:

- the store equals the model of acknowledged operations;
- OVN's netpeer rows are exactly those the store implies (no duplicate, no
  orphan, none missing) and ``repair()`` finds nothing.

Figures: faults survived, operations acknowledged and lost, time from the
fault to the next acknowledged write (``[faults]`` line; docs/reliability.md).
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.postgres import PostgresStore
from tests.faults import harness
from tests.faults.harness import Model, publish, summary, wait_ovn_matches_store
from tests.support import wait_dataplane_connected, wait_until

pytestmark = pytest.mark.slow

TENANTS = ["team-a", "team-b", "team-c"]
TOTAL_OPS = int(os.environ.get("NETPEER_HA_OPS", "1000"))
KILLS = int(os.environ.get("NETPEER_HA_KILLS", "30"))
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261123"))
AFTER_FAULT = 4        # calls the workload makes after a fault before the checks


class Workload:
    """The model workload through clients that know both replicas."""

    def __init__(self, endpoints: list[str], tokens: dict[str, str], store: PostgresStore, seed: int,
                 total: int = TOTAL_OPS):
        self.model = Model(TENANTS, seed=seed)
        self.total = total
        self.store = store
        self.clients = {ns: Client(",".join(endpoints[k % 2:] + endpoints[:k % 2]), tokens[ns], timeout=30)
                        for k, ns in enumerate(TENANTS)}
        self.done = self.acked = 0
        self.in_doubt: collections.Counter = collections.Counter()
        self.latencies: list[float] = []
        self.error: str | None = None

    def close(self):
        for c in self.clients.values():
            c.close()

    def resolve(self, op) -> bool:
        """Whether an in-doubt call took effect: read under the write lock,
        once the store answers again."""
        def took_effect():
            with self.store.exclusive() as tx:
                return op.took_effect(tx)
        return wait_until(took_effect, 60, lambda last: f"the store did not answer again: {last}", step=0.1,
                          until=lambda answer: not isinstance(answer, errors.Unavailable),
                          ignore=(errors.Unavailable,))

    def run(self, count: int, started: threading.Event | None = None, fault: threading.Event | None = None,
            first_ack_after_fault: list | None = None, fault_at: list | None = None) -> None:
        """``count`` calls; ``started`` is set when the first one begins.
        With a ``fault``, ``count`` calls sent after it; of those, calls that
        failed before the first acknowledged one do not count (the figure is
        the time to that first one)."""
        k, give_up = 0, time.monotonic() + 120
        try:
            while k < count:
                if (fault is None and self.done >= self.total) or time.monotonic() > give_up:
                    return
                op = self.model.next_op()
                self.done += 1
                if started is not None and k == 0:
                    started.set()
                t0 = time.monotonic()
                try:
                    op.run(self.clients[op.ns])
                except errors.Unavailable as exc:
                    if fault is None or not fault.is_set():
                        self.error = f"{op}: UNAVAILABLE without a fault: {exc}"
                        return
                    took = self.resolve(op)
                    self.in_doubt["took effect" if took else "did not"] += 1
                    if took:
                        self.model.apply(op)
                    if first_ack_after_fault:
                        k += 1
                    continue
                except errors.NetpeerError as exc:
                    self.error = f"{op}: {type(exc).__name__}: {exc}"
                    return
                self.latencies.append(time.monotonic() - t0)
                self.model.apply(op)
                self.acked += 1
                # Around a fault, only calls sent after it count: on a loaded machine the kill may come late,
                # after calls that were all acknowledged before it.
                if fault is None or (fault_at and t0 >= fault_at[0]):
                    k += 1
                # The first call sent after the fault and acknowledged.
                if fault is not None and fault.is_set() and first_ack_after_fault is not None \
                        and not first_ack_after_fault and fault_at and t0 >= fault_at[0]:
                    first_ack_after_fault.append(time.monotonic())
        finally:
            if started is not None:
                started.set()

    def check(self, checker: OvnBackend, when: str) -> float:
        with self.store.read() as tx:
            problems = self.model.diff_store(tx)
        assert not problems, f"{when}: {problems[:10]}"
        # Content too: a write whose store commit died with PostgreSQL after its OVN transaction committed is
        # undone by the daemons' sweep (every 2 s here), not by the repair below.
        took = wait_ovn_matches_store(self.store, checker, content=True)
        report = Service(self.store, checker).repair()
        assert (report.repaired_rows, report.errors) == (0, 0), f"{when}: repair still changed {report}"
        return took


def check_explained(work: Workload, checker: OvnBackend, daemons, when: str) -> None:
    """``work.check``; when it fails, with what each replica logged about
    leading, sweeping and repairing (a failure here is rare, and its cause
    is in those lines)."""
    try:
        work.check(checker, when)
    except AssertionError as exc:
        logs = []
        for i, d in enumerate(daemons):
            text = d.log.read_text(errors="replace") if d.log.exists() else ""
            picked = [line for line in text.splitlines()
                      if re.search(r"lead|sweep|repair|went away|stray|refused|OVN|NB", line)]
            logs.append(f"--- replica {i + 1}, last {min(len(picked), 40)} such lines:\n" + "\n".join(picked[-40:]))
        raise AssertionError(f"{exc}\n" + "\n".join(logs)) from None

def start(replicas, nb3, sweep_interval: str = "30s", **kwargs):
    daemons = replicas(2, nb3.nb_remote, sweep_interval=sweep_interval, **kwargs)
    for d in daemons:
        d.start()
    tokens = harness.tokens(daemons[0], TENANTS)
    store = PostgresStore(daemons[0].config.store)
    checker = OvnBackend(nb3.nb_remote)
    assert checker.wait_connected(30), "the checker cannot reach OVN NB"
    return daemons, tokens, store, checker


def test_kill9_a_random_replica_loses_nothing(replicas, nb3, request):
    began = time.monotonic()
    rnd = random.Random(SEED)
    daemons, tokens, store, checker = start(replicas, nb3)
    work = Workload([d.endpoint for d in daemons], tokens, store, SEED)
    kill_points = sorted(rnd.sample(range(1, TOTAL_OPS - AFTER_FAULT), KILLS))
    to_next_write, to_serving, killed_which = [], [], collections.Counter()
    try:
        for kill_at in kill_points:
            work.run(kill_at - work.done)
            assert work.error is None, work.error
            # The next calls run while a random replica dies under one of them.
            victim = rnd.randrange(2)
            started, fault, first, fault_at = threading.Event(), threading.Event(), [], []
            worker = threading.Thread(target=work.run, args=(AFTER_FAULT, started, fault, first, fault_at),
                                      daemon=True)
            worker.start()
            started.wait(30)
            typical = sorted(work.latencies)[len(work.latencies) // 2] if work.latencies else 0.03
            time.sleep(rnd.uniform(0, 1.2 * typical))   # not polling: the fault lands inside a call
            fault.set()
            t_kill = time.monotonic()
            fault_at.append(t_kill)
            daemons[victim].kill9()
            killed_which[f"replica {victim + 1}"] += 1
            worker.join(120)
            assert not worker.is_alive(), "the workload hung"
            assert work.error is None, work.error
            assert first, f"no write was acknowledged through the survivor after kill {len(to_next_write) + 1}"
            to_next_write.append(first[0] - t_kill)
            daemons[victim].spawn()
            daemons[victim].wait_ready()
            wait_dataplane_connected(daemons)
            to_serving.append(time.monotonic() - t_kill)
            check_explained(work, checker, daemons, f"after kill {len(to_next_write)}")
        work.run(TOTAL_OPS - work.done)
        assert work.error is None, work.error
        check_explained(work, checker, daemons, "at the end")
    finally:
        work.close()
        checker.close()
        store.close()
    for d in daemons:
        d.assert_no_internal_errors()
    assert work.done >= TOTAL_OPS and work.acked + sum(work.in_doubt.values()) == work.done
    assert len(to_next_write) == KILLS
    publish(request, "replicas_kill9", {
        "seed": SEED, "operations": work.done, "kills_survived": len(to_next_write),
        "killed": dict(killed_which), "acknowledged": work.acked, "lost": 0,
        "in_flight_at_kill": dict(work.in_doubt),
        "kill_to_next_acknowledged_write_s": summary(to_next_write),
        "kill_to_killed_replica_serving_again_s": summary(to_serving),
        "op_latency_s": summary(work.latencies), "end_state": work.model.counts(),
        "duration_s": round(time.monotonic() - began, 1)})


def test_postgres_restart_and_nb_leader_kill_lose_nothing(replicas, nb3, pg_cluster, request):
    began = time.monotonic()
    rnd = random.Random(SEED + 1)
    ops = min(TOTAL_OPS, int(os.environ.get("NETPEER_HA_FAULT_OPS", "400")))
    # A write that timed out during an NB failover can still commit later (OVSDB cannot cancel it): the
    # sweep undoes it (docs/reliability.md), so the checks after a fault wait for one.
    daemons, tokens, store, checker = start(replicas, nb3, sweep_interval="2s", ovn_timeout="5s")
    work = Workload([d.endpoint for d in daemons], tokens, store, SEED + 1, total=ops)
    faults = ["postgres", "nb-leader"] * int(os.environ.get("NETPEER_HA_FAULTS", "4"))
    points = sorted(rnd.sample(range(1, ops - AFTER_FAULT), len(faults)))
    recovered: dict[str, list[float]] = collections.defaultdict(list)
    try:
        for kind, at in zip(faults, points):
            work.run(at - work.done)
            assert work.error is None, work.error
            started, fault, first, fault_at = threading.Event(), threading.Event(), [], []
            worker = threading.Thread(target=work.run, args=(AFTER_FAULT, started, fault, first, fault_at),
                                      daemon=True)
            worker.start()
            started.wait(30)
            fault.set()
            t0 = time.monotonic()
            fault_at.append(t0)
            if kind == "postgres":
                pg_cluster.kill(signal.SIGQUIT)     # immediate shutdown: a crash, recovered from the WAL
                time.sleep(0.5)                     # not polling: the store stays down this long
                pg_cluster.start()
            else:
                leader = nb3.leader()
                assert leader is not None, "no NB leader before the fault"
                nb3.member(leader).signal(signal.SIGKILL)
                nb3.wait_leader(30, exclude=leader)
                nb3.start_member(leader)
            worker.join(180)
            assert not worker.is_alive(), "the workload hung"
            assert work.error is None, work.error
            assert first, f"no write was acknowledged after the {kind} fault"
            recovered[kind].append(first[0] - t0)
            wait_dataplane_connected(daemons)
            work.check(checker, f"after the {kind} fault")
        work.run(ops - work.done)
        assert work.error is None, work.error
        work.check(checker, "at the end")
    finally:
        work.close()
        checker.close()
        store.close()
    for d in daemons:
        d.assert_no_internal_errors()
    assert work.acked + sum(work.in_doubt.values()) == work.done >= ops
    publish(request, "replicas_postgres_and_nb_faults", {
        "seed": SEED + 1, "operations": work.done, "faults_survived": {k: len(v) for k, v in recovered.items()},
        "acknowledged": work.acked, "lost": 0, "in_flight_at_fault": dict(work.in_doubt),
        "fault_to_next_acknowledged_write_s": {k: summary(v) for k, v in recovered.items()},
        "op_latency_s": summary(work.latencies), "duration_s": round(time.monotonic() - began, 1)})
