"""The provider core on its own: no OVN, no Pulumi, no service. What every
face relies on: the schema, unknown values, check, diff, ids, settings."""

from __future__ import annotations

import ast
import copy
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from netpeer_provider import core
from netpeer_provider.core import network, peering, schema
from netpeer_provider.core.values import UNKNOWN, known

CORE = Path(core.__file__).parent
U = UNKNOWN


# -- no engine inside -----------------------------------------------------------------------------

def test_the_core_imports_no_pulumi():
    code = ("import sys, netpeer_provider, netpeer_provider.core\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.split(".")[0] == "pulumi" for n in names), path


def test_modules_stay_small():
    for path in CORE.parent.rglob("*.py"):   # the core, the dynamic providers and the plugin
        assert len(path.read_text().splitlines()) <= 400, path


# -- schema ---------------------------------------------------------------------------------------

def walk(fields, prefix=""):
    for f in fields:
        yield prefix + f.name, f
        yield from walk(f.type.items.fields if f.type.items else f.type.fields, prefix + f.name + ".")


def test_schema_is_complete_and_walkable():
    for resource in (schema.NETWORK, schema.NETWORK_PEERING, schema.PROVIDER):
        for path, f in walk(resource.fields):
            assert f.description.endswith(".") and f.name.islower(), path
        ins = [f.name for f in resource.inputs()]
        outs = [f.name for f in resource.outputs()]
        assert len(ins) == len(set(ins)) and len(outs) == len(set(outs)), resource.name
        for f in resource.fields:
            if f.declared_as:
                assert resource.field(f.declared_as, output=True).role is schema.Role.COMPUTED
    assert {f.name for f in schema.PROVIDER.fields if f.secret} == {"token", "client_key"}
    assert [schema.camel_case(f.name) for f in schema.PROVIDER.fields] == \
        ["endpoint", "token", "caCert", "clientCert", "clientKey", "errorOnNotBound"]
    assert all(f.env and f.env.startswith("NETPEER_") for f in schema.PROVIDER.fields)
    assert [f.name for f in schema.NETWORK.replacing()] == ["name", "namespace"]
    # remote_uid is not among them: a changed or cleared pin re-pins in place.
    assert [f.name for f in schema.NETWORK_PEERING.replacing()] == \
        ["namespace", "network", "name", "remote_namespace", "remote_network", "remote_site"]
    # What the core's diffs, outputs and checks read from the roles.
    assert [f.name for f in schema.NETWORK.updatable()] == ["subnets", "routes", "description", "peerings"]
    assert [f.name for f in schema.NETWORK_PEERING.updatable()] == \
        ["remote_uid", "ttl", "description", "wait_for_bound", "wait_for_programmed"]
    assert [f.name for f in schema.NETWORK.echoed()] == ["name", "namespace", "subnets", "routes", "description"]
    assert "remote_uid" not in {f.name for f in schema.NETWORK_PEERING.echoed()}   # pinned_remote_uid keeps it
    assert [f.name for f in schema.NETWORK_PEERING.status()] == \
        ["phase", "reason", "message", "network_uid", "last_phase_transition_time", "expires_at", "dataplane",
         "programmed_at"]
    # Network.peerings: declarations in, status out (two fields, one name).
    assert schema.NETWORK.field("peerings").type.items.name == "InlinePeering"
    assert schema.NETWORK.field("peerings", output=True).type.items.name == "PeeringStatus"
    assert str(schema.NETWORK.field("subnets").type) == "list[string]"
    assert set(core.OPERATIONS) == set(schema.RESOURCES) == {"Network", "NetworkPeering"}


def test_outputs_are_the_declared_outputs():
    n = {"namespace": "a", "name": "n", "uid": "u", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
         "peerings": [{"name": "p", "remote_namespace": "b", "remote_network": "m", "phase": "Bound",
                       "reason": "Bound", "last_phase_transition_time": "t"}],
         "peered_networks": [{"namespace": "b", "name": "m", "uid": "v"}]}
    p = {"namespace": "a", "network": "n", "name": "p", "remote_namespace": "b", "remote_network": "m",
         "remote_uid": "v", "network_uid": "u", "phase": "Bound", "reason": "Bound", "message": "",
         "last_phase_transition_time": "t", "expires_at": None, "ttl": "7d", "description": "",
         "dataplane": "Programmed", "programmed_at": "t2"}
    out = network.outputs({"peerings": [{"name": "p", "remote_network": "m", "remote_namespace": "b"}]}, n, [p])
    assert set(out) == {f.name for f in schema.NETWORK.outputs()}
    assert out["peerings"][0]["remote_uid"] == "v" and out["inline_peerings"] == [
        {"name": "p", "remote_network": "m", "remote_namespace": "b"}]
    assert set(out["peerings"][0]) == {f.name for f in schema.PEERING_STATUS.fields}
    assert (out["peerings"][0]["dataplane"], out["peerings"][0]["programmed_at"]) == ("Programmed", "t2")
    out = peering.outputs({"remote_uid": "pin", "wait_for_bound": 5}, p)
    assert set(out) == {f.name for f in schema.NETWORK_PEERING.outputs()}
    assert (out["pinned_remote_uid"], out["remote_uid"], out["wait_for_bound"]) == ("pin", "v", 5)
    assert (out["dataplane"], out["programmed_at"]) == ("Programmed", "t2")


# -- unknown values -------------------------------------------------------------------------------

def test_unknown_is_one_truthy_value():
    assert UNKNOWN and copy.deepcopy(UNKNOWN) is UNKNOWN and pickle.loads(pickle.dumps(UNKNOWN)) is UNKNOWN
    assert not known(U) and not known([1, U]) and not known({"a": {"b": [U]}}) and known({"a": [1, "x"]})


# -- check ----------------------------------------------------------------------------------------

def test_network_check_names_field_and_value():
    _, failures = network.check({"name": "net-a", "subnets": ["10.1.0.5/24"], "routes": []})
    assert failures == [core.Failure("subnets[0]", "subnets[0]: '10.1.0.5/24' has host bits set; "
                                     "did you mean 10.1.0.0/24?")]
    clean, failures = network.check({"name": "n", "subnets": ["10.1.0.0/24"], "routes": ["10.9.0.0/24  via 10.1.0.5"]})
    assert failures == [] and clean["routes"] == ["10.9.0.0/24 via 10.1.0.5"]
    _, failures = network.check({"subnets": []})
    assert [f.path for f in failures] == ["name", "subnets"]
    _, failures = network.check({"name": "n", "namespace": "a", "subnets": ["10.1.0.0/24"], "peerings": [
        {"name": "p", "remote_network": "r"}, {"name": "p", "remote_network": "s", "ttl": "1y"}, "x",
        {"name": "q", "remote_network": "n"}]})
    assert [f.path for f in failures] == ["peerings[1].ttl", "peerings[1].name", "peerings[2]",
                                          "peerings[3].remote_network"]
    assert failures[1].message == "peerings[1].name: 'p' is declared twice"


def test_check_tolerates_unknowns():
    assert network.check({"name": "n", "subnets": U, "routes": [U]})[1] == []
    assert network.check({"name": U, "namespace": U, "subnets": ["10.1.0.0/24", U], "peerings": U})[1] == []
    inline = [U, {"name": U, "remote_network": U}]
    assert network.check({"name": "n", "subnets": ["10.1.0.0/24"], "peerings": inline})[1] == []
    clean, failures = peering.check({"network": U, "name": "p", "remote_network": U, "ttl": "168h"})
    assert failures == [] and clean["network"] is U and clean["ttl"] == "7d"
    # two names not known yet are not "the same network"
    assert peering.check({"namespace": "a", "network": U, "name": "p", "remote_network": U})[1] == []


def test_peering_check():
    _, failures = peering.check({"network": "net-a", "name": "internal", "remote_network": "x", "ttl": "1y"})
    assert {f.path for f in failures} == {"name", "ttl"}
    _, failures = peering.check({"namespace": "a", "network": "a", "name": "p", "remote_network": "a",
                                  "wait_for_bound": 3601})
    assert [f.message for f in failures] == ["wait_for_bound: 3601 must be a number of seconds from 0 to 3600",
                                             "remote_network: a network cannot peer with itself"]
    _, failures = peering.check({"network": "a", "name": "p", "remote_network": "b", "wait_for_bound": True})
    assert [f.path for f in failures] == ["wait_for_bound"]
    assert [f.path for f in peering.check({})[1]] == ["network", "name", "remote_network"]


# -- diff -----------------------------------------------------------------------------------------

OLD_PEERING = {"namespace": "a", "network": "n", "name": "p", "remote_namespace": "b", "remote_network": "m",
               "remote_uid": "learned", "pinned_remote_uid": None, "ttl": "7d", "description": "",
               "wait_for_bound": 0}
NEW_PEERING = {"network": "n", "name": "p", "remote_network": "m", "remote_namespace": "b"}


@pytest.mark.parametrize("change, replaces, updates", [
    ({}, (), ()),
    ({"ttl": "168h"}, (), ()),                       # the same duration, spelt otherwise
    ({"ttl": "2d", "description": "x"}, (), ("description", "ttl")),
    ({"wait_for_bound": 30}, (), ("wait_for_bound",)),
    ({"remote_namespace": None}, (), ()),            # defaulted: what the service chose stays
    ({"namespace": "a"}, (), ()),
    ({"namespace": "c"}, ("namespace",), ()),
    ({"remote_network": "z"}, ("remote_network",), ()),
    ({"network": U}, ("network",), ()),
    ({"remote_uid": "learned"}, (), ("remote_uid",)),  # pinning compares with what was pinned, not learned
    ({"remote_uid": U}, (), ("remote_uid",)),
    ({"remote_uid": ""}, (), ()),                     # empty is unset
    ({"description": U}, (), ("description",)),
])
def test_peering_diff(change, replaces, updates):
    d = peering.diff(OLD_PEERING, {**NEW_PEERING, **change})
    assert (d.changes, d.replaces, d.updates, d.delete_before_replace) == \
        (bool(replaces or updates), replaces, updates, True)


def test_peering_diff_repinning_and_unpinning_update_in_place():
    d = peering.diff({**OLD_PEERING, "pinned_remote_uid": "u"}, NEW_PEERING)
    assert (d.replaces, d.updates, d.detailed()) == ((), ("remote_uid",), {"remote_uid": "update"})
    d = peering.diff({**OLD_PEERING, "pinned_remote_uid": "u"}, {**NEW_PEERING, "remote_uid": "v", "network": "o"})
    assert d.detailed() == {"remote_uid": "update", "network": "replace"}


OLD_NETWORK = {"namespace": "a", "name": "n", "uid": "u", "subnets": ["10.1.0.0/24"], "routes": [],
               "description": "", "inline_peerings": [{"name": "p", "remote_network": "m"}]}


@pytest.mark.parametrize("change, replaces, updates", [
    ({}, (), ()),
    ({"namespace": None}, (), ()),
    ({"namespace": "b"}, ("namespace",), ()),
    ({"name": U}, ("name",), ()),
    ({"name": "o", "namespace": "b"}, ("name", "namespace"), ()),
    ({"subnets": ["10.2.0.0/24"], "routes": ["10.9.0.0/24"]}, (), ("subnets", "routes")),
    ({"description": None}, (), ()),
    ({"peerings": [{"name": "p", "remote_network": "m", "ttl": None, "description": ""}]}, (), ()),
    ({"peerings": []}, (), ("peerings",)),
    ({"peerings": [{"name": "p", "remote_network": U}]}, (), ("peerings",)),
])
def test_network_diff(change, replaces, updates):
    news = {"name": "n", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
            "peerings": [{"name": "p", "remote_network": "m"}], **change}
    d = network.diff(OLD_NETWORK, news)
    assert (d.changes, d.replaces, d.updates) == (bool(replaces or updates), replaces, updates)


# -- ids, settings, errors ------------------------------------------------------------------------

def test_ids_round_trip_and_refuse_other_forms():
    assert str(core.NetworkId.parse("namespaces/a/networks/n")) == "namespaces/a/networks/n"
    pid = core.PeeringId.parse("namespaces/a/networks/n/peerings/p")
    assert (pid.namespace, pid.network, pid.name) == ("a", "n", "p")
    assert str(pid.network_id) == "namespaces/a/networks/n"
    with pytest.raises(core.InvalidId, match=r"^id: 'namespaces/a/networks/n' is not a peering id \(namespaces/NS"):
        core.PeeringId.parse("namespaces/a/networks/n")
    with pytest.raises(core.InvalidId, match=r"is not a network id"):
        core.NetworkId.parse("namespaces/a/networks/n/peerings/p")
    for ops, bad in ((network, "x"), (peering, "namespaces/a/networks/n")):
        for call in (lambda: ops.read(None, bad, {}), lambda: ops.delete(None, bad, {})):
            with pytest.raises(core.InvalidId):
                call()


def test_settings_come_from_config_then_environment():
    s = core.Settings.resolve({"endpoint": "unix:///a", "token": "", "ca_cert": None},
                              {"NETPEER_TOKEN": "np_t", "NETPEER_ENDPOINT": "unix:///b", "NETPEER_CA_CERT": ""})
    assert (s.endpoint, s.token, s.ca_cert, s.client_key) == ("unix:///a", "np_t", None, None)
    assert "np_t" not in repr(s) and hash(s) == hash(core.Settings("unix:///a", "np_t"))
    assert s.error_on_not_bound is False
    assert core.Settings.resolve({"error_on_not_bound": "True"}, {}).error_on_not_bound is True
    assert core.Settings.resolve({}, {"NETPEER_ERROR_ON_NOT_BOUND": "1"}).error_on_not_bound is True
    assert core.Settings.resolve({"error_on_not_bound": False}, {}).error_on_not_bound is False


def test_a_bad_boolean_setting_is_one_line_naming_it():
    with pytest.raises(core.ProviderError) as info:
        core.Settings.resolve({"error_on_not_bound": "maybe"}, {})
    assert str(info.value) == ("error_on_not_bound: 'maybe' is not a boolean (true or false; "
                               "NETPEER_ERROR_ON_NOT_BOUND likewise)")


def test_missing_settings_say_how_to_set_them():
    with pytest.raises(core.MissingSetting, match=r"^endpoint is not set: set endpoint in the provider "
                                                  r"configuration or export NETPEER_ENDPOINT$") as info:
        core.Session(core.Settings()).client()
    assert info.value.path == "endpoint"

    class Tofu(core.Terms):
        def how_to_set(self, field):
            return f'set {field.name} in the provider "netpeer" block'
    with pytest.raises(core.MissingSetting, match=r'^token is not set: set token in the provider "netpeer" block'):
        core.Session(core.Settings("unix:///x"), Tofu()).client()


def test_one_client_per_settings():
    a = core.Session(core.Settings("unix:///nowhere", "np_x")).client()
    assert core.Session(core.Settings("unix:///nowhere", "np_x")).client() is a
    assert core.Session(core.Settings("unix:///nowhere", "np_y")).client() is not a
    with pytest.raises(core.ServiceError, match=r"^reading network namespaces/a/networks/n: cannot reach") as info:
        network.read(core.Session(core.Settings("unix:///nowhere", "np_x")), "namespaces/a/networks/n", {})
    assert info.value.kind == "Unavailable"
    # An unreachable service drops the client: the next call dials afresh.
    assert core.Session(core.Settings("unix:///nowhere", "np_x")).client() is not a
