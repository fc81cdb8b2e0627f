"""What one site tells another, as items, changes and digests.

A site's *side* towards another site is a set of items: each of its halves
that names a network of the other site (``ToldHalf``), and each network of
its own that such a half belongs to (``ToldNetwork``). Every item has a key
(``ItemKey``) and a canonical encoding, and so a hash; a set of items has a
*digest*: their count and the XOR of their hashes, which changes by one
XOR when one item comes, goes or changes, whatever the size of the set.

The sites exchange changes, not sides (``netpeer.service.sites``): a
``Delta`` carries the items that changed after a sequence number the other
site acknowledged, and the digest of the whole side after them. The
receiver compares that digest with its own mirror's: equal digests mean
equal sides (up to a 128-bit hash collision), so an exchange with nothing
to say costs the same at 10 or 10,000 pairs, and a lost or corrupted
change is noticed and repaired by a full copy (``Delta.full``).

Pure data; no store, no wire format.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import datetime, timezone
from typing import Iterable, NamedTuple, Union

from netpeer.core.models import Network, Peering, Phase


class ItemKey(NamedTuple):
    """An item's identity on a link: ``kind`` "n" (a network: ``network`` is
    its name, ``name`` is "") or "h" (a half of ``network``)."""

    kind: str
    namespace: str
    network: str
    name: str


@dataclasses.dataclass(frozen=True)
class ToldNetwork:
    """One of the teller's networks, as told: what it exports and its slot on
    the link between the two sites (None while not attached)."""

    namespace: str
    name: str
    uid: str
    prefixes: tuple[str, ...]
    slot: int | None = None

    @property
    def key(self) -> ItemKey:
        return ItemKey("n", self.namespace, self.name, "")

    def fields(self) -> list:
        return [self.uid, list(self.prefixes), self.slot]


@dataclasses.dataclass(frozen=True)
class ToldHalf:
    """One of the teller's halves naming a network of the other site, with
    what the teller sees: the conflicts on its side and whether it would
    bind (``ready``)."""

    namespace: str
    network: str
    name: str
    remote_namespace: str
    remote_network: str
    network_uid: str
    remote_uid: str                 # "" : not pinned
    create_time: datetime
    phase: Phase
    conflicts: tuple[str, ...] = ()
    ready: bool = False

    @property
    def key(self) -> ItemKey:
        return ItemKey("h", self.namespace, self.network, self.name)

    def fields(self) -> list:
        return [self.remote_namespace, self.remote_network, self.network_uid, self.remote_uid,
                _us(self.create_time), self.phase.value, list(self.conflicts), self.ready]


Item = Union[ToldNetwork, ToldHalf]


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000) if t.tzinfo else int(t.replace(tzinfo=timezone.utc).timestamp() * 1_000_000)


def encode(item: Item) -> str:
    """The canonical encoding of an item's told fields (its key apart)."""
    return json.dumps(item.fields(), separators=(",", ":"), ensure_ascii=True)


def decode(key: ItemKey, value: str) -> Item:
    """The item that ``encode`` gave ``value`` for (values come from this
    site's own store: they were encoded here)."""
    f = json.loads(value)
    if key.kind == "n":
        return ToldNetwork(key.namespace, key.network, f[0], tuple(f[1]), f[2])
    return ToldHalf(key.namespace, key.network, key.name, f[0], f[1], f[2], f[3],
                    datetime.fromtimestamp(f[4] / 1_000_000, tz=timezone.utc), Phase(f[5]), tuple(f[6]), bool(f[7]))


def item_hash(key: ItemKey, value: str) -> int:
    """A 128-bit hash of an item: its key and its encoding."""
    data = json.dumps(list(key), separators=(",", ":")).encode() + b"\0" + value.encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


