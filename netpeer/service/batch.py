"""Many consents in one write (``Service.create_peerings``).

A batch is all or nothing: its requests are checked one by one, then made in
one store transaction and one dataplane transaction; the first that fails
undoes the whole batch, and its error names it (``requests[3]: ...``). The
same checks as a single create, so a batch never accepts what one call would
refuse.
"""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import timedelta
from typing import Iterator

from netpeer.errors import InvalidArgument, NetpeerError

#: Requests in one batch at most: a batch holds the write queue for its whole
#: length (about 1 ms per request), and its request and answer must stay
#: inside netpeerd's size limits (netpeer.api.server.Limits: the largest
#: batch weighs 4.5 MB, its answer 5.1 MB).
MAX_REQUESTS = 1000


@dataclasses.dataclass(frozen=True)
class PeeringRequest:
    """One side's consent, as ``Service.create_peering`` takes it."""

    namespace: str
    network: str
    name: str
    remote_network: str
    remote_namespace: str | None = None
    remote_uid: str | None = None
    ttl: timedelta | str | None = None
    description: str = ""
    remote_site: str = ""


def check_size(count: int) -> None:
    if count > MAX_REQUESTS:
        raise InvalidArgument.for_field("requests", count, f"requests in one batch; the most is {MAX_REQUESTS}: "
                                        "split it into several batches")


@contextlib.contextmanager
def numbered(index: int) -> Iterator[None]:
    """Re-raises a netpeer error as the same error of ``requests[index]``:
    the field becomes ``requests[index].field`` and the message starts with
    ``requests[index]: ``."""
    try:
        yield
    except NetpeerError as exc:
        raise exc.within(f"requests[{index}]") from exc
