"""Tenant isolation: a matrix over four namespaces, each with its own token.

Without both halves, no call made with one namespace's credential creates,
reads, changes, deletes or binds anything of another namespace: every RPC
with every foreign name (existing or not) is PERMISSION_DENIED, says the same
thing whether the name exists or not, and leaves the store and OVN exactly
as they were. Only the admin token mints tokens; unknown or garbled tokens
are UNAUTHENTICATED before anything else is looked at.
"""

from __future__ import annotations

import itertools
import sqlite3

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2

from netpeer.v1 import netpeer_pb2 as pb
from tests.support import ADMIN_TOKEN
from tests.trust import report
from tests.trust.rpc import ADMIN_RPCS, ALL_RPCS, Raw, ovn_dump, request_class, store_dump

DENIED = grpc.StatusCode.PERMISSION_DENIED
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
TENANTS = ("acme", "bank", "corp", "dept")


def net_name(ns, net):
    return f"namespaces/{ns}/networks/{net}"


def peer_name(ns, net, p):
    return f"{net_name(ns, net)}/peerings/{p}"


@pytest.fixture
def world(netpeerd):
    """Four tenants; every phase present: Bound across namespaces and inside
    one, Pending, Failed; and a peering towards a network that does not exist."""
    tokens = {ns: netpeerd.token(ns) for ns in TENANTS}
    c = {ns: netpeerd.client(tokens[ns]) for ns in TENANTS}
    for i, ns in enumerate(TENANTS, start=1):
        c[ns].create_network(ns, "net1", [f"10.{i}.0.0/24", f"fd00:{i}::/64"], description=f"{ns} one")
        c[ns].create_network(ns, "net2", [f"10.{i}.1.0/24"], routes=[f"10.{i}0.0.0/16"])
    c["dept"].update_network("dept", "net2", routes=["10.20.0.0/16"])  # overlaps bank/net2's route
    c["acme"].create_peering("acme", "net1", "to-bank", "net1", "bank")
    c["bank"].create_peering("bank", "net1", "to-acme", "net1", "acme")            # Bound
    c["corp"].create_peering("corp", "net1", "to-dept", "net1", "dept")            # Pending
    c["bank"].create_peering("bank", "net2", "to-dept", "net2", "dept")
    c["dept"].create_peering("dept", "net2", "to-bank", "net2", "bank")            # Failed (10.20/16)
    c["corp"].create_peering("corp", "net2", "to-net1", "net1")
    c["corp"].create_peering("corp", "net1", "to-net2", "net2")                    # Bound, same namespace
    c["acme"].create_peering("acme", "net2", "to-ghost", "ghost", "dept")          # towards nothing
    phases = {(p["namespace"], p["network"], p["name"]): p["phase"]
              for ns in TENANTS for n in ("net1", "net2") for p in c[ns].list_peerings(ns, n)}
    assert sorted(phases.values()) == ["Bound"] * 4 + ["Failed"] * 2 + ["Pending"] * 2
    for x in c.values():
        x.close()
    with Raw(netpeerd.endpoint) as raw:
        yield netpeerd, raw, tokens, phases