@dataclasses.dataclass(frozen=True)
class Digest:
    """A set of items as a count and the XOR of their hashes."""

    count: int = 0
    xor: int = 0

    def plus(self, h: int) -> "Digest":
        return Digest(self.count + 1, self.xor ^ h)

    def minus(self, h: int) -> "Digest":
        return Digest(self.count - 1, self.xor ^ h)

    def hex(self) -> str:
        return f"{self.xor:032x}"

    @classmethod
    def of(cls, hashes: Iterable[int]) -> "Digest":
        d = cls()
        for h in hashes:
            d = d.plus(h)
        return d

    def __str__(self) -> str:
        return f"{self.count}/{self.hex()[:12]}"


@dataclasses.dataclass(frozen=True)
class Delta:
    """What a site tells another in one message: the items of its side that
    changed after ``since`` (``None``: the item went away), up to ``head``,
    its newest sequence number, and the digest of its whole side at
    ``head``. ``full``: every item (``since`` 0), replacing the receiver's
    mirror. ``stream`` names the teller's numbering: a new one (a reset or
    restored store) makes sequence numbers of the old one meaningless."""

    stream: str
    since: int
    head: int
    digest: Digest
    items: tuple[tuple[ItemKey, Item | None], ...] = ()
    full: bool = False


@dataclasses.dataclass(frozen=True)
class Sync:
    """One message on a link (both the call and its answer): the teller's
    delta for the receiver, and how far the teller's mirror of the
    receiver's side goes (``ack`` in the receiver's ``ack_stream``).
    ``want_full``: the teller's mirror did not match the receiver's digest;
    it asks for a full copy."""

    site: str
    to_site: str
    delta: Delta
    ack_stream: str = ""
    ack: int = 0
    want_full: bool = False


def told_network(n: Network, slot: int | None) -> ToldNetwork:
    """How a network of this site is told (everything it exports)."""
    return ToldNetwork(n.namespace, n.name, n.uid, tuple(str(p) for p in n.prefixes), slot)


def told_half(p: Peering) -> ToldHalf:
    """How a half of this site is told (``p.ready`` and ``p.conflicts`` as
    this site sees them)."""
    return ToldHalf(p.namespace, p.network, p.name, p.remote_namespace, p.remote_network, p.network_uid,
                    p.remote_uid or "", p.create_time, p.phase, tuple(p.conflicts), p.ready)


def side_items(networks: Iterable[tuple[Network, int | None]], halves: Iterable[Peering]) -> dict[ItemKey, Item]:
    """A whole side as items (the reference the changes are checked against)."""
    out: dict[ItemKey, Item] = {}
    for n, slot in networks:
        item = told_network(n, slot)
        out[item.key] = item
    for p in halves:
        item = told_half(p)
        out[item.key] = item
    return out


def digest_of(items: Iterable[Item]) -> Digest:
    return Digest.of(item_hash(i.key, encode(i)) for i in items)


@dataclasses.dataclass(frozen=True)
class LinkState:
    """What this site's store keeps of one link.

    Its own side towards the other site: the numbering (``stream``), the
    newest sequence number (``head``), up to which sequence number removals
    were forgotten (``horizon``: a site acknowledging less gets a full
    copy), its digest (``out``), and what the other site last acknowledged
    of it (``peer_ack`` in ``peer_stream``). Its mirror of the other side:
    the other site's numbering it follows (``in_stream``), how far
    (``in_seq``), and its digest (``mirror``)."""

    site: str
    stream: str
    head: int = 0
    horizon: int = 0
    out: Digest = Digest()
    peer_stream: str = ""
    peer_ack: int = 0
    in_stream: str = ""
    in_seq: int = 0
    mirror: Digest = Digest()
    resyncs_received: int = 0      # full copies taken in after a mismatch or a long absence
    #: Whether the last exchange with the other site succeeded, as the
    #: replica that runs the link last recorded it (every replica's consent
    #: reads it), when one last did, and why the last one failed.
    reachable: bool = False
    last_ok: datetime | None = None
    last_error: str = ""
