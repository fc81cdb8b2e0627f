"""Team A: a network, and team A's consent to peer it with team B's network.

Settings (pulumi config): netpeer:endpoint, netpeer:token (secret, granting
team-a), and optionally namespace, subnets, remoteNamespace, remoteNetwork,
remoteSite (team B's site, when it is another site), remoteUid (pins team B's
network), description, waitForBound.
"""

import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()

network = netpeer.Network(
    "net-a",
    namespace=config.get("namespace"),                  # default: the token's namespace
    subnets=config.get_object("subnets") or ["10.1.0.0/24", "fd00:a::/64"],
    description="team A's network",
)

peering = netpeer.NetworkPeering(
    "to-b",
    network=network.name,
    remote_namespace=config.get("remoteNamespace") or "team-b",
    remote_network=config.get("remoteNetwork") or "net-b",
    remote_site=config.get("remoteSite"),               # empty: team B's network is in this site
    remote_uid=config.get("remoteUid"),                 # re-pin after team B re-created its network
    description=config.get("description") or "team A consents to team B",
    wait_for_bound=config.get_float("waitForBound") or 0,
)

pulumi.export("network_uid", network.uid)
pulumi.export("phase", peering.phase)
pulumi.export("reason", peering.reason)
pulumi.export("message", peering.message)
pulumi.export("remote_uid", peering.remote_uid)
pulumi.export("last_phase_transition_time", peering.last_phase_transition_time)
pulumi.export("expires_at", peering.expires_at)
pulumi.export("dataplane", peering.dataplane)              # Programming while a chassis lags behind, else Programmed
pulumi.export("programmed_at", peering.programmed_at)
pulumi.export("peered_networks", network.peered_networks)
