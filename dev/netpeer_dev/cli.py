"""``netpeer dev ...``: the command line of the dev stack, contributed to
``netpeer`` as :data:`COMMAND` through the entry point group
``netpeer.cli_commands`` (pyproject.toml; netpeer never imports this package)."""

from __future__ import annotations

import argparse
import sys
import time

from netpeer import errors
from netpeer.cli.commands import Command
from netpeer_dev.ha import HaStack
from netpeer_dev.stack import DEFAULT_STATE_DIR, DevStack, load_hint


def add_parser(top, g: argparse.ArgumentParser, parser_class) -> None:
    sub = top.add_parser("dev", help="a local stack: OVN + netpeerd in a state directory").add_subparsers(
        dest="action", required=True, parser_class=parser_class)
    up = sub.add_parser("up", parents=[g], help="start OVN and netpeerd; print export lines")
    up.add_argument("--state-dir", default=None, help=f"default $NETPEER_DEV_DIR or {DEFAULT_STATE_DIR}")
    up.add_argument("--chassis", action="store_true",
                    help="also start ovs-vswitchd (userspace datapath) and ovn-controller for real packets")
    up.add_argument("--sites", metavar="SITE,SITE[,...]",
                    help="several sites joined by OVN Interconnection over WireGuard (e.g. east,west): per site "
                         "NB, SB, northd, ovn-ic, chassis and a netpeerd; a simulated WAN between them. "
                         "Site names: a lowercase letter, then up to 9 lowercase letters or digits")
    up.add_argument("--ha-gateways", action="store_true",
                    help="with --sites (there --ha means the same): two gateway chassis per site (priorities 20 "
                         "and 10, BFD 100 ms x 3) and a hypervisor chassis for instances (without it: one chassis "
                         "per site, gateway and instances)")
    up.add_argument("--sweep-interval", default="5s", help="how often netpeerd expires and repairs (default 5s)")
    up.add_argument("--ha", action="store_true",
                    help="replicas: PostgreSQL, an NB Raft cluster of 3, SB, northd and --replicas netpeerd; "
                         "with --sites: HA gateways (--ha-gateways)")
    up.add_argument("--replicas", type=int, default=None,
                    help="with --ha: how many netpeerd replicas, 2 to 5 (default 2); with --sites: how many per "
                         "site, on a PostgreSQL database per site, 1 to 5 (default 1: one netpeerd on SQLite); "
                         "a stack already made keeps its number until `netpeer dev down`")
    how = up.add_mutually_exclusive_group()
    how.add_argument("--adopt-ovn", action="store_true", help="passed to netpeerd: rebuild a lost store from OVN")
    how.add_argument("--accept-rollback", action="store_true", help="passed to netpeerd: make OVN match the store")
    for name, text in (("down", "stop everything the dev stack started"), ("status", "show the dev stack")):
        p = sub.add_parser(name, parents=[g], help=text)
        p.add_argument("--state-dir", default=None)
        if name == "down":
            p.add_argument("--purge", action="store_true", help="also delete the state directory")
    site = sub.add_parser("site", help="a multi-site stack: add a site while it runs, or retire one "
                                       "(the steps of docs/runbook-add-site.md)")
    ssub = site.add_subparsers(dest="site_action", required=True, parser_class=parser_class)
    for name, text in (("add", "add site NAME to the running stack: its OVN, ovn-ic, gateway, WireGuard, "
                               "certificate and netpeerd; the other sites link it on SIGHUP"),
                       ("retire", "retire site NAME: the other sites drop it on SIGHUP (its pairs go Pending, "
                                  "SiteRetired), then everything of it is stopped and removed")):
        p = ssub.add_parser(name, parents=[g], help=text)
        p.add_argument("name", metavar="NAME")
        p.add_argument("--state-dir", default=None)
    inst = sub.add_parser("instance", help="instances: network namespaces attached to a network (needs --chassis)")
    isub = inst.add_subparsers(dest="instance_action", required=True, parser_class=parser_class)
    a = isub.add_parser("add", parents=[g], help="create (or re-use) an instance on NETWORK's switch")
    a.add_argument("network", metavar="[NS/]NETWORK")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--ip", action="append", default=[], metavar="ADDR",
                   help="an address inside one of the network's subnets (repeatable; "
                        "default: the next free one from .10 in each subnet)")
    a.add_argument("--state-dir", default=None)
    ls = isub.add_parser("list", parents=[g], help="list the instances of the dev stack")
    ls.add_argument("--state-dir", default=None)
    d = isub.add_parser("delete", parents=[g], help="delete an instance (switch port, veth, namespace)")
    d.add_argument("name", metavar="NAME")
    d.add_argument("--state-dir", default=None)


