"""kill -9 of either site's netpeerd at random points of cross-site consent.

Six cross-site pairs (east ``fx-i/net`` <-> west ``fy-i/net``); each step
creates or deletes one half, on one side, through that side's netpeerd. At
random points (a random instant inside the call in flight) one side's
netpeerd gets SIGKILL and is started again. After every restart, on both
sides:

- the store equals the model of acknowledged operations (the call in flight
  at the kill may or may not have happened: it is looked up, and the model
  follows the store);
- once the sites have synced (a few sweeps), every half is in the phase the
  two halves imply: Bound when both exist, Pending otherwise, on both sides
  (never one side Bound and the other not);
- the netpeer-owned OVN rows of each site are exactly what its store implies
  (``tests.faults.harness``).
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time

import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.core.models import PeeringKey
from netpeer.ovn.backend import OvnBackend
from netpeer.store.sqlite import SqliteStore
from netpeer_dev.multisite import MultiSiteStack
from netpeer.daemon import _site_context
from netpeer.ovn.rows import desired_rows
from netpeer.service.writes import desired_states
from netpeer.store.base import iter_all_networks
from tests.faults.harness import actual_ids, diff_ovn, summary
from tests.sites.conftest import SWEEP
from tests.sitecheck import link_problems
from tests.sites.helpers import World
from tests.support import wait_until

pytestmark = pytest.mark.slow

PAIRS = 6
STEPS = int(os.environ.get("NETPEER_SITES_FAULT_STEPS", "120"))
KILLS = int(os.environ.get("NETPEER_SITES_FAULT_KILLS", "16"))
SEED = int(os.environ.get("NETPEER_FAULTS_SEED", "20261123"))
SIDES = {"east": ("fx", "west", "fy"), "west": ("fy", "east", "fx")}


def _half(site: str, i: int) -> tuple[str, str, str, str]:
    """(namespace, network, peering, remote as SITE:NS/NET) of pair ``i``'s half in ``site``."""
    mine, other_site, theirs = SIDES[site]
    return f"{mine}-{i}", "net", "to-peer", f"{other_site}:{theirs}-{i}/net"


def _toggle(client: Client, site: str, i: int, create: bool) -> None:
    ns, net, name, remote = _half(site, i)
    if create:
        rsite, rest = remote.split(":")
        rns, rnet = rest.split("/")
        client.create_peering(ns, net, name, remote_network=rnet, remote_namespace=rns, remote_site=rsite)
    else:
        client.delete_peering(ns, net, name)


def _in_store(store: SqliteStore, site: str, i: int) -> bool:
    ns, net, name, _ = _half(site, i)
    with store.read() as tx:
        return tx.get_peering(PeeringKey(ns, net, name)) is not None


def _phases_match(world: World, model: dict[tuple[str, int], bool]) -> list[str]:
    out = []
    for (site, i), present in model.items():
        ns, net, name, _ = _half(site, i)
        try:
            p = world.admin(site).get_peering(ns, net, name)
        except errors.NotFound:
            if present:
                out.append(f"{site} half {i} acknowledged but missing")
            continue
        if not present:
            out.append(f"{site} half {i} present but deleted or never acknowledged")
            continue
        other = "west" if site == "east" else "east"
        want = "Bound" if model[(other, i)] else "Pending"
        if p["phase"] != want:
            out.append(f"{site} half {i} is {p['phase']} ({p.get('reason')}), expected {want}")
    return out


def _converge(world: World, model, timeout: float = 20.0) -> float:
    t0 = time.monotonic()
    wait_until(lambda: _phases_match(world, model), timeout,
               lambda problems: f"not converged after the restart: {problems[:6]}", step=0.1,
               until=lambda problems: not problems)
    return time.monotonic() - t0


