"""What a ``Service`` is built with beyond its store and its dataplane."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from netpeer.core.models import Quotas, TokenLimits


@dataclasses.dataclass(frozen=True)
class Settings:
    """The service's part of netpeerd's configuration (``netpeer.config.Config``,
    whose defaults these are), handed to the service and its parts when
    they are made."""

    #: The ``netpeer:owner`` of the dataplane rows this service writes.
    owner: str = "netpeer"
    quotas: Quotas = Quotas()
    #: Per-token budgets of answers that keep nothing (``netpeer.service.budget``).
    limits: TokenLimits = TokenLimits()
    #: A network's slot on a site link is released this long after its last
    #: half towards that site went (``netpeer.service.slots``).
    attachment_grace: timedelta = timedelta(seconds=60)
    #: A sweep that would delete more than this share of our dataplane rows
    #: (and at least ``Reconciler.MIN_GUARDED`` of them) stops and reports instead.
    repair_max_delete_share: float = 0.25
    #: Every network is compared with the dataplane once per this long, a
    #: slice per sweep.
    full_sweep_interval: timedelta = timedelta(hours=1)
    #: netpeerd --accept-rollback: the first sweep may delete more than
    #: ``repair_max_delete_share`` (the sweeps start after the start-up
    #: check accepted the rollback; netpeerd stops if it refuses).
    allow_mass_delete_once: bool = False
