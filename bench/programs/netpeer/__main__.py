"""COUNT netpeer resources: COUNT/2 networks and COUNT/2 peerings (network 2k
and 2k+1 consent to each other, so they bind)."""
import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
count = int(config.require("count"))
ns = config.require("namespace")
nets = count // 2
networks = [netpeer.Network(f"n{i}", namespace=ns, subnets=[f"10.{100 + i // 256}.{i % 256}.0/24"])
            for i in range(nets)]
for k in range(count - nets):
    j = k ^ 1 if (k ^ 1) < nets else (k + 1) % nets
    netpeer.NetworkPeering(f"p{k}", namespace=ns, network=networks[k % nets].name, name=f"to-n{j}",
                           remote_network=networks[j].name)
