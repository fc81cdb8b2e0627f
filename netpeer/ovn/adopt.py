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
from netpeer.ovn import _idl, names
from netpeer.ovn.owned import _OwnedRows
from netpeer.ovn.rows import CHILD_COLUMNS

_get = _idl.read_column


@dataclasses.dataclass
class _Found:
    namespace: str = ""
    name: str = ""
    subnets: list[str] = dataclasses.field(default_factory=list)
    prefixes: list[str] = dataclasses.field(default_factory=list)
    next_hops: dict[str, str] = dataclasses.field(default_factory=dict)
    peers: list[tuple[str, str]] = dataclasses.field(default_factory=list)


class ReadBack(_OwnedRows):
    """Read-only: a ``NetworkState`` per network our rows describe (peers as
    networks with only a uid; ``peering_names`` gives the local peering names)."""

    def run_idl(self, txn):
        found: dict[str, _Found] = {}

        def of(ext) -> _Found:
            uid = ext.get(names.NETWORK, "")
            f = found.setdefault(uid, _Found())
            ns, _, name = ext.get(names.DISPLAY, "/").partition("/")
            f.namespace, f.name = f.namespace or ns, f.name or name
            return f

        for row in self.api.tables["Address_Set"].rows.values():
            if self._ours(row):
                of(_get(row, "external_ids")).prefixes += list(_get(row, "addresses"))
        for table, column in CHILD_COLUMNS:
            for parent in self.api.tables[table].rows.values():
                if not self._ours(parent):
                    continue
                for child in _get(parent, column):
                    if not self._ours(child):
                        continue
                    ext = _get(child, "external_ids")
                    f, kind, ident = of(ext), ext.get(names.KIND), ext.get(names.ID, "")
                    if kind == "lan-port" and table == "Logical_Router":
                        f.subnets += [str(netaddr.IPNetwork(n).cidr) for n in _get(child, "networks")]
                    elif kind == "peer-port" and ext.get(names.PEER):
                        f.peers.append((ext[names.PEER], ext.get(names.PEERING, "")))
                    elif kind == "route" and "/internal/" in ident:
                        f.next_hops[_get(child, "ip_prefix")] = _get(child, "nexthop")
        states = []
        for uid, f in sorted(found.items()):
            if not (uid and f.namespace and f.name and f.subnets):
                continue  # not a whole network: nothing to adopt
            subnets = sorted(set(f.subnets))
            routes = tuple(Route(p, f.next_hops.get(p)) for p in sorted(set(f.prefixes) - set(subnets)))
            network = Network(f.namespace, f.name, uid, tuple(subnets), routes)
            peers = tuple(Network("", "", puid, ()) for puid, _ in sorted(f.peers))
            states.append(NetworkState(network, peers, tuple(sorted(f.peers))))
        self.result = states
