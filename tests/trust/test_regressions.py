"""Regression tests for bugs the trust tests found in netpeer/."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2

from netpeer.v1 import netpeer_pb2 as pb
from tests.conftest import ADMIN_TOKEN
from tests.trust.rpc import Raw


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
