"""``netpeer``: the command line for people and scripts.

Errors end the command with a non-zero exit and one line on stderr; never a
traceback (set NETPEER_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from netpeer import errors
from netpeer.cli import output
from netpeer.cli import site as site_cmds
from netpeer.core import validate

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PIPE = 141   # the output's reader went away (as a shell reports a death by SIGPIPE)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        sys.exit(EXIT_USAGE)


def _globals() -> argparse.ArgumentParser:
    g = argparse.ArgumentParser(add_help=False)
    s = argparse.SUPPRESS
    g.add_argument("--endpoint", default=s, help="netpeerd address (env NETPEER_ENDPOINT), e.g. unix:///path or host:port; "
                                                      "several replicas: comma-separated")
    g.add_argument("--token-file", default=s, metavar="PATH",
                   help="read the bearer token from this file (env NETPEER_TOKEN_FILE); preferred over --token")
    g.add_argument("--token", default=s, help="bearer token (env NETPEER_TOKEN); visible to other users in ps: "
                                              "prefer --token-file or the environment")
    g.add_argument("--ca-cert", default=s, help="CA certificate for TLS (env NETPEER_CA_CERT)")
    g.add_argument("--client-cert", default=s, help="client certificate for mutual TLS (env NETPEER_CLIENT_CERT)")
    g.add_argument("--client-key", default=s, help="client key for mutual TLS (env NETPEER_CLIENT_KEY)")
    g.add_argument("-n", "--namespace", default=s, help="namespace (default: the token's, when it grants one)")
    g.add_argument("-o", "--output", choices=("table", "json"), default=s, help="output format (default table)")
    return g


def build_parser() -> argparse.ArgumentParser:
    g = _globals()
    p = _Parser(prog="netpeer", parents=[g], description="Mutually consented network peerings on OVN.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    dev = sub.add_parser("dev", help="a local stack: OVN + netpeerd in a state directory").add_subparsers(
        dest="action", required=True, parser_class=_Parser)
    try:  # the dev tools are a package of their own (netpeer_dev); the service never imports them
        from netpeer_dev import cli as dev_cmds
    except ImportError:
        pass
    else:
        dev_cmds.add_parsers(dev, g)

    sv = sub.add_parser("serve", parents=[g], help="run netpeerd")
    sv.add_argument("--config", required=True, help="TOML configuration file")
    how = sv.add_mutually_exclusive_group()
    how.add_argument("--adopt-ovn", action="store_true",
                     help="the store was lost or is older than OVN: rebuild it from OVN's rows of netpeer")
    how.add_argument("--accept-rollback", action="store_true",
                     help="the store is older than OVN on purpose: make OVN match it (deletes what it does not know)")
    sv.add_argument("--dataplane", default="ovn", metavar="{ovn,memory}",
                    help="what netpeerd programs: ovn (default), or memory: a simulation and test mode without "
                         "traffic, refused with a configuration that looks like production (docs/operations.md, Simulation)")

    db = sub.add_parser("db", help="the store").add_subparsers(dest="action", required=True, parser_class=_Parser)
    up = db.add_parser("upgrade", parents=[g], help="apply the store's schema migrations, then exit")
    up.add_argument("--config", required=True, help="TOML configuration file")

    sub.add_parser("status", parents=[g], help="the server's status: OVN connection, sweeps (admin only)")
    site_cmds.add_parsers(sub, g, _Parser)

    tok = sub.add_parser("token", help="credentials").add_subparsers(dest="action", required=True, parser_class=_Parser)
    # A private copy of the global options: "resolve" edits the actions it shadows.
    tc = tok.add_parser("create", parents=[_globals()], help="mint a token granting namespaces (admin only)",
                        conflict_handler="resolve")
    tc.add_argument("--namespace", "-n", dest="token_namespaces", action="append", required=True, metavar="NS")
    tc.add_argument("--description", default="")
    tc.add_argument("--ttl", help="the token stops working after this long (like 30d, 12h); default: never")
    tok.add_parser("whoami", parents=[g], help="show what the current token grants")
    tok.add_parser("list", parents=[g], help="list every token (admin only; secrets are never shown)")
    tr = tok.add_parser("revoke", parents=[g], help="revoke a token at once (admin only)")
    tr.add_argument("token_or_id", metavar="TOKEN_OR_ID", help="the token's id (as `token list` shows it) or the token")

    net = sub.add_parser("network", help="networks").add_subparsers(dest="action", required=True, parser_class=_Parser)
    c = net.add_parser("create", parents=[g], help="create a network")
    c.add_argument("name")
    c.add_argument("--subnet", action="append", required=True, metavar="CIDR")
    c.add_argument("--route", action="append", default=[], metavar="CIDR",
                   help="extra prefix inside the network, exported to peers ('CIDR' or 'CIDR via ADDRESS')")
    c.add_argument("--description", default="")
    net.add_parser("list", parents=[g], help="list networks")
    nw = net.add_parser("watch", parents=[g], help="print every change of the namespace's networks and peerings")
    nw.add_argument("--since", type=int, default=None, metavar="REVISION",
                    help="resume after this revision (default: from now)")
    s = net.add_parser("show", parents=[g], help="show a network")
    s.add_argument("name")
    st = net.add_parser("set", parents=[g], help="change subnets, routes or description")
    st.add_argument("name")
    st.add_argument("--subnet", action="append", metavar="CIDR", help="replaces all subnets")
    st.add_argument("--route", action="append", metavar="CIDR", help="replaces all routes")
    st.add_argument("--clear-routes", action="store_true", help="remove all routes")
    st.add_argument("--description")
    d = net.add_parser("delete", parents=[g], help="delete a network (refused while it has peerings)")
    d.add_argument("name")

    peer = sub.add_parser("peering", help="peerings").add_subparsers(dest="action", required=True, parser_class=_Parser)
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
    return p


class Context:
    """Settings resolved from flags, then the environment."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        env = os.environ
        self.endpoint = getattr(args, "endpoint", None) or env.get("NETPEER_ENDPOINT", "")
        self.token = _token_from(getattr(args, "token_file", None) or env.get("NETPEER_TOKEN_FILE"),
                                 getattr(args, "token", None) or env.get("NETPEER_TOKEN", ""))
        self.ca_cert = getattr(args, "ca_cert", None) or env.get("NETPEER_CA_CERT")
        self.client_cert = getattr(args, "client_cert", None) or env.get("NETPEER_CLIENT_CERT")
        self.client_key = getattr(args, "client_key", None) or env.get("NETPEER_CLIENT_KEY")
        self.output = getattr(args, "output", None) or "table"
        self._client = None
        self._namespace = getattr(args, "namespace", None) or env.get("NETPEER_NAMESPACE")

    @property
    def client(self):
        if self._client is None:
            from netpeer.api.client import Client
            if not self.token:
                raise errors.Unauthenticated("no token: pass --token or set NETPEER_TOKEN")
            self._client = Client(self.endpoint, self.token, self.ca_cert, self.client_cert, self.client_key)
        return self._client

    @property
    def namespace(self) -> str:
        if self._namespace:
            return validate.name("--namespace", self._namespace)
        who = self.client.caller()
        if len(who["namespaces"]) == 1:
            self._namespace = who["namespaces"][0]
            return self._namespace
        raise errors.InvalidArgument.for_field(
            "--namespace", "", "is required: the token grants "
            + (", ".join(who["namespaces"]) if who["namespaces"] else "every namespace (admin)"))


