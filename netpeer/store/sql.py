"""The transaction of the SQL stores: one copy of the statements for SQLite
(``netpeer.store.sqlite``) and PostgreSQL (``netpeer.store.pg_tx``), each
of which adds only what its dialect says differently. The cross-site part
is ``netpeer.store.sites_sql``; the rows' columns and codecs are
``netpeer.store.codec``.
"""

from __future__ import annotations

import abc
import contextlib
import json
from datetime import datetime, timezone
from typing import Collection

from netpeer.core.dataplane import WAITS_FOR_DATAPLANE
from netpeer.core.models import Event, EventType, Network, NetworkKey, Peering, PeeringKey, Phase, Token
from netpeer.store.interface import Transaction
from netpeer.store.codec import (NET_COLS, PEER_COLS, TOKEN_COLS, event_from, network_from, network_values,
                                 peering_from, peering_values, token_from, token_values, us)
from netpeer.store.requests_sql import RequestsSql
from netpeer.store.sites_sql import SiteMirrorSql

# Where every namespace's revisions start (0, or the newest revision when
# the store moved to revisions per namespace: migration 6).
BASE = "(SELECT CAST(value AS BIGINT) FROM meta WHERE key='revision_base')"
# A namespace's next revision (the statement both dialects understand).
NEXT_REVISION = (f"INSERT INTO namespace_revisions (namespace, revision) VALUES (?, {BASE} + 1) "
                 "ON CONFLICT (namespace) DO UPDATE SET revision = namespace_revisions.revision + 1 "
                 "RETURNING revision")


def _told(p: Peering) -> tuple:
    """The fields of a half that another site is told (``netpeer.core.sides.ToldHalf``)."""
    return (p.remote_site, p.remote_namespace, p.remote_network, p.network_uid, p.remote_uid, p.create_time,
            p.phase, p.conflicts)


