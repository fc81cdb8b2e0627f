"""``Network``: a virtual network, with the peerings it may declare inline.

Inline peerings (IEP-9 ``spec.peerings``) are created, updated and withdrawn
with the network. The outputs carry both the declarations as given
(``inline_peerings``, what diffs compare with) and the status of every
peering of the network (``peerings``).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from netpeer import errors as service_errors
from netpeer.core import validate
from netpeer.reasons import Reason

from netpeer_provider.core import peering as peering_
from netpeer_provider.core import schema
from netpeer_provider.core.errors import Conflict, ProviderError, ServiceError, is_peering_conflict
from netpeer_provider.core.ids import NetworkId, PeeringId
from netpeer_provider.core.results import Created, Diff, Failure, Read, Updated, identity_changes
from netpeer_provider.core.session import Session, default_namespace
from netpeer_provider.core.values import UNKNOWN, known

SCHEMA = schema.NETWORK
INLINE_KEYS = tuple(f.name for f in schema.INLINE_PEERING.fields)
# Changing any of these makes an inline peering another one: withdraw, then declare
# (a changed remote_uid re-pins the same peering in place).
_INLINE_IDENTITY = ("remote_network", "remote_namespace", "remote_site")
# From the schema's field roles: the inputs repeated in the outputs of the same name, and of those the ones
# an update changes in place (subnets, routes, description).
_ECHOED = tuple(f.name for f in SCHEMA.echoed())
_UPDATED_ECHOED = tuple(f.name for f in SCHEMA.updatable() if f.name in _ECHOED)
IN_USE_WAIT = 15.0  # seconds a delete waits for the network's peerings to be deleted by someone else


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
                      "remote_network": s["remote_network"], "remote_site": s.get("remote_site") or "",
                      "phase": s["phase"], "reason": s["reason"],
                      "remote_uid": by_name.get(s["name"], {}).get("remote_uid"),
                      "last_phase_transition_time": s["last_phase_transition_time"],
                      "expires_at": by_name.get(s["name"], {}).get("expires_at"),
                      "dataplane": by_name.get(s["name"], {}).get("dataplane") or "",
                      "programmed_at": by_name.get(s["name"], {}).get("programmed_at")} for s in n["peerings"]],
        "peered_networks": n["peered_networks"],
    }


def view(c, ns: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The network and its peerings (``Client`` forms); the peerings are
    listed only when it has some."""
    n = c.get_network(ns, name)
    return n, (c.list_peerings(ns, name) if n["peering_count"] or n["peerings"] else [])


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
        except service_errors.InvalidArgument as exc:   # every invalid prefix, not only the first
            failures += [Failure(v.field or "subnets", v.message) for v in exc.violations]
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
    for field in SCHEMA.updatable():
        key = field.name
        new, old = news.get(key), olds.get(field.declared_as or key)
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