def foreign_calls(ns: str, phases) -> list[tuple[str, str, object]]:
    """(label, method, request) naming resources of ``ns``: existing and missing."""
    peerings = sorted(k[2] for k in phases if k[0] == ns) or ["to-x"]
    calls = []
    for net in ("net1", "net2", "missing"):
        mask = field_mask_pb2.FieldMask
        calls += [
            (f"create {net}", "CreateNetwork", pb.CreateNetworkRequest(
                parent=f"namespaces/{ns}", network_id=net, network=pb.Network(subnets=["10.99.0.0/24"]))),
            (f"get {net}", "GetNetwork", pb.GetNetworkRequest(name=net_name(ns, net))),
            (f"update description {net}", "UpdateNetwork", pb.UpdateNetworkRequest(
                network=pb.Network(name=net_name(ns, net), description="pwned"), update_mask=mask(paths=["description"]))),
            (f"update subnets {net}", "UpdateNetwork", pb.UpdateNetworkRequest(
                network=pb.Network(name=net_name(ns, net), subnets=["10.98.0.0/24"]), update_mask=mask(paths=["subnets"]))),
            (f"update all {net}", "UpdateNetwork", pb.UpdateNetworkRequest(
                network=pb.Network(name=net_name(ns, net), subnets=["10.98.0.0/24"]))),
            (f"delete {net}", "DeleteNetwork", pb.DeleteNetworkRequest(name=net_name(ns, net))),
            (f"delete {net} with etag", "DeleteNetwork", pb.DeleteNetworkRequest(name=net_name(ns, net), etag="x-1")),
            (f"list peerings {net}", "ListPeerings", pb.ListPeeringsRequest(parent=net_name(ns, net))),
            (f"list peerings {net} page", "ListPeerings", pb.ListPeeringsRequest(
                parent=net_name(ns, net), page_size=1, page_token="dG8tYQ==")),
        ]
        for other in TENANTS:  # the other half, on their behalf
            calls.append((f"create peering {net} -> {other}", "CreatePeering", pb.CreatePeeringRequest(
                parent=net_name(ns, net), peering_id=f"to-{other}",
                peering=pb.Peering(remote=pb.RemoteRef(namespace=other, network="net1")))))
            calls.append((f"batch-create peering {net} -> {other}", "BatchCreatePeerings",
                          pb.BatchCreatePeeringsRequest(requests=[calls[-1][2]])))
        for p in peerings + ["missing"]:
            calls += [
                (f"get peering {net}/{p}", "GetPeering", pb.GetPeeringRequest(name=peer_name(ns, net, p))),
                (f"update peering {net}/{p}", "UpdatePeering", pb.UpdatePeeringRequest(
                    peering=pb.Peering(name=peer_name(ns, net, p), description="x",
                                       ttl=duration_pb2.Duration(seconds=1)))),
                (f"delete peering {net}/{p}", "DeletePeering", pb.DeletePeeringRequest(name=peer_name(ns, net, p))),
            ]
    calls += [
        ("list networks", "ListNetworks", pb.ListNetworksRequest(parent=f"namespaces/{ns}")),
        ("list networks page", "ListNetworks", pb.ListNetworksRequest(parent=f"namespaces/{ns}", page_size=1,
                                                                      page_token="bmV0MQ==")),
        ("mint token", "CreateToken", pb.CreateTokenRequest(namespaces=[ns])),
        ("list tokens", "ListTokens", pb.ListTokensRequest()),
        ("revoke a token", "RevokeToken", pb.RevokeTokenRequest(token="np_000000000000_x")),
        ("server status", "GetStatus", pb.GetStatusRequest()),
    ]
    return calls


def test_isolation_matrix(world):
    d, raw, tokens, phases = world
    both = d.token("acme", "bank")
    d.settle()
    store_before, ovn_before = store_dump(d.store.path), sorted(ovn_dump(d.ovn).splitlines())
    tried = 0
    rpcs = set()
    for caller, target in itertools.permutations(TENANTS, 2):
        messages: dict[str, set[str]] = {}
        for label, method, request in foreign_calls(target, phases):
            code, details, _ = raw.call(method, request, tokens[caller])
            assert code == DENIED, f"{caller} -> {target}: {label}: {code} {details}"
            assert len(details.splitlines()) == 1, details
            assert target in details or method in ADMIN_RPCS, details
            messages.setdefault(method, set()).add(details)
            tried += 1
            rpcs.add(method)
        # Existing and missing names get the same words: nothing to enumerate.
        assert all(len(m) == 1 for m in messages.values()), messages
    # A token granting several namespaces is denied outside them too.
    for label, method, request in foreign_calls("corp", phases):
        code, details, _ = raw.call(method, request, both)
        assert code == DENIED, f"acme+bank -> corp: {label}: {code} {details}"
        tried += 1
    assert store_dump(d.store.path) == store_before
    assert sorted(ovn_dump(d.ovn).splitlines()) == ovn_before
    assert rpcs == set(ALL_RPCS) - {"GetCaller"}
    report.record("isolation", "tenants", len(TENANTS))
    report.record("isolation", "foreign calls denied, store and OVN unchanged", tried)


