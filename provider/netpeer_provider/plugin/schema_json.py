"""The Pulumi package schema of netpeer, derived from ``core.schema`` (the one
description of the resources): ``schema/pulumi/schema.json`` is this
module's output, and the plugin answers ``GetSchema`` with it.

    python -m netpeer_provider.plugin.schema_json > schema/pulumi/schema.json
    python -m netpeer_provider.plugin.schema_json --check schema/pulumi/schema.json   # CI: fails on drift

Field names become camelCase (``remote_uid`` -> ``remoteUid``), in
descriptions too; bookkeeping outputs (``Field.internal``) stay out of it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from netpeer_provider.core import inbox, schema

PACKAGE = "netpeer"
MODULE = "index"


def version() -> str:
    """The package version: the project's (the plugin reports the same one)."""
    return metadata.version("netpeer")


def token(name: str) -> str:
    """``Network`` -> ``netpeer:index:Network``."""
    return f"{PACKAGE}:{MODULE}:{name}"


def _all_fields() -> set[str]:
    names: set[str] = set()

    def walk(fields):
        for f in fields:
            names.add(f.name)
            item = f.type.items or f.type
            walk(item.fields)
    for r in (schema.NETWORK, schema.NETWORK_PEERING, schema.PROVIDER):
        walk(r.fields)
    return {n for n in names if "_" in n}


_SNAKE = re.compile(r"\b(" + "|".join(sorted(_all_fields(), key=len, reverse=True)) + r")\b")


def describe(text: str) -> str:
    """A description with field names spelt as Pulumi programs spell them."""
    return _SNAKE.sub(lambda m: schema.camel_case(m.group(1)), text)


def _type(t: schema.Type) -> dict[str, Any]:
    if t.kind is schema.Kind.LIST:
        return {"type": "array", "items": _type(t.items)}
    if t.kind is schema.Kind.OBJECT:
        return {"$ref": f"#/types/{token(t.name)}"}
    return {"type": t.kind.value}


def _property(f: schema.Field, *, setting: bool = False) -> dict[str, Any]:
    out = {**_type(f.type), "description": describe(f.description)}
    if f.secret:
        out["secret"] = True
    if setting and f.env:
        out["defaultInfo"] = {"environment": [f.env]}
    if f.default not in (None, "", []) and f.type.kind is not schema.Kind.OBJECT:
        out["default"] = f.default
    return out


def _object(t: schema.Type, description: str) -> dict[str, Any]:
    return {"type": "object", "description": description,
            "properties": {schema.camel_case(f.name): _property(f) for f in t.fields},
            "required": [schema.camel_case(f.name) for f in t.fields if f.role.required]}


_ALWAYS_SET = {"Network": {"name", "namespace", "uid", "subnets", "routes", "description", "peerings",
                           "peered_networks"},
               "NetworkPeering": {"namespace", "network", "name", "remote_namespace", "remote_network", "remote_site",
                                  "ttl", "description", "wait_for_bound", "phase", "reason", "message", "network_uid",
                                  "last_phase_transition_time", "dataplane"}}


def _resource(r: schema.Resource) -> dict[str, Any]:
    ins = list(r.inputs())
    outs = [f for f in r.outputs() if not f.internal]
    return {
        "description": describe(r.description) + f"\n\nIts id (for `pulumi import`) is `{r.id_format}`.",
        "inputProperties": {schema.camel_case(f.name): _property(f) for f in ins},
        "requiredInputs": [schema.camel_case(f.name) for f in ins if f.role.required],
        "properties": {schema.camel_case(f.name): _property(f) for f in outs},
        "required": [schema.camel_case(f.name) for f in outs if f.name in _ALWAYS_SET[r.name]],
    }


def _function(fn: schema.Function) -> dict[str, Any]:
    outs = fn.outputs()
    always = _ALWAYS_SET[fn.result.name]
    return {
        "description": describe(fn.description),
        "inputs": {"properties": {schema.camel_case(f.name): _property(f) for f in fn.arguments},
                   "required": [schema.camel_case(f.name) for f in fn.arguments if f.role.required]},
        "outputs": {"properties": {"id": {"type": "string", "description": f"`{fn.result.id_format}`."},
                                   **{schema.camel_case(f.name): _property(f) for f in outs}},
                    "required": ["id", *(schema.camel_case(f.name) for f in outs if f.name in always)]},
    }


TYPE_DESCRIPTIONS = {
    "InlinePeering": "A peering declared on its network (in `peerings`).",
    "PeeringStatus": "One peering of a network as the service reports it.",
    "PeeredNetwork": "A network this one is Bound to.",
}


#: The package's one function (``netpeer_provider.core.inbox``).
GET_PEERING_REQUESTS = "getPeeringRequests"


def _inbox_field(kind: str, description: str) -> dict[str, Any]:
    t = {"type": "array", "items": {"type": "string"}} if kind == "array" else {"type": "string"}
    return {**t, "description": describe(description)}


