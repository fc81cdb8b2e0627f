"""A network's slots on the links to other sites (its attachments: one
transit port each, docs/cross-site.md): when one is unused, when it is
released, and what the links hold (``netpeer status``).

A slot stays while its network has a half towards that site and for
``attachment_grace`` after the last one went: a transit port deleted and
made again within seconds confused OVN 23.03's ovn-controller, so a half
made within the grace keeps the same port, and one made within seconds of a
release is asked to wait (``SiteLinks.attach``)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Callable, Iterable

from netpeer.core.models import Peering
from netpeer.core.validate import format_duration
from netpeer.store.base import Store, Transaction

LOG = logging.getLogger(__name__)

#: Namespaces named per link in the status, the largest first.
TOP_NAMESPACES = 5


def note_unused(tx: Transaction, old: Peering, now: datetime) -> None:
    """After the half ``old`` was deleted: when it was its network's last
    half towards its remote site, that slot is unused from ``now``."""
    if old.remote_site and not old.site and not tx.has_peering_to_site(old.network_key, old.remote_site):
        tx.attachment_unused(old.network_uid, old.remote_site, now)


def idle(tx: Transaction, now: datetime, grace: timedelta) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(attachments unused but not noted yet, attachments unused for longer
    than ``grace``), each as (network uid, site)."""
    unnoted, due = [], []
    for uid, site, since in tx.idle_attachments():
        if since is None:
            unnoted.append((uid, site))
        elif now - since >= grace:
            due.append((uid, site))
    return unnoted, due


def release_idle(tx: Transaction, now: datetime, grace: timedelta) -> tuple[list[tuple[str, str]], set[str]]:
    """Notes the unused attachments not noted yet (an older store, a crash)
    and releases those unused for longer than ``grace``: (the attachments
    released, the networks to re-program), as a write returns them."""
    unnoted, due = idle(tx, now, grace)
    for uid, site in unnoted:
        tx.attachment_unused(uid, site, now)
    for uid, site in due:
        tx.release_attachment(uid, site)
    return due, {uid for uid, _ in due}


def release_unused(store: Store, writes, clock: Callable[[], datetime], grace: timedelta,
                   on_released: Callable[[Iterable[tuple[str, str]]], None] | None = None) -> int:
    """The sweep's part: ``release_idle`` in one write (``writes``, the
    ``WriteQueue``), after a read that finds something to do (at rest it
    costs no write); ``on_released`` is told what went. How many."""
    with store.read() as tx:
        unnoted, due = idle(tx, clock(), grace)
    if not unnoted and not due:
        return 0
    released = writes.run(lambda tx: release_idle(tx, clock(), grace))
    for uid, site in released:
        LOG.info("network %s: released its slot on the link with site %s (no half towards it for %s)", uid, site,
                 format_duration(grace))
    if released and on_released is not None:
        on_released(released)
    return len(released)


def use(tx: Transaction) -> dict[str, tuple[int, tuple[tuple[str, int], ...]]]:
    """Per link: (slots held, the namespaces holding most, with how many)."""
    out = {}
    for site, by_namespace in tx.attachment_use().items():
        top = sorted(by_namespace.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_NAMESPACES]
        out[site] = (sum(by_namespace.values()), tuple(top))
    return out
