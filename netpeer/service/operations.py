"""netpeerd's operations: validate, authorize, change the store, resolve
consent, and program the dataplane, as one write (``WriteQueue``).

``Service`` is the facade the API calls: the operations on networks and
peerings live here; credentials in ``tokens``, the write queue (group
commit) in ``writes``, expiry and repair in ``reconciler``. It is one
facade over all the operations a caller can make, which is why it is longer
than 400 lines; what several operations share lives in the modules it uses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import uuid
from datetime import datetime
from typing import Callable, Iterable, Iterator, Sequence

from netpeer.core import consent, validate
from netpeer.core.dataplane import Dataplane
from netpeer.core.requests import PeeringRequest
from netpeer.core.models import (Caller, Event, Network, NetworkKey, Peering, PeeringKey, Phase, Reason,
                                 DEFAULT_TTL, utcnow)
from netpeer.errors import _clip  # the caller's etag is echoed clipped, like every other value
from netpeer.errors import (AlreadyExists, Aborted, FailedPrecondition, InvalidArgument, NotFound, OutOfRange,
                            PermissionDenied)
from netpeer.reasons import Reason as Why
from netpeer.service import batch, effects, inbox, quotas, slots
from netpeer import __version__
from netpeer.observe.metrics import NONE, Metrics, NoMetrics
from netpeer.service.budget import Budgets
from netpeer.service.leader import Leadership, Solo
from netpeer.service.programming import Programmer
from netpeer.service.reconciler import Reconciler, SweepReport, SweepStatus
from netpeer.service.settings import Settings
from netpeer.service.sites import SiteLinks
from netpeer.service.tokens import Tokens
from netpeer.service.writes import WriteQueue
from netpeer.store.base import Store, Transaction

LOG = logging.getLogger(__name__)


def _network_resource(namespace: str, name: str) -> tuple[str, str]:
    """(type, name) of a network as the API names it (google.rpc.ResourceInfo)."""
    return "netpeer.v1.Network", f"namespaces/{namespace}/networks/{name}"


def _peering_resource(key: PeeringKey) -> tuple[str, str]:
    return "netpeer.v1.Peering", f"namespaces/{key.namespace}/networks/{key.network}/peerings/{key.name}"


@dataclasses.dataclass(frozen=True)
class ServerStatus:
    version: str
    dataplane_connected: bool
    sweeps: SweepStatus
    site: str = ""
    links: tuple = ()     # netpeer.service.sites.LinkStatus, one per other site
    replica: str = ""      # this process, as the sweeper lease names it
    leader: str = ""       # the replica that runs the sweeps ("" while none does)
    dataplane: str = ""    # what it programs: "ovn", "memory" (Dataplane.kind)
    gateways: tuple = ()   # netpeer.core.dataplane.Gateway, this site's, highest priority first


@dataclasses.dataclass(frozen=True)
class PeeredNetwork:
    """A network a network is Bound to: in this site, or in another one and
    represented here (RFD 119: what that site told, mirrored both ways)."""

    namespace: str
    name: str
    uid: str
    site: str = ""                      # "" : this site
    prefixes: tuple[str, ...] = ()      # what it exports (subnets, then routes)


@dataclasses.dataclass(frozen=True)
class NetworkView:
    """A network with what the service derives for it (IEP-9 ``status.peerings``,
    OEP-8 ``status.peeredNetworks``)."""

    network: Network
    peerings: tuple[Peering, ...]                      # the first VIEW_PEERINGS, by name
    peered_networks: tuple[PeeredNetwork, ...]
    peering_count: int = 0                             # all of them


def sweep_status_to_json(s: SweepStatus) -> str:
    import json
    return json.dumps(dataclasses.asdict(s), default=lambda t: t.isoformat())


def sweep_status_from_json(text: str) -> SweepStatus:
    import json
    d = json.loads(text)
    when = lambda v: datetime.fromisoformat(v) if v else None   # noqa: E731
    return SweepStatus(d["sweeps"], SweepReport(**d["last"]) if d["last"] else None, when(d["last_started"]),
                       when(d["last_finished"]), SweepReport(**d["totals"]), d.get("blocked", ""))


class Service:
    def __init__(self, store: Store, dataplane_: Dataplane, settings: Settings = Settings(), *,
                 clock: Callable[[], datetime] = utcnow, max_group: int = 64, metrics: NoMetrics | Metrics = NONE,
                 leadership: Leadership | None = None):
        """``metrics``: the hooks its parts call (``netpeer.observe.metrics``);
        ``leadership``: which replica sweeps (``netpeer.service.leader``; by
        default this one, alone on its store)."""
        self.store = store
        self.settings = settings
        self.quotas = settings.quotas
        self.dataplane = dataplane_
        self.owner = settings.owner
        self.clock = clock
        self.tokens = Tokens(store, lambda: self.clock())
        #: Per-token budgets of answers that keep nothing (``[limits]``).
        self.budgets = Budgets(settings.limits)
        self._turn = threading.local()
        self.writes = WriteQueue(store, dataplane_, max_group, metrics=metrics)
        self.reconciler = Reconciler(store, dataplane_, self.writes, lambda: self.clock(), settings, metrics=metrics)
        self.programmer = Programmer(store, dataplane_, self.writes, lambda: self.clock(), metrics=metrics)
        self.reconciler.on_sweep = self.record_sweeps
        #: Which replica sweeps (netpeer.service.leader); one process alone always does.
        self.leadership: Leadership = leadership or Solo()
        self.link_sites("", {})

    def link_sites(self, here: str, sites: dict[str, int], transport=None, interval: float = 5.0) -> SiteLinks:
        """Makes this service site ``here``, linked to ``sites`` (name -> how
        many of its networks each link has room for) through ``transport``."""
        self.sites = SiteLinks(here, sites, store=self.store, writes=self.writes, quotas=self.quotas,
                               leadership=self.leadership, transport=transport, interval=interval,
                               clock=lambda: self.clock(),
                               verify_interval=self.settings.full_sweep_interval.total_seconds())
        self.reconciler.sites = self.sites
        self.writes.before_commit = self.sites.refresh
        self.writes.on_sites_changed = self.sites.poke
        return self.sites

    # ---------------------------------------------------------------- auth
    def authenticate(self, token: str | None) -> Caller:
        return self.tokens.authenticate(token)

    def bootstrap_admin(self, token: str) -> None:
        self.tokens.bootstrap_admin(token)

    def create_token(self, caller: Caller, namespaces: Iterable[str], description: str = "", ttl=None):
        return self.tokens.create(caller, namespaces, description, ttl)

    def list_tokens(self, caller: Caller):
        return self.tokens.list(caller)

    def revoke_token(self, caller: Caller, token_or_id: str):
        return self.tokens.revoke(caller, token_or_id)

    @staticmethod
    def _authorize(caller: Caller, namespace: str, field: str = "namespace") -> str:
        validate.name(field, namespace)
        if not caller.may_use(namespace):
            raise PermissionDenied(f"{field}: token does not grant namespace {namespace!r}",
                                   field=field, value=namespace, reason=Why.NAMESPACE_DENIED)
        return namespace

    def _write(self, fn: Callable[[Transaction], tuple[object, set[str]]], validate_only: bool = False,
               weight: int = 1, caller: Caller | None = None):
        """Runs one write (see ``WriteQueue``; ``weight``: how many writes it
        stands for); with ``validate_only``, answers what it would answer and
        keeps nothing, charged to ``caller``'s validation budget (it holds
        the write lock like a write)."""
        if not validate_only:
            return self.writes.run(fn, weight)
        with self.validating(caller, True):
            return self.writes.dry_run(fn)

    @contextlib.contextmanager
    def validating(self, caller: Caller | None, validate_only: bool) -> Iterator[None]:
        """A validate-only call of ``caller``, admitted by its token's
        validation budget before any of its work is done and charged the
        time it runs (``budget.Validation.turn``: RESOURCE_EXHAUSTED when
        spent). The API enters it before it reads a batch's requests and
        leaves it once the answer is made, so a refusal costs next to
        nothing and an answer all it took; a nested entry (``_write``) is
        part of the outer one. Nothing for a write, the admin, or a call
        without a caller."""
        if not validate_only or caller is None or caller.admin or getattr(self._turn, "held", False):
            yield
            return
        with self.budgets.validation.turn(caller.token_id):
            self._turn.held = True
            try:
                yield
            finally:
                self._turn.held = False

    def _reveal(self, caller: Caller | None) -> consent.Reveal | None:
        """What a write of ``caller`` tells of conflicts with third networks
        costs (``budget.Disclosure``); free for the admin and for writes
        nobody asked for (sweeps, exchanges)."""
        if caller is None or caller.admin:
            return None
        return lambda found: self.budgets.disclosure(caller.token_id, found)

    def _resolve(self, tx: Transaction, keys: Iterable[PeeringKey], now: datetime,
                 caller: Caller | None = None) -> set[str]:
        return effects.resolve(tx, keys, now, self.sites, self._reveal(caller))

    # ---------------------------------------------------------------- watch
    # Revisions count the changes of one namespace (netpeer.store.base): what
    # a tenant sees never moves with another tenant's writes.
    #: Events answered per read at most.
    WATCH_BATCH = 500

    def check_watch(self, caller: Caller, namespace: str, network: str | None) -> None:
        """Refuses a watch the caller may not make (names, then the grant);
        reads nothing, so a refused watch costs no more than its parsing."""
        self._authorize(caller, namespace)
        if network is not None:
            validate.name("network", network)

    def watch_head(self, namespace: str) -> int:
        """The newest revision of ``namespace`` (``check_watch`` first)."""
        with self.store.read() as tx:
            return tx.revisions(namespace)[1]

    def watch_events(self, namespace: str, network: str | None, since: int,
                     limit: int | None = None) -> tuple[list[Event], int]:
        """The changes of ``namespace`` (of one network of it) after revision
        ``since``, at most ``limit``, and the revision through which they are
        complete (the newest one, unless ``limit`` cut them short). A Get
        would show the same. ``check_watch`` first."""
        limit = limit or self.WATCH_BATCH
        with self.store.read() as tx:
            oldest, head = tx.revisions(namespace)
            if since < oldest - 1:
                raise OutOfRange(f"since_revision: {since} is older than the oldest change kept ({oldest}); list "
                                 "the resources again and watch from the revision the list answered",
                                 field="since_revision", value=since, reason=Why.REVISION_COMPACTED)
            if since > head:
                raise InvalidArgument.for_field("since_revision", since, f"is ahead of the newest change ({head})")
            events = tx.events_after(namespace, network, since, limit)
        return events, events[-1].revision if len(events) == limit else head

    def health(self) -> tuple[bool, str]:
        """(serving, why not): the store answers, OVN answers, and the first
        sweep (the start-up repair) completed."""
        try:
            with self.store.read() as tx:
                tx.generation()
        except Exception as exc:
            return False, f"the store does not answer: {exc}"
        if not self.dataplane.connected:
            return False, "the OVN NB database does not answer"
        if self.leadership.solo and self.reconciler.status.sweeps == 0:
            return False, "the start-up sweep has not completed yet"
        if not self.leadership.solo and self.writes.held:
            return False, "the start-up check of the store against OVN has not passed yet"
        return True, ""

    def phase_counts(self) -> dict[str, int]:
        with self.store.read() as tx:
            return tx.count_by_phase()

    def namespaces_changed(self, after: int) -> tuple[int, set[str]]:
        """(the newest change's place in the order of all changes, namespaces
        changed after place ``after``): which watchers to wake."""
        with self.store.read() as tx:
            return tx.namespaces_changed(after)

    def head_revision(self, caller: Caller, namespace: str) -> int:
        """The revision a list of ``namespace`` shows. Read before the list:
        a watch from it misses nothing the list lacks."""
        self._authorize(caller, namespace)
        return self.watch_head(namespace)

    # ---------------------------------------------------------------- upkeep
    #: Where the replica that sweeps records its sweeps' status (``netpeer status`` on any replica).
    LEADER_SWEEPS = "leader_sweeps"

    def status(self) -> "ServerStatus":
        sweeps = self.reconciler.status
        if not self.leadership.solo and not self.leadership.leading():
            with self.store.read() as tx:
                recorded = tx.meta(self.LEADER_SWEEPS)
            if recorded:
                sweeps = sweep_status_from_json(recorded)
        links = self.sites.status()
        if links:
            with self.store.read() as tx:
                use = slots.use(tx)
            links = [dataclasses.replace(x, slots_used=use.get(x.site, (0, ()))[0],
                                         top_namespaces=use.get(x.site, (0, ()))[1]) for x in links]
        return ServerStatus(__version__, self.dataplane.connected, sweeps, self.sites.here,
                            tuple(links), self.leadership.name, self.leadership.leader(),
                            self.dataplane.kind, self.dataplane.gateways())

    def record_sweeps(self, status: SweepStatus) -> None:
        """On the replica that sweeps: its sweeps' status, for the others."""
        if self.leadership.solo:
            return
        text = sweep_status_to_json(status)
        self.writes.run(lambda tx: (tx.put_meta(self.LEADER_SWEEPS, text), set()))

    def expire(self) -> int:
        return self.reconciler.expire()

    def repair(self) -> SweepReport:
        return self.reconciler.repair()

    def sweep(self) -> SweepReport:
        return self.reconciler.sweep()

    # ---------------------------------------------------------------- networks
    def create_network(self, caller: Caller, namespace: str, name: str, subnets, routes=(),
                       description: str = "", validate_only: bool = False) -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        subnets_, routes_ = validate.prefixes(subnets, routes)
        description = validate.description("description", description)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            if tx.get_network(key) is not None:
                raise AlreadyExists(f"network {key} already exists", field="network", value=name,
                                    reason=Why.NETWORK_EXISTS, resource=_network_resource(namespace, name))
            quotas.check(tx.count_networks(namespace), self.quotas.networks_per_namespace,
                         f"namespace {namespace!r} has", "networks", "networks_per_namespace")
            now = self.clock()
            network = Network(namespace, name, str(uuid.uuid4()), subnets_, routes_, description, now, now, 1)
            tx.put_network(network)
            # Peerings that already point here may now match.
            touched = {network.uid} | self._resolve(tx, consent.affected_by(tx, [key]), now, caller)
            return self._view(tx, network), touched

        # The view as this write left it (re-reading after the commit could
        # see a concurrent delete and report a committed write as failed).
        return self._write(op, validate_only, caller=caller)

    def get_network(self, caller: Caller, namespace: str, name: str) -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        with self.store.read() as tx:
            network = tx.get_network(NetworkKey(namespace, name))
            if network is None:
                raise NotFound(f"network {namespace}/{name} not found", field="network", value=name,
                               reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, name))
            return self._view(tx, network)

    def list_networks(self, caller: Caller, namespace: str, after: str = "", limit: int = 100) -> list[NetworkView]:
        self._authorize(caller, namespace)
        with self.store.read() as tx:
            return [self._view(tx, n) for n in tx.list_networks(namespace, after=after, limit=limit)]

    #: A network shows at most this many of its peerings; ListPeerings pages through all.
    VIEW_PEERINGS = 100

    @classmethod
    def _view(cls, tx: Transaction, network: Network) -> NetworkView:
        peerings = tuple(tx.peerings_of(network.key, limit=cls.VIEW_PEERINGS))
        total = len(peerings) if len(peerings) < cls.VIEW_PEERINGS else tx.count_peerings_of(network.key)
        peered = []
        for p in tx.bound_peerings_of(network.key):
            peer = tx.get_network(p.remote_key)
            prefixes = tuple(str(x) for x in peer.prefixes) if peer is not None else ()
            peered.append(PeeredNetwork(p.remote_namespace, p.remote_network, p.remote_uid or "", p.remote_site,
                                        prefixes))
        peered.sort(key=lambda x: (x.site, x.namespace, x.name))
        return NetworkView(network, peerings, tuple(peered), total)

    def update_network(self, caller: Caller, namespace: str, name: str, *, subnets=None, routes=None,
                       description=None, etag: str = "", validate_only: bool = False) -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        if description is not None:
            description = validate.description("description", description)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            old = tx.get_network(key)
            if old is None:
                raise NotFound(f"network {key} not found", field="network", value=name,
                               reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, name))
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r}); re-read and retry",
                              field="etag", value=etag,
                              reason=Why.ETAG_MISMATCH)
            subnets_, routes_ = validate.prefixes(
                list(old.subnets) if subnets is None else subnets,
                list(old.routes) if routes is None else routes)
            now = self.clock()
            new = dataclasses.replace(
                old, subnets=subnets_, routes=routes_,
                description=old.description if description is None else description)
            if new == old:
                return self._view(tx, old), set()
            new = dataclasses.replace(new, update_time=now, revision=old.revision + 1)
            prefixes_changed = (new.subnets, new.routes) != (old.subnets, old.routes)
            touched: set[str] = set()
            if prefixes_changed:
                problems = consent.prefix_change_conflicts(tx, new, self._reveal(caller))
                if problems:
                    raise FailedPrecondition(
                        f"subnets/routes of {key}: {problems[0]}"
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                        + "; nothing was changed", field="subnets", value=list(new.subnets),
                        reason=Why.PREFIX_OVERLAP)
                tx.put_network(new)
                # Our rows and every Bound peer's routes towards us, in one transaction.
                touched = {new.uid} | {p.uid for p in consent.bound_peers(tx, key)}
                touched |= self._resolve(tx, consent.affected_by(tx, [key]), now, caller)
            else:
                tx.put_network(new)
            return self._view(tx, new), touched

        return self._write(op, validate_only, caller=caller)

    def delete_network(self, caller: Caller, namespace: str, name: str, etag: str = "") -> None:
        self._authorize(caller, namespace)
        validate.name("network", name)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            network = tx.get_network(key)
            if network is None:
                raise NotFound(f"network {key} not found", field="network", value=name,
                               reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, name))
            if etag and etag != network.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {network.etag!r})", field="etag", value=etag,
                              reason=Why.ETAG_MISMATCH)
            peerings = tx.peerings_of(key, limit=10)
            if peerings:
                count = tx.count_peerings_of(key)
                listed = ", ".join(p.name for p in peerings) + (" ..." if count > len(peerings) else "")
                raise FailedPrecondition(
                    f"network {key} is in use by {count} peering(s): {listed}; delete them first",
                    field="network", value=name, reason=Why.NETWORK_IN_USE,
                    related={"peerings": ",".join(p.name for p in peerings), "peering_count": str(count)})
            for site in tx.attachments_of(network.uid):
                tx.release_attachment(network.uid, site)
            tx.delete_network(key)
            # Without peerings of its own, no half pointing here can be Bound
            # or Failed: nothing else changes (and nothing else is read).
            return None, {network.uid}

        self._write(op)

    # ---------------------------------------------------------------- peerings
    def create_peering(self, caller: Caller, namespace: str, network: str, name: str,
                       remote_namespace: str | None, remote_network: str, remote_uid: str | None = None,
                       ttl=None, description: str = "", validate_only: bool = False,
                       remote_site: str = "") -> Peering:
        """One side's consent. ``remote_site`` names another site's network
        (``SITE:NS/NETWORK`` on the command line); "" is this site."""
        request = batch.PeeringRequest(namespace, network, name, remote_network, remote_namespace, remote_uid, ttl,
                                       description, remote_site)
        return self._write(self._consent(caller, request), validate_only, caller=caller)

    def create_peerings(self, caller: Caller, requests: Sequence[batch.PeeringRequest],
                        validate_only: bool = False) -> list[Peering]:
        """Many consents in one write, all or none (``netpeer.service.batch``);
        the peerings in the order of ``requests``."""
        batch.check_size(len(requests))
        with self.validating(caller, validate_only):   # before the requests are checked: a refusal is cheap
            ops = []
            for i, request in enumerate(requests):
                with batch.numbered(i):
                    ops.append(self._consent(caller, request))
            if not ops:
                return []
            return self._write(self._batch(ops), validate_only, weight=len(ops), caller=caller)

    @staticmethod
    def _batch(ops: list) -> Callable[[Transaction], tuple[object, set[str]]]:
        """The write of a batch of consents (``_consent``), one after the other."""

        def op(tx: Transaction):
            made, touched = [], set()
            for i, one in enumerate(ops):
                with batch.numbered(i):
                    peering, t = one(tx)
                made.append(peering.key)
                touched |= t
            # Read again: a later request may have bound an earlier one's half.
            return [tx.get_peering(key) for key in made], touched

        return op

    def _consent(self, caller: Caller, r: batch.PeeringRequest):
        """Checks one consent and returns the write that makes it."""
        namespace, network, name = r.namespace, r.network, r.name
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        remote_namespace = r.remote_namespace or namespace
        remote_network, remote_uid = r.remote_network, r.remote_uid
        validate.name("remote.namespace", remote_namespace)
        validate.name("remote.network", remote_network)
        remote_site = self.sites.check_remote_site("remote.site", r.remote_site or "")
        if remote_uid:
            validate.uid("remote.uid", remote_uid)
        ttl_ = DEFAULT_TTL if r.ttl in (None, "") else validate.ttl("ttl", r.ttl)
        description = validate.description("description", r.description)
        if not remote_site and (remote_namespace, remote_network) == (namespace, network):
            raise InvalidArgument.for_field("remote.network", f"{remote_namespace}/{remote_network}",
                                            "is the peering's own network; a network cannot peer with itself")

        def op(tx: Transaction):
            local = tx.get_network(NetworkKey(namespace, network))
            if local is None:
                raise NotFound(f"network {namespace}/{network} not found", field="network", value=network,
                               reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, network))
            if remote_uid and remote_uid == local.uid and not remote_site:
                raise InvalidArgument.for_field("remote.uid", remote_uid,
                                                "is the peering's own network; a network cannot peer with itself")
            key = PeeringKey(namespace, network, name)
            if tx.get_peering(key) is not None:
                raise AlreadyExists(f"peering {key} already exists", field="peering", value=name,
                                    reason=Why.PEERING_EXISTS, resource=_peering_resource(key))
            remote_key = NetworkKey(remote_namespace, remote_network, remote_site)
            dup = tx.find_peering_to(local.key, remote_key)
            if dup is not None:
                raise AlreadyExists(
                    f"network {local.key} already has peering {dup.name!r} towards {remote_key}; "
                    "one peering per remote network", field="remote", value=str(remote_key),
                    reason=Why.REMOTE_ALREADY_PEERED, related={"peering": dup.name},
                    resource=_peering_resource(dup.key))
            quotas.check(tx.count_peerings_of(local.key), self.quotas.peerings_per_network,
                         f"network {local.key} has", "peerings", "peerings_per_network")
            quotas.check(tx.count_pending(namespace), self.quotas.pending_peerings_per_namespace,
                         f"namespace {namespace!r} has", "Pending or Failed peerings",
                         "pending_peerings_per_namespace")
            now = self.clock()
            peering = Peering(namespace, network, name, remote_namespace, remote_network, local.uid,
                              remote_uid or None, ttl_, description, Phase.PENDING, Reason.AWAITING_REMOTE,
                              f"waiting for {remote_key} to consent", now, now, 1, remote_site=remote_site)
            touched: set[str] = set()
            if remote_site:
                # The first half towards that site attaches the network to the
                # link now, so binding later only adds routes (docs/cross-site.md);
                # a slot unused since its last half went is in use again.
                if tx.attachment(local.uid, remote_site) is None:
                    touched.add(local.uid)
                self.sites.attach(tx, local, remote_site)
            tx.put_peering(peering)
            # The remote's half too: it may be pinned to a network this one replaced.
            counterpart = tx.find_peering_to(remote_key, local.key)
            touched |= self._resolve(tx, [key] + ([counterpart.key] if counterpart else []), now, caller)
            return tx.get_peering(key), touched

        return op

    def get_peering(self, caller: Caller, namespace: str, network: str, name: str) -> Peering:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        with self.store.read() as tx:
            p = tx.get_peering(PeeringKey(namespace, network, name))
            if p is None:
                if tx.get_network(NetworkKey(namespace, network)) is None:
                    raise NotFound(f"network {namespace}/{network} not found", field="network", value=network,
                                   reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, network))
                raise NotFound(f"peering {namespace}/{network}/{name} not found", field="peering", value=name,
                               reason=Why.PEERING_NOT_FOUND,
                               resource=_peering_resource(PeeringKey(namespace, network, name)))
            return p

    def list_peerings(self, caller: Caller, namespace: str, network: str | None, after: str = "",
                      limit: int = 100) -> list[Peering]:
        """The halves of ``network``, after the name ``after``; with no
        network, the whole namespace's in (network, name) order, after
        ``after`` = "network/name"."""
        self._authorize(caller, namespace)
        if network is None:
            last = tuple(after.split("/", 1)) if "/" in after else ("", "")
            with self.store.read() as tx:
                return tx.peerings_in(namespace, after=last, limit=limit)
        validate.name("network", network)
        with self.store.read() as tx:
            if tx.get_network(NetworkKey(namespace, network)) is None:
                raise NotFound(f"network {namespace}/{network} not found", field="network", value=network,
                               reason=Why.NETWORK_NOT_FOUND, resource=_network_resource(namespace, network))
            return tx.peerings_of(NetworkKey(namespace, network), after=after, limit=limit)

    def update_peering(self, caller: Caller, namespace: str, network: str, name: str, *,
                       description=None, ttl=None, remote_uid=None, etag: str = "",
                       validate_only: bool = False) -> Peering:
        """Updates description and ttl; ``remote_uid`` re-pins the remote
        network's identity ("" clears the pin, so the peering follows whatever
        network carries the remote name when both halves match)."""
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        if description is not None:
            description = validate.description("description", description)
        ttl_ = validate.ttl("ttl", ttl) if ttl is not None else None
        if remote_uid:
            validate.uid("remote.uid", remote_uid)

        def op(tx: Transaction):
            key = PeeringKey(namespace, network, name)
            old = tx.get_peering(key)
            if old is None:
                raise NotFound(f"peering {key} not found", field="peering", value=name,
                               reason=Why.PEERING_NOT_FOUND,
                               resource=_peering_resource(PeeringKey(namespace, network, name)))
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r})", field="etag", value=etag,
                              reason=Why.ETAG_MISMATCH)
            new = dataclasses.replace(old, description=old.description if description is None else description,
                                      ttl=old.ttl if ttl_ is None else ttl_)
            repin = remote_uid is not None and (remote_uid or None) != old.remote_uid
            if repin:
                if old.phase == Phase.BOUND:
                    raise FailedPrecondition(
                        f"remote.uid: peering {key} is Bound to {old.remote_uid}; it follows that network already",
                        field="remote.uid", value=remote_uid, reason=Why.PEERING_BOUND,
                        related={"bound_to": old.remote_uid or ""})
                if remote_uid == old.network_uid:
                    raise InvalidArgument.for_field("remote.uid", remote_uid, "is the peering's own network; "
                                                    "a network cannot peer with itself")
                new = dataclasses.replace(new, remote_uid=remote_uid or None)
            if new == old:
                return old, set()
            tx.put_peering(dataclasses.replace(new, revision=old.revision + 1))
            touched: set[str] = set()
            if repin:
                counterpart = tx.find_peering_to(old.remote_key, old.network_key)
                touched = self._resolve(tx, [key] + ([counterpart.key] if counterpart else []), self.clock(),
                                        caller)
            return tx.get_peering(key), touched

        return self._write(op, validate_only, caller=caller)

    def delete_peering(self, caller: Caller, namespace: str, network: str, name: str, etag: str = "") -> None:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)

        def op(tx: Transaction):
            key = PeeringKey(namespace, network, name)
            old = tx.get_peering(key)
            if old is None:
                raise NotFound(f"peering {key} not found", field="peering", value=name,
                               reason=Why.PEERING_NOT_FOUND,
                               resource=_peering_resource(PeeringKey(namespace, network, name)))
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r})", field="etag", value=etag,
                              reason=Why.ETAG_MISMATCH)
            partner = tx.find_peering_to(old.remote_key, old.network_key)
            before = tx.count_pending(namespace)
            # Nothing a withdrawal re-decides is charged or refused to the
            # caller (``_reveal``): a withdrawal always works, but for the
            # quota of its own namespace.
            touched = effects.remove_peering(tx, old, self.clock(), self.sites)
            quotas.check_withdrawal(tx, self.quotas, old, partner, before)
            return None, touched

        self._write(op)

    # ---------------------------------------------------------------- the request inbox (netpeer.service.inbox)
    def _inbox(self) -> inbox.Host:
        return inbox.Host(self.store, self.clock, self._authorize, self._consent, self._write)

    def list_peering_requests(self, caller: Caller, namespace: str, network: str | None = None, after: str = "",
                              limit: int = 100) -> list[PeeringRequest]:
        """The requests naming networks of ``namespace`` (of ``network``), not dismissed."""
        return inbox.list_requests(self._inbox(), caller, namespace, network, after, limit)

    def dismiss_peering_request(self, caller: Caller, namespace: str, network: str, request: str) -> None:
        """Hides a request from its target's lists and watches; its requester sees no difference."""
        inbox.dismiss(self._inbox(), caller, namespace, network, request)

    def accept_peering_request(self, caller: Caller, namespace: str, network: str, request: str, name: str,
                               description: str = "", ttl=None, validate_only: bool = False) -> Peering:
        """Creates the half that matches a request (peering ``name`` of ``namespace/network``)."""
        return inbox.accept(self._inbox(), caller, namespace, network, request, name, description, ttl, validate_only)
