"""The OVN rows of cross-site pairs (OVN Interconnection), as plain data.

The shape (measured in tests/sites, explained in docs/cross-site.md):

- **One transit switch per pair of sites** (``np-ts-<a>-<b>``), created in
  the IC NB by the operator; ``ovn-ic`` makes it a logical switch in both
  sites' NBs. Its addresses: the link's IPv4 block (``[sites.X]
  transit_ipv4``, 169.254.0.0/16 by default) and an IPv6 /64 of
  ``fd6e:7065::/32`` derived from its name. Tenants can use neither.
- **One attachment per network and link** (the network has a half naming a
  network of that site, Bound or not yet): a router port on the network's
  router, a distributed gateway port on the site's ``HA_Chassis_Group``, with
  one address of each family from the site's half of the block (slot =
  the attachment's index, allocated by the site: the two sites never need to
  agree on anything), its switch port on the transit switch, and two drop
  policies: everything arriving from the transit switch (drop-in; allow-in
  per Bound pair overrides it), and anything routed to the transit addresses
  (an instance could otherwise reach every router on the switch).
- **Per Bound pair, on each side**: one static route per remote prefix via
  the remote attachment's address of that family, out of the transit port,
  and router policies: allow-in (the peer's prefixes to ours, from the
  transit port), allow-out and drop-out (towards the peer only from ours:
  spoofed sources never leave). The remote prefixes are written inline: the
  remote network is represented locally by the store, not by OVN rows.
- Routers with an attachment get ``options:dynamic_neigh_routers=true``:
  without it every router on the shared switch pre-resolves every other
  router port (N^2 logical flows).

Two steps: an attachment's switch port goes in first, alone; its router
port, the drop-in policy and the pair's routes and policies follow once
``ovn-ic`` has written the port's tunnel key across sites into it
(``options:requested-tnl-key``; the backend wakes the sweep when it does).
Both at once, ovn-northd first gives the switch port a key of its own and
then ovn-ic's; ovn-controller (OVN 23.03) kept the first in the router
port's flows when it had computed them in between, and the site sent every
packet of that link with a key the other site dropped, until ovn-controller
recomputed (docs/cross-site.md). A router port made after the key is final
never sees the first.

No route exchange: each site sets ``NB_Global options:ic-route-adv=false
ic-route-learn=false`` (learned routes would give every router on the switch
every other router's subnets).
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
from typing import Mapping

from netpeer.core.dataplane import NetworkState, RemotePeer
from netpeer.core.models import Network
from netpeer.core.validate import TRANSIT_IPV6
from netpeer.ovn import names
from netpeer.ovn.row import After, Parent, Row

ROUTER_OPTIONS = {"dynamic_neigh_routers": "true"}
TUNNEL_KEY = "requested-tnl-key"   # the option ovn-ic sets on a transit switch port: its key across sites
DEFAULT_TRANSIT_IPV4 = "169.254.0.0/16"

# Router policy priorities: the single-site bands, plus one above them all.
PRIO_DROP_TRANSIT = 2010   # anything routed to a transit address
PRIO_ALLOW_IN = 2000       # from the transit port: the peer's prefixes to ours
PRIO_DROP_IN = 1990        # anything else from the transit port
PRIO_ALLOW_OUT = 1980      # to the peer's prefixes, from ours
PRIO_DROP_OUT = 1970       # to the peer's prefixes from anything else (spoofed)


@dataclasses.dataclass(frozen=True)
class Ref:
    """A column value naming a row the network does not own (the site's
    ``HA_Chassis_Group``); the backend turns it into that row."""

    table: str
    name: str


@dataclasses.dataclass(frozen=True)
class Keys:
    """A map column value of which netpeer owns these pairs only: ovn-ic
    adds its own to a transit switch port (``requested-tnl-key``, the port's
    tunnel key across sites), and rewriting the whole map took it away on
    every sync of the network: ovn-ic put it back, netpeer's repair took it
    away again, and the port's tunnel key kept changing under the traffic.
    The backend compares and writes these pairs and leaves the others."""

    pairs: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class SiteContext:
    """What the rows of a site need beyond the store: its name, its gateway
    group, and the IPv4 block of each of its links (by the other site)."""

    here: str
    gateway_group: str
    transit_ipv4: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def block(self, other: str) -> str:
        return self.transit_ipv4.get(other, DEFAULT_TRANSIT_IPV4)


def link_subnets(ts: str, ipv4_block: str) -> tuple[ipaddress.IPv4Network, ipaddress.IPv6Network]:
    """A transit switch's subnets: its IPv4 block and a /64 of fd6e:7065::/32
    taken from its name."""
    digest = int.from_bytes(hashlib.sha256(ts.encode()).digest()[:4], "big")
    base = ipaddress.ip_network(TRANSIT_IPV6)
    v6 = ipaddress.ip_network((int(base.network_address) | (digest << 64), 64))
    return ipaddress.ip_network(ipv4_block), v6


def capacity(ipv4_block: str = DEFAULT_TRANSIT_IPV4) -> int:
    """How many networks of one site can attach to a link with this block."""
    return ipaddress.ip_network(ipv4_block).num_addresses // 2 - 2


@dataclasses.dataclass(frozen=True)
class Attachment:
    """A network's port on a transit switch, as both sites compute it."""

    site: str          # the network's site
    other: str         # the site at the other end of the link
    network_uid: str
    slot: int
    ipv4_block: str

    @property
    def transit_switch(self) -> str:
        return names.transit_switch(self.site, self.other)

    @property
    def router_port(self) -> str:
        return names.transit_router_port(self.network_uid, self.other)

    @property
    def switch_port(self) -> str:
        return names.transit_switch_port(self.site, self.other, self.network_uid)

    @property
    def router_port_ident(self) -> str:
        return f"ts-lrp/{self.network_uid}/{self.other}"

    @property
    def switch_port_ident(self) -> str:
        return f"ts-lsp/{self.network_uid}/{self.other}"

    @property
    def gate(self) -> After:
        """What the router port and every row that routes through it wait
        for: ``ovn-ic``'s tunnel key on the switch port (see the module
        docstring, "Two steps")."""
        return After(self.switch_port_ident, "options", TUNNEL_KEY, unless=self.router_port_ident)

    @property
    def mac(self) -> str:
        return names.transit_mac(self.site, self.network_uid, self.other)

    @property
    def addresses(self) -> tuple[str, str]:
        """Its IPv4 and IPv6 CIDRs: the first site of the sorted pair takes the
        low half of each block, the second the high half."""
        if not 0 <= self.slot < capacity(self.ipv4_block):
            raise ValueError(f"attachment slot {self.slot} is outside the link's IPv4 block {self.ipv4_block} "
                             f"(at most {capacity(self.ipv4_block)} networks per site)")
        v4, v6 = link_subnets(self.transit_switch, self.ipv4_block)
        half = sorted((self.site, self.other)).index(self.site)
        host = half * (v4.num_addresses // 2) + self.slot + 1
        return (f"{v4.network_address + host}/{v4.prefixlen}",
                f"{v6.network_address + ((half << 32) | (self.slot + 1))}/{v6.prefixlen}")

    def address(self, version: int) -> str:
        return str(ipaddress.ip_interface(self.addresses[0 if version == 4 else 1]).ip)


def _tags(owner: str, network: Network, kind: str, ident: str, **extra: str) -> dict[str, str]:
    t = {names.OWNER: owner, names.KIND: kind, names.ID: ident, names.NETWORK: network.uid,
         names.NAMESPACE: network.namespace, names.DISPLAY: f"{network.namespace}/{network.name}"}
    t.update(extra)
    return t


def attachment_rows(owner: str, network: Network, att: Attachment, gateway_group: str) -> list[Row]:
    """The rows of one attachment: router port, switch port, drop-in,
    drop-to-transit; the router port and drop-in wait for the switch port's
    key (``Attachment.gate``)."""
    uid, ts, other = network.uid, att.transit_switch, att.other
    lr = names.router(uid)
    extra = {names.SITE: other, names.TRANSIT_SWITCH: ts}
    v4, v6 = link_subnets(ts, att.ipv4_block)
    rows = [
        Row("Logical_Router_Port", att.router_port_ident, "transit-port",
            {"name": att.router_port, "mac": att.mac, "networks": sorted(att.addresses),
             "ha_chassis_group": Ref("HA_Chassis_Group", gateway_group)},
            _tags(owner, network, "transit-port", att.router_port_ident, **extra),
            Parent("Logical_Router", lr, "ports"), after=att.gate),
        Row("Logical_Switch_Port", att.switch_port_ident, "transit-port",
            {"name": att.switch_port, "type": "router", "addresses": ["router"],
             "options": Keys({"router-port": att.router_port})},
            _tags(owner, network, "transit-port", att.switch_port_ident, **extra),
            Parent("Logical_Switch", ts, "ports")),
        Row("Logical_Router_Policy", f"policy/{uid}/{other}/drop-in", "policy",
            {"priority": PRIO_DROP_IN, "match": f'inport == "{att.router_port}"', "action": "drop"},
            _tags(owner, network, "policy", f"policy/{uid}/{other}/drop-in", **extra),
            Parent("Logical_Router", lr, "policies"), after=att.gate),
        Row("Logical_Router_Policy", f"policy/{uid}/{other}/drop-to-transit", "policy",
            {"priority": PRIO_DROP_TRANSIT, "match": f"ip4.dst == {v4} || ip6.dst == {v6}", "action": "drop"},
            _tags(owner, network, "policy", f"policy/{uid}/{other}/drop-to-transit", **extra),
            Parent("Logical_Router", lr, "policies")),
    ]
    return rows


def _set(prefixes: list[str]) -> str:
    return prefixes[0] if len(prefixes) == 1 else "{" + ", ".join(prefixes) + "}"


def peer_rows(owner: str, network: Network, att: Attachment, remote: RemotePeer, remote_att: Attachment) -> list[Row]:
    """Our side of a Bound cross-site pair: routes and policies on our
    router, once the attachment's router port is there (``Attachment.gate``)."""
    uid, peer = network.uid, remote.network
    ruid, other = peer.uid, peer.site
    lr = names.router(uid)
    port = att.router_port
    extra = {names.PEER: ruid, names.SITE: other, names.TRANSIT_SWITCH: att.transit_switch}
    if remote.peering_name:
        extra[names.PEERING] = remote.peering_name
    theirs = {v: [str(p) for p in peer.prefixes if p.version == v] for v in (4, 6)}
    ours = {v: [str(p) for p in network.prefixes if p.version == v] for v in (4, 6)}
    rows = []
    for prefix in peer.prefixes:
        if not ours[prefix.version]:
            continue   # no address of that family here: nothing can use the route
        ident = f"route/{uid}/{other}/{ruid}/{prefix}"
        rows.append(Row("Logical_Router_Static_Route", ident, "route",
                        {"ip_prefix": str(prefix), "nexthop": remote_att.address(prefix.version),
                         "output_port": [port]},
                        _tags(owner, network, "route", ident, **extra), Parent("Logical_Router", lr, "static_routes"),
                        after=att.gate))
    both = [v for v in (4, 6) if theirs[v] and ours[v]]
    into = [f"ip{v}.src == {_set(theirs[v])} && ip{v}.dst == ${names.address_set(uid, v)}" for v in both]
    out_ok = [f"ip{v}.dst == {_set(theirs[v])} && ip{v}.src == ${names.address_set(uid, v)}" for v in both]
    out_any = [f"ip{v}.dst == {_set(theirs[v])}" for v in (4, 6) if theirs[v]]
    policies = [
        ("allow-in", PRIO_ALLOW_IN, f'inport == "{port}" && ({" || ".join(f"({m})" for m in into)})', "allow")
        if into else None,
        ("allow-out", PRIO_ALLOW_OUT, " || ".join(f"({m})" for m in out_ok), "allow") if out_ok else None,
        ("drop-out", PRIO_DROP_OUT, " || ".join(out_any), "drop") if out_any else None,
    ]
    for item in policies:
        if item is None:
            continue
        what, prio, match, action = item
        ident = f"policy/{uid}/{other}/{ruid}/{what}"
        rows.append(Row("Logical_Router_Policy", ident, "policy", {"priority": prio, "match": match, "action": action},
                        _tags(owner, network, "policy", ident, **extra), Parent("Logical_Router", lr, "policies"),
                        after=att.gate))
    return rows


def network_ic_rows(owner: str, state: NetworkState, ctx: SiteContext) -> list[Row]:
    """Every cross-site row of one network in its site's NB."""
    network = state.network
    atts = {other: Attachment(ctx.here, other, network.uid, slot, ctx.block(other)) for other, slot in state.attachments}
    rows: list[Row] = []
    for other in sorted(atts):
        rows.extend(attachment_rows(owner, network, atts[other], ctx.gateway_group))
    for remote in state.remote_peers:
        other = remote.network.site
        att = atts.get(other)
        if att is None:
            continue   # not attached to that site's link (yet): no way there
        remote_att = Attachment(other, ctx.here, remote.network.uid, remote.attachment, ctx.block(other))
        rows.extend(peer_rows(owner, network, att, remote, remote_att))
    return rows


__all__ = ["Ref", "SiteContext", "Attachment", "link_subnets", "capacity", "attachment_rows", "peer_rows",
           "network_ic_rows", "ROUTER_OPTIONS", "DEFAULT_TRANSIT_IPV4"]
