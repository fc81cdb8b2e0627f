"""Consent matching and phase transitions (OEP-8, IEP-9, LXD).

A peering is one side's consent. Two peerings *match* when each names the
other's network (namespace + name) and any pinned uid agrees. A matched pair
is Bound unless a prefix of one side overlaps a prefix of the other, or of
another Bound peer of either side; then both halves are Failed. Anything else
is Pending. ``resolve`` applies these rules to the peerings a change may have
affected, through a ``World`` (the store's transaction, or a dict in tests).
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, Protocol

import netaddr

from netpeer.core.models import Network, NetworkKey, Peering, PeeringKey, Phase, Reason


class World(Protocol):
    """What consent matching reads and writes. Implemented by the store's
    transaction; reads must see the writes made through ``put_peering``."""

    def get_network(self, key: NetworkKey) -> Network | None: ...

    def get_peering(self, key: PeeringKey) -> Peering | None: ...

    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        """The peering of network ``local`` whose remote is ``remote``."""

    def peerings_of(self, network: NetworkKey) -> list[Peering]:
        """The peerings declared on ``network``."""

    def bound_peerings_of(self, network: NetworkKey) -> list[Peering]:
        """The Bound peerings declared on ``network``."""

    def put_peering(self, peering: Peering) -> None: ...


def partner(world: World, p: Peering) -> tuple[Peering, Network, Network] | None:
    """The other half of ``p`` with both networks, if the two match."""
    # The other half first: without it nothing about the remote is read, so
    # a missing, an invisible and a non-consenting remote cost the same work
    # (no timing oracle on creation).
    q = world.find_peering_to(p.remote_key, p.network_key)
    if q is None:
        return None
    local = world.get_network(p.network_key)
    remote = world.get_network(p.remote_key)
    if local is None or remote is None or local.key == remote.key:
        return None
    if p.remote_uid not in (None, remote.uid) or q.remote_uid not in (None, local.uid):
        return None
    if p.network_uid != local.uid or q.network_uid != remote.uid:
        return None
    return q, local, remote


def replaced(world: World, p: Peering) -> Network | None:
    """The network now under ``p``'s remote name, when it is a new one (not
    the uid ``p`` is pinned to) whose own half names ``p``'s network: the
    only thing in the way of a pair is ``p``'s pin. Revealed only to a half
    whose remote consents to it, so nothing can be enumerated this way."""
    if not p.remote_uid:
        return None
    q = world.find_peering_to(p.remote_key, p.network_key)
    if q is None:
        return None
    local, remote = world.get_network(p.network_key), world.get_network(p.remote_key)
    if local is None or remote is None or remote.uid == p.remote_uid or q.remote_uid not in (None, local.uid):
        return None
    return remote


def _unmatched(p: Peering, world: World, now: datetime) -> Peering | None:
    """What an unmatched half becomes, or None when it stays as it is."""
    newcomer = replaced(world, p)
    if newcomer is not None:
        return p.transition(Phase.PENDING, Reason.REMOTE_REPLACED,
                            f"{p.remote_key} was deleted and re-created (uid now {newcomer.uid}); this peering is "
                            f"pinned to the old one ({p.remote_uid}): update its remote_uid to {newcomer.uid} "
                            "(or clear it) to peer with the new one", now)
    if p.phase == Phase.PENDING and p.reason != Reason.REMOTE_REPLACED:
        return None
    # The other half (or its network) went away: RemoteWithdrawn.
    return p.transition(Phase.PENDING, Reason.REMOTE_WITHDRAWN, f"{p.remote_key} no longer consents to this peering",
                        now)


def bound_peers(world: World, network: NetworkKey) -> list[Network]:
    """The networks ``network`` is Bound to, in a stable order."""
    out = []
    for p in world.bound_peerings_of(network):
        peer = world.get_network(p.remote_key)
        if peer is not None:
            out.append(peer)
    return sorted(out, key=lambda n: n.key)


def overlaps(a: Iterable[netaddr.IPNetwork], b: Iterable[netaddr.IPNetwork]) -> list[tuple[netaddr.IPNetwork, netaddr.IPNetwork]]:
    """Every pair (x, y), x from a and y from b, that share an address."""
    bs = list(b)
    return [(x, y) for x in a for y in bs if x.version == y.version and (x in y or y in x)]


def pair_conflicts(world: World, local: Network, remote: Network) -> list[str]:
    """Why ``local`` and ``remote`` may not be Bound, as sentences; empty if
    they may. Third networks are never named: both sides consented to share
    with each other, not with each other's peers."""
    problems = [f"{x} of {local.key} overlaps {y} of {remote.key}"
                for x, y in overlaps(local.prefixes, remote.prefixes)]
    for side, other in ((local, remote), (remote, local)):
        for third in bound_peers(world, side.key):
            if third.key == other.key:
                continue
            for x, _ in overlaps(other.prefixes, third.prefixes):
                problems.append(f"{x} of {other.key} overlaps a network already peered with {side.key}")
    return problems


