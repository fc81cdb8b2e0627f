"""The request inbox (``netpeer.core.requests``): list, dismiss and accept
the requests naming a namespace's networks.

Only the target's side is here: a request is the requester's half seen
from the network it names, so nothing here changes that half, its answers
or its timing. Accepting is a consent like ``Service.create_peering``'s, in
the same write as the check that the request still stands: the same
validation, quotas and budgets, and both halves exist as always.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from netpeer.core import validate
from netpeer.core.models import Caller, Peering
from netpeer.core.requests import PeeringRequest, parse_id, request_id
from netpeer.errors import InvalidArgument, NotFound
from netpeer.reasons import Reason as Why
from netpeer.service import batch
from netpeer.store.base import Store, Transaction


@dataclass(frozen=True)
class Host:
    """What the inbox needs of the service, given explicitly (the service
    builds one per call, so a clock replaced on it is the one used)."""
    store: Store
    clock: Callable[[], datetime]
    #: Refuses a caller that may not act in a namespace.
    authorize: Callable[[Caller, str], None]
    #: A create's consent for a ``batch.PeeringRequest``: the write's operation.
    consent: Callable[[Caller, batch.PeeringRequest], Callable[[Transaction], Any]]
    #: Runs an operation as one write (``validate_only``, ``caller``).
    write: Callable[..., Any]


def decode_after(after: str) -> tuple[str, str, str, str, str] | None:
    """A page's last place (``encode_after``) as the store's order takes it."""
    if not after:
        return None
    parts = tuple(after.split("/"))
    if len(parts) == 4:   # a token of a netpeerd without requests from other sites
        parts = (parts[0], "", *parts[1:])
    if len(parts) != 5:
        raise InvalidArgument.for_field("page_token", after, "is not a page token from a previous call")
    return parts   # type: ignore[return-value]


def encode_after(r: PeeringRequest) -> str:
    """Where a page that ends with ``r`` ends (names hold no '/')."""
    return "/".join((r.half.remote_network, r.half.site, r.half.namespace, r.half.network, r.half.name))


def list_requests(service: Host, caller: Caller, namespace: str, network: str | None = None,
                  after: str = "", limit: int = 100) -> list[PeeringRequest]:
    """The requests naming networks of ``namespace`` (``network`` alone,
    when given) that were not dismissed, in the order of ``encode_after``.
    A name of the namespace counts whether or not a network has it now: the
    namespace is the caller's, so the list tells nothing the caller may not
    know, and it matches what Watch shows."""
    service.authorize(caller, namespace)
    if network is not None:
        validate.name("network", network)
    place = decode_after(after)
    with service.store.read() as tx:
        return tx.peering_requests(namespace, network, place, limit)


def _standing(tx: Transaction, namespace: str, network: str, request: str) -> Peering:
    """The requester's half of request ``request`` to ``namespace/network``.
    NOT_FOUND (REQUEST_NOT_FOUND) for an id that names no request to it,
    NOT_FOUND (REQUEST_WITHDRAWN) when its half is gone or was made again.
    Either answer is all the caller learns of the requester's halves."""
    key = parse_id(request)
    if key is None:
        raise NotFound(f"request: no peering request {request!r} to network {namespace}/{network}",
                       field="request", value=request, reason=Why.REQUEST_NOT_FOUND)
    half = tx.get_peering(key)
    if half is None or half.remote_site or (half.remote_namespace, half.remote_network) != (namespace, network) \
            or request_id(half) != request:
        raise NotFound(f"request: peering request {request!r} to network {namespace}/{network} was withdrawn "
                       "(its half was deleted, expired, or made again)", field="request", value=request,
                       reason=Why.REQUEST_WITHDRAWN)
    return half


def _check(service: Host, caller: Caller, namespace: str, network: str, request: str) -> None:
    service.authorize(caller, namespace)
    validate.name("network", network)
    if not isinstance(request, str) or not request:
        raise InvalidArgument.for_field("request", request, "is required")


def dismiss(service: Host, caller: Caller, namespace: str, network: str, request: str) -> None:
    """Hides request ``request`` from the lists and watches of the target's
    namespace (for good: a half made again is a new request). The requester
    sees no difference. Dismissing twice is no error."""
    _check(service, caller, namespace, network, request)

    def op(tx: Transaction):
        tx.dismiss_request(_standing(tx, namespace, network, request), service.clock())
        return None, set()

    service.write(op)


def accept(service: Host, caller: Caller, namespace: str, network: str, request: str, name: str,
           description: str = "", ttl: timedelta | str | None = None, validate_only: bool = False) -> Peering:
    """Consents to request ``request``: creates half ``name`` of
    ``namespace/network`` towards the requester's network, pinned to its uid,
    in one write with the check that the request still stands. What
    ``create_peering`` checks is checked and what it answers is answered (a
    Failed half when the prefixes now overlap)."""
    _check(service, caller, namespace, network, request)
    validate.name("peering", name, peering=True)

    def op(tx: Transaction):
        half = _standing(tx, namespace, network, request)
        consent = service.consent(caller, batch.PeeringRequest(
            namespace, network, name, half.network, half.namespace, half.network_uid, ttl, description,
            remote_site=half.site))
        return consent(tx)

    return service.write(op, validate_only, caller=caller)