def test_one_half_never_binds_or_touches_the_other_side(world):
    """Declaring one's own half towards every foreign network answers Pending
    and changes nothing of the other namespace, in the store or in OVN."""
    d, raw, tokens, phases = world
    made = 0
    for caller, target in itertools.permutations(TENANTS, 2):
        for net, remote in itertools.product(("net1", "net2"), ("net1", "net2", "absent")):
            pairs = existing_pairs(d)
            if (target, remote, caller, net) in pairs:
                continue  # the other side already consented: that would be both halves
            if (caller, net, target, remote) in pairs:
                continue  # we already have a peering towards it
            before = foreign_state(d, target)
            ovn_before = sorted(ovn_dump(d.ovn).splitlines())
            code, details, p = raw.call("CreatePeering", pb.CreatePeeringRequest(
                parent=net_name(caller, net), peering_id="probe",
                peering=pb.Peering(remote=pb.RemoteRef(namespace=target, network=remote))), tokens[caller])
            assert code == grpc.StatusCode.OK, details
            assert (p.phase, p.reason, p.remote_uid) == (pb.PENDING, "AwaitingRemote", "")
            assert foreign_state(d, target) == before
            assert sorted(ovn_dump(d.ovn).splitlines()) == ovn_before
            code, details, _ = raw.call("DeletePeering", pb.DeletePeeringRequest(
                name=peer_name(caller, net, "probe")), tokens[caller])
            assert code == grpc.StatusCode.OK, details
            made += 1
    report.record("isolation", "one-sided peerings towards foreign networks, none bound", made)


def existing_pairs(d):
    with d.store.read() as tx:
        nets = tx.list_networks(None)
        return {(p.namespace, p.network, p.remote_namespace, p.remote_network)
                for n in nets for p in tx.peerings_of(n.key)}


# Stamped by netpeerd's Programmer in the background when OVN's chassis catch up: not a change anyone made.
_BACKGROUND = {"dataplane_cfg", "programmed_at"}


def foreign_state(d, ns):
    dump = store_dump(d.store.path)
    db = sqlite3.connect(f"file:{d.store.path}?mode=ro", uri=True)
    try:
        columns = [r[1] for r in db.execute("PRAGMA table_info(peerings)")]
    finally:
        db.close()
    keep = [i for i, c in enumerate(columns) if c not in _BACKGROUND]
    return ([r for r in dump["networks"] if r[0] == ns],
            [tuple(r[i] for i in keep) for r in dump["peerings"] if r[0] == ns])


def test_fields_the_server_ignores_cannot_smuggle_a_namespace(world):
    """Names inside request bodies that are not the resource name (a network's
    `name` on create, a peering's `name` on create) never redirect the call."""
    d, raw, tokens, _ = world
    before = foreign_state(d, "bank")
    code, details, n = raw.call("CreateNetwork", pb.CreateNetworkRequest(
        parent="namespaces/acme", network_id="smuggled",
        network=pb.Network(name=net_name("bank", "smuggled"), subnets=["10.77.0.0/24"])), tokens["acme"])
    assert code == grpc.StatusCode.OK and n.name == net_name("acme", "smuggled"), details
    code, details, p = raw.call("CreatePeering", pb.CreatePeeringRequest(
        parent=net_name("acme", "smuggled"), peering_id="sm",
        peering=pb.Peering(name=peer_name("bank", "net1", "sm"), remote=pb.RemoteRef(network="x"))), tokens["acme"])
    assert code == grpc.StatusCode.OK and p.name == peer_name("acme", "smuggled", "sm"), details
    assert p.remote.namespace == "acme"  # defaults to the caller's namespace, not the smuggled one
    assert foreign_state(d, "bank") == before
    # Near-miss spellings of a foreign namespace are other (invalid or ungranted) namespaces.
    for spoof in ("Bank", "BANK", "bank ", " bank", "bank\n", "bаnk", "ｂａｎｋ", "bank/../acme", "acme/../bank",
                  "acme\x00bank", "bank%2F", "*", ".*"):
        code, details, _ = raw.call("ListNetworks", pb.ListNetworksRequest(parent=f"namespaces/{spoof}"),
                                    tokens["acme"])
        assert code in (DENIED, grpc.StatusCode.INVALID_ARGUMENT), (spoof, code, details)
        code, details, _ = raw.call("GetNetwork", pb.GetNetworkRequest(name=f"namespaces/{spoof}/networks/net1"),
                                    tokens["acme"])
        assert code in (DENIED, grpc.StatusCode.INVALID_ARGUMENT), (spoof, code, details)


