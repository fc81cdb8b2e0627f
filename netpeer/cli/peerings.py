"""``netpeer peering ...``: the consents of a namespace's networks, one by
one or a file of them at once, and the requests other networks make to
them (``requests``, ``accept``, ``dismiss``: docs/inbox.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from netpeer import errors
from netpeer.cli import output
from netpeer.cli.commands import Command
from netpeer.cli.watch import watch
from netpeer.core import validate


def add_parser(sub, g: argparse.ArgumentParser, parser_class) -> None:
    peer = sub.add_parser("peering", help="peerings").add_subparsers(dest="action", required=True,
                                                                     parser_class=parser_class)
    c = peer.add_parser("create", parents=[g], help="consent to peer NETWORK with a remote network")
    c.add_argument("network")
    c.add_argument("peering")
    c.add_argument("remote", metavar="[SITE:][REMOTE_NS/]REMOTE_NETWORK",
                   help="the remote network; SITE: when it is in another site (e.g. west:team-b/net-b)")
    c.add_argument("--remote-uid", help="pin the remote network's identity")
    c.add_argument("--ttl", help="how long it may stay Pending or Failed (default 7d)")
    c.add_argument("--description", default="")
    b = peer.add_parser("batch-create", parents=[g],
                        help="consent to many peerings at once, all or none (FILE: 'NETWORK PEERING REMOTE' lines)")
    b.add_argument("file", metavar="FILE", help="lines of NETWORK PEERING [SITE:][REMOTE_NS/]REMOTE_NETWORK "
                   "('#' starts a comment; '-' reads standard input); at most 1000")
    b.add_argument("--ttl", help="how long each may stay Pending or Failed (default 7d)")
    b.add_argument("--description", default="")
    ls = peer.add_parser("list", parents=[g], help="list the peerings of a network")
    ls.add_argument("network")
    pw = peer.add_parser("watch", parents=[g], help="print every change of the peerings (of NETWORK, or all)")
    pw.add_argument("network", nargs="?")
    pw.add_argument("--since", type=int, default=None, metavar="REVISION",
                    help="resume after this revision (default: from now)")
    s = peer.add_parser("show", parents=[g], help="show a peering")
    s.add_argument("network")
    s.add_argument("peering")
    st = peer.add_parser("set", parents=[g], help="change description or ttl; re-pin the remote network")
    st.add_argument("network")
    st.add_argument("peering")
    st.add_argument("--ttl")
    st.add_argument("--description")
    pin = st.add_mutually_exclusive_group()
    pin.add_argument("--remote-uid", help="follow this remote network (e.g. after it was re-created: RemoteReplaced)")
    pin.add_argument("--clear-remote-uid", action="store_true",
                     help="follow whatever network carries the remote name when both halves match")
    d = peer.add_parser("delete", parents=[g], help="withdraw this side's consent")
    d.add_argument("network")
    d.add_argument("peering")
    rq = peer.add_parser("requests", parents=[g],
                         help="list the requests to peer with your networks (of NETWORK, or all)")
    rq.add_argument("network", nargs="?")
    ac = peer.add_parser("accept", parents=[g], help="accept a request: create the matching peering of NETWORK")
    ac.add_argument("network")
    ac.add_argument("request", help="the request's id (netpeer peering requests)")
    ac.add_argument("--name", required=True, help="the name of the peering to create")
    ac.add_argument("--ttl", help="how long it may stay Pending or Failed (default 7d)")
    ac.add_argument("--description", default="")
    dm = peer.add_parser("dismiss", parents=[g], help="dismiss a request: it is not listed again")
    dm.add_argument("network")
    dm.add_argument("request", help="the request's id (netpeer peering requests)")


def run(ctx, args: argparse.Namespace) -> int:
    c, action = ctx.client, args.action
    ns = ctx.namespace
    if action == "create":
        rsite, rns, rnet = split_remote(args.remote, ns)
        ttl = validate.ttl("--ttl", args.ttl) if args.ttl else None
        if args.remote_uid:
            validate.uid("--remote-uid", args.remote_uid)
        r = c.create_peering(ns, args.network, args.peering, rnet, rns, args.remote_uid, ttl, args.description,
                             remote_site=rsite)
        output.emit(r, ctx.output, output.peering_detail)
    elif action == "batch-create":
        ttl = validate.ttl("--ttl", args.ttl) if args.ttl else None
        halves = [dict(namespace=ns, network=net, name=name, remote_network=rnet, remote_namespace=rns,
                       remote_site=rsite, ttl=ttl, description=args.description)
                  for net, name, (rsite, rns, rnet) in batch_lines(args.file, ns)]
        output.emit(c.create_peerings(halves), ctx.output, output.batch_table)
    elif action == "list":
        output.emit(c.list_peerings(ns, args.network), ctx.output, output.peerings_table)
    elif action == "watch":
        return watch(c, ns, args.network, args.since, ctx.output, kinds=("peering", "peering_request"))
    elif action == "show":
        output.emit(c.get_peering(ns, args.network, args.peering), ctx.output, output.peering_detail)
    elif action == "set":
        ttl = validate.ttl("--ttl", args.ttl) if args.ttl else None
        if args.remote_uid:
            validate.uid("--remote-uid", args.remote_uid)
        pin = "" if args.clear_remote_uid else args.remote_uid
        r = c.update_peering(ns, args.network, args.peering, description=args.description, ttl=ttl,
                             remote_uid=pin)
        output.emit(r, ctx.output, output.peering_detail)
    elif action == "delete":
        c.delete_peering(ns, args.network, args.peering)
        if ctx.output == "json":
            output.emit({"deleted": f"{ns}/{args.network}/{args.peering}"}, "json", None)
    elif action == "requests":
        output.emit(c.list_peering_requests(ns, args.network), ctx.output, output.requests_table)
    elif action == "accept":
        validate.name("--name", args.name, peering=True)
        ttl = validate.ttl("--ttl", args.ttl) if args.ttl else None
        r = c.accept_peering_request(ns, args.network, args.request, args.name, ttl, args.description)
        output.emit(r, ctx.output, output.peering_detail)
    elif action == "dismiss":
        c.dismiss_peering_request(ns, args.network, args.request)
        if ctx.output == "json":
            output.emit({"dismissed": f"{ns}/{args.network}/{args.request}"}, "json", None)
    return 0


def split_remote(value: str, default_ns: str) -> tuple[str, str, str]:
    """``[SITE:][NS/]NETWORK`` -> (site or "", namespace, network)."""
    site, colon, rest = value.rpartition(":")
    if colon and not site:
        raise errors.InvalidArgument.for_field("remote", value, "has an empty site before ':': write "
                                               "SITE:REMOTE_NS/REMOTE_NETWORK, or leave the site out for this site")
    if colon:
        validate.site("remote", site)
    if rest.count("/") > 1 or ":" in site:
        raise errors.InvalidArgument.for_field("remote", value,
                                               "must be [SITE:][REMOTE_NS/]REMOTE_NETWORK")
    ns, slash, net = rest.rpartition("/")
    if slash and not ns:
        raise errors.InvalidArgument.for_field("remote", value, "has an empty namespace before '/': write "
                                               "REMOTE_NS/REMOTE_NETWORK, or REMOTE_NETWORK for your own namespace")
    return site, (ns or default_ns), net


def batch_lines(path: str, ns: str) -> list[tuple[str, str, tuple[str, str, str]]]:
    """``batch-create``'s FILE: (network, peering, remote) per line; an error
    names the line (``FILE:3: ...``)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise errors.InvalidArgument.for_field("FILE", path, f"cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise errors.InvalidArgument.for_field("FILE", path, "is not UTF-8 text") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        if len(words) != 3:
            raise errors.InvalidArgument.for_field(where, line.strip(),
                                                   "must be NETWORK PEERING [SITE:][REMOTE_NS/]REMOTE_NETWORK")
        try:
            out.append((words[0], words[1], split_remote(words[2], ns)))
        except errors.NetpeerError as exc:
            raise exc.within(where) from None
    if not out:
        raise errors.InvalidArgument.for_field("FILE", path, "has no line NETWORK PEERING REMOTE: nothing to create")
    return out


COMMAND = Command("peering", add_parser, run)
