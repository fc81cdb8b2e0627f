"""The one place where netpeer errors become gRPC statuses (and back).

A failed call ends with a status code, the error's one line, and the
details a program decides on, the standard way: a ``google.rpc.Status`` in
the ``grpc-status-details-bin`` trailer (``grpcio-status``), holding

- an ``ErrorInfo``: ``reason`` (``netpeer.reasons.Reason``), ``domain``
  ``netpeer.dev``, and ``metadata``: ``field`` and ``value`` when the
  error names an input, and the related objects the caller may see;
- a ``BadRequest`` on INVALID_ARGUMENT, with one ``FieldViolation`` per
  invalid field of the request (``InvalidArgument.violations``, at most
  ``MAX_VIOLATIONS``), the one the message tells first;
- a ``RetryInfo`` on UNAVAILABLE and ABORTED (and RESOURCE_EXHAUSTED when
  waiting helps);
- a ``ResourceInfo`` on NOT_FOUND and ALREADY_EXISTS.

docs/api.md shows them as a client in another language sees them (with
``grpcio-status``'s ``rpc_status.from_call``, tests/integration/test_error_details.py).

``google.rpc.Status`` itself is not imported from ``googleapis-common-protos``
(nor through ``grpcio-status``): the Pulumi SDK, which the provider loads in
the same process as this module, registers a ``google.rpc.Status`` of its own
in protobuf's default pool (from ``google/protobuf/status.proto``), and
protobuf refuses a second one under another file name, whichever comes
second. The same message (three fields, the same wire form) is built here in
a pool of its own; the details in it are the standard ``google.rpc`` ones.
"""

from __future__ import annotations

import json
import os
import random

import grpc
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, duration_pb2, message_factory
from google.rpc import error_details_pb2

from netpeer import errors
from netpeer.reasons import DOMAIN, Reason

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

#: Seconds after which an UNAVAILABLE or ABORTED call may be tried again,
#: when the error does not say (``retry_after``).
RETRY_DELAY_S = {grpc.StatusCode.UNAVAILABLE: 1.0, grpc.StatusCode.ABORTED: 0.0}

#: Test-only. Set in netpeerd's environment, every message it answers is
#: scrambled (its details are not): the tests that prove that clients decide
#: on the details alone set it (tests/provider/test_scrambled.py, and `make
#: test`'s second run over tests/provider and the CLI's tests: tests/conftest.py).
#: Not a setting: nothing else may set it.
SCRAMBLE_ENV = "NETPEER_TEST_SCRAMBLE_MESSAGES"

#: The trailer that carries the ``google.rpc.Status`` (gRPC's convention, in every language).
TRAILER_KEY = "grpc-status-details-bin"