def _functions() -> dict[str, Any]:
    return {token(GET_PEERING_REQUESTS): {
        "description": "The requests other networks make to peer with the networks of a namespace (halves naming "
                       "them with no matching half yet, not dismissed): accept one in code with a NetworkPeering "
                       "built from its fields.",
        "inputs": {"properties": {
            "namespace": {"type": "string", "description": "Default: the token's namespace when it grants one."},
            "network": {"type": "string", "description": "Only the requests to this network."}}},
        "outputs": {"properties": {
            "namespace": {"type": "string", "description": "The namespace read."},
            "network": {"type": "string", "description": "The network asked for (\"\": all)."},
            "requests": {"type": "array", "items": {"$ref": f"#/types/{token('PeeringRequest')}"},
                         "description": "By network, then requester."}},
            "required": ["namespace", "network", "requests"]},
    }}


def _request_type() -> dict[str, Any]:
    return {"type": "object", "description": "A request to peer with a network of the namespace.",
            "properties": {schema.camel_case(n): _inbox_field(k, d) for n, k, d in inbox.REQUEST_FIELDS},
            "required": [schema.camel_case(n) for n, _, _ in inbox.REQUEST_FIELDS]}


def dynamic_package() -> dict[str, Any]:
    """A schema for the Python dynamic resources (``pulumi-python:dynamic/netpeer:*``,
    snake_case names), answered by netpeer's dynamic-provider host so that
    ``pulumi import`` can write the code of what it imported: Python code on
    ``pulumi_netpeer``, the package programs use."""
    def prop(f: schema.Field) -> dict[str, Any]:
        t = f.type.items or f.type
        ref = {"$ref": f"#/types/pulumi-python:dynamic/netpeer:{t.name}"} if t.kind is schema.Kind.OBJECT else \
            {"type": t.kind.value}
        return {"type": "array", "items": ref} if f.type.kind is schema.Kind.LIST else ref

    def resource(r: schema.Resource) -> dict[str, Any]:
        return {"inputProperties": {f.name: prop(f) for f in r.inputs()},
                "properties": {f.name: prop(f) for f in r.outputs()}}
    return {
        "name": "pulumi-python", "version": version(),
        "types": {f"pulumi-python:dynamic/netpeer:{t.name}": {"type": "object", "properties": {
            f.name: prop(f) for f in t.fields}} for t in (schema.INLINE_PEERING, schema.PEERING_STATUS,
                                                         schema.PEERED_NETWORK)},
        "resources": {f"pulumi-python:dynamic/netpeer:{r.name}": resource(r) for r in schema.RESOURCES.values()},
        "language": {"python": {"packageName": "pulumi_netpeer", "moduleNameOverrides": {"dynamic/netpeer": ""}}},
    }


def package() -> dict[str, Any]:
    """The whole package schema, as a JSON-ready dict."""
    settings = schema.PROVIDER.fields
    return {
        "name": PACKAGE,
        "displayName": "netpeer",
        "version": version(),
        "description": "Mutually consented network peerings on an OVN dataplane, managed through netpeerd.",
        "keywords": ["pulumi", "netpeer", "ovn", "network", "peering", "category/network", "kind/native"],
        "license": "Apache-2.0",
        "publisher": "netpeer",
        "config": {"variables": {schema.camel_case(f.name): _property(f, setting=True) for f in settings}},
        "provider": {
            "description": describe(schema.PROVIDER.description),
            "inputProperties": {schema.camel_case(f.name): _property(f, setting=True) for f in settings},
        },
        "types": {**{token(t.name): _object(t, TYPE_DESCRIPTIONS[t.name])
                     for t in (schema.INLINE_PEERING, schema.PEERING_STATUS, schema.PEERED_NETWORK)},
                  token("PeeringRequest"): _request_type()},
        "resources": {token(r.name): _resource(r) for r in schema.RESOURCES.values()},
        "functions": {**_functions(), **{token(f.name): _function(f) for f in schema.FUNCTIONS.values()}},
        "language": {
            "nodejs": {"packageName": "@netpeer/pulumi", "respectSchemaVersion": True,
                       "packageDescription": "Pulumi resources for netpeer: networks and mutually consented "
                                             "peerings."},
            "python": {"packageName": "pulumi_netpeer_native", "respectSchemaVersion": True},
            "go": {"importBasePath": "netpeer.invalid/sdk/go/netpeer", "respectSchemaVersion": True},
        },
    }


def text() -> str:
    """The schema as committed: indented JSON, one trailing newline."""
    return json.dumps(package(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netpeer_provider.plugin.schema_json", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", metavar="FILE", help="fail (exit 1, with a diff) if FILE differs from the schema")
    args = p.parse_args(argv)
    if not args.check:
        sys.stdout.write(text())
        return 0
    committed = Path(args.check).read_text() if Path(args.check).exists() else ""
    if committed == text():
        return 0
    sys.stderr.writelines(difflib.unified_diff(committed.splitlines(True), text().splitlines(True), args.check,
                                               "generated"))
    print(f"{args.check} is not what core/schema.py describes: run `make schema`", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
