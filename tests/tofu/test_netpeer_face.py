"""The OpenTofu face of netpeer's provider, without tofu or a service: its schema is the core's,
and its plans say what the core's diff says (the e2e tests in test_netpeer.py show the same through
the real tofu)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from netpeer_provider.core import schema as cs
from netpeer_provider.tofu import UNKNOWN, TofuError, mapping
from netpeer_provider.tofu.netpeer import NetpeerProvider

PROVIDER = NetpeerProvider()
# An endpoint known only after apply: plans ask no service (test_netpeer.py has the plans that do).
PROVIDER.configure({"endpoint": UNKNOWN}, "1.9.0")
NETWORK = PROVIDER.resource("netpeer_network")
PEERING = PROVIDER.resource("netpeer_peering")


def config_of(resource, **values):
    return {name: values.get(name) for name in resource.schema.attributes}


def test_schema_is_derived_from_the_core():
    for res, spec in ((NETWORK, cs.NETWORK), (PEERING, cs.NETWORK_PEERING)):
        attrs = res.schema.attributes
        for f in spec.fields:
            if f.internal or f.role is cs.Role.INPUT_ONLY:
                continue
            a = attrs[f.name]
            if f.role is cs.Role.REQUIRED:
                assert a.required, f.name
            elif f.role.is_input:
                assert a.optional and a.computed, f.name
            else:
                assert a.computed and not a.optional, f.name
        assert attrs["id"].computed
    assert "inline_peerings" not in NETWORK.schema.attributes and "pinned_remote_uid" not in PEERING.schema.attributes
    assert NETWORK.schema.attributes["peerings"].computed  # the status list; inline declarations are not offered
    assert PEERING.schema.attributes["wait_for_bound"].type == "string"
    provider = PROVIDER.get_schemas()[0].attributes
    assert {n for n, a in provider.items() if a.sensitive} == {"token", "client_key"}
    assert set(provider) == {f.name for f in cs.PROVIDER.fields}


def test_the_plugin_imports_no_pulumi():
    code = ("import sys, netpeer_provider.tofu.netpeer, netpeer_provider.tofu.server\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pulumi'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_validation_names_the_attribute_and_tolerates_unknowns():
    diags = list(NETWORK.validate(config_of(NETWORK, name="net-a", subnets=["10.1.0.0/24", "10.1.0.5/24"])))
    assert [(d.summary, d.attribute) for d in diags] == [
        ("subnets[1]: '10.1.0.5/24' has host bits set; did you mean 10.1.0.0/24?", ("subnets", 1))]
    diags = list(NETWORK.validate(config_of(NETWORK, name="net-a", subnets=["10.1.0.0/24"],
                                            routes=["10.9.0.0/24 via 10.2.0.1"])))
    assert [d.attribute for d in diags] == [("routes", 0)]
    assert list(NETWORK.validate(config_of(NETWORK, name=UNKNOWN, subnets=UNKNOWN))) == []
    assert list(PEERING.validate(config_of(PEERING, network=UNKNOWN, name="to-b", remote_network=UNKNOWN,
                                           wait_for_bound=UNKNOWN))) == []
    diags = list(PEERING.validate(config_of(PEERING, network="a", name="to-b", remote_network="b",
                                            wait_for_bound="2h")))
    assert [(d.summary, d.attribute) for d in diags] == [
        ("wait_for_bound: '2h' must be a duration from 0s to 1h", ("wait_for_bound",))]


PRIOR = {"id": "namespaces/team-a/networks/net-a/peerings/to-b", "namespace": "team-a", "network": "net-a",
         "name": "to-b", "remote_namespace": "team-b", "remote_network": "net-b", "remote_uid": None,
         "ttl": "168h", "description": "", "wait_for_bound": "0s", "phase": "Pending", "reason": "AwaitingRemote",
         "message": "waiting", "network_uid": "u1", "last_phase_transition_time": "2026-01-01T00:00:00Z",
         "expires_at": "2026-01-08T00:00:00Z"}


def plan(prior, **changes):
    config = {**config_of(PEERING, network="net-a", name="to-b", remote_namespace="team-b",
                          remote_network="net-b", ttl=prior["ttl"]), **changes}
    proposed = {**prior, **{k: v for k, v in config.items() if v is not None}}
    for k in ("description", "wait_for_bound"):  # tofu proposes the prior value of optional+computed ones
        if config.get(k) is None:
            proposed[k] = prior[k]
    return PEERING.plan(prior, proposed, config)


def test_plans_follow_the_core_diff():
    assert plan(PRIOR).planned == PRIOR and plan(PRIOR).requires_replace == []
    # an equivalent spelling is no change: the state keeps the user's
    assert plan(PRIOR, ttl="7d").planned == PRIOR and plan(PRIOR, wait_for_bound="0").planned == PRIOR
    p = plan(PRIOR, description="reviewed")
    assert p.requires_replace == [] and p.planned["description"] == "reviewed"
    assert p.planned["phase"] is UNKNOWN and p.planned["network_uid"] == "u1"  # may change / may not
    p = plan(PRIOR, ttl="2d")
    assert p.requires_replace == [] and p.planned["ttl"] == "2d" and p.planned["expires_at"] is UNKNOWN
    p = plan(PRIOR, remote_network="net-z")
    assert p.requires_replace == [("remote_network",)] and p.planned["id"] is UNKNOWN
    assert plan(PRIOR, network=UNKNOWN).requires_replace == [("network",)]
    # a remote_uid left out keeps the one learned; pinning another re-pins in place
    r1, r2 = "5f0c6c52-7d5e-4f7e-9a59-2f7b8f0c0001", "5f0c6c52-7d5e-4f7e-9a59-2f7b8f0c0002"
    bound = {**PRIOR, "remote_uid": r1, "phase": "Bound"}
    assert plan(bound).planned == bound
    p = plan(bound, remote_uid=r2)
    assert p.requires_replace == [] and p.planned["remote_uid"] == r2 and p.planned["phase"] is UNKNOWN
    # another site is another remote
    assert plan(PRIOR, remote_site="west").requires_replace == [("remote_site",)]
    assert plan(PRIOR, remote_site="").requires_replace == []
    # a create: defaults written, the rest known after apply
    created = PEERING.plan(None, {**config_of(PEERING, network="net-a", name="to-b", remote_network="net-b")},
                           config_of(PEERING, network="net-a", name="to-b", remote_network="net-b"))
    assert created.planned["wait_for_bound"] == "0s" and created.planned["description"] == ""
    assert created.planned["phase"] is UNKNOWN and created.planned["namespace"] is UNKNOWN


def test_network_plans_keep_equivalent_prefixes():
    prior = {"id": "namespaces/team-a/networks/net-a", "name": "net-a", "namespace": "team-a",
             "subnets": ["10.1.0.0/24", "FD00:A:0::/64"], "routes": [], "description": "", "uid": "u1",
             "peerings": [], "peered_networks": []}
    config = config_of(NETWORK, name="net-a", subnets=["10.1.0.0/24", "fd00:a::/64"])
    assert NETWORK.plan(prior, {**prior, "subnets": config["subnets"]}, config).planned == prior
    p = NETWORK.plan(prior, {**prior, "subnets": ["10.1.0.0/24"]}, {**config, "subnets": ["10.1.0.0/24"]})
    assert p.requires_replace == [] and p.planned["uid"] == "u1" and p.planned["peered_networks"] is UNKNOWN
    p = NETWORK.plan(prior, {**prior, "name": "net-b"}, {**config, "name": "net-b"})
    assert p.requires_replace == [("name",)]


@pytest.mark.parametrize("text,seconds", [("0s", 0), ("0", 0), ("90s", 90), ("2m", 120), ("1m30s", 90),
                                          ("1h", 3600)])
def test_durations(text, seconds):
    assert mapping.seconds("wait_for_bound", text) == seconds
    assert mapping.seconds("wait_for_bound", mapping.duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1d", "-1s", "1.5m", "m"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match=r"^wait_for_bound: .* is not a duration \(like 0s, 90s, 2m, 1m30s\)$"):
        mapping.seconds("wait_for_bound", text)


def test_failure_paths_stop_where_the_schema_does():
    t = NETWORK.schema.type
    assert mapping.path("subnets[2]", t) == ("subnets", 2)
    assert mapping.path("routes[1].next_hop", t) == ("routes", 1)
    assert mapping.path("peerings[to-b]", t) == ("peerings",)
    assert mapping.path("id", t) == ("id",) and mapping.path("nonsense", t) is None


def test_a_missing_setting_is_one_line_saying_where_to_set_it(monkeypatch):
    for var in ("NETPEER_ENDPOINT", "NETPEER_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    provider = NetpeerProvider()
    provider.configure({"endpoint": "unix:///nowhere.sock", "token": None, "ca_cert": None, "client_cert": None,
                        "client_key": None}, "1.12.6")
    with pytest.raises(TofuError) as exc:
        provider.resource("netpeer_network").create(
            {**config_of(NETWORK, name="net-a", subnets=["10.1.0.0/24"]), "routes": [], "description": ""}, {})
    [d] = exc.value.diagnostics
    assert d.summary == 'token is not set: set token in the provider "netpeer" block or export NETPEER_TOKEN'


def test_the_reference_page_documents_every_attribute():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "opentofu.md").read_text()
    schemas = PROVIDER.get_schemas()
    missing = []
    for title, schema in [("provider", schemas[0]), *schemas[1].items(),
                          *((f"data {n}", s) for n, s in schemas[2].items())]:
        start = text.index(f"## Data source: {title[5:]}") if title.startswith("data ") else (
            text.index("## Provider configuration") if title == "provider" else text.index(f"## Resource: {title}"))
        section = text[start:text.find("\n## ", start + 1)]
        missing += [f"{title}.{name}" for name in schema.attributes if f"`{name}`" not in section]
    assert missing == []