def run(ctx, args) -> int:
    from netpeer.cli import output
    stack = DevStack(args.state_dir)
    say = (lambda msg: sys.stderr.write(f"netpeer dev: {msg}\n"))
    from netpeer_dev import sites_cli
    if getattr(args, "sites", None) and getattr(args, "ha", False):
        args.ha_gateways = True   # with --sites, --ha means HA gateways (replicas are a single-site stack's)
    multi = sites_cli.wanted(args, stack.dir)
    if multi is not None:
        if args.action == "up" and stack.config_file.exists():
            raise errors.FailedPrecondition(f"{stack.dir} holds a single-site dev stack: `netpeer dev down --purge` "
                                            f"first, or pass another --state-dir")
        return sites_cli.run(ctx, args, multi, say)
    if args.action == "site":
        raise errors.FailedPrecondition(f"{stack.dir} holds no multi-site stack: netpeer dev up --sites east,west "
                                        "first")
    if args.action == "up" and getattr(args, "ha_gateways", False):
        raise errors.InvalidArgument.for_field("--ha-gateways", True, "needs --sites (HA gateway chassis per site)")
    ha = HaStack(stack.dir)
    if (args.action == "up" and args.ha) or (args.action in ("up", "down", "status") and ha.enabled):
        return _run_ha(ctx, args, ha, stack, say)
    if args.action == "up" and args.replicas is not None:
        raise errors.InvalidArgument.for_field("--replicas", args.replicas, "needs --ha (replicas of a single "
                                               "site) or --sites (replicas of each site)")
    if args.action == "up":
        serve_args = ("--adopt-ovn",) if args.adopt_ovn else ("--accept-rollback",) if args.accept_rollback else ()
        stack.up(args.chassis, args.sweep_interval, say, serve_args)
        print(f"export NETPEER_ENDPOINT={stack.endpoint}")
        print(f"export NETPEER_TOKEN={stack.admin_token()}")
        print(f"export NETPEER_METRICS_URL={stack.metrics_url}")
        say(f"ready. OVN NB: ovn-nbctl --db={stack.ovn.nb_remote} show")
        say(load_hint(stack.dir, *(["--chassis"] if stack.wants_chassis else [])))
        return 0
    if args.action == "down":
        stack.down(args.purge, say)
        return 0
    if args.action == "instance":
        return _instance(ctx, args, stack)
    rows = stack.status_rows()
    with _fleet(stack) as fleet:
        states = fleet.states() if stack.dir.exists() else {}
        instances = [i.to_json(states.get(i.name)) for i in fleet.list()] if stack.dir.exists() else []
    data = {"state_dir": str(stack.dir), "endpoint": stack.endpoint, "nb_remote": stack.ovn.nb_remote,
            "sb_remote": stack.ovn.sb_remote, "nb_socket": str(stack.ovn.nb_socket),
            "chassis": stack.wants_chassis, "chassis_netns": stack.ovn.chassis_netns,
            "daemons": [{"name": r[0], "pid": int(r[1]) if r[1] else None, "state": r[2], "detail": r[3]}
                        for r in rows],
            "instances": instances}

    def render(d):
        lines = [f"state dir:  {d['state_dir']}", f"endpoint:   {d['endpoint']}", f"OVN NB:     {d['nb_remote']}",
                 f"OVN SB:     {d['sb_remote']}", f"inspect:    ovn-nbctl --db={d['nb_remote']} show"]
        if d["chassis"]:
            lines.append(f"chassis:    ovs-vswitchd in netns {d['chassis_netns']} "
                         f"(ovs-vsctl --db=unix:{stack.ovn.ovs_socket} show)")
        lines.append(output.table(["DAEMON", "PID", "STATE", "DETAIL"], rows))
        if d["instances"]:
            lines.append(_instances_table(d["instances"]))
        return "\n".join(lines)

    output.emit(data, ctx.output, render)
    required = stack.required_daemons()
    running = all(r[2] == "running" for r in rows if r[0] in required)
    return 0 if running else 3


