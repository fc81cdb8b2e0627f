"""Hypothesis strategies for every netpeer.v1 request: random and adversarial
values (huge lists, unicode, control characters, /0 and host prefixes,
IPv4-mapped IPv6, duplicates, self-peering, enormous durations, long texts,
garbage resource names, odd update masks and page tokens), mixed with values
from a small pool of real names so that calls also reach existing state."""

from __future__ import annotations

import base64
import ipaddress
import uuid

from google.protobuf import duration_pb2, field_mask_pb2
from hypothesis import strategies as st

from netpeer.v1 import netpeer_pb2 as pb

NAMESPACES = ("fz-a", "fz-b", "fz-c")
NETWORKS = ("n1", "n2", "n3")
PEERINGS = ("p1", "p2", "to-x")
# Prefixes that overlap each other in many ways, so pairs bind and fail.
POOL_V4 = ("10.0.0.0/16", "10.0.1.0/24", "10.1.0.0/24", "10.2.0.0/24", "10.2.0.0/23", "10.3.0.0/24",
           "192.168.0.0/24", "172.16.0.0/12")
POOL_V6 = ("fd00::/48", "fd00:0:0:1::/64", "fd01::/64", "fd02::/64")

ADVERSARIAL = (
    "", " ", "\n", "\t", "\r\n", "\x00", "a\x00b", "a\nb", "n1\n", " n1", "n1 ", "N1", "nl", "n1\u200b",
    "internal", "INTERNAL", "External", "a" * 63, "a" * 64, "a" * 1000, "-a", "a-", "a--b", "0abc", "ab_c",
    "a.b", "a/b", "../fz-b", "..", ".", "%2F", "fz-a%2Fnetworks%2Fn1", "namespaces", "networks", "peerings",
    "\u0430", "ｆｚ-ａ", "\u202efz-a", "😀", "ß", "İ", "ǅ", "\ufeff", "\u2028", "\x85", "\x1b[31m", "\x7f",
    "' OR '1'='1", "'; DROP TABLE networks; --", "${jndi:x}", "$(id)", "`id`", "%s%s%n", "{}", "null", "None",
    "np_admin_" + "a" * 40, "*", "?", "\\", "//", "fz-a/n1", "namespaces/fz-a", "\ud7ff", "\U0010ffff",
)


def _text(max_size=40):
    return st.text(max_size=max_size)


# Long strings are built by repetition (cheap to generate, huge on the wire).
long_text = st.builds(lambda s, n: s * n, st.sampled_from(["a", "é", "\x00", "/", "-", "9", "\u202e", "😀", "ab\n"]),
                      st.integers(100, 20000))
garbage = st.one_of(st.sampled_from(ADVERSARIAL), _text(), st.text(alphabet=st.characters(max_codepoint=0x7f),
                                                                   max_size=70), long_text)
valid_name = st.from_regex(r"\A[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\Z")
namespace = st.one_of(st.sampled_from(NAMESPACES), st.sampled_from(NAMESPACES), valid_name, garbage)
network = st.one_of(st.sampled_from(NETWORKS), st.sampled_from(NETWORKS), valid_name, garbage)
peering = st.one_of(st.sampled_from(PEERINGS), st.sampled_from(PEERINGS), valid_name, garbage)

v4_int = st.integers(0, 2 ** 32 - 1)
v6_int = st.integers(0, 2 ** 128 - 1)
random_v4 = st.builds(lambda a, n: str(ipaddress.ip_network((a, n), strict=False)), v4_int, st.integers(0, 32))
random_v6 = st.builds(lambda a, n: str(ipaddress.ip_network((a, n), strict=False)), v6_int, st.integers(0, 128))
host_bits_v4 = st.builds(lambda a, n: f"{ipaddress.IPv4Address(a)}/{n}", v4_int, st.integers(0, 32))
host_bits_v6 = st.builds(lambda a, n: f"{ipaddress.IPv6Address(a)}/{n}", v6_int, st.integers(0, 128))
mapped = st.builds(lambda a, n, f: f.format(ipaddress.IPv4Address(a), n), v4_int, st.integers(96, 128),
                   st.sampled_from(["::ffff:{}/{}", "::{}/{}", "64:ff9b::{}/{}", "::ffff:0:{}/{}"]))
