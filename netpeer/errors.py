"""The error hierarchy of netpeer.

Every failure a caller can act on is one of these. The API edge maps each class
to one gRPC status code (``netpeer.api.errors``); the CLI and the Pulumi
provider turn the status back into one line. Messages name the field and the
value, so a user can fix the input without reading code; programs decide on
``reason`` (``netpeer.reasons``) and ``field``, never on the message.
"""

from __future__ import annotations

from typing import Mapping

from netpeer.reasons import Reason


class NetpeerError(Exception):
    """Base class. ``field`` and ``value`` name the input at fault, if any;
    ``reason`` says why, as a name from ``netpeer.reasons`` (the class's
    ``default_reason`` if not given). ``related``: other objects the caller
    may see that the error is about (``{"peering": "p1"}``); ``resource``:
    (type, name) of the resource a NotFound or AlreadyExists is about."""

    #: The id of the call that failed, when it reached netpeerd (its log has it).
    request_id: str = ""
    default_reason: Reason = Reason.INTERNAL

    def __init__(self, message: str, *, field: str | None = None, value: object = None,
                 reason: Reason | None = None, related: Mapping[str, str] | None = None,
                 resource: tuple[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value
        self.reason = reason or self.default_reason
        self.related = dict(related or {})
        self.resource = resource

    def __str__(self) -> str:
        return self.message

    def line(self) -> str:
        """The one line to show: the message, followed by the field and the
        value when the message does not name them (a message from a newer
        netpeerd, reworded: programs must not read it, people may)."""
        if not self.field:
            return self.message
        shown = None if self.value is None else _clip(str(self.value))
        named = self.field.rsplit(".", 1)[-1] in self.message and (
            shown is None or shown[:1] in "[{" or shown[:20] in self.message)
        return self.message if named else f"{self.message} ({self.field}: {shown!r})"

    def within(self, where: str) -> "NetpeerError":
        """The same error about a part of a larger input (``requests[3]``,
        ``FILE:3``): the message starts ``where: `` and the field is
        ``where.field``."""
        field = f"{where}.{self.field}" if self.field else where
        return type(self)(f"{where}: {self.message}", field=field, value=self.value, reason=self.reason,
                          related=self.related, resource=self.resource)


class InvalidArgument(NetpeerError):
    """The request is malformed: a bad name, CIDR, TTL, ... ``violations``:
    every invalid field of the request, this one first (``several``); the
    message is the first one's, for clients that show only the message."""

    default_reason = Reason.INVALID_FIELD

    def __init__(self, message: str, *, field: str | None = None, value: object = None,
                 reason: Reason | None = None, related: Mapping[str, str] | None = None,
                 resource: tuple[str, str] | None = None, violations: tuple["InvalidArgument", ...] = ()):
        super().__init__(message, field=field, value=value, reason=reason, related=related, resource=resource)
        self.violations = tuple(violations)

    # The error itself is kept as None, not as a reference to itself: an exception that refers to itself
    # is freed only by the cyclic collector, and with it its traceback's frames and the request they hold
    # (1,000 invalid 1-4 MB requests left netpeerd 220 MiB larger: tests/trust/test_edge.py).
    @property
    def violations(self) -> tuple["InvalidArgument", ...]:
        return tuple(self if v is None else v for v in self._violations) or (self,)

    @violations.setter
    def violations(self, found) -> None:
        self._violations = tuple(None if v is self else v for v in found)

    @classmethod
    def several(cls, errors: list["InvalidArgument"]) -> "InvalidArgument":
        """One error for every invalid field found in a request: the first, carrying all."""
        first = errors[0]
        return cls(first.message, field=first.field, value=first.value, reason=first.reason,
                   related=first.related, resource=first.resource, violations=tuple(errors))

    def within(self, where: str) -> "InvalidArgument":
        out = super().within(where)
        if len(self.violations) > 1:
            out.violations = tuple(NetpeerError.within(v, where) for v in self.violations)
        return out

    @classmethod
    def for_field(cls, field: str, value: object, why: str, *,
                  reason: Reason | None = None) -> "InvalidArgument":
        shown = value if isinstance(value, (int, float)) else repr(_clip(str(value)))
        return cls(f"{field}: {shown} {why}", field=field, value=value, reason=reason)


class NotFound(NetpeerError):
    """The named resource does not exist (in a namespace the caller may see)."""

    default_reason = Reason.NOT_FOUND


class AlreadyExists(NetpeerError):
    """A resource with that name (or that identity) exists already."""

    default_reason = Reason.ALREADY_EXISTS


class FailedPrecondition(NetpeerError):
    """The request is valid but the current state refuses it (in use, overlap)."""

    default_reason = Reason.FAILED_PRECONDITION


class OutOfRange(NetpeerError):
    """A position (a Watch revision) is no longer or not yet available."""

    default_reason = Reason.REVISION_COMPACTED


class Aborted(NetpeerError):
    """An etag did not match: someone else changed the resource first."""

    default_reason = Reason.ETAG_MISMATCH


class Unauthenticated(NetpeerError):
    """No token, or an unknown one."""

    default_reason = Reason.TOKEN_INVALID


class PermissionDenied(NetpeerError):
    """The token does not grant the namespace (or admin) the call needs."""

    default_reason = Reason.PERMISSION_DENIED


class ResourceExhausted(NetpeerError):
    """A quota of the caller's namespace is used up (``[quotas]`` in the
    configuration), or the caller's token used its share of a budget
    (``[limits]``); nothing was changed. ``retry_after``: seconds after
    which the same call may succeed (None: not by waiting, e.g. a quota)."""

    default_reason = Reason.QUOTA_EXCEEDED

    def __init__(self, message: str, *, field: str | None = None, value: object = None,
                 reason: Reason | None = None, related: Mapping[str, str] | None = None,
                 resource: tuple[str, str] | None = None, retry_after: float | None = None):
        super().__init__(message, field=field, value=value, reason=reason, related=related, resource=resource)
        self.retry_after = retry_after

    def within(self, where: str) -> "ResourceExhausted":
        out = super().within(where)
        out.retry_after = self.retry_after
        return out


class Unavailable(NetpeerError):
    """A dependency (the OVN northbound database) cannot be reached. Nothing
    was changed; the same call can be retried."""

    default_reason = Reason.UNAVAILABLE


class Unreachable(Unavailable):
    """The dependency did not answer at all (not merely: not ready yet)."""


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
