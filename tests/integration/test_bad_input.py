"""Bad input: the right status code, a message naming the field and value,
and nothing changed, neither in the store nor in OVN."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2
from google.rpc import error_details_pb2

from netpeer.api.errors import details as status_details

from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc

INVALID = grpc.StatusCode.INVALID_ARGUMENT


def net_req(name="net-x", subnets=("10.7.0.0/24",), routes=(), description="", parent="namespaces/team-a"):
    return ("CreateNetwork", pb.CreateNetworkRequest(parent=parent, network_id=name, network=pb.Network(
        subnets=list(subnets), routes=[pb.Route(prefix=p, next_hop=h) for p, h in routes], description=description)))


def peer_req(name="p-x", remote_ns="team-b", remote="net-b", uid="", ttl=None, parent="namespaces/team-a/networks/net-a",
             description=""):
    p = pb.Peering(remote=pb.RemoteRef(namespace=remote_ns, network=remote, uid=uid), description=description)
    if ttl is not None:
        p.ttl.CopyFrom(ttl)
    return ("CreatePeering", pb.CreatePeeringRequest(parent=parent, peering_id=name, peering=p))


def upd_req(subnets=None, routes=None, mask=("subnets",), name="namespaces/team-a/networks/net-a"):
    n = pb.Network(name=name, subnets=list(subnets or []), routes=[pb.Route(prefix=r) for r in routes or []])
    return ("UpdateNetwork", pb.UpdateNetworkRequest(network=n, update_mask=field_mask_pb2.FieldMask(paths=list(mask))))


CASES = [
    # (id, request, code, field, value named in the message)
    ("network name with underscore", net_req(name="bad_name"), INVALID, "network", "bad_name"),
    ("network name starts with digit", net_req(name="1net"), INVALID, "network", "1net"),
    ("network name ends with dash", net_req(name="net-"), INVALID, "network", "net-"),
    ("network name too long", net_req(name="n" * 64), INVALID, "network", "nnnn"),
    ("network name empty", net_req(name=""), INVALID, "network", ""),
    ("network name unicode", net_req(name="nét"), INVALID, "network", "nét"),
    ("no subnets", net_req(subnets=()), INVALID, "subnets", "[]"),
    ("subnet not a CIDR", net_req(subnets=("banana",)), INVALID, "subnets[0]", "banana"),
    ("subnet without length", net_req(subnets=("10.0.0.0",)), INVALID, "subnets[0]", "10.0.0.0"),
    ("subnet host bits", net_req(subnets=("10.7.0.5/24",)), INVALID, "subnets[0]", "10.7.0.5/24"),
    ("subnet /0", net_req(subnets=("0.0.0.0/0",)), INVALID, "subnets[0]", "0.0.0.0/0"),
    ("subnet /32", net_req(subnets=("10.7.0.1/32",)), INVALID, "subnets[0]", "10.7.0.1/32"),
    ("subnet loopback", net_req(subnets=("127.0.0.0/8",)), INVALID, "subnets[0]", "127.0.0.0/8"),
    ("subnet IPv4-mapped IPv6", net_req(subnets=("::ffff:10.0.0.0/120",)), INVALID, "subnets[0]", "::ffff:10.0.0.0/120"),
    ("subnet link-local v6", net_req(subnets=("fe80::/64",)), INVALID, "subnets[0]", "fe80::/64"),
    ("duplicate subnets", net_req(subnets=("10.7.0.0/24", "10.7.0.0/24")), INVALID, "subnets[1]", "10.7.0.0/24"),
    ("overlapping subnets", net_req(subnets=("10.7.0.0/16", "10.7.1.0/24")), INVALID, "subnets[1]", "10.7.1.0/24"),
    ("route overlaps subnet", net_req(routes=(("10.7.0.128/25", ""),)), INVALID, "routes[0].prefix", "10.7.0.128/25"),
    ("route next hop outside", net_req(routes=(("10.9.0.0/24", "10.8.0.5"),)), INVALID, "routes[0].next_hop", "10.8.0.5"),
    ("route next hop not an IP", net_req(routes=(("10.9.0.0/24", "x"),)), INVALID, "routes[0].next_hop", "x"),
    ("v6 route without v6 subnet", net_req(routes=(("fd00:9::/64", ""),)), INVALID, "routes[0].prefix", "fd00:9::/64"),
    ("description with control chars", net_req(description="a\x00b"), INVALID, "description", "a\\x00b"),
    ("description too long", net_req(description="d" * 2000), INVALID, "description", "dddd"),
    ("bad parent", net_req(parent="team-a"), INVALID, "parent", "team-a"),
    ("bad namespace in parent", net_req(parent="namespaces/Team_A"), INVALID, "namespace", "Team_A"),
    ("peering name reserved", peer_req(name="internal"), INVALID, "peering", "internal"),
    ("peering name bad chars", peer_req(name="p.x"), INVALID, "peering", "p.x"),
    ("remote network bad", peer_req(remote="net b"), INVALID, "remote.network", "net b"),
    ("remote network missing", peer_req(remote=""), INVALID, "remote.network", ""),
    ("remote namespace bad", peer_req(remote_ns="ns/x"), INVALID, "remote.namespace", "ns/x"),
    ("remote uid not a UUID", peer_req(uid="1234"), INVALID, "remote.uid", "1234"),
    ("self peering by name", peer_req(remote_ns="team-a", remote="net-a"), INVALID, "remote.network", "team-a/net-a"),
    ("negative ttl", peer_req(ttl=duration_pb2.Duration(seconds=-5)), INVALID, "ttl", "-5s"),
    ("enormous ttl", peer_req(ttl=duration_pb2.Duration(seconds=10**10)), INVALID, "ttl", "10000000000s"),
    # More than a second of nanos is no Duration (protobuf's rule); it used to be added as 2 s more.
    ("ttl nanos 2e9", peer_req(ttl=duration_pb2.Duration(seconds=3600, nanos=2_000_000_000)), INVALID, "ttl",
     "3600s and 2000000000 ns"),
    ("ttl seconds and nanos of both signs", peer_req(ttl=duration_pb2.Duration(seconds=3600, nanos=-1)), INVALID,
     "ttl", "3600s and -1 ns"),
    ("peering parent malformed", peer_req(parent="namespaces/team-a/net-a"), INVALID, "parent",
     "namespaces/team-a/net-a"),
    ("update mask unknown", upd_req(mask=("uid",)), INVALID, "update_mask", "uid"),
    ("update to no subnets", upd_req(subnets=[]), INVALID, "subnets", "[]"),
    ("update bad subnet", upd_req(subnets=["10.1.0.0/33"]), INVALID, "subnets[0]", "10.1.0.0/33"),
    ("update of missing network", upd_req(subnets=["10.1.0.0/24"], name="namespaces/team-a/networks/nope"),
     grpc.StatusCode.NOT_FOUND, "network", "nope"),
    ("peering on missing network", peer_req(parent="namespaces/team-a/networks/nope"), grpc.StatusCode.NOT_FOUND,
     "network", "nope"),
    ("duplicate network", net_req(name="net-a", subnets=("10.8.0.0/24",)), grpc.StatusCode.ALREADY_EXISTS,
     "network", "net-a"),
    ("other namespace", net_req(parent="namespaces/team-b"), grpc.StatusCode.PERMISSION_DENIED, "namespace",
     "team-b"),
]


@pytest.fixture
def seeded(netpeerd):
    a = netpeerd.tenant("team-a")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    a.create_peering("team-a", "net-a", "existing", "net-z", "team-z")
    channel = grpc.insecure_channel(netpeerd.endpoint)
    stub = pb_grpc.NetworkServiceStub(channel)
    token = netpeerd.token("team-a")
    yield netpeerd, stub, (("authorization", f"Bearer {token}"),)
    channel.close()


def snapshot(d):
    with d.store.read() as tx:
        nets = tx.list_networks(None)
        peers = [p for n in nets for p in tx.peerings_of(n.key)]
    ovn = d.ovn.nbctl("--format=csv", "--data=bare", "--columns=_uuid,name,external_ids", "list", "Logical_Router")
    ovn += d.ovn.nbctl("--format=csv", "--data=bare", "--columns=_uuid,name", "list", "Logical_Router_Port")
    return nets, peers, ovn


def test_at_least_25_cases():
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(seeded, case):
    d, stub, md = seeded
    _, (method, request), code, field, value = case
    before = snapshot(d)
    with pytest.raises(grpc.RpcError) as info:
        getattr(stub, method)(request, metadata=md, timeout=10)
    err = info.value
    assert err.code() == code, err.details()
    message = err.details()
    assert "\n" not in message
    assert message.startswith(field) or f"{field}:" in message or f"{field} " in message, message
    assert value in message, message
    # A program finds the same in the details, the standard way (google.rpc.Status), without reading the message.
    details = {}
    for item in status_details(err):
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.ResourceInfo):
            if item.Is(kind.DESCRIPTOR):
                details[kind.__name__] = kind()
                item.Unpack(details[kind.__name__])
    info = details["ErrorInfo"]
    assert info.domain == "netpeer.dev" and info.reason.isupper(), info
    assert info.metadata["field"] == field and value in info.metadata.get("value", "").replace("\x00", "\\x00"), info
    if code == INVALID:
        assert [(v.field, v.reason) for v in details["BadRequest"].field_violations] == [(field, info.reason)]
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS):
        assert details["ResourceInfo"].resource_name.endswith(f"/networks/{value}"), details["ResourceInfo"]
    assert snapshot(d) == before
