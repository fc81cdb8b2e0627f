"""A peering on a network made elsewhere (config: network, remoteNamespace, remoteNetwork, waitForBound)."""
import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
peering = netpeer.NetworkPeering(
    "to-b", network=config.require("network"), remote_namespace=config.require("remoteNamespace"),
    remote_network=config.require("remoteNetwork"), wait_for_bound=config.get_float("waitForBound") or 0)
pulumi.export("phase", peering.phase)
pulumi.export("reason", peering.reason)
