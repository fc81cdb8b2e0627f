"""``NetworkPeering``: one side's consent to peer its network with another.

Inputs and outputs are plain dicts keyed by the snake_case names of
``schema.NETWORK_PEERING``. Outputs repeat every input: engines diff the old
outputs against the new inputs.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from netpeer import errors as service_errors
from netpeer.core import validate

from netpeer_provider.core import schema
from netpeer_provider.core.errors import Conflict, NotBound, ServiceError, is_peering_conflict
from netpeer_provider.core.ids import PeeringId
from netpeer_provider.core.results import Created, Diff, Failure, Read, identity_changes
from netpeer_provider.core.session import Session, default_namespace
from netpeer_provider.core.values import given, known

SCHEMA = schema.NETWORK_PEERING
_ECHOED = ("namespace", "network", "name", "remote_namespace", "remote_network", "description", "ttl",
           "wait_for_bound")
_STATUS = ("phase", "reason", "message", "network_uid", "last_phase_transition_time", "expires_at")
_UPDATABLE = ("description", "wait_for_bound")  # ttl too, compared once normalised
WAIT_MAX = 3600


def outputs(inputs: Mapping[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs from the inputs and the service's peering (``Client`` form)."""
    out = {k: inputs.get(k) for k in _ECHOED}
    out.update(namespace=p["namespace"], remote_namespace=p["remote_namespace"],
               pinned_remote_uid=inputs.get("remote_uid") or None, remote_uid=p["remote_uid"],
               ttl=p["ttl"], description=p["description"])
    out.update({k: p[k] for k in _STATUS})
    return out


def check(news: Mapping[str, Any], prefix: str = "") -> tuple[dict[str, Any], list[Failure]]:
    """Validates what is known and normalises it (ttl ``168h`` -> ``7d``);
    unknown values pass through. ``prefix`` places the fields in a larger
    input (``peerings[0].`` for a network's inline peerings)."""
    failures: list[Failure] = []
    clean = dict(news)

    def run(field: str, fn: Callable[[str, Any], Any]) -> None:
        value = news.get(field)
        if not given(value) or not known(value):
            return
        try:
            clean[field] = fn(f"{prefix}{field}", value)
        except service_errors.InvalidArgument as exc:
            failures.append(Failure(f"{prefix}{field}", exc.message))

    for field in ("namespace", "network", "remote_namespace", "remote_network"):
        run(field, validate.name)
    run("name", lambda f, v: validate.name(f, v, peering=True))
    run("remote_uid", validate.uid)
    run("ttl", lambda f, v: validate.format_duration(validate.ttl(f, v)))
    run("description", validate.description)
    wait = news.get("wait_for_bound")
    if wait is not None and known(wait):
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= WAIT_MAX:
            failures.append(Failure(f"{prefix}wait_for_bound", f"{prefix}wait_for_bound: {wait!r} must be a "
                                    f"number of seconds from 0 to {WAIT_MAX}"))
    for field in ("network", "name", "remote_network"):
        if not news.get(field):
            failures.append(Failure(f"{prefix}{field}", f"{prefix}{field} is required"))
    ns, rns = news.get("namespace"), news.get("remote_namespace") or news.get("namespace")
    same = (rns, news.get("remote_network")) == (ns, news.get("network"))
    if same and ns and known([ns, rns, news.get("network"), news.get("remote_network")]):  # UNKNOWN == UNKNOWN
        failures.append(Failure(f"{prefix}remote_network", f"{prefix}remote_network: a network cannot peer "
                                "with itself"))
    return clean, failures


def diff(olds: Mapping[str, Any], news: Mapping[str, Any]) -> Diff:
    """Old outputs against new (checked) inputs: identity fields replace,
    description, ttl and wait_for_bound update in place."""
    replaces = identity_changes(SCHEMA.replacing(), olds, news)
    updates = [k for k in _UPDATABLE if not known(news.get(k)) or (news.get(k) or None) != (olds.get(k) or None)]
    ttl = news.get("ttl")
    if ttl and known(ttl):
        try:
            if validate.format_duration(validate.ttl("ttl", ttl)) != olds.get("ttl"):
                updates.append("ttl")
        except service_errors.InvalidArgument:
            updates.append("ttl")
    return Diff(changes=bool(replaces or updates), replaces=tuple(replaces), updates=tuple(updates),
                delete_before_replace=True)