def _status_class():
    """``google.rpc.Status`` (code, message, details), in a pool of its own (see the module)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(any_pb2.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="netpeer/google_rpc_status.proto", package="google.rpc",
                                           dependency=["google/protobuf/any.proto"], syntax="proto3")
    m, field = f.message_type.add(name="Status"), descriptor_pb2.FieldDescriptorProto
    m.field.add(name="code", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    m.field.add(name="message", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    m.field.add(name="details", number=3, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED,
                type_name=".google.protobuf.Any")
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


Status = _status_class()


def code_for(exc: errors.NetpeerError) -> grpc.StatusCode:
    for cls in type(exc).__mro__:
        if cls in CODES:
            return CODES[cls]
    return grpc.StatusCode.INTERNAL


def scramble(message: str) -> str:
    """``message`` with the letters of each word shuffled (the same every time)."""
    rng = random.Random(message)
    return " ".join("".join(rng.sample(word, len(word))) for word in message.split(" "))


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, default=str)


#: The longest a value in the details may be (``metadata``, ``resource_name``):
#: a request may carry a name of megabytes, and gRPC drops an answer whose
#: trailing metadata is over 8 KiB (the client then sees only "Stream
#: removed"). The message already shows such values clipped.
VALUE_LIMIT = 256


def _shown(value: object) -> str:
    text = _text(value)
    if len(text) <= VALUE_LIMIT:
        return text
    return f"{text[:VALUE_LIMIT - 40]}... ({len(text):,} characters)"


#: The most field violations one answer carries (each value clipped as above).
MAX_VIOLATIONS = 16


def _pack(msg) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(msg)
    return out


def status_of(exc: errors.NetpeerError, code: grpc.StatusCode | None = None,
              message: str | None = None) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """The status a call that failed with ``exc`` ends with: its code, its
    message and the trailing metadata that carries the details."""
    code = code or code_for(exc)
    message = exc.message if message is None else message
    if os.environ.get(SCRAMBLE_ENV):
        message = scramble(message)
    metadata = {k: _shown(v) for k, v in exc.related.items()}
    if exc.field:
        metadata["field"] = _shown(exc.field)
        if exc.value is not None:
            metadata["value"] = _shown(exc.value)
    details = [error_details_pb2.ErrorInfo(reason=str(exc.reason), domain=DOMAIN, metadata=metadata)]
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        others = getattr(exc, "violations", (exc,))[1:MAX_VIOLATIONS]
        details.append(error_details_pb2.BadRequest(field_violations=[error_details_pb2.BadRequest.FieldViolation(
            field=_shown(exc.field or ""), description=message, reason=str(exc.reason))] + [
            error_details_pb2.BadRequest.FieldViolation(field=_shown(v.field or ""), description=_shown(v.message),
                                                        reason=str(v.reason)) for v in others]))
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is None:
        retry_after = RETRY_DELAY_S.get(code)
    if retry_after is not None:
        details.append(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(
            seconds=int(retry_after), nanos=int((retry_after % 1) * 1e9))))
    if code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS):
        kind, name = exc.resource or (exc.field or "", exc.value if exc.value is not None else "")
        details.append(error_details_pb2.ResourceInfo(resource_type=_shown(kind), resource_name=_shown(name),
                                                      description=message))
    status = Status(code=code.value[0], message=message)
    for d in details:   # an Any of the default pool, as bytes: the same message
        status.details.add().MergeFromString(_pack(d).SerializeToString())
    return code, message, ((TRAILER_KEY, status.SerializeToString()),)


def internal(message: str):
    """``status_of`` for a failure that is no netpeer error (a bug)."""
    return status_of(errors.NetpeerError(message, reason=Reason.INTERNAL), grpc.StatusCode.INTERNAL)


def abort(context, exc: errors.NetpeerError) -> None:
    """Ends a call of a synchronous servicer with ``exc`` (raises, as
    ``context.abort`` does)."""
    code, message, trailer = status_of(exc)
    context.set_trailing_metadata(trailer)
    context.abort(code, message)


def details(exc: grpc.RpcError) -> list[any_pb2.Any]:
    """The details of a failed call's ``google.rpc.Status`` (none: it has none)."""
    try:
        trailer = exc.trailing_metadata() or ()
    except (AttributeError, TypeError):
        return []
    for key, value in trailer:
        if key == TRAILER_KEY:
            status = Status.FromString(value)
            if status.code != exc.code().value[0]:
                return []
            return [any_pb2.Any.FromString(item.SerializeToString()) for item in status.details]
    return []


def decode(exc: grpc.RpcError) -> errors.NetpeerError | None:
    """The netpeer error that netpeerd's details describe (None: the status
    carries none, so it did not come from netpeerd's error mapping)."""
    items = details(exc)
    if not items:
        return None
    info, retry, resource, violations = None, None, None, []
    for item in items:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.RetryInfo, error_details_pb2.ResourceInfo,
                     error_details_pb2.BadRequest):
            if item.Is(kind.DESCRIPTOR):
                msg = kind()
                item.Unpack(msg)
                if kind is error_details_pb2.ErrorInfo and msg.domain == DOMAIN:
                    info = msg
                elif kind is error_details_pb2.RetryInfo:
                    retry = msg.retry_delay.ToTimedelta().total_seconds()
                elif kind is error_details_pb2.ResourceInfo:
                    resource = (msg.resource_type, msg.resource_name)
                elif kind is error_details_pb2.BadRequest:
                    violations = list(msg.field_violations)
    if info is None:
        return None
    code = exc.code()
    cls = CLASSES.get(code, errors.NetpeerError)
    try:
        reason = Reason(info.reason)
    except ValueError:   # a newer netpeerd's: the class's own
        reason = None
    meta = dict(info.metadata)
    field, value = meta.pop("field", None), meta.pop("value", None)
    message = exc.details() or code.name
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        cls = errors.Unavailable
    if cls is errors.ResourceExhausted:
        out = cls(message, field=field, value=value, reason=reason, related=meta, resource=resource,
                  retry_after=retry)
    else:
        out = cls(message, field=field, value=value, reason=reason, related=meta, resource=resource)
    if cls is errors.InvalidArgument and len(violations) > 1:   # the first is the error itself
        out.violations = (out,) + tuple(errors.InvalidArgument(v.description, field=v.field or None,
                                                               reason=_reason(v.reason)) for v in violations[1:])
    return out


def _reason(text: str) -> Reason | None:
    try:
        return Reason(text)
    except ValueError:
        return None


def from_rpc_error(exc: grpc.RpcError) -> errors.NetpeerError:
    """The netpeer error a failed call stands for: as netpeerd's details say,
    or (a status without them, from gRPC itself) by its code."""
    decoded = decode(exc)
    if decoded is not None:
        return decoded
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    cls = CLASSES.get(code)
    if cls is not None:
        return cls(detail or code.name)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.Unavailable(f"the netpeer service did not answer in time ({detail})",
                                  reason=Reason.DEADLINE_EXCEEDED)
    return errors.NetpeerError(f"{code.name}: {detail}", reason=Reason.INTERNAL)