class SqlTx(RequestsSql, SiteMirrorSql, Transaction):
    """The transaction of both SQL stores. Every statement goes through
    ``_q`` with ``?`` placeholders; a dialect (``netpeer.store.sqlite``,
    ``netpeer.store.pg_tx``) provides ``_q`` and the few statements whose
    dialects differ: the upserts and the token lookup below, savepoints,
    and the newest change's place in the sequence (``_sequence``)."""

    #: Insert or replace a row of ``NET_COLS``, ``PEER_COLS``, ``TOKEN_COLS``.
    _PUT_NETWORK: str
    _PUT_PEERING: str
    _PUT_TOKEN: str
    #: The row of ``TOKEN_COLS`` of one token id and 1, or else a decoy row and 0.
    _GET_TOKEN: str

    def __init__(self, db):
        self._db = db
        self.networks_changed: set[NetworkKey] = set()
        self._forget()

    def _forget(self) -> None:
        """Drops the rows this transaction remembers.

        A write's consent logic reads the same few networks and peerings many
        times (a batch of 1,000 consents read networks 14,000 times), so this
        site's networks and peerings are kept once read or written, as a read
        would return them. Every statement that changes those tables updates
        or drops what is kept, and a rollback to a savepoint drops it all."""
        self._networks: dict[NetworkKey, Network | None] = {}
        self._peerings: dict[PeeringKey, Peering | None] = {}
        self._towards: dict[tuple[NetworkKey, NetworkKey], PeeringKey | None] = {}
        self._in_phase: dict[tuple[NetworkKey, Phase], list[Peering]] = {}

    def _keep_peering(self, key: PeeringKey, p: Peering | None) -> None:
        """Remembers ``p`` (None: no such peering) under ``key``, and which
        peering points from its network to its remote."""
        old = self._peerings.get(key)
        if old is not None:
            self._towards.pop((old.network_key, old.remote_key), None)
        self._peerings[key] = p
        for phase in Phase:
            self._in_phase.pop((key.network_key, phase), None)
        if p is not None:
            self._towards[(p.network_key, p.remote_key)] = key

    @abc.abstractmethod
    def _q(self, sql: str, args=()):
        """Runs one statement (``?`` placeholders); its cursor."""

    @abc.abstractmethod
    def savepoint(self) -> contextlib.AbstractContextManager[None]:
        """(``Transaction.savepoint``) A dialect's savepoint calls ``_forget``
        when it rolls back."""

    def _one(self, sql: str, args: tuple = ()):
        return self._q(sql, args).fetchone()

    # networks
    def get_network(self, key: NetworkKey) -> Network | None:
        if key.site:
            return self._remote_network(key)
        if key not in self._networks:
            row = self._one(f"SELECT {NET_COLS} FROM networks WHERE namespace=? AND name=?",
                            (key.namespace, key.name))
            self._networks[key] = network_from(row) if row else None
        return self._networks[key]

    def get_network_by_uid(self, uid: str) -> Network | None:
        row = self._one(f"SELECT {NET_COLS} FROM networks WHERE uid=?", (uid,))
        return network_from(row) if row else None

    def network_uids(self) -> list[str]:
        return [r[0] for r in self._q("SELECT uid FROM networks")]

    def list_networks(self, namespace, after="", limit=None):
        sql = f"SELECT {NET_COLS} FROM networks"
        args: list = []
        if namespace is None:
            if after:
                ns, _, name = after.partition("/")
                sql += " WHERE (namespace, name) > (?, ?)"
                args += [ns, name]
        else:
            sql += " WHERE namespace=? AND name > ?"
            args += [namespace, after]
        sql += " ORDER BY namespace, name"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [network_from(r) for r in self._q(sql, args)]

    def put_network(self, n: Network) -> None:
        old = self.get_network(n.key)
        existed = old is not None
        values = network_values(n)
        self._q(self._PUT_NETWORK, values)
        self._networks[n.key] = network_from(values)  # as a read returns it (times to the microsecond)
        if old is None or (old.uid, old.subnets, old.routes) != (n.uid, n.subnets, n.routes):
            self.networks_changed.add(n.key)   # what other sites are told of it may change
        self._event(n.namespace, n.name, "network", n.name, EventType.UPDATED if existed else EventType.CREATED,
                    values)

    def delete_network(self, key: NetworkKey) -> None:
        self._forget()
        self.networks_changed.add(key)
        if self._q("DELETE FROM networks WHERE namespace=? AND name=?",
                   (key.namespace, key.name)).rowcount:
            self._event(key.namespace, key.name, "network", key.name, EventType.DELETED, None)

    def _event(self, namespace: str, network: str, kind: str, name: str, type_: str, values) -> None:
        """Records a change for Watch, in the same transaction as the change,
        with the next revision of its namespace. Writes serialize (one
        connection here, the replicas' write lock in PostgreSQL), so a
        namespace's revisions follow commit order."""
        revision = self._q(NEXT_REVISION, (namespace,)).fetchall()[0][0]
        self._q("INSERT INTO events (time, namespace, network, kind, name, type, body, ns_revision) "
                "VALUES (?,?,?,?,?,?,?,?)", (us(datetime.now(timezone.utc)), namespace, network, kind, name,
                                             type_, json.dumps(values), revision))

    # peerings
    def get_peering(self, key: PeeringKey) -> Peering | None:
        if key.site:
            return self._remote_half(key)
        if key not in self._peerings:
            row = self._one(f"SELECT {PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name=?",
                            (key.namespace, key.network, key.name))
            self._keep_peering(key, peering_from(row) if row else None)
        return self._peerings[key]

    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        if local.site:
            return self._remote_half_to(local, remote)
        if (local, remote) in self._towards:
            key = self._towards[(local, remote)]
            return None if key is None else self._peerings[key]
        row = self._one(
            f"SELECT {PEER_COLS} FROM peerings WHERE namespace=? AND network=? "
            "AND remote_namespace=? AND remote_network=? AND remote_site=?",
            (local.namespace, local.name, remote.namespace, remote.name, remote.site))
        if row is None:
            self._towards[(local, remote)] = None
            return None
        p = peering_from(row)
        self._keep_peering(p.key, p)
        return p

    def peerings_of(self, network: NetworkKey, after: str = "", limit: int | None = None) -> list[Peering]:
        if network.site:
            return [p for p in self._remote_halves_of(network) if p.name > after][:limit]
        sql = f"SELECT {PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND name > ? ORDER BY name"
        args: list = [network.namespace, network.name, after]
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [peering_from(r) for r in self._q(sql, args)]

    def peerings_towards(self, network: NetworkKey) -> list[Peering]:
        return [peering_from(r) for r in self._q(
            f"SELECT {PEER_COLS} FROM peerings WHERE remote_namespace=? AND remote_network=? AND remote_site=? "
            "ORDER BY namespace, network, name", (network.namespace, network.name, network.site))]

    def halves_of_to_site(self, network: NetworkKey, site: str) -> list[Peering]:
        return [peering_from(r) for r in self._q(
            f"SELECT {PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND remote_site=? ORDER BY name",
            (network.namespace, network.name, site))]

    def halves_to_site(self, site: str) -> list[Peering]:
        return [peering_from(r) for r in self._q(
            f"SELECT {PEER_COLS} FROM peerings WHERE remote_site=? ORDER BY namespace, network, name", (site,))]

    def put_peering(self, p: Peering) -> None:
        old = self.get_peering(p.key)
        values = peering_values(p)
        if old is None or _told(old) != _told(p):
            self.networks_changed.add(p.network_key)   # what other sites are told of it may change
        self._q(self._PUT_PEERING, values)
        self._keep_peering(p.key, peering_from(values))  # as a read returns it (times to the microsecond)
        if old is None:
            type_ = EventType.CREATED
        elif old.phase != p.phase:
            type_ = EventType.PHASE_CHANGED
        elif old.programmed_at is None and p.programmed_at is not None:
            type_ = EventType.PROGRAMMED
        else:
            type_ = EventType.UPDATED
        self._event(p.namespace, p.network, "peering", p.name, type_, values)
        self.request_follows(old, self._peerings[p.key])

    def delete_peering(self, key: PeeringKey) -> None:
        old = self.get_peering(key)
        self._keep_peering(key, None)
        self.networks_changed.add(key.network_key)
        if self._q("DELETE FROM peerings WHERE namespace=? AND network=? AND name=?",
                   (key.namespace, key.network, key.name)).rowcount:
            self._event(key.namespace, key.network, "peering", key.name, EventType.DELETED, None)
            self.request_follows(old, None)

    def set_dataplane_cfg(self, network: NetworkKey, cfg: int, *, sites: Collection[str] | None = None,
                          newer_only: bool = False) -> list[PeeringKey]:
        where, args = "namespace=? AND network=? AND phase=?", [network.namespace, network.name, Phase.BOUND.value]
        if sites is not None:
            if not sites:
                return []
            where += f" AND remote_site IN ({', '.join('?' * len(sites))})"
            args += sorted(sites)
        if newer_only:
            where += " AND (dataplane_cfg IS NULL OR dataplane_cfg < ? OR dataplane_cfg = ?)"
            args += [cfg, WAITS_FOR_DATAPLANE]
        keys = [PeeringKey(network.namespace, network.name, r[0])
                for r in self._q(f"SELECT name FROM peerings WHERE {where} ORDER BY name", args)]
        if keys:
            self._forget()
            self._q(f"UPDATE peerings SET dataplane_cfg=?, programmed_at=NULL WHERE {where}", [cfg, *args])
        return keys

    def awaiting_dataplane(self) -> set[tuple[str, str]]:
        return {(r[0], r[1]) for r in self._q("SELECT DISTINCT network_uid, remote_site FROM peerings "
                                              "WHERE programmed_at IS NULL AND dataplane_cfg = ?",
                                              (WAITS_FOR_DATAPLANE,))}

    def programming(self, up_to: int, limit: int = 500) -> list[Peering]:
        return [peering_from(r) for r in self._q(
            f"SELECT {PEER_COLS} FROM peerings WHERE programmed_at IS NULL AND dataplane_cfg IS NOT NULL "
            "AND dataplane_cfg <= ? ORDER BY dataplane_cfg LIMIT ?", (up_to, limit))]

    # events: ``ns_revision`` is the revision a namespace's watchers see;
    # ``revision`` the order of all changes, which only the notifier follows.
    def events_after(self, namespace: str, network: str | None, revision: int, limit: int) -> list[Event]:
        sql = ("SELECT ns_revision, time, namespace, network, kind, name, type, body FROM events "
               "WHERE namespace=? AND ns_revision > ?")
        args: list = [namespace, revision]
        if network is not None:
            sql += " AND network=?"
            args.append(network)
        sql += " ORDER BY ns_revision LIMIT ?"
        args.append(limit)
        return [event_from(r) for r in self._q(sql, args)]

    def namespaces_changed(self, after: int) -> tuple[int, set[str]]:
        rows = self._q("SELECT revision, namespace FROM events WHERE revision > ? ORDER BY revision",
                       (after,)).fetchall()
        if not rows:
            return max(after, self._sequence()), set()
        return rows[-1][0], {r[1] for r in rows}

    def revisions(self, namespace: str) -> tuple[int, int]:
        # Both from keys (the index on namespace and ns_revision, the heads'
        # primary key): the health check and every new watch read them.
        row = self._one("SELECT (SELECT min(ns_revision) FROM events WHERE namespace=?), "
                        f"COALESCE((SELECT revision FROM namespace_revisions WHERE namespace=?), {BASE})",
                        (namespace, namespace))
        head = row[1]
        return (row[0] if row[0] is not None else head + 1), head

    @abc.abstractmethod
    def _sequence(self) -> int:
        """The newest change's place in the order of all of them, also
        when no event is kept."""

    def prune_events(self, older_than: datetime, keep: int) -> int:
        head = self._sequence()
        return self._q("DELETE FROM events WHERE time < ? AND revision <= ?",
                       (us(older_than), head - keep)).rowcount

    def expired_peerings(self, now: datetime, limit: int = 500) -> list[Peering]:
        return [peering_from(r) for r in self._q(
            f"SELECT {PEER_COLS} FROM peerings WHERE expires_at IS NOT NULL AND expires_at <= ? "
            "ORDER BY expires_at LIMIT ?", (us(now), limit))]

    def _peerings_in_phase(self, network: NetworkKey, phase: Phase) -> list[Peering]:
        if network.site:
            return []   # another site's: it keeps its own
        if (network, phase) not in self._in_phase:
            self._in_phase[(network, phase)] = [peering_from(r) for r in self._q(
                f"SELECT {PEER_COLS} FROM peerings WHERE namespace=? AND network=? AND phase=? ORDER BY name",
                (network.namespace, network.name, phase.value))]
        return list(self._in_phase[(network, phase)])

    def failed_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.FAILED)

    def bound_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.BOUND)

    # quotas
    def count_networks(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM networks WHERE namespace=?", (namespace,))[0]

    def count_peerings_of(self, network: NetworkKey) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=? AND network=?",
                         (network.namespace, network.name))[0]

    def count_by_phase(self) -> dict[str, int]:
        counts = {phase.value: 0 for phase in Phase}
        counts.update(dict(self._q("SELECT phase, count(*) FROM peerings GROUP BY phase").fetchall()))
        return counts

    def count_pending(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=? AND phase!=?",
                         (namespace, Phase.BOUND.value))[0]

    # tokens
    def get_token(self, token_id: str) -> Token | None:
        # An unknown id reads (and parses) a decoy row instead of nothing, so
        # that known and unknown ids cost the same (no timing oracle).
        row = self._one(self._GET_TOKEN, (token_id,))
        token = token_from(row)
        return token if row[-1] else None

    def put_token(self, t: Token) -> None:
        self._q(self._PUT_TOKEN, token_values(t))

    def delete_token(self, token_id: str) -> bool:
        return self._q("DELETE FROM tokens WHERE token_id=?", (token_id,)).rowcount > 0

    def list_tokens(self) -> list[Token]:
        return [token_from(r) for r in self._q(f"SELECT {TOKEN_COLS} FROM tokens ORDER BY create_time, token_id")]

    def count_tokens(self) -> int:
        return self._one("SELECT count(*) FROM tokens", ())[0]

    # settings and records of the store itself
    def meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key=?", (key,))
        return row[0] if row else None

    def put_meta(self, key: str, value: str) -> None:
        self._q("DELETE FROM meta WHERE key=?", (key,))
        self._q("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))

    # generation
    def generation(self) -> int:
        return int(self._one("SELECT value FROM meta WHERE key='generation'", ())[0])

    def set_generation(self, generation: int) -> None:
        self._q("UPDATE meta SET value=? WHERE key='generation'", (str(generation),))
