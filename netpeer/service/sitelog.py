"""What crosses a link between two sites, inside a store transaction.

``netpeer.service.sites`` runs the links; this module does what a link
needs of the store, each step a function of one transaction:

- ``refresh``: before a write commits, what this site tells each other site
  about the networks the write changed (``Transaction.networks_changed``)
  is computed again and compared with what it told (``site_outbox``); each
  item that differs gets the link's next sequence number, and the link's
  digest moves by its hash. So a write costs what it changed, and a link
  with thousands of pairs tells one new half as one item.
- ``message``: the changes the other site has not acknowledged, or
  everything when it must start over (its acknowledgement is of another
  numbering, older than the removals kept, or it asked).
- ``apply``: what the other site told, into the mirror, item by item, then
  consent for this site's halves that the changed items concern; the
  mirror's digest is compared with the teller's.
- ``verify``: the whole side computed from scratch (``SiteLinks.view_for``,
  what every exchange carried before) against what the outbox says, and
  mended; run at start and now and then, as the repair sweep does for OVN.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Callable, Iterable

from netpeer.core import consent, sides, validate
from netpeer.core.models import NetworkKey, Peering, PeeringKey, Phase
from netpeer.core.sides import Delta, Digest, Item, ItemKey, LinkState, Sync, ToldHalf, ToldNetwork
from netpeer.errors import InvalidArgument
from netpeer.store.base import Transaction

LOG = logging.getLogger(__name__)

#: Changes one message carries at most; more go as a full copy.
DELTA_MAX = 5_000
#: Items one message may carry at most (a full copy of a very large side).
MAX_ITEMS = 400_000
#: Removals kept per link until acknowledged; older ones are forgotten and a
#: site that acknowledged less than them gets a full copy.
TOMBSTONES_MAX = 50_000
#: Conflicts one told half may carry at most.
MAX_CONFLICTS = 20


def new_link(site: str) -> LinkState:
    return LinkState(site, uuid.uuid4().hex)


def link_of(tx: Transaction, site: str) -> LinkState:
    """The link's state, a fresh numbering if it has none yet."""
    return tx.get_link(site) or new_link(site)


# ---------------------------------------------------------------- refresh
def refresh(tx: Transaction, here: str, linked: Iterable[str]) -> set[str]:
    """Brings what this site tells up to date for the networks the
    transaction changed (and their Bound peers here: a half's readiness
    depends on the prefixes of its network's peers); the sites told
    something new."""
    changed = set(tx.networks_changed)
    tx.networks_changed.clear()
    linked = set(linked)
    if not changed or not linked:
        return set()
    scope = set(changed)
    for key in changed:
        scope.update(peer.key for peer in consent.bound_peers(tx, key) if not peer.site)
    links: dict[str, LinkState] = {}
    for key in sorted(scope):
        for site in sorted(tx.sites_of(key) & linked):
            _refresh_network(tx, here, key, site, links)
    for link in links.values():
        _keep_tombstones_bounded(tx, link)
        tx.put_link(links[link.site])
    return set(links)


def told_of(tx: Transaction, here: str, key: NetworkKey, site: str) -> dict[ItemKey, Item]:
    """What this site tells ``site`` of its network ``key`` now."""
    network = tx.get_network(key)
    halves = tx.halves_of_to_site(key, site) if network is not None else []
    if not halves:
        return {}
    out: dict[ItemKey, Item] = {}
    n = sides.told_network(network, tx.attachment(network.uid, site))
    out[n.key] = n
    for p in halves:
        h = sides.told_half(dataclasses.replace(p, ready=consent.ready(tx, p, here)))
        out[h.key] = h
    return out


def _refresh_network(tx: Transaction, here: str, key: NetworkKey, site: str, links: dict[str, LinkState]) -> None:
    want = {k: sides.encode(item) for k, item in told_of(tx, here, key, site).items()}
    have = tx.outbox_of(site, key)
    for item_key in sorted(want.keys() | have.keys()):
        new = want.get(item_key)
        old, old_hash, _ = have.get(item_key, (None, 0, 0))
        if new == old:
            continue
        link = links.get(site) or link_of(tx, site)
        out = link.out
        if old is not None:
            out = out.minus(old_hash)
        h = sides.item_hash(item_key, new) if new is not None else 0
        if new is not None:
            out = out.plus(h)
        tx.outbox_put(site, item_key, new, h, link.head + 1)
        links[site] = dataclasses.replace(link, head=link.head + 1, out=out)