ODD_CIDRS = (
    "0.0.0.0/0", "::/0", "0.0.0.0/1", "128.0.0.0/1", "::/1", "10.0.0.0/8", "10.0.0.0/7", "10.1.0.1/32",
    "fd00::1/128", "fd00::/127", "10.0.0.0/31", "10.0.0.0/30", "fd00::/126", "fd00::/15", "10.0.0.0/24 ",
    " 10.0.0.0/24", "10.0.0.0/024", "010.0.0.0/24", "10.0/16", "10.0.0.0/-1", "10.0.0.0/33", "10.0.0.0/",
    "/24", "10.0.0.0/99999999999999999999", "10.0.0.0/\u0662\u0664", "10.0.0.0/\u00b2", "\uff11\uff10.0.0.0/24",
    "fe80::/64", "fe80::1%eth0/64", "fd00::%1/64", "::ffff:10.0.0.0/120", "::10.0.0.0/120", "0x0a.0.0.0/8",
    "10.0.0.0/24/24", "10.0.0.0\n/24", "10.0.0.0/24\n", "224.0.0.0/4", "127.0.0.0/8", "169.254.0.0/16",
    "ff02::/16", "2001:db8::/32", "::/128", "::1/128", "1.2.3.4/32", "255.255.255.255/32", "240.0.0.0/4",
    "100.64.0.0/10", "FD00::/64", "fd00:0000:0000:0000::/64", "fd00::0/64", "1.2.3.4", "fd00::",
    "10.0.0.0 via 10.0.0.1", "10.0.0.0/24 via", "10.0.0.0-10.0.0.255", "10.0.0.*", "10.0.0.0/255.255.255.0",
)
cidr = st.one_of(st.sampled_from(POOL_V4), st.sampled_from(POOL_V4), st.sampled_from(POOL_V6),
                 st.sampled_from(ODD_CIDRS), random_v4, random_v6, host_bits_v4, host_bits_v6, mapped, garbage)


def cidr_lists(element=cidr):
    return st.one_of(
        st.lists(element, max_size=4),
        st.lists(element, max_size=4).map(lambda xs: xs + xs),            # duplicates
        st.builds(lambda x, n: [x] * n, element, st.integers(2, 40)),    # one value many times
        st.lists(st.one_of(random_v4, random_v6), min_size=15, max_size=300),  # huge lists
    )


address = st.one_of(st.sampled_from(["", "10.0.0.1", "10.0.0.0", "10.0.255.255", "10.0.0.5", "10.2.0.5",
                                     "10.1.0.1", "fd00::5", "fd00::", "::ffff:10.0.0.5", "10.0.0.5/32",
                                     "0.0.0.0", "255.255.255.255", "fe80::1%eth0", "10.0.0.5 "]),
                    st.builds(lambda a: str(ipaddress.IPv4Address(a)), v4_int),
                    st.builds(lambda a: str(ipaddress.IPv6Address(a)), v6_int), garbage)
route = st.builds(lambda p, h: pb.Route(prefix=p, next_hop=h), cidr, address)
routes = st.one_of(st.lists(route, max_size=4), st.lists(route, max_size=3).map(lambda xs: xs + xs),
                   st.lists(st.builds(lambda p: pb.Route(prefix=p), random_v4), min_size=200, max_size=300))
description = st.one_of(st.just(""), _text(100), st.sampled_from(ADVERSARIAL), long_text,
                        st.sampled_from(["d" * 1024, "d" * 1025, "é" * 1024, "\t" * 10, "x\x7f"]))

