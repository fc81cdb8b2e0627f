"""netpeerd checks its store against OVN and answers reads before its replica
of the NB is whole (``netpeer.ovn.early``), and holds writes until it is.

The replica's arrival is held back by a gate in front of the backend's
connection (at 10,000 networks it takes about 11-14 s); the stamp read, the
store, the API and the NB are real.
"""

from __future__ import annotations

import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.daemon import Daemon
from netpeer.ovn import early
from netpeer.ovn.backend import RECONNECT_BACKOFF_MS, STAMP_FIRST_S, OvnBackend
from netpeer.ovn.connection import Connection
from netpeer.service.epoch import EpochMismatch
from netpeer_dev.daemons import OvnDaemons
from tests.support import ADMIN_TOKEN, netpeerd_config, start_netpeerd, wait_until


def seed(ovn, directory):
    """A network pair Bound by a netpeerd that then stops: OVN holds its rows and stamp."""
    first = start_netpeerd(ovn, directory)
    try:
        a, b = first.tenant("team-a"), first.tenant("team-b")
        a.create_network("team-a", "net-a", ["10.1.0.0/24"])
        b.create_network("team-b", "net-b", ["10.2.0.0/24"])
        a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
        b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
        return first.backend.read_stamp()
    finally:
        first.stop()


def create_once_writes_go(client: Client, name: str, subnet: str, within: float) -> None:
    """Creates team-a's network ``name``, retrying while writes are held (at most ``within`` s)."""
    def created() -> bool:
        try:
            client.create_network("team-a", name, [subnet])
            return True
        except errors.Unavailable:
            return False
    wait_until(created, within, f"writes were still held {within:.0f} s later", step=0.1)


@pytest.fixture
def gate(monkeypatch):
    """``gate()`` holds every backend connection made after it back from the
    NB (so from its replica) until the event it returns is set; the stamp
    read's own connection (a monitor of the state marker alone) goes through."""
    opened = threading.Event()
    session = Connection._session

    def held(self, family, address):
        if not self.where:
            while not opened.wait(0.05):
                if self._closed.is_set():
                    return
        session(self, family, address)

    def close() -> threading.Event:
        monkeypatch.setattr(Connection, "_session", held)
        return opened

    yield close
    opened.set()


def test_the_stamp_read_alone_is_the_replicas(ovn, state_dir):
    stamp = seed(ovn, state_dir / "first")
    assert stamp is not None and stamp.generation > 0
    assert early.read_stamp(ovn.nb_remote, "netpeer", 10, RECONNECT_BACKOFF_MS) == stamp
    assert early.read_stamp(ovn.nb_remote, "someone-else", 10, RECONNECT_BACKOFF_MS) is None


def test_netpeerds_backend_asks_for_its_replica_after_the_stamp(ovn, state_dir):
    """ovsdb-server builds a monitor's first reply in one go (seconds at
    10,000 networks), and a stamp read sent just after the replica's monitor
    waited for all of it. netpeerd's backend asks for the replica once the
    stamp was read, or ``STAMP_FIRST_S`` after it was made without one."""
    stamp = seed(ovn, state_dir)
    backend = OvnBackend(ovn.nb_remote, stamp_first=True)
    try:
        time.sleep(STAMP_FIRST_S / 2)   # not polling: the replica must not be asked for within this time
        assert not backend.connected, "the replica was asked for before the stamp was read"
        assert backend.read_stamp() == stamp
        assert backend.wait_connected(10)
    finally:
        backend.close()
    unread = OvnBackend(ovn.nb_remote, stamp_first=True)
    try:
        assert unread.wait_connected(STAMP_FIRST_S + 10), "without a stamp read the replica never came"
    finally:
        unread.close()


def test_the_stamp_read_gives_up_on_an_nb_that_does_not_answer_without_spinning(state_dir):
    t0, cpu0 = time.monotonic(), time.process_time()
    with pytest.raises(errors.Unreachable, match="did not answer within 2 s"):
        early.read_stamp(f"unix:{state_dir / 'no-such.sock'}", "netpeer", 2.0, RECONNECT_BACKOFF_MS)
    assert time.monotonic() - t0 < 6
    assert time.process_time() - cpu0 < 0.5, "the wait for an NB that does not answer kept a core busy"


def test_reads_are_answered_before_the_replica_arrives_and_writes_wait_for_it(ovn, state_dir, gate):
    seed(ovn, state_dir)
    replica_may_come = gate()
    daemon = Daemon(netpeerd_config(state_dir, ovn.nb_remote))
    t0 = time.monotonic()
    daemon.start()
    try:
        assert time.monotonic() - t0 < 10
        assert not daemon.backend.connected
        with Client(daemon.config.listen, ADMIN_TOKEN, timeout=30) as c:
            assert [n["name"] for n in c.list_networks("team-a")] == ["net-a"]
            with pytest.raises(errors.Unavailable, match="reading OVN's rows before any write"):
                c.create_network("team-a", "net-c", ["10.3.0.0/24"])
            replica_may_come.set()
            create_once_writes_go(c, "net-c", "10.3.0.0/24", 30)
            assert sorted(n["name"] for n in c.list_networks("team-a")) == ["net-a", "net-c"]
        # the first sweep: OVN matches the store
        wait_until(lambda: daemon.service.reconciler.status.sweeps, 30, "netpeerd's first sweep did not complete")
        assert daemon.service.reconciler.status.totals.repaired_rows == 0
        assert daemon.service.reconciler.status.totals.errors == 0
    finally:
        daemon.stop(grace=1)


def test_a_store_that_does_not_belong_is_refused_before_any_read(ovn, state_dir, gate):
    seed(ovn, state_dir / "first")
    gate()
    daemon = Daemon(netpeerd_config(state_dir / "other", ovn.nb_remote))   # a new, empty store
    try:
        with pytest.raises(EpochMismatch, match="OVN was last written by another store"):
            daemon.start()
        assert not daemon.backend.connected
    finally:
        daemon.stop(grace=1)


def test_writes_are_taken_once_an_nb_that_was_down_at_start_comes_up(state_dir):
    ovn = OvnDaemons(state_dir / "ovn")   # not started yet
    daemon = Daemon(netpeerd_config(state_dir, ovn.nb_remote, ovn_timeout="2s")).start()
    try:
        with Client(daemon.config.listen, ADMIN_TOKEN, timeout=30) as c:
            assert c.list_networks("team-a") == []
            with pytest.raises(errors.Unavailable):
                c.create_network("team-a", "net-a", ["10.1.0.0/24"])
            ovn.start()
            create_once_writes_go(c, "net-a", "10.1.0.0/24", 60)
        assert daemon.backend.read_stamp() is not None
    finally:
        daemon.stop(grace=1)
        ovn.stop()
