"""Consent matching and phase transitions (OEP-8, IEP-9, LXD, RFD 119).

A peering is one side's consent. Two peerings *match* when each names the
other's network (site + namespace + name) and any pinned uid agrees. A
matched pair is Bound unless a prefix of one side overlaps a prefix of the
other, or of another Bound peer of either side; then both halves are Failed.
Anything else is Pending. ``resolve`` applies these rules to the peerings a
change may have affected, through a ``World`` (the store's transaction, or a
dict in tests).

Across sites each site decides its own half, from its own data and what the
other site told it (its mirror of the other site's halves that name networks
here, with those networks' prefixes): it checks the overlaps it can see (the
two networks, and the networks Bound to its own side) and tells the other
site what it found (``Peering.conflicts``). A cross-site pair is Bound when
both halves match and neither site found a conflict; a new pair binds only
while the other site answers (``Sites.reachable``), so the two sides never
disagree for longer than one exchange between them.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Callable, Iterable, Protocol

import netaddr

from netpeer.core.models import Network, NetworkKey, Peering, PeeringKey, Phase, Reason, qualified


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


class Sites(Protocol):
    """What consent needs to know about the sites: this one's name (to name
    its networks to another site's tenants) and which others answer now."""

    here: str

    def reachable(self, site: str) -> bool:
        """Whether the last exchange with ``site``'s netpeerd succeeded."""

    def linked(self, site: str) -> bool:
        """Whether this site has a link with ``site`` at all."""


@dataclasses.dataclass(frozen=True)
class OneSite:
    """A deployment without sites (or a test of one site)."""

    here: str = ""

    def reachable(self, site: str) -> bool:
        return False

    def linked(self, site: str) -> bool:
        return False


ONE_SITE = OneSite()


def _label(network: Network, here: str, cross: bool) -> str:
    """How a network is named in a message: with its site when the pair
    crosses sites (the message is read in both)."""
    if cross and not network.site:
        return qualified(here, str(network.key))
    return str(network.key)


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


def _unreachable(p: Peering, now: datetime) -> Peering:
    """Pending because the remote site does not answer: says nothing of the
    remote network (it may not exist)."""
    return p.transition(Phase.PENDING, Reason.REMOTE_SITE_UNREACHABLE,
                        f"site {p.remote_site} does not answer; this peering binds by itself once it does, "
                        f"if {p.remote_key} consents", now)


def _retired(p: Peering, now: datetime) -> Peering:
    return p.transition(Phase.PENDING, Reason.SITE_RETIRED,
                        f"site {p.remote_site} is no longer linked to this site (retired from the region, or its "
                        "link removed): this peering cannot bind; delete it, or it expires with its ttl", now)


def _unmatched(p: Peering, world: World, now: datetime, sites: Sites) -> Peering | None:
    """What an unmatched half becomes, or None when it stays as it is."""
    if p.remote_site and not sites.linked(p.remote_site):
        return None if p.reason == Reason.SITE_RETIRED else _retired(p, now)
    newcomer = replaced(world, p)
    if newcomer is not None:
        return p.transition(Phase.PENDING, Reason.REMOTE_REPLACED,
                            f"{p.remote_key} was deleted and re-created (uid now {newcomer.uid}); this peering is "
                            f"pinned to the old one ({p.remote_uid}): update its remote_uid to {newcomer.uid} "
                            "(or clear it) to peer with the new one", now)
    if p.remote_site and p.phase != Phase.BOUND and p.reason != Reason.REMOTE_WITHDRAWN \
            and not sites.reachable(p.remote_site):
        return _unreachable(p, now)   # a known withdrawal stays RemoteWithdrawn: a lost exchange changes nothing
    if p.phase == Phase.PENDING and p.reason == Reason.REMOTE_SITE_UNREACHABLE:
        return p.transition(Phase.PENDING, Reason.AWAITING_REMOTE, f"waiting for {p.remote_key} to consent", now)
    if p.phase == Phase.PENDING and p.reason != Reason.REMOTE_REPLACED:
        return None
    # The other half (or its network) went away: RemoteWithdrawn.
    return p.transition(Phase.PENDING, Reason.REMOTE_WITHDRAWN, f"{p.remote_key} no longer consents to this peering",
                        now)


