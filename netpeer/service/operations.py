"""netpeerd's operations: validate, authorize, change the store, resolve
consent, and program the dataplane, as one write (``WriteQueue``).

``Service`` is the facade the API calls: the operations on networks and
peerings live here; credentials in ``tokens``, the write queue (group
commit) in ``writes``, expiry and repair in ``reconciler``.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from datetime import datetime, timedelta
from typing import Callable, Iterable

from netpeer.core import consent, validate
from netpeer.core.dataplane import Dataplane
from netpeer.core.models import (Caller, Network, NetworkKey, Peering, PeeringKey, Phase, Reason,
                                 DEFAULT_TTL, utcnow)
from netpeer.errors import _clip  # the caller's etag is echoed clipped, like every other value
from netpeer.errors import AlreadyExists, Aborted, FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from netpeer.service import effects
from netpeer import __version__
from netpeer.service.reconciler import Reconciler, SweepReport, SweepStatus
from netpeer.service.tokens import Tokens
from netpeer.service.writes import WriteQueue
from netpeer.store.base import Store, Transaction

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServerStatus:
    version: str
    dataplane_connected: bool
    sweeps: SweepStatus


@dataclasses.dataclass(frozen=True)
class NetworkView:
    """A network with what the service derives for it (IEP-9 ``status.peerings``,
    OEP-8 ``status.peeredNetworks``)."""

    network: Network
    peerings: tuple[Peering, ...]
    peered_networks: tuple[tuple[str, str, str], ...]  # (namespace, name, uid)


class Service:
    def __init__(self, store: Store, dataplane_: Dataplane, owner: str = "netpeer",
                 clock: Callable[[], datetime] = utcnow, max_group: int = 64):
        self.store = store
        self.dataplane = dataplane_
        self.owner = owner
        self.clock = clock
        self.tokens = Tokens(store, lambda: self.clock())
        self.writes = WriteQueue(store, dataplane_, max_group)
        self.reconciler = Reconciler(store, dataplane_, self.writes, lambda: self.clock())

    # ---------------------------------------------------------------- auth
    def authenticate(self, token: str | None) -> Caller:
        return self.tokens.authenticate(token)

    def bootstrap_admin(self, token: str) -> None:
        self.tokens.bootstrap_admin(token)

    def create_token(self, caller: Caller, namespaces: Iterable[str], description: str = ""):
        return self.tokens.create(caller, namespaces, description)

    @staticmethod
    def _authorize(caller: Caller, namespace: str, field: str = "namespace") -> str:
        validate.name(field, namespace)
        if not caller.may_use(namespace):
            raise PermissionDenied(f"{field}: token does not grant namespace {namespace!r}",
                                   field=field, value=namespace)
        return namespace

    def _write(self, fn: Callable[[Transaction], tuple[object, set[str]]]):
        """Runs one write (see ``WriteQueue``)."""
        return self.writes.run(fn)

    @staticmethod
    def _resolve(tx: Transaction, keys: Iterable[PeeringKey], now: datetime) -> set[str]:
        return effects.resolve(tx, keys, now)

    # ---------------------------------------------------------------- upkeep
    def status(self) -> "ServerStatus":
        return ServerStatus(__version__, self.dataplane.connected, self.reconciler.status)

    def expire(self) -> int:
        return self.reconciler.expire()

    def repair(self) -> SweepReport:
        return self.reconciler.repair()

    def sweep(self) -> SweepReport:
        return self.reconciler.sweep()

    # ---------------------------------------------------------------- networks
    def create_network(self, caller: Caller, namespace: str, name: str, subnets, routes=(),
                       description: str = "") -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        subnets_, routes_ = validate.prefixes(subnets, routes)
        description = validate.description("description", description)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            if tx.get_network(key) is not None:
                raise AlreadyExists(f"network {key} already exists", field="network", value=name)
            now = self.clock()
            network = Network(namespace, name, str(uuid.uuid4()), subnets_, routes_, description, now, now, 1)
            tx.put_network(network)
            # Peerings that already point here may now match.
            touched = {network.uid} | self._resolve(tx, consent.affected_by(tx, [key]), now)
            return self._view(tx, network), touched

        # The view as this write left it (re-reading after the commit could
        # see a concurrent delete and report a committed write as failed).
        return self._write(op)

    def get_network(self, caller: Caller, namespace: str, name: str) -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        with self.store.read() as tx:
            network = tx.get_network(NetworkKey(namespace, name))
            if network is None:
                raise NotFound(f"network {namespace}/{name} not found", field="network", value=name)
            return self._view(tx, network)

    def list_networks(self, caller: Caller, namespace: str, after: str = "", limit: int = 100) -> list[NetworkView]:
        self._authorize(caller, namespace)
        with self.store.read() as tx:
            return [self._view(tx, n) for n in tx.list_networks(namespace, after=after, limit=limit)]

    @staticmethod
    def _view(tx: Transaction, network: Network) -> NetworkView:
        peerings = tuple(tx.peerings_of(network.key))
        peered = []
        for p in peerings:
            if p.phase == Phase.BOUND:
                peered.append((p.remote_namespace, p.remote_network, p.remote_uid or ""))
        return NetworkView(network, peerings, tuple(sorted(peered)))

    def update_network(self, caller: Caller, namespace: str, name: str, *, subnets=None, routes=None,
                       description=None, etag: str = "") -> NetworkView:
        self._authorize(caller, namespace)
        validate.name("network", name)
        if description is not None:
            description = validate.description("description", description)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            old = tx.get_network(key)
            if old is None:
                raise NotFound(f"network {key} not found", field="network", value=name)
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r}); re-read and retry",
                              field="etag", value=etag)
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
                problems = consent.prefix_change_conflicts(tx, new)
                if problems:
                    raise FailedPrecondition(
                        f"subnets/routes of {key}: {problems[0]}"
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                        + "; nothing was changed", field="subnets", value=list(new.subnets))
                tx.put_network(new)
                # Our rows and every Bound peer's routes towards us, in one transaction.
                touched = {new.uid} | {p.uid for p in consent.bound_peers(tx, key)}
                touched |= self._resolve(tx, consent.affected_by(tx, [key]), now)
            else:
                tx.put_network(new)
            return self._view(tx, new), touched

        return self._write(op)

    def delete_network(self, caller: Caller, namespace: str, name: str, etag: str = "") -> None:
        self._authorize(caller, namespace)
        validate.name("network", name)

        def op(tx: Transaction):
            key = NetworkKey(namespace, name)
            network = tx.get_network(key)
            if network is None:
                raise NotFound(f"network {key} not found", field="network", value=name)
            if etag and etag != network.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {network.etag!r})", field="etag", value=etag)
            peerings = tx.peerings_of(key)
            if peerings:
                listed = ", ".join(p.name for p in peerings[:10]) + (" ..." if len(peerings) > 10 else "")
                raise FailedPrecondition(
                    f"network {key} is in use by {len(peerings)} peering(s): {listed}; delete them first",
                    field="network", value=name)
            tx.delete_network(key)
            now = self.clock()
            touched = {network.uid} | self._resolve(tx, [p.key for p in tx.peerings_towards(key)], now)
            return None, touched

        self._write(op)

    # ---------------------------------------------------------------- peerings
    def create_peering(self, caller: Caller, namespace: str, network: str, name: str,
                       remote_namespace: str | None, remote_network: str, remote_uid: str | None = None,
                       ttl=None, description: str = "") -> Peering:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        remote_namespace = remote_namespace or namespace
        validate.name("remote.namespace", remote_namespace)
        validate.name("remote.network", remote_network)
        if remote_uid:
            validate.uid("remote.uid", remote_uid)
        ttl_ = DEFAULT_TTL if ttl in (None, "", 0, timedelta(0)) else validate.ttl("ttl", ttl)
        description = validate.description("description", description)
        if (remote_namespace, remote_network) == (namespace, network):
            raise InvalidArgument.for_field("remote.network", f"{remote_namespace}/{remote_network}",
                                            "is the peering's own network; a network cannot peer with itself")

        def op(tx: Transaction):
            local = tx.get_network(NetworkKey(namespace, network))
            if local is None:
                raise NotFound(f"network {namespace}/{network} not found", field="network", value=network)
            if remote_uid and remote_uid == local.uid:
                raise InvalidArgument.for_field("remote.uid", remote_uid,
                                                "is the peering's own network; a network cannot peer with itself")
            key = PeeringKey(namespace, network, name)
            if tx.get_peering(key) is not None:
                raise AlreadyExists(f"peering {key} already exists", field="peering", value=name)
            remote_key = NetworkKey(remote_namespace, remote_network)
            dup = tx.find_peering_to(local.key, remote_key)
            if dup is not None:
                raise AlreadyExists(
                    f"network {local.key} already has peering {dup.name!r} towards {remote_key}; "
                    "one peering per remote network", field="remote", value=str(remote_key))
            now = self.clock()
            peering = Peering(namespace, network, name, remote_namespace, remote_network, local.uid,
                              remote_uid or None, ttl_, description, Phase.PENDING, Reason.AWAITING_REMOTE,
                              f"waiting for {remote_key} to consent", now, now, 1)
            tx.put_peering(peering)
            touched = self._resolve(tx, [key], now)
            return tx.get_peering(key), touched

        return self._write(op)

    def get_peering(self, caller: Caller, namespace: str, network: str, name: str) -> Peering:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        with self.store.read() as tx:
            p = tx.get_peering(PeeringKey(namespace, network, name))
            if p is None:
                if tx.get_network(NetworkKey(namespace, network)) is None:
                    raise NotFound(f"network {namespace}/{network} not found", field="network", value=network)
                raise NotFound(f"peering {namespace}/{network}/{name} not found", field="peering", value=name)
            return p

    def list_peerings(self, caller: Caller, namespace: str, network: str, after: str = "",
                      limit: int = 100) -> list[Peering]:
        self._authorize(caller, namespace)
        validate.name("network", network)
        with self.store.read() as tx:
            if tx.get_network(NetworkKey(namespace, network)) is None:
                raise NotFound(f"network {namespace}/{network} not found", field="network", value=network)
            return tx.peerings_of(NetworkKey(namespace, network), after=after, limit=limit)

    def update_peering(self, caller: Caller, namespace: str, network: str, name: str, *,
                       description=None, ttl=None, etag: str = "") -> Peering:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)
        if description is not None:
            description = validate.description("description", description)
        ttl_ = validate.ttl("ttl", ttl) if ttl is not None else None

        def op(tx: Transaction):
            key = PeeringKey(namespace, network, name)
            old = tx.get_peering(key)
            if old is None:
                raise NotFound(f"peering {key} not found", field="peering", value=name)
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r})", field="etag", value=etag)
            new = dataclasses.replace(old, description=old.description if description is None else description,
                                      ttl=old.ttl if ttl_ is None else ttl_)
            if new != old:
                tx.put_peering(dataclasses.replace(new, revision=old.revision + 1))
            return tx.get_peering(key), set()

        return self._write(op)

    def delete_peering(self, caller: Caller, namespace: str, network: str, name: str, etag: str = "") -> None:
        self._authorize(caller, namespace)
        validate.name("network", network)
        validate.name("peering", name, peering=True)

        def op(tx: Transaction):
            key = PeeringKey(namespace, network, name)
            old = tx.get_peering(key)
            if old is None:
                raise NotFound(f"peering {key} not found", field="peering", value=name)
            if etag and etag != old.etag:
                raise Aborted(f"etag: {_clip(etag)!r} is stale (current {old.etag!r})", field="etag", value=etag)
            return None, effects.remove_peering(tx, old, self.clock())

        self._write(op)
