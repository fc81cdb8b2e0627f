"""``get_peering_requests``: the requests other networks make to peer with
the networks of a namespace (docs/inbox.md), read while the program runs, so
that a team accepts one with a ``NetworkPeering`` built from its fields::

    inbox = netpeer.get_peering_requests(network="net-b")
    for r in inbox.requests:
        netpeer.NetworkPeering(f"from-{r['requester_network']}", network=r["network"],
                               remote_namespace=r["requester_namespace"],
                               remote_network=r["requester_network"], remote_uid=r["requester_uid"])

Settings as for the resources: ``netpeer:endpoint``, ``netpeer:token``, ...
in the stack configuration, else ``NETPEER_ENDPOINT``, ``NETPEER_TOKEN``, ...
The plugin's face (``pulumi-resource-netpeer``) offers the same function as
``netpeer:index:getPeeringRequests``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pulumi

from netpeer_provider import core
from netpeer_provider.common import TERMS, NetpeerProviderError
from netpeer_provider.core import inbox, schema


@dataclasses.dataclass(frozen=True)
class GetPeeringRequestsResult:
    namespace: str
    network: str
    #: Each with ``inbox.REQUEST_FIELDS`` (snake_case keys).
    requests: list[dict[str, Any]]


def get_peering_requests(namespace: Optional[str] = None, network: Optional[str] = None) -> GetPeeringRequestsResult:
    """The requests not dismissed to ``namespace`` (the token's, when it
    grants exactly one), to ``network`` only when given."""
    config = pulumi.Config("netpeer")
    settings = {f.name: config.get(schema.camel_case(f.name)) for f in schema.PROVIDER.fields}
    try:
        session = core.Session(core.Settings.resolve({k: v for k, v in settings.items() if v}, terms=TERMS), TERMS)
        return GetPeeringRequestsResult(**inbox.list_requests(session, namespace, network))
    except core.ProviderError as exc:
        raise NetpeerProviderError(exc.message, exc) from None
