"""Two OVN shapes for the same deployment, side by side, written with raw
ovn-nbctl (no netpeerd: this isolates what OVN does with each shape).

- ``lxd``: netpeer's rows (``core.dataplane.network_rows``): per Bound pair
  and side, a peer router port, a route and four policies.
- ``transit``: the alternative of DESIGN.md. One shared transit logical
  switch; at network creation each router gets a port on it (169.254.0.0/16)
  and four fixed policies over two address sets (its own prefixes, its
  peers' prefixes). A bind adds one static route per side (next hop: the
  peer's transit address) and the peer's prefixes to each side's "peers"
  address set. No router port or policy changes at bind time.

Per shape and size: logical flows, ovn-northd's full recompute, and per
bind: northd's own stopwatch and the time until the first ping between
instances of the two networks (a chassis, as in bench.scale).
"""

from __future__ import annotations

import dataclasses
import time
import uuid

from netpeer.ovn import rows as dataplane
from netpeer.ovn.row import Parent, Row
from netpeer.core.models import Network
from netpeer.ovn import names

from bench import nbctl
from bench.deploy import OWNER, Deployment, Topology
from bench.scale import Pinger, log, reachable, summary, wait_unreachable

TRANSIT_LS = "np-transit"


def transit_ip(i: int) -> str:
    k = i + 1
    return f"169.254.{k // 256}.{k % 256}"


def peers_set(uid: str) -> str:
    return f"np_{uid.replace('-', '')}_peers_ip4"


def transit_port(uid: str) -> str:
    return f"np-tr-{uid}"


def _tags(net: Network, kind: str, ident: str) -> dict[str, str]:
    return {names.OWNER: OWNER, names.KIND: kind, names.ID: ident, names.NETWORK: net.uid,
            names.NAMESPACE: net.namespace, names.DISPLAY: f"{net.namespace}/{net.name}"}


def transit_rows(i: int, net: Network, peers: list[tuple[int, Network]]) -> list[Row]:
    """A network's rows in the transit shape (base rows are netpeer's own)."""
    uid = net.uid
    lr = names.router(uid)
    rows = dataplane.network_rows(OWNER, net, [])
    # Without dynamic_neigh_routers every router pre-resolves the MAC of every
    # other router port on the shared switch: N^2 logical flows (measured at
    # 1,000 networks: ovn-northd took 98 s and 10 GB for its first run).
    rows = [dataclasses.replace(r, columns={**r.columns, "options": {"dynamic_neigh_routers": "true"}})
            if r.table == "Logical_Router" else r for r in rows]
    tp = transit_port(uid)
    rows.append(Row("Address_Set", f"as-peers/{uid}", "address-set",
                    {"name": peers_set(uid), "addresses": sorted(str(p) for _, n in peers for p in n.subnets)},
                    _tags(net, "address-set", f"as-peers/{uid}")))
    rows.append(Row("Logical_Router_Port", f"tr/{uid}", "transit-port",
                    {"name": tp, "mac": names.router_mac(uid), "networks": [f"{transit_ip(i)}/16"]},
                    _tags(net, "transit-port", f"tr/{uid}"), Parent("Logical_Router", lr, "ports")))
    rows.append(Row("Logical_Switch_Port", f"trp/{uid}", "transit-port",
                    {"name": f"np-trp-{uid}", "type": "router", "addresses": ["router"],
                     "options": {"router-port": tp}},
                    _tags(net, "transit-port", f"trp/{uid}"), Parent("Logical_Switch", TRANSIT_LS, "ports")))
    own, theirs = names.address_set(uid, 4), peers_set(uid)
    for what, prio, match, action in (
            ("allow-in", 2000, f'inport == "{tp}" && ip4.src == ${theirs} && ip4.dst == ${own}', "allow"),
            ("drop-in", 1990, f'inport == "{tp}"', "drop"),
            ("allow-out", 1980, f"ip4.dst == ${theirs} && ip4.src == ${own}", "allow"),
            ("drop-out", 1970, f"ip4.dst == ${theirs}", "drop")):
        rows.append(Row("Logical_Router_Policy", f"tpol/{uid}/{what}", "policy",
                        {"priority": prio, "match": match, "action": action},
                        _tags(net, "policy", f"tpol/{uid}/{what}"), Parent("Logical_Router", lr, "policies")))
    for j, peer in peers:
        rows.append(_route(net, j, peer))
    return rows


def _route(net: Network, j: int, peer: Network) -> Row:
    ident = f"route/{net.uid}/{peer.uid}"
    return Row("Logical_Router_Static_Route", ident, "route",
               {"ip_prefix": peer.subnets[0], "nexthop": transit_ip(j), "output_port": [transit_port(net.uid)]},
               _tags(net, "route", ident), Parent("Logical_Router", names.router(net.uid), "static_routes"))


