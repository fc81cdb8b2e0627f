"""Pulumi's own dynamic-provider server (`python -m pulumi.dynamic`), driven
over gRPC the way the engine drives it: real pickling, real wire format,
against a real netpeerd on real OVN."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import grpc
from google.protobuf import struct_pb2
from pulumi.dynamic.dynamic import PROVIDER_KEY, serialize_provider
from pulumi.runtime import rpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc


class ProviderError(Exception):
    pass


class DynamicServer:
    """One `python -m pulumi.dynamic` process and a client for it."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.dynamic"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, text=True)
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

    @staticmethod
    def _struct(props: dict) -> struct_pb2.Struct:
        return asyncio.run(rpc.serialize_properties(props, {}))

    @staticmethod
    def _dict(struct) -> dict:
        return rpc.deserialize_properties(struct, True)

    def _call(self, method, request):
        try:
            return getattr(self.stub, method)(request, timeout=120)
        except grpc.RpcError as exc:
            raise ProviderError(exc.details()) from None

    def configure(self, config: dict[str, str]):
        self._call("Configure", provider_pb2.ConfigureRequest(args=self._struct(config)))

    def check(self, provider, news: dict, olds: dict | None = None):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Check", provider_pb2.CheckRequest(urn="urn", olds=self._struct(olds or {}),
                                                          news=self._struct(news)))
        return self._dict(r.inputs), [(f.property, f.reason) for f in r.failures]

    def diff(self, provider, id_: str, olds: dict, news: dict):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        olds = {**olds, PROVIDER_KEY: serialize_provider(provider)}
        return self._call("Diff", provider_pb2.DiffRequest(id=id_, urn="urn", olds=self._struct(olds),
                                                           news=self._struct(news)))

    def create(self, provider, props: dict):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Create", provider_pb2.CreateRequest(urn="urn", properties=self._struct(props)))
        return r.id, self._dict(r.properties)

    def read(self, provider, id_: str, props: dict):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Read", provider_pb2.ReadRequest(id=id_, urn="urn", properties=self._struct(props)))
        return r.id, self._dict(r.properties), self._dict(r.inputs)

    def update(self, provider, id_: str, olds: dict, news: dict):
        news = {**news, PROVIDER_KEY: serialize_provider(provider)}
        olds = {**olds, PROVIDER_KEY: serialize_provider(provider)}
        r = self._call("Update", provider_pb2.UpdateRequest(id=id_, urn="urn", olds=self._struct(olds),
                                                            news=self._struct(news)))
        return self._dict(r.properties)

    def delete(self, provider, id_: str, props: dict):
        props = {**props, PROVIDER_KEY: serialize_provider(provider)}
        self._call("Delete", provider_pb2.DeleteRequest(id=id_, urn="urn", properties=self._struct(props)))
