"""``NetworkPeering``: one side's consent to peer its network with another.

Inputs and outputs are plain dicts keyed by the snake_case names of
``schema.NETWORK_PEERING``. Outputs repeat every input: engines diff the old
outputs against the new inputs. What a create or update would answer, the
service tells without keeping anything (``preview``, ``preview_update``,
``validate_replacement``: validate-only calls).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from netpeer import errors as service_errors
from netpeer.core import validate
from netpeer.reasons import Reason

from netpeer_provider.core import review, schema
from netpeer_provider.core.errors import (Conflict, NotBound, ProviderError, ServiceError, is_peering_conflict,
                                          is_remote_conflict)
from netpeer_provider.core.ids import PeeringId
from netpeer_provider.core.results import Created, Diff, Failure, Read, Updated, identity_changes
from netpeer_provider.core.session import Session, default_namespace
from netpeer_provider.core.values import given, known
from netpeer_provider.core.wait import wait_for_bound

SCHEMA = schema.NETWORK_PEERING
_ECHOED, _STATUS = tuple(f.name for f in SCHEMA.echoed()), tuple(f.name for f in SCHEMA.status())
_PREVIEWED = ("phase", "reason", "message")  # what a validate-only create tells before anything exists
# Compared as given (ttl and remote_uid, held by the service, are compared normalised and as pinned).
_UPDATABLE = tuple(f.name for f in SCHEMA.updatable() if f.role is not schema.Role.OPTIONAL_COMPUTED)
# The schema's required inputs, and the name: the faces default it to the resource's name.
_REQUIRED = tuple(f.name for f in SCHEMA.inputs() if f.role.required or f.name == "name")
WAIT_MAX = 3600


def outputs(inputs: Mapping[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The outputs from the inputs and the service's peering (``Client`` form)."""
    out = {k: inputs.get(k) for k in _ECHOED}
    out.update(namespace=p["namespace"], remote_namespace=p["remote_namespace"],
               remote_site=p.get("remote_site") or "", pinned_remote_uid=inputs.get("remote_uid") or None,
               remote_uid=p["remote_uid"], ttl=p["ttl"], description=p["description"])
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
    run("remote_site", validate.site)
    run("remote_uid", validate.uid)
    run("ttl", lambda f, v: validate.format_duration(validate.ttl(f, v)))
    run("description", validate.description)
    wait = news.get("wait_for_bound")
    if wait is not None and known(wait):
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= WAIT_MAX:
            failures.append(Failure(f"{prefix}wait_for_bound", f"{prefix}wait_for_bound: {wait!r} must be a "
                                    f"number of seconds from 0 to {WAIT_MAX}"))
    programmed = news.get("wait_for_programmed")
    if programmed is not None and known(programmed) and not isinstance(programmed, bool):
        failures.append(Failure(f"{prefix}wait_for_programmed", f"{prefix}wait_for_programmed: {programmed!r} must "
                                f"be true or false"))
    for field in _REQUIRED:
        if not news.get(field):
            failures.append(Failure(f"{prefix}{field}", f"{prefix}{field} is required"))
    ns, rns = news.get("namespace"), news.get("remote_namespace") or news.get("namespace")
    same = (rns, news.get("remote_network")) == (ns, news.get("network")) and not news.get("remote_site")
    if same and ns and known([ns, rns, news.get("network"), news.get("remote_network")]):  # UNKNOWN == UNKNOWN
        failures.append(Failure(f"{prefix}remote_network", f"{prefix}remote_network: a network cannot peer "
                                "with itself"))
    return clean, failures


