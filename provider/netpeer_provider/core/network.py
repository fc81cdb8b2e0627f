"""``Network``: a virtual network, with the peerings it may declare inline.

Inline peerings (IEP-9 ``spec.peerings``) are created, updated and withdrawn
with the network. The outputs carry both the declarations as given
(``inline_peerings``, what diffs compare with) and the status of every
peering of the network (``peerings``).
"""

from __future__ import annotations

from typing import Any, Mapping

from netpeer import errors as service_errors
from netpeer.core import validate

from netpeer_provider.core import peering as peering_
from netpeer_provider.core import schema
from netpeer_provider.core.errors import Conflict, ServiceError, is_peering_conflict
from netpeer_provider.core.ids import NetworkId
from netpeer_provider.core.results import Created, Diff, Failure, Read, identity_changes
from netpeer_provider.core.session import Session, default_namespace
from netpeer_provider.core.values import UNKNOWN, known

SCHEMA = schema.NETWORK
INLINE_KEYS = tuple(f.name for f in schema.INLINE_PEERING.fields)
# Changing any of these makes an inline peering another one: withdraw, then declare.
_INLINE_IDENTITY = ("remote_network", "remote_namespace", "remote_uid")


def inline(peerings: Any) -> list[dict[str, Any]]:
    """Inline declarations, normalised: no unset keys, sorted by name."""
    out = [{k: p[k] for k in INLINE_KEYS if p.get(k) not in (None, "")} for p in peerings or []]
    return sorted(out, key=lambda p: p.get("name", ""))


def outputs(inputs: Mapping[str, Any], n: Mapping[str, Any], peerings: list[dict[str, Any]]) -> dict[str, Any]:
    """The outputs from the inputs, the service's network and its peerings (``Client`` forms)."""
    by_name = {p["name"]: p for p in peerings}
    return {
        "namespace": n["namespace"], "name": n["name"], "uid": n["uid"], "subnets": n["subnets"],
        "routes": n["routes"], "description": n["description"],
        "inline_peerings": inline(inputs.get("peerings")),
        "peerings": [{"name": s["name"], "remote_namespace": s["remote_namespace"],
                      "remote_network": s["remote_network"], "phase": s["phase"], "reason": s["reason"],
                      "remote_uid": by_name.get(s["name"], {}).get("remote_uid"),
                      "last_phase_transition_time": s["last_phase_transition_time"],
                      "expires_at": by_name.get(s["name"], {}).get("expires_at")} for s in n["peerings"]],
        "peered_networks": n["peered_networks"],
    }


def check(news: Mapping[str, Any]) -> tuple[dict[str, Any], list[Failure]]:
    """Validates what is known and normalises subnets and routes; unknown
    values pass through. Inline peerings are checked as peerings of this
    network (``peerings[i].field``), and their names must be unique."""
    failures: list[Failure] = []
    clean = dict(news)
    for field in ("namespace", "name"):
        value = news.get(field)
        if value and known(value):
            try:
                validate.name(field, value)
            except service_errors.InvalidArgument as exc:
                failures.append(Failure(field, exc.message))
    if not news.get("name"):
        failures.append(Failure("name", "name is required"))
    subnets, routes = news.get("subnets"), news.get("routes") or []
    if known(subnets) and known(routes):
        try:
            s, r = validate.prefixes(subnets or [], routes)
            clean["subnets"] = list(s)
            clean["routes"] = [f"{x.prefix} via {x.next_hop}" if x.next_hop else x.prefix for x in r]
        except service_errors.InvalidArgument as exc:
            failures.append(Failure(exc.field or "subnets", exc.message))
    if news.get("description") and known(news["description"]):
        try:
            validate.description("description", news["description"])
        except service_errors.InvalidArgument as exc:
            failures.append(Failure("description", exc.message))
    failures += _check_inline(news)
    return clean, failures


def _check_inline(news: Mapping[str, Any]) -> list[Failure]:
    items = news.get("peerings") or []
    if items is UNKNOWN:
        return []
    if not isinstance(items, (list, tuple)):
        return [Failure("peerings", f"peerings: {items!r} must be a list of objects")]
    failures: list[Failure] = []
    seen = set()
    for i, p in enumerate(items):
        if not isinstance(p, dict):
            if known(p):
                failures.append(Failure(f"peerings[{i}]", f"peerings[{i}] must be an object"))
            continue
        decl = dict(p, namespace=news.get("namespace"), network=news.get("name"))
        failures += peering_.check(decl, prefix=f"peerings[{i}].")[1]
        name = p.get("name")
        if isinstance(name, (list, dict)):
            continue  # not a name at all: the peering's own check said so
        if name in seen and known(name):
            failures.append(Failure(f"peerings[{i}].name", f"peerings[{i}].name: {name!r} is declared twice"))
        seen.add(name)
    return failures


def diff(olds: Mapping[str, Any], news: Mapping[str, Any]) -> Diff:
    """Old outputs against new (checked) inputs: name and namespace replace
    (a namespace left to its default does not); subnets, routes, description
    and inline peerings update in place."""
    replaces = identity_changes(SCHEMA.replacing(), olds, news)
    updates = []
    for key in ("subnets", "routes", "description", "peerings"):
        new, old = news.get(key), olds.get(SCHEMA.field(key).declared_as or key)
        if not known(new):
            changed = True
        elif key == "peerings":
            changed = inline(new) != (old or [])
        elif key == "description":
            changed = (new or "") != (old or "")
        else:
            changed = list(new or []) != list(old or [])
        if changed:
            updates.append(key)
    return Diff(changes=bool(replaces or updates), replaces=tuple(replaces), updates=tuple(updates),
                delete_before_replace=True)


