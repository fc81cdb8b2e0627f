"""Names of the OVN objects netpeer creates, built in this one module.

Names derive from network uids, never from display names, so a re-created
namesake gets new rows and renames never touch the dataplane. Every name
starts with ``np-`` (``np_`` for address sets, whose names must be
identifiers) so an operator can tell netpeer's rows at a glance; ownership
itself is decided by the ``netpeer:*`` tags in ``external_ids``, never by name.
"""

from __future__ import annotations

import hashlib

NB_SCHEMA = "OVN_Northbound"   # the database netpeer writes

# external_ids keys carried by every row netpeer owns.
OWNER = "netpeer:owner"        # the deployment that owns the row (config `owner`)
KIND = "netpeer:kind"          # router, switch, lan-port, peer-port, route, policy, ...
ID = "netpeer:id"              # stable identity of the row within the owner
NETWORK = "netpeer:network"    # uid of the network the row belongs to
NAMESPACE = "netpeer:namespace"
DISPLAY = "netpeer:name"       # namespace/name, for people reading ovn-nbctl output
PEER = "netpeer:peer"          # uid of the peer network, on per-peering rows
PEERING = "netpeer:peering"    # the name of the network's peering towards PEER, on its peer port
STATE_OF = "netpeer:state-of"  # on the state marker (not netpeer:owner: it is no dataplane row): its owner
STORE_ID = "netpeer:store-id"  # on the state marker: which store wrote OVN last ...
GENERATION = "netpeer:generation"  # ... and how far it had got (netpeer.service.epoch)
SERIAL = "netpeer:serial"      # on the state marker: one more per transaction of netpeer's (netpeer.ovn.plan)


def _short(uid: str) -> str:
    return uid.replace("-", "")


def router(uid: str) -> str:
    return f"np-lr-{uid}"


def switch(uid: str) -> str:
    return f"np-ls-{uid}"


def lan_router_port(uid: str) -> str:
    return f"np-lrp-{uid}"


def lan_switch_port(uid: str) -> str:
    return f"np-lsp-rtr-{uid}"


def peer_router_port(local_uid: str, remote_uid: str) -> str:
    """The port on ``local``'s router that faces ``remote``'s router."""
    return f"np-peer-{_short(local_uid)}-{_short(remote_uid)}"


def instance_port(uid: str, instance: str) -> str:
    return f"np-inst-{_short(uid)[:12]}-{instance}"


def address_set(uid: str, version: int) -> str:
    """The address set of a network's prefixes of one IP version."""
    return f"np_{_short(uid)}_ip{version}"


def state_marker(owner: str) -> str:
    """The address set (with no addresses, referenced by nothing) that carries
    the store's stamp. An address set because OVN 23.03 handles their
    changes incrementally: writing it costs ovn-northd no recompute."""
    return f"np_state_{owner.replace('-', '_')}"


def router_mac(uid: str) -> str:
    """A stable, locally administered unicast MAC for a network's router."""
    digest = hashlib.sha256(uid.encode()).digest()
    return "0a:" + ":".join(f"{b:02x}" for b in digest[:5])


def instance_mac(uid: str, instance: str) -> str:
    digest = hashlib.sha256(f"{uid}/{instance}".encode()).digest()
    return "0e:" + ":".join(f"{b:02x}" for b in digest[:5])


# ------------------------------------------------------------------ sites (OVN Interconnection)
SITE = "netpeer:site"                        # on cross-site rows: the other site
TRANSIT_SWITCH = "netpeer:transit-switch"    # on cross-site rows: the transit switch they use
TRANSIT_PREFIX = "np-ts-"


def transit_switch(site_a: str, site_b: str) -> str:
    """The transit switch shared by two sites: ``np-ts-<first>-<second>`` (sorted)."""
    if site_a == site_b:
        raise ValueError("a transit switch joins two different sites")
    a, b = sorted((site_a, site_b))
    return f"{TRANSIT_PREFIX}{a}-{b}"


def transit_router_port(uid: str, other_site: str) -> str:
    """A network's router port on the transit switch towards ``other_site``."""
    return f"np-tsr-{_short(uid)}-{other_site}"


def transit_switch_port(site: str, other_site: str, uid: str) -> str:
    """Its switch port. OVN-IC indexes port names across all sites, hence the site."""
    return f"np-tsp-{site}-{other_site}-{_short(uid)}"


def transit_mac(site: str, uid: str, other_site: str) -> str:
    """A locally administered MAC, unique on the transit switch across sites."""
    digest = hashlib.sha256(f"{site}/{uid}/{other_site}".encode()).digest()
    return "0a:" + ":".join(f"{b:02x}" for b in digest[:5])