def test_kill9_either_side_during_cross_site_consent(multi: MultiSiteStack, world: World, measurements) -> None:
    rnd = random.Random(SEED)
    for i in range(PAIRS):
        world.network("east", f"fx-{i}", "net", f"10.{100 + i}.0.0/24")
        world.network("west", f"fy-{i}", "net", f"10.{150 + i}.0.0/24")
    model = {(site, i): False for site in SIDES for i in range(PAIRS)}
    stores = {site: SqliteStore(multi.stacks[site].config().store) for site in SIDES}
    checkers = {site: OvnBackend(multi.sites.central[site].nb_remote) for site in SIDES}
    for c in checkers.values():
        assert c.wait_connected(30)
    kill_at = set(rnd.sample(range(5, STEPS), KILLS))
    kills, in_doubt_took, in_doubt_not, converge, serving = 0, 0, 0, [], []
    try:
        for step in range(STEPS):
            site = rnd.choice(list(SIDES))
            i = rnd.randrange(PAIRS)
            create = not model[(site, i)]
            victim = rnd.choice(list(SIDES)) if step in kill_at else None
            outcome: dict[str, object] = {}

            def call() -> None:
                try:
                    _toggle(world.admin(site), site, i, create)
                    outcome["ok"] = True
                except errors.NetpeerError as exc:
                    outcome["error"] = exc
            worker = threading.Thread(target=call, daemon=True)
            worker.start()
            if victim is not None:
                time.sleep(rnd.uniform(0, 0.05))   # not polling: the restart lands at a random moment of the call
                multi.stacks[victim].netpeerd().kill9()
                t_kill = time.monotonic()
            worker.join(60)
            assert not worker.is_alive(), "the call hung"
            if victim is None:
                assert outcome.get("ok"), f"step {step}: {outcome.get('error')}"
                model[(site, i)] = create
                continue
            kills += 1
            world.close()                       # clients of the dead process
            multi.up(SWEEP, lambda m: None)     # starts the killed netpeerd again
            serving.append(time.monotonic() - t_kill)
            if outcome.get("ok"):
                model[(site, i)] = create
            else:
                took = _in_store(stores[site], site, i) == create
                in_doubt_took += took
                in_doubt_not += not took
                if took:
                    model[(site, i)] = create
            for s in SIDES:
                for j in range(PAIRS):
                    assert _in_store(stores[s], s, j) == model[(s, j)], \
                        f"after kill {kills} ({victim}): {s} half {j} store != acknowledged"
            converge.append(_converge(world, model))
            for s in SIDES:
                _wait_ovn_matches_store(multi, s, stores[s], checkers[s])
            _wait_links_agree(stores, f"after kill {kills} ({victim})")
        converge.append(_converge(world, model))
        _wait_links_agree(stores, "at the end")
        for s in SIDES:
            _wait_ovn_matches_store(multi, s, stores[s], checkers[s])
    finally:
        for c in checkers.values():
            c.close()
        for s in stores.values():
            s.close()
    for stack in multi.stacks.values():
        stack.netpeerd().assert_no_internal_errors()
    assert kills == KILLS
    measurements.add("cross-site consent, kill -9 of either netpeerd", {
        "seed": SEED, "steps": STEPS, "kills": kills, "in_flight_took_effect": in_doubt_took,
        "in_flight_did_not": in_doubt_not, "kill_to_serving_s": summary(serving),
        "restart_to_both_sides_agree_s": summary(converge)})


def _wait_links_agree(stores, when: str, timeout: float = 15.0) -> None:
    """Until both sides' outboxes and mirrors equal the reference (an
    exchange may still be on its way when the phases already agree)."""
    wait_until(lambda: link_problems(stores), timeout,
               lambda problems: f"{when}: the sites' links disagree: {problems[:4]}", step=0.1,
               until=lambda problems: not problems)


def _wait_ovn_matches_store(multi: MultiSiteStack, site: str, store, backend, timeout: float = 15.0) -> float:
    """Until the site's netpeer-owned NB rows are exactly those its store
    implies, transit ports, routes and policies towards the other site
    included (``tests.faults.harness`` knows a single site only)."""
    config = multi.stacks[site].config(SWEEP)
    context = _site_context(config)
    def problems() -> list[str]:
        with store.read() as tx:
            states = desired_states(tx, [n.uid for n in iter_all_networks(tx)])
        want = collections.Counter(row.ident for state in states.values() if state is not None
                                   for row in desired_rows(config.owner, state, context))
        return diff_ovn(want, actual_ids(backend)) if backend.connected else ["checker not connected"]
    start = time.monotonic()
    wait_until(problems, timeout, lambda found: f"{site}: OVN does not match the store: {len(found)} problem(s): "
               f"{found[:10]}", step=0.05, until=lambda found: not found)
    return time.monotonic() - start
