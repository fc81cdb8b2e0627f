"""Shared fixtures: real OVN daemons in a private temp directory, and a real
netpeerd (service + store + OVN backend + gRPC server on a unix socket).

Nothing here is mocked. A missing OVN package fails the test loudly: the
suite is meant to run where ``scripts/setup.sh`` has installed it.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from netpeer.api.client import Client
from netpeer.api.server import build_server
from netpeer.ovn.backend import OvnBackend
from netpeer.ovn.daemons import OvnDaemons
from netpeer.service import Service
from netpeer.store.sqlite import SqliteStore

ADMIN_TOKEN = "np_admin_" + "a" * 40


def short_tmpdir() -> Path:
    """Unix socket paths must stay under 108 bytes: pytest's tmp_path is too long."""
    return Path(tempfile.mkdtemp(prefix="np-", dir="/tmp"))


@pytest.fixture
def state_dir():
    d = short_tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ovn(state_dir):
    daemons = OvnDaemons(state_dir / "ovn")
    try:
        daemons.start()
        yield daemons
    finally:
        daemons.stop()


@dataclasses.dataclass
class Netpeerd:
    """A real netpeerd in this process."""

    ovn: OvnDaemons
    service: Service
    backend: OvnBackend
    store: SqliteStore
    endpoint: str
    socket: Path

    def client(self, token: str = ADMIN_TOKEN) -> Client:
        return Client(self.endpoint, token, timeout=30)

    def token(self, *namespaces: str) -> str:
        with self.client() as c:
            return c.create_token(list(namespaces))["token"]

    def tenant(self, namespace: str) -> Client:
        return self.client(self.token(namespace))

    def owned_rows(self) -> dict[str, list[dict]]:
        return self.backend.owned_rows()


def start_netpeerd(ovn: OvnDaemons, directory: Path) -> tuple[Netpeerd, callable]:
    store = SqliteStore(directory / "netpeer.db")
    backend = OvnBackend(ovn.nb_remote, owner="netpeer", timeout=10)
    assert backend.wait_connected(30), "netpeerd could not connect to the OVN NB database"
    service = Service(store, backend)
    service.bootstrap_admin(ADMIN_TOKEN)
    socket = directory / "netpeer.sock"
    server, _ = build_server(service, f"unix://{socket}")
    server.start()

    def stop():
        server.stop(grace=1).wait()
        backend.close()
        store.close()

    return Netpeerd(ovn, service, backend, store, f"unix://{socket}", socket), stop


@pytest.fixture
def netpeerd(ovn, state_dir):
    daemon, stop = start_netpeerd(ovn, state_dir)
    try:
        yield daemon
    finally:
        stop()
