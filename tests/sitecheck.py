"""The check the cross-site tests share: what each site tells each other one
and what that one holds of it equal the whole side computed from scratch
(``netpeer.service.sites.whole_side``, the reference the changes stand in
for), and the digests of both ends of every link agree."""

from __future__ import annotations

from netpeer.core import sides
from netpeer.service.sites import whole_side


def mirror_items(tx, site: str) -> dict:
    """What a store holds of ``site``'s side, as encoded items."""
    networks, halves = tx.mirror_of(site)
    items = {}
    for n, slot in networks:
        i = sides.ToldNetwork(n.namespace, n.name, n.uid, n.subnets, slot)
        items[i.key] = sides.encode(i)
    for h in halves:
        i = sides.ToldHalf(h.namespace, h.network, h.name, h.remote_namespace, h.remote_network, h.network_uid,
                           h.remote_uid or "", h.create_time, h.phase, h.conflicts, h.ready)
        items[i.key] = sides.encode(i)
    return items


def diff(a: dict, b: dict) -> str:
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return f"{len(keys)} item(s), first {tuple(keys[0])}: {a.get(keys[0])} vs {b.get(keys[0])}" if keys else "none"


def link_problems(stores: dict) -> list[str]:
    """``stores``: site name -> its store. Everything that differs from the reference."""
    out = []
    for a in stores:
        for b in stores:
            if a == b:
                continue
            with stores[a].read() as tx:
                whole = {k: sides.encode(v) for k, v in whole_side(tx, a, b).items()}
                told = dict(tx.outbox_live(b))
                link = tx.get_link(b)
            with stores[b].read() as tx:
                held = mirror_items(tx, a)
                back = tx.get_link(a)
            if told != whole:
                out.append(f"{a}->{b}: the outbox differs from the whole side: {diff(told, whole)}")
            if held != whole:
                out.append(f"{a}->{b}: {b}'s mirror differs from {a}'s whole side: {diff(held, whole)}")
            if link is not None and back is not None and link.out != back.mirror:
                out.append(f"{a}->{b}: digests differ: told {link.out}, held {back.mirror}")
    return out
