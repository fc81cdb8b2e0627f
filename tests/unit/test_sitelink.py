"""The site link relay (``netpeer_dev.sitelink``) of a site that runs its
netpeerd as replicas: the other sites' connections go to the replica that
last accepted one, and to the next when it stops accepting. The relay runs
as its own process (on loopback here, without a namespace); the replicas
are unix sockets that answer with their name."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from netpeer_dev.daemons import alive
from tests.support import short_tmpdir, wait_until


class Replica:
    """A unix socket that answers every connection with its name, until closed
    (the file stays, as a killed netpeerd leaves it: a connection is refused)."""

    def __init__(self, path: Path, name: bytes) -> None:
        self.path, self.name = path, name
        self.open()

    def open(self) -> None:
        self.path.unlink(missing_ok=True)
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(self.path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.sendall(self.name)
                except OSError:   # the caller went away first (the relay's readiness probe)
                    pass

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ask(port: int) -> bytes:
    """What the replica a new connection reached says ("" when none accepted)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(10)
        data = b""
        while chunk := s.recv(64):
            data += chunk
        return data


@pytest.fixture
def relay_to_two():
    root = short_tmpdir("np-rl-")
    replicas = [Replica(root / "r1.sock", b"r1"), Replica(root / "r2.sock", b"r2")]
    forwards = root / "forwards.json"
    forwards.write_text("{}\n")
    port = _free_port()
    with open(root / "sitelink.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "netpeer_dev.sitelink", f"--pidfile={root / 'pid'}",
                                 f"--serve=127.0.0.1:{port}={replicas[0].path},{replicas[1].path}",
                                 f"--forwards={forwards}"], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                assert proc.poll() is None, (root / "sitelink.log").read_text()
                return False
        wait_until(listening, 30, "the relay did not listen within 30 s")
        yield port, replicas, root / "sitelink.log"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        assert not alive(proc.pid)
        for r in replicas:
            if r.sock.fileno() != -1:
                r.close()
        shutil.rmtree(root, ignore_errors=True)


def test_the_relay_fails_over_to_the_next_replica_and_stays_there(relay_to_two) -> None:
    port, (r1, r2), log = relay_to_two
    assert [_ask(port) for _ in range(3)] == [b"r1"] * 3
    r1.close()                                     # r1 dies: its socket refuses
    assert [_ask(port) for _ in range(3)] == [b"r2"] * 3
    assert "now forwarding to" in log.read_text() and str(r2.path) in log.read_text()
    r1.open()                                      # r1 back: the relay stays with r2 while it accepts
    assert _ask(port) == b"r2"
    r2.close()
    assert _ask(port) == b"r1"
    r1.close()                                     # none accepts: the connection is closed, the relay lives on
    assert _ask(port) == b""
    r2.open()
    assert _ask(port) == b"r2"
