"""The OVN northbound rows a network and its Bound peers become.

This is LXD's proven shape (LX008): per network one Logical_Router and one
Logical_Switch joined by a router port carrying each subnet's gateway; per
Bound peer, a router port with the router's LAN MAC and gateway as /32 or
/128 whose ``peer`` is the remote router's matching port, one static route
per remote prefix through it, and anti-spoofing router policies matching on
address sets of each network's prefixes, one row per network and kind for all
its peers: allow-in (from each peer port, only that peer's prefixes to ours),
drop-in (anything else arriving on a peer port), allow-out (towards each
peer's prefixes only from ours) and drop-out (anything else towards them).
Policies of the same priority are a union, so one row per network says what
one per peer said: 2 rows per peer and side (port and route) plus 4 per
network, instead of 6 per peer and side.

Pure: the result is plain data that ``netpeer.ovn.backend`` writes. This
module and ``names`` are the whole of netpeer's knowledge of OVN's tables,
columns and match syntax; the core only knows networks, peerings and consent
(``netpeer.core.dataplane.NetworkState``). Each row's ``netpeer:id`` (its
ident) is built here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Mapping

import netaddr

from netpeer.core.dataplane import NetworkState, Stamp
from netpeer.core.models import Network
from netpeer.core.validate import gateway
from netpeer.ovn import names
from netpeer.ovn.row import Parent, Row

# Kinds of rows a sync manages (``netpeer:kind``). Rows of other kinds (the
# dev tools' instance ports) live on our switches but are left alone until
# the switch goes.
MANAGED_KINDS = frozenset({"router", "switch", "lan-port", "peer-port", "route", "policy", "address-set",
                           "transit-port"})
INSTANCE_KIND = "instance"
STATE_KIND = "state"   # the stamp's marker row (names.state_marker)

# Tables whose rows are found by name (roots), and the columns that hold the
# rows hanging under them.
ROOT_TABLES = ("Logical_Router", "Logical_Switch", "Address_Set")
CHILD_COLUMNS = (("Logical_Router", "ports"), ("Logical_Router", "static_routes"),
                 ("Logical_Router", "policies"), ("Logical_Switch", "ports"))
# The table of the rows each of those columns holds.
CHILD_TABLES = {("Logical_Router", "ports"): "Logical_Router_Port",
                ("Logical_Router", "static_routes"): "Logical_Router_Static_Route",
                ("Logical_Router", "policies"): "Logical_Router_Policy",
                ("Logical_Switch", "ports"): "Logical_Switch_Port"}

# Router policy priorities (OVN allows 0-32767). Higher wins; one stage.
PRIO_ALLOW_IN = 2000   # from a peer port, from that peer's prefixes, to ours (one row per network)
PRIO_DROP_IN = 1990    # anything else arriving on a peer port (one row per network)
PRIO_ALLOW_OUT = 1980  # to a peer's prefixes, from ours (one row per network)
PRIO_DROP_OUT = 1970   # to a peer's prefixes from any other source (spoofed; one row per network)


@dataclasses.dataclass(frozen=True)
class _Gateway:
    version: int
    ip: str          # the router's address on the subnet
    prefixlen: int   # the subnet's length

    def __str__(self) -> str:
        return f"{self.ip}/{self.prefixlen}"


@dataclasses.dataclass(frozen=True)
class _Addressing:
    """What the rows need of a network's addresses, parsed once."""
    gateways: tuple[_Gateway, ...]                   # one per subnet, in order
    prefixes: tuple[tuple[int, str], ...]            # (version, prefix) exported to a peer: subnets, then routes


# A full comparison builds every network's rows, each with its peers': the
# same few prefixes were parsed by netaddr about 24 times per network, a
# third of the comparison's CPU. Cached by value; the entries are immutable.
@functools.lru_cache(maxsize=1 << 16)
def _parse(subnets: tuple[str, ...], routes: tuple[str, ...]) -> _Addressing:
    gateways = []
    for s in subnets:
        net = netaddr.IPNetwork(s)
        gateways.append(_Gateway(net.version, str(gateway(net)), net.prefixlen))
    prefixes = tuple((p.version, str(p)) for p in map(netaddr.IPNetwork, subnets + routes))
    return _Addressing(tuple(gateways), prefixes)


def _addressing(network: Network) -> _Addressing:
    return _parse(tuple(network.subnets), tuple(r.prefix for r in network.routes))


def _gateways(network: Network) -> tuple[_Gateway, ...]:
    """The router's address on each subnet, with the subnet's length."""
    return _addressing(network).gateways


def first_gateway(network: Network, version: int) -> str | None:
    for g in _gateways(network):
        if g.version == version:
            return g.ip
    return None


