"""The dynamic provider behind ``pulumi_netpeer.NetworkPeering``: a thin
Pulumi face over ``netpeer_provider.core.peering``.

Its import path is part of users' stack states (the provider is pickled by
reference): keep ``netpeer_provider.peering.NetworkPeeringProvider`` where it is.
"""

from __future__ import annotations

from netpeer_provider.common import CoreProvider
from netpeer_provider.core import peering


class NetworkPeeringProvider(CoreProvider):
    """One side's consent to peer two networks. No state on the object."""

    ops = peering
