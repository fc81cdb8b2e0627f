"""The provider plugin (`pulumi-resource-netpeer`) driven over gRPC as the
engine drives it, against a real netpeerd on real OVN; and its schema."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import grpc
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.proto import engine_pb2, provider_pb2, provider_pb2_grpc

from netpeer_provider.plugin import schema_json
from tests.provider.dynamic_server import CallFailed, FakeEngine, call
from tests.support import ROOT

NET = "urn:pulumi:dev::p::netpeer:index:Network::net-a"
PEER = "urn:pulumi:dev::p::netpeer:index:NetworkPeering::to-b"


class Plugin:
    """One `python -m netpeer_provider.plugin ENGINE` process and a client."""

    def __init__(self):
        self.engine = FakeEngine()
        env = {k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")}
        self.proc = subprocess.Popen([sys.executable, "-m", "netpeer_provider.plugin", self.engine.address],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        port = self.proc.stdout.readline().strip()
        assert port.isdigit(), self.proc.stderr.read()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def close(self):
        self.channel.close()
        self.proc.terminate()
        self.proc.wait(10)
        self.engine.close()

    def call(self, method, request):
        return call(self.stub, method, request)

    @staticmethod
    def struct(props: dict) -> struct_pb2.Struct:
        return asyncio.run(rpc.serialize_properties(props, {}))

    @staticmethod
    def dict(struct) -> dict:
        return rpc.deserialize_properties(struct, True)

    def configure(self, **args):
        return self.call("Configure", provider_pb2.ConfigureRequest(args=self.struct(args), acceptSecrets=True))

    def check(self, urn, news):
        r = self.call("Check", provider_pb2.CheckRequest(urn=urn, news=self.struct(news)))
        return self.dict(r.inputs), [(f.property, f.reason) for f in r.failures]

    def create(self, urn, props, preview=False):
        r = self.call("Create", provider_pb2.CreateRequest(urn=urn, properties=self.struct(props), preview=preview))
        return r.id, self.dict(r.properties)

    def diff(self, urn, id_, olds, news):
        return self.call("Diff", provider_pb2.DiffRequest(urn=urn, id=id_, olds=self.struct(olds),
                                                          news=self.struct(news)))

    def read(self, urn, id_, props=None, inputs=None):
        r = self.call("Read", provider_pb2.ReadRequest(urn=urn, id=id_, properties=self.struct(props or {}),
                                                       inputs=self.struct(inputs or {})))
        return r.id, self.dict(r.properties), self.dict(r.inputs)

    def update(self, urn, id_, olds, news, preview=False):
        r = self.call("Update", provider_pb2.UpdateRequest(urn=urn, id=id_, olds=self.struct(olds),
                                                           news=self.struct(news), preview=preview))
        return self.dict(r.properties)

    def delete(self, urn, id_, props):
        self.call("Delete", provider_pb2.DeleteRequest(urn=urn, id=id_, properties=self.struct(props)))


@pytest.fixture
def plugin():
    p = Plugin()
    try:
        yield p
    finally:
        p.close()


def test_the_committed_schema_is_the_generated_one():
    committed = (ROOT / "schema/pulumi/schema.json").read_text()
    assert committed == schema_json.text(), "run `make schema`"
    spec = json.loads(committed)
    assert set(spec["resources"]) == {"netpeer:index:Network", "netpeer:index:NetworkPeering"}
    assert spec["config"]["variables"]["token"]["secret"] is True
    assert set(spec["config"]["variables"]) == {"endpoint", "token", "caCert", "clientCert", "clientKey",
                                                "errorOnNotBound"}
    peering = spec["resources"]["netpeer:index:NetworkPeering"]
    assert set(peering["requiredInputs"]) == {"network", "remoteNetwork"}
    assert "remoteUid" in peering["inputProperties"] and "pinnedRemoteUid" not in peering["properties"]
    assert "`errorOnNotBound`" in peering["inputProperties"]["waitForBound"]["description"]
    out = subprocess.run([sys.executable, "-m", "netpeer_provider.plugin.schema_json", "--check",
                          str(ROOT / "schema/pulumi/schema.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_the_schema_check_fails_on_drift(tmp_path):
    stale = tmp_path / "schema.json"
    stale.write_text(schema_json.text().replace('"remoteUid"', '"remoteUID"'))
    out = subprocess.run([sys.executable, "-m", "netpeer_provider.plugin.schema_json", "--check", str(stale)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "run `make schema`" in out.stderr and "remoteUID" in out.stderr


def test_schema_and_lifecycle_through_the_plugin(plugin, netpeerd):
    r = plugin.call("GetSchema", provider_pb2.GetSchemaRequest())
    assert json.loads(r.schema) == json.loads(schema_json.text())
    b = netpeerd.tenant("team-b")
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    assert plugin.configure(endpoint=netpeerd.endpoint, token=netpeerd.token("team-a")).supportsPreview

    # Check: camelCase in and out, the resource's name as default name, failures naming the field.
    inputs, failures = plugin.check(NET, {"subnets": ["10.1.0.0/24"]})
    assert failures == [] and inputs["name"] == "net-a"
    _, failures = plugin.check(PEER, {"network": "net-a", "remoteNetwork": "Bad_Name", "waitForBound": 5000})
    assert {f for f, _ in failures} == {"remoteNetwork", "waitForBound"}
    assert any(m.startswith("remoteNetwork: 'Bad_Name' ") for _, m in failures)

    pid, preview = plugin.create(NET, {"name": "net-a", "subnets": ["10.1.0.0/24"]}, preview=True)
    assert pid == "" and preview["namespace"] == "team-a" and "uid" not in preview
    net_id, net = plugin.create(NET, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    assert net_id == "namespaces/team-a/networks/net-a" and net["uid"] and net["peeredNetworks"] == []
    props = {"network": "net-a", "name": "to-b", "remoteNamespace": "team-b", "remoteNetwork": "net-b",
             "waitForBound": 1}
    pid, p = plugin.create(PEER, props)
    assert (p["phase"], p["reason"], p["waitForBound"]) == ("Pending", "AwaitingRemote", 1)
    assert any("waiting up to 1s" in m for m in plugin.engine.messages(engine_pb2.INFO, ephemeral=True))
    assert plugin.engine.messages(engine_pb2.WARNING)[0].startswith(
        "peering team-a/net-a/to-b is still Pending (AwaitingRemote: ")

    # Diff: per-field kinds, camelCase; a remote_uid change is an in-place update.
    d = plugin.diff(PEER, pid, p, {**props, "description": "x"})
    assert d.changes == provider_pb2.DiffResponse.DIFF_SOME and list(d.replaces) == []
    assert set(d.detailedDiff) == {"description"}
    d = plugin.diff(PEER, pid, p, {**props, "remoteUid": "00000000-0000-4000-8000-000000000000"})
    assert list(d.replaces) == [] and d.detailedDiff["remoteUid"].kind == provider_pb2.PropertyDiff.ADD
    with pytest.raises(CallFailed) as info:
        plugin.diff(NET, net_id, net, {"name": "net-a", "namespace": "team-z", "subnets": ["10.1.0.0/24"]})
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert str(info.value).startswith("replacing network team-a/net-a: ")

    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    rid, refreshed, rin = plugin.read(PEER, pid, p, inputs=props)
    assert (rid, refreshed["phase"]) == (pid, "Bound")
    assert rin == props   # a refresh keeps the program's inputs as they were
    updated = plugin.update(PEER, pid, refreshed, {**props, "description": "hello"})
    assert updated["description"] == "hello" and updated["phase"] == "Bound"

    # Import: no properties at all; a missing id is named.
    iid, imported, iin = plugin.read(NET, net_id)
    assert iid == net_id and iin["subnets"] == ["10.1.0.0/24"] and imported["peeredNetworks"][0]["name"] == "net-b"
    with pytest.raises(CallFailed, match=r"^importing network namespaces/team-a/networks/nope: it does not"):
        plugin.read(NET, "namespaces/team-a/networks/nope")

    plugin.delete(PEER, pid, updated)
    assert plugin.read(PEER, pid, updated)[0] == ""   # gone: refresh drops it
    plugin.delete(NET, net_id, net)
    assert [n["name"] for n in netpeerd.client(netpeerd.token("team-a")).list_networks("team-a")] == []


def test_plugin_errors_and_partial_failures(plugin, netpeerd):
    plugin.configure(endpoint=netpeerd.endpoint, token=netpeerd.token("team-a"), errorOnNotBound="true")
    plugin.create(NET, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    with pytest.raises(CallFailed) as info:
        plugin.create(NET, {"name": "net-a", "subnets": ["10.1.0.0/24"]})
    assert str(info.value) == "creating network net-a: network team-a/net-a already exists"
    assert info.value.code == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(CallFailed) as info:
        plugin.create(PEER, {"network": "net-a", "name": "to-b", "remoteNamespace": "team-b",
                             "remoteNetwork": "net-b", "waitForBound": 1})
    assert str(info.value).endswith("(netpeer:errorOnNotBound is true)")
    recorded = info.value.init_failed
    assert recorded.id == "namespaces/team-a/networks/net-a/peerings/to-b"
    assert Plugin.dict(recorded.properties)["phase"] == "Pending"
    r = plugin.call("CheckConfig", provider_pb2.CheckRequest(urn="urn:pulumi:dev::p::pulumi:providers:netpeer::x",
                                                             news=Plugin.struct({"errorOnNotBound": "maybe"})))
    assert [(f.property, f.reason) for f in r.failures] == [
        ("errorOnNotBound", "netpeer:errorOnNotBound: 'maybe' is not a boolean (true or false; "
                            "NETPEER_ERROR_ON_NOT_BOUND likewise)")]


def test_get_peering_requests_and_accepting_one_through_the_plugin(plugin, netpeerd):
    """The package's function reads the requests to team-b's network; a NetworkPeering built from a
    request's fields accepts it, and both halves are Bound."""
    with netpeerd.client() as admin:
        admin.create_network("team-a", "net-a", ["10.1.0.0/24"])
        admin.create_network("team-b", "net-b", ["10.2.0.0/24"])
    with netpeerd.tenant("team-a") as a:
        a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    plugin.configure(endpoint=netpeerd.endpoint, token=netpeerd.token("team-b"))
    r = plugin.call("Invoke", provider_pb2.InvokeRequest(
        tok="netpeer:index:getPeeringRequests", args=plugin.struct({"network": "net-b"})))
    assert not r.failures, r.failures
    out = plugin.dict(getattr(r, "return"))
    assert (out["namespace"], out["network"]) == ("team-b", "net-b")
    [request] = out["requests"]
    assert (request["requesterNamespace"], request["requesterNetwork"], request["prefixes"]) == \
        ("team-a", "net-a", ["10.1.0.0/24"])
    _, made = plugin.create(PEER, {"network": request["network"], "name": "from-a",
                                   "remoteNamespace": request["requesterNamespace"],
                                   "remoteNetwork": request["requesterNetwork"],
                                   "remoteUid": request["requesterUid"]})
    assert made["phase"] == "Bound"
    with netpeerd.tenant("team-a") as a:
        assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"
    r = plugin.call("Invoke", provider_pb2.InvokeRequest(
        tok="netpeer:index:getPeeringRequests", args=plugin.struct({})))
    assert plugin.dict(getattr(r, "return"))["requests"] == []
