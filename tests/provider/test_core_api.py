"""The provider core against the real netpeer API: netpeerd's service and
gRPC server in this process, on the in-memory dataplane (no OVN, no root,
no Pulumi). The same operations on real OVN, through Pulumi, are in
test_dynamic.py and tests/e2e."""

from __future__ import annotations

import shutil

import pytest

from netpeer.api.client import Client
from netpeer.api.server import build_server
from netpeer.service import Service
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from netpeer_provider import core
from netpeer_provider.core import network, peering
from tests.support import ADMIN_TOKEN, short_tmpdir


class Api:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def client(self, token: str = ADMIN_TOKEN) -> Client:
        return Client(self.endpoint, token, timeout=30)

    def token(self, *namespaces: str) -> str:
        with self.client() as c:
            return c.create_token(list(namespaces))["token"]

    def session(self, *namespaces: str, progress=None) -> core.Session:
        return core.Session(core.Settings(self.endpoint, self.token(*namespaces)), progress=progress)


class Server:
    """netpeerd's service and gRPC server on a unix socket, restartable."""

    def __init__(self, directory):
        self.store = SqliteStore(directory / "netpeer.db")
        self.service = Service(self.store, MemoryDataplane())
        self.service.bootstrap_admin(ADMIN_TOKEN)
        self.endpoint = f"unix://{directory / 'netpeer.sock'}"
        self.start()

    def start(self):
        self.grpc, _ = build_server(self.service, self.endpoint)
        self.grpc.start()

    def stop(self):
        self.grpc.stop(grace=1).wait()


@pytest.fixture
def server():
    d = short_tmpdir()
    s = Server(d)
    try:
        yield s
    finally:
        s.stop()
        s.store.close()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def api(server):
    return Api(server.endpoint)


NET_A = {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "A",
         "peerings": [{"name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"}]}
TO_C = {"network": "net-a", "name": "to-c", "remote_namespace": "team-c", "remote_network": "net-c",
        "description": "", "ttl": "7d", "wait_for_bound": 0}


def test_lifecycle_import_and_gone(api):
    a = api.session("team-a")
    net = network.create(a, NET_A)
    assert net.id == "namespaces/team-a/networks/net-a" and net.outputs["namespace"] == "team-a"
    assert [(p["name"], p["phase"]) for p in net.outputs["peerings"]] == [("to-b", "Pending")]
    p = peering.create(a, TO_C)
    assert p.id == "namespaces/team-a/networks/net-a/peerings/to-c" and p.outputs["reason"] == "AwaitingRemote"

    # An import (no previous state) reads inputs that declare the resource as it is: no diff after it.
    imported = peering.import_(a, p.id)
    assert peering.diff(imported.outputs, peering.check(imported.inputs)[0]).changes is False
    imported = network.import_(a, net.id)
    assert imported.inputs["peerings"] == []   # the peerings of an imported network are not adopted inline

    b = api.session("team-b")
    network.create(b, {"name": "net-b", "subnets": ["10.2.0.0/24"],
                       "peerings": [{"name": "to-a", "remote_namespace": "team-a", "remote_network": "net-a"}]})
    now = network.read(a, net.id, net.outputs)
    assert now.outputs["peered_networks"] == [{"namespace": "team-b", "name": "net-b", "site": "",
                                               "uid": now.outputs["peered_networks"][0]["uid"],
                                               "prefixes": ["10.2.0.0/24"]}]
    assert now.inputs["peerings"] == [{"name": "to-b", "remote_network": "net-b", "remote_namespace": "team-b",
                                       "ttl": "7d"}]

    out = peering.update(a, p.id, p.outputs, {**TO_C, "description": "hello", "ttl": "2d"})
    assert (out["description"], out["ttl"]) == ("hello", "2d")
    out = network.update(a, net.id, net.outputs, {**NET_A, "peerings": [], "routes": ["10.9.0.0/24"]})
    assert out["routes"] == ["10.9.0.0/24"] and [x["name"] for x in out["peerings"]] == ["to-c"]

    peering.delete(a, p.id, out)
    assert peering.read(a, p.id, p.outputs) is None
    peering.delete(a, p.id, p.outputs)  # already gone: fine
    network.delete(a, net.id, out)
    assert network.read(a, net.id, out) is None


