"""``network watch`` and ``peering watch``: one line per change."""

from __future__ import annotations

import json

from netpeer import errors
from netpeer.cli import output


def watch(client, namespace: str, network: str | None, since: int | None, fmt: str,
          kinds: tuple[str, ...]) -> int:
    """One line per change until interrupted; JSON lines with -o json."""
    if since is not None and since < 0:
        raise errors.InvalidArgument.for_field("--since", since, "must be a revision (0 or more)")
    for event in client.watch(namespace, network, since):
        if event["type"] != "Bookmark" and event["kind"] not in kinds:
            continue
        if fmt == "json":
            print(json.dumps(event, sort_keys=True), flush=True)
        else:
            print(output.event_line(event), flush=True)
    return 0
