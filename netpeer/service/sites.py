"""Consent across sites: the links between this site and the others.

Each site keeps its own store; nothing is shared (RFD 119). A site tells
each other site its *side*: its halves that name networks of that site,
with what those halves' networks export, their slot on the link between the
two sites, and for each half whether this site is ready to bind it and the
conflicts it sees. The other site keeps what it was told (its *mirror*) and
decides its own halves from its data and the mirror
(``netpeer.core.consent``).

What crosses a link is what changed (``netpeer.core.sides``,
``netpeer.service.sitelog``): each site numbers the changes of what it tells
each other site, sends those the other has not acknowledged, and with them
the digest of its whole side, which the receiver compares with its mirror's.
So an exchange with nothing to say costs the same whatever the number of
pairs, a bind crosses as a few items, and a lost or garbled change is
noticed (the digests differ) and repaired by a full copy. A site that was
away longer than the other keeps removals for also gets a full copy.

Exchanges are symmetric (the call carries the caller's changes, the answer
the callee's), run after every commit that changed what a site tells
another, and every ``interval`` in any case. A failed exchange marks the
site unreachable: new pairs with it stay Pending (``RemoteSiteUnreachable``),
Bound pairs stay Bound. The transport (gRPC in ``netpeer.api.sites``) is
given; tests can join two services directly.

Longer than 400 lines: ``SiteLinks`` is the one place a link's state lives
(membership, reachability, what was sent and acknowledged, its thread), so
that a change of the region and an exchange never see it half made; what
is pure (the items, digests and deltas, and the outbox) is in
``netpeer.core.sides`` and ``netpeer.service.sitelog``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from datetime import datetime
from typing import Callable, Iterable, Mapping

from netpeer.core import consent, sides, validate
from netpeer.core.models import Network, NetworkKey, Peering, Phase, Quotas, utcnow
from netpeer.core.sides import Sync
from netpeer.errors import InvalidArgument, NetpeerError, PermissionDenied, ResourceExhausted, Unavailable
from netpeer.reasons import Reason
from netpeer.service import effects, quotas, sitelog
from netpeer.service.leader import Leadership, Solo
from netpeer.service.writes import WriteQueue
from netpeer.store.base import Store, Transaction

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SiteView:
    """One site's whole side, as told to another: ``networks`` (each with
    its slot on the link between the two, None if not attached) and
    ``halves``, from the teller's perspective. What ``sitelog.verify``
    checks the changes against."""

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
    bytes_sent: int = 0
    bytes_received: int = 0
    resyncs_sent: int = 0         # full copies sent (the other site asked, or was too far behind)
    resyncs_received: int = 0
    pending: int = 0              # changes the other site has not acknowledged
    diverged: bool = False        # a full copy did not match its digest: see the log
    told: int = 0                 # items this site tells the other
    mirrored: int = 0             # items this site holds of the other's side


def view_for(tx: Transaction, here: str, site: str) -> SiteView:
    """Site ``here``'s whole side as told to ``site``, computed from scratch."""
    halves = tx.halves_to_site(site)
    networks: dict[NetworkKey, tuple[Network, int | None]] = {}
    out = []
    for p in halves:
        if p.network_key not in networks:
            n = tx.get_network(p.network_key)
            if n is None:
                continue
            networks[p.network_key] = (n, tx.attachment(n.uid, site))
        out.append(dataclasses.replace(p, ready=consent.ready(tx, p, here)))
    return SiteView(here, tuple(networks.values()), tuple(out))


def whole_side(tx: Transaction, here: str, site: str) -> dict:
    """``view_for`` as items: what the link's outbox must hold."""
    view = view_for(tx, here, site)
    return sides.side_items(view.networks, view.halves)


#: How a site reaches another: (site, our message) -> its answer. Raises on failure.
Transport = Callable[[str, Sync], Sync]

#: After a full copy that still did not match, ask for another this much later (s).
DIVERGED_RETRY_S = 600.0


