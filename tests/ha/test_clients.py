"""Clients with several endpoints (``NETPEER_ENDPOINT=a,b``): the CLI and
the provider core reach the replica that is up; a read whose replica dies
under it is answered by the other; a write whose replica dies after it
took the call is *not* re-sent (it may have been applied) and the caller is
told UNAVAILABLE; one the replica never took goes to the other."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.reasons import Reason
from tests.support import ADMIN_TOKEN


@pytest.fixture
def pair(replicas, ovn):
    daemons = replicas(2, ovn.nb_remote)
    for d in daemons:
        d.start()
    return daemons


def cli(*args: str, endpoint: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NETPEER_ENDPOINT=endpoint, NETPEER_TOKEN=ADMIN_TOKEN)
    return subprocess.run([sys.executable, "-m", "netpeer.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_cli_and_provider_reach_the_replica_that_is_up(pair, state_dir):
    dead = f"unix://{state_dir}/nobody-listens.sock"
    both = f"{dead},{pair[0].endpoint}"
    out = cli("network", "create", "n1", "--subnet", "10.1.0.0/24", "-n", "a", "-o", "json", endpoint=both)
    assert out.returncode == 0, out.stderr               # a write that never reached a server moves on
    out = cli("network", "list", "-n", "a", "-o", "json", endpoint=both)
    assert out.returncode == 0 and '"n1"' in out.stdout, out.stderr
    from netpeer_provider.core.session import Session, Settings
    session = Session(Settings(endpoint=both, token=ADMIN_TOKEN))
    assert [n["name"] for n in session.call("list networks", lambda c: c.list_networks("a"))] == ["n1"]
    out = cli("network", "list", "-n", "a", endpoint=f"{dead},unix://{state_dir}/nor-this.sock")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert "cannot reach netpeerd at any of" in out.stderr, out.stderr
    out = cli("network", "list", "-n", "a", endpoint=f"{pair[0].endpoint},,")
    assert out.returncode != 0 and "endpoint" in out.stderr and "empty item" in out.stderr, out.stderr


def _frozen_call(victim, call, frozen: int | None = None):
    """Runs ``call`` while ``frozen`` (a pid; by default the victim's) is
    stopped, then kills the victim; what the call answered. The victim
    stopped: the request is sent, never taken. OVN's NB stopped: the victim
    takes a write and waits in it for OVN."""
    box: dict = {}

    def run():
        try:
            box["answer"] = call()
        except errors.NetpeerError as exc:
            box["error"] = exc
    ovn_stopped = frozen is not None
    frozen = frozen if ovn_stopped else victim.pid
    os.kill(frozen, signal.SIGSTOP)
    try:
        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.5)   # not polling: the call is on its way (and, with OVN stopped, in the victim)
    finally:
        victim.kill9()
        if ovn_stopped:
            os.kill(frozen, signal.SIGCONT)
    t.join(60)
    assert not t.is_alive()
    return box


def test_a_write_in_doubt_is_not_resent_a_read_is(pair, ovn):
    first, second = pair
    client = Client(f"{first.endpoint},{second.endpoint}", ADMIN_TOKEN, timeout=30)
    try:
        client.list_networks("a")                         # connected to the first replica
        box = _frozen_call(first, lambda: client.create_network("a", "in-doubt", ["10.7.0.0/24"]),
                           frozen=ovn.pids()["ovsdb-server-nb"])
        assert isinstance(box.get("error"), errors.Unavailable), box
        assert box["error"].reason == Reason.OUTCOME_UNKNOWN, box
        with Client(second.endpoint, ADMIN_TOKEN) as other:
            assert [n["name"] for n in other.list_networks("a")] == []     # not re-sent to the second one
        # A write the stopped replica never took (no headers came back): the second one makes it.
        first.spawn()
        first.wait_ready()
        client.list_networks("a")
        client._current = 0
        box = _frozen_call(first, lambda: client.create_network("a", "never-taken", ["10.8.0.0/24"]))
        assert box.get("answer", {}).get("name") == "never-taken", box
        with Client(second.endpoint, ADMIN_TOKEN) as other:
            assert [n["name"] for n in other.list_networks("a")] == ["never-taken"]
        first.spawn()
        first.wait_ready()
        client.list_networks("a")
        client._current = 0                               # next call to the first replica again
        box = _frozen_call(first, lambda: client.list_networks("a"))
        assert [n["name"] for n in box.get("answer", [])] == ["never-taken"], box   # the read went to the second
    finally:
        client.close()
