"""Regression tests for bugs the trust tests found in netpeer/."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2

from netpeer.api.server import Limits
from netpeer.v1 import netpeer_pb2 as pb
from tests.support import ADMIN_TOKEN
from tests.trust.rpc import Raw, path


@pytest.mark.parametrize("seconds", [10 ** 14, -10 ** 14, -86399999913601, 2 ** 63 - 1, -2 ** 63, 315576000000])
def test_durations_beyond_timedelta_are_invalid_not_internal(netpeerd, seconds):
    """Found by fuzzing: a TTL Duration too large for datetime.timedelta made
    CreatePeering and UpdatePeering answer INTERNAL (OverflowError)."""
    with netpeerd.client() as c:
        c.create_network("team-a", "net-a", ["10.1.0.0/24"])
        c.create_peering("team-a", "net-a", "p", "net-b", "team-b")
    ttl = duration_pb2.Duration(seconds=seconds)
    with Raw(netpeerd.endpoint) as raw:
        code, details, _ = raw.call("CreatePeering", pb.CreatePeeringRequest(
            parent="namespaces/team-a/networks/net-a", peering_id="q",
            peering=pb.Peering(remote=pb.RemoteRef(network="net-c"), ttl=ttl)), ADMIN_TOKEN)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(f"ttl: '{seconds}s'"), details
        code, details, _ = raw.call("UpdatePeering", pb.UpdatePeeringRequest(
            peering=pb.Peering(name="namespaces/team-a/networks/net-a/peerings/p", ttl=ttl),
            update_mask=field_mask_pb2.FieldMask(paths=["ttl"])), ADMIN_TOKEN)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(f"ttl: '{seconds}s'"), details


def _peer_ports(d):
    return [r for r in d.owned_rows().get("Logical_Router_Port", []) if r["netpeer:kind"] == "peer-port"]


def test_withdrawn_bound_pair_unblocks_the_pair_it_blocked(netpeerd, checker):
    """Found by the model: A is Bound to D; A-B failed only because B overlaps
    D. When D withdraws, A-B must bind. It stayed Failed (with a stale
    message, until its TTL deleted both consents) because the Failed pair was
    re-evaluated while A's half towards D still read Bound."""
    a, b, d = (netpeerd.tenant(ns) for ns in ("a", "b", "d"))
    a.create_network("a", "A", ["10.1.0.0/24"])
    b.create_network("b", "B", ["10.5.0.0/24"])
    d.create_network("d", "D", ["10.5.0.0/16"])
    a.create_peering("a", "A", "to-b", "B", "b")            # older than A's half towards D
    a.create_peering("a", "A", "to-d", "D", "d")
    assert d.create_peering("d", "D", "to-a", "A", "a")["phase"] == "Bound"
    assert b.create_peering("b", "B", "to-a", "A", "a")["phase"] == "Failed"
    d.delete_peering("d", "D", "to-a")                      # the remote side withdraws
    assert a.get_peering("a", "A", "to-d")["reason"] == "RemoteWithdrawn"
    assert a.get_peering("a", "A", "to-b")["phase"] == "Bound"
    assert b.get_peering("b", "B", "to-a")["phase"] == "Bound"
    assert len(_peer_ports(netpeerd)) == 2
    checker()


def test_conflicting_pairs_unblocked_together_the_first_completed_wins(netpeerd, checker):
    """Found by the model: X-P and X-Q conflict (P and Q overlap) and both
    wait on X's Bound peer D. X-Q was completed first (Q consented before P),
    so when D goes X-Q must bind; the service bound X-P because X's half
    towards P is older than its half towards Q."""
    x, d, p, q = (netpeerd.tenant(ns) for ns in ("x", "d", "p", "q"))
    x.create_network("x", "X", ["10.1.0.0/24"])
    d.create_network("d", "D", ["10.5.0.0/16"])
    p.create_network("p", "P", ["10.5.0.0/24"])
    q.create_network("q", "Q", ["10.5.0.0/25"])
    x.create_peering("x", "X", "to-d", "D", "d")
    assert d.create_peering("d", "D", "to-x", "X", "x")["phase"] == "Bound"
    x.create_peering("x", "X", "to-p", "P", "p")
    x.create_peering("x", "X", "to-q", "Q", "q")
    assert q.create_peering("q", "Q", "to-x", "X", "x")["phase"] == "Failed"   # X-Q completed first
    assert p.create_peering("p", "P", "to-x", "X", "x")["phase"] == "Failed"
    x.delete_peering("x", "X", "to-d")
    assert q.get_peering("q", "Q", "to-x")["phase"] == "Bound"
    assert x.get_peering("x", "X", "to-q")["phase"] == "Bound"
    assert p.get_peering("p", "P", "to-x")["phase"] == "Failed"
    checker()


