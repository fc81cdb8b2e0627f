"""A reference model of netpeer's consent rules, written from the README and
docs/design.md, independently of ``netpeer.core``.

Networks hold prefixes; peerings are one side's consent. After every change
the model re-evaluates *everything* (the service re-evaluates only what a
change may affect, so any difference is a bug in one or the other):

1. a Bound or Failed peering without a matching other half becomes
   Pending/RemoteWithdrawn, or Pending/RemoteReplaced when the only thing in
   the way is its pin: the network now under its remote name has another
   uid and has a half pointing back (a Pending half in that situation says
   RemoteReplaced too, and goes back to RemoteWithdrawn when it no longer is);
2. matched pairs that are not already Bound are evaluated in the order they
   were completed (the later of the two halves' creation), earliest first:
   Bound unless a prefix of one side overlaps the other side or another
   Bound peer of either side, then both halves Failed.

Two halves match when each names the other's network, any pinned or learned
uid agrees, and both networks exist. Outcomes are error class names
(``netpeer.errors``) or "OK".
"""

from __future__ import annotations

import dataclasses
import ipaddress

OK = "OK"


@dataclasses.dataclass
class MNet:
    namespace: str
    name: str
    uid: str
    subnets: tuple[str, ...]
    routes: tuple[str, ...]

    @property
    def key(self):
        return (self.namespace, self.name)

    @property
    def prefixes(self):
        return [ipaddress.ip_network(p) for p in self.subnets + self.routes]


@dataclasses.dataclass
class MPeer:
    namespace: str
    network: str
    name: str
    remote_namespace: str
    remote_network: str
    network_uid: str
    remote_uid: str | None
    seq: int
    phase: str = "Pending"
    reason: str = "AwaitingRemote"

    @property
    def key(self):
        return (self.namespace, self.network, self.name)

    @property
    def net_key(self):
        return (self.namespace, self.network)

    @property
    def remote_key(self):
        return (self.remote_namespace, self.remote_network)


def _overlap(xs, ys) -> bool:
    return any(x.version == y.version and (x.subnet_of(y) or y.subnet_of(x)) for x in xs for y in ys)


def prefixes_valid(subnets, routes) -> bool:
    """For prefixes that are each valid on their own: at least one subnet, no
    overlap among subnets and routes, every route with a subnet of its family."""
    if not subnets:
        return False
    nets = [ipaddress.ip_network(p) for p in list(subnets) + list(routes)]
    for i, x in enumerate(nets):
        if _overlap([x], nets[:i]):
            return False
    families = {ipaddress.ip_network(s).version for s in subnets}
    return all(ipaddress.ip_network(r).version in families for r in routes)


