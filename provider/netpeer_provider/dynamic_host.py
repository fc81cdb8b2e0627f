"""Pulumi's dynamic-provider server, able to import netpeer resources.

``pulumi import`` (and the ``import_`` resource option) asks a provider to
Read a resource it has never seen, so the request carries no properties. The
stock server (``python -m pulumi.dynamic``) finds the provider to call in the
``__provider`` property and fails with ``KeyError: '__provider'``. This
wrapper runs that same server unchanged, except that a Read without
``__provider`` for one of netpeer's resource types is handed netpeer's
provider, picked by the type in the URN.

netpeer's Pulumi toolchain (scripts/install-pulumi.sh) starts dynamic
providers through this module when netpeer is installed in the program's
environment; everything else behaves exactly as ``python -m pulumi.dynamic``.
"""

from __future__ import annotations

import runpy

from pulumi.dynamic.dynamic import PROVIDER_KEY, serialize_provider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from netpeer_provider import NetworkPeeringProvider, NetworkProvider

PROVIDERS = {
    "pulumi-python:dynamic/netpeer:Network": NetworkProvider,
    "pulumi-python:dynamic/netpeer:NetworkPeering": NetworkPeeringProvider,
}


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


def _install() -> None:
    register = provider_pb2_grpc.add_ResourceProviderServicer_to_server

    def add(servicer, server):
        read = servicer.Read
        servicer.Read = lambda request, context: read(with_provider(request), context)
        return register(servicer, server)

    provider_pb2_grpc.add_ResourceProviderServicer_to_server = add


if __name__ == "__main__":
    _install()
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
