"""``netpeer dev up --sites ...`` and the other ``dev`` verbs on a multi-site
stack (``netpeer_dev.cli`` hands over when ``--sites`` is given or the state
directory holds one: its ``sites.json``)."""

from __future__ import annotations

import time
from typing import Any

from netpeer import errors
from netpeer_dev.multisite import MultiSiteStack
from netpeer_dev.operator import validate_sites
from netpeer_dev.stack import load_hint

__all__ = ["wanted", "run"]


def wanted(args, state_dir) -> MultiSiteStack | None:
    """The multi-site stack this command is about, or None (single-site).
    ``--replicas`` (of ``up``) absent: as many netpeerd per site as the stack
    in ``state_dir`` was last brought up with (1 for a new one)."""
    sites = getattr(args, "sites", None)
    replicas = getattr(args, "replicas", None)
    if sites is not None:
        try:
            names = validate_sites(sites, "--sites")
        except ValueError as exc:
            raise errors.InvalidArgument(str(exc), field="--sites", value=sites) from None
        if replicas is None:
            replicas = MultiSiteStack.recorded_replicas(state_dir)
        return MultiSiteStack(state_dir, names, ha=bool(getattr(args, "ha_gateways", False)), replicas=replicas)
    found = MultiSiteStack.open(state_dir)
    if found is None or replicas is None:
        return found
    return MultiSiteStack(state_dir, found.names, found.sites.ha, found.sites.indices, replicas)


def run(ctx, args, multi: MultiSiteStack, say) -> int:
    if args.action == "up":
        serve_args = ("--adopt-ovn",) if args.adopt_ovn else ("--accept-rollback",) if args.accept_rollback else ()
        multi.up(args.sweep_interval, say, serve_args)
        for line in multi.exports():
            print(line)
        replicas = f", {multi.replicas} netpeerd replicas per site" if multi.replicas > 1 else ""
        say(f"ready: sites {', '.join(multi.names)}{' with HA gateways' if multi.sites.ha else ''}{replicas} "
            f"in {multi.dir} (netpeer dev status)")
        say(load_hint(multi.dir, "--sites", ",".join(multi.names), *(["--ha"] if multi.sites.ha else []),
                      *(["--replicas", str(multi.replicas)] if multi.replicas > 1 else [])))
        return 0
    if args.action == "down":
        multi.down(args.purge, say)
        return 0
    if args.action == "instance":
        return _instance(ctx, args, multi)
    if args.action == "site":
        from netpeer_dev import region
        if args.site_action == "add":
            multi = region.add_site(multi, args.name, say)
            say(f"ready: sites {', '.join(multi.names)} in {multi.dir}; {args.name}'s settings:")
            stack = multi.stacks[args.name]
            for line in (f"export NETPEER_ENDPOINT_{args.name.upper()}={stack.endpoint}",
                         f"export NETPEER_TOKEN_{args.name.upper()}={stack.admin_token()}"):
                print(line)
        else:
            multi = region.retire_site(multi, args.name, say)
            say(f"retired {args.name}: sites {', '.join(multi.names)} in {multi.dir}")
        return 0
    return _status(ctx, multi)


def _status(ctx, multi: MultiSiteStack) -> int:
    from netpeer.cli import output
    data = multi.status()

    def render(d: dict[str, Any]) -> str:
        lines = [f"state dir:  {d['state_dir']}", f"IC NB:      {d['ic_nb']}  (ovn-ic-nbctl --db={d['ic_nb']} show)",
                 f"IC SB:      {d['ic_sb']}"]
        if d["replicas"] > 1:
            lines.append(f"stores:     PostgreSQL in {d['postgres']}, a database per site; "
                         f"{d['replicas']} netpeerd replicas per site")
        lines += [output.table(["SITE", "ENDPOINT", "NETPEERD", "OVN NB", "GATEWAY GROUP", "INSTANCES ON"],
                               [[s["name"], s["endpoint"].replace(",", "\n"),
                                 f"{s['netpeerd']} {s['netpeerd_pid'] or ''}".strip(), s["nb_remote"],
                                 s["gateway_group"], s["instance_chassis"]] for s in d["sites"]]),
                  _daemons_table(d),
                  output.table(["SITE", "GATEWAY", "PRIORITY", "STATE", "PORTS"],
                               [[g["site"], g["chassis"], str(g["priority"]), g["state"], "\n".join(g["ports"])]
                                for g in d["gateways"]]),
                  output.table(["SITE", "TO", "WIREGUARD", "STATE", "LATEST HANDSHAKE", "RX", "TX"],
                               [[t["site"], t["peer"], t["interface"], t["state"], _ago(t["latest_handshake"]),
                                 str(t["rx_bytes"]), str(t["tx_bytes"])] for t in d["tunnels"]])]
        if d["instances"]:
            lines.append(_instances_table(d["instances"]))
        return "\n".join(lines)

    output.emit(data, ctx.output, render)
    ok = all(p["state"] == "running" for p in data["daemons"]) and all(t["state"] == "up" for t in data["tunnels"])
    return 0 if ok else 3


