"""The dynamic provider behind ``pulumi_netpeer.Network``: a thin Pulumi face
over ``netpeer_provider.core.network``.

Its import path is part of users' stack states (the provider is pickled by
reference): keep ``netpeer_provider.network.NetworkProvider`` where it is.
"""

from __future__ import annotations

from netpeer_provider.common import CoreProvider
from netpeer_provider.core import network


class NetworkProvider(CoreProvider):
    """A network and its inline peerings. No state on the object."""

    ops = network
