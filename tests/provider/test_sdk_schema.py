"""The Python SDK (sdk/pulumi_netpeer) against the package schema
(schema/pulumi/schema.json, what the other languages' SDKs are generated
from): a program written from the schema's names runs on the Python SDK.

For each resource of the schema: every input property is an argument of the
SDK class and a field of its ``...Args`` class under the same name in
snake_case (nothing more), the required ones required; every output property
is a declared attribute of the class. Nested input types likewise."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

import pytest

import pulumi_netpeer as sdk
from tests.support import ROOT

SCHEMA = json.loads((ROOT / "schema/pulumi/schema.json").read_text())
OWN = {"self", "resource_name", "args", "opts"}  # the SDK's own parameters, not properties


def snake(name: str) -> str:
    """``remoteNetwork`` -> ``remote_network``: how Python programs spell a schema property."""
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), name)


def short(token: str) -> str:
    return token.rsplit(":", 1)[-1]


def sdk_class(name: str):
    cls = getattr(sdk, name, None)
    assert cls is not None, f"the schema has {name}; pulumi_netpeer has no {name}"
    return cls


def args_fields(cls) -> dict[str, bool]:
    """The fields of an ``...Args`` dataclass: name -> required (no default)."""
    return {f.name: f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            for f in dataclasses.fields(cls)}


def expected(props: dict, required: list[str]) -> dict[str, bool]:
    return {snake(p): p in required for p in props}


@pytest.mark.parametrize("token", sorted(SCHEMA["resources"]))
def test_every_schema_input_is_an_argument_of_the_sdk_class(token):
    resource = SCHEMA["resources"][token]
    want = expected(resource["inputProperties"], resource.get("requiredInputs", []))
    cls, args = sdk_class(short(token)), sdk_class(short(token) + "Args")
    params = {n for n, p in inspect.signature(cls.__init__).parameters.items()
              if n not in OWN and p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert sorted(params) == sorted(want), f"{cls.__name__}(...) keyword arguments"
    assert args_fields(args) == want, f"{args.__name__}: field -> required"


@pytest.mark.parametrize("token", sorted(SCHEMA["resources"]))
def test_every_schema_output_is_an_attribute_of_the_sdk_class(token):
    cls = sdk_class(short(token))
    declared = {name for c in cls.__mro__ for name in getattr(c, "__annotations__", {})}
    missing = sorted(snake(p) for p in SCHEMA["resources"][token]["properties"] if snake(p) not in declared)
    assert missing == [], f"{cls.__name__} does not declare the outputs {missing}"


@pytest.mark.parametrize("token", sorted(t for t, v in SCHEMA["types"].items()
                                         if any(f"#/types/{t}" in json.dumps(r["inputProperties"])
                                                for r in SCHEMA["resources"].values())))
def test_every_nested_input_type_is_an_args_class(token):
    t = SCHEMA["types"][token]
    args = sdk_class(short(token) + "Args")
    assert args_fields(args) == expected(t["properties"], t.get("required", [])), f"{args.__name__}: field -> required"


@pytest.mark.parametrize("token", sorted(SCHEMA.get("functions", {})))
def test_every_schema_function_is_an_sdk_function(token):
    """``netpeer:index:getNetwork`` -> ``get_network(name, namespace=None)`` returning every output."""
    fn = SCHEMA["functions"][token]
    call = getattr(sdk, snake(short(token)), None)
    assert callable(call), f"the schema has {token}; pulumi_netpeer has no {snake(short(token))}"
    params = inspect.signature(call).parameters
    assert {n: p.default is inspect.Parameter.empty for n, p in params.items()} == \
        expected(fn["inputs"]["properties"], fn["inputs"].get("required", []))
    result = inspect.signature(call).return_annotation
    result = getattr(sdk, result) if isinstance(result, str) else result
    assert sorted(f.name for f in dataclasses.fields(result)) == sorted(snake(p) for p in fn["outputs"]["properties"])


@pytest.mark.message_text("a token refusal names no field: its words are what the user reads")
def test_get_peering_requests_reads_a_real_netpeerd(netpeerd, monkeypatch):
    """Outside the stack configuration the settings come from the environment, as for the resources."""
    with netpeerd.client() as admin:
        admin.create_network("team-a", "net-a", ["10.1.0.0/24"])
        admin.create_network("team-b", "net-b", ["10.2.0.0/24"])
        admin.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    monkeypatch.setenv("NETPEER_ENDPOINT", netpeerd.endpoint)
    monkeypatch.setenv("NETPEER_TOKEN", netpeerd.token("team-b"))
    found = sdk.get_peering_requests()
    assert (found.namespace, found.network) == ("team-b", "")
    assert [(r["requester_namespace"], r["requester_network"], r["network"]) for r in found.requests] == \
        [("team-a", "net-a", "net-b")]
    monkeypatch.setenv("NETPEER_TOKEN", netpeerd.token("team-c"))
    with pytest.raises(Exception) as err:
        sdk.get_peering_requests(namespace="team-b")
    assert "does not grant namespace 'team-b'" in str(err.value) and "\n" not in str(err.value)
