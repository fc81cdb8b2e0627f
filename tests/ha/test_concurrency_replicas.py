"""Concurrency across replicas, checked against the model.

Two netpeerd replicas (real ``Daemon``s in this process, each with its own
gRPC server, OVN connection and PostgreSQL connections) share one database
and one OVN NB. Writers are spread over both. The two services record, in
one shared log, the order in which their writes ran: each runs under the
replicas' write lock, so that order is the serialization. Replaying the log
through the reference model (tests/trust/model.py) must give every outcome
the clients got and the final state of the store; OVN must equal what the
store implies; a repair sweep running meanwhile finds nothing.

Then the race that matters most: both halves of one peering sent at the
same instant to different replicas, many times: exactly one answer says
Bound, and OVN holds the rows of exactly one bind.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import threading
import time
from datetime import timedelta

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.daemon import Daemon
from netpeer.service import Service
from tests.faults.harness import wait_ovn_matches_store
from tests.support import ADMIN_TOKEN, Netpeerd, netpeerd_config, wait_until
from tests.trust import report
from tests.trust.model import Model, diff, service_view
from tests.trust.recording import RecordingService
from tests.trust.test_concurrency import NAMESPACES, Sweeper, Worker, apply, key_of

THREADS = int(os.environ.get("NETPEER_CONCURRENCY_THREADS", "6"))
OPS = int(os.environ.get("NETPEER_CONCURRENCY_OPS", "100"))
ROUNDS = int(os.environ.get("NETPEER_CONCURRENCY_ROUNDS", "2"))
RACES = int(os.environ.get("NETPEER_HA_RACES", "25"))


class _Shared:
    """One log and one clock for both replicas' services."""

    def __init__(self):
        self.entries: list[dict] = []
        self.prelock: list[dict] = []
        self.lock = threading.Lock()
        self.seq = 0
        self.clock_lock = threading.Lock()
        self.last = None


def _recording(shared: _Shared):
    class SharedRecording(RecordingService):
        def __init__(self, store, backend, *args, **kwargs):
            super().__init__(store, backend, *args, **kwargs)
            self.entries, self.prelock, self._record_lock = shared.entries, shared.prelock, shared.lock
            self._clock_lock = shared.clock_lock

        def _tick(self):
            from netpeer.core.models import utcnow
            with shared.clock_lock:
                now = utcnow()
                if shared.last is not None and now <= shared.last:
                    now = shared.last + timedelta(microseconds=1)
                shared.last = now
                return now

        def _note(self, entry, seq: int | None = -1, **fields):
            with shared.lock:
                if "seq" not in entry:
                    self.entries.append(entry)
                entry.update(fields)
                if seq == -1:
                    entry["seq"] = shared.seq
                    shared.seq += 1
                elif seq is None:
                    self.entries.remove(entry)
                    entry["seq"] = None
                    self.prelock.append(entry)

    return SharedRecording


@pytest.fixture
def two_replicas(ovn, state_dir, pg_url):
    shared = _Shared()
    made: list[Netpeerd] = []
    try:
        for i in (1, 2):
            directory = state_dir / f"r{i}"
            config = dataclasses.replace(netpeerd_config(directory, ovn.nb_remote, sweep_interval="365d"),
                                         store=pg_url)
            daemon = Daemon(config, service_factory=_recording(shared))
            daemon.backend.start_replica()
            assert daemon.backend.wait_connected(30)
            daemon.start()
            made.append(Netpeerd(ovn, daemon, config.listen, directory / "netpeer.sock"))
        wait_until(lambda: all(d.daemon.server.ready for d in made), 30, "the replicas never became ready")
        yield made
    finally:
        for d in made:
            d.stop()


