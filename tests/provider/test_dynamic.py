"""The providers through Pulumi's dynamic-provider server, against netpeerd."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

import grpc
import pytest
from pulumi.dynamic import CreateResult, ResourceProvider
from pulumi.runtime.proto import engine_pb2, provider_pb2
from pulumi.runtime.rpc import UNKNOWN

from netpeer_provider import NetworkPeeringProvider, NetworkProvider
from netpeer_provider.common import known
from tests.provider.dynamic_server import CallFailed, DynamicServer

NP, PP = NetworkProvider(), NetworkPeeringProvider()


def configure(dynamic, netpeerd, namespace):
    token = netpeerd.token(namespace)
    dynamic.configure({"netpeer:endpoint": netpeerd.endpoint, "netpeer:token": token})
    return token


def test_provider_pickles_by_reference():
    from pulumi.dynamic.dynamic import serialize_provider
    raw = base64.b64decode(serialize_provider(PP))
    assert len(raw) < 200 and b"netpeer_provider.peering" in raw and b"co_code" not in raw


def test_the_face_translates_unknowns_and_speaks_pulumi():
    from pulumi.output import Unknown

    from netpeer_provider import common, core
    assert common.to_core({"a": [UNKNOWN, Unknown()], "b": (1, "x")}) == {"a": [core.UNKNOWN] * 2, "b": (1, "x")}
    assert common.to_pulumi({"a": [core.UNKNOWN], "b": None}) == {"a": [UNKNOWN], "b": None}
    assert not known([{"x": UNKNOWN}]) and known({"x": ["y"]})
    with pytest.raises(core.MissingSetting, match=r"^netpeer:token is not set: run `pulumi config set --secret "
                                                  r"netpeer:token <token>` or export NETPEER_TOKEN$"):
        core.Session(core.Settings("unix:///x"), common.TERMS).client()


def test_check_names_the_field_and_tolerates_unknowns(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    _, failures = dynamic.check(NP, {"name": "net-a", "subnets": ["10.1.0.5/24"], "routes": []})
    # The top-level property (the engine prints its value; `subnets[0]` it would print as {<nil>}).
    assert failures == [("subnets", "subnets[0]: '10.1.0.5/24' has host bits set; did you mean 10.1.0.0/24?")]
    _, failures = dynamic.check(PP, {"network": "net-a", "name": "internal", "remote_network": "x", "ttl": "1y"})
    assert {f for f, _ in failures} == {"name", "ttl"}
    inputs, failures = dynamic.check(PP, {"network": UNKNOWN, "name": "p", "remote_network": UNKNOWN, "ttl": "7d"})
    assert failures == [] and not known(inputs["network"])
    _, failures = dynamic.check(NP, {"name": "n", "subnets": UNKNOWN, "routes": [UNKNOWN]})
    assert failures == []


def test_lifecycle_through_the_dynamic_server(dynamic, netpeerd):
    token_a = configure(dynamic, netpeerd, "team-a")
    b = netpeerd.tenant("team-b")
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])

    net_id, net = dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [],
                                      "description": "A", "peerings": []})
    assert net_id == "namespaces/team-a/networks/net-a" and net["namespace"] == "team-a" and net["uid"]
    props = {"network": "net-a", "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b",
             "description": "", "ttl": "7d", "wait_for_bound": 0}
    pid, p = dynamic.create(PP, props)
    assert pid == "namespaces/team-a/networks/net-a/peerings/to-b"
    assert (p["phase"], p["reason"]) == ("Pending", "AwaitingRemote")
    assert all(k in p for k in props)  # every input is in the outputs

    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    _, refreshed, inputs = dynamic.read(PP, pid, p)
    assert refreshed["phase"] == "Bound" and refreshed["remote_uid"]
    assert inputs == {}   # a refresh leaves the engine the program's inputs as they were
    _, imported, inputs = dynamic.read(PP, pid, {})    # an import: the inputs that declare it
    assert inputs["remote_network"] == "net-b" and imported["phase"] == "Bound"

    # description updates in place; a remote change replaces (delete first).
    d = dynamic.diff(PP, pid, refreshed, {**props, "description": "hello"})
    assert d.changes == provider_pb2.DiffResponse.DIFF_SOME and list(d.replaces) == []
    d = dynamic.diff(PP, pid, refreshed, {**props, "remote_network": "net-c"})
    assert list(d.replaces) == ["remote_network"] and d.deleteBeforeReplace
    d = dynamic.diff(PP, pid, refreshed, props)
    assert d.changes == provider_pb2.DiffResponse.DIFF_NONE
    updated = dynamic.update(PP, pid, refreshed, {**props, "description": "hello", "ttl": "2d"})
    assert updated["description"] == "hello" and updated["ttl"] == "2d" and updated["phase"] == "Bound"

    # Gone from the service: read says deleted; delete of a gone peering succeeds.
    netpeerd.client(token_a).delete_peering("team-a", "net-a", "to-b")
    gone_id, _, _ = dynamic.read(PP, pid, updated)
    assert gone_id == ""
    dynamic.delete(PP, pid, updated)
    dynamic.delete(NP, net_id, net)
    assert netpeerd.owned_rows().get("Logical_Router", []) and len(netpeerd.owned_rows()["Logical_Router"]) == 1


def test_inline_peerings_and_conflict(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    b = netpeerd.tenant("team-b")
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    net_id, net = dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
                                      "peerings": [{"name": "to-b", "remote_namespace": "team-b",
                                                    "remote_network": "net-b"}]})
    assert net["peerings"][0]["phase"] == "Bound" and net["peered_networks"][0]["name"] == "net-b"
    # The same peering as a separate resource is refused, clearly.
    with pytest.raises(CallFailed, match="managed either inline .* or as a NetworkPeering"):
        dynamic.create(PP, {"network": "net-a", "name": "to-b", "remote_namespace": "team-b",
                            "remote_network": "net-b", "description": "", "wait_for_bound": 0})
    # A network whose inline peerings fail is not left behind.
    with pytest.raises(CallFailed, match=r"peerings\[p2\]: .*team-a/net-a"):
        dynamic.create(NP, {"name": "net-x", "subnets": ["10.3.0.0/24"], "routes": [], "description": "",
                            "peerings": [{"name": "p1", "remote_network": "net-a"},
                                         {"name": "p2", "remote_network": "net-a"}]})
    assert [n["name"] for n in netpeerd.client(netpeerd.token("team-a")).list_networks("team-a")] == ["net-a"]
    # Dropping the inline declaration withdraws it.
    news = {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "", "peerings": []}
    assert dynamic.diff(NP, net_id, net, news).changes == provider_pb2.DiffResponse.DIFF_SOME
    out = dynamic.update(NP, net_id, net, news)
    assert out["peerings"] == [] and out["peered_networks"] == []
    assert b.get_peering("team-b", "net-b", "to-a")["reason"] == "RemoteWithdrawn"


def test_service_errors_are_one_line(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
                        "peerings": []})
    with pytest.raises(CallFailed) as info:
        dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
                            "peerings": []})
    assert "network" in str(info.value) and "net-a" in str(info.value), str(info.value)
    assert "Traceback" not in str(info.value)


def test_errors_are_one_line_with_the_service_code(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    net = {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "", "peerings": []}
    dynamic.create(NP, net)
    with pytest.raises(CallFailed) as info:
        dynamic.create(NP, net)
    # Not "Exception calling application: ...", and a code telling the engine nothing was done.
    assert str(info.value).startswith("creating network net-a: ") and "network" in str(info.value)
    assert "\n" not in str(info.value) and info.value.code == grpc.StatusCode.ALREADY_EXISTS


def test_wait_for_bound_keeps_the_half_warns_and_shows_progress(dynamic, netpeerd):
    token = configure(dynamic, netpeerd, "team-a")
    dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
                        "peerings": []})
    pid, p = dynamic.create(PP, {"network": "net-a", "name": "to-b", "remote_namespace": "team-b",
                                 "remote_network": "net-b", "description": "", "wait_for_bound": 1})
    assert pid.endswith("/to-b") and p["phase"] == "Pending"
    assert [x["name"] for x in netpeerd.client(token).list_peerings("team-a", "net-a")] == ["to-b"]
    engine = dynamic.engine
    assert engine.messages(engine_pb2.INFO, ephemeral=True) == [
        "peering team-a/net-a/to-b is Pending (AwaitingRemote); waiting up to 1s for Bound"]
    (warning,) = engine.messages(engine_pb2.WARNING)
    assert warning.startswith("peering team-a/net-a/to-b is still Pending (AwaitingRemote: ")
    assert {x.urn for x in engine.logs} == {dynamic.urn(PP)}


def test_error_on_not_bound_fails_and_records_the_peering(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    dynamic.configure({"netpeer:endpoint": netpeerd.endpoint, "netpeer:token": netpeerd.token("team-a"),
                       "netpeer:errorOnNotBound": "true"})
    dynamic.create(NP, {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
                        "peerings": []})
    with pytest.raises(CallFailed) as info:
        dynamic.create(PP, {"network": "net-a", "name": "to-b", "remote_namespace": "team-b",
                            "remote_network": "net-b", "description": "", "wait_for_bound": 1})
    assert str(info.value).endswith("the peering is kept (netpeer:errorOnNotBound is true)")
    # A partial failure: the engine records the resource (id and outputs, provider included).
    recorded = info.value.init_failed
    assert recorded.id == "namespaces/team-a/networks/net-a/peerings/to-b"
    outputs = DynamicServer._dict(recorded.properties)
    assert outputs["phase"] == "Pending" and "__provider" in outputs


def test_preview_asks_the_service_and_warns_on_failed(dynamic, netpeerd):
    assert configure_response(dynamic, netpeerd, "team-a").supportsPreview
    b = netpeerd.tenant("team-b")
    b.create_network("team-b", "net-b", ["10.1.0.0/24"])
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    net = {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "", "peerings": []}
    pid, preview = dynamic.create(NP, net, preview=True)
    assert pid == "" and preview["namespace"] == "team-a" and "uid" not in preview
    dynamic.create(NP, net)
    props = {"network": "net-a", "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b",
             "description": "", "wait_for_bound": 0}
    pid, preview = dynamic.create(PP, props, preview=True)
    assert (pid, preview["phase"], preview["reason"]) == ("", "Failed", "OverlappingPrefixes")
    assert dynamic.engine.messages(engine_pb2.WARNING)[0].startswith(
        "peering team-a/net-a/to-b would be Failed (OverlappingPrefixes): ")
    assert netpeerd.client(netpeerd.token("team-a")).list_peerings("team-a", "net-a") == []
    # A refused input fails the preview, in one line.
    with pytest.raises(CallFailed) as info:
        dynamic.create(NP, {**net, "namespace": "team-z"}, preview=True)
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED and "\n" not in str(info.value)


def test_other_dynamic_providers_are_previewed_as_before(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    pid, outputs = dynamic.create(Echo(), {"anything": "x"}, preview=True)
    assert (pid, outputs["anything"]) == ("", "x")
    assert ECHOED.exists() is False  # its create was not called during the preview


def test_replacement_refused_in_diff_with_per_field_diffs(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    net = {"name": "net-a", "subnets": ["10.1.0.0/24"], "routes": [], "description": "", "peerings": []}
    net_id, outs = dynamic.create(NP, net)
    d = dynamic.diff(NP, net_id, outs, {**net, "description": "x"})
    assert d.hasDetailedDiff and dict(d.detailedDiff) == {
        "description": provider_pb2.PropertyDiff(kind=provider_pb2.PropertyDiff.ADD, inputDiff=True)}
    with pytest.raises(CallFailed) as info:
        dynamic.diff(NP, net_id, outs, {**net, "namespace": "team-z"})
    assert str(info.value).startswith("replacing network team-a/net-a: ") and "team-z" in str(info.value)
    assert info.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_import_of_a_missing_id_names_it(dynamic, netpeerd):
    configure(dynamic, netpeerd, "team-a")
    with pytest.raises(CallFailed) as info:
        dynamic.read(NP, "namespaces/team-a/networks/nope", {})
    assert str(info.value).startswith("importing network namespaces/team-a/networks/nope: it does not exist")


def configure_response(dynamic, netpeerd, namespace):
    return dynamic.configure({"netpeer:endpoint": netpeerd.endpoint, "netpeer:token": netpeerd.token(namespace)})


ECHOED = Path(tempfile.gettempdir()) / f"netpeer-echo-{os.getpid()}"


class Echo(ResourceProvider):
    """Another program's dynamic provider (pickled by value: defined in a test)."""

    def create(self, props):
        Path(ECHOED).write_text("created")
        return CreateResult("x", props)
