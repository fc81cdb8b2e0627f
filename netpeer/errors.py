"""The error hierarchy of netpeer.

Every failure a caller can act on is one of these. The API edge maps each class
to one gRPC status code (``netpeer.api.errors``); the CLI and the Pulumi
provider turn the status back into one line. Messages name the field and the
value, so a user can fix the input without reading code.
"""

from __future__ import annotations


class NetpeerError(Exception):
    """Base class. ``field`` and ``value`` name the input at fault, if any."""

    #: The id of the call that failed, when it reached netpeerd (its log has it).
    request_id: str = ""

    def __init__(self, message: str, *, field: str | None = None, value: object = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.value = value

    def __str__(self) -> str:
        return self.message

    def within(self, where: str) -> "NetpeerError":
        """The same error about a part of a larger input (``requests[3]``,
        ``FILE:3``): the message starts ``where: `` and the field is
        ``where.field``."""
        field = f"{where}.{self.field}" if self.field else where
        return type(self)(f"{where}: {self.message}", field=field, value=self.value)


class InvalidArgument(NetpeerError):
    """The request is malformed: a bad name, CIDR, TTL, ..."""

    @classmethod
    def for_field(cls, field: str, value: object, why: str) -> "InvalidArgument":
        shown = value if isinstance(value, (int, float)) else repr(_clip(str(value)))
        return cls(f"{field}: {shown} {why}", field=field, value=value)


class NotFound(NetpeerError):
    """The named resource does not exist (in a namespace the caller may see)."""


class AlreadyExists(NetpeerError):
    """A resource with that name (or that identity) exists already."""


class FailedPrecondition(NetpeerError):
    """The request is valid but the current state refuses it (in use, overlap)."""


class OutOfRange(NetpeerError):
    """A position (a Watch revision) is no longer or not yet available."""


class Aborted(NetpeerError):
    """An etag did not match: someone else changed the resource first."""


class Unauthenticated(NetpeerError):
    """No token, or an unknown one."""


class PermissionDenied(NetpeerError):
    """The token does not grant the namespace (or admin) the call needs."""


class ResourceExhausted(NetpeerError):
    """A quota of the caller's namespace is used up (``[quotas]`` in the
    configuration), or the caller's token used its share of a budget
    (``[limits]``); nothing was changed. ``retry_after``: seconds after
    which the same call may succeed (None: not by waiting, e.g. a quota)."""

    def __init__(self, message: str, *, field: str | None = None, value: object = None,
                 retry_after: float | None = None):
        super().__init__(message, field=field, value=value)
        self.retry_after = retry_after

    def within(self, where: str) -> "ResourceExhausted":
        out = super().within(where)
        out.retry_after = self.retry_after
        return out


class Unavailable(NetpeerError):
    """A dependency (the OVN northbound database) cannot be reached. Nothing
    was changed; the same call can be retried."""


class Unreachable(Unavailable):
    """The dependency did not answer at all (not merely: not ready yet)."""


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