INT64 = st.integers(-2 ** 63, 2 ** 63 - 1)
INT32 = st.integers(-2 ** 31, 2 ** 31 - 1)
duration = st.builds(
    lambda s, n: duration_pb2.Duration(seconds=s, nanos=n),
    st.one_of(INT64, st.integers(-10, 10 ** 8),
              st.sampled_from([0, 1, -1, 59, 60, 86400, 365 * 86400, 365 * 86400 + 1, 10 ** 10, 10 ** 12,
                               10 ** 14, 10 ** 18, 315576000000, -315576000000, 2 ** 63 - 1, -2 ** 63])),
    st.one_of(st.just(0), INT32, st.sampled_from([1, -1, 999999999, -999999999, 10 ** 9, 2 ** 31 - 1])))


def mix(good, bad):
    """Each field independently: plausible 3 times in 4, hostile otherwise.
    (Not ``one_of(good, good, good, bad)``: one_of flattens nested one_ofs, so
    a ``bad`` with many branches would win most draws.)"""
    return st.integers(0, 3).flatmap(lambda i: good if i else bad)


_pool_ns = st.sampled_from(NAMESPACES)
_pool_net = st.sampled_from(NETWORKS)
_pool_peer = st.sampled_from(PEERINGS)
uid = st.one_of(
    st.builds(lambda: str(uuid.uuid4())), st.builds(lambda: str(uuid.uuid4()).upper()),
    st.builds(lambda: "{" + str(uuid.uuid4()) + "}"), st.builds(lambda: "urn:uuid:" + str(uuid.uuid4())),
    st.builds(lambda: uuid.uuid4().hex), st.just("00000000-0000-0000-0000-000000000000"), garbage)


def ns_name():
    return mix(st.builds(lambda ns: f"namespaces/{ns}", _pool_ns), st.one_of(
        st.builds(lambda ns: f"namespaces/{ns}", namespace), garbage,
        st.sampled_from(["namespaces/", "namespaces//", "namespaces/fz-a/", "Namespaces/fz-a",
                         "namespaces/fz-a/networks/n1", "/namespaces/fz-a", "namespaces/*"])))


def network_name():
    return mix(st.builds(lambda ns, n: f"namespaces/{ns}/networks/{n}", _pool_ns, _pool_net), st.one_of(
        st.builds(lambda ns, n: f"namespaces/{ns}/networks/{n}", namespace, network), garbage,
        st.sampled_from(["namespaces/fz-a/networks/", "namespaces/fz-a/networks/n1/", "namespaces//networks/n1",
                         "namespaces/fz-a/networks/n1/peerings/p1", "namespaces/fz-a/Networks/n1",
                         "namespaces/fz-a/networks/n1/../n2", "namespaces/fz-a/networks/n1%2F..%2Fn2"])))


def peering_name():
    return mix(st.builds(lambda ns, n, p: f"namespaces/{ns}/networks/{n}/peerings/{p}", _pool_ns, _pool_net,
                         _pool_peer), st.one_of(
        st.builds(lambda ns, n, p: f"namespaces/{ns}/networks/{n}/peerings/{p}", namespace, network, peering),
        garbage,
        st.sampled_from(["namespaces/fz-a/networks/n1/peerings/", "namespaces/fz-a/networks/n1/peerings/p1/",
                         "namespaces/fz-a/networks/n1", "namespaces/fz-a/networks/n1/peerings/p1/peerings/p1"])))


mask_path = st.one_of(st.sampled_from(["description", "subnets", "routes", "ttl", "name", "uid", "etag", "*", "",
                                       "subnets.0", "Description", "description ", "remote", "phase",
                                       "peerings", "description,subnets"]), garbage)


def mask(good_paths):
    good = st.one_of(st.none(), st.lists(st.sampled_from(good_paths), max_size=len(good_paths), unique=True)
                     .map(lambda ps: field_mask_pb2.FieldMask(paths=ps)))
    return mix(good, st.lists(mask_path, max_size=5).map(lambda ps: field_mask_pb2.FieldMask(paths=ps)))


