"""Domain types. Frozen dataclasses; protobuf messages, Pulumi dicts and OVSDB
rows are converted to and from these at the edges."""

from __future__ import annotations

import dataclasses
import functools
import enum
from datetime import datetime, timedelta, timezone

import netaddr

DEFAULT_TTL = timedelta(days=7)


class Phase(str, enum.Enum):
    PENDING = "Pending"
    BOUND = "Bound"
    FAILED = "Failed"

    def __str__(self) -> str:  # so f-strings print "Bound", not "Phase.BOUND"
        return self.value


class Reason:
    """Machine-readable reasons carried next to a phase."""

    AWAITING_REMOTE = "AwaitingRemote"
    BOUND = "Bound"
    OVERLAPPING_PREFIXES = "OverlappingPrefixes"
    REMOTE_WITHDRAWN = "RemoteWithdrawn"
    # The remote network was deleted and re-created (a new uid) and the new
    # one consents, but this half is pinned to the old one: re-pin to bind.
    REMOTE_REPLACED = "RemoteReplaced"
    # The remote network is in another site whose netpeerd cannot be reached
    # now: nothing is known or said about the remote network; the half binds
    # by itself once the site answers (if the other half is there).
    REMOTE_SITE_UNREACHABLE = "RemoteSiteUnreachable"
    # The remote network's site is no longer linked to this one (retired from
    # the region, or its link removed from the configuration): the half can
    # never bind; it expires with its TTL, or its owner deletes it.
    SITE_RETIRED = "SiteRetired"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def qualified(site: str, rest: str) -> str:
    """``SITE:rest`` for a thing of another site, ``rest`` for one of this site."""
    return f"{site}:{rest}" if site else rest


@dataclasses.dataclass(frozen=True, order=True)
class NetworkKey:
    namespace: str
    name: str
    #: The site the network lives in; "" is this site (the netpeerd's own).
    site: str = ""

    def __str__(self) -> str:
        return qualified(self.site, f"{self.namespace}/{self.name}")


@dataclasses.dataclass(frozen=True, order=True)
class PeeringKey:
    namespace: str
    network: str
    name: str
    #: The site of the peering's network; "" is this site.
    site: str = ""

    @property
    def network_key(self) -> NetworkKey:
        return NetworkKey(self.namespace, self.network, self.site)

    def __str__(self) -> str:
        return qualified(self.site, f"{self.namespace}/{self.network}/{self.name}")


@dataclasses.dataclass(frozen=True)
class Route:
    """An extra prefix reachable inside a network, optionally behind a next hop
    inside one of its subnets. Exported to peers like a subnet."""

    prefix: str
    next_hop: str | None = None


@dataclasses.dataclass(frozen=True)
class Network:
    namespace: str
    name: str
    uid: str
    subnets: tuple[str, ...]
    routes: tuple[Route, ...] = ()
    description: str = ""
    create_time: datetime = dataclasses.field(default_factory=utcnow)
    update_time: datetime = dataclasses.field(default_factory=utcnow)
    revision: int = 1
    #: "" for a network of this site. A network of another site, represented
    #: locally (RFD 119: what that site told this one about it, because one
    #: of its halves names a network here), carries its site, and everything
    #: it exports as ``subnets``.
    site: str = ""

    @property
    def key(self) -> NetworkKey:
        return NetworkKey(self.namespace, self.name, self.site)

    @functools.cached_property
    def prefixes(self) -> tuple[netaddr.IPNetwork, ...]:
        """Everything this network exports to a peer: subnets, then routes
        (parsed once per object: the consent logic asks many times)."""
        return tuple(netaddr.IPNetwork(p) for p in self.subnets) + tuple(
            netaddr.IPNetwork(r.prefix) for r in self.routes
        )

    @property
    def etag(self) -> str:
        return f"{self.uid[:8]}-{self.revision}"