def prefix_change_conflicts(world: World, network: Network) -> list[str]:
    """Why ``network`` (with its new prefixes) would break a Bound peering."""
    problems = []
    for peer in bound_peers(world, network.key):
        for x, y in overlaps(network.prefixes, peer.prefixes):
            problems.append(f"{x} overlaps {y} of Bound peer {peer.key}")
        for third in bound_peers(world, peer.key):
            if third.key == network.key:
                continue
            for x, _ in overlaps(network.prefixes, third.prefixes):
                problems.append(f"{x} overlaps a network already peered with {peer.key}")
    return problems


def resolve(world: World, keys: Iterable[PeeringKey], now: datetime) -> list[tuple[Peering, Peering]]:
    """Re-evaluates the given peerings (and their partners) and writes every
    change through ``world``. Returns (before, after) for each peering whose
    state changed.

    Halves whose other half went away are withdrawn first, so that a Bound
    half about to become Pending never blocks another pair. Then order
    matters when two candidate pairs conflict with each other: the pair
    completed first wins, so evaluation goes by the creation time of a pair's
    later half (whichever of its halves is among ``keys``), then by name.
    """
    candidates = [p for p in (world.get_peering(k) for k in set(keys)) if p is not None]

    def completed(p: Peering):
        match = partner(world, p)
        return (max(p.create_time, match[0].create_time) if match else p.create_time, p.key)

    candidates.sort(key=completed)
    changed: dict[PeeringKey, tuple[Peering, Peering]] = {}

    def put(new: Peering, old: Peering) -> None:
        if new != old:
            world.put_peering(new)
            first = changed.get(new.key, (old, new))[0]
            changed[new.key] = (first, new)

    for stale in candidates:
        p = world.get_peering(stale.key)
        if p is not None and p.phase != Phase.PENDING and partner(world, p) is None:
            put(_unmatched(p, world, now), p)

    for stale in candidates:
        p = world.get_peering(stale.key)  # may have changed as a partner
        if p is None:
            continue
        match = partner(world, p)
        if match is None:
            new = _unmatched(p, world, now)
            if new is not None:
                put(new, p)
            continue
        q, local, remote = match
        if p.phase == Phase.BOUND and q.phase == Phase.BOUND:
            continue  # Bound pairs stay Bound: prefix updates that would conflict are refused
        problems = pair_conflicts(world, local, remote)
        if problems:
            msg = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            put(p.transition(Phase.FAILED, Reason.OVERLAPPING_PREFIXES, msg, now), p)
            put(q.transition(Phase.FAILED, Reason.OVERLAPPING_PREFIXES, msg, now), q)
        else:
            put(p.transition(Phase.BOUND, Reason.BOUND, f"peered with {remote.key}", now,
                             remote_uid=remote.uid), p)
            put(q.transition(Phase.BOUND, Reason.BOUND, f"peered with {local.key}", now,
                             remote_uid=local.uid), q)
    return list(changed.values())


def affected_by(world: World, networks: Iterable[NetworkKey]) -> set[PeeringKey]:
    """The peerings whose phase may change when ``networks`` change: their own
    peerings and the other halves of those, for them and for their Bound
    peers (a pair that failed because of one of them may now bind).

    A half pointing at a network without a half pointing back can only be
    Pending, whatever that network does: it is not read. So a network's own
    writes cost the same whether none or thousands of one-sided halves point
    at it (tests/trust/test_exposure.py)."""
    keys: set[PeeringKey] = set()
    scope: set[NetworkKey] = set()
    for n in networks:
        scope.add(n)
        scope.update(peer.key for peer in bound_peers(world, n))  # one hop is enough
    for n in scope:
        for p in world.peerings_of(n):
            keys.add(p.key)
            other = world.find_peering_to(p.remote_key, n)
            if other is not None:
                keys.add(other.key)
    return keys
