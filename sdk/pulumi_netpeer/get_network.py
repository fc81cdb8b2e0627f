"""``get_network``: reads an existing network, like the plugin's
``netpeer:index:getNetwork`` function and OpenTofu's ``netpeer_network``
data source.

    net = netpeer.get_network("net-a")                   # the token's namespace
    pulumi.export("uid", net.uid)

It runs while the program runs (preview included), with the stack's
``netpeer:*`` settings, else the ``NETPEER_*`` environment (as the
resources). A network that does not exist, or that the token cannot see,
stops the program with one line naming it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pulumi
from pulumi.runtime import get_config

from netpeer_provider import core
from netpeer_provider.core import schema
from netpeer_provider.pulumi_engine import PulumiTerms


@dataclasses.dataclass(frozen=True)
class GetNetworkResult:
    """The network as the service has it (the ``Network`` resource's outputs)."""

    id: str
    """``namespaces/{namespace}/networks/{name}``."""
    namespace: str
    name: str
    uid: str
    subnets: list[str]
    routes: list[str]
    description: str
    peerings: list[dict[str, Any]]
    """Every peering of the network, with its phase, reason and dataplane (``Network.peerings``)."""
    peered_networks: list[dict[str, Any]]
    """The networks it is Bound to: ``namespace``, ``name``, ``uid``, ``site`` and ``prefixes``."""


def get_network(name: str, namespace: Optional[str] = None) -> GetNetworkResult:
    """Reads the network ``name`` of ``namespace`` (default: the token's)."""
    config = {f.name: get_config(f"netpeer:{schema.camel_case(f.name)}") for f in schema.PROVIDER.fields}
    terms = PulumiTerms()
    try:
        session = core.Session(core.Settings.resolve(config, terms=terms), terms)
        found = core.network.lookup(session, name, namespace)
    except core.ProviderError as exc:
        raise pulumi.RunError(exc.message) from None
    return GetNetworkResult(id=found.id, **{f.name: found.outputs.get(f.name)
                                            for f in schema.GET_NETWORK.outputs()})