@dataclasses.dataclass(frozen=True)
class Peering:
    """One side's consent to peer ``network`` with a remote network."""

    namespace: str
    network: str
    name: str
    remote_namespace: str
    remote_network: str
    network_uid: str
    # Pinned by the user or learned on binding; from then on the peering
    # follows this identity, so a re-created namesake never inherits it.
    remote_uid: str | None = None
    ttl: timedelta = DEFAULT_TTL
    description: str = ""
    phase: Phase = Phase.PENDING
    reason: str = Reason.AWAITING_REMOTE
    message: str = ""
    last_phase_transition_time: datetime = dataclasses.field(default_factory=utcnow)
    create_time: datetime = dataclasses.field(default_factory=utcnow)
    revision: int = 1
    # The dataplane's own acknowledgement: the OVN configuration sequence
    # (nb_cfg) the last change of this pair's rows needs, and when every
    # chassis had applied it (None while it has not, or never changed).
    dataplane_cfg: int | None = None
    programmed_at: datetime | None = None
    #: The remote network's site; "" when it is in this site.
    remote_site: str = ""
    #: The site of this half's own network: "" for a half of this site; set
    #: on a half of another site as this site mirrors it.
    site: str = ""
    #: Why this half's own site holds that the pair may not be Bound (prefix
    #: overlaps it can see: between the two networks, or with a network Bound
    #: to its own side); empty when it sees none. Each site checks its side
    #: and tells the other; a cross-site pair is Bound only when neither
    #: side has any.
    conflicts: tuple[str, ...] = ()
    #: On a half of another site: whether its site sees the pair matched
    #: with no conflict on its side (it would bind). A cross-site pair binds
    #: on each side only once the other side is ready, so neither side binds
    #: before the other has seen both halves.
    ready: bool = False

    @property
    def dataplane(self) -> str:
        """``Programming`` while the last change of this pair's dataplane has
        not reached every chassis, else ``Programmed``."""
        return "Programming" if self.dataplane_cfg is not None and self.programmed_at is None else "Programmed"

    @property
    def key(self) -> PeeringKey:
        return PeeringKey(self.namespace, self.network, self.name, self.site)

    @property
    def network_key(self) -> NetworkKey:
        return NetworkKey(self.namespace, self.network, self.site)

    @property
    def remote_key(self) -> NetworkKey:
        return NetworkKey(self.remote_namespace, self.remote_network, self.remote_site)

    @property
    def cross_site(self) -> bool:
        return bool(self.remote_site or self.site)

    @property
    def expires_at(self) -> datetime | None:
        """Pending and Failed peerings expire ``ttl`` after their last
        transition (OEP-8); Bound ones never do."""
        if self.phase == Phase.BOUND:
            return None
        return self.last_phase_transition_time + self.ttl

    @property
    def etag(self) -> str:
        return f"{self.network_uid[:8]}-{self.revision}"

    def transition(self, phase: Phase, reason: str, message: str, now: datetime,
                   remote_uid: str | None = None, conflicts: tuple[str, ...] = ()) -> "Peering":
        """The peering after a (possible) phase change. The transition time is
        stamped only when the phase itself changes (IEP-9)."""
        changed = phase != self.phase
        new = dataclasses.replace(
            self,
            phase=phase,
            reason=reason,
            message=message,
            remote_uid=remote_uid if remote_uid is not None else self.remote_uid,
            conflicts=tuple(conflicts),
            last_phase_transition_time=now if changed else self.last_phase_transition_time,
            # A new phase: the dataplane state is that of the write it is in:
            # a pair entering Bound waits for its rows to reach the chassis
            # (0 until the write knows OVN's sequence number for them).
            dataplane_cfg=(0 if phase == Phase.BOUND else None) if changed else self.dataplane_cfg,
            programmed_at=None if changed else self.programmed_at,
        )
        if new != self:
            new = dataclasses.replace(new, revision=self.revision + 1)
        return new


@dataclasses.dataclass(frozen=True)
class Event:
    """One change seen by Watch: what a Get would have shown just after it."""

    revision: int
    time: datetime
    namespace: str
    network: str
    kind: str        # "network", "peering" or "peering_request" (netpeer.core.requests)
    name: str        # the network's or the peering's name, or the request's id
    type: str        # Created, Updated, PhaseChanged, Programmed, Deleted
    obj: "Network | Peering | PeeringRequest | None"   # the object after the change; None when deleted


class EventType:
    CREATED = "Created"
    UPDATED = "Updated"
    PHASE_CHANGED = "PhaseChanged"
    PROGRAMMED = "Programmed"
    DELETED = "Deleted"


@dataclasses.dataclass(frozen=True)
class Quotas:
    """Per-namespace limits (``[quotas]`` in the configuration). They bound
    what one tenant can make the service hold and work through: the store's
    rows, the expiry sweep, the size of an answer."""

    networks_per_namespace: int = 1000
    peerings_per_network: int = 500
    pending_peerings_per_namespace: int = 2000   # Pending or Failed halves, all networks of the namespace
    #: Slots (transit ports) one namespace's networks hold on each link to another site.
    site_attachments_per_namespace: int = 250


@dataclasses.dataclass(frozen=True)
class TokenLimits:
    """Per-token budgets (``[limits]`` in the configuration;
    ``netpeer.service.budget``): what answers that keep nothing may cost."""

    #: Seconds validate-only calls may run (holding the write lock most of it) per second, in the long run ...
    validate_only_lock_share: float = 0.1
    #: ... and at once (a token's bucket, full after burst / share seconds without such calls).
    validate_only_burst: timedelta = timedelta(seconds=2)
    #: Answers telling of a conflict with a network Bound to the other side of a pair, per minute (and at once).
    conflict_disclosures_per_minute: int = 5


@dataclasses.dataclass(frozen=True)
class WatchLimits:
    """How many Watch streams netpeerd holds (``[watch]`` in the
    configuration). Each one costs a coroutine and a little memory, and
    every change of its namespace an encoded message sent: the caps bound
    what one token, and everyone together, can make netpeerd hold."""

    streams_per_token: int = 100
    streams_per_admin_token: int = 1000
    streams_total: int = 10_000


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who made a request: the token's id, the namespaces it grants, admin."""

    token_id: str
    namespaces: frozenset[str]
    admin: bool = False

    def may_use(self, namespace: str) -> bool:
        return self.admin or namespace in self.namespaces


@dataclasses.dataclass(frozen=True)
class Token:
    token_id: str
    secret_hash: str
    namespaces: frozenset[str]
    admin: bool
    description: str = ""
    create_time: datetime = dataclasses.field(default_factory=utcnow)
    expires_at: datetime | None = None   # None: never

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now
