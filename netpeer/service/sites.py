"""Consent across sites: what a site tells another, and the links that carry it.

Each site keeps its own store; nothing is shared. A site tells each other
site its *side* (``SiteView``): its halves that name networks of that site,
with what those halves' networks export, their slot on the link between the
two sites, and for each half whether this site is ready to bind it and the
conflicts it sees. The other site keeps what it was told (its *mirror*,
``Transaction.replace_mirror``), and decides its own halves from its data
and the mirror (``netpeer.core.consent``). So the exchange is symmetric,
idempotent and stateless: every exchange carries a whole side, in both
directions (the request carries the caller's, the answer the callee's), and
whichever site calls, both end up holding the other's latest side.

An exchange runs after every commit that changed what a site would tell
another (``Transaction.sites_changed``), and every ``interval`` in any case
(anti-entropy: a lost exchange, a restart on either side). A failed exchange
marks the site unreachable: new pairs with it stay Pending
(``RemoteSiteUnreachable``), Bound pairs stay Bound. The transport (gRPC in
``netpeer.api.sites``) is given; tests can join two services directly.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Mapping

from netpeer.core import consent, validate
from netpeer.core.models import Network, NetworkKey, Peering, Phase, utcnow
from netpeer.errors import InvalidArgument, NetpeerError, PermissionDenied, ResourceExhausted, Unavailable
from netpeer.service import effects, quotas
from netpeer.store.base import Transaction

LOG = logging.getLogger(__name__)

#: Halves one site may tell another at most in one exchange.
MAX_HALVES = 200_000


@dataclasses.dataclass(frozen=True)
class SiteView:
    """One site's side, as told to another: ``networks`` (each with its slot
    on the link between the two, None if not attached) and ``halves``, from
    the teller's perspective (its own networks have site "", the halves'
    remote networks are the receiver's)."""

    site: str
    networks: tuple[tuple[Network, int | None], ...] = ()
    halves: tuple[Peering, ...] = ()


@dataclasses.dataclass(frozen=True)
class LinkStatus:
    """What this site knows of its link with another."""

    site: str
    reachable: bool = False
    last_ok: datetime | None = None
    last_error: str = ""
    exchanges: int = 0
    failures: int = 0
    capacity: int = 0                                  # this site's networks the link has room for
    slots_used: int = 0                                # ... attached now (unused ones within their grace too)
    top_namespaces: tuple[tuple[str, int], ...] = ()   # the namespaces holding most slots, with how many


#: How a site reaches another: (site, our view) -> its view. Raises on failure.
Transport = Callable[[str, SiteView], SiteView]