class Model:
    def __init__(self):
        self.nets: dict[tuple, MNet] = {}
        self.peers: dict[tuple, MPeer] = {}
        self.seq = 0

    # ------------------------------------------------------------ networks
    def create_network(self, ns, name, subnets, routes, uid) -> str:
        if not prefixes_valid(subnets, routes):
            return "InvalidArgument"
        if (ns, name) in self.nets:
            return "AlreadyExists"
        self.nets[(ns, name)] = MNet(ns, name, uid, tuple(subnets), tuple(routes))
        self._resolve()
        return OK

    def update_network(self, ns, name, subnets=None, routes=None) -> str:
        old = self.nets.get((ns, name))
        if old is None:
            return "NotFound"
        subnets = old.subnets if subnets is None else tuple(subnets)
        routes = old.routes if routes is None else tuple(routes)
        if not prefixes_valid(subnets, routes):
            return "InvalidArgument"
        new = dataclasses.replace(old, subnets=subnets, routes=routes)
        if (new.subnets, new.routes) == (old.subnets, old.routes):
            return OK
        for peer in self._bound_peers(old.key):
            if _overlap(new.prefixes, peer.prefixes):
                return "FailedPrecondition"
            for third in self._bound_peers(peer.key):
                if third.key != old.key and _overlap(new.prefixes, third.prefixes):
                    return "FailedPrecondition"
        self.nets[old.key] = new
        self._resolve()
        return OK

    def delete_network(self, ns, name) -> str:
        if (ns, name) not in self.nets:
            return "NotFound"
        if any(p.net_key == (ns, name) for p in self.peers.values()):
            return "FailedPrecondition"
        del self.nets[(ns, name)]
        self._resolve()
        return OK

    # ------------------------------------------------------------ peerings
    def create_peering(self, ns, network, name, remote_ns, remote_network, remote_uid=None) -> str:
        remote_ns = remote_ns or ns
        if (remote_ns, remote_network) == (ns, network):
            return "InvalidArgument"
        local = self.nets.get((ns, network))
        if local is None:
            return "NotFound"
        if remote_uid and remote_uid == local.uid:
            return "InvalidArgument"
        if (ns, network, name) in self.peers:
            return "AlreadyExists"
        if any(p.net_key == (ns, network) and p.remote_key == (remote_ns, remote_network)
               for p in self.peers.values()):
            return "AlreadyExists"
        self.seq += 1
        self.peers[(ns, network, name)] = MPeer(ns, network, name, remote_ns, remote_network, local.uid,
                                                remote_uid or None, self.seq)
        self._resolve()
        return OK

    def delete_peering(self, ns, network, name) -> str:
        if (ns, network, name) not in self.peers:
            return "NotFound"
        del self.peers[(ns, network, name)]
        self._resolve()
        return OK

    def update_peering(self, ns, network, name) -> str:
        """Description and TTL: no phase changes."""
        return OK if (ns, network, name) in self.peers else "NotFound"

    # ------------------------------------------------------------ rules
    def _partner(self, p: MPeer) -> MPeer | None:
        local, remote = self.nets.get(p.net_key), self.nets.get(p.remote_key)
        if local is None or remote is None or local.key == remote.key:
            return None
        for q in self.peers.values():
            if q.net_key == remote.key and q.remote_key == local.key:
                break
        else:
            return None
        if p.remote_uid not in (None, remote.uid) or q.remote_uid not in (None, local.uid):
            return None
        if p.network_uid != local.uid or q.network_uid != remote.uid:
            return None
        return q

    def _bound_peers(self, key) -> list[MNet]:
        return [self.nets[p.remote_key] for p in self.peers.values()
                if p.net_key == key and p.phase == "Bound" and p.remote_key in self.nets]

    def _conflicts(self, a: MNet, b: MNet) -> bool:
        if _overlap(a.prefixes, b.prefixes):
            return True
        for side, other in ((a, b), (b, a)):
            for third in self._bound_peers(side.key):
                if third.key != other.key and _overlap(other.prefixes, third.prefixes):
                    return True
        return False

    def _replaced(self, p: MPeer) -> bool:
        local, remote = self.nets.get(p.net_key), self.nets.get(p.remote_key)
        if p.remote_uid is None or local is None or remote is None or remote.uid == p.remote_uid:
            return False
        return any(q.net_key == remote.key and q.remote_key == local.key and q.remote_uid in (None, local.uid)
                   for q in self.peers.values())

    def _resolve(self) -> None:
        for p in self.peers.values():
            if self._partner(p) is not None:
                continue
            if self._replaced(p):
                p.phase, p.reason = "Pending", "RemoteReplaced"
            elif p.phase != "Pending" or p.reason == "RemoteReplaced":
                p.phase, p.reason = "Pending", "RemoteWithdrawn"
        pairs = {}
        for p in self.peers.values():
            q = self._partner(p)
            if q is None or p.phase == q.phase == "Bound":
                continue
            first, second = sorted((p, q), key=lambda x: x.seq)
            pairs[(first.key, second.key)] = (second.seq, first.seq, first, second)
        for _, _, p, q in sorted(pairs.values(), key=lambda t: t[:2]):
            local, remote = self.nets[p.net_key], self.nets[p.remote_key]
            if self._conflicts(local, remote):
                p.phase = q.phase = "Failed"
                p.reason = q.reason = "OverlappingPrefixes"
            else:
                p.phase = q.phase = "Bound"
                p.reason = q.reason = "Bound"
                p.remote_uid, q.remote_uid = remote.uid, local.uid

    # ------------------------------------------------------------ views
    def view(self) -> tuple[dict, dict]:
        nets = {k: (n.uid, tuple(n.subnets), tuple(n.routes)) for k, n in self.nets.items()}
        peers = {k: (p.remote_namespace, p.remote_network, p.phase, p.reason, p.remote_uid)
                 for k, p in self.peers.items()}
        return nets, peers


def service_view(service) -> tuple[dict, dict]:
    """The same view of a netpeer Service's store."""
    with service.store.read() as tx:
        networks = tx.list_networks(None)
        nets = {(n.namespace, n.name): (n.uid, tuple(n.subnets), tuple(r.prefix for r in n.routes))
                for n in networks}
        peers = {}
        for n in networks:
            for p in tx.peerings_of(n.key):
                peers[(p.namespace, p.network, p.name)] = (p.remote_namespace, p.remote_network, str(p.phase),
                                                           p.reason, p.remote_uid)
    return nets, peers


def diff(model_view, actual_view) -> str:
    """Human-readable differences, empty if none."""
    lines = []
    for what, m, a in (("network", model_view[0], actual_view[0]), ("peering", model_view[1], actual_view[1])):
        for k in sorted(set(m) | set(a)):
            if m.get(k) != a.get(k):
                lines.append(f"{what} {'/'.join(k)}: model {m.get(k)} service {a.get(k)}")
    return "\n".join(lines)
