"""The PostgreSQL store's transaction: the SQLite store's statements in
PostgreSQL's dialect, over the same columns and values (rows are read and
written by the SQLite module's converters, so both stores answer alike).
A lost connection becomes ``Unavailable``: the write changed nothing."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime, timezone
from typing import Iterator

import psycopg

from netpeer.core.models import Event, EventType, Network, NetworkKey, Peering, PeeringKey, Phase, Token
from netpeer.errors import Unavailable
from netpeer.store.base import Transaction
from netpeer.store.sqlite import (_NET_COLS, _PEER_COLS, _TOKEN_COLS, _event, _network, _network_values, _peering,
                                  _peering_values, _token, _us)

_DECOY = ("'decoy', '" + "0" * 64 + "', '[\"decoy-namespace\"]', 0, '', 0::bigint, NULL::bigint")
_EVENT_COLS = "revision, time, namespace, network, kind, name, type, body"


def _upsert(table: str, cols: str, key: tuple[str, ...]) -> str:
    names = [c.strip() for c in cols.split(",")]
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in names if c not in key)
    return (f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(names))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}")


_PUT_NETWORK = _upsert("networks", _NET_COLS, ("namespace", "name"))
_PUT_PEERING = _upsert("peerings", _PEER_COLS, ("namespace", "network", "name"))
_PUT_TOKEN = _upsert("tokens", _TOKEN_COLS, ("token_id",))


class PgTx(Transaction):
    def __init__(self, db: psycopg.Connection, where: str):
        self._db = db
        self._where = where
        self._savepoints = 0

    def execute(self, sql: str, args=()) -> psycopg.Cursor:
        try:
            return self._db.execute(sql, args)
        except psycopg.OperationalError as exc:
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise Unavailable(f"store {self._where} does not answer: {line}") from None

    def _one(self, sql: str, args=()):
        return self.execute(sql, args).fetchone()

    def _all(self, sql: str, args=()) -> list:
        return self.execute(sql, args).fetchall()

    def meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key=%s", (key,))
        return row[0] if row else None

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        self._savepoints += 1
        name = f"op{self._savepoints}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            with contextlib.suppress(psycopg.Error, Unavailable):
                self.execute(f"ROLLBACK TO SAVEPOINT {name}")
                self.execute(f"RELEASE SAVEPOINT {name}")
            raise
        self.execute(f"RELEASE SAVEPOINT {name}")

    # networks
    def get_network(self, key: NetworkKey) -> Network | None:
        row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE namespace=%s AND name=%s", (key.namespace, key.name))
        return _network(row) if row else None

    def get_network_by_uid(self, uid: str) -> Network | None:
        row = self._one(f"SELECT {_NET_COLS} FROM networks WHERE uid=%s", (uid,))
        return _network(row) if row else None

    def list_networks(self, namespace, after="", limit=None):
        sql = f"SELECT {_NET_COLS} FROM networks"
        args: list = []
        if namespace is None:
            if after:
                ns, _, name = after.partition("/")
                sql += " WHERE (namespace, name) > (%s, %s)"
                args += [ns, name]
        else:
            sql += " WHERE namespace=%s AND name > %s"
            args += [namespace, after]
        sql += " ORDER BY namespace, name"
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        return [_network(r) for r in self._all(sql, args)]

    def put_network(self, n: Network) -> None:
        existed = self._one("SELECT 1 FROM networks WHERE namespace=%s AND name=%s", (n.namespace, n.name))
        values = _network_values(n)
        self.execute(_PUT_NETWORK, values)
        self._event(n.namespace, n.name, "network", n.name, EventType.UPDATED if existed else EventType.CREATED,
                    values)

    def delete_network(self, key: NetworkKey) -> None:
        if self.execute("DELETE FROM networks WHERE namespace=%s AND name=%s", (key.namespace, key.name)).rowcount:
            self._event(key.namespace, key.name, "network", key.name, EventType.DELETED, None)

    def _event(self, namespace: str, network: str, kind: str, name: str, type_: str, values) -> None:
        """Records a change for Watch, in the same transaction (and under the
        same write lock) as the change."""
        self.execute("INSERT INTO events (time, namespace, network, kind, name, type, body) "
                     "VALUES (%s,%s,%s,%s,%s,%s,%s)", (_us(datetime.now(timezone.utc)), namespace, network, kind,
                                                      name, type_, json.dumps(values)))

    # peerings
    def get_peering(self, key: PeeringKey) -> Peering | None:
        row = self._one(f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=%s AND network=%s AND name=%s",
                        (key.namespace, key.network, key.name))
        return _peering(row) if row else None

    def find_peering_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        row = self._one(f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=%s AND network=%s "
                        "AND remote_namespace=%s AND remote_network=%s",
                        (local.namespace, local.name, remote.namespace, remote.name))
        return _peering(row) if row else None

    def peerings_of(self, network: NetworkKey, after: str = "", limit: int | None = None) -> list[Peering]:
        sql = f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=%s AND network=%s AND name > %s ORDER BY name"
        args: list = [network.namespace, network.name, after]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        return [_peering(r) for r in self._all(sql, args)]

    def peerings_towards(self, network: NetworkKey) -> list[Peering]:
        return [_peering(r) for r in self._all(
            f"SELECT {_PEER_COLS} FROM peerings WHERE remote_namespace=%s AND remote_network=%s "
            "ORDER BY namespace, network, name", (network.namespace, network.name))]

    def put_peering(self, p: Peering) -> None:
        old = self._one("SELECT phase, dataplane_cfg, programmed_at FROM peerings "
                        "WHERE namespace=%s AND network=%s AND name=%s", (p.namespace, p.network, p.name))
        values = _peering_values(p)
        self.execute(_PUT_PEERING, values)
        if old is None:
            type_ = EventType.CREATED
        elif old[0] != p.phase.value:
            type_ = EventType.PHASE_CHANGED
        elif old[2] is None and p.programmed_at is not None:
            type_ = EventType.PROGRAMMED
        else:
            type_ = EventType.UPDATED
        self._event(p.namespace, p.network, "peering", p.name, type_, values)

    def delete_peering(self, key: PeeringKey) -> None:
        if self.execute("DELETE FROM peerings WHERE namespace=%s AND network=%s AND name=%s",
                        (key.namespace, key.network, key.name)).rowcount:
            self._event(key.namespace, key.network, "peering", key.name, EventType.DELETED, None)

    def set_dataplane_cfg(self, network: NetworkKey, cfg: int) -> list[PeeringKey]:
        rows = self._all("UPDATE peerings SET dataplane_cfg=%s, programmed_at=NULL "
                         "WHERE namespace=%s AND network=%s AND phase=%s RETURNING name",
                         (cfg, network.namespace, network.name, Phase.BOUND.value))
        return [PeeringKey(network.namespace, network.name, r[0]) for r in sorted(rows)]

    def programming(self, up_to: int, limit: int = 500) -> list[Peering]:
        return [_peering(r) for r in self._all(
            f"SELECT {_PEER_COLS} FROM peerings WHERE programmed_at IS NULL AND dataplane_cfg IS NOT NULL "
            "AND dataplane_cfg <= %s ORDER BY dataplane_cfg LIMIT %s", (up_to, limit))]

    # events
    def events_after(self, namespace: str, network: str | None, revision: int, limit: int) -> list[Event]:
        sql = f"SELECT {_EVENT_COLS} FROM events WHERE namespace=%s AND revision > %s"
        args: list = [namespace, revision]
        if network is not None:
            sql += " AND network=%s"
            args.append(network)
        sql += " ORDER BY revision LIMIT %s"
        args.append(limit)
        return [_event(r) for r in self._all(sql, args)]

    def namespaces_changed(self, after: int) -> tuple[int, set[str]]:
        rows = self._all("SELECT revision, namespace FROM events WHERE revision > %s ORDER BY revision", (after,))
        if not rows:
            return max(after, self.revisions()[1]), set()
        return rows[-1][0], {r[1] for r in rows}

    def revisions(self) -> tuple[int, int]:
        row = self._one("SELECT min(revision), max(revision) FROM events")
        if row[1] is not None:
            return row[0], row[1]
        # None kept: the newest revision pruned (recorded by prune_events), not
        # the identity's counter, which a transaction in progress may have moved.
        head = int(self.meta("events_head") or 0)
        return head + 1, head

    def prune_events(self, older_than: datetime, keep: int) -> int:
        head = self.revisions()[1]
        self.execute("INSERT INTO meta VALUES ('events_head', %s) ON CONFLICT (key) DO UPDATE SET value = "
                     "EXCLUDED.value", (str(head),))
        return self.execute("DELETE FROM events WHERE time < %s AND revision <= %s",
                            (_us(older_than), head - keep)).rowcount

    def expired_peerings(self, now: datetime, limit: int = 500) -> list[Peering]:
        return [_peering(r) for r in self._all(
            f"SELECT {_PEER_COLS} FROM peerings WHERE expires_at IS NOT NULL AND expires_at <= %s "
            "ORDER BY expires_at LIMIT %s", (_us(now), limit))]

    def _peerings_in_phase(self, network: NetworkKey, phase: Phase) -> list[Peering]:
        return [_peering(r) for r in self._all(
            f"SELECT {_PEER_COLS} FROM peerings WHERE namespace=%s AND network=%s AND phase=%s ORDER BY name",
            (network.namespace, network.name, phase.value))]

    def failed_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.FAILED)

    def bound_peerings_of(self, network: NetworkKey) -> list[Peering]:
        return self._peerings_in_phase(network, Phase.BOUND)

    # quotas
    def count_networks(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM networks WHERE namespace=%s", (namespace,))[0]

    def count_peerings_of(self, network: NetworkKey) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=%s AND network=%s",
                         (network.namespace, network.name))[0]

    def count_by_phase(self) -> dict[str, int]:
        counts = {phase.value: 0 for phase in Phase}
        counts.update(dict(self._all("SELECT phase, count(*) FROM peerings GROUP BY phase")))
        return counts

    def count_pending(self, namespace: str) -> int:
        return self._one("SELECT count(*) FROM peerings WHERE namespace=%s AND phase<>%s",
                         (namespace, Phase.BOUND.value))[0]

    # tokens
    def get_token(self, token_id: str) -> Token | None:
        # An unknown id reads (and parses) a decoy row instead of nothing, so
        # that known and unknown ids cost the same (no timing oracle).
        row = self._one(f"SELECT * FROM (SELECT {_TOKEN_COLS}, 1 AS found FROM tokens WHERE token_id=%s "
                        f"UNION ALL SELECT {_DECOY}, 0) t ORDER BY found DESC LIMIT 1", (token_id,))
        token = _token(row)
        return token if row[-1] else None

    def put_token(self, t: Token) -> None:
        self.execute(_PUT_TOKEN, (t.token_id, t.secret_hash, json.dumps(sorted(t.namespaces)), int(t.admin),
                                  t.description, _us(t.create_time), _us(t.expires_at) if t.expires_at else None))

    def delete_token(self, token_id: str) -> bool:
        return self.execute("DELETE FROM tokens WHERE token_id=%s", (token_id,)).rowcount > 0

    def list_tokens(self) -> list[Token]:
        return [_token(r) for r in self._all(f"SELECT {_TOKEN_COLS} FROM tokens ORDER BY create_time, token_id")]

    def count_tokens(self) -> int:
        return self._one("SELECT count(*) FROM tokens")[0]

    # generation
    def generation(self) -> int:
        return int(self.meta("generation"))

    def set_generation(self, generation: int) -> None:
        self.execute("UPDATE meta SET value=%s WHERE key='generation'", (str(generation),))
