"""The store's part of the request inbox (``netpeer.core.requests``), one
copy of SQL for every store.

A request is read from the requester's half in ``peerings``: nothing is
stored for it but its dismissal (``request_dismissals``, migration 9), per
target network and requester half (its key, its network's uid and its
creation time: a half made again is a new request). Its Watch events are
recorded in the target's namespace as its half changes (``request_follows``),
by statements that do not depend on whether the target exists or saw it.

Another site's half naming a network here is read from the mirror
(``remote_halves``, ``netpeer.store.sites_sql``); its dismissal is kept in
``remote_request_dismissals`` (migration 10). Its events are recorded when
the exchange changes the half in the mirror, or when this site's half
answering it is made or deleted (``remote_request_follows``).

A mixin: the transaction class provides ``_q``, ``_one``, ``_event``,
``get_network`` and ``get_peering`` (``netpeer.store.sql.SqlTx``).
"""

from __future__ import annotations

from datetime import datetime

import json

from netpeer.core.models import EventType, NetworkKey, Peering, PeeringKey, Phase
from netpeer.core.requests import UNMATCHED, PeeringRequest, is_remote_request, is_request, request_id
from netpeer.store.codec import PEER_COLS, REQUEST_KIND, network_from, peering_from, peering_values, us
from netpeer.store.sites_sql import _RHALF_COLS, remote_half

_P_COLS = ", ".join(f"p.{c.strip()}" for c in PEER_COLS.split(","))
_HALF = ("d.requester_namespace=p.namespace AND d.requester_network=p.network AND d.requester_name=p.name "
         "AND d.requester_uid=p.network_uid AND d.requester_create_time=p.create_time")
_H_COLS = ", ".join(f"h.{c.strip()}" for c in _RHALF_COLS.split(","))
# This site's half of the target network answering another site's half h.
_ANSWERED = ("EXISTS (SELECT 1 FROM peerings p WHERE p.namespace=h.remote_namespace AND p.network=h.remote_network "
             "AND p.remote_site=h.site AND p.remote_namespace=h.namespace AND p.remote_network=h.network)")
_REMOTE_DISMISSED = ("EXISTS (SELECT 1 FROM remote_request_dismissals d WHERE d.site=h.site "
                     "AND d.namespace=h.remote_namespace AND d.network=h.remote_network "
                     "AND d.requester_namespace=h.namespace AND d.requester_network=h.network "
                     "AND d.requester_name=h.name AND d.requester_uid=h.network_uid "
                     "AND d.requester_create_time=h.create_time)")
KIND = REQUEST_KIND
#: Where the events of requests to a namespace without networks go (no name is "").
NOWHERE = ""


