"""The sizes netpeerd takes and sends (netpeer.api.server.Limits), against
the largest requests and answers netpeer's own limits allow; and how the
intake (netpeer.api.intake) refuses what it does not take. The behaviour of
a real netpeerd under floods of such requests: tests/trust/test_edge.py."""

from __future__ import annotations

import json
import logging
import pathlib
import subprocess
import sys

import pytest
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2

from netpeer import errors
from netpeer.api import intake
from netpeer.api.server import Limits
from netpeer.core.validate import DESCRIPTION_MAX, MAX_ROUTES, MAX_SUBNETS, NAME_MAX
from netpeer.service.batch import MAX_REQUESTS
from netpeer.service.operations import Service
from netpeer.v1 import netpeer_pb2 as pb
from tests.support import MALFORMED_PROTOBUF

ROOT = pathlib.Path(__file__).resolve().parents[2]

NAME = "n" * NAME_MAX
NS = "s" * NAME_MAX
DESCRIPTION = "\U0001F600" * DESCRIPTION_MAX   # 4 bytes each in UTF-8
UID = "12345678-1234-1234-1234-123456789012"
SITE = "s" * 10
PREFIX = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120"   # the longest spelling of a prefix
ADDRESS = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"
NETWORK = f"namespaces/{NS}/networks/{NAME}"
PEERING = f"{NETWORK}/peerings/{NAME}"
TOKEN = "np_" + "i" * 24 + "_" + "s" * 43
WHEN = timestamp_pb2.Timestamp(seconds=2 ** 40, nanos=999_999_999)
TTL = duration_pb2.Duration(seconds=365 * 86400, nanos=999_999_999)
ETAG = UID[:8] + "-" + "9" * 19


def network(peered: int = 0) -> pb.Network:
    """A network as netpeerd answers it, each field as long as it can be."""
    return pb.Network(
        name=NETWORK, uid=UID, subnets=[PREFIX] * MAX_SUBNETS,
        routes=[pb.Route(prefix=PREFIX, next_hop=ADDRESS)] * MAX_ROUTES, description=DESCRIPTION,
        peerings=[pb.NetworkPeeringStatus(name=NAME, remote_namespace=NS, remote_network=NAME, phase=pb.FAILED,
                                          reason="OverlappingPrefixes", last_phase_transition_time=WHEN,
                                          remote_site=SITE)] * Service.VIEW_PEERINGS,
        peered_networks=[pb.PeeredNetwork(namespace=NS, name=NAME, uid=UID, site=SITE,
                                          prefixes=[PREFIX] * (MAX_SUBNETS + MAX_ROUTES))] * peered,
        create_time=WHEN, update_time=WHEN, etag=ETAG, peering_count=2 ** 31 - 1)


def network_input() -> pb.Network:
    """What a create or update of a network reads."""
    return pb.Network(name=NETWORK, subnets=[PREFIX] * MAX_SUBNETS,
                      routes=[pb.Route(prefix=PREFIX, next_hop=ADDRESS)] * MAX_ROUTES, description=DESCRIPTION,
                      etag=ETAG)


def peering() -> pb.Peering:
    """A peering as netpeerd answers it."""
    return pb.Peering(name=PEERING, remote=pb.RemoteRef(namespace=NS, network=NAME, uid=UID, site=SITE),
                      description=DESCRIPTION, ttl=TTL, phase=pb.FAILED, reason="OverlappingPrefixes",
                      message=f"the prefixes of {NS}/{NAME} overlap {PREFIX} of {NS}/{NAME} and "
                              "15 more; nothing was bound",
                      last_phase_transition_time=WHEN, expires_at=WHEN, remote_uid=UID, network_uid=UID,
                      create_time=WHEN, etag=ETAG, dataplane=pb.PROGRAMMED, programmed_at=WHEN)


def create_peering() -> pb.CreatePeeringRequest:
    return pb.CreatePeeringRequest(parent=NETWORK, peering_id=NAME, peering=pb.Peering(
        remote=pb.RemoteRef(namespace=NS, network=NAME, uid=UID, site=SITE), description=DESCRIPTION, ttl=TTL))


