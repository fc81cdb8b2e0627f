"""``netpeer network ...``: a namespace's networks."""

from __future__ import annotations

import argparse

from netpeer.cli import output
from netpeer.cli.commands import Command
from netpeer.cli.watch import watch


def add_parser(sub, g: argparse.ArgumentParser, parser_class) -> None:
    net = sub.add_parser("network", help="networks").add_subparsers(dest="action", required=True,
                                                                    parser_class=parser_class)
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


def run(ctx, args: argparse.Namespace) -> int:
    c, action = ctx.client, args.action
    ns = ctx.namespace
    if action == "create":
        r = c.create_network(ns, args.name, args.subnet, args.route, args.description)
        output.emit(r, ctx.output, output.network_detail)
    elif action == "list":
        output.emit(c.list_networks(ns), ctx.output, output.networks_table)
    elif action == "watch":
        return watch(c, ns, None, args.since, ctx.output, kinds=("network", "peering"))
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


COMMAND = Command("network", add_parser, run)
