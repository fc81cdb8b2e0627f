"""``netpeer token ...``: credentials."""

from __future__ import annotations

import argparse

from netpeer.cli import output
from netpeer.cli.commands import Command
from netpeer.cli.context import global_options
from netpeer.core import validate


def add_parser(sub, g: argparse.ArgumentParser, parser_class) -> None:
    tok = sub.add_parser("token", help="credentials").add_subparsers(dest="action", required=True,
                                                                     parser_class=parser_class)
    # A private copy of the global options: "resolve" edits the actions it shadows.
    tc = tok.add_parser("create", parents=[global_options()], help="mint a token granting namespaces (admin only)",
                        conflict_handler="resolve")
    tc.add_argument("--namespace", "-n", dest="token_namespaces", action="append", required=True, metavar="NS")
    tc.add_argument("--description", default="")
    tc.add_argument("--ttl", help="the token stops working after this long (like 30d, 12h); default: never")
    tok.add_parser("whoami", parents=[g], help="show what the current token grants")
    tok.add_parser("list", parents=[g], help="list every token (admin only; secrets are never shown)")
    tr = tok.add_parser("revoke", parents=[g], help="revoke a token at once (admin only)")
    tr.add_argument("token_or_id", metavar="TOKEN_OR_ID", help="the token's id (as `token list` shows it) or the token")


def run(ctx, args: argparse.Namespace) -> int:
    action = args.action
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


def parse_token_id(value: str) -> str:
    parts = value.strip().split("_")
    return parts[1] if len(parts) == 3 and parts[0] == "np" else value.strip()


COMMAND = Command("token", add_parser, run)