page_token = mix(st.just(""), st.one_of(
    garbage,
    st.builds(lambda b: base64.urlsafe_b64encode(b).decode(), st.binary(max_size=40)),
    st.builds(lambda s: base64.urlsafe_b64encode(s.encode()).decode(), st.one_of(network, peering)),
    st.sampled_from(["=", "==", "a", "abc", "!!!", "bjE", "bjE=", "\x00"])))
page_size = mix(st.integers(0, 3), st.one_of(st.integers(-5, 5), INT32,
                                             st.sampled_from([1000, 1001, 2 ** 31 - 1, -2 ** 31])))
etag = mix(st.just(""), st.one_of(garbage, st.builds(lambda: uuid.uuid4().hex[:8] + "-1")))
good_subnets = st.lists(st.sampled_from(POOL_V4 + POOL_V6), min_size=1, max_size=3, unique=True)
good_routes = st.lists(st.builds(lambda p: pb.Route(prefix=p), st.sampled_from(
    POOL_V4 + ("10.50.0.0/16", "10.2.0.0/16", "fd50::/48"))), max_size=2, unique_by=lambda r: r.prefix)
good_ttl = st.one_of(st.none(), st.builds(lambda s: duration_pb2.Duration(seconds=s),
                                          st.sampled_from([1, 60, 86400, 365 * 86400])))
name_or_empty = st.one_of(st.just(""), network_name(), peering_name())


def _flagged(request, validate_only: bool):
    request.validate_only = validate_only
    return request