def _families(network: Network) -> set[int]:
    return {v for v, _ in _addressing(network).prefixes}


def _sources(network: Network, version: int) -> list[str]:
    return [p for v, p in _addressing(network).prefixes if v == version]


def root_ident(table: str, uid: str, version: int | None = None) -> str:
    """The ``netpeer:id`` of a root row of network ``uid``."""
    if table == "Logical_Router":
        return f"lr/{uid}"
    if table == "Logical_Switch":
        return f"ls/{uid}"
    if table == "Address_Set" and version in (4, 6):
        return f"as/{uid}/{version}"
    raise ValueError(f"{table} is not a root table of a network")


def state_row(owner: str, store_id: str, generation: int) -> Row:
    """The marker row carrying the store's stamp."""
    name = names.state_marker(owner)
    return Row("Address_Set", f"state/{owner}", STATE_KIND, {"name": name, "addresses": []},
               {names.STATE_OF: owner, names.STORE_ID: store_id, names.GENERATION: str(generation)})


def stamp_of(ext: Mapping[str, str], owner: str) -> Stamp | None:
    """The stamp a state marker's ``external_ids`` carry (None: not ``owner``'s, or unreadable)."""
    if ext.get(names.STATE_OF) != owner:
        return None
    try:
        return Stamp(ext[names.STORE_ID], int(ext[names.GENERATION]))
    except (KeyError, ValueError):
        return None


def root_names(uid: str) -> list[tuple[str, str]]:
    """(table, name) of every root row a network may have."""
    return [("Logical_Router", names.router(uid)), ("Logical_Switch", names.switch(uid)),
            ("Address_Set", names.address_set(uid, 4)), ("Address_Set", names.address_set(uid, 6))]


def root_name(ext: Mapping[str, str]) -> str | None:
    """The name a root row we own must have, from its tags (None: not a root)."""
    kind, uid, ident = ext.get(names.KIND), ext.get(names.NETWORK, ""), ext.get(names.ID, "")
    if kind == "router":
        return names.router(uid)
    if kind == "switch":
        return names.switch(uid)
    if kind == "address-set" and ident.rsplit("/", 1)[-1] in ("4", "6"):
        return names.address_set(uid, int(ident.rsplit("/", 1)[-1]))
    return None


def ident_of_root(table: str, uid: str, name: str) -> str:
    """The ident a root row found by ``name`` stands for (a hand edit may have
    dropped its ``netpeer:id``: the sync writes it back)."""
    version = int(name.rsplit("ip", 1)[-1]) if table == "Address_Set" else None
    return root_ident(table, uid, version)


def desired_rows(owner: str, state: NetworkState, site=None) -> list[Row]:
    """The rows of one network in the state the core wants it; with its
    links to other sites (``netpeer.ovn.ic_rows``) when it has any."""
    out = network_rows(owner, state.network, list(state.peers), dict(state.peering_names))
    if not state.attachments and not state.remote_peers:
        return out
    from netpeer.ovn import ic_rows   # it builds on this module
    if site is None:
        raise ValueError(f"network {state.network.uid} has peerings with other sites, but this netpeerd has no site "
                         "configured (site = ... in its configuration)")
    router = out[0]
    out[0] = dataclasses.replace(router, columns={**router.columns, "options": dict(ic_rows.ROUTER_OPTIONS)})
    return out + ic_rows.network_ic_rows(owner, state, site)