def _run_ha(ctx, args, ha: HaStack, stack: DevStack, say) -> int:
    """``dev up --ha`` / ``down`` / ``status`` of the replicated stack."""
    from netpeer.cli import output
    if args.action == "up":
        if stack.config_file.exists() and not ha.enabled:
            raise errors.FailedPrecondition(f"{stack.dir} holds a single-process dev stack: `netpeer dev down "
                                            "--purge` first, or pass another --state-dir")
        serve_args = ("--adopt-ovn",) if args.adopt_ovn else ("--accept-rollback",) if args.accept_rollback else ()
        replicas = args.replicas if args.replicas is not None else ha.replicas if ha.enabled else 2
        ha.up(replicas, args.sweep_interval, say, serve_args)
        print(f"export NETPEER_ENDPOINT={ha.endpoint}")
        print(f"export NETPEER_TOKEN={ha.admin_token()}")
        say(f"ready: {ha.replicas} replicas. OVN NB: ovn-nbctl --db={ha.nb.nb_remote} show")
        say(load_hint(stack.dir, "--ha", "--replicas", str(ha.replicas)))
        return 0
    if args.action == "down":
        ha.down(args.purge, say)
        return 0
    rows = ha.status()
    data = {"state_dir": str(ha.dir), "ha": True, "endpoint": ha.endpoint, "nb_remote": ha.nb.nb_remote,
            "sb_remote": ha.nb.sb_remote, "store": ha.pg.url("netpeer"), "daemons": rows}

    def render(d):
        return "\n".join([f"state dir:  {d['state_dir']}", f"endpoint:   {d['endpoint']}",
                          f"store:      {d['store']}", f"OVN NB:     {d['nb_remote']}",
                          output.table(["DAEMON", "ROLE", "PID", "STATE", "DETAIL"],
                                       [[r["name"], r["role"], str(r["pid"] or ""), r["state"], r["detail"]]
                                        for r in rows])])
    output.emit(data, ctx.output, render)
    return 0 if all(r["state"] == "running" for r in rows) else 3


def _fleet(stack: DevStack):
    from netpeer_dev import instances
    return instances.fleet_of(stack)


def _instances_table(items: list[dict]) -> str:
    from netpeer.cli import output
    return output.table(["INSTANCE", "NETWORK", "IPS", "NETNS", "STATE"],
                        [[i["name"], f"{i['namespace']}/{i['network']}", "\n".join(i["ips"]), i["netns"],
                          i.get("state", "")] for i in items])


def _instance(ctx, args, stack: DevStack) -> int:
    """``netpeer dev instance add|list|delete``."""
    with _fleet(stack) as fleet:
        return _instance_action(ctx, args, stack, fleet)


def _instance_action(ctx, args, stack: DevStack, fleet) -> int:
    from netpeer.cli import output
    from netpeer.core import validate
    action = args.instance_action
    if action == "list":
        states = fleet.states()
        items = [i.to_json(states.get(i.name)) for i in fleet.list()]
        output.emit(items, ctx.output, _instances_table)
        return 0
    if action == "delete":
        fleet.validate_name(args.name)
        fleet.delete(args.name)
        if ctx.output == "json":
            output.emit({"deleted": args.name}, "json", None)
        return 0
    # add: the network's uid and subnets come from netpeerd (this dev stack's by default).
    if not stack.ovn.running():
        raise errors.Unavailable(f"the dev stack in {stack.dir} is not running: netpeer dev up --chassis")
    fleet.validate_name(args.name)
    ns, _, net = args.network.rpartition("/")
    if "/" in ns:
        raise errors.InvalidArgument.for_field("NETWORK", args.network, "must be NETWORK or NS/NETWORK")
    validate.name("NETWORK", net)
    ctx.endpoint = ctx.endpoint or stack.endpoint
    ctx.token = ctx.token or (stack.admin_token() if stack.token_file.exists() else "")
    ns = validate.name("NETWORK", ns) if ns else ctx.namespace
    network = ctx.client.get_network(ns, net)
    inst = fleet.add(network, args.name, args.ip)
    states = fleet.states()
    deadline = time.monotonic() + 30   # the port's NB "up" follows the chassis' claim through northd
    while states.get(inst.name) == "detached" and time.monotonic() < deadline:
        time.sleep(0.1)
        states = fleet.states()
    output.emit(inst.to_json(states.get(inst.name)), ctx.output, lambda i: _instances_table([i]))
    return 0


COMMAND = Command("dev", add_parser, run)