def test_a_write_reports_what_it_committed_even_if_another_write_follows(netpeerd, monkeypatch):
    """Found by the concurrency test: create/update calls re-read their
    result in a new transaction after committing, so a concurrent delete in
    between turned a committed write into INTERNAL (peerings: None) or
    NOT_FOUND (networks) for the caller, who would think it had failed."""
    from netpeer.core.models import Caller
    service = netpeerd.service
    admin = Caller("admin", frozenset(), True)
    original = service._write
    competing = []

    def write_then_someone_else_deletes(fn, validate_only=False, **kwargs):
        result = original(fn, validate_only, **kwargs)
        if competing:
            action = competing.pop()
            action()  # another client's write lands between our commit and our answer
        return result

    monkeypatch.setattr(service, "_write", write_then_someone_else_deletes)
    with netpeerd.client() as c:
        c.create_network("a", "net-a", ["10.1.0.0/24"])
        competing.append(lambda: service.delete_peering(admin, "a", "net-a", "p"))
        p = c.create_peering("a", "net-a", "p", "net-b", "b")
        assert (p["name"], p["phase"]) == ("p", "Pending")
        c.create_peering("a", "net-a", "q", "net-c", "b")
        competing.append(lambda: service.delete_peering(admin, "a", "net-a", "q"))
        assert c.update_peering("a", "net-a", "q", description="new")["description"] == "new"
        c.create_network("a", "net-x", ["10.7.0.0/24"])
        competing.append(lambda: service.delete_network(admin, "a", "net-x"))
        assert c.update_network("a", "net-x", description="new")["description"] == "new"
        competing.append(lambda: service.delete_network(admin, "a", "net-y"))
        assert c.create_network("a", "net-y", ["10.8.0.0/24"])["name"] == "net-y"
    assert not competing


@pytest.mark.parametrize("size", [100, 9000, 100_000])
def test_a_long_etag_still_gets_aborted(netpeerd, size):
    """Found by fuzzing: a stale etag was echoed whole in the ABORTED message;
    from ~9 KB the answer exceeded the client's metadata limit and arrived as
    RESOURCE_EXHAUSTED ("Stream removed"), hiding the real status. A request
    larger than its method takes is refused first, with a short line too."""
    with netpeerd.client() as c:
        c.create_network("a", "n", ["10.1.0.0/24"])
        c.create_peering("a", "n", "p", "x", "b")
    stale = "e" * size
    calls = [("DeleteNetwork", pb.DeleteNetworkRequest(name="namespaces/a/networks/n", etag=stale)),
             ("UpdateNetwork", pb.UpdateNetworkRequest(network=pb.Network(name="namespaces/a/networks/n",
                                                                          description="x", etag=stale),
                                                       update_mask=field_mask_pb2.FieldMask(paths=["description"]))),
             ("DeletePeering", pb.DeletePeeringRequest(name="namespaces/a/networks/n/peerings/p", etag=stale)),
             ("UpdatePeering", pb.UpdatePeeringRequest(peering=pb.Peering(
                 name="namespaces/a/networks/n/peerings/p", description="x", etag=stale),
                 update_mask=field_mask_pb2.FieldMask(paths=["description"])))]
    with Raw(netpeerd.endpoint) as raw:
        for method, request in calls:
            code, details, _ = raw.call(method, request, ADMIN_TOKEN)
            if request.ByteSize() > Limits().request_limit(path(method)):
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (method, code, details[:200])
                assert details.startswith("request: ") and len(details) < 200, details[:200]
                continue
            assert code == grpc.StatusCode.ABORTED, (method, code, details[:200])
            assert details.startswith("etag: 'eee") and len(details) < 200, details[:200]


@pytest.mark.parametrize("seconds,nanos", [(100, 500_000_000), (86399, 999_999_999), (1, 1)])
def test_fractional_ttl_expires_when_the_api_says(netpeerd, checker, seconds, nanos):
    """Found by fuzzing: a TTL with a fraction of a second was stored as whole
    seconds while expires_at kept the fraction, so a peering expired later
    than the ttl and expires_at the API reported."""
    with netpeerd.client() as c:
        c.create_network("a", "n", ["10.1.0.0/24"])
    with Raw(netpeerd.endpoint) as raw:
        ttl = duration_pb2.Duration(seconds=seconds, nanos=nanos)
        code, details, p = raw.call("CreatePeering", pb.CreatePeeringRequest(
            parent="namespaces/a/networks/n", peering_id="p",
            peering=pb.Peering(remote=pb.RemoteRef(network="x"), ttl=ttl)), ADMIN_TOKEN)
        assert code == grpc.StatusCode.OK, details
        assert p.ttl.seconds == seconds and p.ttl.nanos == 0
        assert p.expires_at.ToMicroseconds() - p.last_phase_transition_time.ToMicroseconds() == seconds * 10 ** 6
        checker()  # the store's expires_at agrees too
        code, details, p = raw.call("UpdatePeering", pb.UpdatePeeringRequest(
            peering=pb.Peering(name="namespaces/a/networks/n/peerings/p", ttl=ttl),
            update_mask=field_mask_pb2.FieldMask(paths=["ttl"])), ADMIN_TOKEN)
        assert code == grpc.StatusCode.OK, details
        checker()
