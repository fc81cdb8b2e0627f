"""The store's part of cross-site peering, one copy of SQL for every store.

Three tables (migration 4), and two more with a hash per mirrored item (migration 7):

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
- ``site_outbox``: what this site tells each other site, item by item
  (``netpeer.core.sides``), each with the sequence number of its last
  change; a removed item stays as a tombstone (no value) until the other
  site acknowledged it.
- ``site_links``: per link, the numbering and digest of what this site
  tells, what the other site acknowledged, and how far this site's mirror
  of the other side goes, with its digest.

A mixin: the transaction class provides ``_q(sql, args)`` running one
statement with ``?`` placeholders and returning a cursor.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Iterable

from netpeer.core.models import EventType, Network, NetworkKey, Peering, PeeringKey, Phase, Reason
from netpeer.core.sides import Digest, ItemKey, LinkState, ToldHalf, ToldNetwork
from netpeer.store.codec import dt, us

_RNET_COLS = "site, namespace, name, uid, prefixes, attachment"
_RHALF_COLS = ("site, namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
               "create_time, phase, conflicts, ready")


def remote_network(row) -> Network:
    return Network(namespace=row[1], name=row[2], uid=row[3], subnets=tuple(json.loads(row[4])), site=row[0])


def remote_half(row) -> Peering:
    """A half of another site as this site holds it: its network is there,
    its remote network here (``remote_site`` "")."""
    return Peering(namespace=row[1], network=row[2], name=row[3], remote_namespace=row[4], remote_network=row[5],
                   network_uid=row[6], remote_uid=row[7] or None, ttl=timedelta(0), create_time=dt(row[8]),
                   last_phase_transition_time=dt(row[8]), phase=Phase(row[9]), reason=Reason.AWAITING_REMOTE,
                   conflicts=tuple(json.loads(row[10])), ready=bool(row[11]), site=row[0])


def _hex(h: int) -> str:
    return f"{h:032x}"


_LINK_COLS = ("site, stream, head, horizon, out_count, out_xor, peer_stream, peer_ack, in_stream, in_seq, "
              "mirror_count, mirror_xor, resyncs_received, reachable, last_ok, last_error")


class SiteMirrorSql:
    """Cross-site reads and writes of a store transaction."""

    #: This site's networks whose own row or halves this transaction changed,
    #: or whose halves' partners in another site's mirror changed: what they
    #: tell other sites is looked at again before the commit
    #: (``netpeer.service.sites.SiteLinks.refresh``).
    networks_changed: set[NetworkKey]

    def _q(self, sql: str, args: tuple | list = ()):  # pragma: no cover - provided by the transaction
        raise NotImplementedError

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

    def mirror_clear(self, site: str) -> None:
        """Drops everything held of ``site``'s side (before a full copy)."""
        self._q("DELETE FROM remote_networks WHERE site=?", (site,))
        self._q("DELETE FROM remote_halves WHERE site=?", (site,))

    def forget_site(self, site: str) -> None:
        """Drops the mirror of a site that is no longer configured, and what
        this site told it; its requests in this site's inbox go (their
        Watch events say so)."""
        for half in self.remote_requests_of(site).values():   # provided by RequestsSql
            self._request_event(half, EventType.DELETED)
        self.mirror_clear(site)
        self.outbox_forget(site)
        self._q("DELETE FROM remote_request_dismissals WHERE site=?", (site,))

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
        # Every free slot below the highest taken one is in attachment_free, so
        # the lowest free one is two index look-ups (reading every slot of the
        # link cost 4.4 ms per first attachment at 10,000 networks on it).
        free = self._q("SELECT MIN(idx) FROM attachment_free WHERE site=?", (site,)).fetchone()[0]
        top = self._q("SELECT MAX(idx) FROM attachments WHERE site=?", (site,)).fetchone()[0]
        idx = 0 if top is None else top + 1
        if free is not None and free < idx:
            idx = free
            self._q("DELETE FROM attachment_free WHERE site=? AND idx=?", (site, idx))
        self._q("INSERT INTO attachments (network_uid, site, idx) VALUES (?,?,?)", (network_uid, site, idx))
        self._note_uid(network_uid)
        return idx

    def attached_to(self, site: str) -> list[str]:
        """The uids of this site's networks attached to the link with ``site``."""
        return [r[0] for r in self._q("SELECT network_uid FROM attachments WHERE site=? ORDER BY idx", (site,))]

    def release_attachment(self, network_uid: str, site: str) -> None:
        idx = self.attachment(network_uid, site)
        if idx is None:
            return
        self._q("DELETE FROM attachments WHERE network_uid=? AND site=?", (network_uid, site))
        top = self._q("SELECT MAX(idx) FROM attachments WHERE site=?", (site,)).fetchone()[0]
        if top is None or idx > top:   # no slot taken above it: it and every free one above the highest go
            self._q("DELETE FROM attachment_free WHERE site=? AND idx > ?", (site, -1 if top is None else top))
        else:
            self._q("INSERT INTO attachment_free (site, idx) VALUES (?,?)", (site, idx))
        self._note_uid(network_uid)

    def _note_uid(self, network_uid: str) -> None:
        row = self._q("SELECT namespace, name FROM networks WHERE uid=?", (network_uid,)).fetchone()
        if row:
            self.networks_changed.add(NetworkKey(row[0], row[1]))

    def sites_of(self, network: NetworkKey) -> set[str]:
        """The sites that ``network``'s halves name, and those it told something."""
        return {r[0] for r in self._q(
            "SELECT DISTINCT remote_site FROM peerings WHERE namespace=? AND network=? AND remote_site != '' "
            "UNION SELECT DISTINCT site FROM site_outbox WHERE namespace=? AND network=?",
            (network.namespace, network.name, network.namespace, network.name))}

    def networks_towards(self, remote: NetworkKey) -> set[NetworkKey]:
        """This site's networks with a half naming ``remote`` (of another site)."""
        return {NetworkKey(r[0], r[1]) for r in self._q(
            "SELECT namespace, network FROM peerings WHERE remote_namespace=? AND remote_network=? AND remote_site=?",
            (remote.namespace, remote.name, remote.site))}

    # ------------------------------------------------ what this site tells (site_outbox)
    def outbox_of(self, site: str, network: NetworkKey) -> dict[ItemKey, tuple[str | None, int, int]]:
        """What this site told ``site`` of ``network``: item -> (value, hash, seq)."""
        return {ItemKey(r[0], network.namespace, network.name, r[1]): (r[2], int(r[3], 16) if r[3] else 0, r[4])
                for r in self._q("SELECT kind, name, value, hash, seq FROM site_outbox WHERE site=? AND namespace=? "
                                 "AND network=?", (site, network.namespace, network.name))}

    def outbox_put(self, site: str, key: ItemKey, value: str | None, h: int, seq: int) -> None:
        """Records an item's new value (None: removed, a tombstone) at ``seq``."""
        self._q("DELETE FROM site_outbox WHERE site=? AND namespace=? AND network=? AND kind=? AND name=?",
                (site, key.namespace, key.network, key.kind, key.name))
        self._q("INSERT INTO site_outbox (site, namespace, network, kind, name, value, hash, seq) "
                "VALUES (?,?,?,?,?,?,?,?)", (site, key.namespace, key.network, key.kind, key.name, value,
                                             _hex(h) if value is not None else "", seq))

    def outbox_since(self, site: str, since: int, limit: int) -> list[tuple[ItemKey, str | None, int]]:
        """What changed after ``since``, oldest first, at most ``limit``."""
        return [(ItemKey(r[0], r[1], r[2], r[3]), r[4], r[5]) for r in self._q(
            "SELECT kind, namespace, network, name, value, seq FROM site_outbox WHERE site=? AND seq > ? "
            "ORDER BY seq LIMIT ?", (site, since, limit))]

    def outbox_live(self, site: str) -> list[tuple[ItemKey, str]]:
        """Everything this site tells ``site`` now."""
        return [(ItemKey(r[0], r[1], r[2], r[3]), r[4]) for r in self._q(
            "SELECT kind, namespace, network, name, value FROM site_outbox WHERE site=? AND value IS NOT NULL "
            "ORDER BY namespace, network, kind, name", (site,))]

    def outbox_tombstones(self, site: str) -> list[int]:
        """The sequence numbers of the removals still kept for ``site``, oldest first."""
        return [r[0] for r in self._q("SELECT seq FROM site_outbox WHERE site=? AND value IS NULL ORDER BY seq",
                                      (site,))]

    def outbox_prune(self, site: str, upto: int) -> int:
        """Forgets the removals up to ``upto`` (acknowledged, or too old)."""
        return self._q("DELETE FROM site_outbox WHERE site=? AND value IS NULL AND seq <= ?", (site, upto)).rowcount

    def outbox_forget(self, site: str) -> None:
        """Forgets all that was told to ``site`` (a link no longer configured)."""
        self._q("DELETE FROM site_outbox WHERE site=?", (site,))
        self._q("DELETE FROM site_links WHERE site=?", (site,))

    # ------------------------------------------------ links (site_links)
    def get_link(self, site: str) -> LinkState | None:
        r = self._q(f"SELECT {_LINK_COLS} FROM site_links WHERE site=?", (site,)).fetchone()
        if r is None:
            return None
        return LinkState(r[0], r[1], r[2], r[3], Digest(r[4], int(r[5], 16)), r[6], r[7], r[8], r[9],
                         Digest(r[10], int(r[11], 16)), r[12], bool(r[13]),
                         dt(r[14]) if r[14] is not None else None, r[15])

    def put_link(self, link: LinkState) -> None:
        self._q("DELETE FROM site_links WHERE site=?", (link.site,))
        self._q(f"INSERT INTO site_links ({_LINK_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (link.site, link.stream, link.head, link.horizon, link.out.count, link.out.hex(), link.peer_stream,
                 link.peer_ack, link.in_stream, link.in_seq, link.mirror.count, link.mirror.hex(),
                 link.resyncs_received, int(link.reachable), us(link.last_ok) if link.last_ok else None,
                 link.last_error))

    def links(self) -> list[LinkState]:
        """Every link this store keeps state of."""
        return [link for link in (self.get_link(r[0]) for r in self._q("SELECT site FROM site_links ORDER BY site"))
                if link is not None]

    # ------------------------------------------------ the mirror, item by item
    def mirror_hash(self, site: str, key: ItemKey) -> int | None:
        """The hash of the mirrored item ``key`` of ``site``, if held."""
        if key.kind == "n":
            row = self._q("SELECT hash FROM remote_networks WHERE site=? AND namespace=? AND name=?",
                          (site, key.namespace, key.network)).fetchone()
        else:
            row = self._q("SELECT hash FROM remote_halves WHERE site=? AND namespace=? AND network=? AND name=?",
                          (site, key.namespace, key.network, key.name)).fetchone()
        if row is None:
            return None
        return int(row[0], 16) if row[0] else 0

    def mirror_remove(self, site: str, key: ItemKey) -> None:
        if key.kind == "n":
            self._q("DELETE FROM remote_networks WHERE site=? AND namespace=? AND name=?",
                    (site, key.namespace, key.network))
        else:
            self._q("DELETE FROM remote_halves WHERE site=? AND namespace=? AND network=? AND name=?",
                    (site, key.namespace, key.network, key.name))

    def mirror_put(self, site: str, item: ToldNetwork | ToldHalf, h: int) -> None:
        """Holds ``item`` (checked by the caller) as ``site`` told it."""
        self.mirror_remove(site, item.key)
        if isinstance(item, ToldNetwork):
            self._q(f"INSERT INTO remote_networks ({_RNET_COLS}, hash) VALUES (?,?,?,?,?,?,?)",
                    (site, item.namespace, item.name, item.uid, json.dumps(list(item.prefixes)), item.slot, _hex(h)))
        else:
            self._q(f"INSERT INTO remote_halves ({_RHALF_COLS}, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (site, item.namespace, item.network, item.name, item.remote_namespace, item.remote_network,
                     item.network_uid, item.remote_uid, us(item.create_time), item.phase.value,
                     json.dumps(list(item.conflicts)), int(item.ready), _hex(h)))

    def attachment_unused(self, network_uid: str, site: str, since: datetime) -> None:
        """Notes that the network has had no half towards ``site`` since
        ``since`` (kept if noted already; ``attach`` clears it)."""
        self._q("UPDATE attachments SET unused_since=? WHERE network_uid=? AND site=? AND unused_since IS NULL",
                (us(since), network_uid, site))

    def idle_attachments(self) -> list[tuple[str, str, datetime | None]]:
        """(network uid, site, unused since or None if not noted yet) of the
        attachments whose network has no half towards their site.

        The halves are looked up by their key (namespace, network), through
        the network: one index search per attachment. By ``network_uid``
        SQLite searched ``peerings_by_site``, every half towards the site
        per attachment: at 10,000 attachments on a link, seconds per sweep."""
        return [(r[0], r[1], dt(r[2]) if r[2] is not None else None) for r in self._q(
            "SELECT a.network_uid, a.site, a.unused_since FROM attachments a "
            "LEFT JOIN networks n ON n.uid = a.network_uid WHERE NOT EXISTS "
            "(SELECT 1 FROM peerings p WHERE p.namespace = n.namespace AND p.network = n.name "
            "AND p.remote_site = a.site AND p.remote_site != '') "
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
