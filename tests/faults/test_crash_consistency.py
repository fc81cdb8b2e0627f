"""kill -9 of netpeerd at random points of a 1,000-operation workload.

netpeerd runs as a real process (``python -m netpeer.cli.main serve``) on
real OVN daemons. Three tenants create networks, bind them to each other
(both halves), change their prefixes, unbind and delete, one call at a time.
At 55 random points (the op that is in flight, and a random instant within
it) the process gets SIGKILL. After every restart:

- the store equals the model of acknowledged operations: every acknowledged
  create/update is there, every acknowledged delete is gone, every peering is
  in the phase its halves imply. The one call in flight at the kill may or
  may not have happened; it is looked up and the model follows the store;
- the daemon's startup sweep ran, after which the netpeer-owned OVN rows are
  exactly the rows the store implies (grouped by ``netpeer:id``: no
  duplicate, no orphan, none missing), and an independent
  ``Service(store, backend).repair()`` finds nothing to repair.

The figures (kills, operations acknowledged and lost, time to converge) are
printed as one ``[faults]`` line and reported in docs/reliability.md.
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore
from tests.faults import harness
from tests.faults.harness import Model, Op, publish, summary, wait_ovn_matches_store

pytestmark = pytest.mark.slow

TENANTS = ["team-a", "team-b", "team-c"]
TOTAL_OPS = 1000
KILLS = 55            # the issue asks for at least 50
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261121"))


class Worker(threading.Thread):
    """Runs the workload's next operations one at a time until the daemon is
    killed (or the workload is done). ``armed`` is set when operation number
    ``kill_at`` starts."""

    def __init__(self, model: Model, clients: dict[str, Client], done_so_far: int, kill_at: int,
                 killed: threading.Event, latencies: list[float]):
        super().__init__(name="workload", daemon=True)
        self.model = model
        self.clients = clients
        self.count = done_so_far
        self.kill_at = kill_at
        self.killed = killed
        self.latencies = latencies
        self.armed = threading.Event()
        self.acked = 0
        self.in_doubt: Op | None = None
        self.error: str | None = None

    def run(self) -> None:
        try:
            while self.count < TOTAL_OPS:
                op = self.model.next_op()
                self.count += 1
                if self.count >= self.kill_at:
                    self.armed.set()
                start = time.monotonic()
                try:
                    op.run(self.clients[op.ns])
                except errors.Unavailable as exc:
                    if self.killed.is_set():
                        self.in_doubt = op   # in flight (or about to start) when the process died
                    else:
                        self.error = f"{op}: UNAVAILABLE without a fault: {exc}"
                    return
                except errors.NetpeerError as exc:
                    self.error = f"{op}: {type(exc).__name__}: {exc}"
                    return
                self.latencies.append(time.monotonic() - start)
                self.model.apply(op)
                self.acked += 1
        finally:
            self.armed.set()


def test_kill9_at_random_points_loses_nothing(ovn, netpeerd_factory, request):
    began = time.monotonic()
    rnd = random.Random(SEED)
    daemon = netpeerd_factory(ovn.nb_remote, sweep_interval="30s")
    daemon.start()
    daemon.wait_sweep(0)
    tokens = harness.tokens(daemon, TENANTS)
    model = Model(TENANTS, seed=SEED)
    kill_points = sorted(rnd.sample(range(1, TOTAL_OPS + 1), KILLS))

    store = SqliteStore(daemon.config.store)
    checker = OvnBackend(ovn.nb_remote)
    assert checker.wait_connected(30), "the checker cannot reach OVN NB"
    latencies: list[float] = []
    to_serving, to_swept, ovn_catch_up = [], [], []
    done = acked = kills = 0
    in_doubt_happened = in_doubt_not = 0
    sweeps_that_repaired = rows_repaired_at_start = 0
    problems_seen = 0
    killed_during: collections.Counter = collections.Counter()
    try:
        for kill_at in kill_points + [TOTAL_OPS + 1]:
            clients = {ns: Client(daemon.endpoint, tokens[ns], timeout=30) for ns in TENANTS}
            killed = threading.Event()
            worker = Worker(model, clients, done, kill_at, killed, latencies)
            worker.start()
            worker.armed.wait(120)
            if kill_at <= TOTAL_OPS and worker.is_alive():
                # A random instant inside the operation that just started.
                typical = sorted(latencies)[len(latencies) // 2] if latencies else 0.03
                time.sleep(rnd.uniform(0, 1.2 * typical))   # not polling: the kill lands inside the call
                killed.set()
                daemon.kill9()
                t_kill = time.monotonic()
            worker.join(120)
            for c in clients.values():
                c.close()
            assert not worker.is_alive(), "the workload hung"
            assert worker.error is None, worker.error
            done, acked = worker.count, acked + worker.acked
            if not killed.is_set():
                break      # the workload finished; final check below

            kills += 1
            daemon.spawn()
            daemon.wait_ready()
            to_serving.append(time.monotonic() - t_kill)
            first = daemon.wait_sweep(0)   # the new process's start-up sweep
            repaired, sweep_errors = first["repaired_rows"], first["errors"]
            to_swept.append(time.monotonic() - t_kill)
            assert sweep_errors == 0, daemon.tail()
            if repaired:
                sweeps_that_repaired += 1
                rows_repaired_at_start += repaired

            with store.read() as tx:
                if worker.in_doubt is not None:
                    killed_during[worker.in_doubt.kind] += 1
                    if worker.in_doubt.took_effect(tx):
                        model.apply(worker.in_doubt)
                        in_doubt_happened += 1
                    else:
                        in_doubt_not += 1
                problems = model.diff_store(tx)
            problems_seen += len(problems)
            assert not problems, f"after kill {kills}: {problems[:10]}"
            ovn_catch_up.append(wait_ovn_matches_store(store, checker))
            report = Service(store, checker).repair()
            assert (report.repaired_rows, report.errors) == (0, 0), \
                f"after kill {kills} and the startup sweep, repair still changed {report}"

        # The end state, once more, with the daemon alive.
        assert done == TOTAL_OPS
        with store.read() as tx:
            problems = model.diff_store(tx)
        assert not problems, problems[:10]
        wait_ovn_matches_store(store, checker)
        report = Service(store, checker).repair()
        assert (report.repaired_rows, report.errors) == (0, 0), report
    finally:
        checker.close()
        store.close()

    daemon.assert_no_internal_errors()
    assert kills >= 50, kills
    assert acked + in_doubt_happened + in_doubt_not == TOTAL_OPS
    publish(request, "crash_consistency", {
        "seed": SEED, "operations": TOTAL_OPS, "kills_survived": kills,
        "acknowledged": acked, "lost": problems_seen,
        "in_flight_at_kill_took_effect": in_doubt_happened, "in_flight_at_kill_did_not": in_doubt_not,
        "in_flight_at_kill_by_kind": dict(killed_during),
        "startup_sweeps_that_repaired_ovn": sweeps_that_repaired, "ovn_rows_repaired_at_start": rows_repaired_at_start,
        "kill_to_serving_s": summary(to_serving), "kill_to_converged_s": summary(to_swept),
        "checker_catch_up_s": summary(ovn_catch_up),
        "op_latency_s": summary(latencies), "end_state": model.counts(),
        "duration_s": round(time.monotonic() - began, 1),
    })
