"""A do-nothing Pulumi dynamic resource: the baseline the netpeer provider's
overhead is measured against. Importable (pickled by reference, like
netpeer_provider's), no I/O, and the same state as netpeer's resources: the
program gives it the inputs the netpeer program gives, and it answers
outputs of the same names and sizes (uids, phases, times; a network with one
Bound peer), so that Pulumi's own work per resource (serialising, diffing,
checkpointing the state) is the same and only the provider's work differs."""

from __future__ import annotations

import uuid

import pulumi
from pulumi.dynamic import (CheckResult, CreateResult, DiffResult, ReadResult, Resource, ResourceProvider,
                            UpdateResult)

TIME = "2026-11-23T20:00:00Z"


def shaped(props: dict) -> dict:
    """``props`` with the outputs a netpeer resource of the same inputs has."""
    out = {k: v for k, v in props.items() if not k.startswith("__")}
    u = str(uuid.uuid4())
    if "subnets" in props:  # a network
        out.update(uid=u, routes=out.get("routes") or [], description=out.get("description") or "",
                   inline_peerings=[], peered_networks=[{"namespace": out["namespace"], "name": "n0", "uid": u}],
                   peerings=[{"name": "to-n0", "remote_namespace": out["namespace"], "remote_network": "n0",
                              "phase": "Bound", "reason": "Bound", "remote_uid": u,
                              "last_phase_transition_time": TIME, "expires_at": None}])
    else:
        out.update(remote_namespace=out["namespace"], pinned_remote_uid=None, remote_uid=u, ttl="7d",
                   phase="Bound", reason="Bound", message=f"bound to {out['namespace']}/{out['remote_network']}",
                   network_uid=u, last_phase_transition_time=TIME, expires_at=None)
    return out


class NoopProvider(ResourceProvider):
    def check(self, olds, news):
        return CheckResult(news, [])

    def create(self, props):
        return CreateResult(str(uuid.uuid4()), shaped(props))

    def read(self, id_, props):
        return ReadResult(id_, dict(props))

    def diff(self, id_, olds, news):
        def old(k):  # a network's declared peerings are kept as inline_peerings, as netpeer's are
            return olds.get("inline_peerings" if k == "peerings" and "subnets" in news else k)
        changed = any(old(k) != v for k, v in news.items() if not k.startswith("__") and v is not None)
        return DiffResult(changes=changed)

    def update(self, id_, olds, news):
        return UpdateResult(shaped(news))

    def delete(self, id_, props):
        pass


class Noop(Resource):
    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(NoopProvider(), name, props, opts)
