"""COUNT do-nothing dynamic resources with the inputs the netpeer program's have."""
import pulumi

from bench.pulumi_noop import Noop

config = pulumi.Config()
count = int(config.require("count"))
ns = config.require("namespace")
nets = count // 2
OUT_NETWORK = {"uid": None, "inline_peerings": None, "peered_networks": None}
OUT_PEERING = {k: None for k in ("phase", "reason", "message", "network_uid", "last_phase_transition_time",
                                 "expires_at", "pinned_remote_uid")}
networks = [Noop(f"n{i}", {"namespace": ns, "name": f"n{i}", "subnets": [f"10.{100 + i // 256}.{i % 256}.0/24"],
                           "routes": [], "description": "", "peerings": [], **OUT_NETWORK}) for i in range(nets)]
for k in range(count - nets):
    j = k ^ 1 if (k ^ 1) < nets else (k + 1) % nets
    Noop(f"p{k}", {"namespace": ns, "network": networks[k % nets].id.apply(lambda _, k=k: f"n{k % nets}"),
                   "name": f"to-n{j}", "remote_namespace": None,
                   "remote_network": networks[j].id.apply(lambda _, j=j: f"n{j}"), "remote_uid": None,
                   "ttl": None, "description": "", "wait_for_bound": 0, **OUT_PEERING})
