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

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.reasons import Reason
from tests.support import ADMIN_TOKEN, netpeerd_process, wait_until


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
            def writing() -> bool:
                assert cli.poll() is None, cli.communicate(timeout=5)
                return _writing(state_dir / "netpeer.db")
            wait_until(writing, 60, "the write never reached netpeerd's store")
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
    """A relay in front of netpeerd's socket that, once ``armed``, drops the
    next request unsent, closing the connection: the call breaks on its way
    (as when netpeerd dies before it read it); once ``answers`` is set, it
    passes the next request and netpeerd's first HTTP/2 frames of the answer
    (its headers) and closes the connection at the answer's first DATA
    frame: the call breaks after netpeerd took it (as when netpeerd dies
    while it writes). Stopped by ``close``."""

    def __init__(self, upstream: str, path: str):
        self.upstream, self.path, self.armed = upstream, path, threading.Event()
        self.answers = threading.Event()
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
        held = b""   # netpeerd's bytes not yet passed on: whole HTTP/2 frames are
        try:
            while data := src.recv(65536):
                if requests and self.armed.is_set():
                    self.armed.clear()
                    src.close()
                    dst.close()
                    return
                if requests:
                    dst.sendall(data)
                    continue
                held += data
                while len(held) >= 9 and len(held) >= 9 + int.from_bytes(held[:3], "big"):
                    size = 9 + int.from_bytes(held[:3], "big")
                    if held[3] == 0 and self.answers.is_set():   # a DATA frame: the answer itself
                        self.answers.clear()
                        for s in (src, dst):   # shut down first: the other direction's thread waits on dst
                            s.shutdown(socket.SHUT_RDWR)
                            s.close()
                        return
                    dst.sendall(held[:size])
                    held = held[size:]
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
            breaker.answers.set()
            assert a.get_network("team-a", "net-a")["name"] == "net-a"   # broken after netpeerd took it: again
            assert not breaker.answers.is_set()
    finally:
        breaker.close()


def test_a_write_whose_connection_breaks_before_or_after_netpeerd_took_it(netpeerd, state_dir):
    """Dropped on its way, a write was not applied and the client says so
    (it may be sent again); broken after netpeerd took it (netpeerd sent
    the answer's headers), its outcome is unknown: the client says that,
    and the write was in fact applied."""
    breaker = Breaker(str(netpeerd.socket), str(state_dir / "relay.sock"))
    try:
        with Client(f"unix://{state_dir / 'relay.sock'}", netpeerd.token("team-a"), timeout=30) as a:
            a.create_network("team-a", "net-a", ["10.1.0.0/24"])
            breaker.armed.set()
            with pytest.raises(errors.Unavailable) as dropped:
                a.create_network("team-a", "net-b", ["10.2.0.0/24"])
            assert dropped.value.reason == Reason.SERVICE_UNREACHABLE, dropped.value
            with pytest.raises(errors.NotFound):
                a.get_network("team-a", "net-b")
            breaker.answers.set()
            with pytest.raises(errors.Unavailable) as broken:
                a.create_network("team-a", "net-b", ["10.2.0.0/24"])
            assert broken.value.reason == Reason.OUTCOME_UNKNOWN and "may or may not" in str(broken.value), \
                broken.value
            assert a.get_network("team-a", "net-b")["name"] == "net-b"
    finally:
        breaker.close()


def test_a_write_to_a_netpeerd_that_is_down_was_not_applied_and_goes_to_the_next(netpeerd, state_dir):
    """Nothing listens at the first endpoint: the client knows the write
    never left (its channel never connected, no server's headers), says it
    was not applied, and sends it to the next endpoint, where it is."""
    down = f"unix://{state_dir / 'nobody.sock'}"
    token = netpeerd.token("team-a")
    with Client(down, token, timeout=30) as a:
        with pytest.raises(errors.Unavailable) as refused:
            a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    assert refused.value.reason == Reason.SERVICE_UNREACHABLE, refused.value
    assert str(refused.value).startswith(f"cannot reach netpeerd at {down} (is it running?"), refused.value
    with Client(f"{down},{netpeerd.endpoint}", token, timeout=30) as a:
        assert a.create_network("team-a", "net-a", ["10.1.0.0/24"])["name"] == "net-a"
        assert a.get_network("team-a", "net-a")["subnets"] == ["10.1.0.0/24"]