def notes(session: Session, olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[str, ...]:
    """What a diff should tell besides the changes: inline peerings stuck on
    their old pin (``RemoteReplaced``) that the new declarations do not re-pin."""
    if not known(news.get("peerings")):
        return ()
    before = {p.get("name"): p for p in olds.get("inline_peerings") or []}
    after = {p.get("name"): p for p in inline(news.get("peerings"))}
    out = []
    for s in olds.get("peerings") or []:
        name = s.get("name")
        if s.get("reason") != "RemoteReplaced" or name not in after:
            continue
        if (after[name].get("remote_uid") or None) == (before.get(name, {}).get("remote_uid") or None):
            field = session.terms.field("remote_uid")
            out.append(f"peering {olds.get('namespace')}/{olds.get('name')}/{name} is {s.get('phase')} "
                       f"(RemoteReplaced): {s.get('remote_namespace')}/{s.get('remote_network')} was deleted and "
                       f"re-created, and this peering is pinned to the old uid {s.get('remote_uid')}: set its "
                       f"`{field}` to the new network's uid and run {session.terms.apply}")
    return tuple(out)


def create(session: Session, props: Mapping[str, Any]) -> Created:
    """Creates the network, then its inline peerings; if one fails, removes
    what it created (a failed create is not in the state). Inline peerings
    that are Failed end it like a peering's create (warnings or ``NotBound``)."""
    def run(c):
        ns = props.get("namespace") or default_namespace(c)
        n = c.create_network(ns, props["name"], props.get("subnets") or [], props.get("routes") or [],
                             props.get("description") or "")
        if not inline(props.get("peerings")):
            return n, []  # a new network has no peerings yet: its answer is the whole story
        try:
            sync_inline(session, c, ns, props["name"], [], inline(props.get("peerings")))
        except Exception:
            sync_inline(session, c, ns, props["name"], inline(props.get("peerings")), [])
            c.delete_network(ns, props["name"])
            raise
        return view(c, ns, props["name"])
    n, peerings = session.call(f"creating network {props.get('name')}", run)
    id_, outs = str(NetworkId(n["namespace"], n["name"])), outputs(props, n, peerings)
    return Created(id_, outs, _settle(session, id_, outs, props, peerings))


def _settle(session: Session, id_: str, outs: dict[str, Any], props: Mapping[str, Any],
            peerings: list[dict[str, Any]], preview: bool = False) -> tuple[str, ...]:
    declared = {p.get("name") for p in inline(props.get("peerings"))}
    out: list[str] = []
    for p in peerings:
        if p["name"] in declared:
            out += peering_.settle(session, id_, outs, p, 0, preview=preview)
    return tuple(out)


def preview(session: Session, props: Mapping[str, Any]) -> Created:
    """What a create would answer, asked with a validate-only call that keeps
    nothing (grants, names, prefixes, quotas): the inputs, normalised by the
    service. Refusals raise as the create would, except a name taken (perhaps
    by the old network of a replacement). Nothing is asked while an input is
    not known yet."""
    out = {k: props.get(k) for k in _ECHOED if known(props.get(k))}
    out["inline_peerings"] = inline(props.get("peerings")) if known(props.get("peerings")) else None
    if not known(props) or not props.get("name"):
        return Created("", {k: v for k, v in out.items() if v is not None})

    def run(c):
        ns = props.get("namespace") or default_namespace(c)
        return c.create_network(ns, props["name"], props.get("subnets") or [], props.get("routes") or [],
                                props.get("description") or "", validate_only=True)
    try:
        n = session.call(f"creating network {props.get('name')}", run)
    except ServiceError as exc:
        if isinstance(exc.cause, service_errors.AlreadyExists):
            return Created("", out)  # perhaps the old one of a replacement (`--replace`): the create will tell
        raise
    out.update({k: n[k] for k in _ECHOED})
    return Created("", out)


def validate_replacement(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> None:
    """Asks the service whether the create half of a replacement would be
    accepted (validate-only: grants, names, prefixes, quotas), so that a
    replace never deletes the old network when the new one would be refused;
    raises the refusal. The quota slot the old one frees is not held against it."""
    if not known(news):
        return
    old = NetworkId.parse(id_)

    def run(c):
        ns = news.get("namespace") or default_namespace(c)
        c.create_network(ns, news["name"], news.get("subnets") or [], news.get("routes") or [],
                         news.get("description") or "", validate_only=True)
        return ns
    try:
        session.call(f"replacing network {old.namespace}/{old.name}", run)
    except ServiceError as exc:
        same_namespace = (news.get("namespace") or old.namespace) == old.namespace
        if not (same_namespace and isinstance(exc.cause, service_errors.ResourceExhausted)):
            raise


def read(session: Session, id_: str, props: Mapping[str, Any]) -> Read | None:
    """The network as the service has it, or None if it is gone. ``props``
    are the old outputs (empty for an import): of the network's peerings, the
    inline ones are those it declared."""
    nid = NetworkId.parse(id_)
    try:
        n, peerings = session.call(f"reading network {id_}", lambda c: view(c, nid.namespace, nid.name))
    except ServiceError as exc:
        if isinstance(exc.cause, service_errors.NotFound):
            return None
        raise
    declared = {p["name"] for p in props.get("inline_peerings") or []}
    declarations = [{k: v for k, v in {"name": p["name"], "remote_network": p["remote_network"],
                                       "remote_namespace": p["remote_namespace"],
                                       "remote_site": p.get("remote_site"), "ttl": p["ttl"],
                                       "description": p["description"]}.items() if v}
                    for p in peerings if p["name"] in declared]
    inputs = {"namespace": nid.namespace, "name": nid.name, "subnets": n["subnets"], "routes": n["routes"],
              "description": n["description"], "peerings": declarations}
    return Read(id_, outputs(inputs, n, peerings), inputs)


def lookup(session: Session, name: str, namespace: str | None = None) -> Read:
    """An existing network by name, ``namespace`` defaulting to the token's:
    what the getNetwork function and the netpeer_network data source read. A
    network that does not exist (or that the token cannot see) is an error naming it."""
    ns = namespace or session.call("reading the token's namespace", default_namespace)
    found = read(session, str(NetworkId(ns, name)), {})
    if found is None:
        raise ProviderError(f"network {ns}/{name} not found (or the token cannot see it)", path="name")
    return found


def import_(session: Session, id_: str) -> Read:
    """Adopts an existing network by id (its peerings are not adopted as
    inline ones). A network that does not exist is an error naming the id."""
    found = read(session, id_, {})
    if found is None:
        raise ProviderError(f"importing network {id_}: it does not exist; check the id ({SCHEMA.id_format})",
                            path="id")
    return found


def update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Updated:
    """Sets subnets, routes and description, then brings the inline peerings
    from the old declarations to the new ones. Ends like ``create``."""
    nid = NetworkId.parse(id_)

    def run(c):
        c.update_network(nid.namespace, nid.name, subnets=news.get("subnets") or [],
                         routes=news.get("routes") or [], description=news.get("description") or "")
        sync_inline(session, c, nid.namespace, nid.name, olds.get("inline_peerings") or [],
                    inline(news.get("peerings")))
        return view(c, nid.namespace, nid.name)
    n, peerings = session.call(f"updating network {nid.name}", run)
    outs = outputs(news, n, peerings)
    return Updated(outs, _settle(session, id_, outs, news, peerings))


def preview_update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Updated:
    """What an update would answer for subnets, routes and description
    (validate-only: an overlap with a Bound peer is refused here, as the
    update would be); inline peerings are shown as declared."""
    nid = NetworkId.parse(id_)
    out = dict(olds)
    out.update({k: news.get(k) for k in _UPDATED_ECHOED if known(news.get(k))})
    if known(news.get("peerings")):
        out["inline_peerings"] = inline(news.get("peerings"))
    if not all(known(news.get(k)) for k in _UPDATED_ECHOED):
        return Updated(out)
    n = session.call(f"updating network {nid.name}", lambda c: c.update_network(
        nid.namespace, nid.name, subnets=news.get("subnets") or [], routes=news.get("routes") or [],
        description=news.get("description") or "", validate_only=True))
    out.update({k: n[k] for k in _UPDATED_ECHOED})
    return Updated(out)


def delete(session: Session, id_: str, props: Mapping[str, Any], *, in_use_wait: float = IN_USE_WAIT,
           sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
    """Withdraws the inline peerings, then deletes the network; already gone
    is fine. A network still used by peerings is tried again for up to
    ``in_use_wait`` seconds: an engine deleting a whole stack may delete a
    peering it knows no dependency of (an imported one) at the same time."""
    nid = NetworkId.parse(id_)

    def run(c):
        for p in props.get("inline_peerings") or []:
            try:
                c.delete_peering(nid.namespace, nid.name, p["name"])
            except service_errors.NotFound:
                pass
        deadline = clock() + in_use_wait
        while True:
            try:
                return c.delete_network(nid.namespace, nid.name)
            except service_errors.FailedPrecondition as exc:
                if exc.reason != Reason.NETWORK_IN_USE or clock() >= deadline:
                    raise
                session.report(f"network {nid.namespace}/{nid.name}: waiting for its peerings to go ({exc.line()})")
                sleep(0.5)
    try:
        session.call(f"deleting network {id_}", run)
    except ServiceError as exc:
        if not isinstance(exc.cause, service_errors.NotFound):
            raise


def sync_inline(session: Session, c, ns: str, network: str, old: list[dict], new: list[dict]) -> None:
    """Withdraws removed inline peerings, creates added ones, updates changed
    ones (a changed or cleared ``remote_uid`` re-pins in place); a changed
    remote is a withdraw plus a create."""
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
                if any(q.get(k) != p.get(k) for k in ("description", "ttl", "remote_uid")):
                    args: dict[str, Any] = {"description": q.get("description") or "", "ttl": ttl}
                    if (q.get("remote_uid") or None) != (p.get("remote_uid") or None):
                        args["remote_uid"] = q.get("remote_uid") or ""
                    peering_.update_half(c, PeeringId(ns, network, name), args)
            else:
                c.create_peering(ns, network, name, q["remote_network"], q.get("remote_namespace"),
                                 q.get("remote_uid"), ttl, q.get("description") or "",
                                 remote_site=q.get("remote_site") or "")
        except service_errors.NetpeerError as exc:
            where = f"network {ns}/{network}: peerings[{name}]: {exc.line()}"
            if is_peering_conflict(exc):
                raise Conflict(f"{where}; {session.terms.both_ways()}: remove one of the two declarations", exc,
                               path=f"peerings[{name}]") from None
            raise ServiceError(where, exc, path=f"peerings[{name}]") from None
