"""COUNT do-nothing dynamic resources with the inputs the netpeer program's have."""
import pulumi

from bench.pulumi_noop import Noop

config = pulumi.Config()
count = int(config.require("count"))
ns = config.require("namespace")
nets = count // 2
networks = [Noop(f"n{i}", {"namespace": ns, "name": f"n{i}", "subnets": [f"10.{100 + i // 256}.{i % 256}.0/24"],
                           "uid": None}) for i in range(nets)]
for k in range(count - nets):
    j = k ^ 1 if (k ^ 1) < nets else (k + 1) % nets
    Noop(f"p{k}", {"namespace": ns, "network": networks[k % nets].id.apply(lambda _, k=k: f"n{k % nets}"),
                   "name": f"to-n{j}", "remote_network": networks[j].id.apply(lambda _, j=j: f"n{j}"),
                   "phase": None})