def _keep_tombstones_bounded(tx: Transaction, link: LinkState) -> LinkState:
    """Forgets removals the other site acknowledged, and the oldest beyond
    ``TOMBSTONES_MAX`` (a site that has not seen them gets a full copy)."""
    if link.peer_stream == link.stream and link.peer_ack:
        tx.outbox_prune(link.site, link.peer_ack)
    stones = tx.outbox_tombstones(link.site)
    if len(stones) > TOMBSTONES_MAX:
        upto = stones[len(stones) - TOMBSTONES_MAX - 1]
        tx.outbox_prune(link.site, upto)
        link = dataclasses.replace(link, horizon=max(link.horizon, upto))
    return link


# ---------------------------------------------------------------- message
def message(tx: Transaction, here: str, site: str, ack: tuple[str, int] | None = None, full: bool = False,
            want_full: bool = False) -> Sync:
    """This site's next message to ``site``: what it has not acknowledged
    (``ack``: the freshest acknowledgement known, else the store's), or
    everything; and how far this site's mirror of ``site`` goes."""
    link = link_of(tx, site)
    stream, acked = ack if ack is not None else (link.peer_stream, link.peer_ack)
    delta = None
    if not full and stream == link.stream and link.horizon <= acked <= link.head:
        rows = tx.outbox_since(site, acked, DELTA_MAX + 1)
        if len(rows) <= DELTA_MAX:
            items = tuple((k, sides.decode(k, v) if v is not None else None) for k, v, _ in rows)
            delta = Delta(link.stream, acked, link.head, link.out, items)
    if delta is None:
        items = tuple((k, sides.decode(k, v)) for k, v in tx.outbox_live(site))
        delta = Delta(link.stream, 0, link.head, link.out, items, full=True)
    return Sync(here, site, delta, link.in_stream, link.in_seq, want_full)


# ---------------------------------------------------------------- apply
@dataclasses.dataclass
class Applied:
    """What applying a message did: the link as it stands, whether the
    mirror now matches the teller's digest (None: not comparable), whether
    it was a full copy, and this site's halves the change concerns."""

    link: LinkState
    matches: bool | None = None
    full: bool = False
    changed: bool = False
    keys: set[PeeringKey] = dataclasses.field(default_factory=set)
    moved: set[NetworkKey] = dataclasses.field(default_factory=set)   # Bound peers whose prefixes or slot moved


def news(link: LinkState, msg: Sync) -> bool:
    """Whether ``msg`` holds anything the store must take in."""
    d = msg.delta
    if d.full and not _holds(link, d):
        return True
    if d.stream == link.in_stream and d.since <= link.in_seq < d.head:
        return True
    if d.stream != link.in_stream and not d.full:
        return False
    return (msg.ack_stream, msg.ack) != (link.peer_stream, link.peer_ack)


def compare(link: LinkState, d: Delta) -> bool | None:
    """Whether the mirror matches the teller's digest; None when it holds
    another point of the teller's numbering (nothing to compare)."""
    if (link.in_stream, link.in_seq) != (d.stream, d.head):
        return None
    return link.mirror == d.digest


def _holds(link: LinkState, d: Delta) -> bool:
    """Whether the mirror already is the teller's side at ``d.head``."""
    return (d.stream, d.head, d.digest) == (link.in_stream, link.in_seq, link.mirror)


