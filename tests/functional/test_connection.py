"""netpeer's OVSDB client (``netpeer.ovn.connection``) on a real ovsdb-server:
what a write leaves in the replica when it returns, a refusal, a held first
monitor, a lost connection and a closed one. (Leader changes of a clustered
NB: tests/faults/test_ovn_faults.py and tests/ha.)"""

from __future__ import annotations

import socket
import time

import pytest

from netpeer.ovn.backend import COLUMNS, NB_SCHEMA
from netpeer.ovn.connection import Connection, Disconnected, Refused
from tests.support import wait_until


def _connect(ovn, **kwargs) -> Connection:
    conn = Connection(ovn.nb_remote, NB_SCHEMA, COLUMNS, named=("Address_Set",), timeout=10, **kwargs)
    return conn


def _insert(name: str) -> dict:
    return {"op": "insert", "table": "Address_Set", "row": {"name": name, "addresses": ["set", ["10.0.0.0/8"]]}}


def test_a_write_is_in_the_replica_when_it_returns(ovn):
    conn = _connect(ovn)
    try:
        assert conn.wait_ready(30)
        result = conn.transact([_insert("as1")])
        uuid = result[0]["uuid"][1]
        with conn.lock:   # no wait: the server sent the update before the reply
            assert conn.replica.by_name("Address_Set", "as1") == (uuid,)
            assert conn.replica.tables["Address_Set"][uuid]["addresses"] == ("10.0.0.0/8",)
        assert "as1" in ovn.nbctl("--bare", "--columns=name", "list", "Address_Set")
    finally:
        conn.close()


def test_a_refused_transaction_commits_nothing_and_says_why(ovn):
    conn = _connect(ovn)
    try:
        assert conn.wait_ready(30)
        conn.transact([_insert("taken")])
        with pytest.raises(Refused, match="constraint violation"):
            conn.transact([_insert("fresh"), _insert("taken")])   # the second breaks the unique name
        names = ovn.nbctl("--bare", "--columns=name", "list", "Address_Set").split()
        assert sorted(names) == ["taken"]
    finally:
        conn.close()


def test_the_first_monitor_waits_for_start_monitor(ovn):
    conn = _connect(ovn, hold=30)
    try:
        wait_until(lambda: conn.up, 10, "never connected")
        time.sleep(0.5)   # not polling: the replica must still not be asked for a while later
        assert not conn.ready and conn.replica is None
        conn.start_monitor()
        assert conn.wait_ready(30)
        assert conn.replica.tables["NB_Global"]
    finally:
        conn.close()


def test_a_lost_connection_is_made_again_with_a_new_replica(ovn):
    conn = _connect(ovn, backoff=0.1)
    try:
        assert conn.wait_ready(30)
        first, seqno = conn.replica, conn.seqno
        conn._sock.shutdown(socket.SHUT_RDWR)
        ovn.nbctl("create", "Address_Set", "name=while_away")
        wait_until(lambda: conn.seqno >= seqno + 2 and conn.ready, 30, "no reconnection")
        assert conn.replica is not first
        assert conn.replica.by_name("Address_Set", "while_away")
    finally:
        conn.close()


def test_a_closed_connection_stops_its_thread_and_refuses_requests(ovn):
    conn = _connect(ovn)
    assert conn.wait_ready(30)
    conn.close()
    assert not conn._thread.is_alive()
    with pytest.raises(Disconnected):
        conn.transact([_insert("late")])