def _token_from(path: str | None, token: str) -> str:
    """The token: from ``path`` when given (a file readable by its owner only
    is best), else ``token``."""
    if not path:
        return token
    try:
        text = open(os.path.expanduser(path), encoding="utf-8").read().strip()
    except OSError as exc:
        raise errors.InvalidArgument.for_field("--token-file", path, f"cannot be read ({exc.strerror})") from None
    if not text or len(text.split()) != 1:
        raise errors.InvalidArgument.for_field("--token-file", path, "must hold exactly one token")
    return text


def _watch(client, namespace: str, network: str | None, since: int | None, fmt: str,
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


def parse_token_id(value: str) -> str:
    parts = value.strip().split("_")
    return parts[1] if len(parts) == 3 and parts[0] == "np" else value.strip()


def _split_remote(value: str, default_ns: str) -> tuple[str, str, str]:
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


def _batch_lines(path: str, ns: str) -> list[tuple[str, str, tuple[str, str, str]]]:
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
            out.append((words[0], words[1], _split_remote(words[2], ns)))
        except errors.NetpeerError as exc:
            raise exc.within(where) from None
    if not out:
        raise errors.InvalidArgument.for_field("FILE", path, "has no line NETWORK PEERING REMOTE: nothing to create")
    return out


def run(args: argparse.Namespace) -> int:
    ctx = Context(args)
    cmd, action = args.command, getattr(args, "action", None)
    if cmd == "dev":
        from netpeer_dev import cli as dev_cmds
        return dev_cmds.run(ctx, args)
    if cmd == "serve":
        from netpeer.config import Config
        from netpeer.daemon import serve
        from netpeer.service.epoch import Mode
        mode = Mode.ADOPT if args.adopt_ovn else Mode.ACCEPT_ROLLBACK if args.accept_rollback else Mode.CHECK
        return serve(Config.load(args.config), mode, path=args.config, dataplane=args.dataplane)
    if cmd == "db":
        from netpeer.config import Config
        from netpeer.store.base import open_store
        config = Config.load(args.config)
        store = open_store(config.store, upgrade=True)
        try:
            done, version = store.applied, store.schema_version()
        finally:
            store.close()
        print(f"store {store.where}: schema version {version}"
              + (f" (applied migration {', '.join(map(str, done))})" if done else " (up to date)"))
        return 0
    if cmd == "site":
        return site_cmds.run(ctx, args)
    if cmd == "status":
        output.emit(ctx.client.status(), ctx.output, output.status_detail)
        return 0
    if cmd == "token":
        if action == "create":
            ttl = validate.ttl("--ttl", args.ttl) if args.ttl else None
            r = ctx.client.create_token(args.token_namespaces, args.description, ttl)
            if ctx.output == "json":
                output.emit(r, "json", None)
            else:
                print(r["token"])
        elif action == "list":
            output.emit(ctx.client.list_tokens(), ctx.output, output.tokens_table)
        elif action == "revoke":
            ctx.client.revoke_token(args.token_or_id)
            if ctx.output == "json":
                output.emit({"revoked": parse_token_id(args.token_or_id)}, "json", None)
        else:
            output.emit(ctx.client.caller(), ctx.output, lambda w: output.table(
                ["TOKEN ID", "NAMESPACES", "ADMIN"], [[w["token_id"], ", ".join(w["namespaces"]), w["admin"]]]))
        return 0
    c = ctx.client
    if cmd == "network":
        ns = ctx.namespace
        if action == "create":
            r = c.create_network(ns, args.name, args.subnet, args.route, args.description)
            output.emit(r, ctx.output, output.network_detail)
        elif action == "list":
            output.emit(c.list_networks(ns), ctx.output, output.networks_table)
        elif action == "watch":
            return _watch(c, ns, None, args.since, ctx.output, kinds=("network", "peering"))
        elif action == "show":
            output.emit(c.get_network(ns, args.name), ctx.output, output.network_detail)
        elif action == "set":
            routes = [] if args.clear_routes else args.route
            r = c.update_network(ns, args.name, subnets=args.subnet, routes=routes, description=args.description)
            output.emit(r, ctx.output, output.network_detail)
        elif action == "delete":
            c.delete_network(ns, args.name)
            if ctx.output == "json":
                output.emit({"deleted": f"{ns}/{args.name}"}, "json", None)
        return 0
    if cmd == "peering":
        ns = ctx.namespace
        if action == "create":
            rsite, rns, rnet = _split_remote(args.remote, ns)
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
                      for net, name, (rsite, rns, rnet) in _batch_lines(args.file, ns)]
            output.emit(c.create_peerings(halves), ctx.output, output.batch_table)
        elif action == "list":
            output.emit(c.list_peerings(ns, args.network), ctx.output, output.peerings_table)
        elif action == "watch":
            return _watch(c, ns, args.network, args.since, ctx.output, kinds=("peering",))
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
        return 0
    raise errors.InvalidArgument.for_field("command", cmd, "is not known")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = run(args)
        sys.stdout.flush()   # here, where a reader that went away is handled, not at exit
        return code
    except BrokenPipeError:
        # The reader of the output went away (`netpeer ... | head`): nothing is wrong and nobody is
        # left to tell. What is still buffered goes nowhere, so that the exit does not fail on it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except errors.NetpeerError as exc:
        # The request id where the service failed, not the user: it finds the call in netpeerd's log.
        blame = type(exc) in (errors.Unavailable, errors.NetpeerError) and exc.request_id
        sys.stderr.write(f"error: {exc.line()}" + (f" (request id {exc.request_id})" if blame else "") + "\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except Exception as exc:  # never a traceback for users
        if os.environ.get("NETPEER_DEBUG"):
            raise
        sys.stderr.write(f"error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                         " (set NETPEER_DEBUG=1 for details)\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