# The longest request id: three names, their dots and a 12-digit digest (netpeer.core.requests).
REQUEST = f"{NETWORK}/peeringRequests/{NAME}.{NAME}.{NAME}.{'f' * 12}"
MASK = field_mask_pb2.FieldMask(paths=["description", "subnets", "routes"])
LARGEST_REQUESTS = {
    "/netpeer.v1.NetworkService/CreateNetwork": pb.CreateNetworkRequest(
        parent=f"namespaces/{NS}", network_id=NAME, network=network_input(), validate_only=True),
    "/netpeer.v1.NetworkService/GetNetwork": pb.GetNetworkRequest(name=NETWORK),
    "/netpeer.v1.NetworkService/ListNetworks": pb.ListNetworksRequest(
        parent=f"namespaces/{NS}", page_size=2 ** 31 - 1, page_token="x" * 88),
    "/netpeer.v1.NetworkService/UpdateNetwork": pb.UpdateNetworkRequest(
        network=network_input(), update_mask=MASK, validate_only=True),
    "/netpeer.v1.NetworkService/DeleteNetwork": pb.DeleteNetworkRequest(name=NETWORK, etag=ETAG),
    "/netpeer.v1.NetworkService/CreatePeering": create_peering(),
    "/netpeer.v1.NetworkService/BatchCreatePeerings": pb.BatchCreatePeeringsRequest(
        requests=[create_peering()] * MAX_REQUESTS, validate_only=True),
    "/netpeer.v1.NetworkService/GetPeering": pb.GetPeeringRequest(name=PEERING),
    "/netpeer.v1.NetworkService/ListPeerings": pb.ListPeeringsRequest(
        parent=NETWORK, page_size=2 ** 31 - 1, page_token="x" * 88),
    # A peering as read back, changed and sent (output-only fields are ignored, but count).
    "/netpeer.v1.NetworkService/UpdatePeering": pb.UpdatePeeringRequest(
        peering=peering(), update_mask=field_mask_pb2.FieldMask(paths=["description", "ttl", "remote.uid"]),
        validate_only=True),
    "/netpeer.v1.NetworkService/DeletePeering": pb.DeletePeeringRequest(name=PEERING, etag=ETAG),
    "/netpeer.v1.NetworkService/ListPeeringRequests": pb.ListPeeringRequestsRequest(
        parent=NETWORK, page_size=2 ** 31 - 1, page_token="x" * 340),
    "/netpeer.v1.NetworkService/DismissPeeringRequest": pb.DismissPeeringRequestRequest(name=REQUEST),
    # The peering's output-only fields are ignored, but count.
    "/netpeer.v1.NetworkService/AcceptPeeringRequest": pb.AcceptPeeringRequestRequest(
        name=REQUEST, peering_id=NAME, peering=peering(), validate_only=True),
    "/netpeer.v1.NetworkService/Watch": pb.WatchRequest(parent=NETWORK, since_revision=2 ** 63 - 1),
    # Nothing bounds a token's namespaces but this limit: 1,000 of the longest names fit.
    "/netpeer.v1.TokenService/CreateToken": pb.CreateTokenRequest(
        namespaces=[NS] * 1000, description=DESCRIPTION, ttl=TTL),
    "/netpeer.v1.TokenService/GetCaller": pb.GetCallerRequest(),
    "/netpeer.v1.TokenService/ListTokens": pb.ListTokensRequest(),
    "/netpeer.v1.TokenService/RevokeToken": pb.RevokeTokenRequest(token=TOKEN),
    "/netpeer.v1.StatusService/GetStatus": pb.GetStatusRequest(),
}