def requests(method: str):
    """A strategy of requests for one RPC: every field plausible or hostile."""
    if method == "CreateNetwork":
        return st.builds(lambda parent, nid, name, u, subnets, rts, desc, et: pb.CreateNetworkRequest(
            parent=parent, network_id=nid, network=pb.Network(name=name, uid=u, subnets=subnets, routes=rts,
                                                              description=desc, etag=et)),
            ns_name(), mix(_pool_net, network), mix(st.just(""), name_or_empty), mix(st.just(""), uid),
            mix(good_subnets, cidr_lists()), mix(good_routes, routes), mix(st.just(""), description), etag)
    if method == "GetNetwork":
        return st.builds(lambda n: pb.GetNetworkRequest(name=n), network_name())
    if method == "ListNetworks":
        return st.builds(lambda p, s, t: pb.ListNetworksRequest(parent=p, page_size=s, page_token=t),
                         ns_name(), page_size, page_token)
    if method == "UpdateNetwork":
        return st.builds(lambda name, subnets, rts, desc, et, m: pb.UpdateNetworkRequest(
            network=pb.Network(name=name, subnets=subnets, routes=rts, description=desc, etag=et), update_mask=m),
            network_name(), mix(good_subnets, cidr_lists()), mix(good_routes, routes),
            mix(st.just("x"), description), etag, mask(["description", "subnets", "routes"]))
    if method == "DeleteNetwork":
        return st.builds(lambda n, e: pb.DeleteNetworkRequest(name=n, etag=e), network_name(), etag)
    if method == "CreatePeering":
        def build(parent, pid, rns, rnet, ruid, ttl, desc, name, phase, self_peer):
            p = pb.Peering(remote=pb.RemoteRef(namespace=rns, network=rnet, uid=ruid), description=desc, name=name,
                           phase=phase, remote_uid=ruid)
            if self_peer and parent.startswith("namespaces/") and parent.count("/") == 3:
                _, ns, _, net = parent.split("/")
                p.remote.namespace, p.remote.network = (ns if self_peer == 1 else ""), net
            if ttl is not None:
                p.ttl.CopyFrom(ttl)
            return pb.CreatePeeringRequest(parent=parent, peering_id=pid, peering=p)
        return st.builds(build, network_name(), mix(_pool_peer, peering),
                         mix(st.one_of(st.just(""), _pool_ns), namespace), mix(_pool_net, network),
                         mix(st.just(""), uid), mix(good_ttl, st.one_of(st.none(), duration)),
                         mix(st.just(""), description), mix(st.just(""), name_or_empty),
                         mix(st.just(0), st.integers(-5, 10)), st.sampled_from([0] * 8 + [1, 2]))
    if method == "BatchCreatePeerings":
        # Hostile creates, often with a plausible one or two around them, and the odd hostile flag.
        return st.builds(lambda reqs, dry, flag: pb.BatchCreatePeeringsRequest(
            requests=[_flagged(r, flag) for r in reqs], validate_only=dry),
            st.lists(st.one_of(requests("CreatePeering"), plausible("CreatePeering")), max_size=6),
            st.booleans(), st.sampled_from([False] * 9 + [True]))
    if method == "GetPeering":
        return st.builds(lambda n: pb.GetPeeringRequest(name=n), peering_name())
    if method == "ListPeerings":
        return st.builds(lambda p, s, t: pb.ListPeeringsRequest(parent=p, page_size=s, page_token=t),
                         network_name(), page_size, page_token)
    if method == "UpdatePeering":
        def build_u(name, desc, ttl, et, m, rns, rnet):
            p = pb.Peering(name=name, description=desc, etag=et, remote=pb.RemoteRef(namespace=rns, network=rnet))
            if ttl is not None:
                p.ttl.CopyFrom(ttl)
            return pb.UpdatePeeringRequest(peering=p, update_mask=m)
        return st.builds(build_u, peering_name(), mix(st.just("y"), description),
                         mix(good_ttl, st.one_of(st.none(), duration)), etag, mask(["description", "ttl"]),
                         mix(st.just(""), namespace), mix(st.just(""), network))
    if method == "DeletePeering":
        return st.builds(lambda n, e: pb.DeletePeeringRequest(name=n, etag=e), peering_name(), etag)
    if method == "CreateToken":
        names = mix(_pool_ns, st.one_of(namespace, garbage))
        return st.builds(lambda nss, d: pb.CreateTokenRequest(namespaces=nss, description=d),
                         st.one_of(st.lists(names, max_size=5), st.lists(names, max_size=3).map(lambda x: x * 3),
                                   st.lists(valid_name, min_size=50, max_size=300)),
                         mix(st.just(""), description))
    if method == "GetCaller":
        return st.just(pb.GetCallerRequest())
    if method == "ListTokens":
        return st.just(pb.ListTokensRequest())
    if method == "RevokeToken":
        shaped = st.builds(lambda i, sec: f"np_{i}_{sec}", st.text("0123456789abcdef", min_size=0, max_size=14),
                           _text(50))
        return st.builds(lambda t: pb.RevokeTokenRequest(token=t), st.one_of(garbage, shaped, valid_name))
    if method == "GetStatus":
        return st.just(pb.GetStatusRequest())
    raise ValueError(method)


# ------------------------------------------------------------------ plausible
# Mostly valid calls from small pools, so that sequences build real state
# (networks, Bound and Failed pairs) for the adversarial calls to hit.
_ns = st.sampled_from(NAMESPACES)
_net = st.sampled_from(NETWORKS)
_peer = st.sampled_from(PEERINGS)
_subnets = st.lists(st.sampled_from(POOL_V4 + POOL_V6), min_size=1, max_size=3, unique=True)
_routes = st.lists(st.builds(lambda p: pb.Route(prefix=p), st.sampled_from(
    POOL_V4 + ("10.50.0.0/16", "10.2.0.0/16", "fd50::/48"))), max_size=2, unique_by=lambda r: r.prefix)
_ttl = st.one_of(st.none(), st.builds(lambda s: duration_pb2.Duration(seconds=s), st.sampled_from([1, 60, 86400])))


