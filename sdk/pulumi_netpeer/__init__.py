"""Declare netpeer networks and peerings in Pulumi programs.

    import pulumi
    import pulumi_netpeer as netpeer

    net = netpeer.Network("net-a", subnets=["10.1.0.0/24"])
    peer = netpeer.NetworkPeering("to-b", network=net.name,
                                  remote_namespace="team-b", remote_network="net-b")
    pulumi.export("phase", peer.phase)   # Pending until team-b consents, then Bound
    other = netpeer.get_network("net-c")  # an existing network: uid, subnets, peerings, ...

The requests to peer with your networks: ``get_peering_requests`` (docs/inbox.md).

Settings: ``netpeer:endpoint``, ``netpeer:token`` (secret), ``netpeer:caCert``
in the stack configuration, or ``NETPEER_ENDPOINT`` / ``NETPEER_TOKEN`` /
``NETPEER_CA_CERT`` in the environment.
"""

from pulumi_netpeer.get_network import GetNetworkResult, get_network
from pulumi_netpeer.network import InlinePeeringArgs, Network, NetworkArgs
from pulumi_netpeer.peering import NetworkPeering, NetworkPeeringArgs
from pulumi_netpeer.requests import GetPeeringRequestsResult, get_peering_requests

__all__ = ["Network", "NetworkArgs", "InlinePeeringArgs", "NetworkPeering", "NetworkPeeringArgs",
           "GetPeeringRequestsResult", "get_peering_requests", "get_network", "GetNetworkResult"]