def test_every_method_takes_its_largest_legitimate_request():
    served = {f"/{service.full_name}/{method.name}"
              for service in pb.DESCRIPTOR.services_by_name.values() if service.name != "SiteService"
              for method in service.methods}
    assert set(LARGEST_REQUESTS) == served, "a method without its largest request here: add it"
    limits = Limits()
    for method, request in LARGEST_REQUESTS.items():
        assert request.ByteSize() <= limits.request_limit(method), (method, request.ByteSize())
    # A method with a larger limit needs it, and its limit is not far above its largest request.
    for method, limit in limits.larger_requests:
        largest = LARGEST_REQUESTS[method].ByteSize()
        assert limits.request_bytes < largest <= limit <= 3 * largest, (method, largest, limit)
    # gRPC itself refuses nothing a method's own limit would take.
    options = dict(limits.options())
    assert options["grpc.max_receive_message_length"] == max(limit for _, limit in limits.larger_requests)
    assert options["grpc.max_send_message_length"] == limits.answer_bytes == intake.ANSWER_BYTES


def test_the_largest_answers_fit():
    limits = Limits()
    batch = pb.BatchCreatePeeringsResponse(peerings=[peering()] * MAX_REQUESTS)
    assert 4 << 20 < batch.ByteSize() <= limits.answer_bytes   # more than gRPC's default of 4 MiB
    # A network shows every Bound peer; 500 is the default quota of peerings per network.
    assert network(peered=500).ByteSize() <= limits.answer_bytes


def test_a_request_over_its_limit_is_refused_unparsed():
    seen = []

    def parse(data):
        seen.append(data)
        return pb.GetNetworkRequest.FromString(data)
    take = intake.parser("/netpeer.v1.NetworkService/GetNetwork", parse, 4096)
    assert take(pb.GetNetworkRequest(name=NETWORK).SerializeToString()).name == NETWORK
    refused = take(pb.GetNetworkRequest(name="x" * 5000).SerializeToString())
    assert isinstance(refused, intake.Refused) and len(seen) == 1
    assert isinstance(refused.error, errors.ResourceExhausted)
    assert refused.error.message == "request: 5,003 bytes is more than GetNetwork takes (4,096 bytes at most)"


# In a fresh interpreter, as netpeerd runs: pulumi, once imported (the provider's
# tests do), calls protobuf's SetAllowOversizeProtos(True), which lifts the
# decoder's nesting limit for the whole process, and 100,000 nested groups
# then crash it. netpeerd never imports pulumi (test_layers.py).
PARSE_IN_A_FRESH_INTERPRETER = """
import json, sys
from netpeer.api import intake
from netpeer.v1 import netpeer_pb2 as pb
from tests.support import MALFORMED_PROTOBUF
take = intake.parser("/netpeer.v1.NetworkService/GetNetwork", pb.GetNetworkRequest.FromString, 1 << 16)
refused = take(MALFORMED_PROTOBUF[sys.argv[1]])
error = getattr(refused, "error", None)
print(json.dumps([type(refused).__name__, type(error).__name__, getattr(error, "message", "")]))
"""


@pytest.mark.parametrize("kind", sorted(MALFORMED_PROTOBUF))
def test_a_malformed_request_is_refused_with_one_line(kind):
    ran = subprocess.run([sys.executable, "-c", PARSE_IN_A_FRESH_INTERPRETER, kind], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    answer, error, message = json.loads(ran.stdout)
    assert (answer, error) == ("Refused", "InvalidArgument"), kind
    assert message.startswith(
        f"request: {len(MALFORMED_PROTOBUF[kind]):,} bytes are not a valid netpeer.v1.GetNetworkRequest message (")
    assert "\n" not in message


def test_method_labels():
    assert intake.method_label("/netpeer.v1.NetworkService/Watch") == "Watch"
    assert intake.method_label("/grpc.health.v1.Health/Watch") == "grpc.health.v1.Health/Watch"


def test_many_events_are_a_few_warnings(caplog):
    now = [0.0]
    sparse = intake.Sparse("refused requests", interval=60, clock=lambda: now[0])
    with caplog.at_level(logging.DEBUG, logger=intake.LOG.name):
        for i in range(1000):
            now[0] = i * 0.1          # 100 s in all
            sparse.note(f"call {i}")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["refused requests: call 0 (more are counted, not logged, for 60 s)",
                        "refused requests: 600 in the last 60 s; the latest: call 600"]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 1000