def apply(tx: Transaction, here: str, msg: Sync) -> Applied:
    """Takes in what ``msg.site`` told: its acknowledgement of this site's
    side, and its changes (or full copy) into the mirror."""
    site, d = msg.site, msg.delta
    link = link_of(tx, site)
    if msg.ack_stream == link.stream and msg.ack > link.head:
        # It holds more of this site than this store ever told: the store went
        # back (restored from a backup). A new numbering makes it start over.
        LOG.warning("site %s acknowledges change %d of this site, whose newest is %d: the store was restored; "
                    "telling it everything again", site, msg.ack, link.head)
        link = dataclasses.replace(link, stream=uuid.uuid4().hex, head=link.head + 1, horizon=link.head + 1)
    link = dataclasses.replace(link, peer_stream=msg.ack_stream, peer_ack=msg.ack)
    out = Applied(link)
    if d.full and not _holds(link, d):
        _apply_full(tx, site, here, d, out)
    elif not d.full and d.stream == link.in_stream and d.since <= link.in_seq < d.head:
        _apply_items(tx, site, here, d.items, out)
        out.link = dataclasses.replace(out.link, in_seq=d.head)
    out.matches = compare(out.link, d)
    out.link = _keep_tombstones_bounded(tx, out.link)
    tx.put_link(out.link)
    return out


def _apply_full(tx: Transaction, site: str, here: str, d: Delta, out: Applied) -> None:
    if len(d.items) > MAX_ITEMS:
        raise InvalidArgument.for_field("delta.items", len(d.items), f"more than {MAX_ITEMS} in one message")
    before = {p.key: p for p in tx.mirror_of(site)[1]}
    requests = tx.remote_requests_of(site)
    for h in before.values():
        out.keys |= _ours_naming(tx, h.remote_key, h.network_key)
    for n, _ in tx.mirror_of(site)[0]:
        out.keys |= _ours_towards(tx, n.key)
    tx.mirror_clear(site)
    # The first copy of a link is no resynchronisation: one after a mismatch or a long absence is.
    again = 1 if out.link.in_stream else 0
    out.link = dataclasses.replace(out.link, mirror=Digest(), in_stream=d.stream, in_seq=d.head,
                                   resyncs_received=out.link.resyncs_received + again)
    out.full = True
    _apply_items(tx, site, here, d.items, out, requests)
    for key in before.keys() - {PeeringKey(k.namespace, k.network, k.name, site) for k, _ in d.items}:
        tx.remote_request_moved(requests.get(key), key)   # gone with the full copy


def _apply_items(tx: Transaction, site: str, here: str, items, out: Applied,
                 requests: dict[PeeringKey, Peering] | None = None) -> None:
    """Takes ``items`` into the mirror. ``requests``: the requests the
    mirror's halves stood as before (a full copy cleared it first); else
    read from it, item by item."""
    mirror = out.link.mirror
    halves: list[ToldHalf] = []
    was: dict[PeeringKey, Peering | None] = {}
    for key, item in items:
        _check_key(key)
        # The hash of the item as told (the teller's digest is of that), the item as checked.
        h = sides.item_hash(key, sides.encode(item)) if item is not None else 0
        item = _checked(key, item, here) if item is not None else None
        old_hash = tx.mirror_hash(site, key)
        if key.kind == "h":
            pkey = PeeringKey(key.namespace, key.network, key.name, site)
            old = tx.get_peering(pkey)
            if requests is not None:
                was[pkey] = requests.get(pkey)
            elif pkey not in was:
                was[pkey] = old if tx.remote_request_standing(old) else None
            if old is not None:
                out.keys |= _ours_naming(tx, old.remote_key, old.network_key)
        else:
            old = tx.get_network(NetworkKey(key.namespace, key.network, site))
            if old is not None and (item is None or item.prefixes != old.subnets
                                    or item.slot != tx.remote_attachment(site, old.uid)):
                out.moved.add(old.key)
            out.keys |= _ours_towards(tx, NetworkKey(key.namespace, key.network, site))
        if old_hash is not None:
            mirror = mirror.minus(old_hash)
            tx.mirror_remove(site, key)
        if item is None:
            continue
        tx.mirror_put(site, item, h)
        mirror = mirror.plus(h)
        if isinstance(item, ToldHalf):
            halves.append(item)
            out.keys |= _ours_naming(tx, NetworkKey(item.remote_namespace, item.remote_network),
                                     NetworkKey(item.namespace, item.network, site))
    for h in halves:   # every half's network must be told: the teller's side is whole at every head
        n = tx.get_network(NetworkKey(h.namespace, h.network, site))
        if n is None or n.uid != h.network_uid:
            raise InvalidArgument.for_field("delta.halves.network", f"{h.namespace}/{h.network}",
                                            f"is not a network site {site} told")
    out.link = dataclasses.replace(out.link, mirror=mirror)
    out.changed = out.changed or bool(items)
    # The inbox's events: a request from that site came or went. A half that
    # was no request and is told not Pending stays none: no statement for it.
    told = {PeeringKey(k.namespace, k.network, k.name, site): i for k, i in items if k.kind == "h"}
    for pkey, then in was.items():
        item = told.get(pkey)
        if then is not None or item is None or item.phase == Phase.PENDING:
            tx.remote_request_moved(then, pkey)


