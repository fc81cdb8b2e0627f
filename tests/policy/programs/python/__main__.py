"""A network and one peering whose remote, site and description come from the stack's config."""

import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
network = netpeer.Network("net-p", subnets=["10.7.0.0/24"])
netpeer.NetworkPeering(
    "to-remote",
    network=network.name,
    remote_namespace=config.require("remoteNamespace"),
    remote_network="net-r",
    remote_site=config.get("remoteSite") or "",
    description=config.get("description") or "",
)
