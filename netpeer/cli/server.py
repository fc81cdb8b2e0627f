"""The commands about netpeerd itself: ``serve`` runs it, ``db upgrade``
migrates its store, ``status`` asks a running one how it is."""

from __future__ import annotations

import argparse

from netpeer.cli import output
from netpeer.cli.commands import Command


def add_serve(sub, g: argparse.ArgumentParser, parser_class) -> None:
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


def run_serve(ctx, args: argparse.Namespace) -> int:
    from netpeer.config import Config
    from netpeer.daemon import serve
    from netpeer.service.epoch import Mode
    mode = Mode.ADOPT if args.adopt_ovn else Mode.ACCEPT_ROLLBACK if args.accept_rollback else Mode.CHECK
    return serve(Config.load(args.config), mode, path=args.config, dataplane=args.dataplane)


def add_db(sub, g: argparse.ArgumentParser, parser_class) -> None:
    db = sub.add_parser("db", help="the store").add_subparsers(dest="action", required=True, parser_class=parser_class)
    up = db.add_parser("upgrade", parents=[g], help="apply the store's schema migrations, then exit")
    up.add_argument("--config", required=True, help="TOML configuration file")


def run_db(ctx, args: argparse.Namespace) -> int:
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


def add_status(sub, g: argparse.ArgumentParser, parser_class) -> None:
    sub.add_parser("status", parents=[g], help="the server's status: OVN connection, sweeps (admin only)")


def run_status(ctx, args: argparse.Namespace) -> int:
    output.emit(ctx.client.status(), ctx.output, output.status_detail)
    return 0


COMMANDS = (Command("serve", add_serve, run_serve), Command("db", add_db, run_db),
            Command("status", add_status, run_status))
