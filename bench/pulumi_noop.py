"""A do-nothing Pulumi dynamic resource: the baseline the netpeer provider's
overhead is measured against. Importable (pickled by reference, like
netpeer_provider's), same shape of inputs, no I/O."""

from __future__ import annotations

import uuid

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult


class NoopProvider(ResourceProvider):
    def check(self, olds, news):
        from pulumi.dynamic import CheckResult
        return CheckResult(news, [])

    def create(self, props):
        return CreateResult(str(uuid.uuid4()), dict(props))

    def read(self, id_, props):
        return ReadResult(id_, dict(props))

    def diff(self, id_, olds, news):
        changed = any(olds.get(k) != v for k, v in news.items() if not k.startswith("__"))
        return DiffResult(changes=changed)

    def update(self, id_, olds, news):
        return UpdateResult(dict(news))

    def delete(self, id_, props):
        pass


class Noop(Resource):
    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(NoopProvider(), name, props, opts)
