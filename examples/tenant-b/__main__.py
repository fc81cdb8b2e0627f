"""Team B: a network, and team B's consent to peer it with team A's network.

Settings (pulumi config): netpeer:endpoint, netpeer:token (secret, granting
team-b), and optionally subnets, routes, remoteNamespace, remoteNetwork,
waitForBound.
"""

import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()

network = netpeer.Network(
    "net-b",
    subnets=config.get_object("subnets") or ["10.2.0.0/24", "fd00:b::/64"],
    routes=config.get_object("routes") or [],
    description="team B's network",
)

peering = netpeer.NetworkPeering(
    "to-a",
    network=network.name,
    remote_namespace=config.get("remoteNamespace") or "team-a",
    remote_network=config.get("remoteNetwork") or "net-a",
    description="team B consents to team A",
    wait_for_bound=config.get_float("waitForBound") or 0,
)

pulumi.export("network_uid", network.uid)
pulumi.export("phase", peering.phase)
pulumi.export("reason", peering.reason)
pulumi.export("remote_uid", peering.remote_uid)
pulumi.export("peered_networks", network.peered_networks)