def network_rows(owner: str, network: Network, peers: list[Network],
                 peering_names: Mapping[str, str] | None = None) -> list[Row]:
    """Every row of ``network``, given the networks it is Bound to (and the
    names of its peerings towards them, by peer uid)."""
    uid = network.uid
    lr, ls = names.router(uid), names.switch(uid)
    mac = names.router_mac(uid)

    def tags(kind: str, ident: str, **extra: str) -> dict[str, str]:
        t = {names.OWNER: owner, names.KIND: kind, names.ID: ident,
             names.NETWORK: uid, names.NAMESPACE: network.namespace,
             names.DISPLAY: f"{network.namespace}/{network.name}"}
        t.update(extra)
        return t

    lr_id, ls_id = root_ident("Logical_Router", uid), root_ident("Logical_Switch", uid)
    rows = [
        Row("Logical_Router", lr_id, "router", {"name": lr}, tags("router", lr_id)),
        Row("Logical_Switch", ls_id, "switch", {"name": ls}, tags("switch", ls_id)),
        Row("Logical_Router_Port", f"lrp/{uid}", "lan-port",
            {"name": names.lan_router_port(uid), "mac": mac,
             "networks": sorted(str(g) for g in _gateways(network))},
            tags("lan-port", f"lrp/{uid}"), Parent("Logical_Router", lr, "ports")),
        Row("Logical_Switch_Port", f"lsp/{uid}", "lan-port",
            {"name": names.lan_switch_port(uid), "type": "router", "addresses": ["router"],
             "options": {"router-port": names.lan_router_port(uid)}},
            tags("lan-port", f"lsp/{uid}"), Parent("Logical_Switch", ls, "ports")),
    ]
    for version in sorted(_families(network)):
        ident = root_ident("Address_Set", uid, version)
        rows.append(Row("Address_Set", ident, "address-set",
                        {"name": names.address_set(uid, version),
                         "addresses": _sources(network, version)},
                        tags("address-set", ident)))
    for r in network.routes:
        if r.next_hop:
            ident = f"route/{uid}/internal/{r.prefix}"
            rows.append(Row("Logical_Router_Static_Route", ident, "route",
                            {"ip_prefix": r.prefix, "nexthop": r.next_hop},
                            tags("route", ident), Parent("Logical_Router", lr, "static_routes")))
    ordered = sorted(peers, key=lambda n: n.uid)
    for peer in ordered:
        rows.extend(_peer_rows(network, peer, mac, tags, (peering_names or {}).get(peer.uid, "")))
    rows.extend(_policy_rows(network, ordered, tags))
    return rows


def _policy_rows(network: Network, peers: list[Network], tags) -> list[Row]:
    """The network's four anti-spoofing policies, each one row for all its
    peers: allow-in and drop-in for what arrives on its peer ports, allow-out
    and drop-out for what goes towards its peers' prefixes."""
    if not peers:
        return []
    uid, lr = network.uid, names.router(network.uid)
    own = _families(network)
    into, out_ok = [], []
    for peer in peers:
        both = sorted(own & _families(peer))
        if not both:
            continue   # no family in common: the peer's traffic falls to the drops
        port = names.peer_router_port(uid, peer.uid)
        ins = " || ".join(f"(ip{v}.src == ${names.address_set(peer.uid, v)} && "
                          f"ip{v}.dst == ${names.address_set(uid, v)})" for v in both)
        into.append(f'(inport == "{port}" && ({ins}))')
        out_ok += [f"(ip{v}.dst == ${names.address_set(peer.uid, v)} && ip{v}.src == ${names.address_set(uid, v)})"
                   for v in both]
    ports = ", ".join(f'"{names.peer_router_port(uid, p.uid)}"' for p in peers)
    towards = " || ".join(f"ip{v}.dst == ${names.address_set(p.uid, v)}" for p in peers for v in sorted(_families(p)))
    rows = []
    for what, prio, match, action in (("allow-in", PRIO_ALLOW_IN, " || ".join(into), "allow"),
                                      ("drop-in", PRIO_DROP_IN, f"inport == {{{ports}}}", "drop"),
                                      ("allow-out", PRIO_ALLOW_OUT, " || ".join(out_ok), "allow"),
                                      ("drop-out", PRIO_DROP_OUT, towards, "drop")):
        if not match:
            continue
        ident = f"policy/{uid}/{what}"
        rows.append(Row("Logical_Router_Policy", ident, "policy", {"priority": prio, "match": match, "action": action},
                        tags("policy", ident), Parent("Logical_Router", lr, "policies")))
    return rows


def _peer_rows(network: Network, peer: Network, mac: str, tags, peering: str) -> list[Row]:
    uid, puid = network.uid, peer.uid
    lr = names.router(uid)
    port = names.peer_router_port(uid, puid)
    rows = []
    host_len = {4: 32, 6: 128}
    ident = f"peer-port/{uid}/{puid}"
    rows.append(Row("Logical_Router_Port", ident, "peer-port",
                    {"name": port, "mac": mac,
                     "networks": sorted(f"{g.ip}/{host_len[g.version]}" for g in _gateways(network)),
                     "peer": [names.peer_router_port(puid, uid)]},
                    tags("peer-port", ident, **{names.PEER: puid}, **({names.PEERING: peering} if peering else {})),
                    Parent("Logical_Router", lr, "ports")))
    local_families = {g.version for g in _gateways(network)}
    for version, prefix in _addressing(peer).prefixes:
        hop = first_gateway(peer, version)
        if hop is None or version not in local_families:
            continue  # no address of that family on the link: nothing can use it
        ident = f"route/{uid}/{puid}/{prefix}"
        rows.append(Row("Logical_Router_Static_Route", ident, "route",
                        {"ip_prefix": prefix, "nexthop": hop, "output_port": [port]},
                        tags("route", ident, **{names.PEER: puid}),
                        Parent("Logical_Router", lr, "static_routes")))
    return rows
