"""The SQL stores' rows: the column lists of their tables and the codecs
between those rows and the domain's dataclasses, the same for SQLite and
PostgreSQL (``netpeer.store.migrations`` has both dialects of the tables).

Times are integer microseconds since the epoch, in UTC; lists and sets are
JSON text.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from netpeer.core.models import Event, Network, Peering, Phase, Route, Token
from netpeer.core.requests import PeeringRequest

NET_COLS = "namespace, name, uid, subnets, routes, description, create_time, update_time, revision"
PEER_COLS = ("namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
             "ttl_seconds, description, phase, reason, message, last_transition, expires_at, "
             "create_time, revision, dataplane_cfg, programmed_at, remote_site, conflicts")
#: The kind of the Watch events of requests (``netpeer.store.requests_sql``).
REQUEST_KIND = "peering_request"
TOKEN_COLS = "token_id, secret_hash, namespaces, admin, description, create_time, expires_at"


def us(t: datetime) -> int:
    """``t`` in microseconds since the epoch (a naive time is taken as UTC)."""
    return int(t.timestamp() * 1_000_000) if t.tzinfo else int(t.replace(tzinfo=timezone.utc).timestamp() * 1_000_000)


def dt(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / 1_000_000, tz=timezone.utc)


def network_from(row) -> Network:
    """A row of ``NET_COLS``."""
    return Network(
        namespace=row[0], name=row[1], uid=row[2], subnets=tuple(json.loads(row[3])),
        routes=tuple(Route(r["prefix"], r.get("next_hop")) for r in json.loads(row[4])),
        description=row[5], create_time=dt(row[6]), update_time=dt(row[7]), revision=row[8])


def network_values(n: Network) -> tuple:
    """The values of ``NET_COLS``."""
    return (n.namespace, n.name, n.uid, json.dumps(list(n.subnets)),
            json.dumps([{"prefix": r.prefix, "next_hop": r.next_hop} for r in n.routes]),
            n.description, us(n.create_time), us(n.update_time), n.revision)


def peering_from(row) -> Peering:
    """A row of ``PEER_COLS`` (or of the columns before migration 4, in old events)."""
    return Peering(
        namespace=row[0], network=row[1], name=row[2], remote_namespace=row[3],
        remote_network=row[4], network_uid=row[5], remote_uid=row[6],
        ttl=timedelta(seconds=row[7]), description=row[8], phase=Phase(row[9]), reason=row[10],
        message=row[11], last_phase_transition_time=dt(row[12]), create_time=dt(row[14]),
        revision=row[15], dataplane_cfg=row[16], programmed_at=dt(row[17]) if row[17] is not None else None,
        # Events recorded before migration 4 have no site columns.
        remote_site=row[18] if len(row) > 18 else "", conflicts=tuple(json.loads(row[19])) if len(row) > 19 else ())


def peering_values(p: Peering) -> tuple:
    """The values of ``PEER_COLS``."""
    expires = p.expires_at
    return (p.namespace, p.network, p.name, p.remote_namespace, p.remote_network, p.network_uid,
            p.remote_uid, int(p.ttl.total_seconds()), p.description, p.phase.value, p.reason,
            p.message, us(p.last_phase_transition_time), us(expires) if expires else None,
            us(p.create_time), p.revision, p.dataplane_cfg, us(p.programmed_at) if p.programmed_at else None,
            p.remote_site, json.dumps(list(p.conflicts)))


def token_from(row) -> Token:
    """A row of ``TOKEN_COLS``."""
    return Token(row[0], row[1], frozenset(json.loads(row[2])), bool(row[3]), row[4], dt(row[5]),
                 dt(row[6]) if row[6] is not None else None)


def token_values(t: Token) -> tuple:
    """The values of ``TOKEN_COLS``."""
    return (t.token_id, t.secret_hash, json.dumps(sorted(t.namespaces)), int(t.admin),
            t.description, us(t.create_time), us(t.expires_at) if t.expires_at else None)


def event_from(row) -> Event:
    """A row of (ns_revision, time, namespace, network, kind, name, type, body):
    the body is the changed object's values, or null when it went."""
    values = json.loads(row[7])
    obj = None
    if values is not None and row[4] == REQUEST_KIND:
        obj = PeeringRequest(peering_from(values["half"]), tuple(values["prefixes"]))
    elif values is not None:
        obj = peering_from(values) if row[4] == "peering" else network_from(values)
    return Event(row[0], dt(row[1]), row[2], row[3], row[4], row[5], row[6], obj)
