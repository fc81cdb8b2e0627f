"""netpeerd's operations: validate, authorize, change the store, resolve
consent, and program OVN, as one unit.

Every write runs under one lock inside one store transaction. The OVN rows
the change implies are written in one NB transaction *before* the store
commits: if OVN refuses or cannot be reached the store rolls back and the
caller gets an error with nothing changed; if the process dies between the
two, OVN holds rows the store does not know, and the repair sweep (run at
start and on a timer) removes them. OVN is always a function of the store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import secrets
import threading
import uuid
from datetime import datetime, timedelta
from typing import Callable, Iterable, Protocol

from netpeer.core import consent, dataplane, validate
from netpeer.core.models import (Caller, Network, NetworkKey, Peering, PeeringKey, Phase, Reason,
                                 Token, DEFAULT_TTL, utcnow)
from netpeer.errors import _clip  # the caller's etag is echoed clipped, like every other value
from netpeer.errors import (Aborted, AlreadyExists, FailedPrecondition, InvalidArgument, NotFound,
                            PermissionDenied, Unauthenticated, Unavailable)
from netpeer.store.base import Store, Transaction, iter_all_networks

LOG = logging.getLogger(__name__)
TOKEN_PREFIX = "np"


class Dataplane(Protocol):
    """What the service needs from OVN (``netpeer.ovn.backend.OvnBackend``)."""

    def sync(self, desired, orphans_except=None): ...


@dataclasses.dataclass(frozen=True)
class NetworkView:
    """A network with what the service derives for it (IEP-9 ``status.peerings``,
    OEP-8 ``status.peeredNetworks``)."""

    network: Network
    peerings: tuple[Peering, ...]
    peered_networks: tuple[tuple[str, str, str], ...]  # (namespace, name, uid)


@dataclasses.dataclass(frozen=True)
class SweepReport:
    expired: int = 0
    repaired_rows: int = 0
    errors: int = 0


class _PendingWrite:
    """One caller's write waiting in the group-commit queue."""

    __slots__ = ("fn", "done", "result", "error")

    def __init__(self, fn):
        self.fn = fn
        self.done = False
        self.result = None
        self.error: BaseException | None = None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Service:
    def __init__(self, store: Store, dataplane_: Dataplane, owner: str = "netpeer",
                 clock: Callable[[], datetime] = utcnow, max_group: int = 64):
        self.store = store
        self.dataplane = dataplane_
        self.owner = owner
        self.clock = clock
        self._lock = threading.RLock()
        # Writes waiting for the lock (group commit, see _write).
        self._pending: list[_PendingWrite] = []
        self._pending_lock = threading.Lock()
        self.max_group = max_group

    # ---------------------------------------------------------------- auth
    def authenticate(self, token: str | None) -> Caller:
        """The caller a bearer token stands for. Tokens look like
        ``np_<id>_<secret>``; only a hash of the secret is stored and it is
        compared in constant time."""
        if not token:
            raise Unauthenticated("missing credentials: pass a token (--token or NETPEER_TOKEN)")
        parts = token.strip().split("_")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
            raise Unauthenticated("invalid token")
        with self.store.read() as tx:
            stored = tx.get_token(parts[1])
        expected = stored.secret_hash if stored else hash_secret("x" * 43)
        if not hmac.compare_digest(expected, hash_secret(parts[2])) or stored is None:
            raise Unauthenticated("invalid token")
        return Caller(stored.token_id, stored.namespaces, stored.admin)

    def bootstrap_admin(self, token: str) -> None:
        """Store (or refresh) the admin token given in the configuration."""
        parts = token.strip().split("_")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or len(parts[2]) < 16:
            raise InvalidArgument.for_field("admin_token", "<hidden>", "must look like np_<id>_<secret>")
        with self.store.write() as tx:
            tx.put_token(Token(parts[1], hash_secret(parts[2]), frozenset(), True, "admin (configuration)"))

    def create_token(self, caller: Caller, namespaces: Iterable[str], description: str = "") -> tuple[str, Token]:
        if not caller.admin:
            raise PermissionDenied("only an admin token may create tokens")
        nss = list(namespaces)
        if not nss:
            raise InvalidArgument.for_field("namespaces", "[]", "must list at least one namespace")
        clean = frozenset(validate.name(f"namespaces[{i}]", ns) for i, ns in enumerate(nss))
        description = validate.description("description", description)
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32).replace("_", "-")
        token = Token(token_id, hash_secret(secret), clean, False, description, self.clock())
        with self.store.write() as tx:
            tx.put_token(token)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", token

    @staticmethod
    def _authorize(caller: Caller, namespace: str, field: str = "namespace") -> str:
        validate.name(field, namespace)
        if not caller.may_use(namespace):
            raise PermissionDenied(f"{field}: token does not grant namespace {namespace!r}",
                                   field=field, value=namespace)
        return namespace

    # ---------------------------------------------------------------- writes
    def _write(self, fn: Callable[[Transaction], tuple[object, set[str]]]):
        """Run ``fn`` in a write transaction; program OVN for the networks (by
        uid) it reports as touched; commit only if OVN accepted.

        Group commit: writes that arrive while another is in progress queue
        up; whoever takes the lock next runs every queued write in order in
        one store transaction (each inside its own savepoint, so one that
        raises undoes only its own changes), one NB transaction for all the
        networks they touched, and one commit (one fsync). Each caller still
        gets exactly its own result or error, and is answered only after the
        commit. If OVN refuses the group, nothing was committed and each
        write is re-run alone, so each gets the outcome it would have had.
        """
        op = _PendingWrite(fn)
        with self._pending_lock:
            self._pending.append(op)
        with self._lock:
            while not op.done:
                with self._pending_lock:
                    batch = self._pending[:self.max_group]
                    del self._pending[:len(batch)]
                self._run_group(batch)
        if op.error is not None:
            raise op.error
        return op.result

    def _run_alone(self, op: "_PendingWrite") -> None:
        try:
            with self.store.write() as tx:
                result, touched = op.fn(tx)
                if touched:
                    self.dataplane.sync(self._desired(tx, touched))
            op.result = result
        except BaseException as exc:
            op.error = exc
        finally:
            op.done = True

    def _run_group(self, batch: list["_PendingWrite"]) -> None:
        if len(batch) == 1 or not self.store.savepoints:
            for op in batch:
                self._run_alone(op)
            return
        done: list[tuple[_PendingWrite, object]] = []
        failed: list[tuple[_PendingWrite, BaseException]] = []
        try:
            with self.store.write() as tx:
                touched: set[str] = set()
                for op in batch:
                    try:
                        with tx.savepoint():
                            result, t = op.fn(tx)
                    except Exception as exc:  # this write's own error: only its changes are undone
                        failed.append((op, exc))
                        continue
                    done.append((op, result))
                    touched |= t
                if touched:
                    self.dataplane.sync(self._desired(tx, touched))
        except Unavailable as exc:
            # OVN unreachable or too slow: every write of the group would fail alike.
            for op in batch:
                op.error, op.done = exc, True
            return
        except Exception:
            # Refused (e.g. a foreign row squats on one network's name): nothing
            # was committed; run each alone so only the culprit fails.
            for op in batch:
                op.error = None
                self._run_alone(op)
            return
        for op, result in done:
            op.result, op.done = result, True
        for op, exc in failed:
            op.error, op.done = exc, True

    def _desired(self, tx: Transaction, uids: Iterable[str]) -> dict[str, list | None]:
        out: dict[str, list | None] = {}
        for uid in uids:
            network = tx.get_network_by_uid(uid)
            if network is None:
                out[uid] = None
            else:
                out[uid] = dataplane.network_rows(self.owner, network, consent.bound_peers(tx, network.key))
        return out

    @staticmethod
    def _touched_by(tx: Transaction, changes: list[tuple[Peering | None, Peering | None]]) -> set[str]:
        """Networks whose OVN rows change when these peerings change: both
        sides of every pair that enters or leaves Bound."""
        uids: set[str] = set()
        for old, new in changes:
            was = old is not None and old.phase == Phase.BOUND
            now = new is not None and new.phase == Phase.BOUND
            if was != now:
                p = new or old
                uids.add(p.network_uid)
                remote = tx.get_network(p.remote_key)
                if p.remote_uid:
                    uids.add(p.remote_uid)
                elif remote is not None:
                    uids.add(remote.uid)
        return uids

    def _resolve(self, tx: Transaction, keys: Iterable[PeeringKey], now: datetime) -> set[str]:
        """Re-evaluates consent for these peerings; the networks to re-program."""
        return self._touched_by(tx, consent.resolve(tx, keys, now))

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
            return None, self._remove_peering(tx, old, self.clock())

        self._write(op)

    def _remove_peering(self, tx: Transaction, old: Peering, now: datetime) -> set[str]:
        tx.delete_peering(old.key)
        touched = self._touched_by(tx, [(old, None)])
        partner = tx.find_peering_to(old.remote_key, old.network_key)
        keys = [partner.key] if partner else []
        # A pair that failed because of this one may bind now.
        for n in (old.network_key, old.remote_key):
            keys += [p.key for p in tx.peerings_of(n) if p.phase == Phase.FAILED]
        return touched | self._resolve(tx, keys, now)

    # ---------------------------------------------------------------- upkeep
    def expire(self) -> int:
        """Deletes Pending and Failed peerings past their TTL (OEP-8)."""
        count = 0
        while True:
            with self.store.read() as tx:
                batch = tx.expired_peerings(self.clock(), limit=100)
            if not batch:
                return count
            for p in batch:
                def op(tx: Transaction, p=p):
                    current = tx.get_peering(p.key)
                    now = self.clock()
                    if current is None or current.expires_at is None or current.expires_at > now:
                        return 0, set()
                    LOG.info("peering %s expired in phase %s", p.key, current.phase)
                    return 1, self._remove_peering(tx, current, now)
                count += self._write(op)

    #: Networks compared with OVN per read-only drift check in the repair sweep.
    #: (Small: each check runs on the OVN connection thread, ahead of writes.)
    REPAIR_CHECK_CHUNK = 10

    def _remove_strays(self) -> tuple[int, int]:
        """Deletes rows we own that no network of the store explains (left by
        a crash, renamed or stripped of their id by hand). Runs before the
        per-network repair, so a renamed row cannot clash with its recreation.
        Returns (rows removed, errors)."""
        try:
            with self.store.read() as tx:
                keep = [n.uid for n in iter_all_networks(tx)]
            orphans = getattr(self.dataplane, "has_orphans", None)
            if orphans is not None and not orphans(keep):
                return 0, 0
            with self._lock, self.store.read() as tx:
                keep = [n.uid for n in iter_all_networks(tx)]
                report = self.dataplane.sync({}, orphans_except=keep)
            if report.changed:
                LOG.warning("removed %d orphaned or stray OVN row(s)", report.changed)
            return report.changed, 0
        except Exception as exc:
            LOG.error("orphan sweep failed: %s", exc)
            return 0, 1

    def repair(self) -> SweepReport:
        """Removes rows we own that belong to no network, then makes OVN match
        the store for every network, one network per NB transaction so one
        bad row does not stop the rest."""
        repaired, errors = self._remove_strays()
        with self.store.read() as tx:
            uids = [n.uid for n in iter_all_networks(tx)]
        check = getattr(self.dataplane, "drifted", None)
        for k in range(0, len(uids), self.REPAIR_CHECK_CHUNK):
            part = uids[k:k + self.REPAIR_CHECK_CHUNK]
            # Cheap read-only check first, without the write lock: writes go on
            # meanwhile (a write racing the check can only make a network look
            # drifted; its repair below re-reads under the lock and changes
            # nothing). Only networks that look drifted get a write transaction.
            suspects = set(part)
            if check is not None:
                try:
                    with self.store.read() as tx:
                        desired = self._desired(tx, part)
                    suspects = check(desired)
                except Exception as exc:
                    LOG.warning("drift check failed (%s); checking networks one by one", exc)
            for uid in part:
                if uid not in suspects:
                    continue
                try:
                    with self._lock, self.store.read() as tx:
                        report = self.dataplane.sync(self._desired(tx, [uid]))
                    repaired += report.changed
                    if report.changed:
                        LOG.warning("repaired %d drifted OVN row(s) of network %s", report.changed, uid)
                except Exception as exc:  # keep sweeping; report below
                    errors += 1
                    LOG.error("repair of network %s failed: %s", uid, exc)
        return SweepReport(repaired_rows=repaired, errors=errors)

    def sweep(self) -> SweepReport:
        expired = 0
        try:
            expired = self.expire()
        except Exception as exc:
            LOG.error("expiry sweep failed: %s", exc)
        r = self.repair()
        return SweepReport(expired, r.repaired_rows, r.errors)
