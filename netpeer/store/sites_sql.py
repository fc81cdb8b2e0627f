"""The store's part of cross-site peering, one copy of SQL for every store.

Three tables (migration 4):

- ``remote_networks``: the networks of other sites represented here (RFD 119),
  as their site told this one: uid, what they export, and their attachment
  to the link between the two sites. Only networks one of whose halves names
  a network of this site are ever told.
- ``remote_halves``: the mirror of the other sites' halves that name a network
  of this site, as their site last told it (with the site's own conflicts).
- ``attachments``: this site's networks attached to the link with another
  site, the slot (index) each was given there, and since when a network has
  had no half towards that site (migration 5: ``unused_since``, NULL while
  it has one); the sweep releases slots unused for longer than
  ``attachment_grace`` (``netpeer.service.slots``).

A mixin: the transaction class provides ``_q(sql, args)`` running one
statement with ``?`` placeholders and returning a cursor.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Iterable

from netpeer.core.models import Network, NetworkKey, Peering, PeeringKey, Phase, Reason

_RNET_COLS = "site, namespace, name, uid, prefixes, attachment"
_RHALF_COLS = ("site, namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
               "create_time, phase, conflicts, ready")


def _dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


def _us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def remote_network(row) -> Network:
    return Network(namespace=row[1], name=row[2], uid=row[3], subnets=tuple(json.loads(row[4])), site=row[0])


def remote_half(row) -> Peering:
    """A half of another site as this site holds it: its network is there,
    its remote network here (``remote_site`` "")."""
    return Peering(namespace=row[1], network=row[2], name=row[3], remote_namespace=row[4], remote_network=row[5],
                   network_uid=row[6], remote_uid=row[7] or None, ttl=timedelta(0), create_time=_dt(row[8]),
                   last_phase_transition_time=_dt(row[8]), phase=Phase(row[9]), reason=Reason.AWAITING_REMOTE,
                   conflicts=tuple(json.loads(row[10])), ready=bool(row[11]), site=row[0])


class SiteMirrorSql:
    """Cross-site reads and writes of a store transaction."""

    #: The other sites whose view of this site this transaction changed (its
    #: halves naming them, their networks, attachments): told after the commit.
    sites_changed: set[str]

    def _q(self, sql: str, args: tuple | list = ()):  # pragma: no cover - provided by the transaction
        raise NotImplementedError

    def _mark_sites_of(self, network: NetworkKey) -> None:
        self.sites_changed.update(r[0] for r in self._q(
            "SELECT DISTINCT remote_site FROM peerings WHERE namespace=? AND network=? AND remote_site != ''",
            (network.namespace, network.name)))

    # ------------------------------------------------ the other sites' side
    def _remote_network(self, key: NetworkKey) -> Network | None:
        row = self._q(f"SELECT {_RNET_COLS} FROM remote_networks WHERE site=? AND namespace=? AND name=?",
                      (key.site, key.namespace, key.name)).fetchone()
        return remote_network(row) if row else None

    def _remote_half(self, key: PeeringKey) -> Peering | None:
        row = self._q(f"SELECT {_RHALF_COLS} FROM remote_halves WHERE site=? AND namespace=? AND network=? "
                      "AND name=?", (key.site, key.namespace, key.network, key.name)).fetchone()
        return remote_half(row) if row else None

    def _remote_half_to(self, local: NetworkKey, remote: NetworkKey) -> Peering | None:
        """The half of ``local`` (a network of another site) naming ``remote`` (here)."""
        if remote.site:
            return None
        row = self._q(f"SELECT {_RHALF_COLS} FROM remote_halves WHERE site=? AND namespace=? AND network=? "
                      "AND remote_namespace=? AND remote_network=?",
                      (local.site, local.namespace, local.name, remote.namespace, remote.name)).fetchone()
        return remote_half(row) if row else None

    def _remote_halves_of(self, network: NetworkKey) -> list[Peering]:
        return [remote_half(r) for r in self._q(
            f"SELECT {_RHALF_COLS} FROM remote_halves WHERE site=? AND namespace=? AND network=? ORDER BY name",
            (network.site, network.namespace, network.name))]

    def remote_attachment(self, site: str, uid: str) -> int | None:
        """The slot of another site's network ``uid`` on the link with this site."""
        row = self._q("SELECT attachment FROM remote_networks WHERE site=? AND uid=?", (site, uid)).fetchone()
        return row[0] if row else None

    def mirror_of(self, site: str) -> tuple[list[tuple[Network, int | None]], list[Peering]]:
        """What ``site`` last told this one: its networks (with their
        attachment slots) and its halves, in a stable order."""
        networks = [(remote_network(r), r[5]) for r in self._q(
            f"SELECT {_RNET_COLS} FROM remote_networks WHERE site=? ORDER BY namespace, name", (site,))]
        halves = [remote_half(r) for r in self._q(
            f"SELECT {_RHALF_COLS} FROM remote_halves WHERE site=? ORDER BY namespace, network, name", (site,))]
        return networks, halves

    def replace_mirror(self, site: str, networks: Iterable[tuple[Network, int | None]],
                       halves: Iterable[Peering]) -> None:
        """Replaces all that this site holds of ``site``'s side."""
        self._q("DELETE FROM remote_networks WHERE site=?", (site,))
        self._q("DELETE FROM remote_halves WHERE site=?", (site,))
        for n, attachment in networks:
            self._q(f"INSERT INTO remote_networks ({_RNET_COLS}) VALUES (?,?,?,?,?,?)",
                    (site, n.namespace, n.name, n.uid, json.dumps(list(n.subnets)), attachment))
        for h in halves:
            self._q(f"INSERT INTO remote_halves ({_RHALF_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (site, h.namespace, h.network, h.name, h.remote_namespace, h.remote_network, h.network_uid,
                     h.remote_uid or "", _us(h.create_time), h.phase.value, json.dumps(list(h.conflicts)),
                     int(h.ready)))

    def forget_site(self, site: str) -> None:
        """Drops the mirror of a site that is no longer configured."""
        self.replace_mirror(site, (), ())

    def mirrored_sites(self) -> list[str]:
        return [r[0] for r in self._q("SELECT DISTINCT site FROM remote_halves UNION "
                                      "SELECT DISTINCT site FROM remote_networks ORDER BY 1")]

    # ------------------------------------------------ this site's side
    def peering_sites(self) -> list[str]:
        """The other sites named by this site's halves."""
        return [r[0] for r in self._q("SELECT DISTINCT remote_site FROM peerings WHERE remote_site != '' "
                                      "ORDER BY 1")]

    def has_peering_to_site(self, network: NetworkKey, site: str) -> bool:
        return self._q("SELECT 1 FROM peerings WHERE namespace=? AND network=? AND remote_site=? LIMIT 1",
                       (network.namespace, network.name, site)).fetchone() is not None

    def attachment(self, network_uid: str, site: str) -> int | None:
        """The slot of this site's network on the link with ``site``, if attached."""
        row = self._q("SELECT idx FROM attachments WHERE network_uid=? AND site=?", (network_uid, site)).fetchone()
        return row[0] if row else None

    def attachments_of(self, network_uid: str) -> dict[str, int]:
        return {r[0]: r[1] for r in self._q("SELECT site, idx FROM attachments WHERE network_uid=? ORDER BY site",
                                             (network_uid,))}

    def attach(self, network_uid: str, site: str) -> int:
        """Attaches a network to the link with ``site`` (idempotent): its slot,
        the lowest free one; an attachment already there is in use again."""
        have = self.attachment(network_uid, site)
        if have is not None:
            self._q("UPDATE attachments SET unused_since=NULL WHERE network_uid=? AND site=? "
                    "AND unused_since IS NOT NULL", (network_uid, site))
            return have
        used = [r[0] for r in self._q("SELECT idx FROM attachments WHERE site=? ORDER BY idx", (site,))]
        idx = next((i for i, u in enumerate(used) if i != u), len(used))
        self._q("INSERT INTO attachments (network_uid, site, idx) VALUES (?,?,?)", (network_uid, site, idx))
        self.sites_changed.add(site)
        return idx

    def release_attachment(self, network_uid: str, site: str) -> None:
        if self._q("DELETE FROM attachments WHERE network_uid=? AND site=?", (network_uid, site)).rowcount:
            self.sites_changed.add(site)

    def attachment_unused(self, network_uid: str, site: str, since: datetime) -> None:
        """Notes that the network has had no half towards ``site`` since
        ``since`` (kept if noted already; ``attach`` clears it)."""
        self._q("UPDATE attachments SET unused_since=? WHERE network_uid=? AND site=? AND unused_since IS NULL",
                (_us(since), network_uid, site))

    def idle_attachments(self) -> list[tuple[str, str, datetime | None]]:
        """(network uid, site, unused since or None if not noted yet) of the
        attachments whose network has no half towards their site."""
        return [(r[0], r[1], _dt(r[2]) if r[2] is not None else None) for r in self._q(
            "SELECT a.network_uid, a.site, a.unused_since FROM attachments a WHERE NOT EXISTS "
            "(SELECT 1 FROM peerings p WHERE p.network_uid = a.network_uid AND p.remote_site = a.site "
            "AND p.remote_site != '') "
            "ORDER BY a.site, a.idx")]

    def count_attachments(self, namespace: str, site: str) -> int:
        """The slots the networks of ``namespace`` hold on the link with ``site``."""
        return self._q("SELECT COUNT(*) FROM attachments a JOIN networks n ON n.uid = a.network_uid "
                       "WHERE a.site=? AND n.namespace=?", (site, namespace)).fetchone()[0]

    def attachment_use(self) -> dict[str, dict[str, int]]:
        """Slots held on each link, by namespace: {site: {namespace: slots}}."""
        out: dict[str, dict[str, int]] = {}
        for site, namespace, count in self._q(
                "SELECT a.site, n.namespace, COUNT(*) FROM attachments a JOIN networks n ON n.uid = a.network_uid "
                "GROUP BY a.site, n.namespace"):
            out.setdefault(site, {})[namespace] = count
        return out
