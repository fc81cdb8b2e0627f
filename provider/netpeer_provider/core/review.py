"""What a plan tells a reviewer besides the changes, for every face.

- ``predicted(ops, outputs, wait)``: the status fields a plan may show as
  known. They come from the service's validate-only answer (``preview``,
  ``preview_update``): exactly what a create or update would answer, no
  more. A phase the apply may still change by itself (Pending while
  ``wait_for_bound`` waits for the other side) is not predicted.
- ``withdrawals(olds, replacing=...)``: one warning per Bound half that a
  replace or a delete withdraws, naming the peer it disconnects. It is read
  from the resource's own state (the caller's own peering): it reveals
  nothing the caller could not read.
- ``renamed(session, props, exc)``: for a create refused because the
  network already has a half towards the same remote under another name (a
  rename: the old half goes first), the status of that half, which the new
  one would take over. The caller's own peering, read as it may read it.
- ``refusals(exc)``: a refusal of the service as ``Failure``s, one per
  field at fault (the service reports every invalid field of a request).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Mapping

from netpeer_provider.core.errors import ProviderError, ServiceError
from netpeer_provider.core.results import Failure
from netpeer_provider.core.session import Session, default_namespace
from netpeer_provider.core.values import known

#: The status fields of a peering that a validate-only answer gives.
STATUS = ("phase", "reason", "message")


def predicted(ops: ModuleType, outputs: Mapping[str, Any], wait: Any = 0, *, settled_only: bool = False) \
        -> dict[str, Any]:
    """The status fields of a preview's ``outputs`` that a plan may show as
    known (``{}`` when the preview could not tell, or for a network).

    ``settled_only``: only a phase that the other side's consent cannot
    change before the apply (Bound, Failed). OpenTofu holds a provider to
    every value its plan showed as known, again just before the apply: a
    Pending half whose other side consents meanwhile (the other tenant, or
    the other half in the same apply) would fail the apply that binds it."""
    if ops.SCHEMA.name != "NetworkPeering" or not all(known(outputs.get(k)) and outputs.get(k) for k in STATUS):
        return {}
    if settled_only and outputs["phase"] not in ("Bound", "Failed"):
        return {}
    # A wait ends Bound or Failed at once, else when the other side consents (or not): not predictable.
    if outputs["phase"] not in ("Bound", "Failed") and (not known(wait) or wait):
        return {}
    return {k: outputs[k] for k in STATUS}


def settled(ops: ModuleType, outputs: Mapping[str, Any], wait: Any = 0) -> tuple[dict[str, Any], tuple[str, ...]]:
    """What an OpenTofu plan shows of a preview: the status fields it may
    show as known (``predicted(settled_only=True)``), and the warnings that
    say a Pending it leaves unknown (``pending_note``)."""
    known_now = predicted(ops, outputs, wait, settled_only=True)
    pending = not known_now and predicted(ops, outputs, wait)
    return known_now, (pending_note(outputs),) if pending else ()


def pending_note(outputs: Mapping[str, Any]) -> str:
    """What a plan that leaves a Pending phase unknown (``settled_only``) says instead."""
    key = f"{outputs.get('namespace')}/{outputs.get('network')}/{outputs.get('name')}"
    return (f"peering {key} would be Pending ({outputs['reason']}): {outputs['message']}; its phase is known "
            "after apply, since the other side may consent before then")


def _remote(p: Mapping[str, Any]) -> str:
    site = p.get("remote_site")
    return f"{p.get('remote_namespace')}/{p.get('remote_network')}" + (f" at site {site}" if site else "")


def withdrawals(olds: Mapping[str, Any], *, replacing: bool) -> tuple[str, ...]:
    """Warnings for a replace (``replacing``) or a delete of a resource whose
    state ``olds`` holds Bound halves: a peering's own, or a network's
    inline ones, each naming the peer that will be disconnected."""
    if "phase" in olds:   # a peering's state
        halves = [olds]
        local = f"{olds.get('namespace')}/{olds.get('network')}"
    else:   # a network's: those it declares inline (the others are resources of their own)
        inline = {p.get("name") for p in olds.get("inline_peerings") or []}
        halves = [p for p in olds.get("peerings") or [] if p.get("name") in inline]
        local = f"{olds.get('namespace')}/{olds.get('name')}"
    verb = "replacing" if replacing else "deleting"
    until = " until the new peering binds" if replacing else ""
    return tuple(f"peering {local}/{p.get('name')} is Bound to {_remote(p)}: {verb} it withdraws this half, and "
                 f"{_remote(p)} is disconnected from {local}{until}"
                 for p in halves if p.get("phase") == "Bound")


def renamed(session: Session, props: Mapping[str, Any], exc: ServiceError) -> dict[str, Any]:
    """The status a renamed peering would have (see the module); ``{}`` when
    ``exc`` is not such a refusal or the old half is gone meanwhile."""
    old = exc.cause.related.get("peering")
    if old in (None, "", props.get("name")):
        return {}

    def run(c):
        return c.get_peering(props.get("namespace") or default_namespace(c), props["network"], old)
    try:
        p = session.call(f"reading peering {props.get('network')}/{old}", run)
    except ServiceError:
        return {}
    return {k: p[k] for k in STATUS}


def refusals(exc: ProviderError) -> list[Failure]:
    """A refusal as ``Failure``s: one per field the service names (every
    invalid field of the request), else one on the error's own path."""
    cause = getattr(exc, "cause", None)
    violations = getattr(cause, "violations", ()) if isinstance(exc, ServiceError) else ()
    if len(violations) > 1:
        where = exc.message[:-len(cause.line())] if exc.message.endswith(cause.line()) else ""
        return [Failure(v.field or "", where + v.line()) for v in violations]
    field = exc.path or (getattr(cause, "field", None) if cause is not None else None)
    return [Failure(field or "", exc.message)]


__all__ = ["STATUS", "pending_note", "predicted", "settled", "refusals", "renamed", "withdrawals"]