def bound_peers(world: World, network: NetworkKey) -> list[Network]:
    """The networks ``network`` is Bound to, in a stable order (none for a
    network of another site: that site checks its own side)."""
    if network.site:
        return []
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


#: Told whenever an answer needed a pair's check against third networks
#: (those Bound to either side), with whether it found a conflict; raises to
#: refuse the answer (``netpeer.service.budget.Disclosure``). What it is
#: told never depends on who asks: the caller is bound in by the service.
Reveal = Callable[[bool], None]


def direct_conflicts(local: Network, remote: Network, here: str = "") -> list[str]:
    """The overlaps between the two networks of a pair, as sentences."""
    cross = bool(local.site or remote.site)
    a, b = _label(local, here, cross), _label(remote, here, cross)
    return [f"{x} of {a} overlaps {y} of {b}" for x, y in overlaps(local.prefixes, remote.prefixes)]


def third_conflicts(world: World, local: Network, remote: Network, here: str = "") -> list[str]:
    """The overlaps of each side of a pair with the networks Bound to the
    other side (third networks), as sentences. A third network is never
    named, nor its namespace or prefix: each sentence names a prefix of one
    side and the side whose peer it overlaps (docs/design.md, "Consent
    rules"). For a network of another site, only what this site can see:
    the other site checks the rest."""
    cross = bool(local.site or remote.site)
    name = {n.key: _label(n, here, cross) for n in (local, remote)}
    problems = []
    for side, other in ((local, remote), (remote, local)):
        for third in bound_peers(world, side.key):
            if third.key == other.key:
                continue
            for x, _ in overlaps(other.prefixes, third.prefixes):
                problems.append(f"{x} of {name[other.key]} overlaps a network already peered with {name[side.key]}")
    return problems


def pair_conflicts(world: World, local: Network, remote: Network, here: str = "") -> list[str]:
    """Why ``local`` and ``remote`` may not be Bound, as sentences; empty if
    they may. A pair whose two networks overlap says only that: what the
    networks Bound to either side overlap is told only to a pair that is
    otherwise ready (``third_conflicts``)."""
    return direct_conflicts(local, remote, here) or third_conflicts(world, local, remote, here)


def prefix_change_conflicts(world: World, network: Network,
                            reveal: Reveal | None = None) -> list[str]:
    """Why ``network`` (with its new prefixes) would break a Bound peering.
    A direct overlap with a Bound peer is all that is said when there is
    one; otherwise the networks Bound to those peers are checked, and
    ``reveal`` told (it may refuse). For a peer in another site only the
    direct overlap can be seen here; if the new prefixes overlap a network
    Bound to it there, that site finds it and the pair fails."""
    peers = bound_peers(world, network.key)
    direct = [f"{x} overlaps {y} of Bound peer {peer.key}"
              for peer in peers for x, y in overlaps(network.prefixes, peer.prefixes)]
    if direct or not peers:
        return direct
    problems = []
    for peer in peers:
        for third in bound_peers(world, peer.key):
            if third.key == network.key:
                continue
            for x, _ in overlaps(network.prefixes, third.prefixes):
                problems.append(f"{x} overlaps a network already peered with {peer.key}")
    if reveal is not None:
        reveal(bool(problems))
    return problems


def _judge(p: Peering, q: Peering, local: Network, remote: Network, world: World, here: str,
           told: tuple[str, ...], reveal: Reveal | None) -> tuple[list[str], list[str]]:
    """(the problems of a matched pair, those this site found): the direct
    overlaps alone when there are any; else the third networks' conflicts,
    this site's and ``told`` by the other site (across sites), after
    ``reveal`` was told whether the answer shows one it did not show before
    (it may refuse)."""
    direct = direct_conflicts(local, remote, here)
    if direct:
        return direct, direct
    mine = third_conflicts(world, local, remote, here)
    problems = mine + [c for c in told if c not in mine]
    if reveal is not None:
        message = _failure(problems)
        reveal(bool(problems) and any(h.phase != Phase.FAILED or h.message != message for h in (p, q)
                                      if not h.site))
    return problems, mine


