"""A dynamic-provider server (netpeer's host, or Pulumi's stock `python -m
pulumi.dynamic`), driven over gRPC the way the engine drives it: real
pickling, real wire format, against a real netpeerd on real OVN; a fake
engine log service receives what the provider tells the user."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from concurrent import futures

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.dynamic.dynamic import PROVIDER_KEY, serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, provider_pb2, provider_pb2_grpc, status_pb2


class CallFailed(Exception):
    """A failed call: its one-line ``details``, its status ``code`` and, for a
    partial failure, the ``ErrorResourceInitFailed`` the engine would record."""

    def __init__(self, details: str, code=None, init_failed=None):
        super().__init__(details)
        self.code, self.init_failed = code, init_failed


def call(stub, method: str, request):
    """One call of a provider's gRPC method; a failure as ``CallFailed``."""
    try:
        return getattr(stub, method)(request, timeout=120)
    except grpc.RpcError as exc:
        init_failed = None
        for key, value in exc.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                for detail in status_pb2.Status.FromString(value).details:
                    init_failed = provider_pb2.ErrorResourceInitFailed()
                    detail.Unpack(init_failed)
        raise CallFailed(exc.details(), exc.code(), init_failed) from None


class FakeEngine(engine_pb2_grpc.EngineServicer):
    """The engine's log service, as a provider plugin sees it: keeps what it is sent."""

    def __init__(self):
        self.logs: list[engine_pb2.LogRequest] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        engine_pb2_grpc.add_EngineServicer_to_server(self, self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def Log(self, request, context):
        self.logs.append(request)
        return empty_pb2.Empty()

    def messages(self, severity=None, ephemeral=None) -> list[str]:
        return [x.message for x in self.logs if (severity is None or x.severity == severity)
                and (ephemeral is None or x.ephemeral == ephemeral)]

    def close(self):
        self.server.stop(0)


class DynamicServer:
    """One dynamic-provider server process and a client for it: netpeer's host
    (``module="netpeer_provider.dynamic_host"``, what netpeer's toolchain runs),
    or Pulumi's stock one (``module="pulumi.dynamic"``)."""

    def __init__(self, env: dict[str, str], module: str = "netpeer_provider.dynamic_host"):
        self.engine = FakeEngine()
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", module, self.engine.address],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        port = self.proc.stdout.readline().strip()
        assert port.isdigit(), self.proc.stderr.read()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = provider_pb2_grpc.ResourceProviderStub(self.channel)

    def close(self):
        self.channel.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.engine.close()

    @staticmethod
    def urn(provider) -> str:
        """A URN of the provider's resource type, as the engine sends it."""
        kind = type(provider).__name__.removesuffix("Provider")
        return f"urn:pulumi:dev::test::pulumi-python:dynamic/netpeer:{kind}::{kind.lower()}"

    @staticmethod
    def _struct(props: dict) -> struct_pb2.Struct:
        return asyncio.run(rpc.serialize_properties(props, {}))

    @staticmethod
    def _dict(struct) -> dict:
        return rpc.deserialize_properties(struct, True)

    def _call(self, method, request):
        return call(self.stub, method, request)

    def configure(self, config: dict[str, str]):
        return self._call("Configure", provider_pb2.ConfigureRequest(args=self._struct(config)))

    def check(self, provider, news: dict, olds: dict | None = None):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Check", provider_pb2.CheckRequest(urn=self.urn(provider), olds=self._struct(olds or {}),
                                                          news=self._struct(news)))
        return self._dict(r.inputs), [(f.property, f.reason) for f in r.failures]

    def diff(self, provider, id_: str, olds: dict, news: dict):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        olds = {**olds, PROVIDER_KEY: serialize_provider(provider)}
        return self._call("Diff", provider_pb2.DiffRequest(id=id_, urn=self.urn(provider), olds=self._struct(olds),
                                                           news=self._struct(news)))

    def create(self, provider, props: dict, preview: bool = False):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Create", provider_pb2.CreateRequest(urn=self.urn(provider), properties=self._struct(props),
                                                            preview=preview))
        return r.id, self._dict(r.properties)

    def read(self, provider, id_: str, props: dict):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Read", provider_pb2.ReadRequest(id=id_, urn=self.urn(provider), properties=self._struct(props)))
        return r.id, self._dict(r.properties), self._dict(r.inputs)

    def update(self, provider, id_: str, olds: dict, news: dict, preview: bool = False):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        olds = {**olds, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Update", provider_pb2.UpdateRequest(id=id_, urn=self.urn(provider), olds=self._struct(olds),
                                                            news=self._struct(news), preview=preview))
        return self._dict(r.properties)

    def delete(self, provider, id_: str, props: dict):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        self._call("Delete", provider_pb2.DeleteRequest(id=id_, urn=self.urn(provider), properties=self._struct(props)))
