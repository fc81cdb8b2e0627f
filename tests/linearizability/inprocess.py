"""The workload's calls on a ``netpeer.service.Service`` in this process (a
store and the in-memory dataplane, no OVN, no gRPC), recorded in the same
history format: the fast check that lincheck's model is netpeer's
semantics (a history of one client, one call at a time, has exactly one
linearization, so every answer the model gets wrong is a violation)."""

from __future__ import annotations

import random
from pathlib import Path

from netpeer import errors
from netpeer.api.errors import code_for
from netpeer.core.models import Caller
from netpeer.service import Service
from netpeer.service.batch import PeeringRequest
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.linearizability.history import History, now
from tests.linearizability.workload import Group, next_op

ADMIN = Caller("admin", frozenset(), True)


def _view(v) -> dict:
    return {"subnets": list(v.network.subnets), "routes": [r.prefix for r in v.network.routes],
            "peerings": [{"name": p.name, "phase": p.phase.value, "reason": p.reason} for p in v.peerings]}


def call(service: Service, f: str, a: dict):
    """One call of the workload on ``service``; the answer as the history keeps it."""
    if f == "create_network":
        return _view(service.create_network(ADMIN, a["ns"], a["network"], a["subnets"], a["routes"]))
    if f == "update_network":
        return _view(service.update_network(ADMIN, a["ns"], a["network"], subnets=a["subnets"], routes=a["routes"]))
    if f == "delete_network":
        service.delete_network(ADMIN, a["ns"], a["network"])
        return None
    if f == "create_peering":
        p = service.create_peering(ADMIN, a["ns"], a["network"], a["peering"], a["remote_ns"], a["remote_network"])
        return {"phase": p.phase.value, "reason": p.reason}
    if f == "delete_peering":
        service.delete_peering(ADMIN, a["ns"], a["network"], a["peering"])
        return None
    if f == "create_peerings":
        made = service.create_peerings(ADMIN, [PeeringRequest(h["ns"], h["network"], h["peering"], h["remote_network"],
                                                              h["remote_ns"]) for h in a["halves"]])
        return {"peerings": [{"name": p.name, "phase": p.phase.value, "reason": p.reason} for p in made]}
    if f == "unpin_peering":
        p = service.update_peering(ADMIN, a["ns"], a["network"], a["peering"], remote_uid="")
        return {"phase": p.phase.value, "reason": p.reason}
    if f == "get_peering":
        p = service.get_peering(ADMIN, a["ns"], a["network"], a["peering"])
        return {"phase": p.phase.value, "reason": p.reason}
    if f == "list_networks":
        return {"networks": [{"name": v.network.name, **_view(v)} for v in service.list_networks(ADMIN, a["ns"])]}
    raise ValueError(f)


def sequential_history(path: Path, store_path: Path, calls: int, seed: int, groups: int = 3) -> dict[str, int]:
    """``calls`` random calls, one at a time, over ``groups`` groups, on a
    fresh service; their history in ``path``. Answers counted by outcome."""
    rnd = random.Random(seed)
    store = SqliteStore(store_path)
    service = Service(store, MemoryDataplane())
    history = History(path)
    process = history.process()
    try:
        for _ in range(calls):
            group = Group(f"s{rnd.randrange(groups)}")
            f, args = next_op(rnd, group)
            start = now()
            result, outcome, code = None, "ok", ""
            try:
                result = call(service, f, args)
            except errors.NetpeerError as exc:
                outcome, code = "fail", code_for(exc).name
            history.op(process=process, f=f, group=group.name, args=args, call=start, ret=now(), outcome=outcome,
                       result=result, error=code)
        return dict(history.outcomes)
    finally:
        history.close()
        store.close()
