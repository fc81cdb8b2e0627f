"""kill -9 of netpeerd in the middle of a workload: after a restart every
acknowledged write is there, and OVN converges with no duplicate row."""

from __future__ import annotations

import collections
import random
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.ovn import names
from netpeer.ovn.backend import OvnBackend
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore
from tests.support import ADMIN_TOKEN, netpeerd_process


@pytest.fixture
def daemon(ovn, state_dir):
    """netpeerd as a real separate process, so it can be killed with SIGKILL."""
    d = netpeerd_process(state_dir, ovn.nb_remote, sweep_interval="1s")
    d.start()
    try:
        yield d
    finally:
        d.stop()


def workload(endpoint, token_a, token_b, acked, stop, seed):
    """Creates, binds and deletes; records (op, key) for every acknowledged
    call, and each delete also before it is made."""
    rnd = random.Random(seed)
    i = 0
    while not stop.is_set():
        try:
            with Client(endpoint, token_a, timeout=5) as a, Client(endpoint, token_b, timeout=5) as b:
                while not stop.is_set():
                    i += 1
                    k = f"n{seed}x{i}"
                    a.create_network("team-a", k, [f"10.{(i % 200) + 1}.{seed % 250}.0/24"])
                    acked.append(("network", "team-a", k))
                    b.create_network("team-b", k, [f"172.16.{i % 250}.0/24"])
                    acked.append(("network", "team-b", k))
                    a.create_peering("team-a", k, "to-b", k, "team-b")
                    acked.append(("peering", "team-a", k))
                    b.create_peering("team-b", k, "to-a", k, "team-a")
                    acked.append(("peering", "team-b", k))
                    if rnd.random() < 0.3:
                        # Recorded before the call: a kill between the store's
                        # commit and the answer removes the half unacknowledged.
                        acked.append(("deleting-peering", "team-b", k))
                        b.delete_peering("team-b", k, "to-a")
                        acked.append(("deleted-peering", "team-b", k))
        except errors.NetpeerError:
            time.sleep(0.05)  # the daemon is down: retry with a new key


def test_kill9_loses_no_acknowledged_write(ovn, daemon, state_dir):
    endpoint = daemon.endpoint
    with Client(endpoint, ADMIN_TOKEN) as admin:
        token_a = admin.create_token(["team-a"])["token"]
        token_b = admin.create_token(["team-b"])["token"]
    acked: list = []
    rnd = random.Random(7)
    kills = 3
    for round_ in range(kills):
        stop = threading.Event()
        worker = threading.Thread(target=workload, args=(endpoint, token_a, token_b, acked, stop, round_))
        worker.start()
        time.sleep(0.5 + rnd.random())   # not polling: the kill lands at a random moment of the workload
        daemon.kill9()
        stop.set()
        worker.join(30)
        daemon.start()
        daemon.wait_sweep(0)  # the start-up sweep removes rows of writes that died between OVN and the store
    daemon.stop()
    assert len(acked) > 20, "the workload made too little progress to mean anything"

    store = SqliteStore(state_dir / "netpeer.db")
    backend = OvnBackend(ovn.nb_remote)
    assert backend.wait_connected(30)
    try:
        with store.read() as tx:
            for op, ns, k in acked:
                from netpeer.core.models import NetworkKey, PeeringKey
                if op == "network":
                    assert tx.get_network(NetworkKey(ns, k)) is not None, (op, ns, k)
                elif op == "peering":
                    got = tx.get_peering(PeeringKey(ns, k, "to-a" if ns == "team-b" else "to-b"))
                    if ("deleted-peering", ns, k) in acked:
                        assert got is None, (op, ns, k)
                    elif ("deleting-peering", ns, k) not in acked:
                        assert got is not None, (op, ns, k)
                    # else the delete was under way when netpeerd was killed: either outcome is right
        # No duplicate rows: every netpeer:id appears once.
        counts = collections.Counter(r[names.ID] for rows in backend.owned_rows().values() for r in rows)
        assert counts and max(counts.values()) == 1, [k for k, v in counts.items() if v > 1][:5]
        # Converged: the daemon's own sweeps left nothing to repair.
        report = Service(store, backend).repair()
        assert report.errors == 0
        assert report.repaired_rows == 0, report
    finally:
        backend.close()
        store.close()