class SiteLinks:
    """This site's links to the other sites; implements ``consent.Sites``.

    ``sites``: the other sites and how many of this site's networks each
    link has room for. Exchanges run on one thread per link (``run``).

    What it works with, and nothing more of the service: ``store`` (reads),
    ``writes`` (every change it makes to the store is one write of the
    service's queue, so that it is programmed and told like any other),
    ``quotas`` (a network's attachments), ``leadership`` (whether other
    replicas share the store) and ``clock``."""

    def __init__(self, here: str, sites: Mapping[str, int], *, store: Store, writes: WriteQueue,
                 quotas: Quotas = Quotas(), leadership: Leadership = Solo(), transport: Transport | None = None,
                 interval: float = 5.0, clock: Callable[[], datetime] = utcnow, verify_interval: float = 3600.0):
        self.store = store
        self.writes = writes
        self.quotas = quotas
        self.leadership = leadership
        self.here = here
        self.capacity = dict(sites)
        self.transport = transport
        self.interval = interval
        self.clock = clock
        #: How often each link's outbox is checked against the whole side (s).
        self.verify_interval = verify_interval
        self._lock = threading.Lock()
        self._status = {s: LinkStatus(s, capacity=n) for s, n in sites.items()}
        #: (network uid, site) -> when (time.monotonic()) the sweep released its slot.
        self._released: dict[tuple[str, str], float] = {}
        self._wake = {s: threading.Event() for s in sites}
        self._threads: list[threading.Thread] = []
        self._acks: dict[str, tuple[str, int]] = {}      # freshest acknowledgement of our side, per site
        self._send_full: set[str] = set()                # sites that asked for a full copy
        self._want_full: set[str] = set()                # sites whose side our mirror does not match
        self._diverged: dict[str, float] = {}            # site -> monotonic time of a full copy that mismatched
        self._sent: dict[str, int] = {}                  # the head an answer to a site carried
        #: Set by ``run_links`` while this process runs the link threads: with
        #: replicas, the one that holds the sweeper lease (``stop`` ends them).
        self._running: threading.Event | None = None
        #: With replicas, whether each link answers as the store last said
        #: (the replica running the links records it), and when it was read.
        self._shared: tuple[float, dict[str, bool]] = (0.0, {})

    # ------------------------------------------------ consent.Sites
    @property
    def shared(self) -> bool:
        """Whether other replicas share this store (and may run the links)."""
        return not self.leadership.solo

    def reachable(self, site: str) -> bool:
        if self.shared and not self.running:
            return self._shared_reachability().get(site, False)
        with self._lock:
            status = self._status.get(site)
            return status is not None and status.reachable

    @property
    def running(self) -> bool:
        return self._running is not None and not self._running.is_set()

    def _shared_reachability(self) -> dict[str, bool]:
        """What the replica running the links last recorded, read from the
        store at most every half second."""
        read_at, known = self._shared
        if time.monotonic() - read_at > 0.5:
            with self.store.read() as tx:
                known = {link.site: link.reachable for link in tx.links()}
            self._shared = (time.monotonic(), known)
        return known

    def linked(self, site: str) -> bool:
        return site in self.capacity

    def check_linked(self, site: str) -> None:
        """Refuses a site this one has no link with, in one line that says why."""
        if site not in self.capacity:
            raise PermissionDenied(f"site: {site!r} is not linked to site {self.here} (no [sites.{site}] in its "
                                   "configuration): the link must be configured on both sides", field="site",
                                   value=site, reason=Reason.SITE_DENIED)

    def status(self) -> list[LinkStatus]:
        """Every link's status, with what the store says of its changes."""
        with self._lock:
            out = [self._status[s] for s in sorted(self._status)]
        if not out:
            return out
        with self.store.read() as tx:
            for i, s in enumerate(out):
                link = tx.get_link(s.site)
                if link is None:
                    continue
                stream, ack = self._acks.get(s.site, (link.peer_stream, link.peer_ack))
                pending = len(tx.outbox_since(s.site, ack if stream == link.stream else 0, 1_000_000))
                s = out[i] = dataclasses.replace(s, pending=pending, told=link.out.count,
                                                 mirrored=link.mirror.count, resyncs_received=link.resyncs_received)
                if self.shared and not self.running:   # the replica that runs the links knows better
                    out[i] = dataclasses.replace(s, reachable=link.reachable, last_ok=link.last_ok,
                                                 last_error=link.last_error)
        return out

    def _record(self, site: str, ok: bool, error: str = "", sent: int = 0, received: int = 0) -> bool:
        """Records an exchange's outcome; whether reachability flipped."""
        with self._lock:
            old = self._status.get(site)
            if old is None:   # no longer linked
                return False
            self._status[site] = new = dataclasses.replace(
                old, reachable=ok, last_ok=self.clock() if ok else old.last_ok, last_error="" if ok else error,
                exchanges=old.exchanges + 1, failures=old.failures + (0 if ok else 1),
                bytes_sent=old.bytes_sent + sent, bytes_received=old.bytes_received + received,
                diverged=site in self._diverged)
            flipped = old.reachable != ok
        if flipped and self.shared:
            self._publish(new)
        return flipped

    def _publish(self, status: LinkStatus) -> None:
        """Records a link's reachability in the store, for the other
        replicas' consent and status."""
        def op(tx: Transaction):
            link = sitelog.link_of(tx, status.site)
            tx.put_link(dataclasses.replace(link, reachable=status.reachable, last_ok=status.last_ok,
                                            last_error=status.last_error))
            return None, set()
        try:
            self.writes.run(op)
        except NetpeerError as exc:
            LOG.warning("could not record that site %s %s: %s", status.site,
                        "answers" if status.reachable else "does not answer", exc.message)

    def count(self, site: str, sent: int, received: int) -> None:
        """Bytes that crossed the link with ``site`` (told by the transport)."""
        with self._lock:
            old = self._status.get(site)
            if old is not None:
                self._status[site] = dataclasses.replace(old, bytes_sent=old.bytes_sent + sent,
                                                         bytes_received=old.bytes_received + received)

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
                              f"(docs/cross-site.md); nothing was changed; retry in {wait:.1f} s",
                              reason=Reason.UNAVAILABLE)
        quotas.check_attachment(tx, self.quotas, network, site)
        slot = tx.attach(network_uid, site)
        if slot >= self.capacity[site]:
            raise ResourceExhausted(f"remote.site: the link with site {site} has room for {self.capacity[site]} "
                                    f"networks of this site and all are attached; nothing was changed: ask the "
                                    f"operator for a larger sites.{site}.transit_ipv4 block",
                                    field="remote.site", value=site, reason=Reason.SITE_LINK_FULL)
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
        """This site's whole side as told to ``site``, computed from scratch."""
        return view_for(tx, self.here, site)

    def whole(self, tx: Transaction, site: str) -> dict:
        """``view_for`` as items (``sitelog.verify``'s reference)."""
        return whole_side(tx, self.here, site)

    def refresh(self, tx: Transaction) -> set[str]:
        """Before a write commits: what this site tells the others, for the
        networks the write changed. The sites told something new."""
        return sitelog.refresh(tx, self.here, self.capacity)

    def _message(self, tx: Transaction, site: str) -> Sync:
        return sitelog.message(tx, self.here, site, self._acks.get(site), full=site in self._send_full,
                               want_full=self._asks_full(site))

    def _asks_full(self, site: str) -> bool:
        if site not in self._want_full:
            return False
        since = self._diverged.get(site)
        return since is None or time.monotonic() - since > DIVERGED_RETRY_S

    # ------------------------------------------------ what we are told
    def _judge(self, site: str, matches: bool | None, full: bool, told: sides.Digest, held: sides.Digest) -> None:
        """What a comparison of our mirror with ``site``'s digest means: on a
        mismatch, ask for a full copy; if a full copy itself did not match,
        say so once and ask again only after ``DIVERGED_RETRY_S``."""
        if matches is True:
            self._want_full.discard(site)
            self._diverged.pop(site, None)
        elif matches is False:
            if full:
                if site not in self._diverged:
                    LOG.error("site %s: its full copy does not match the digest it sent (%s held, %s told); "
                              "consent across the link goes on with what was told, a full copy is asked for "
                              "again in %d s", site, held, told, DIVERGED_RETRY_S)
                self._diverged[site] = time.monotonic()
            elif site not in self._want_full:
                LOG.warning("site %s: what this site holds of its side (%s) does not match its digest (%s): "
                            "asking for a full copy", site, held, told)
            self._want_full.add(site)

    def _take(self, tx: Transaction, msg: Sync, flipped: bool) -> set[str]:
        """Takes in ``msg`` (from ``msg.site``); the networks to re-program."""
        site = msg.site
        done = sitelog.apply(tx, self.here, msg)
        self._acks[site] = (done.link.peer_stream, done.link.peer_ack)
        if msg.want_full:
            self._send_full.add(site)
        self._judge(site, done.matches, done.full, msg.delta.digest, done.link.mirror)
        keys = set(done.keys)
        if flipped:
            keys |= {p.key for p in tx.halves_to_site(site)}
        touched: set[str] = set()
        for remote in done.moved:
            for ours in tx.networks_towards(remote):
                p = tx.find_peering_to(ours, remote)
                if p is not None and p.phase == Phase.BOUND:
                    touched.add(p.network_uid)   # a Bound peer's prefixes or slot changed: new routes
        keys |= consent.affected_by(tx, done.moved)
        return touched | effects.resolve(tx, keys, self.clock(), self)

    def receive(self, msg: Sync) -> Sync:
        """An exchange another site started: take in what it told, answer
        what it has not seen of ours."""
        site = msg.site
        self.check_linked(site)
        flipped = self._record(site, True)
        with self.store.read() as tx:
            if not flipped and not msg.want_full and self._nothing_new(tx, msg):
                return self._answered(site, self._message(tx, site))

        def op(tx: Transaction):
            touched = self._take(tx, msg, flipped)
            changed = self.refresh(tx) - {site}
            if changed:
                self.poke(changed)
            return self._message(tx, site), touched
        return self._answered(site, self.writes.run(op))

    def _nothing_new(self, tx: Transaction, msg: Sync) -> bool:
        """Whether ``msg`` changes nothing in the store (then no write is
        made); its digest is compared all the same (anti-entropy)."""
        link = sitelog.link_of(tx, msg.site)
        if sitelog.news(link, msg):
            return False
        self._acks[msg.site] = (msg.ack_stream, msg.ack)
        self._judge(msg.site, sitelog.compare(link, msg.delta), False, msg.delta.digest, link.mirror)
        return True

    def _sent_full(self, site: str, msg: Sync) -> None:
        """A full copy went to ``site``: a resynchronisation unless it held
        nothing of this site yet (the first copy of a link)."""
        self._send_full.discard(site)
        stream, _ = self._acks.get(site, ("", 0))
        if stream:
            with self._lock:
                old = self._status[site]
                self._status[site] = dataclasses.replace(old, resyncs_sent=old.resyncs_sent + 1)

    def _answered(self, site: str, answer: Sync) -> Sync:
        if answer.delta.full:
            self._sent_full(site, answer)
        self._sent[site] = answer.delta.head
        return answer

    def exchange(self, site: str) -> bool:
        """One exchange with ``site`` started here; whether it succeeded."""
        if site not in self.capacity:
            return False
        with self.store.read() as tx:
            mine = self._message(tx, site)
        try:
            if self.transport is None:
                raise ConnectionError("no transport")
            theirs = self.transport(site, mine)
            if theirs.site != site:
                raise PermissionDenied(f"site {site}'s endpoint answered as site {theirs.site!r}",
                                       reason=Reason.SITE_DENIED)
        except Exception as exc:   # unreachable, refused, or a bad answer: all the same to consent
            message = exc.message if isinstance(exc, NetpeerError) else (str(exc) or type(exc).__name__)
            if self._record(site, False, message.splitlines()[0][:300]):
                LOG.warning("site %s does not answer: %s", site, message.splitlines()[0][:300])
                self._reresolve(site)
            return False
        if mine.delta.full:
            self._sent_full(site, mine)
        flipped = self._record(site, True)
        if flipped:
            LOG.info("site %s answers", site)
        with self.store.read() as tx:
            quiet = not flipped and not theirs.want_full and self._nothing_new(tx, theirs)
        if not quiet:
            self.writes.run(lambda tx: (None, self._take(tx, theirs, flipped)))
        if site in self._send_full or self._asks_full(site):
            self.poke([site])   # at once, not in an interval
        return True

    def _reresolve(self, site: str) -> None:
        """Our halves naming ``site`` after its reachability changed."""
        def op(tx: Transaction):
            keys = [p.key for p in tx.halves_to_site(site) if p.phase != Phase.BOUND]
            return None, effects.resolve(tx, keys, self.clock(), self)
        try:
            self.writes.run(op)
        except NetpeerError as exc:
            LOG.warning("could not mark peerings with site %s: %s", site, exc.message)

    def verify(self) -> int:
        """Checks what every link's outbox says against the whole side, and
        mends it (``sitelog.verify``); the items mended."""
        def op(tx: Transaction):
            mended = {site: sitelog.verify(tx, self.here, site, self.whole) for site in sorted(self.capacity)}
            return mended, set()
        mended = self.writes.run(op)
        for site, n in mended.items():
            if n:
                LOG.warning("site %s: %d item(s) of what this site tells it differed from its side computed "
                            "from scratch; mended", site, n)
                self.poke([site])
        return sum(mended.values())

    # ------------------------------------------------ the loops
    def poke(self, sites: Iterable[str]) -> None:
        """Exchange with these sites soon (after a commit that changed our side)."""
        for site in sites:
            event = self._wake.get(site)
            if event is not None:
                event.set()

    def start(self, stop: threading.Event) -> None:
        """``prepare``, then ``run_links`` (one process alone on its store)."""
        self.prepare()
        self.run_links(stop)

    def run_links(self, stop: threading.Event) -> None:
        """A thread per link until ``stop`` (with replicas: while this one
        leads). Links added meanwhile (``reconfigure``) get theirs."""
        self._running = stop
        for site in sorted(self._wake):
            self._start_link(site, stop)

    def stop_links(self) -> None:
        """Wakes the link threads so that they see their ``stop``, and waits for them."""
        self.poke(self.capacity)
        self.join()
        self._threads = [t for t in self._threads if t.is_alive()]

    def _start_link(self, site: str, stop: threading.Event) -> None:
        t = threading.Thread(target=self._run, args=(site, stop), name=f"site-{site}", daemon=True)
        t.start()
        self._threads.append(t)

    def prepare(self) -> None:
        """At start: retires what this store holds of sites no longer linked,
        and checks every link's outbox against its side (a store from before
        changes were told item by item gets its outbox here)."""
        def op(tx: Transaction):
            touched: set[str] = set()
            for site in sorted(set(tx.mirrored_sites()) | {link.site for link in tx.links()} | set(tx.peering_sites())):
                if site not in self.capacity:
                    touched |= self._retire(tx, site)
            for site in sorted(self.capacity):
                sitelog.verify(tx, self.here, site, self.whole)
            return None, touched
        try:
            self.writes.run(op)
        except NetpeerError as exc:
            LOG.warning("could not check the links at start: %s", exc.message)

    def _retire(self, tx: Transaction, site: str) -> set[str]:
        """Forgets a site no longer linked: what it told, what this site told
        it, and this site's attachments to its link; this site's halves
        naming it go Pending (``SiteRetired``). The networks to re-program."""
        halves = tx.halves_to_site(site)
        if site in tx.mirrored_sites() or tx.get_link(site) or halves or tx.attached_to(site):
            LOG.warning("site %s is no longer linked: forgetting what it told and withdrawing %d peering(s) "
                        "naming it", site, sum(1 for p in halves if p.phase == Phase.BOUND))
        tx.forget_site(site)
        touched = set(tx.attached_to(site))
        for uid in touched:
            tx.release_attachment(uid, site)
        return touched | effects.resolve(tx, [p.key for p in halves], self.clock(), self)

    def reconfigure(self, sites: Mapping[str, int]) -> tuple[list[str], list[str]]:
        """Links the sites of ``sites`` (name -> capacity) and only them,
        while running: a new site's link starts at once; a site no longer
        listed is retired (``_retire``) and its link stops. The sites
        added and removed."""
        added = sorted(set(sites) - set(self.capacity))
        removed = sorted(set(self.capacity) - set(sites))
        with self._lock:
            self.capacity = dict(sites)
            self._status = {s: dataclasses.replace(self._status.get(s, LinkStatus(s)), capacity=n)
                            for s, n in sites.items()}
            wake = self._wake
            self._wake = {s: wake.get(s) or threading.Event() for s in sites}
        for site in removed:
            wake[site].set()   # its thread sees it is no longer linked and ends
            for memo in (self._acks, self._sent, self._diverged):
                memo.pop(site, None)
            self._send_full.discard(site)
            self._want_full.discard(site)
        if removed:
            def op(tx: Transaction):
                touched: set[str] = set()
                for site in removed:
                    touched |= self._retire(tx, site)
                return None, touched
            self.writes.run(op)
        if added:
            def create(tx: Transaction):
                for site in added:
                    sitelog.verify(tx, self.here, site, self.whole)
                return None, set()
            self.writes.run(create)
            if self.running:
                for site in added:
                    self._start_link(site, self._running)
        return added, removed

    def join(self, timeout: float = 5.0) -> None:
        for t in self._threads:
            t.join(timeout)

    def _run(self, site: str, stop: threading.Event) -> None:
        """Exchanges with ``site`` at once, on every poke, and every
        ``interval``; after a failure, retries sooner (from 0.2 s, doubling).
        Checks the link's outbox against its side every ``verify_interval``."""
        wake = self._wake[site]
        backoff = 0.2
        verified = time.monotonic()
        while not stop.is_set() and site in self.capacity:
            wake.clear()
            try:
                ok = self.exchange(site)
                if time.monotonic() - verified > self.verify_interval:
                    verified = time.monotonic()
                    self.verify()
            except Exception as exc:   # a bug must not end the link
                LOG.error("exchange with site %s failed: %s", site, exc)
                ok = False
            backoff = 0.2 if ok else min(backoff * 2, self.interval)
            wake.wait(self.interval if ok else backoff)
            if stop.is_set() or site not in self.capacity:
                return
