"""Reading netpeer's networks back from its OVN rows (``--adopt-ovn``).

The rows carry what a lost store needs to be rebuilt: each network's uid,
namespace and name (tags), subnets (the gateway addresses of its LAN port),
prefixes (its address sets: subnets and routes) and routes with next hops
(its internal static routes), and each Bound pair (a peer port tagged with
the peer's uid and the name of the peering). What OVN never held is lost:
descriptions, TTLs, Pending and Failed peerings, tokens.
"""

from __future__ import annotations

import dataclasses

import netaddr

from netpeer.core.dataplane import NetworkState
from netpeer.core.models import Network, Route
from netpeer.ovn import names, owned
from netpeer.ovn.plain import PlainReplica
from netpeer.ovn.rows import CHILD_COLUMNS


@dataclasses.dataclass
class _Found:
    namespace: str = ""
    name: str = ""
    subnets: list[str] = dataclasses.field(default_factory=list)
    prefixes: list[str] = dataclasses.field(default_factory=list)
    next_hops: dict[str, str] = dataclasses.field(default_factory=dict)
    peers: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def read_back(replica: PlainReplica, owner: str) -> list[NetworkState]:
    """A ``NetworkState`` per network our rows describe (peers as networks
    with only a uid; ``peering_names`` gives the local peering names)."""
    found: dict[str, _Found] = {}

    def of(tags) -> _Found:
        uid = tags.get(names.NETWORK, "")
        f = found.setdefault(uid, _Found())
        ns, _, name = tags.get(names.DISPLAY, "/").partition("/")
        f.namespace, f.name = f.namespace or ns, f.name or name
        return f

    for row in replica.tables["Address_Set"].values():
        if owned.ours(row, owner):
            of(owned.ext(row)).prefixes += list(row["addresses"])
    for table, column in CHILD_COLUMNS:
        for _, parent, _, child in owned.children(replica, table, column):
            if not (owned.ours(parent, owner) and owned.ours(child, owner)):
                continue
            tags = owned.ext(child)
            f, kind, ident = of(tags), tags.get(names.KIND), tags.get(names.ID, "")
            if kind == "lan-port" and table == "Logical_Router":
                f.subnets += [str(netaddr.IPNetwork(n).cidr) for n in child["networks"]]
            elif kind == "peer-port" and tags.get(names.PEER):
                f.peers.append((tags[names.PEER], tags.get(names.PEERING, "")))
            elif kind == "route" and "/internal/" in ident:
                f.next_hops[child["ip_prefix"]] = child["nexthop"]
    states = []
    for uid, f in sorted(found.items()):
        if not (uid and f.namespace and f.name and f.subnets):
            continue  # not a whole network: nothing to adopt
        subnets = sorted(set(f.subnets))
        routes = tuple(Route(p, f.next_hops.get(p)) for p in sorted(set(f.prefixes) - set(subnets)))
        network = Network(f.namespace, f.name, uid, tuple(subnets), routes)
        peers = tuple(Network("", "", puid, ()) for puid, _ in sorted(f.peers))
        states.append(NetworkState(network, peers, tuple(sorted(f.peers))))
    return states
