"""Errors as a contract, against a real netpeerd: every refusal carries its
details in the standard google.rpc.Status trailer (ErrorInfo with a listed
reason, field, value and related objects; RetryInfo; ResourceInfo), and the
Python client turns them back into the netpeer.errors class with reason,
field and value."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.reasons import Reason


def _refused(cls, fn, *args, **kwargs) -> errors.NetpeerError:
    with pytest.raises(cls) as got:
        fn(*args, **kwargs)
    return got.value


#: What a gRPC client outside netpeer does with a failed call: read the
#: google.rpc.Status with grpcio-status (the standard decoder) and print its
#: details as JSON. Run in a process of its own, as such a client would be.
READER = """
import json, sys, grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2  # the detail types, for json_format
from grpc_status import rpc_status
from netpeer.v1 import netpeer_pb2 as pb, netpeer_pb2_grpc as pb_grpc

endpoint, token, etag = sys.argv[1:]
stub = pb_grpc.NetworkServiceStub(grpc.insecure_channel(endpoint))
md = [("authorization", f"Bearer {token}")]
out = []
for call in (lambda: stub.DeleteNetwork(pb.DeleteNetworkRequest(name="namespaces/team-a/networks/net-a", etag=etag),
                                         metadata=md, timeout=10),
             lambda: stub.GetNetwork(pb.GetNetworkRequest(name="namespaces/team-a/networks/nope"), metadata=md,
                                     timeout=10)):
    try:
        call()
    except grpc.RpcError as err:
        status = rpc_status.from_call(err)
        out.append({"code": err.code().name, "message": status.message,
                    "details": [json_format.MessageToDict(d) for d in status.details]})
print(json.dumps(out))
"""


@pytest.fixture
def tenants(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    yield netpeerd, a, b
    a.close()
    b.close()


def test_the_client_decides_on_reason_field_and_value(tenants):
    netpeerd, a, b = tenants
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")

    e = _refused(errors.FailedPrecondition, a.delete_network, "team-a", "net-a")
    assert (e.reason, e.field, e.value) == (Reason.NETWORK_IN_USE, "network", "net-a")
    assert e.related == {"peerings": "to-b", "peering_count": "1"}

    e = _refused(errors.AlreadyExists, a.create_peering, "team-a", "net-a", "to-b", "net-z", "team-z")
    assert (e.reason, e.field, e.value) == (Reason.PEERING_EXISTS, "peering", "to-b")
    assert e.resource == ("netpeer.v1.Peering", "namespaces/team-a/networks/net-a/peerings/to-b")

    e = _refused(errors.AlreadyExists, a.create_peering, "team-a", "net-a", "again", "net-b", "team-b")
    assert (e.reason, e.field, e.value, e.related) == (Reason.REMOTE_ALREADY_PEERED, "remote", "team-b/net-b",
                                                       {"peering": "to-b"})

    assert a.get_peering("team-a", "net-a", "to-b")["phase"] == "Bound"
    e = _refused(errors.FailedPrecondition, a.update_peering, "team-a", "net-a", "to-b", remote_uid=str(uuid.uuid4()))
    assert (e.reason, e.field) == (Reason.PEERING_BOUND, "remote.uid")

    e = _refused(errors.NotFound, a.get_peering, "team-a", "net-a", "nope")
    assert (e.reason, e.field, e.value) == (Reason.PEERING_NOT_FOUND, "peering", "nope")
    e = _refused(errors.PermissionDenied, a.get_network, "team-b", "net-b")
    assert (e.reason, e.field, e.value) == (Reason.NAMESPACE_DENIED, "namespace", "team-b")
    e = _refused(errors.InvalidArgument, a.create_network, "team-a", "bad_name", ["10.3.0.0/24"])
    assert (e.reason, e.field, e.value) == (Reason.INVALID_FIELD, "network", "bad_name")
    with Client(netpeerd.endpoint, "np_nope_" + "x" * 40, timeout=30) as stranger:
        e = _refused(errors.Unauthenticated, stranger.list_networks, "team-a")
    assert e.reason == Reason.TOKEN_INVALID
    with Client(netpeerd.endpoint, None, timeout=30) as anonymous:
        assert _refused(errors.Unauthenticated, anonymous.list_networks, "team-a").reason == Reason.TOKEN_MISSING


def test_grpc_clients_of_any_language_see_the_standard_details(tenants):
    netpeerd, a, _ = tenants
    etag = a.get_network("team-a", "net-a")["etag"]
    a.update_network("team-a", "net-a", description="changed")
    run = subprocess.run([sys.executable, "-c", READER, netpeerd.endpoint, netpeerd.token("team-a"), etag],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    stale, missing = json.loads(run.stdout)
    by_type = {d["@type"].rsplit(".", 1)[-1]: d for d in stale["details"]}
    assert stale["code"] == "ABORTED" and stale["message"].startswith("etag: ")
    assert by_type["ErrorInfo"] == {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ETAG_MISMATCH",
                                    "domain": "netpeer.dev", "metadata": {"field": "etag", "value": etag}}
    assert "RetryInfo" in by_type   # at once, after reading it again

    by_type = {d["@type"].rsplit(".", 1)[-1]: d for d in missing["details"]}
    assert missing["code"] == "NOT_FOUND" and by_type["ErrorInfo"]["reason"] == "NETWORK_NOT_FOUND"
    assert (by_type["ResourceInfo"]["resourceType"], by_type["ResourceInfo"]["resourceName"]) == (
        "netpeer.v1.Network", "namespaces/team-a/networks/nope")