class RequestsSql:
    """The inbox's statements (see the module)."""

    def peering_requests(self, namespace: str, network: str | None = None,
                         after: tuple[str, str, str, str, str] | None = None,
                         limit: int | None = None) -> list[PeeringRequest]:
        """The requests to networks of ``namespace`` (to ``network`` only,
        when given) not dismissed, ordered by target network, then requester
        (site, "" first, namespace, network, half), after ``after`` in that
        order: this site's and other sites' merged."""
        here = self._requests_here(namespace, network, after, limit)
        there = self._requests_there(namespace, network, after, limit)
        out = sorted(here + there, key=lambda r: (r.half.remote_network, r.half.site, r.half.namespace,
                                                  r.half.network, r.half.name))
        return out[:limit] if limit is not None else out

    def _requests_there(self, namespace: str, network: str | None, after, limit: int | None) -> list[PeeringRequest]:
        sql = (f"SELECT {_H_COLS}, n.prefixes FROM remote_halves h LEFT JOIN remote_networks n "
               "ON n.site=h.site AND n.namespace=h.namespace AND n.name=h.network "
               f"WHERE h.remote_namespace=? AND h.phase=? AND NOT {_ANSWERED} AND NOT {_REMOTE_DISMISSED}")
        args: list = [namespace, Phase.PENDING.value]
        if network is not None:
            sql += " AND h.remote_network=?"
            args.append(network)
        if after is not None:
            sql += " AND (h.remote_network, h.site, h.namespace, h.network, h.name) > (?, ?, ?, ?, ?)"
            args += list(after)
        sql += " ORDER BY h.remote_network, h.site, h.namespace, h.network, h.name"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [PeeringRequest(remote_half(row[:12]), tuple(json.loads(row[12] or "[]"))) for row in self._q(sql, args)]

    def _requests_here(self, namespace: str, network: str | None, after, limit: int | None) -> list[PeeringRequest]:
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
            # p.remote_site is "" here: the requester's site in the order
            sql += " AND (p.remote_network, p.remote_site, p.namespace, p.network, p.name) > (?, ?, ?, ?, ?)"
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
        if half.site:
            return self._one(f"SELECT count(*) FROM remote_halves h WHERE h.site=? AND h.namespace=? "
                             f"AND h.network=? AND h.name=? AND {_REMOTE_DISMISSED}",
                             (half.site, half.namespace, half.network, half.name))[0] > 0
        return self._one(
            "SELECT count(*) FROM request_dismissals WHERE namespace=? AND network=? AND requester_namespace=? "
            "AND requester_network=? AND requester_name=? AND requester_uid=? AND requester_create_time=?",
            _dismissal_key(half))[0] > 0

    def dismiss_request(self, half: Peering, now: datetime) -> bool:
        """Records that the target dismissed the request half ``half``
        makes; whether it had not already (its Watch event then says it went)."""
        if half.site:
            new = self._q("INSERT INTO remote_request_dismissals (site, namespace, network, requester_namespace, "
                          "requester_network, requester_name, requester_uid, requester_create_time, time) "
                          "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                          (half.site, *_dismissal_key(half), us(now))).rowcount > 0
            if new:
                self._request_event(half, EventType.DELETED)
            return new
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
        self.remote_request_follows(old, new)
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

    def remote_request_standing(self, half: Peering | None) -> bool:
        """Whether another site's half ``half`` (as the mirror holds it) is a
        request listed here: Pending, not answered by a half of the network
        it names, not dismissed."""
        if half is None or not half.site or half.phase != Phase.PENDING:
            return False   # no statement: most halves the exchange brings are Bound
        row = self._one(f"SELECT {_ANSWERED}, {_REMOTE_DISMISSED} FROM remote_halves h WHERE h.site=? "
                        "AND h.namespace=? AND h.network=? AND h.name=?",
                        (half.site, half.namespace, half.network, half.name))
        return row is not None and is_remote_request(half, bool(row[0]) or bool(row[1]))

    def remote_requests_of(self, site: str) -> dict[PeeringKey, Peering]:
        """The requests ``site``'s halves stand as here, in one statement
        (before a full copy replaces the mirror)."""
        rows = self._q(f"SELECT {_H_COLS} FROM remote_halves h WHERE h.site=? AND h.phase=? AND NOT {_ANSWERED} "
                       f"AND NOT {_REMOTE_DISMISSED}", (site, Phase.PENDING.value))
        return {p.key: p for p in map(remote_half, rows)}

    def remote_request_moved(self, was: Peering | None, key: PeeringKey) -> None:
        """Records the Watch event of another site's half ``key`` whose
        request stood as ``was`` (None: it stood not) before the exchange
        changed it; forgets its dismissal once it is gone."""
        now = self.get_peering(key)
        if now is None:
            self._q("DELETE FROM remote_request_dismissals WHERE site=? AND requester_namespace=? "
                    "AND requester_network=? AND requester_name=?", (key.site, key.namespace, key.network, key.name))
        standing = self.remote_request_standing(now)
        if standing and was is None:
            self._request_event(now, EventType.CREATED)
        elif was is not None and not standing:
            self._request_event(was, EventType.DELETED)

    def remote_request_follows(self, old: Peering | None, new: Peering | None) -> None:
        """Records the Watch event of the request another site's half makes
        when this site's half answering it is made (``old`` None) or deleted
        (``new`` None)."""
        mine = new if old is None else old
        if mine is None or not mine.remote_site or (old is not None and new is not None):
            return
        theirs = self.find_peering_to(NetworkKey(mine.remote_namespace, mine.remote_network, mine.remote_site),
                                      mine.network_key)
        if theirs is None or theirs.phase != Phase.PENDING or self.request_dismissed(theirs):
            return
        self._request_event(theirs, EventType.DELETED if old is None else EventType.CREATED)

    def _request_event(self, half: Peering, type_: str) -> None:
        values = None
        if type_ != EventType.DELETED:
            requester = self.get_network(half.network_key)
            prefixes = [str(x) for x in requester.prefixes] if requester is not None else []
            values = {"half": list(peering_values(half)), "prefixes": prefixes}
            if half.site:
                values["site"] = half.site
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