def diff(olds: Mapping[str, Any], news: Mapping[str, Any]) -> Diff:
    """Old outputs against new (checked) inputs: identity fields replace;
    description, ttl, wait_for_bound and remote_uid (a changed or cleared
    pin re-pins) update in place."""
    replaces = identity_changes(SCHEMA.replacing(), olds, news)
    updates = [k for k in _UPDATABLE if not known(news.get(k)) or (news.get(k) or None) != (olds.get(k) or None)]
    pin = news.get("remote_uid")
    if not known(pin) or (pin or None) != (olds.get("pinned_remote_uid") or None):
        updates.append("remote_uid")
    ttl = news.get("ttl")
    if ttl and known(ttl):
        try:
            if validate.format_duration(validate.ttl("ttl", ttl)) != olds.get("ttl"):
                updates.append("ttl")
        except service_errors.InvalidArgument:
            updates.append("ttl")
    return Diff(changes=bool(replaces or updates), replaces=tuple(replaces), updates=tuple(updates),
                delete_before_replace=True)


def notes(session: Session, olds: Mapping[str, Any], news: Mapping[str, Any]) -> tuple[str, ...]:
    """What a diff should tell the user besides the changes: a peering stuck
    on its old pin (``RemoteReplaced``) that the new inputs do not re-pin."""
    if olds.get("reason") != "RemoteReplaced" or (news.get("remote_uid") or None) != \
            (olds.get("pinned_remote_uid") or None):
        return ()
    return (_replaced_note(session, olds),)


def _replaced_note(session: Session, p: Mapping[str, Any]) -> str:
    field = session.terms.field("remote_uid")
    return (f"peering {_key(p)} is {p['phase']} (RemoteReplaced): {p['message']}; set `{field}` in the program "
            f"accordingly and run {session.terms.apply}")


def _key(p: Mapping[str, Any]) -> str:
    return f"{p.get('namespace')}/{p.get('network')}/{p.get('name')}"


