"""The same peering declared inline on its network and as a NetworkPeering resource."""
import pulumi_netpeer as netpeer

net = netpeer.Network("net-a", subnets=["10.1.0.0/24"],
                      peerings=[netpeer.InlinePeeringArgs(name="to-b", remote_namespace="team-b",
                                                          remote_network="net-b")])
netpeer.NetworkPeering("to-b", network="net-a", remote_namespace="team-b", remote_network="net-b")