def _ours_naming(tx: Transaction, ours: NetworkKey, theirs: NetworkKey) -> set[PeeringKey]:
    """This site's half of network ``ours`` naming ``theirs`` (of another site), if any."""
    if ours.site:
        return set()
    tx.networks_changed.add(ours)   # its readiness may have changed, even if its phase does not
    p = tx.find_peering_to(ours, theirs)
    return {p.key} if p is not None else set()


def _ours_towards(tx: Transaction, theirs: NetworkKey) -> set[PeeringKey]:
    out = set()
    for ours in tx.networks_towards(theirs):
        out |= _ours_naming(tx, ours, theirs)
    return out


def _check_key(key: ItemKey) -> None:
    if key.kind not in ("n", "h"):
        raise InvalidArgument.for_field("delta.items.kind", key.kind, "is not n (network) or h (half)")
    validate.name("delta.items.namespace", key.namespace)
    validate.name("delta.items.network", key.network)
    if key.kind == "h":
        validate.name("delta.items.name", key.name, peering=True)
    elif key.name:
        raise InvalidArgument.for_field("delta.items.name", key.name, "must be empty for a network")


def _checked(key: ItemKey, item: Item, here: str) -> Item:
    """A told item as the mirror keeps it, checked."""
    if item.key != key:
        raise InvalidArgument.for_field("delta.items", str(item.key), f"does not match its key {tuple(key)}")
    if isinstance(item, ToldNetwork):
        validate.uid("delta.networks.uid", item.uid)
        prefixes = tuple(validate.route_prefix("delta.networks.prefixes", p) for p in item.prefixes)
        if item.slot is not None and not 0 <= item.slot < 1 << 24:
            raise InvalidArgument.for_field("delta.networks.attachment", item.slot, "is out of range")
        return dataclasses.replace(item, prefixes=prefixes)
    validate.name("delta.halves.remote_namespace", item.remote_namespace)
    validate.name("delta.halves.remote_network", item.remote_network)
    validate.uid("delta.halves.network_uid", item.network_uid)
    if item.remote_uid:
        validate.uid("delta.halves.remote_uid", item.remote_uid)
    return dataclasses.replace(item, conflicts=tuple(c[:500] for c in item.conflicts[:MAX_CONFLICTS]))


# ---------------------------------------------------------------- verify
def verify(tx: Transaction, here: str, site: str, whole: Callable[[Transaction, str], dict[ItemKey, Item]]) -> int:
    """Compares what the outbox says this site tells ``site`` with the whole
    side computed from scratch (``whole``), and mends the outbox where they
    differ (each mended item is a change like any other); also recomputes
    the link's digest from the outbox. The number of items mended."""
    want = {k: sides.encode(v) for k, v in whole(tx, site).items()}
    have = dict(tx.outbox_live(site))
    link = link_of(tx, site)
    mended = 0
    for key in sorted(want.keys() | have.keys()):
        if want.get(key) == have.get(key):
            continue
        new = want.get(key)
        tx.outbox_put(site, key, new, sides.item_hash(key, new) if new is not None else 0, link.head + 1)
        link = dataclasses.replace(link, head=link.head + 1)
        mended += 1
    digest = Digest.of(sides.item_hash(k, v) for k, v in want.items())
    if mended or digest != link.out or tx.get_link(site) is None:
        tx.put_link(dataclasses.replace(link, out=digest))
    return mended
