"""State invariants of a running netpeerd, read independently of the code
under test where possible: the store through its own read-only SQLite
connection, prefixes through the standard ``ipaddress`` module, OVN through
the repair sweep (which must find nothing to do) and through ``ovn-nbctl``.

``check(d)`` raises AssertionError naming the first broken invariant.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import json
import re
import sqlite3
from pathlib import Path

PHASE_REASONS = {
    "Pending": {"AwaitingRemote", "RemoteWithdrawn", "RemoteReplaced"},
    "Bound": {"Bound"},
    "Failed": {"OverlappingPrefixes"},
}
OWNED_TABLES = ("Logical_Router", "Logical_Router_Port", "Logical_Router_Static_Route",
                "Logical_Router_Policy", "Logical_Switch", "Logical_Switch_Port", "Address_Set")


@dataclasses.dataclass(frozen=True)
class Net:
    namespace: str
    name: str
    uid: str
    prefixes: tuple  # ipaddress networks: subnets, then route prefixes

    @property
    def key(self):
        return (self.namespace, self.name)


@dataclasses.dataclass(frozen=True)
class Peer:
    namespace: str
    network: str
    name: str
    remote_namespace: str
    remote_network: str
    network_uid: str
    remote_uid: str | None
    ttl_seconds: int
    phase: str
    reason: str
    last_transition: int
    expires_at: int | None
    create_time: int

    @property
    def key(self):
        return (self.namespace, self.network, self.name)

    @property
    def net_key(self):
        return (self.namespace, self.network)

    @property
    def remote_key(self):
        return (self.remote_namespace, self.remote_network)


NAME = re.compile(r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
RESERVED_V4 = [ipaddress.ip_network(p) for p in ("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4",
                                                   "240.0.0.0/4")]
RESERVED_V6 = [ipaddress.ip_network(p) for p in ("::/128", "::1/128", "::ffff:0:0/96", "fe80::/10", "ff00::/8")]


def overlap(a, b) -> bool:
    return a.version == b.version and (a.subnet_of(b) or b.subnet_of(a))


def any_overlap(xs, ys) -> bool:
    return any(overlap(x, y) for x in xs for y in ys)


def check_values(db: sqlite3.Connection) -> None:
    """Nothing invalid was ever stored: names, prefixes, descriptions, TTLs."""
    for ns, name, subnets, routes, description in db.execute(
            "SELECT namespace, name, subnets, routes, description FROM networks"):
        where = f"network {ns!r}/{name!r}"
        assert NAME.fullmatch(ns) and NAME.fullmatch(name), f"{where}: invalid name stored"
        subnets, routes = json.loads(subnets), json.loads(routes)
        assert 1 <= len(subnets) <= 16 and len(routes) <= 256, f"{where}: {len(subnets)} subnets"
        nets = []
        for s in subnets:
            n = ipaddress.ip_network(s)  # strict: no host bits
            assert str(n) == s, f"{where}: subnet {s!r} not canonical"
            assert (8 <= n.prefixlen <= 30) if n.version == 4 else (16 <= n.prefixlen <= 126), f"{where}: {s}"
            nets.append(n)
        for r in routes:
            n = ipaddress.ip_network(r["prefix"])
            assert str(n) == r["prefix"] and n.prefixlen >= 1, f"{where}: route {r}"
            assert any(x.version == n.version for x in nets[:len(subnets)]), f"{where}: route {r} without subnet"
            if r.get("next_hop"):
                hop = ipaddress.ip_address(r["next_hop"])
                assert any(hop in x for x in nets[:len(subnets)]), f"{where}: next hop {hop} outside"
            nets.append(n)
        for i, x in enumerate(nets):
            assert not any(overlap(x, y) for y in nets[:i]), f"{where}: {x} overlaps another prefix of it"
            reserved = RESERVED_V4 if x.version == 4 else RESERVED_V6
            assert not any(overlap(x, y) for y in reserved), f"{where}: {x} is in a reserved range"
        check_text(where, description)
    for ns, net, name, rns, rnet, ttl, description in db.execute(
            "SELECT namespace, network, name, remote_namespace, remote_network, ttl_seconds, description "
            "FROM peerings"):
        where = f"peering {ns!r}/{net!r}/{name!r}"
        assert all(NAME.fullmatch(x) for x in (ns, net, name, rns, rnet)), f"{where}: invalid name stored"
        assert name.lower() not in ("internal", "external"), f"{where}: reserved name"
        assert 1 <= ttl <= 365 * 86400, f"{where}: ttl {ttl}s"
        check_text(where, description)
    for token_id, namespaces, description in db.execute("SELECT token_id, namespaces, description FROM tokens"):
        assert all(NAME.fullmatch(ns) for ns in json.loads(namespaces)), f"token {token_id}: invalid namespace"
        check_text(f"token {token_id}", description)


def check_text(where: str, text: str) -> None:
    assert len(text) <= 1024, f"{where}: description of {len(text)} characters"
    assert not any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text), f"{where}: control characters"


class StoreReader:
    """A read-only view of the SQLite store, through its own connection."""

    def __init__(self, path: str | Path):
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None,
                                   check_same_thread=False)

    def close(self):
        self._db.close()

    def snapshot(self, values: bool = False) -> tuple[dict, dict]:
        self._db.execute("BEGIN")
        try:
            if values:
                check_values(self._db)
            nets = {}
            for ns, name, uid, subnets, routes in self._db.execute(
                    "SELECT namespace, name, uid, subnets, routes FROM networks"):
                prefixes = tuple(ipaddress.ip_network(s) for s in json.loads(subnets)) + tuple(
                    ipaddress.ip_network(r["prefix"]) for r in json.loads(routes))
                nets[(ns, name)] = Net(ns, name, uid, prefixes)
            peers = {}
            for row in self._db.execute(
                    "SELECT namespace, network, name, remote_namespace, remote_network, network_uid, remote_uid, "
                    "ttl_seconds, phase, reason, last_transition, expires_at, create_time FROM peerings"):
                p = Peer(*row)
                peers[p.key] = p
            return nets, peers
        finally:
            self._db.execute("ROLLBACK")


def matches(p: Peer, nets: dict, by_pair: dict) -> Peer | None:
    """The other half of ``p`` if the two match (independent of netpeer.core)."""
    local, remote = nets.get(p.net_key), nets.get(p.remote_key)
    if local is None or remote is None or local.key == remote.key:
        return None
    q = by_pair.get((remote.key, local.key))
    if q is None:
        return None
    if p.remote_uid not in (None, remote.uid) or q.remote_uid not in (None, local.uid):
        return None
    if p.network_uid != local.uid or q.network_uid != remote.uid:
        return None
    return q


def bound_peers(nets: dict, peers_of: dict, key) -> list[Net]:
    return [nets[p.remote_key] for p in peers_of.get(key, []) if p.phase == "Bound" and p.remote_key in nets]


def pair_conflicts(nets, peers_of, a: Net, b: Net) -> bool:
    if any_overlap(a.prefixes, b.prefixes):
        return True
    for side, other in ((a, b), (b, a)):
        for third in bound_peers(nets, peers_of, side.key):
            if third.key != other.key and any_overlap(other.prefixes, third.prefixes):
                return True
    return False


def check_store(nets: dict, peers: dict) -> None:
    uids = collections.Counter(n.uid for n in nets.values())
    assert all(c == 1 for c in uids.values()), f"duplicate network uid: {uids.most_common(1)}"
    by_pair: dict = {}
    peers_of: dict = collections.defaultdict(list)
    for p in peers.values():
        pair = (p.net_key, p.remote_key)
        assert pair not in by_pair, f"two peerings of {p.net_key} towards {p.remote_key}: {by_pair[pair].name}, {p.name}"
        by_pair[pair] = p
        peers_of[p.net_key].append(p)
    for p in peers.values():
        where = "/".join(p.key)
        net = nets.get(p.net_key)
        assert net is not None, f"peering {where}: its network does not exist"
        assert p.network_uid == net.uid, f"peering {where}: network_uid {p.network_uid} is not {net.uid}"
        assert p.net_key != p.remote_key, f"peering {where} peers its network with itself"
        assert p.remote_uid != net.uid, f"peering {where} pins its own network's uid"
        assert p.reason in PHASE_REASONS[p.phase], f"peering {where}: reason {p.reason} in phase {p.phase}"
        if p.phase == "Bound":
            assert p.expires_at is None, f"peering {where} is Bound but expires"
            remote = nets.get(p.remote_key)
            assert remote is not None, f"peering {where} is Bound to a network that does not exist"
            assert p.remote_uid == remote.uid, f"peering {where} is Bound without the remote's uid"
            q = by_pair.get((p.remote_key, p.net_key))
            assert q is not None and q.phase == "Bound", f"peering {where} is Bound but its other half is " \
                                                          f"{q.phase if q else 'missing'}"
            assert q.remote_uid == net.uid, f"peering {where}: the other half follows {q.remote_uid}, not {net.uid}"
        else:
            assert p.expires_at is not None, f"peering {where} is {p.phase} but never expires"
            assert p.expires_at == p.last_transition + p.ttl_seconds * 1_000_000, \
                f"peering {where}: expires_at is not last transition + ttl"
        q = matches(p, nets, by_pair)
        if p.phase == "Failed":
            assert q is not None, f"peering {where} is Failed without a matching other half"
        if q is not None and p.phase != "Bound":
            # A matched pair is Bound unless its prefixes conflict; then both are Failed.
            assert p.phase == q.phase == "Failed", \
                f"matched pair {where} / {'/'.join(q.key)} is {p.phase}/{q.phase}"
            assert pair_conflicts(nets, peers_of, nets[p.net_key], nets[p.remote_key]), \
                f"pair {where} / {'/'.join(q.key)} is Failed but nothing conflicts any more"
    # A network and everything it is Bound to never share an address.
    for key, net in nets.items():
        group = [net] + bound_peers(nets, peers_of, key)
        for i, x in enumerate(group):
            for y in group[:i]:
                assert not any_overlap(x.prefixes, y.prefixes), \
                    f"{'/'.join(x.key)} and {'/'.join(y.key)} overlap while both reachable from {'/'.join(key)}"


def check_ovn(d, nets: dict, peers: dict, via_nbctl: bool = False) -> None:
    report = d.service.repair()
    assert report.errors == 0, f"repair sweep had {report.errors} error(s)"
    assert report.repaired_rows == 0, f"OVN differed from the store: repair changed {report.repaired_rows} row(s)"
    rows = nbctl_owned(d.ovn) if via_nbctl else d.backend.owned_rows()
    ids = collections.Counter((t, r["netpeer:id"]) for t, rs in rows.items() for r in rs)
    dup = [k for k, c in ids.items() if c > 1]
    assert not dup, f"duplicate netpeer:id in OVN: {dup[:3]}"
    uids = {n.uid for n in nets.values()}
    stray = {r["netpeer:network"] for rs in rows.values() for r in rs} - uids
    assert not stray, f"OVN rows of networks the store does not know: {sorted(stray)[:3]}"
    routers = {r["netpeer:network"] for r in rows.get("Logical_Router", [])}
    assert routers == uids, "every network has exactly its router"
    bound = sum(1 for p in peers.values() if p.phase == "Bound")
    ports = [r for r in rows.get("Logical_Router_Port", []) if r["netpeer:kind"] == "peer-port"]
    assert len(ports) == bound, f"{len(ports)} peer ports for {bound} Bound halves"


def nbctl_owned(ovn, owner: str = "netpeer") -> dict[str, list[dict]]:
    """Our rows by table, read with ovn-nbctl (not through netpeer's IDL)."""
    args = []
    for t in OWNED_TABLES:
        args += ["--", "--columns=external_ids", "list", t]
    out = ovn.nbctl("--format=json", *args[1:])
    result: dict[str, list[dict]] = {}
    for table, chunk in zip(OWNED_TABLES, [json.loads(x) for x in _json_docs(out)]):
        for (ext,) in chunk["data"]:
            ids = dict(ext[1])
            if ids.get("netpeer:owner") == owner:
                result.setdefault(table, []).append(ids)
    return result


def _json_docs(text: str) -> list[str]:
    dec = json.JSONDecoder()
    docs, i = [], 0
    text = text.strip()
    while i < len(text):
        obj, end = dec.raw_decode(text, i)
        docs.append(json.dumps(obj))
        i = end
        while i < len(text) and text[i].isspace():
            i += 1
    return docs


class Checker:
    """Invariants of one netpeerd, with a count of checks made."""

    def __init__(self, d):
        self.d = d
        self.reader = StoreReader(d.store.path)
        self.checks = 0

    def close(self):
        self.reader.close()

    def state(self):
        return self.reader.snapshot()

    def __call__(self, ovn: bool = True, via_nbctl: bool = False, values: bool = True):
        nets, peers = self.reader.snapshot(values=values)
        check_store(nets, peers)
        if ovn:
            check_ovn(self.d, nets, peers, via_nbctl=via_nbctl)
        self.checks += 1
        return nets, peers
