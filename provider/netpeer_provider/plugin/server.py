"""Serves ``NetpeerProvider`` to the engine with Pulumi's provider servicer
(``pulumi.provider.experimental.server``), every call guarded: a failure
answers its one-line status (``pulumi_engine.status_of``), never a traceback,
and a peering kept although not Bound (``errorOnNotBound``) is a partial
failure that the engine records.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable

import grpc
from pulumi.provider.experimental.property_value import PropertyValue
from pulumi.provider.experimental.server import ProviderServicer
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import provider_pb2_grpc

from netpeer_provider import core
from netpeer_provider.plugin import schema_json, values
from netpeer_provider.plugin.provider import NetpeerProvider
from netpeer_provider.pulumi_engine import Engine, engine_address, status_of

GUARDED = ("CheckConfig", "Configure", "Check", "Diff", "Create", "Read", "Update", "Delete", "GetSchema", "Invoke")


def _partial(exc: BaseException):
    if isinstance(exc, core.NotBound):
        return PropertyValue.marshal_map(values.props_to_pulumi(exc.outputs, keep_unknowns=False))
    return None


def _guard(method: Callable) -> Callable:
    async def call(request, context) -> Any:
        try:
            return await method(request, context)
        except Exception as exc:  # every failure is shown as one line, never a traceback
            await context.abort_with_status(status_of(exc, _partial(exc)))
    return call


class Servicer(ProviderServicer):
    """Pulumi's provider servicer with every resource call guarded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in GUARDED:
            setattr(self, name, _guard(getattr(self, name)))


async def serve(argv: list[str]) -> None:
    """Starts the gRPC server on a free loopback port and prints the port (the plugin handshake)."""
    address = engine_address(argv)
    provider = NetpeerProvider(Engine(address))
    server = grpc.aio.server(options=_GRPC_CHANNEL_OPTIONS)
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(
        Servicer(argv, schema_json.version(), provider, engine_address=address or ""), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    await server.wait_for_termination()


def main() -> None:
    """``pulumi-resource-netpeer ENGINE_ADDRESS [flags]``."""
    try:
        asyncio.run(serve(sys.argv[1:]))
    except KeyboardInterrupt:
        pass