def _daemons_table(d: dict[str, Any]) -> str:
    """Every process; with replicas, each netpeerd's role (leader: it holds
    the sweeper lease and runs the site's links)."""
    from netpeer.cli import output
    if d["replicas"] > 1:
        return output.table(["DAEMON", "ROLE", "PID", "STATE"],
                            [[p["name"], p.get("role", ""), str(p["pid"] or ""), p["state"]] for p in d["daemons"]])
    return output.table(["DAEMON", "PID", "STATE"], [[p["name"], str(p["pid"] or ""), p["state"]] for p in d["daemons"]])


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    import time
    return f"{max(0.0, time.time() - ts):.0f} s ago"


def _instances_table(items: list[dict]) -> str:
    from netpeer.cli import output
    return output.table(["SITE", "INSTANCE", "NETWORK", "IPS", "NETNS", "STATE"],
                        [[i["site"], i["name"], f"{i['namespace']}/{i['network']}", "\n".join(i["ips"]), i["netns"],
                          i.get("state", "")] for i in items])


def _instance(ctx, args, multi: MultiSiteStack) -> int:
    """``netpeer dev instance add|list|delete`` across the sites."""
    from netpeer.cli import output
    from netpeer.core import validate
    action = args.instance_action
    if action == "list":
        items = multi.status()["instances"]
        output.emit(items, ctx.output, _instances_table)
        return 0
    if action == "delete":
        for name in multi.names:
            with multi.fleet(name) as fleet:
                fleet.validate_name(args.name)
                if fleet.get(args.name) is not None:
                    fleet.delete(args.name)
                    if ctx.output == "json":
                        output.emit({"deleted": args.name, "site": name}, "json", None)
                    return 0
        raise errors.NotFound(f"instance {args.name!r} not found (netpeer dev instance list)", field="NAME",
                              value=args.name)
    # add: on the site whose netpeerd the endpoint in use is; the network's uid and subnets from it.
    site = multi.site_of_endpoint(ctx.endpoint)
    stack = multi.stacks[site]
    if not multi.sites.hypervisor(site).running():
        raise errors.Unavailable(f"the instance chassis of site {site} is not running: netpeer dev up --sites "
                                 f"{','.join(multi.names)}")
    ns, _, net = args.network.rpartition("/")
    if "/" in ns:
        raise errors.InvalidArgument.for_field("NETWORK", args.network, "must be NETWORK or NS/NETWORK")
    validate.name("NETWORK", net)
    for other in multi.names:
        if other != site:
            with multi.fleet(other) as fleet:
                fleet.validate_name(args.name)
                if fleet.get(args.name) is not None:
                    raise errors.AlreadyExists(f"instance {args.name!r} exists in site {other}; delete it first "
                                               f"(netpeer dev instance delete {args.name})", field="NAME",
                                               value=args.name)
    ctx.endpoint = stack.endpoint
    ctx.token = multi.token_for(site, ctx.token)
    ns = validate.name("NETWORK", ns) if ns else ctx.namespace
    network = ctx.client.get_network(ns, net)
    with multi.fleet(site) as fleet:
        inst = fleet.add(network, args.name, args.ip)
        states = fleet.states()
        deadline = time.monotonic() + 30   # the port's NB "up" follows the chassis' claim through northd
        while states.get(inst.name) == "detached" and time.monotonic() < deadline:
            time.sleep(0.1)
            states = fleet.states()
    item = {"site": site, **inst.to_json(states.get(inst.name))}
    output.emit(item, ctx.output, lambda i: _instances_table([i]))
    return 0