def plausible(method: str):
    if method == "CreateNetwork":
        return st.builds(lambda ns, n, s, r: pb.CreateNetworkRequest(
            parent=f"namespaces/{ns}", network_id=n, network=pb.Network(subnets=s, routes=r)), _ns, _net, _subnets,
            _routes)
    if method == "UpdateNetwork":
        return st.builds(lambda ns, n, s, r, paths: pb.UpdateNetworkRequest(
            network=pb.Network(name=f"namespaces/{ns}/networks/{n}", subnets=s, routes=r, description="u"),
            update_mask=field_mask_pb2.FieldMask(paths=paths)), _ns, _net, _subnets, _routes,
            st.sampled_from([["subnets"], ["routes"], ["subnets", "routes"], ["description"], []]))
    if method == "DeleteNetwork":
        return st.builds(lambda ns, n: pb.DeleteNetworkRequest(name=f"namespaces/{ns}/networks/{n}"), _ns, _net)
    if method == "CreatePeering":
        def build(ns, n, p, rns, rn, ttl):
            req = pb.CreatePeeringRequest(parent=f"namespaces/{ns}/networks/{n}", peering_id=p,
                                          peering=pb.Peering(remote=pb.RemoteRef(namespace=rns, network=rn)))
            if ttl is not None:
                req.peering.ttl.CopyFrom(ttl)
            return req
        return st.builds(build, _ns, _net, _peer, st.one_of(st.just(""), _ns), _net, _ttl)
    if method == "BatchCreatePeerings":
        return st.builds(lambda reqs: pb.BatchCreatePeeringsRequest(requests=reqs),
                         st.lists(plausible("CreatePeering"), min_size=1, max_size=4))
    if method == "DeletePeering":
        return st.builds(lambda ns, n, p: pb.DeletePeeringRequest(name=f"namespaces/{ns}/networks/{n}/peerings/{p}"),
                         _ns, _net, _peer)
    if method == "UpdatePeering":
        return st.builds(lambda ns, n, p, t: pb.UpdatePeeringRequest(peering=pb.Peering(
            name=f"namespaces/{ns}/networks/{n}/peerings/{p}", description="x", ttl=t)), _ns, _net, _peer,
            st.builds(lambda s: duration_pb2.Duration(seconds=s), st.sampled_from([1, 3600, 86400 * 30])))
    if method == "GetNetwork":
        return st.builds(lambda ns, n: pb.GetNetworkRequest(name=f"namespaces/{ns}/networks/{n}"), _ns, _net)
    if method == "ListNetworks":
        return st.builds(lambda ns, s: pb.ListNetworksRequest(parent=f"namespaces/{ns}", page_size=s), _ns,
                         st.integers(0, 3))
    if method == "GetPeering":
        return st.builds(lambda ns, n, p: pb.GetPeeringRequest(name=f"namespaces/{ns}/networks/{n}/peerings/{p}"),
                         _ns, _net, _peer)
    if method == "ListPeerings":
        return st.builds(lambda ns, n, s: pb.ListPeeringsRequest(parent=f"namespaces/{ns}/networks/{n}",
                                                                 page_size=s), _ns, _net, st.integers(0, 2))
    if method == "CreateToken":
        return st.builds(lambda nss: pb.CreateTokenRequest(namespaces=nss), st.lists(_ns, min_size=1, max_size=2))
    if method == "GetCaller":
        return st.just(pb.GetCallerRequest())
    if method == "ListTokens":
        return st.just(pb.ListTokensRequest())
    if method == "RevokeToken":
        shaped = st.builds(lambda i, sec: f"np_{i}_{sec}", st.text("0123456789abcdef", min_size=0, max_size=14),
                           _text(50))
        return st.builds(lambda t: pb.RevokeTokenRequest(token=t), st.one_of(garbage, shaped, valid_name))
    if method == "GetStatus":
        return st.just(pb.GetStatusRequest())
    raise ValueError(method)
