"""Peering requests: the inbox of a namespace (docs/api.md, "The request inbox").

A half of this site whose remote names a network of this site, and which
has no matching half (Pending, AwaitingRemote or RemoteWithdrawn), is a
*request* to the namespace of the network it names. Nothing is stored for
it: a request is a way of looking at the requester's half, so the
requester's calls do exactly what they did before (no enumeration oracle:
its half, its answers and their timing do not depend on whether the target
exists, has seen the request, or dismissed it).

A request's id names the requester's half and, through a digest, that
half's identity (its network's uid, its creation time) and its target: a
half deleted and made again is a new request, and an id is good for one
target network only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from datetime import datetime

from netpeer.core.models import NetworkKey, Peering, PeeringKey, Phase, Reason

#: The reasons of a Pending half of this site that has no matching half.
UNMATCHED = frozenset({Reason.AWAITING_REMOTE, Reason.REMOTE_WITHDRAWN})

_DIGEST = 12
# names are letters, digits and dashes (core.validate.name): dots separate them
_ID = re.compile(r"^([A-Za-z][A-Za-z0-9-]*)\.([A-Za-z][A-Za-z0-9-]*)\.([A-Za-z][A-Za-z0-9-]*)\.([0-9a-f]{%d})$" % _DIGEST)


def is_request(p: Peering | None) -> bool:
    """Whether half ``p`` is a request to the network it names."""
    return (p is not None and not p.site and not p.remote_site and p.phase == Phase.PENDING
            and p.reason in UNMATCHED)


def _micros(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def request_id(p: Peering) -> str:
    """The id of the request half ``p`` makes to its remote network."""
    digest = hashlib.sha256(f"{p.network_uid}/{p.name}/{_micros(p.create_time)}/{p.remote_namespace}/"
                            f"{p.remote_network}".encode()).hexdigest()[:_DIGEST]
    return f"{p.namespace}.{p.network}.{p.name}.{digest}"


def parse_id(value: str) -> PeeringKey | None:
    """The requester's half an id names, or None when it is no request id."""
    m = _ID.fullmatch(value or "")
    return PeeringKey(m.group(1), m.group(2), m.group(3)) if m else None


@dataclasses.dataclass(frozen=True)
class PeeringRequest:
    """A request to network ``target``: the requester's half, and what the
    requester's network would expose (its subnets, then its routes)."""

    half: Peering
    prefixes: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return request_id(self.half)

    @property
    def target(self) -> NetworkKey:
        return self.half.remote_key

    @property
    def requester(self) -> NetworkKey:
        return self.half.network_key

    @property
    def expires_at(self) -> datetime | None:
        return self.half.expires_at
