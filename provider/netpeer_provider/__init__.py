"""Pulumi dynamic providers for netpeer.

They live in this importable module so that Pulumi pickles them by reference:
the state holds a few dozen bytes naming the class, no code, and upgrading
this package takes effect on the next refresh or update. The provider objects
carry no attributes at all; settings (endpoint, token, CA) are read at run
time from the stack configuration given to ``configure`` or the environment.
"""

from netpeer_provider.network import NetworkProvider
from netpeer_provider.peering import NetworkPeeringProvider

__all__ = ["NetworkProvider", "NetworkPeeringProvider"]
