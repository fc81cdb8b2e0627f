"""A do-nothing Pulumi dynamic resource: the baseline the netpeer provider's
overhead is measured against. Importable (pickled by reference, like
netpeer_provider's), no I/O, and the same state as netpeer's resources: the
program gives it the inputs the netpeer program gives, and it answers
outputs of the same names and sizes, changing as netpeer's do (a network
learns its Bound peer on refresh), so that Pulumi's own work per resource
(serialising, diffing, checkpointing the state) is the same and only the
provider's work differs."""

from __future__ import annotations

import uuid

import pulumi
from pulumi.dynamic import (CheckResult, CreateResult, DiffResult, ReadResult, Resource, ResourceProvider,
                            UpdateResult)

TIME = "2026-11-23T20:00:00Z"


def shaped(props: dict, refreshed: bool = False) -> dict:
    """``props`` with the outputs a netpeer resource of the same inputs has:
    as created (a network has no peers yet; a peering whose remote has not
    consented yet is Pending), or as a refresh reads it once all are Bound."""
    out = {k: v for k, v in props.items() if not k.startswith("__")}
    u = str(uuid.uuid4())
    if "subnets" in props:  # a network
        out.update(uid=out.get("uid") or u, routes=out.get("routes") or [], description=out.get("description") or "",
                   inline_peerings=[], peered_networks=[], peerings=[])
        if refreshed:
            out.update(peered_networks=[{"namespace": out["namespace"], "name": "n0", "uid": u}],
                       peerings=[{"name": "to-n0", "remote_namespace": out["namespace"], "remote_network": "n0",
                                  "phase": "Bound", "reason": "Bound", "remote_uid": u,
                                  "last_phase_transition_time": TIME, "expires_at": None}])
        return out
    bound = refreshed or str(out["network"]) > str(out["remote_network"])  # the second half of a pair binds
    remote = f"{out['namespace']}/{out['remote_network']}"
    out.update(remote_namespace=out["namespace"], pinned_remote_uid=None, ttl="7d", network_uid=out.get(
        "network_uid") or u, last_phase_transition_time=TIME, description=out.get("description") or "",
        wait_for_bound=out.get("wait_for_bound") or 0)
    if bound:
        out.update(phase="Bound", reason="Bound", message=f"bound to {remote}", remote_uid=u, expires_at=None)
    else:
        out.update(phase="Pending", reason="AwaitingRemote", message=f"waiting for {remote} to consent",
                   remote_uid=None, expires_at=TIME)
    return out


class NoopProvider(ResourceProvider):
    def check(self, olds, news):
        return CheckResult(news, [])

    def create(self, props):
        return CreateResult(str(uuid.uuid4()), shaped(props))

    def read(self, id_, props):
        return ReadResult(id_, shaped(props, refreshed=True))

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