def test_only_admin_mints_tokens(world):
    d, raw, tokens, _ = world
    for ns in TENANTS:
        for wanted in ([ns], [t for t in TENANTS if t != ns], list(TENANTS), [], ["brand-new"]):
            code, details, _ = raw.call("CreateToken", pb.CreateTokenRequest(namespaces=wanted), tokens[ns])
            assert code == DENIED, (ns, wanted, code, details)
    code, _, me = raw.call("GetCaller", pb.GetCallerRequest(), tokens["acme"])
    assert code == grpc.StatusCode.OK and list(me.namespaces) == ["acme"] and not me.admin
    # The admin can, and what it mints grants exactly what was asked.
    code, details, minted = raw.call("CreateToken", pb.CreateTokenRequest(namespaces=["corp", "dept"]),
                                     ADMIN_TOKEN)
    assert code == grpc.StatusCode.OK, details
    code, _, who = raw.call("GetCaller", pb.GetCallerRequest(), minted.token)
    assert (sorted(who.namespaces), who.admin) == (["corp", "dept"], False)
    assert raw.call("GetNetwork", pb.GetNetworkRequest(name=net_name("dept", "net1")), minted.token)[0] \
        == grpc.StatusCode.OK
    assert raw.call("GetNetwork", pb.GetNetworkRequest(name=net_name("acme", "net1")), minted.token)[0] == DENIED
    assert raw.call("CreateToken", pb.CreateTokenRequest(namespaces=["corp"]), minted.token)[0] == DENIED


def bad_credentials(tokens) -> list[tuple[str, tuple]]:
    admin_id, admin_secret = ADMIN_TOKEN.split("_")[1:]
    t_id, t_secret = tokens["acme"].split("_")[1:]
    flipped = admin_secret[:-1] + ("b" if admin_secret[-1] != "b" else "c")
    bearer = lambda t: (("authorization", f"Bearer {t}"),)  # noqa: E731
    return [
        ("no metadata", ()),
        ("empty bearer", (("authorization", "Bearer "),)),
        ("bearer without token", (("authorization", "Bearer"),)),
        ("basic scheme", (("authorization", f"Basic {ADMIN_TOKEN}"),)),
        ("token without scheme", (("authorization", ADMIN_TOKEN),)),
        ("other header", (("x-token", f"Bearer {ADMIN_TOKEN}"),)),
        ("admin secret, last char changed", bearer(f"np_{admin_id}_{flipped}")),
        ("admin secret truncated", bearer(f"np_{admin_id}_{admin_secret[:-1]}")),
        ("admin secret extended", bearer(f"np_{admin_id}_{admin_secret}a")),
        ("admin secret empty", bearer(f"np_{admin_id}_")),
        ("unknown id", bearer(f"np_ffffffffffff_{t_secret}")),
        ("tenant id, admin secret", bearer(f"np_{t_id}_{admin_secret}")),
        ("admin id, tenant secret", bearer(f"np_{admin_id}_{t_secret}")),
        ("wrong prefix", bearer(f"xp_{t_id}_{t_secret}")),
        ("upper-case prefix", bearer(f"NP_{t_id}_{t_secret}")),
        ("two parts", bearer(f"np_{t_id}{t_secret}")),
        ("four parts", bearer(f"{tokens['acme']}_x")),
        ("only underscores", bearer("np__")),
        ("garbage", bearer("hunter2")),
        ("long garbage", bearer("np_x_" + "A" * 4000)),
        ("sql-ish id", bearer("np_' OR '1'='1_x")),
    ]


def test_unknown_and_garbled_tokens_are_unauthenticated(world):
    d, raw, tokens, _ = world
    d.settle()
    store_before = store_dump(d.store.path)
    # Well-formed requests, and one that is invalid: authentication comes first.
    requests = {m: request_class(m)() for m in ALL_RPCS}
    requests["GetNetwork"] = pb.GetNetworkRequest(name=net_name("acme", "net1"))
    requests["ListNetworks"] = pb.ListNetworksRequest(parent="namespaces/acme")
    requests["CreateToken"] = pb.CreateTokenRequest(namespaces=["acme"])
    tried = 0
    texts = set()
    for label, metadata in bad_credentials(tokens):
        for method, request in list(requests.items()) + [("CreateNetwork", pb.CreateNetworkRequest(parent="???"))]:
            code, details, _ = raw.call(method, request, metadata=metadata)
            assert code == UNAUTH, f"{label}: {method}: {code} {details}"
            assert len(details.splitlines()) == 1
            if metadata and "missing" not in details:
                texts.add(details)
            tried += 1
    # Unknown id, wrong secret, wrong shape: one answer, nothing to probe.
    assert texts == {"invalid token"}, texts
    assert store_dump(d.store.path) == store_before
    report.record("isolation", "bad credentials x RPCs answered UNAUTHENTICATED", tried)
