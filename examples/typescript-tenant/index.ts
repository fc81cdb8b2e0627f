// Team B: a network, and team B's consent to peer it with team A's network.
import * as pulumi from "@pulumi/pulumi";
import * as netpeer from "@netpeer/pulumi";

const config = new pulumi.Config();

const network = new netpeer.Network("net-b", {
    subnets: config.getObject<string[]>("subnets") ?? ["10.2.0.0/24", "fd00:b::/64"],
    description: "team B's network",
});

const peering = new netpeer.NetworkPeering("to-a", {
    network: network.name,
    remoteNamespace: config.get("remoteNamespace") ?? "team-a",
    remoteNetwork: config.get("remoteNetwork") ?? "net-a",
    remoteSite: config.get("remoteSite"),                  // team A's site when it is another site
    description: "team B consents to team A",
    waitForBound: config.getNumber("waitForBound") ?? 0,   // seconds `pulumi up` waits for Bound
});

export const network_uid = network.uid;
export const phase = peering.phase;                        // Pending, Bound or Failed
export const reason = peering.reason;
export const dataplane = peering.dataplane;                // Programming while a chassis lags behind, else Programmed
export const remote_uid = peering.remoteUid;
export const peered_networks = network.peeredNetworks;