def _failure(problems: list[str]) -> str:
    return "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")


def _cross_site(p: Peering, q: Peering, local: Network, remote: Network, world: World, now: datetime,
                sites: Sites, reveal: Reveal | None = None) -> Peering:
    """Our half ``p`` of a matched cross-site pair (``q`` is the other site's,
    as it last told us). Failed when either side sees a conflict; else Bound
    once the other side is ready too (``q.ready``: it has seen both halves).
    A pair not Bound yet binds only while the other site answers, so the two
    sides bind in the same exchange or not at all. Until then the answer is
    the one a missing remote gets: nothing is revealed before binding. A
    direct overlap is all either site tells when there is one (the third
    networks' conflicts only to a pair otherwise ready)."""
    problems, mine = _judge(p, q, local, remote, world, sites.here, q.conflicts, reveal)
    if problems:
        return p.transition(Phase.FAILED, Reason.OVERLAPPING_PREFIXES, _failure(problems), now,
                            conflicts=tuple(mine))
    if p.phase == Phase.BOUND or (q.ready and sites.reachable(q.site)):
        return p.transition(Phase.BOUND, Reason.BOUND, f"peered with {remote.key}", now, remote_uid=remote.uid)
    if not sites.reachable(q.site):
        return _unreachable(p, now)
    return p.transition(Phase.PENDING, Reason.AWAITING_REMOTE, f"waiting for {p.remote_key} to consent", now)


def ready(world: World, p: Peering, here: str = "") -> bool:
    """Whether this site would bind our cross-site half ``p`` as far as its
    own side goes: Bound already, or matched with no conflict here."""
    if p.phase == Phase.BOUND:
        return True
    if p.phase != Phase.PENDING or p.conflicts:
        return False
    match = partner(world, p)
    return match is not None and not pair_conflicts(world, match[1], match[2], here)


def resolve(world: World, keys: Iterable[PeeringKey], now: datetime, sites: Sites = ONE_SITE,
            reveal: Reveal | None = None) -> list[tuple[Peering, Peering]]:
    """Re-evaluates the given peerings (and their partners) and writes every
    change through ``world``. Returns (before, after) for each peering whose
    state changed. Only this site's halves are written; another site's
    halves (as mirrored here) are read. ``reveal`` is told of every matched
    pair evaluated against the networks Bound to its sides (``_judge``).

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
    judged: set[frozenset[PeeringKey]] = set()

    def told(p: Peering, q: Peering) -> Reveal | None:
        """``reveal`` for the pair of p and q: asked the first time the pair
        is judged here (a pair is judged again from its other half), and
        again only for what that first time did not tell."""
        if reveal is None:
            return None
        pair = frozenset((p.key, q.key))
        first = pair not in judged
        judged.add(pair)
        return lambda found: reveal(found) if first or found else None

    def put(new: Peering, old: Peering) -> None:
        if new != old:
            world.put_peering(new)
            first = changed.get(new.key, (old, new))[0]
            changed[new.key] = (first, new)

    for stale in candidates:
        p = world.get_peering(stale.key)
        if p is not None and not p.site and p.phase != Phase.PENDING and partner(world, p) is None:
            put(_unmatched(p, world, now, sites), p)

    for stale in candidates:
        p = world.get_peering(stale.key)  # may have changed as a partner
        if p is None or p.site:
            continue
        match = partner(world, p)
        if match is None:
            new = _unmatched(p, world, now, sites)
            if new is not None:
                put(new, p)
            continue
        q, local, remote = match
        if q.site:
            put(_cross_site(p, q, local, remote, world, now, sites, told(p, q)), p)
            continue
        if p.phase == Phase.BOUND and q.phase == Phase.BOUND:
            continue  # Bound pairs stay Bound: prefix updates that would conflict are refused
        problems, _ = _judge(p, q, local, remote, world, "", (), told(p, q))
        if problems:
            msg = _failure(problems)
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
