"""``netpeer dev site add NAME`` / ``netpeer dev site retire NAME``: a site
joins a running multi-site dev stack, or leaves it, by the steps of
docs/runbook-add-site.md, in its order and with its numbers (each printed as
it runs), on the stack's own daemons, WireGuard routers and IC NB. The other
sites are not restarted: their netpeerds read their new configuration on
SIGHUP, sent to their pids; their OVN, WireGuard and chassis carry on.

What the dev stack does where an operator's machines differ: the new site's
namespaces and underlay addresses come from the stack (``netpeer_dev.wan``),
WireGuard is configured over wireguard-go's UAPI instead of ``wg``, and the
site link crosses the WAN through each router's relay
(``netpeer_dev.sitelink``), which learns the new site's address on SIGHUP.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import time
from typing import Callable

from netpeer import errors
from netpeer.config import Config
from netpeer.core import validate
from netpeer_dev.multisite import MultiSiteStack, SiteStack
from netpeer_dev.operator import MAX_SITES, SITE_NAME, transit_switch
from netpeer_dev.wireguard import PORT as WG_PORT, Peer

__all__ = ["add_site", "retire_site"]

Say = Callable[[str], None]


def add_site(multi: MultiSiteStack, name: str, say: Say, timeout: float = 180.0) -> MultiSiteStack:
    """Adds site ``name`` to the running stack ``multi``; the stack with it.
    A failure leaves what was made recorded: ``retire_site`` (or ``netpeer
    dev down``) removes it."""
    if not SITE_NAME.match(name):
        raise errors.InvalidArgument.for_field("SITE", name, "must be a lowercase letter followed by at most 9 "
                                               "lowercase letters or digits")
    _refuse_replicas(multi, name, "add", multi.names + [name])
    if name in multi.names:
        raise errors.AlreadyExists(f"SITE: {name!r} is a site of the stack in {multi.dir} already", field="SITE",
                                   value=name)
    if len(multi.names) >= MAX_SITES:
        raise errors.FailedPrecondition(f"SITE: the stack in {multi.dir} has {MAX_SITES} sites, the most it can "
                                        "have", field="SITE", value=name)
    _require_running(multi)
    indices = multi.sites.indices
    index = min(set(range(MAX_SITES)) - set(indices.values()))
    grown = MultiSiteStack(multi.dir, multi.names + [name], multi.sites.ha, {**indices, name: index},
                           multi.replicas)
    sites, plan, stack = grown.sites, grown.sites.plan(name), grown.stacks[name]
    others = multi.names
    deadline = time.monotonic() + timeout
    sweep = validate.format_duration(Config.load(multi.first.config_file).sweep_interval)
    sites.write_manifest()   # first: what a failed add made is found and removed by `site retire` or `dev down`

    say(f"1. transit switches in the IC NB: {', '.join(transit_switch(name, o) for o in others)}")
    for other in others:
        sites.ic.ic_nbctl("--may-exist", "ts-add", transit_switch(name, other))
    say(f"2. WireGuard: {name}'s gateway with its key and peers, {name} a peer of every other gateway, routes; "
        "the site links' relays")
    sites.net.build_site(plan)
    _tunnels(grown, name, deadline)
    sites.relay(name).start(stack.site_sockets)
    for other in others:
        sites.relay(other).update(deadline)
    sites.relay(name).wait(deadline)
    say(f"3. {name}'s OVN: NB, SB, ovn-northd, gateway chassis, NB_Global, gateway group, ovn-ic; then the new "
        "transit switches in every site's NB and the gateways in every SB")
    sites.start_site(plan, deadline, say)
    sites.wait_interconnected(deadline)
    say(f"4. {name}'s certificate: netpeer site cert issue {name} --ca {grown.dir / 'pki' / 'ca'} "
        f"--out {stack.pki} --dns localhost")
    grown.ensure_certificates()
    say(f"5. pair secrets: {', '.join(stack.secret_file(o).name for o in others)}")
    grown.ensure_secrets()
    say(f"6. {name}'s netpeerd, with [sites.*] for {', '.join(others)}")
    stack.dir.mkdir(parents=True, exist_ok=True)
    os.chmod(stack.dir, 0o700)
    stack.ensure_admin_token()
    netpeerd = stack.netpeerd(sweep)
    if netpeerd.pid is None:
        netpeerd.spawn()
    netpeerd.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
    say(f"7. [sites.{name}] on {', '.join(others)}, then SIGHUP to their netpeerds (systemctl reload netpeerd)")
    for other in others:
        _relink(grown.stacks[other], deadline, say)
    say("8. checks: every link reachable (netpeer status on each site)")
    _wait_reachable(grown, deadline)
    return grown


def retire_site(multi: MultiSiteStack, name: str, say: Say, timeout: float = 120.0) -> MultiSiteStack:
    """Retires site ``name`` from the running stack ``multi`` and removes
    everything of it; the stack without it."""
    if name not in multi.names:
        raise errors.NotFound(f"SITE: {name!r} is not a site of the stack in {multi.dir} "
                              f"({', '.join(multi.names)})", field="SITE", value=name)
    _refuse_replicas(multi, name, "retire", [n for n in multi.names if n != name])
    rest = [n for n in multi.names if n != name]
    if len(rest) < 2:
        raise errors.FailedPrecondition(f"SITE: retiring {name!r} would leave one site: `netpeer dev down` "
                                        "removes the whole stack", field="SITE", value=name)
    smaller = MultiSiteStack(multi.dir, rest, multi.sites.ha, {n: multi.sites.indices[n] for n in rest},
                             multi.replicas)
    sites, plan = multi.sites, multi.sites.plan(name)
    deadline = time.monotonic() + timeout

    say(f"1. [sites.{name}] removed on {', '.join(rest)}, then SIGHUP to their netpeerds: their pairs with {name} "
        "go Pending (SiteRetired)")
    for other in rest:
        if smaller.stacks[other].netpeerd_pid() is not None:
            _relink(smaller.stacks[other], deadline, say)
    say(f"2. {name}'s netpeerd stopped (and on the dev stack its instances deleted)")
    multi.stacks[name].netpeerd().stop()
    with multi.fleet(name) as fleet:
        fleet.delete_all(say)
    say(f"3. transit switches deleted from the IC NB: {', '.join(transit_switch(name, o) for o in rest)}")
    if sites.ic.running():
        for other in rest:
            sites.ic.ic_nbctl("--if-exists", "ts-del", transit_switch(name, other))
    say(f"4. WireGuard: {name} removed from every other gateway with its routes; {name}'s wireguard-go stopped; "
        "the site links' relays")
    wg = sites.wg[name]
    if wg.key_file.exists():
        public = wg.public_key()
        for other in rest:
            if sites.wg[other].pid is not None:
                sites.wg[other].remove_peers([public])
    sites.net.forget_routes(plan)
    for other in rest:
        if smaller.sites.relay(other).pid is not None:
            smaller.sites.relay(other).update(deadline)
    sites.relay(name).stop()
    wg.stop()
    say(f"5. {name}'s OVN stopped (ovn-ic, chassis, ovn-northd, NB, SB), its namespaces deleted")
    for chassis in sites.chassis[name].values():
        chassis.stop()
    sites.central[name].stop()
    failed = sites.net.delete(sites.net.site_namespaces(plan))
    if failed:
        raise errors.Unavailable(f"could not delete {name}'s namespaces: {'; '.join(failed)}")
    say(f"6. {name}'s pair secrets and certificate removed")
    for other in rest:
        multi.stacks[name].secret_file(other).unlink(missing_ok=True)
    shutil.rmtree(multi.stacks[name].pki, ignore_errors=True)
    shutil.rmtree(multi.stacks[name].dir, ignore_errors=True)
    smaller.sites.write_manifest()
    say(f"7. checks: every remaining link reachable, none to {name} (netpeer status on each site)")
    _wait_reachable(smaller, deadline)
    return smaller


# ------------------------------------------------------------------ the steps' pieces

def _refuse_replicas(multi: MultiSiteStack, name: str, verb: str, then: list[str]) -> None:
    """A stack whose sites run netpeerd replicas changes its sites only by
    ``down`` and ``up``: the steps here reload one netpeerd per site."""
    if multi.replicas > 1:
        raise errors.FailedPrecondition(
            f"SITE: {name!r}: the stack in {multi.dir} runs {multi.replicas} netpeerd replicas per site, and `netpeer "
            f"dev site {verb}` takes sites with one netpeerd: `netpeer dev down`, then `netpeer dev up --sites "
            f"{','.join(then)} --replicas {multi.replicas}`", field="SITE", value=name)


def _require_running(multi: MultiSiteStack) -> None:
    stopped = [n for n, s in multi.stacks.items() if s.netpeerd_pid() is None]
    if stopped or not multi.sites.ic.running():
        what = f"netpeerd of {', '.join(stopped)}" if stopped else "the IC databases"
        raise errors.FailedPrecondition(f"the stack in {multi.dir} is not running ({what}): netpeer dev up first")


def _tunnels(grown: MultiSiteStack, name: str, deadline: float) -> None:
    """The new router's wireguard-go with every other site as a peer, and the
    new site a peer of every other router (``wg set ... peer``: the tunnels
    there stay up), routes both ways; the new site starts the handshakes
    (two crossing initiations make wireguard-go drop its own: a 5 s retry)."""
    sites = grown.sites
    plan = sites.plan(name)
    others = [p for p in sites.plans if p is not plan]
    publics = {p.name: sites.wg[p.name].public_key() for p in sites.plans}
    wg = sites.wg[name]
    wg.start(timeout=max(1.0, deadline - time.monotonic()))
    wg.configure([Peer(publics[q.name], f"{q.wan_ip}:{WG_PORT}", (str(q.lan),)) for q in others])
    for q in others:
        sites.wg[q.name].add_peers([Peer(publics[name], f"{plan.wan_ip}:{WG_PORT}", (str(plan.lan),))])
    sites.set_tunnel_bypass(False)   # every router: the other sites' underlay into its tunnel, the new one's too
    wg.set_keepalive([publics[q.name] for q in others], sites.keepalive)
    while True:
        down = [(t.site, t.peer) for t in sites.tunnel_status()
                if name in (t.site, t.peer) and t.latest_handshake is None]
        if not down:
            break
        if time.monotonic() > deadline:
            raise errors.Unavailable(f"no WireGuard handshake between {down}; see wireguard-go.log in <site>/wg")
        time.sleep(0.02)
    for q in others:
        sites.wg[q.name].set_keepalive([publics[name]], sites.keepalive)


def _relink(stack: SiteStack, deadline: float, say: Say) -> None:
    """``stack``'s netpeerd.toml gets ``[sites.*]`` for exactly the other sites
    of its stack (nothing else changes), then SIGHUP to its pid; returns once
    its status lists those links."""
    config = Config.load(stack.config_file)
    links = stack.links()
    dataclasses.replace(config, sites=links).write(stack.config_file)
    netpeerd = stack.netpeerd()
    pid = netpeerd.pid
    if pid is None:
        raise errors.FailedPrecondition(f"{stack.site}: netpeerd is not running: netpeer dev up first")
    say(f"   {stack.site}: kill -HUP {pid}")
    os.kill(pid, signal.SIGHUP)
    wanted = sorted(link.name for link in links)
    while True:
        linked = sorted(x["site"] for x in netpeerd.status()["sites"])
        if linked == wanted:
            return
        if time.monotonic() > deadline:
            said = [line for line in netpeerd.tail(20000).splitlines() if "reload" in line]
            raise errors.Unavailable(f"{stack.site}: netpeerd links {linked or 'no site'} after SIGHUP, not "
                                     f"{wanted}: {said[-1] if said else 'it logged no reload'} (log: {netpeerd.log})")
        time.sleep(0.05)


def _wait_reachable(multi: MultiSiteStack, deadline: float) -> None:
    while True:
        down = []
        for name, stack in multi.stacks.items():
            for link in stack.netpeerd().status()["sites"]:
                if not link["reachable"]:
                    down.append(f"{name} -> {link['site']} ({link['last_error'] or 'not tried yet'})")
        if not down:
            return
        if time.monotonic() > deadline:
            raise errors.Unavailable(f"links not reachable: {'; '.join(down)}")
        time.sleep(0.05)
