"""``ovn-nbctl`` command lines that write exactly the rows netpeer would
(``netpeer.core.dataplane.Row``): used to seed large deployments fast and as
the raw baseline of the bulk benchmark (the fastest way to write the same
OVN rows: one client process, one transaction)."""

from __future__ import annotations

import json
import resource
import subprocess
import time
from typing import Iterable, Mapping

from netpeer.ovn.row import Row


def value(v) -> str:
    """An OVSDB value in ovn-nbctl's syntax (strings JSON-quoted)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Mapping):
        return "{" + ",".join(f"{value(str(k))}={value(str(x))}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ",".join(value(x) for x in v) + "]"
    raise TypeError(f"cannot format {v!r}")


def _create(row: Row, ident: str, extra: Mapping[str, list[str]] | None = None) -> list[str]:
    cols = [f"{k}={value(v)}" for k, v in row.columns.items()]
    for column, refs in (extra or {}).items():
        cols.append(f"{column}=[{','.join(refs)}]")
    cols.append(f"external_ids={value(dict(row.external_ids))}")
    return ["--", f"--id=@{ident}", "create", row.table, *cols]


def create_networks(rows_by_network: Iterable[list[Row]]) -> list[str]:
    """Commands creating whole networks (roots with their children) from scratch."""
    args: list[str] = []
    n = 0
    for rows in rows_by_network:
        children: dict[tuple[str, str], dict[str, list[str]]] = {}
        for row in rows:
            if row.parent is not None:
                n += 1
                ident = f"c{n}"
                args += _create(row, ident)
                children.setdefault((row.parent.table, row.parent.name), {}).setdefault(
                    row.parent.column, []).append(f"@{ident}")
        for row in rows:
            if row.parent is None:
                n += 1
                args += _create(row, f"r{n}", children.get((row.table, row.columns.get("name"))))
    return args[1:]


def add_children(rows: Iterable[Row]) -> list[list[str]]:
    """Commands adding child rows (ports, routes, policies) to existing
    parents, as groups (one per parent) that must stay in one invocation."""
    by_parent: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        assert row.parent is not None, row
        by_parent.setdefault((row.parent.table, row.parent.name), []).append(row)
    groups = []
    n = 0
    for (table, name), children in by_parent.items():
        args: list[str] = []
        refs: dict[str, list[str]] = {}
        for row in children:
            n += 1
            args += _create(row, f"x{n}")
            refs.setdefault(row.parent.column, []).append(f"@x{n}")
        for column, ids in refs.items():
            args += ["--", "add", table, name, column, *ids]
        groups.append(args)
    return groups


# Linux caps argv + environment at 6 MB per execve() (3/4 of _STK_LIM), so
# a batch bigger than that needs more than one ovn-nbctl process.
ARGV_LIMIT = 5_500_000


def pack(groups: list[list[str]], limit: int = ARGV_LIMIT) -> list[list[str]]:
    """Command groups packed into as few command lines as the kernel accepts."""
    out: list[list[str]] = []
    current: list[str] = []
    size = 0
    for g in groups:
        gsize = sum(len(a) + 9 for a in g)  # bytes plus the argv pointer
        if current and size + gsize > limit:
            out.append(current[1:])
            current, size = [], 0
        current += g
        size += gsize
    if current:
        out.append(current[1:])
    return out


def set_address_sets(rows: Iterable[Row]) -> list[str]:
    """Commands setting the addresses of existing address sets."""
    args: list[str] = []
    for row in rows:
        args += ["--", "set", "Address_Set", row.columns["name"], f"addresses={value(row.columns['addresses'])}"]
    return args[1:]


def _big_stack() -> None:
    # execve() accepts argv up to a quarter of the stack limit: a 1,000-peering
    # batch is ~10 MB of arguments, so give the child room.
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = 1 << 30
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    resource.setrlimit(resource.RLIMIT_STACK, (want, hard))


def run(daemons, args: list[str], timeout: float = 600) -> float:
    """One ``ovn-nbctl`` process (one NB transaction); returns its wall time (s)."""
    argv = ["ovn-nbctl", f"--db={daemons.nb_remote}", f"--timeout={int(timeout)}", *args]
    t = time.monotonic()
    proc = subprocess.run(argv, env=daemons.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout + 10, preexec_fn=_big_stack)
    elapsed = time.monotonic() - t
    if proc.returncode != 0:
        raise RuntimeError(f"ovn-nbctl failed: {proc.stderr.strip()[-500:]}")
    return elapsed
