"""Pulumi's dynamic-provider server, with what netpeer's resources need on top.

It runs the stock server (``python -m pulumi.dynamic``) unchanged for every
dynamic provider of the program, and adds, for netpeer's two resource types
(picked by the type in the URN):

- imports: ``pulumi import`` and the ``import_`` option Read a resource with
  no properties, so without ``__provider`` (the stock server fails with
  ``KeyError: '__provider'``); netpeer's provider is filled in;
- previews: the server tells the engine it supports previews, so a preview
  asks netpeer (validate-only calls) what a create or update would answer
  (phase included) and what the service would refuse; other dynamic
  providers are previewed exactly as before (their inputs echoed);
- per-field diffs, warnings and ``wait_for_bound`` progress on the
  resource's row (through the engine's log service);
- errors as one line with a code that tells the engine nothing was changed
  (no "Exception calling application:"), and a peering kept although not
  Bound (``error_on_not_bound``) as a partial failure that records it;
- ``GetSchema`` (asked by ``pulumi import``) answers a schema of netpeer's
  dynamic resources, so that import writes code on ``pulumi_netpeer``;
- as many calls at once as the engine makes (the stock server serves 4).

netpeer's Pulumi toolchain (scripts/install-pulumi.sh) starts dynamic
providers through this module when netpeer is installed in the program's
environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from concurrent import futures
from typing import Any, Callable

import grpc

from pulumi.dynamic.dynamic import PROVIDER_KEY, serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from netpeer_provider import NetworkPeeringProvider, NetworkProvider, common
from netpeer_provider.core import schema
from netpeer_provider.pulumi_engine import Engine, engine_address, property_diffs, status_of

PROVIDERS = {
    "pulumi-python:dynamic/netpeer:Network": NetworkProvider,
    "pulumi-python:dynamic/netpeer:NetworkPeering": NetworkPeeringProvider,
}
SCHEMAS = {NetworkProvider: schema.NETWORK, NetworkPeeringProvider: schema.NETWORK_PEERING}


def _type_of(urn: str) -> str:
    # urn:pulumi:<stack>::<project>::<parent types$>type::<name>
    parts = urn.split("::")
    return parts[2].split("$")[-1] if len(parts) >= 4 else ""


def with_provider(request: provider_pb2.ReadRequest) -> provider_pb2.ReadRequest:
    """The request, with ``__provider`` filled in for netpeer types if missing."""
    if PROVIDER_KEY in request.properties.fields:
        return request
    cls = PROVIDERS.get(_type_of(request.urn))
    if cls is None:
        return request
    patched = provider_pb2.ReadRequest()
    patched.CopyFrom(request)
    patched.properties[PROVIDER_KEY] = serialize_provider(cls())
    return patched


def _serialize(props: dict[str, Any]):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(rpc.serialize_properties(props, {}))
    finally:
        loop.close()


def _plain(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k != PROVIDER_KEY}


def _partial(request, exc: BaseException):
    """The outputs of a resource that exists although its operation failed (``core.NotBound``)."""
    cause = getattr(exc, "cause", None)
    outputs = getattr(cause, "outputs", None)
    if outputs is None:
        return None
    props = request.properties if hasattr(request, "properties") else request.news
    provider = props.fields[PROVIDER_KEY].string_value if PROVIDER_KEY in props.fields else None
    return _serialize({**outputs, PROVIDER_KEY: provider} if provider else outputs)


def _guard(fn: Callable) -> Callable:
    """Runs one call for the resource in ``request.urn``; a failure aborts the
    call with its one-line status."""
    def call(request, context):
        common.CALL.urn = getattr(request, "urn", "")
        try:
            return fn(request, context)
        except Exception as exc:  # every failure is shown as one line, never a traceback
            context.abort_with_status(status_of(exc, _partial(request, exc)))
        finally:
            common.CALL.urn = ""
    return call


class Additions:
    """The calls netpeer adds to or changes in the stock servicer."""

    def __init__(self, servicer):
        self.stock = {name: getattr(servicer, name) for name in ("Configure", "Create", "Update", "Diff", "Read")}

    def Configure(self, request, context):
        response = self.stock["Configure"](request, context)
        config = rpc.deserialize_properties(request.args)
        common.configure_from({k: rpc.unwrap_rpc_secret(v) for k, v in config.items()})
        response.supportsPreview = True
        return response

    def Create(self, request, context):
        if not request.preview:
            return self.stock["Create"](request, context)
        cls = PROVIDERS.get(_type_of(request.urn))
        if cls is None:  # what the engine does for a provider without previews
            return provider_pb2.CreateResponse(properties=request.properties)
        props = rpc.deserialize_properties(request.properties, True)
        outs = common.to_pulumi(cls().preview(_plain(props)))
        return provider_pb2.CreateResponse(properties=_serialize({**outs, PROVIDER_KEY: props[PROVIDER_KEY]}))

    def Update(self, request, context):
        if not request.preview:
            return self.stock["Update"](request, context)
        cls = PROVIDERS.get(_type_of(request.urn))
        if cls is None:
            return provider_pb2.UpdateResponse(properties=request.news)
        olds, news = rpc.deserialize_properties(request.olds), rpc.deserialize_properties(request.news, True)
        outs = common.to_pulumi(cls().preview_update(request.id, _plain(olds), _plain(news)))
        return provider_pb2.UpdateResponse(properties=_serialize({**outs, PROVIDER_KEY: news[PROVIDER_KEY]}))

    def Diff(self, request, context):
        cls = PROVIDERS.get(_type_of(request.urn))
        if cls is None:
            return self.stock["Diff"](request, context)
        olds = _plain(rpc.deserialize_properties(request.olds, True))
        news = _plain(rpc.deserialize_properties(request.news, True))
        result = cls().diff(request.id, olds, news)
        d = result.core_diff
        return provider_pb2.DiffResponse(
            changes=provider_pb2.DiffResponse.DIFF_SOME if d.changes else provider_pb2.DiffResponse.DIFF_NONE,
            replaces=list(d.replaces), deleteBeforeReplace=d.delete_before_replace,
            diffs=list(d.detailed()), hasDetailedDiff=True,
            detailedDiff=property_diffs(d, SCHEMAS[cls], result.olds, result.news))

    def Read(self, request, context):
        return self.stock["Read"](with_provider(request), context)

    def GetSchema(self, request, context):
        # What `pulumi import` reads to write the code of what it imported (on pulumi_netpeer).
        from netpeer_provider.plugin.schema_json import dynamic_package
        return provider_pb2.GetSchemaResponse(schema=json.dumps(dynamic_package()))


def extend(servicer) -> None:
    """Adds netpeer's calls to the stock servicer, each guarded (one-line errors)."""
    additions = Additions(servicer)
    for name in ("Configure", "Create", "Update", "Diff", "Read", "GetSchema"):
        setattr(servicer, name, getattr(additions, name))
    for name in ("Check", "Diff", "Create", "Update", "Read", "Delete"):
        setattr(servicer, name, _guard(getattr(servicer, name)))


def workers() -> int:
    """Calls served at once: as many as the engine runs (4 per CPU by default;
    the stock server's 4 made the engine's other steps wait for service calls)."""
    return max(8, 4 * (os.cpu_count() or 1))


def _install() -> None:
    common.ENGINE = Engine(engine_address(sys.argv[1:]))
    register = provider_pb2_grpc.add_ResourceProviderServicer_to_server
    stock_server = grpc.server

    def server(_executor=None, *args, **kwargs):
        return stock_server(futures.ThreadPoolExecutor(max_workers=workers()), *args, **kwargs)

    grpc.server = server

    def add(servicer, server):
        extend(servicer)
        return register(servicer, server)

    provider_pb2_grpc.add_ResourceProviderServicer_to_server = add


if __name__ == "__main__":
    _install()
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
