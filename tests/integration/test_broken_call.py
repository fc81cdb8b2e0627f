"""A write whose connection breaks says so: netpeerd killed while a `netpeer`
write waits in it, the CLI says in one line that the write may or may not
have been applied and how to read it back (not gRPC's "Stream removed").
A read whose connection breaks is sent again by the client. And output
piped into a reader that goes away (`| head`) ends quietly."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.reasons import Reason
from tests.support import ADMIN_TOKEN, netpeerd_process


def _netpeer(endpoint: str, token: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
    env.update(NETPEER_ENDPOINT=endpoint, NETPEER_TOKEN=token)
    return subprocess.Popen([sys.executable, "-m", "netpeer.cli.main", *args], env=env, text=True, **kwargs)


def _writing(db) -> bool:
    """netpeerd holds the store's write lock: a write is under way in it
    (a write holds it until OVN answered: netpeer.service.writes)."""
    con = sqlite3.connect(db, timeout=0)
    try:
        con.execute("BEGIN IMMEDIATE")
        con.rollback()
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        con.close()


def test_a_write_whose_connection_breaks_says_its_outcome_is_unknown(ovn, state_dir):
    d = netpeerd_process(state_dir, ovn.nb_remote, ovn_timeout="60s")
    d.start()
    nb = ovn.pids()["ovsdb-server-nb"]
    try:
        with Client(d.endpoint, ADMIN_TOKEN) as admin:
            token = admin.create_token(["team-a"])["token"]
        os.kill(nb, signal.SIGSTOP)   # the write waits in netpeerd for OVN
        try:
            cli = _netpeer(d.endpoint, token, "network", "create", "net-a", "--subnet", "10.1.0.0/24",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while not _writing(state_dir / "netpeer.db"):
                assert cli.poll() is None and time.monotonic() < deadline, cli.communicate(timeout=5)
                time.sleep(0.02)
            d.kill9()
            _, err = cli.communicate(timeout=60)
        finally:
            os.kill(nb, signal.SIGCONT)
    finally:
        d.stop()
    assert cli.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("error: CreateNetwork: the connection to netpeerd") and "Stream removed" not in err.split(
        "(")[0], err
    assert "may or may not have been applied" in err and "`netpeer network show`" in err, err


def test_output_into_a_reader_that_went_away_ends_quietly(ovn, state_dir):
    d = netpeerd_process(state_dir, ovn.nb_remote)
    d.start()
    try:
        with Client(d.endpoint, ADMIN_TOKEN) as admin:
            token = admin.create_token(["team-a"])["token"]
            with Client(d.endpoint, token) as a:
                for i in range(300):
                    a.create_network("team-a", f"net-{i:03}", [f"10.{i // 250}.{i % 250}.0/24"])
        r, w = os.pipe()
        os.close(r)   # `| head` that read nothing and exited
        cli = _netpeer(d.endpoint, token, "network", "list", stdout=w, stderr=subprocess.PIPE)
        os.close(w)
        _, err = cli.communicate(timeout=60)
    finally:
        d.stop()
    assert err == "" and cli.returncode == 141, (cli.returncode, err)


class Breaker:
    """A relay in front of netpeerd's socket that, once ``arm``ed, drops the
    next connection's next request unsent, closing the connection: the call
    breaks on its way (as when netpeerd dies). Stopped by ``close``."""

    def __init__(self, upstream: str, path: str):
        self.upstream, self.path, self.armed = upstream, path, threading.Event()
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(path)
        self.listener.listen(8)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.socket(socket.AF_UNIX)
            up.connect(self.upstream)
            self.conns += [down, up]
            threading.Thread(target=self._pipe, args=(down, up, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, down, False), daemon=True).start()

    def _pipe(self, src, dst, requests):
        try:
            while data := src.recv(65536):
                if requests and self.armed.is_set():
                    self.armed.clear()
                    src.close()
                    dst.close()
                    return
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.listener.close()
        for s in self.conns:
            s.close()


def test_a_read_whose_connection_breaks_is_sent_again(netpeerd, state_dir):
    breaker = Breaker(str(netpeerd.socket),
                      str(state_dir / "relay.sock"))
    try:
        with Client(f"unix://{state_dir / 'relay.sock'}", netpeerd.token("team-a"), timeout=30) as a:
            a.create_network("team-a", "net-a", ["10.1.0.0/24"])
            breaker.armed.set()
            assert a.get_network("team-a", "net-a")["name"] == "net-a"   # broken once, then sent again
            assert not breaker.armed.is_set()
            breaker.armed.set()
            with pytest.raises(errors.Unavailable) as broken:
                a.create_network("team-a", "net-b", ["10.2.0.0/24"])
            assert broken.value.reason == Reason.OUTCOME_UNKNOWN and "may or may not" in str(broken.value)
    finally:
        breaker.close()
