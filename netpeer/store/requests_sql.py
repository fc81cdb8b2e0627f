"""The store's part of the request inbox (``netpeer.core.requests``), one
copy of SQL for every store.

A request is read from the requester's half in ``peerings``: nothing is
stored for it but its dismissal (``request_dismissals``, migration 9), per
target network and requester half (its key, its network's uid and its
creation time: a half made again is a new request). Its Watch events are
recorded in the target's namespace as its half changes (``request_follows``),
by statements that do not depend on whether the target exists or saw it.

A mixin: the transaction class provides ``_q``, ``_one``, ``_event``,
``get_network`` and ``get_peering`` (``netpeer.store.sql.SqlTx``).
"""

from __future__ import annotations

from datetime import datetime

from netpeer.core.models import EventType, Peering, Phase
from netpeer.core.requests import UNMATCHED, PeeringRequest, is_request, request_id
from netpeer.store.codec import PEER_COLS, REQUEST_KIND, network_from, peering_from, peering_values, us

_P_COLS = ", ".join(f"p.{c.strip()}" for c in PEER_COLS.split(","))
_HALF = ("d.requester_namespace=p.namespace AND d.requester_network=p.network AND d.requester_name=p.name "
         "AND d.requester_uid=p.network_uid AND d.requester_create_time=p.create_time")
KIND = REQUEST_KIND
#: Where the events of requests to a namespace without networks go (no name is "").
NOWHERE = ""


class RequestsSql:
    """The inbox's statements (see the module)."""

    def peering_requests(self, namespace: str, network: str | None = None,
                         after: tuple[str, str, str, str] | None = None,
                         limit: int | None = None) -> list[PeeringRequest]:
        """The requests to networks of ``namespace`` (to ``network`` only,
        when given) not dismissed, ordered by target network, then requester
        (network namespace, network, half), after ``after`` in that order."""
        sql = (f"SELECT {_P_COLS}, n.subnets, n.routes FROM peerings p JOIN networks n "
               "ON n.namespace=p.namespace AND n.name=p.network "
               f"WHERE p.remote_namespace=? AND p.remote_site='' AND p.phase=? AND p.reason IN (?, ?) "
               "AND NOT EXISTS (SELECT 1 FROM request_dismissals d WHERE d.namespace=p.remote_namespace "
               f"AND d.network=p.remote_network AND {_HALF})")
        args: list = [namespace, Phase.PENDING.value, *sorted(UNMATCHED)]
        if network is not None:
            sql += " AND p.remote_network=?"
            args.append(network)
        if after is not None:
            sql += " AND (p.remote_network, p.namespace, p.network, p.name) > (?, ?, ?, ?)"
            args += list(after)
        sql += " ORDER BY p.remote_network, p.namespace, p.network, p.name"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        out = []
        for row in self._q(sql, args):
            half = peering_from(row[:20])
            out.append(PeeringRequest(half, _prefixes(row[20], row[21])))
        return out

    def request_dismissed(self, half: Peering) -> bool:
        """Whether the target of half ``half`` dismissed its request."""
        return self._one(
            "SELECT count(*) FROM request_dismissals WHERE namespace=? AND network=? AND requester_namespace=? "
            "AND requester_network=? AND requester_name=? AND requester_uid=? AND requester_create_time=?",
            _dismissal_key(half))[0] > 0

    def dismiss_request(self, half: Peering, now: datetime) -> bool:
        """Records that the target dismissed the request half ``half``
        makes; whether it had not already (its Watch event then says it went)."""
        new = self._q("INSERT INTO request_dismissals (namespace, network, requester_namespace, requester_network, "
                      "requester_name, requester_uid, requester_create_time, time) VALUES (?,?,?,?,?,?,?,?) "
                      "ON CONFLICT DO NOTHING", (*_dismissal_key(half), us(now))).rowcount > 0
        if new:
            self._request_event(half, EventType.DELETED)
        return new

    def request_follows(self, old: Peering | None, new: Peering | None) -> None:
        """Records the Watch events of the request a half makes as it goes
        from ``old`` to ``new`` (None: none, or deleted). A half made or
        deleted costs the same statements whatever its remote: the
        requester's calls tell nothing of the target."""
        was, now = is_request(old), is_request(new)
        if new is None and old is not None:
            # Its dismissals go with it (the same statement whether there are any).
            self._q("DELETE FROM request_dismissals WHERE requester_namespace=? AND requester_network=? "
                    "AND requester_name=?", (old.namespace, old.network, old.name))
        if was and not now:
            self._request_event(old, EventType.DELETED)
        elif now and not was:
            # A new half was never dismissed; one Pending again may have been
            # (that is the target's own write: its half was withdrawn).
            if old is None or not self.request_dismissed(new):
                self._request_event(new, EventType.CREATED)
        # No event while it stays a request (a new ttl, a description): the
        # events would have to skip the dismissed ones, and the requester's
        # update would then run fewer statements once its request was
        # dismissed (tests/trust/test_inbox_oracle.py). Lists show the
        # request as it is.

    def _request_event(self, half: Peering, type_: str) -> None:
        values = None
        if type_ != EventType.DELETED:
            requester = self.get_network(half.network_key)
            prefixes = [str(x) for x in requester.prefixes] if requester is not None else []
            values = {"half": list(peering_values(half)), "prefixes": prefixes}
        # A namespace without networks gets no events: each namespace named
        # would otherwise keep a row of revisions for good, and any name can
        # be named. Its events go to the namespace "", which no token can
        # watch, by the same statements, so that the requester's calls cost
        # the same whether the namespace has networks.
        held = self._one("SELECT count(*) FROM (SELECT 1 FROM networks WHERE namespace=? LIMIT 1) n",
                         (half.remote_namespace,))[0]
        self._event(half.remote_namespace if held else NOWHERE, half.remote_network, KIND, request_id(half), type_,
                    values)


def _dismissal_key(half: Peering) -> tuple:
    return (half.remote_namespace, half.remote_network, half.namespace, half.network, half.name, half.network_uid,
            us(half.create_time))


def _prefixes(subnets: str, routes: str) -> tuple[str, ...]:
    n = network_from(("", "", "", subnets, routes, "", 0, 0, 0))
    return tuple(str(x) for x in n.prefixes)
