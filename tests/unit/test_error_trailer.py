"""The details of an error fit in what gRPC lets an answer carry, however
long the values a request sent: gRPC drops an answer whose trailing metadata
is over 8 KiB, and the client then sees "Stream removed" instead of the
error (tests/trust/test_fuzz.py found it with a 10,000-character parent)."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2

from netpeer import errors
from netpeer.api.errors import TRAILER_KEY, VALUE_LIMIT, status_of
from netpeer.reasons import Reason

GRPC_METADATA_LIMIT = 8192


def trailer_of(exc: errors.NetpeerError) -> tuple[bytes, list]:
    from netpeer.api.errors import Status
    code, message, trailer = status_of(exc)
    (key, value), = trailer
    assert key == TRAILER_KEY
    status = Status.FromString(value)
    return value, list(status.details)


def test_long_values_are_clipped_in_the_details_and_the_trailer_stays_small():
    huge = "/" * 1_000_000
    cases = [
        errors.InvalidArgument.for_field("parent", huge, "is not a namespace"),
        errors.NotFound(f"network {huge[:20]} not found", field="name", value=huge),
        errors.FailedPrecondition("network in use", field="name", value="n",
                                  reason=Reason.NETWORK_IN_USE, related={"peerings": [huge[:100]] * 500}),
    ]
    for exc in cases:
        value, details = trailer_of(exc)
        assert len(value) < GRPC_METADATA_LIMIT // 2, (type(exc).__name__, len(value))
        info = error_details_pb2.ErrorInfo()
        assert details[0].Unpack(info)
        assert all(len(v) <= VALUE_LIMIT for v in info.metadata.values()), info.metadata
        assert info.reason == str(exc.reason)
    # Short values are carried whole.
    _, details = trailer_of(errors.InvalidArgument.for_field("subnets[0]", "10.1.0.5/24", "has host bits set"))
    info = error_details_pb2.ErrorInfo()
    details[0].Unpack(info)
    assert dict(info.metadata) == {"field": "subnets[0]", "value": "10.1.0.5/24"}
    assert status_of(errors.InvalidArgument.for_field("x", huge, "bad"))[0] == grpc.StatusCode.INVALID_ARGUMENT
