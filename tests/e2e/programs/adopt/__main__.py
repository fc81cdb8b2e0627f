import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
peering = netpeer.NetworkPeering(
    "to-b", network="net-a", namespace="team-a", remote_namespace="team-b", remote_network="net-b",
    ttl="7d", opts=pulumi.ResourceOptions(import_=config.require("id")))
pulumi.export("phase", peering.phase)
