"""A tenant of one site: a network, and its half of a peering with a network
of another site.

Settings (pulumi config): netpeer:endpoint and netpeer:token (that site's
netpeerd, a token granting the tenant), network, subnets, peering,
remoteSite, remoteNamespace, remoteNetwork.
"""

import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()

network = netpeer.Network(
    config.require("network"),
    subnets=config.require_object("subnets"),
)

peering = netpeer.NetworkPeering(
    config.require("peering"),
    network=network.name,
    remote_site=config.require("remoteSite"),
    remote_namespace=config.require("remoteNamespace"),
    remote_network=config.require("remoteNetwork"),
)

pulumi.export("network_uid", network.uid)
pulumi.export("phase", peering.phase)
pulumi.export("reason", peering.reason)
pulumi.export("remote_site", peering.remote_site)
pulumi.export("remote_uid", peering.remote_uid)
