"""The per-namespace quotas (``[quotas]`` in the configuration): each check
answers RESOURCE_EXHAUSTED with one line naming the quota and what to do,
and, raised inside a write, changes nothing."""

from __future__ import annotations

from netpeer.core.models import Network, Peering, Phase, Quotas
from netpeer.errors import ResourceExhausted
from netpeer.reasons import Reason
from netpeer.store.base import Transaction


def check(used: int, limit: int, whose: str, what: str, key: str, hint: str = "delete some") -> None:
    """Refuses one more when ``used`` reached ``limit`` (``quotas.<key>``)."""
    if used >= limit:
        raise ResourceExhausted(
            f"quota: {whose} {used} {what}, the most allowed (quotas.{key} = {limit}); nothing was "
            f"changed: {hint}, or ask the operator to raise the quota", field=key, value=limit,
                                reason=Reason.QUOTA_EXCEEDED)


def check_withdrawal(tx: Transaction, quotas: Quotas, old: Peering, partner: Peering | None, before: int) -> None:
    """After ``old`` was deleted in ``tx`` (its namespace had ``before``
    Pending or Failed halves): refuses a withdrawal that turned a Bound half
    of the writer's own namespace (``partner``) Pending and left that
    namespace over ``pending_peerings_per_namespace``. Halves of other
    namespaces a withdrawal turns Pending are not the writer's to refuse:
    they count against their own namespace until they expire or go."""
    namespace, limit = old.namespace, quotas.pending_peerings_per_namespace
    if partner is None or partner.namespace != namespace or partner.site or partner.phase != Phase.BOUND:
        return
    after = tx.count_pending(namespace)
    if after > before and after > limit:
        raise ResourceExhausted(
            f"quota: deleting {old.key} would turn its Bound other half {partner.key} Pending and leave namespace "
            f"{namespace!r} {after} Pending or Failed peerings, more than allowed "
            f"(quotas.pending_peerings_per_namespace = {limit}); nothing was changed: delete {after - limit} "
            f"Pending or Failed peering(s) of {namespace!r} first, or ask the operator to raise the quota",
            field="pending_peerings_per_namespace", value=limit, reason=Reason.QUOTA_EXCEEDED)


def check_attachment(tx: Transaction, quotas: Quotas, network: Network, site: str) -> None:
    """Refuses a network's first half towards ``site`` when its namespace
    holds ``site_attachments_per_namespace`` slots on that link already."""
    check(tx.count_attachments(network.namespace, site), quotas.site_attachments_per_namespace,
          f"namespace {network.namespace!r} has", f"networks attached to the link with site {site}",
          "site_attachments_per_namespace",
          hint=f"withdraw the halves towards {site} of networks that need none (a network's slot is released "
               "attachment_grace after its last half there went)")
