"""Why a call failed, as a stable name a program may branch on.

Every ``netpeer.errors`` error carries one of these as ``reason``; netpeerd
sends it as the ``reason`` of a ``google.rpc.ErrorInfo`` whose ``domain``
is ``DOMAIN`` (docs/api.md lists them all, with the status code each comes
with). Messages are for people and may be reworded at any time; a reason
is renamed never, and a new one is added only with a new meaning. Clients
(the CLI, ``netpeer.api.client``, the IaC providers) decide on the reason
and the field, never on the message's words.

An error raised without a reason gets its class's ``default_reason``.
"""

from __future__ import annotations

import enum

#: The ``ErrorInfo.domain`` of netpeer's reasons.
DOMAIN = "netpeer.dev"


class Reason(enum.StrEnum):
    """The reasons, by status code. The value is the name on the wire."""

    # INVALID_ARGUMENT
    INVALID_FIELD = "INVALID_FIELD"                    # a field's value is malformed (BadRequest names it)
    REQUEST_MALFORMED = "REQUEST_MALFORMED"            # the request did not parse as its message
    # NOT_FOUND
    NOT_FOUND = "NOT_FOUND"                            # some other named thing does not exist
    NETWORK_NOT_FOUND = "NETWORK_NOT_FOUND"
    PEERING_NOT_FOUND = "PEERING_NOT_FOUND"
    TOKEN_NOT_FOUND = "TOKEN_NOT_FOUND"
    REQUEST_NOT_FOUND = "REQUEST_NOT_FOUND"            # no peering request has that id (malformed, or another network's)
    REQUEST_WITHDRAWN = "REQUEST_WITHDRAWN"            # the request's half is gone (withdrawn, expired, or made again)
    # ALREADY_EXISTS
    ALREADY_EXISTS = "ALREADY_EXISTS"                  # some other thing of that name exists
    NETWORK_EXISTS = "NETWORK_EXISTS"
    PEERING_EXISTS = "PEERING_EXISTS"                  # a peering of that name, on that network
    REMOTE_ALREADY_PEERED = "REMOTE_ALREADY_PEERED"    # the network has a peering towards that remote already
    # FAILED_PRECONDITION
    FAILED_PRECONDITION = "FAILED_PRECONDITION"        # the state refuses the request (no more specific reason)
    NETWORK_IN_USE = "NETWORK_IN_USE"                  # a network with peerings cannot be deleted
    PREFIX_OVERLAP = "PREFIX_OVERLAP"                  # new prefixes overlap a Bound peer's
    PEERING_BOUND = "PEERING_BOUND"                    # a Bound peering cannot be re-pinned
    DATAPLANE_REFUSED = "DATAPLANE_REFUSED"            # OVN refused the change
    DATAPLANE_CONFLICT = "DATAPLANE_CONFLICT"          # OVN holds rows netpeerd did not make
    SITE_UNSUPPORTED = "SITE_UNSUPPORTED"              # the other site's netpeerd lacks what the call needs
    STORE_INCOMPATIBLE = "STORE_INCOMPATIBLE"          # the store was made by another version or site
    # ABORTED
    ETAG_MISMATCH = "ETAG_MISMATCH"                    # someone changed the resource first: re-read, retry
    # OUT_OF_RANGE
    REVISION_COMPACTED = "REVISION_COMPACTED"          # a Watch from a revision no longer kept: list, then watch
    # UNAUTHENTICATED
    TOKEN_MISSING = "TOKEN_MISSING"
    TOKEN_INVALID = "TOKEN_INVALID"
    TOKEN_EXPIRED = "TOKEN_EXPIRED"
    SITE_UNAUTHENTICATED = "SITE_UNAUTHENTICATED"      # a site call without the link's secret
    # PERMISSION_DENIED
    NAMESPACE_DENIED = "NAMESPACE_DENIED"              # the token does not grant the namespace
    ADMIN_REQUIRED = "ADMIN_REQUIRED"
    SITE_DENIED = "SITE_DENIED"                        # a site call from a site not linked, or not as itself
    PERMISSION_DENIED = "PERMISSION_DENIED"
    # RESOURCE_EXHAUSTED
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"                  # a [quotas] limit; waiting does not help
    RATE_LIMITED = "RATE_LIMITED"                      # a [limits] budget; RetryInfo says when
    STREAM_LIMIT = "STREAM_LIMIT"                      # too many watch streams
    SITE_LINK_FULL = "SITE_LINK_FULL"                  # a site link's transit block has no room left
    REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
    ANSWER_TOO_LARGE = "ANSWER_TOO_LARGE"              # a write's answer was too large; the write was done
    # UNAVAILABLE (RetryInfo says when to retry)
    UNAVAILABLE = "UNAVAILABLE"                        # a dependency did not answer; nothing was changed
    DATAPLANE_UNAVAILABLE = "DATAPLANE_UNAVAILABLE"    # the OVN northbound database
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"            # the store (PostgreSQL, another replica's lock)
    REMOTE_SITE_UNREACHABLE = "REMOTE_SITE_UNREACHABLE"
    SERVICE_UNREACHABLE = "SERVICE_UNREACHABLE"        # (client) netpeerd could not be reached: nothing was sent
    OUTCOME_UNKNOWN = "OUTCOME_UNKNOWN"                # the call (or the store's commit) broke: a write may
    #                                                    or may not be done; read it back before trying again
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"            # no answer in time (a write may or may not be done)
    # INTERNAL
    INTERNAL = "INTERNAL"                              # a bug: netpeerd's log has the request id
