"""What a change of peerings means for consent and the dataplane; shared by
the operations and the reconciler (expiry)."""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from netpeer.core import consent
from netpeer.core.consent import ONE_SITE, Reveal, Sites
from netpeer.core.models import Peering, PeeringKey, Phase
from netpeer.service import slots
from netpeer.store.base import Transaction


def touched_by(tx: Transaction, changes: list[tuple[Peering | None, Peering | None]]) -> set[str]:
    """Networks whose dataplane changes when these peerings change: both
    sides of every pair that enters or leaves Bound (this site's side only,
    for a pair across sites), and a network's first or last half towards
    another site (its attachment to that site is created, or the network
    re-programmed without its last peer there)."""
    uids: set[str] = set()
    for old, new in changes:
        was = old is not None and old.phase == Phase.BOUND
        now = new is not None and new.phase == Phase.BOUND
        p = new or old
        if p.remote_site and (old is None or new is None):
            uids.add(p.network_uid)
        if was != now:
            uids.add(p.network_uid)
            if p.remote_site:
                continue
            if p.remote_uid:
                uids.add(p.remote_uid)
            else:
                remote = tx.get_network(p.remote_key)
                if remote is not None:
                    uids.add(remote.uid)
    return uids


def resolve(tx: Transaction, keys: Iterable[PeeringKey], now: datetime, sites: Sites = ONE_SITE,
            reveal: Reveal | None = None) -> set[str]:
    """Re-evaluates consent for these peerings; the networks to re-program.
    ``reveal``: see ``consent.resolve`` (the caller's disclosure budget)."""
    return touched_by(tx, consent.resolve(tx, keys, now, sites, reveal))


def remove_peering(tx: Transaction, old: Peering, now: datetime, sites: Sites = ONE_SITE) -> set[str]:
    """Deletes a peering and re-evaluates what it affected: its partner, and
    pairs that failed because of it (they may bind now).

    A network keeps its attachment to another site (its transit port) after
    its last half towards that site goes, for ``attachment_grace``
    (``netpeer.service.slots``): a transit port deleted and re-created within
    a second or two leaves OVN 23.03's ovn-controller on a gateway sending
    with the old port's tunnel key (Bound on both sides, no packets;
    docs/cross-site.md). Without Bound peers the port passes nothing: its
    drop policies stay."""
    tx.delete_peering(old.key)
    slots.note_unused(tx, old, now)
    touched = touched_by(tx, [(old, None)])
    partner = tx.find_peering_to(old.remote_key, old.network_key)
    keys = [partner.key] if partner and not partner.site else []
    for n in (old.network_key, old.remote_key):
        keys += [p.key for p in tx.failed_peerings_of(n)]
    return touched | resolve(tx, keys, now, sites)