def test_writers_on_both_replicas_agree_with_the_model(two_replicas):
    one, two = two_replicas
    log_of = one.service          # both services share the log
    token = one.token(*NAMESPACES)
    model = Model()
    replayed, reads = 0, 0
    client_seen: collections.Counter = collections.Counter()
    uids: set[str] = set()
    base_seed = int(os.environ.get("NETPEER_CONCURRENCY_SEED", "0")) or random.randrange(1 << 30)
    sweeper = Sweeper(two.service)      # the repair, on the other replica than most of the log's reads
    sweeper.start()
    started = time.monotonic()
    try:
        for rnd in range(ROUNDS):
            barrier = threading.Barrier(THREADS)
            workers = [Worker((one, two)[i % 2].endpoint, token, base_seed + rnd * 1000 + i, OPS, barrier, uids)
                       for i in range(THREADS)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(300)
                assert not w.is_alive(), f"{w.name} hung"
                assert w.error is None, f"{w.name} (seed {base_seed}): {w.error!r}"
                client_seen += w.seen
                reads += w.reads
            log = log_of.log
            assert len({e["seq"] for e in log}) == len(log)
            for entry in log[replayed:]:
                expected = apply(model, entry)
                assert entry["code"] == expected, (
                    f"seed {base_seed}, write #{entry['seq']} {entry['method']}{entry['args'][:6]}: "
                    f"service {entry['code']}, model {expected}")
            replayed = len(log)
            for d in (one, two):
                problems = diff(model.view(), service_view(d.service))
                assert not problems, f"seed {base_seed}, after round {rnd + 1}, replica {d.endpoint}:\n{problems}"
            wait_ovn_matches_store(one.store, one.backend)
    finally:
        sweeper.stop.set()
        sweeper.join(30)
    elapsed = time.monotonic() - started
    log = log_of.log
    server_seen = collections.Counter(key_of(e["method"], e["args"]) + (e["code"],)
                                      for e in log + log_of.prelock)
    assert server_seen == client_seen, (server_seen - client_seen, client_seen - server_seen)
    assert sweeper.sweeps > 0 and sweeper.repaired == 0 and sweeper.errors == 0, \
        (sweeper.sweeps, sweeper.repaired, sweeper.errors)
    acked = sum(1 for e in log if e["code"] == "OK")
    report.record("replicas", "threads x ops x rounds over 2 replicas (seed)",
                  f"{THREADS} x {OPS} x {ROUNDS} ({base_seed})")
    report.record("replicas", "writes serialized / acknowledged OK", f"{len(log)} / {acked}")
    report.record("replicas", "model replay mismatches / operations lost", "0 / 0")
    report.record("replicas", "repair sweeps alongside, rows repaired", f"{sweeper.sweeps}, 0")
    report.record("replicas", "wall time (s) / writes per second", f"{elapsed:.1f} / {len(log) / elapsed:.0f}")


def test_both_halves_at_once_on_different_replicas_bind_once(two_replicas):
    one, two = two_replicas
    token = one.token("a", "b")
    ca, cb = Client(one.endpoint, token), Client(two.endpoint, token)
    outcomes: collections.Counter = collections.Counter()
    try:
        ca.create_network("a", "n", ["10.1.0.0/24"])
        cb.create_network("b", "n", ["10.2.0.0/24"])
        for k in range(RACES):
            barrier, answers = threading.Barrier(2), {}

            def half(client, ns, other, slot):
                barrier.wait(10)
                try:
                    answers[slot] = client.create_peering(ns, "n", f"p{k}", "n", other)["phase"]
                except errors.NetpeerError as exc:
                    answers[slot] = type(exc).__name__
            threads = [threading.Thread(target=half, args=(ca, "a", "b", "a")),
                       threading.Thread(target=half, args=(cb, "b", "a", "b"))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert sorted(answers.values()) == ["Bound", "Pending"], f"race {k}: {answers}"
            outcomes[answers["a"] + " on replica 1"] += 1
            wait_ovn_matches_store(one.store, one.backend)     # no duplicate, no orphan, none missing
            peer_ports = [r for r in one.backend.owned_rows().get("Logical_Router_Port", [])
                          if r.get("netpeer:kind") == "peer-port"]
            assert len(peer_ports) == 2, f"race {k}: {len(peer_ports)} peer router ports, not one pair"
            ca.delete_peering("a", "n", f"p{k}")
            cb.delete_peering("b", "n", f"p{k}")
        report_line = ", ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
        report.record("replicas", f"both halves at once on two replicas ({RACES} races)",
                      f"one Bound each time ({report_line})")
        assert Service(one.store, one.backend).repair().repaired_rows == 0
    finally:
        ca.close()
        cb.close()
