"""The provider core against the real netpeer API: netpeerd's service and
gRPC server in this process, on the in-memory dataplane (no OVN, no root,
no Pulumi). The same operations on real OVN, through Pulumi, are in
test_dynamic.py and tests/e2e."""

from __future__ import annotations

import shutil
import threading
import time

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

    out = peering.update(a, p.id, p.outputs, {**TO_C, "description": "hello", "ttl": "2d"}).outputs
    assert (out["description"], out["ttl"]) == ("hello", "2d")
    out = network.update(a, net.id, net.outputs, {**NET_A, "peerings": [], "routes": ["10.9.0.0/24"]}).outputs
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
    assert str(info.value) == (
        "creating peering net-a/to-b: peering team-a/net-a/to-b already exists: either it is declared twice (a "
        "peering is managed either inline on its network or as a peering resource, not both), or the resource was "
        "renamed (declare its old name as an alias), or a replace created the new one before deleting the old one "
        "(delete first)")
    assert info.value.kind == "AlreadyExists"
    # Another peering towards the same remote: a renamed resource, most likely.
    with pytest.raises(core.Conflict) as info:
        peering.create(a, {**TO_C, "name": "to-b2", "remote_namespace": "team-b", "remote_network": "net-b"})
    assert str(info.value).endswith("one peering per remote network; perhaps the resource was renamed (declare its "
                                    "old name as an alias)")
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


def test_wait_for_bound_reports_progress_and_keeps_the_half(api):
    lines = []
    a = api.session("team-a", progress=lines.append)
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    c = a.client()
    p = c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    p = peering.wait_for_bound(a, c, p, 6)
    assert (p["phase"], p["reason"]) == ("Pending", "AwaitingRemote")
    # A status line at the start and every 5 s: progress, not only the engine's timer.
    assert lines == ["peering team-a/net-a/to-b is Pending (AwaitingRemote); waiting up to 6s for Bound",
                     "peering team-a/net-a/to-b is Pending (AwaitingRemote); waited 5s of 6s for Bound"]
    assert [x["name"] for x in c.list_peerings("team-a", "net-a")] == ["to-b"]  # never withdrawn


def test_wait_for_bound_timeout_keeps_the_peering_and_warns_or_fails(api):
    a = api.session("team-a")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    created = peering.create(a, {**TO_C, "wait_for_bound": 1})
    assert created.outputs["phase"] == "Pending" and created.id.endswith("/to-c")
    assert created.warnings == ("peering team-a/net-a/to-c is still Pending (AwaitingRemote: waiting for "
                                "team-c/net-c to consent) after wait_for_bound=1s; it is kept and binds once the "
                                "other side consents (a refresh shows it)",)
    strict = core.Session(core.Settings(api.endpoint, api.token("team-a"), error_on_not_bound=True))
    with pytest.raises(core.NotBound) as info:
        peering.update(strict, created.id, created.outputs, {**TO_C, "wait_for_bound": 1, "description": "x"})
    assert str(info.value).endswith("; the peering is kept (error_on_not_bound is true)")
    assert info.value.id == created.id and info.value.outputs["description"] == "x"
    with api.client(api.token("team-a")) as c:
        assert c.get_peering("team-a", "net-a", "to-c")["description"] == "x"


def test_wait_for_bound_stops_at_once_on_failed(api):
    a, b = api.session("team-a"), api.session("team-b")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    network.create(b, {"name": "net-b", "subnets": ["10.1.0.0/24"],
                       "peerings": [{"name": "to-a", "remote_namespace": "team-a", "remote_network": "net-a"}]})
    c = a.client()
    p = c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    assert p["phase"] == "Failed"
    assert peering.wait_for_bound(a, c, p, 30) is p   # nothing to wait for: no call made
    c.delete_peering("team-a", "net-a", "to-b")
    created = peering.create(a, {**TO_C, "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b",
                                 "wait_for_bound": 30})
    assert len(created.warnings) == 1 and created.warnings[0].startswith(
        "peering team-a/net-a/to-b is Failed (OverlappingPrefixes): ")
    assert "run pulumi up once" not in created.warnings[0] and "10.1.0.0/24" in created.warnings[0]


def _later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


def test_wait_for_bound_watches_and_returns_once_bound(api):
    lines = []
    a = api.session("team-a", progress=lines.append)
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    b = api.session("team-b")
    network.create(b, {"name": "net-b", "subnets": ["10.2.0.0/24"]})
    c = a.client()
    p = c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    consent = _later(0.5, lambda: b.client().create_peering("team-b", "net-b", "to-a", "net-a", "team-a"))
    started = time.monotonic()
    p = peering.wait_for_bound(a, c, p, 30)
    consent.join()
    # Told by the watch as it happened: well before the first 5 s status line would have been due.
    assert p["phase"] == "Bound" and time.monotonic() - started < 5 and len(lines) == 2
    assert "is Bound (Bound); waited" in lines[-1]   # the last status line says how the wait ended
    assert peering.wait_for_bound(a, c, p, 30) is p


def test_wait_for_programmed_waits_for_every_chassis(server, api):
    a = api.session("team-a")
    network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    b = api.session("team-b")
    network.create(b, {"name": "net-b", "subnets": ["10.2.0.0/24"]})
    c = a.client()
    c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    # B's half binds the pair; no chassis has acknowledged it yet (nothing runs the Programmer here).
    half = {**TO_C, "name": "to-a", "network": "net-b", "remote_namespace": "team-a", "remote_network": "net-a",
            "wait_for_bound": 1, "wait_for_programmed": True}
    created = peering.create(b, half)
    assert (created.outputs["phase"], created.outputs["wait_for_programmed"]) == ("Bound", True)
    assert created.warnings == ("peering team-b/net-b/to-a is Bound but its dataplane is still Programming after "
                                "wait_for_bound=1s: not every OVN chassis has applied it yet",)
    p = c.get_peering("team-a", "net-a", "to-b")
    assert (p["phase"], p["dataplane"]) == ("Bound", "Programming")
    assert peering.wait_for_bound(a, c, p, 30)["dataplane"] == "Programming"   # Bound is enough without it
    acknowledged = _later(0.5, server.service.programmer.check)
    p = peering.wait_for_bound(a, c, p, 30, programmed=True)
    acknowledged.join()
    assert (p["phase"], p["dataplane"]) == ("Bound", "Programmed")
    assert peering.check({**half, "wait_for_programmed": "yes"})[1] == [
        core.Failure("wait_for_programmed", "wait_for_programmed: 'yes' must be true or false")]


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


def test_deleting_a_network_waits_a_little_for_its_peerings_to_go(api):
    """A destroy may delete a peering the engine knows no dependency of (an
    imported one) together with its network: the network's delete waits."""
    a = api.session("team-a")
    net = network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    c = a.client()
    c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    t = FakeTime(lambda now: c.delete_peering("team-a", "net-a", "to-b") if now == 0.5 else None)
    network.delete(a, net.id, net.outputs, sleep=t.sleep, clock=t.clock)
    assert c.list_networks("team-a") == [] and t.now == 0.5
    net = network.create(a, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    c.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    t = FakeTime()
    with pytest.raises(core.ServiceError, match=r"^deleting network namespaces/team-a/networks/net-a: network "
                                                r"team-a/net-a is in use by 1 peering\(s\): to-b"):
        network.delete(a, net.id, net.outputs, in_use_wait=3, sleep=t.sleep, clock=t.clock)
    assert t.now == 3.0
