"""What the service asks of a dataplane, in the core's own terms.

The core knows networks, peerings and consent. What a network and the
networks it is Bound to look like in a dataplane (OVN's tables, names and
match syntax) belongs to the dataplane's own package: ``netpeer.ovn`` maps a
``NetworkState`` to northbound rows; an in-memory dataplane
(``netpeer.service.memory``) keeps the states as they are, for fast tests.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Protocol

from netpeer.core.models import Network


@dataclasses.dataclass(frozen=True)
class RemotePeer:
    """A network of another site that a network here is Bound to, as that
    site told this one: what it exports (``network.subnets``), its site
    (``network.site``) and its slot on the link between the two sites."""

    network: Network
    attachment: int
    peering_name: str = ""


@dataclasses.dataclass(frozen=True)
class NetworkState:
    """One network as the dataplane should show it: the network and the
    networks it is Bound to (in a stable order)."""

    network: Network
    peers: tuple[Network, ...] = ()
    #: (peer uid, name of this network's peering towards it), for people and
    #: for rebuilding a lost store from the dataplane (``--adopt-ovn``).
    peering_names: tuple[tuple[str, str], ...] = ()
    #: (other site, slot): the links to other sites this network is attached
    #: to (it has a half naming a network there, Bound or not yet).
    attachments: tuple[tuple[str, int], ...] = ()
    #: The networks of other sites it is Bound to.
    remote_peers: tuple[RemotePeer, ...] = ()

    @property
    def uid(self) -> str:
        return self.network.uid

    def peering_name(self, peer_uid: str) -> str:
        return dict(self.peering_names).get(peer_uid, "")


@dataclasses.dataclass(frozen=True)
class Stamp:
    """Which store wrote the dataplane last, and how far it had got: the
    store's id and its generation (one more per write that changed the
    dataplane). Written in the same dataplane transaction as the rows, so
    the two can always be compared (``netpeer.service.epoch``)."""

    store_id: str
    generation: int


#: uid -> the state a network should have, or None: the network is gone and
#: everything the dataplane holds for it goes too.
Desired = Mapping[str, "NetworkState | None"]


@dataclasses.dataclass(frozen=True)
class SyncReport:
    """What a sync changed, in dataplane rows (or objects)."""

    created: int = 0
    updated: int = 0
    deleted: int = 0
    #: The configuration sequence number the change needs every chassis to
    #: reach (``programmed()``), when the sync asked for one.
    cfg: int | None = None
    #: Of ``created``: rows that had waited for something the dataplane does
    #: itself (a key across sites) and now could go in; not drift.
    released: int = 0
    #: (network uid, other site) of the links whose rows still wait for it
    #: (not written yet): that network's pairs with that site carry no
    #: traffic until those rows go in.
    waiting: frozenset[tuple[str, str]] = frozenset()

    @property
    def changed(self) -> int:
        return self.created + self.updated + self.deleted

    def waiting_sites(self, uid: str) -> set[str]:
        """The other sites whose links' rows of network ``uid`` still wait."""
        return {site for u, site in self.waiting if u == uid}

    def __add__(self, other: "SyncReport") -> "SyncReport":
        return SyncReport(self.created + other.created, self.updated + other.updated,
                          self.deleted + other.deleted, other.cfg if other.cfg is not None else self.cfg,
                          self.released + other.released, self.waiting | other.waiting)


#: A cross-site Bound pair's ``dataplane_cfg`` while rows of its network's
#: link to the other site wait for the dataplane (``SyncReport.waiting``):
#: above any sequence number a chassis acknowledges, so the pair stays
#: Programming until the rows go in and the sequence number of that write
#: replaces it.
WAITS_FOR_DATAPLANE = 2 ** 63 - 1


@dataclasses.dataclass(frozen=True)
class Gateway:
    """A gateway chassis of this site's transit ports (its HA chassis group)."""

    chassis: str
    priority: int
    #: "active" (it binds the site's transit ports now), "standby", or
    #: "unknown" (the SB is not configured or does not answer).
    state: str


class Dataplane(Protocol):
    """A dataplane the service programs. Every method raises
    ``netpeer.errors.Unavailable`` when the dataplane cannot be reached and
    ``FailedPrecondition`` when it refuses a change; nothing else escapes."""

    #: What it is, for people (``netpeer status``): "ovn", "memory".
    kind: str

    @property
    def connected(self) -> bool:
        """Whether the dataplane can be reached now."""

    def sync(self, desired: Desired, stamp: Stamp | None = None, track: bool = False) -> SyncReport:
        """One transaction that makes these networks look as desired (and
        records ``stamp``); other networks are left alone. Idempotent. With
        ``track``, the report's ``cfg`` says when the change reached every
        chassis: once ``programmed()`` is at least that."""

    def programmed(self) -> int:
        """The configuration sequence number every chassis has applied."""

    def configured(self) -> int:
        """The newest configuration sequence number asked of the chassis:
        every change the dataplane holds now is applied once
        ``programmed()`` reaches it."""

    def read_stamp(self) -> Stamp | None:
        """The stamp of the last sync, if any."""

    def count_owned(self) -> int:
        """How many rows (or objects) of ours the dataplane holds."""

    def drifted(self, desired: Desired) -> set[str]:
        """The uids of ``desired`` whose dataplane differs; changes nothing."""

    def waiting(self, desired: Desired) -> set[tuple[str, str]]:
        """(uid, other site) of the links of ``desired`` whose rows a sync
        would still hold back (``SyncReport.waiting``); changes nothing."""

    def take_changes(self) -> set[str] | None:
        """The uids of the networks whose dataplane changed since the last
        call (anyone's change), or None if only comparing every network can
        tell. The repair sweep checks only these between full passes."""

    def count_strays(self, keep: Iterable[str]) -> tuple[int, int]:
        """(rows of ours that belong to no network of ``keep``, all rows of
        ours): left by a crash, renamed by hand, or a lost store. Changes nothing."""

    def remove_strays(self, keep: Iterable[str]) -> SyncReport:
        """One transaction that removes the strays ``count_strays`` counts."""

    def gateways(self) -> tuple[Gateway, ...]:
        """This site's gateway chassis, highest priority first (none without
        sites); never raises: what cannot be read is "unknown" or left out."""

    def close(self) -> None:
        """Releases the connection."""