def create(session: Session, props: Mapping[str, Any]) -> Created:
    """Creates the network, then its inline peerings; if one fails, removes
    what it created (a failed create is not in the state)."""
    def run(c):
        ns = props.get("namespace") or default_namespace(c)
        c.create_network(ns, props["name"], props.get("subnets") or [], props.get("routes") or [],
                         props.get("description") or "")
        try:
            sync_inline(session, c, ns, props["name"], [], inline(props.get("peerings")))
        except Exception:
            sync_inline(session, c, ns, props["name"], inline(props.get("peerings")), [])
            c.delete_network(ns, props["name"])
            raise
        return c.get_network(ns, props["name"]), c.list_peerings(ns, props["name"])
    n, peerings = session.call(f"creating network {props.get('name')}", run)
    return Created(str(NetworkId(n["namespace"], n["name"])), outputs(props, n, peerings))


def read(session: Session, id_: str, props: Mapping[str, Any]) -> Read | None:
    """The network as the service has it, or None if it is gone. ``props``
    are the old outputs (empty for an import): of the network's peerings, the
    inline ones are those it declared."""
    nid = NetworkId.parse(id_)
    try:
        n, peerings = session.call(f"reading network {id_}", lambda c: (
            c.get_network(nid.namespace, nid.name), c.list_peerings(nid.namespace, nid.name)))
    except ServiceError as exc:
        if isinstance(exc.cause, service_errors.NotFound):
            return None
        raise
    declared = {p["name"] for p in props.get("inline_peerings") or []}
    declarations = [{k: v for k, v in {"name": p["name"], "remote_network": p["remote_network"],
                                       "remote_namespace": p["remote_namespace"], "ttl": p["ttl"],
                                       "description": p["description"]}.items() if v}
                    for p in peerings if p["name"] in declared]
    inputs = {"namespace": nid.namespace, "name": nid.name, "subnets": n["subnets"], "routes": n["routes"],
              "description": n["description"], "peerings": declarations}
    return Read(id_, outputs(inputs, n, peerings), inputs)


def import_(session: Session, id_: str) -> Read | None:
    """Adopts an existing network by id (its peerings are not adopted as inline ones)."""
    return read(session, id_, {})


def update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> dict[str, Any]:
    """Sets subnets, routes and description, then brings the inline peerings
    from the old declarations to the new ones."""
    nid = NetworkId.parse(id_)

    def run(c):
        c.update_network(nid.namespace, nid.name, subnets=news.get("subnets") or [],
                         routes=news.get("routes") or [], description=news.get("description") or "")
        sync_inline(session, c, nid.namespace, nid.name, olds.get("inline_peerings") or [],
                    inline(news.get("peerings")))
        return c.get_network(nid.namespace, nid.name), c.list_peerings(nid.namespace, nid.name)
    n, peerings = session.call(f"updating network {nid.name}", run)
    return outputs(news, n, peerings)


def delete(session: Session, id_: str, props: Mapping[str, Any]) -> None:
    """Withdraws the inline peerings, then deletes the network; already gone is fine."""
    nid = NetworkId.parse(id_)

    def run(c):
        for p in props.get("inline_peerings") or []:
            try:
                c.delete_peering(nid.namespace, nid.name, p["name"])
            except service_errors.NotFound:
                pass
        c.delete_network(nid.namespace, nid.name)
    try:
        session.call(f"deleting network {id_}", run)
    except ServiceError as exc:
        if not isinstance(exc.cause, service_errors.NotFound):
            raise


def sync_inline(session: Session, c, ns: str, network: str, old: list[dict], new: list[dict]) -> None:
    """Withdraws removed inline peerings, creates added ones, updates changed
    ones; a changed identity (remote) is a withdraw plus a create."""
    olds = {p["name"]: p for p in old}
    news = {p["name"]: p for p in new}
    for name, p in olds.items():
        q = news.get(name)
        if q is None or any(q.get(k) != p.get(k) for k in _INLINE_IDENTITY):
            try:
                c.delete_peering(ns, network, name)
            except service_errors.NotFound:
                pass
    for name, q in news.items():
        p = olds.get(name)
        ttl = validate.ttl(f"peerings[{name}].ttl", q["ttl"]) if q.get("ttl") else None
        same_identity = p is not None and all(q.get(k) == p.get(k) for k in _INLINE_IDENTITY)
        try:
            if same_identity:
                if q.get("description") != p.get("description") or q.get("ttl") != p.get("ttl"):
                    c.update_peering(ns, network, name, description=q.get("description") or "", ttl=ttl)
            else:
                c.create_peering(ns, network, name, q["remote_network"], q.get("remote_namespace"),
                                 q.get("remote_uid"), ttl, q.get("description") or "")
        except service_errors.NetpeerError as exc:
            where = f"network {ns}/{network}: peerings[{name}]: {exc.message}"
            if is_peering_conflict(exc):
                raise Conflict(f"{where}; {session.terms.both_ways()}: remove one of the two declarations", exc,
                               path=f"peerings[{name}]") from None
            raise ServiceError(where, exc, path=f"peerings[{name}]") from None