def test_errors_are_typed_one_liners(api):
    a = api.session("team-a")
    network.create(a, NET_A)
    with pytest.raises(core.Conflict) as info:
        peering.create(a, {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b"})
    assert str(info.value) == ("creating peering net-a/to-b: peering team-a/net-a/to-b already exists; a peering "
                               "is managed either inline on its network or as a peering resource, not both")
    assert info.value.kind == "AlreadyExists"
    with pytest.raises(core.ServiceError, match=r"^network team-a/net-x: peerings\[p2\]: .*one peering per remote"):
        network.create(a, {"name": "net-x", "subnets": ["10.3.0.0/24"], "peerings": [
            {"name": "p1", "remote_network": "net-a"}, {"name": "p2", "remote_network": "net-a"}]})
    with api.client(api.token("team-a")) as c:
        assert [n["name"] for n in c.list_networks("team-a")] == ["net-a"]  # nothing left behind
    with pytest.raises(core.ProviderError, match=r"^namespace is required: the token grants team-a, team-b$"):
        network.create(api.session("team-a", "team-b"), {"name": "n", "subnets": ["10.4.0.0/24"]})
    with pytest.raises(core.ServiceError) as info:
        network.create(api.session("team-z"), {"namespace": "team-a", "name": "n", "subnets": ["10.4.0.0/24"]})
    assert info.value.kind == "PermissionDenied" and "\n" not in str(info.value)


class FakeTime:
    """A clock that advances only when the code under test sleeps."""

    def __init__(self, on_sleep=None):
        self.now, self.on_sleep = 0.0, on_sleep

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(self.now)


def test_wait_for_bound_reports_progress_and_times_out(api):
    lines = []
    a = api.session("team-a", progress=lines.append)
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    c = a.client()
    p = c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    t = FakeTime()
    with pytest.raises(core.NotBound) as info:
        peering.wait_for_bound(a, c, p, 2, withdraw=True, sleep=t.sleep, clock=t.clock)
    assert str(info.value) == ("peering team-a/net-a/to-b is Pending (AwaitingRemote: waiting for team-b/net-b to "
                               "consent) after wait_for_bound=2s; this half was withdrawn again, run the apply "
                               "again once the other side has consented")
    assert (info.value.phase, info.value.withdrawn, info.value.path) == ("Pending", True, "wait_for_bound")
    assert lines == ["peering team-a/net-a/to-b is Pending (AwaitingRemote); waiting up to 2s for Bound"]
    assert c.list_peerings("team-a", "net-a") == []
    assert t.now == 2.0


def test_wait_for_bound_returns_once_bound(api):
    a = api.session("team-a")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    b = api.session("team-b")
    network.create(b, {"name": "net-b", "subnets": ["10.2.0.0/24"]})
    c = a.client()
    p = c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")

    def consent(now):
        if now >= 1.0 and not b.client().list_peerings("team-b", "net-b"):
            b.client().create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    t = FakeTime(consent)
    p = peering.wait_for_bound(a, c, p, 30, withdraw=True, sleep=t.sleep, clock=t.clock)
    assert p["phase"] == "Bound" and t.now == 1.0
    assert peering.wait_for_bound(a, c, p, 30, withdraw=True, sleep=t.sleep, clock=t.clock) is p


def test_the_shared_client_survives_a_restart(server, api):
    a = api.session("team-a")
    net = network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    for _ in range(2):
        client = a.client()
        server.stop()
        server.start()  # restarted between two calls: the shared channel reconnects on its own
        assert network.read(a, net.id, net.outputs).outputs["uid"] == net.outputs["uid"]
    server.stop()
    with pytest.raises(core.ServiceError, match="cannot reach netpeerd") as info:
        network.read(a, net.id, net.outputs)
    assert info.value.kind == "Unavailable" and a.client() is not client  # dropped: the next call dials afresh
    server.start()
    # The dropped client was closed although `client` still refers to it: left open, its broken
    # connection (gRPC shares them between channels) would fail the new channel's calls too.
    assert network.read(a, net.id, net.outputs) is not None