def _create_args(c, props: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    ns = props.get("namespace") or default_namespace(c)
    ttl = validate.ttl("ttl", props["ttl"]) if props.get("ttl") else None
    return ns, dict(namespace=ns, network=props["network"], name=props["name"],
                    remote_network=props["remote_network"], remote_namespace=props.get("remote_namespace") or None,
                    remote_uid=props.get("remote_uid") or None, ttl=ttl, description=props.get("description") or "",
                    remote_site=props.get("remote_site") or "")


def create(session: Session, props: Mapping[str, Any]) -> Created:
    """Declares this side's half; with ``wait_for_bound``, waits for Bound
    (showing progress) and stops at once if it is Failed. A half that is not
    Bound in the end is kept: warnings say so, or ``NotBound`` if the
    settings make that an error."""
    wait, programmed = props.get("wait_for_bound") or 0, bool(props.get("wait_for_programmed"))

    def run(c) -> dict[str, Any]:
        _, args = _create_args(c, props)
        return wait_for_bound(session, c, c.create_peering(**args), wait, programmed=programmed)
    what = f"creating peering {props.get('network')}/{props.get('name')}"
    try:
        p = session.call(what, run)
    except ServiceError as exc:
        raise _conflict(session, exc) from None
    id_, outs = str(PeeringId(p["namespace"], p["network"], p["name"])), outputs(props, p)
    return Created(id_, outs, settle(session, id_, outs, p, wait, programmed=programmed))


def _conflict(session: Session, exc: ServiceError) -> ServiceError:
    """A refused create, said in the engine's words when the cause is likely
    a duplicate declaration, a rename, or a create-before-delete replace."""
    t = session.terms
    if is_peering_conflict(exc.cause):
        return Conflict(f"{exc.message}: either it is declared twice ({t.both_ways()}), or {t.rename}, or "
                        f"{t.replace_first}", exc.cause, path="name")
    if is_remote_conflict(exc.cause):
        return Conflict(f"{exc.message}; perhaps {t.rename}", exc.cause, path="remote_network")
    return exc


def settle(session: Session, id_: str, outs: dict[str, Any], p: Mapping[str, Any], waited: float,
           *, preview: bool = False, programmed: bool = False) -> tuple[str, ...]:
    """The warnings a create or update ends with: the peering is Failed, still
    not Bound after ``waited`` seconds (or, with ``programmed``, Bound but its
    dataplane still Programming), or pinned to a replaced remote. With
    ``error_on_not_bound`` the first two raise ``NotBound`` instead (the
    peering exists: ``id_`` and ``outs`` go with the error). A preview only
    warns."""
    key, t = _key(p), session.terms
    if p["phase"] == "Failed":
        verb = "would be" if preview else "is"
        msg = f"peering {key} {verb} Failed ({p['reason']}): {p['message']}"
    elif waited and p["phase"] != "Bound":
        msg = (f"peering {key} is still {p['phase']} ({p['reason']}: {p['message']}) after "
               f"{t.field('wait_for_bound')}={waited:g}s; it is kept and binds once the other side consents "
               f"({t.refresh} shows it)")
    elif waited and programmed and p.get("dataplane") == "Programming":
        return (f"peering {key} is Bound but its dataplane is still Programming after "
                f"{t.field('wait_for_bound')}={waited:g}s: not every OVN chassis has applied it yet",)
    elif p["reason"] == "RemoteReplaced":
        return (_replaced_note(session, p),)
    else:
        return ()
    if session.settings.error_on_not_bound and not preview:
        raise NotBound(f"{msg}; the peering is kept ({t.setting_words('error_on_not_bound')} is true)", id=id_,
                       outputs=outs, phase=p["phase"], reason=p["reason"])
    return (msg,)


def preview(session: Session, props: Mapping[str, Any]) -> Created:
    """What a create would answer, asked with a validate-only call that keeps
    nothing: the inputs and the phase, reason and message the service would
    give (the same answer whether the remote is missing, invisible or not
    consenting, as for a real create). Fields only a real create learns
    (uids, times) are left out, as is the phase when an input is not known
    yet, the local network does not exist yet (created in the same run), or
    the name is taken (by the old half, in a replacement); a remote taken by
    a half of another name (a rename) gives that half's status. Other refusals raise."""
    out = {k: props.get(k) for k in _ECHOED if known(props.get(k))}
    if not all(known(props.get(k)) for k in ("namespace", "network", "name", "remote_namespace",
                                              "remote_network", "remote_site", "remote_uid", "ttl", "description")):
        return Created("", out)

    try:
        p = session.call(f"creating peering {props.get('network')}/{props.get('name')}",
                         lambda c: c.create_peering(**_create_args(c, props)[1], validate_only=True))
    except ServiceError as exc:
        # A rename keeps the old half's status; a network created in the same run is not there yet; a
        # name taken may be the old half of a replacement (validate_replacement asked): tell nothing.
        if is_remote_conflict(exc.cause):
            return Created("", dict(out, **review.renamed(session, props, exc)))
        if isinstance(exc.cause, service_errors.NotFound) or is_peering_conflict(exc.cause):
            return Created("", out)
        raise
    out.update({k: p[k] for k in _PREVIEWED}, namespace=p["namespace"], remote_namespace=p["remote_namespace"],
               remote_site=p.get("remote_site") or "", ttl=p["ttl"])
    return Created("", out, settle(session, "", out, p, 0, preview=True))


def validate_replacement(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> None:
    """Asks the service whether the create half of a replacement would be
    accepted (validate-only), so that a replace never deletes the old peering
    when the new one would be refused; raises the refusal. What the deletion
    of the old half would resolve (its name, its remote, its quota slot) is
    not held against the new one."""
    if not known(news):
        return
    old = PeeringId.parse(id_)
    try:
        session.call(f"replacing peering {old.network}/{old.name}",
                     lambda c: c.create_peering(**_create_args(c, news)[1], validate_only=True))
    except ServiceError as exc:
        same_network = (news.get("network"), news.get("namespace") or old.namespace) == (old.network, old.namespace)
        if same_network and (is_peering_conflict(exc.cause) or is_remote_conflict(exc.cause)
                             or isinstance(exc.cause, service_errors.ResourceExhausted)):
            return
        if isinstance(exc.cause, service_errors.NotFound):
            return  # the local network is being replaced too: its own diff asks about it
        raise


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
    if p.get("remote_site"):
        inputs["remote_site"] = p["remote_site"]
    if props.get("pinned_remote_uid"):
        inputs["remote_uid"] = props["pinned_remote_uid"]
    # Settings of ours, not the service's: as they were declared, and absent when they were not (a
    # refresh that filled in `false` or `0` would show them as changes).
    for name in ("wait_for_bound", "wait_for_programmed"):
        if props.get(name) is not None:
            inputs[name] = props[name]
    return Read(id_, outputs(inputs, p), inputs)


def import_(session: Session, id_: str) -> Read:
    """Adopts an existing peering by id: a read with no previous state. A
    peering that does not exist is an error naming the id (``ProviderError``)."""
    found = read(session, id_, {})
    if found is None:
        raise ProviderError(f"importing peering {id_}: it does not exist; check the id "
                            f"({SCHEMA.id_format})", path="id")
    return found


def _update_args(olds: Mapping[str, Any], news: Mapping[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = dict(description=news.get("description") or "",
                                ttl=validate.ttl("ttl", news["ttl"]) if news.get("ttl") else None)
    pin = news.get("remote_uid") or None
    if pin != (olds.get("pinned_remote_uid") or None):
        args["remote_uid"] = pin or ""  # "" clears the pin
    return args


def update_half(c, pid: PeeringId, args: dict[str, Any], validate_only: bool = False) -> dict[str, Any]:
    """``Client.update_peering`` with ``args`` (description, ttl, maybe
    remote_uid); clearing the pin of a Bound peering is a no-op, not a refusal."""
    try:
        return c.update_peering(pid.namespace, pid.network, pid.name, **args, validate_only=validate_only)
    except service_errors.FailedPrecondition as exc:
        # Clearing the pin of a Bound peering: it keeps following its partner, nothing to do.
        if args.get("remote_uid") == "" and exc.reason == Reason.PEERING_BOUND:
            return c.update_peering(pid.namespace, pid.network, pid.name, description=args["description"],
                                    ttl=args["ttl"], validate_only=validate_only)
        raise


def update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Updated:
    """Changes description and ttl in place, and re-pins the remote when
    ``remote_uid`` changed (cleared: unpinned); with ``wait_for_bound``,
    waits for Bound. Ends like ``create`` (warnings or ``NotBound``)."""
    pid = PeeringId.parse(id_)
    wait, programmed = news.get("wait_for_bound") or 0, bool(news.get("wait_for_programmed"))

    def run(c) -> dict[str, Any]:
        return wait_for_bound(session, c, update_half(c, pid, _update_args(olds, news)), wait, programmed=programmed)
    p = session.call(f"updating peering {pid.network}/{pid.name}", run)
    outs = outputs(news, p)
    return Updated(outs, settle(session, id_, outs, p, wait, programmed=programmed))


def preview_update(session: Session, id_: str, olds: Mapping[str, Any], news: Mapping[str, Any]) -> Updated:
    """What an update would answer (validate-only): the new inputs with the
    phase, reason and message the service would give, e.g. Bound after a
    re-pin. Refusals raise as the update would."""
    pid = PeeringId.parse(id_)
    out = dict(olds)
    out.update({k: news.get(k) for k in _ECHOED if known(news.get(k))})
    if not known(news):
        return Updated(out)
    p = session.call(f"updating peering {pid.network}/{pid.name}",
                     lambda c: update_half(c, pid, _update_args(olds, news), validate_only=True))
    out.update(outputs(news, p))
    return Updated(out, settle(session, id_, out, p, 0, preview=True))


def delete(session: Session, id_: str, props: Mapping[str, Any]) -> None:
    """Withdraws this side's half; already gone is fine."""
    pid = PeeringId.parse(id_)
    try:
        session.call(f"deleting peering {id_}", lambda c: c.delete_peering(pid.namespace, pid.network, pid.name))
    except ServiceError as exc:
        if not isinstance(exc.cause, service_errors.NotFound):
            raise


__all__ = ["SCHEMA", "check", "create", "delete", "diff", "import_", "notes", "outputs", "preview",
           "preview_update", "read", "settle", "update", "validate_replacement", "wait_for_bound"]
