"""The one place where netpeer errors become gRPC status codes (and back)."""

from __future__ import annotations

import grpc

from netpeer import errors

CODES: dict[type[errors.NetpeerError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Aborted: grpc.StatusCode.ABORTED,
    errors.OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
}
CLASSES = {code: cls for cls, code in CODES.items()}


def code_for(exc: errors.NetpeerError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        if cls in CODES:
            return CODES[cls]
    return grpc.StatusCode.INTERNAL


def from_rpc_error(exc: grpc.RpcError) -> errors.NetpeerError:
    """The netpeer error a failed call stands for, with the server's message."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    cls = CLASSES.get(code)
    if cls is not None:
        return cls(detail or code.name)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.Unavailable(f"the netpeer service did not answer in time ({detail})")
    return errors.NetpeerError(f"{code.name}: {detail}")