class Shape:
    def __init__(self, kind: str, d: Deployment, topo: Topology):
        self.kind, self.d, self.topo = kind, d, topo
        self.nets: dict[int, Network] = {}

    def seed(self) -> None:
        topo = self.topo
        for i in range(topo.n):
            self.nets[i] = Network(topo.ns(i), topo.name(i), str(uuid.uuid4()), (topo.subnet(i),))
        self.d.networks = self.nets
        peers: dict[int, list[tuple[int, Network]]] = {i: [] for i in self.nets}
        for i, j in topo.pairs():
            peers[i].append((j, self.nets[j]))
            peers[j].append((i, self.nets[i]))
        if self.kind == "transit":
            self.d.ovn.nbctl("ls-add", TRANSIT_LS)
        ids = list(self.nets)
        for k in range(0, len(ids), 400):
            rows = []
            for i in ids[k:k + 400]:
                if self.kind == "lxd":
                    rows.append(dataplane.network_rows(OWNER, self.nets[i], [n for _, n in peers[i]]))
                else:
                    rows.append(transit_rows(i, self.nets[i], peers[i]))
            if self.kind == "transit":
                # The transit switch exists already: attach its ports with "add".
                flat = [r for rs in rows for r in rs]
                tports = [r for r in flat if r.parent and r.parent.name == TRANSIT_LS]
                rest = [[r for r in rs if not (r.parent and r.parent.name == TRANSIT_LS)] for rs in rows]
                nbctl.run(self.d.ovn, nbctl.create_networks(rest))
                for batch in nbctl.pack(nbctl.add_children(tports)):
                    nbctl.run(self.d.ovn, batch)
            else:
                nbctl.run(self.d.ovn, nbctl.create_networks(rows))

    # --- one bind / unbind as one ovn-nbctl transaction
    def bind_args(self, i: int, j: int) -> list[str]:
        a, b = self.nets[i], self.nets[j]
        if self.kind == "lxd":
            rows = []
            for x, y in ((a, b), (b, a)):
                before = {r.ident for r in dataplane.network_rows(OWNER, x, [])}
                rows += [r for r in dataplane.network_rows(OWNER, x, [y]) if r.ident not in before]
            return [arg for g in nbctl.add_children(rows) for arg in g][1:]
        args = [arg for g in nbctl.add_children([_route(a, j, b), _route(b, i, a)]) for arg in g][1:]
        args += ["--", "add", "Address_Set", peers_set(a.uid), "addresses", f'"{b.subnets[0]}"',
                 "--", "add", "Address_Set", peers_set(b.uid), "addresses", f'"{a.subnets[0]}"']
        return args

    def unbind_args(self, i: int, j: int) -> list[str]:
        a, b = self.nets[i], self.nets[j]
        args: list[str] = []
        if self.kind == "lxd":
            for x, y in ((a, b), (b, a)):
                lr = names.router(x.uid)
                args += ["--", "--if-exists", "lrp-del", names.peer_router_port(x.uid, y.uid),
                         "--", "--if-exists", "lr-route-del", lr, y.subnets[0]]
                for r in dataplane.network_rows(OWNER, x, [y]):
                    if r.table == "Logical_Router_Policy":
                        args += ["--", "--if-exists", "lr-policy-del", lr, str(r.columns["priority"]),
                                 r.columns["match"]]
        else:
            for x, y in ((a, b), (b, a)):
                args += ["--", "--if-exists", "lr-route-del", names.router(x.uid), y.subnets[0],
                         "--", "remove", "Address_Set", peers_set(x.uid), "addresses", f'"{y.subnets[0]}"']
        return args[1:]


def run_shape(kind: str, n: int, samples: int, lflow_pairs: int) -> dict:
    topo = Topology(n)
    out: dict = {"shape": kind, "networks": n}
    with Deployment(chassis=True) as d:
        d.start_ovn()
        d.northd("pause")
        shape = Shape(kind, d, topo)
        t = time.monotonic()
        shape.seed()
        out["seed_s"] = time.monotonic() - t
        d.northd("resume")
        out["northd_first_compute_s"] = d.wait_sb(1800)
        out["lflows"] = d.count_lflows()
        d.northd_reset()
        d.northd("inc-engine/recompute")
        d.wait_sb()
        out["full_recompute"] = d.northd_stats()

        pairs = topo.cross_pairs(1 + lflow_pairs, seed=n + 1)
        # Logical flows per bind.
        before = out["lflows"]
        for i, j in pairs[1:]:
            nbctl.run(d.ovn, shape.bind_args(i, j))
        d.wait_sb()
        out["lflows_per_peering"] = (d.count_lflows() - before) / max(1, len(pairs) - 1)

        # Time to traffic, and northd's work per bind.
        i, j = pairs[0]
        (ns_i, _), (_, ip_j) = d.add_instances([i, j])
        ping, nbtime, northd = [], [], []
        d.wait_hv()
        for _ in range(samples):
            assert not reachable(ns_i, ip_j)
            d.northd_reset()
            pinger = Pinger(ns_i, ip_j)
            try:
                time.sleep(0.05)
                t0 = time.time()
                nbtime.append(nbctl.run(d.ovn, shape.bind_args(i, j)))
                first = pinger.first_reply(120)
            finally:
                pinger.stop()
            if first is None:
                raise RuntimeError(f"{kind}: no ping reply within 120 s of the bind")
            ping.append(first - t0)
            northd.append(d.northd_stats())
            nbctl.run(d.ovn, shape.unbind_args(i, j))
            wait_unreachable(ns_i, ip_j)
        out["ping"] = summary(ping)
        out["nb_write"] = summary(nbtime)
        out["northd_per_bind"] = northd
        out["daemon_rss_kib"] = d.daemon_rss()
    return out


def run(sizes: list[int], samples: int, lflow_pairs: int) -> dict:
    out: dict = {}
    for n in sizes:
        for kind in ("lxd", "transit"):
            log(f"shapes: {kind} at {n} networks")
            out[f"{kind}/{n}"] = run_shape(kind, n, samples, lflow_pairs)
    return out