class SiteLinks:
    """This site's links to the other sites; implements ``consent.Sites``.

    ``sites``: the other sites and how many of this site's networks each
    link has room for. Exchanges run on one thread per link (``run``)."""

    def __init__(self, service, here: str, sites: Mapping[str, int], transport: Transport | None = None,
                 interval: float = 5.0, clock: Callable[[], datetime] = utcnow):
        self.service = service
        self.here = here
        self.capacity = dict(sites)
        self.transport = transport
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()
        self._status = {s: LinkStatus(s, capacity=n) for s, n in sites.items()}
        #: (network uid, site) -> when (time.monotonic()) the sweep released its slot.
        self._released: dict[tuple[str, str], float] = {}
        self._wake = {s: threading.Event() for s in sites}
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------ consent.Sites
    def reachable(self, site: str) -> bool:
        with self._lock:
            status = self._status.get(site)
            return status is not None and status.reachable

    def status(self) -> list[LinkStatus]:
        with self._lock:
            return [self._status[s] for s in sorted(self._status)]

    def _record(self, site: str, ok: bool, error: str = "") -> bool:
        """Records an exchange's outcome; whether reachability flipped."""
        with self._lock:
            old = self._status[site]
            self._status[site] = dataclasses.replace(
                old, reachable=ok, last_ok=self.clock() if ok else old.last_ok, last_error="" if ok else error,
                exchanges=old.exchanges + 1, failures=old.failures + (0 if ok else 1))
            return old.reachable != ok

    # ------------------------------------------------ checks of the API
    def check_remote_site(self, field: str, site: str) -> str:
        """A peering's remote site: a known other site ("" stays "")."""
        if not site:
            return ""
        validate.site(field, site)
        if site == self.here:
            raise InvalidArgument.for_field(field, site, "is this site; name a network of this site without a site")
        if site not in self.capacity:
            known = ", ".join(sorted(self.capacity)) or "none: this netpeerd serves no sites"
            raise InvalidArgument.for_field(field, site, f"is not a site this netpeerd is linked to (known: {known})")
        return site

    #: A network's slot released by the sweep is not made again for this long (s): docs/cross-site.md.
    REATTACH_HOLD = 5.0

    def attach(self, tx: Transaction, network: Network, site: str) -> int:
        """Attaches a network to the link with ``site`` (its first half
        there, or the first after its last went: the same slot, in use again)."""
        network_uid = network.uid
        slot = tx.attachment(network_uid, site)
        if slot is not None:
            return tx.attach(network_uid, site)
        with self._lock:
            released = self._released.get((network_uid, site))
        wait = released + self.REATTACH_HOLD - time.monotonic() if released is not None else 0.0
        if wait > 0:
            raise Unavailable(f"remote.site: network {network.key}'s transit port towards site {site} was removed "
                              f"a moment ago and is not made again within {self.REATTACH_HOLD:g} s "
                              f"(docs/cross-site.md); nothing was changed; retry in {wait:.1f} s")
        quotas.check_attachment(tx, self.service.quotas, network, site)
        slot = tx.attach(network_uid, site)
        if slot >= self.capacity[site]:
            raise ResourceExhausted(f"remote.site: the link with site {site} has room for {self.capacity[site]} "
                                    f"networks of this site and all are attached; nothing was changed: ask the "
                                    f"operator for a larger sites.{site}.transit_ipv4 block",
                                    field="remote.site", value=site)
        return slot

    def released(self, pairs: Iterable[tuple[str, str]]) -> None:
        """The sweep released these (network uid, site) slots (``attach``
        holds them back for ``REATTACH_HOLD``)."""
        now = time.monotonic()
        with self._lock:
            self._released = {k: t for k, t in self._released.items() if now - t < self.REATTACH_HOLD}
            self._released.update(dict.fromkeys(pairs, now))

    # ------------------------------------------------ what we tell
    def view_for(self, tx: Transaction, site: str) -> SiteView:
        """This site's side as told to ``site``."""
        halves = tx.halves_to_site(site)
        networks: dict[NetworkKey, tuple[Network, int | None]] = {}
        out = []
        for p in halves:
            if p.network_key not in networks:
                n = tx.get_network(p.network_key)
                if n is None:
                    continue
                networks[p.network_key] = (n, tx.attachment(n.uid, site))
            out.append(dataclasses.replace(p, ready=consent.ready(tx, p, self.here)))
        return SiteView(self.here, tuple(networks.values()), tuple(out))

    # ------------------------------------------------ what we are told
    def _validated(self, view: SiteView) -> tuple[list[tuple[Network, int | None]], list[Peering]]:
        """``view`` as this site's mirror holds it (sited), checked."""
        site = view.site
        if len(view.halves) > MAX_HALVES:
            raise InvalidArgument.for_field("halves", len(view.halves), f"more than {MAX_HALVES} in one exchange")
        networks, known = [], {}
        for n, slot in view.networks:
            validate.name("networks.namespace", n.namespace)
            validate.name("networks.name", n.name)
            validate.uid("networks.uid", n.uid)
            prefixes = tuple(validate.route_prefix("networks.prefixes", p) for p in n.subnets)
            if slot is not None and not 0 <= slot < 1 << 24:
                raise InvalidArgument.for_field("networks.attachment", slot, "is out of range")
            sited = Network(n.namespace, n.name, n.uid, prefixes, site=site, create_time=n.create_time,
                            update_time=n.update_time)
            networks.append((sited, slot))
            known[(n.namespace, n.name)] = n.uid
        halves = []
        for h in view.halves:
            validate.name("halves.namespace", h.namespace)
            validate.name("halves.network", h.network)
            validate.name("halves.name", h.name, peering=True)
            validate.name("halves.remote_namespace", h.remote_namespace)
            validate.name("halves.remote_network", h.remote_network)
            if h.remote_site != self.here:
                raise InvalidArgument.for_field("halves.remote_site", h.remote_site, f"is not this site ({self.here})")
            if known.get((h.namespace, h.network)) != h.network_uid:
                raise InvalidArgument.for_field("halves.network", f"{h.namespace}/{h.network}",
                                                "is not among the networks of the exchange")
            if h.remote_uid:
                validate.uid("halves.remote_uid", h.remote_uid)
            halves.append(dataclasses.replace(h, site=site, remote_site="", conflicts=tuple(h.conflicts)[:20]))
        return networks, halves

    def _apply(self, tx: Transaction, view: SiteView, flipped: bool) -> set[str]:
        """Keeps what ``view.site`` told, and re-decides our halves naming its
        networks if anything changed; the networks to re-program."""
        site = view.site
        networks, halves = self._validated(view)
        old_networks, old_halves = tx.mirror_of(site)
        before = {n.key: (n.uid, n.subnets, slot) for n, slot in old_networks}
        after = {n.key: (n.uid, n.subnets, slot) for n, slot in networks}
        changed_keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        hkey = lambda h: (h.key, h.remote_namespace, h.remote_network, h.network_uid, h.remote_uid or None,  # noqa
                          h.create_time, h.phase, h.conflicts, h.ready)
        same_halves = sorted(map(hkey, old_halves)) == sorted(map(hkey, halves))
        if not changed_keys and same_halves and not flipped:
            return set()
        tx.replace_mirror(site, networks, halves)
        ours = tx.halves_to_site(site)
        keys = {p.key for p in ours}
        touched: set[str] = set()
        moved = {p.network_key for p in ours if p.phase == Phase.BOUND and p.remote_key in changed_keys}
        for p in ours:
            if p.network_key in moved:
                touched.add(p.network_uid)   # a Bound peer's prefixes or slot changed: new routes
        keys |= consent.affected_by(tx, moved)
        return touched | effects.resolve(tx, keys, self.clock(), self)

    def receive(self, view: SiteView) -> SiteView:
        """An exchange another site started: keep its side, answer ours (as it
        is after deciding our halves again)."""
        if view.site not in self.capacity:
            raise PermissionDenied(f"site {view.site!r} is not linked to site {self.here}",
                                   field="site", value=view.site)
        flipped = self._record(view.site, True)

        def op(tx: Transaction):
            touched = self._apply(tx, view, flipped)
            return self.view_for(tx, view.site), touched
        return self.service.writes.run(op)

    def exchange(self, site: str) -> bool:
        """One exchange with ``site`` started here; whether it succeeded."""
        with self.service.store.read() as tx:
            mine = self.view_for(tx, site)
        try:
            if self.transport is None:
                raise ConnectionError("no transport")
            theirs = self.transport(site, mine)
            if theirs.site != site:
                raise PermissionDenied(f"site {site}'s endpoint answered as site {theirs.site!r}")
        except Exception as exc:   # unreachable, refused, or a bad answer: all the same to consent
            message = exc.message if isinstance(exc, NetpeerError) else (str(exc) or type(exc).__name__)
            if self._record(site, False, message.splitlines()[0][:300]):
                LOG.warning("site %s does not answer: %s", site, message.splitlines()[0][:300])
                self._reresolve(site)
            return False
        flipped = self._record(site, True)
        if flipped:
            LOG.info("site %s answers", site)
        self.service.writes.run(lambda tx: (None, self._apply(tx, theirs, flipped)))
        return True

    def _reresolve(self, site: str) -> None:
        """Our halves naming ``site`` after its reachability changed."""
        def op(tx: Transaction):
            keys = [p.key for p in tx.halves_to_site(site) if p.phase != Phase.BOUND]
            return None, effects.resolve(tx, keys, self.clock(), self)
        try:
            self.service.writes.run(op)
        except NetpeerError as exc:
            LOG.warning("could not mark peerings with site %s: %s", site, exc.message)

    # ------------------------------------------------ the loops
    def poke(self, sites: Iterable[str]) -> None:
        """Exchange with these sites soon (after a commit that changed our side)."""
        for site in sites:
            event = self._wake.get(site)
            if event is not None:
                event.set()

    def start(self, stop: threading.Event) -> None:
        """Forgets what sites no longer linked told, then starts a thread per link."""
        def forget(tx: Transaction):
            touched: set[str] = set()
            for site in tx.mirrored_sites():
                if site not in self.capacity:
                    LOG.warning("site %s is no longer linked: forgetting what it told", site)
                    tx.forget_site(site)
                    keys = [p.key for p in tx.halves_to_site(site)]
                    touched |= effects.resolve(tx, keys, self.clock(), self)
            return None, touched
        try:
            self.service.writes.run(forget)
        except NetpeerError as exc:
            LOG.warning("could not forget unlinked sites: %s", exc.message)
        for site in sorted(self._wake):
            t = threading.Thread(target=self._run, args=(site, stop), name=f"site-{site}", daemon=True)
            t.start()
            self._threads.append(t)

    def join(self, timeout: float = 5.0) -> None:
        for t in self._threads:
            t.join(timeout)

    def _run(self, site: str, stop: threading.Event) -> None:
        """Exchanges with ``site`` at once, on every poke, and every
        ``interval``; after a failure, retries sooner (from 0.2 s, doubling)."""
        wake = self._wake[site]
        backoff = 0.2
        while not stop.is_set():
            wake.clear()
            try:
                ok = self.exchange(site)
            except Exception as exc:   # a bug must not end the link
                LOG.error("exchange with site %s failed: %s", site, exc)
                ok = False
            backoff = 0.2 if ok else min(backoff * 2, self.interval)
            wake.wait(self.interval if ok else backoff)
            if stop.is_set():
                return
