"""A site that runs its netpeerd as replicas: east is two real netpeerd
processes on one PostgreSQL database (and one NB), west one process on
SQLite. West reaches east's replicas at two addresses. Only the replica that
holds the sweeper lease runs east's links; every replica answers west and
decides consent from the link state the leader records in the store. When
the leader is killed (SIGKILL), the survivor takes the lease and the links:
a new cross-site pair binds within the lease plus an exchange."""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from datetime import timedelta

from netpeer.api.client import Client
from netpeer.config import SiteLink
from netpeer.ovn import names
from netpeer_dev.daemons import OvnDaemons
from netpeer_dev.process import NetpeerdProcess
from tests.ha.test_leader import leaders, wait_for
from tests.support import ADMIN_TOKEN, netpeerd_config, require_ovn, short_tmpdir
from tests.trust import report

LEASE = 2.0


def _nb(root, here: str, other: str) -> OvnDaemons:
    ovn = OvnDaemons(root / here / "ovn")
    ovn.start()
    ts = names.transit_switch(here, other)
    ovn.nbctl("ls-add", ts, "--", "set", "Logical_Switch", ts, "other_config:interconn-ts=" + ts)
    ovn.nbctl("ha-chassis-group-add", f"np-gw-{here}")
    return ovn


def wait_bound(clients, what: str, timeout: float) -> float:
    """Every (client, ns, network, peering) Bound; the seconds it took."""
    def bound():
        return all(c.get_peering(ns, net, name)["phase"] == "Bound" for c, ns, net, name in clients)
    return wait_for(what, bound, timeout, step=0.05)


def test_a_site_on_replicas_keeps_its_links_through_the_leaders_death(pg_url):
    require_ovn()
    root = short_tmpdir("np-sr-")
    secret = root / "east-west.secret"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, secrets.token_urlsafe(32).encode())
    os.close(fd)
    nbs, procs = [], []
    try:
        east_nb, west_nb = _nb(root, "east", "west"), _nb(root, "west", "east")
        nbs += [east_nb, west_nb]
        east_links = [f"unix://{root / f'east-r{i}' / 'site.sock'}" for i in (1, 2)]
        west_link = f"unix://{root / 'west' / 'site.sock'}"
        for i in (1, 2):
            d = root / f"east-r{i}"
            config = dataclasses.replace(
                netpeerd_config(d, east_nb.nb_remote, sweep_interval="1s", site="east", gateway_group="np-gw-east",
                                site_listen=east_links[i - 1], sites=(SiteLink("west", west_link, secret),),
                                leader_lease=timedelta(seconds=LEASE)), store=pg_url)
            procs.append(NetpeerdProcess(config, d, ADMIN_TOKEN))
        east = procs[:2]
        for p in east:
            p.start()
        wait_for("one east leader", lambda: len(leaders(east)) == 1, 15)
        lead = leaders(east)[0]
        other = 1 - lead
        # West calls the leader first: the other replica hears nothing from west while the leader lives, so
        # its consent can only know the link from what the leader records in the store.
        west_config = netpeerd_config(root / "west", west_nb.nb_remote, sweep_interval="1s", site="west",
                                      gateway_group="np-gw-west", site_listen=west_link,
                                      sites=(SiteLink("east", f"{east_links[lead]},{east_links[other]}", secret),))
        west = NetpeerdProcess(west_config, root / "west", ADMIN_TOKEN)
        procs.append(west)
        west.start()
        with Client(east[other].endpoint, ADMIN_TOKEN) as follower, Client(west.endpoint, ADMIN_TOKEN) as w:
            # Consent through the replica that does not run the links.
            follower.create_network("team-a", "net-1", ["10.1.1.0/24"])
            w.create_network("team-b", "net-1", ["10.2.1.0/24"])
            wait_for("the link recorded", lambda: follower.status()["sites"][0]["reachable"], 10)
            first = follower.create_peering("team-a", "net-1", "p", "net-1", "team-b", remote_site="west")
            # Its answer knows the link answers: the leader's record, not this replica's own (it made no exchange).
            assert (first["phase"], first["reason"]) == ("Pending", "AwaitingRemote"), first
            w.create_peering("team-b", "net-1", "p", "net-1", "team-a", remote_site="east")
            wait_bound([(follower, "team-a", "net-1", "p"), (w, "team-b", "net-1", "p")], "first pair", 20)
            status = follower.status()
            [link] = status["sites"]
            # What the leader records, read from the store by a replica that neither sweeps nor runs links.
            assert link["reachable"] and not status["leading"]
            assert status["sweeps"] > 0 and status["last_sweep"] is not None

            east[lead].kill9()
            killed = time.monotonic()
            follower.create_network("team-a", "net-2", ["10.1.2.0/24"])
            w.create_network("team-b", "net-2", ["10.2.2.0/24"])
            follower.create_peering("team-a", "net-2", "p", "net-2", "team-b", remote_site="west")
            w.create_peering("team-b", "net-2", "p", "net-2", "team-a", remote_site="east")
            wait_bound([(follower, "team-a", "net-2", "p"), (w, "team-b", "net-2", "p")], "pair after the kill", 30)
            took = time.monotonic() - killed
            # West reached the survivor at its second address meanwhile; the survivor takes the lease and links.
            wait_for("the survivor to lead", lambda: follower.status()["leading"], LEASE + 8)
            assert follower.get_peering("team-a", "net-1", "p")["phase"] == "Bound"
            report.record("sites on replicas", "leader killed -> new cross-site pair Bound on both sides (s)",
                          round(took, 2))
            print(f"[sites-replicas] {{'lease_s': {LEASE}, 'kill_to_bound_s': {took:.2f}}}")
            # Within the lease, the new leader's first exchange and a bind (generous for a loaded machine).
            assert took < LEASE + 8.0, took
        for p in procs:
            p.assert_no_internal_errors()
    finally:
        for p in procs:
            p.stop()
        for ovn in nbs:
            ovn.stop()
        shutil.rmtree(root, ignore_errors=True)
