"""A network and a peering whose resource name (config resourceName) may change, with an
optional alias to its previous name (config aliasOf)."""
import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
net = netpeer.Network("net-a", subnets=["10.1.0.0/24"])
alias = config.get("aliasOf")
peering = netpeer.NetworkPeering(
    config.get("resourceName") or "to-b", network=net.name, remote_namespace="team-b", remote_network="net-b",
    opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name=alias)] if alias else None))
pulumi.export("name", peering.name)