def create(session: Session, props: Mapping[str, Any]) -> Created:
    """Declares this side's half; with ``wait_for_bound``, waits for Bound."""
    def run(c) -> dict[str, Any]:
        ns = props.get("namespace") or default_namespace(c)
        ttl = validate.ttl("ttl", props["ttl"]) if props.get("ttl") else None
        p = c.create_peering(ns, props["network"], props["name"], props["remote_network"],
                             props.get("remote_namespace") or None, props.get("remote_uid") or None, ttl,
                             props.get("description") or "")
        return wait_for_bound(session, c, p, props.get("wait_for_bound") or 0, withdraw=True)
    try:
        p = session.call(f"creating peering {props.get('network')}/{props.get('name')}", run)
    except ServiceError as exc:
        if is_peering_conflict(exc.cause):
            raise Conflict(f"{exc.message}; {session.terms.both_ways()}", exc.cause, path="name") from None
        raise
    return Created(str(PeeringId(p["namespace"], p["network"], p["name"])), outputs(props, p))


def read(session: Session, id_: str, props: Mapping[str, Any]) -> Read | None:
    """The peering as the service has it, or None if it is gone. ``props``
    are the old outputs (empty for an import): they carry what only the
    provider knows (the pinned uid, wait_for_bound)."""
    pid = PeeringId.parse(id_)
    try:
        p = session.call(f"reading peering {id_}", lambda c: c.get_peering(pid.namespace, pid.network, pid.name))
    except ServiceError as exc:
        if isinstance(exc.cause, service_errors.NotFound):
            return None
        raise
    inputs = {"namespace": pid.namespace, "network": pid.network, "name": pid.name,
              "remote_network": p["remote_network"], "remote_namespace": p["remote_namespace"],
              "description": p["description"], "ttl": p["ttl"]}
    if props.get("pinned_remote_uid"):
        inputs["remote_uid"] = props["pinned_remote_uid"]
    inputs["wait_for_bound"] = props.get("wait_for_bound") or 0  # a setting of ours, not the service's
    return Read(id_, outputs(inputs, p), inputs)


def import_(session: Session, id_: str) -> Read | None:
    """Adopts an existing peering by id: a read with no previous state."""
    return read(session, id_, {})


def update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> dict[str, Any]:
    """Changes description and ttl in place; with ``wait_for_bound``, waits for Bound."""
    pid = PeeringId.parse(id_)

    def run(c) -> dict[str, Any]:
        ttl = validate.ttl("ttl", news["ttl"]) if news.get("ttl") else None
        p = c.update_peering(pid.namespace, pid.network, pid.name, description=news.get("description") or "",
                             ttl=ttl)
        return wait_for_bound(session, c, p, news.get("wait_for_bound") or 0, withdraw=False)
    return outputs(news, session.call(f"updating peering {pid.network}/{pid.name}", run))


def delete(session: Session, id_: str, props: Mapping[str, Any]) -> None:
    """Withdraws this side's half; already gone is fine."""
    pid = PeeringId.parse(id_)
    try:
        session.call(f"deleting peering {id_}", lambda c: c.delete_peering(pid.namespace, pid.network, pid.name))
    except ServiceError as exc:
        if not isinstance(exc.cause, service_errors.NotFound):
            raise


def wait_for_bound(session: Session, client, p: dict[str, Any], seconds: float, *, withdraw: bool,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Polls until the peering is Bound, for at most ``seconds`` (0: return at
    once). If it is not Bound in time, withdraws the half when ``withdraw``
    (a create, so that state and service agree) and raises ``NotBound``.
    Progress lines go to ``session.report`` when the phase or reason changes."""
    if not seconds or p["phase"] == "Bound":
        return p
    key = f"{p['namespace']}/{p['network']}/{p['name']}"
    seen = (p["phase"], p["reason"])
    session.report(f"peering {key} is {p['phase']} ({p['reason']}); waiting up to {seconds:g}s for Bound")
    deadline = clock() + float(seconds)
    while clock() < deadline:
        sleep(min(0.5, max(0.0, deadline - clock())))
        p = client.get_peering(p["namespace"], p["network"], p["name"])
        if p["phase"] == "Bound":
            return p
        if (p["phase"], p["reason"]) != seen:
            seen = (p["phase"], p["reason"])
            session.report(f"peering {key} is {p['phase']} ({p['reason']})")
    note = ""
    if withdraw:
        client.delete_peering(p["namespace"], p["network"], p["name"])
        note = f"; this half was withdrawn again, run {session.terms.apply} once the other side has consented"
    raise NotBound(f"peering {key} is {p['phase']} ({p['reason']}: {p['message']}) "
                   f"after wait_for_bound={seconds:g}s{note}", phase=p["phase"], reason=p["reason"],
                   seconds=seconds, withdrawn=withdraw)


__all__ = ["SCHEMA", "check", "create", "delete", "diff", "import_", "outputs", "read", "update",
           "wait_for_bound"]
