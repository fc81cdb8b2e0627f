"""Both halves in one stack: the frontend network declares its peering inline
(IEP-9 style), the backend network as a separate NetworkPeering resource.

Settings (pulumi config): netpeer:endpoint, netpeer:token (secret), and
optionally namespace (default: the token's namespace).
"""

import pulumi
import pulumi_netpeer as netpeer

config = pulumi.Config()
namespace = config.get("namespace")

frontend = netpeer.Network(
    "frontend",
    namespace=namespace,
    subnets=["10.10.0.0/24"],
    peerings=[netpeer.InlinePeeringArgs(name="to-backend", remote_network="backend")],
)
backend = netpeer.Network("backend", namespace=namespace, subnets=["10.20.0.0/24"])
to_frontend = netpeer.NetworkPeering(
    "to-frontend",
    namespace=namespace,
    network=backend.name,
    remote_network=frontend.name,
    wait_for_bound=30,  # `pulumi up` fails unless the pair binds within 30 s
)

pulumi.export("backend_phase", to_frontend.phase)
pulumi.export("frontend_peerings", frontend.peerings)
