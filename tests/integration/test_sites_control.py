"""Two sites' control planes, for real: two OVN deployments (NB, SB,
ovn-northd each), two netpeerds linked by SiteService over gRPC, and the
cross-site rows each writes in its own NB. The transit switch and the
gateway group are what the operator (or ovn-ic) puts in each site's NB; the
packets over OVN-IC and WireGuard are in tests/sites."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import threading
import time
from pathlib import Path

import pytest

from netpeer import errors
from netpeer.config import SiteLink
from netpeer.ovn import names
from netpeer_dev.daemons import OvnDaemons
from tests.support import require_ovn, short_tmpdir, start_netpeerd, wait_until

SITES = ("east", "west")


def _site_setup(ovn: OvnDaemons, here: str, other: str) -> None:
    """What the operator (and ovn-ic, for the switch) leave in a site's NB."""
    ovn.nbctl("ls-add", names.transit_switch(here, other), "--", "set", "Logical_Switch",
              names.transit_switch(here, other), "other_config:interconn-ts=" + names.transit_switch(here, other))
    ovn.nbctl("ha-chassis-group-add", f"np-gw-{here}")


class IcKeys(threading.Thread):
    """Stands in for the one thing ovn-ic writes into a site's NB that
    netpeerd waits for: a key across sites (``options:requested-tnl-key``,
    unique in the region) on each of netpeer's ports on a transit switch.
    The router port and routes of an attachment wait for it
    (``netpeer.ovn.ic_rows``); tests/sites runs the real ovn-ic. ``held``
    keeps the keys back (ovn-ic slow or down) until it is cleared."""

    def __init__(self) -> None:
        super().__init__(name="ic-keys", daemon=True)
        self.daemons: dict[str, OvnDaemons] = {}
        self.stopped, self.held, self.given = threading.Event(), threading.Event(), 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopped.wait(0.1):
                if not self.held.is_set():
                    for ovn in self.daemons.values():
                        self._give(ovn)
        except BaseException as exc:   # told by stop(), not lost with the thread
            self.error = exc

    def _give(self, ovn: OvnDaemons) -> None:
        data = json.loads(ovn.nbctl("--format=json", "--columns=name,options,external_ids", "find",
                                    "Logical_Switch_Port", "type=router"))
        for name, options, tags in data["data"]:
            if dict(tags[1]).get(names.KIND) == "transit-port" and "requested-tnl-key" not in dict(options[1]):
                self.given += 1
                ovn.nbctl("set", "Logical_Switch_Port", name, f"options:requested-tnl-key={self.given}")

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)
        if self.error is not None:
            raise AssertionError(f"the stand-in for ovn-ic failed: {self.error}") from self.error

    def stop_all(self, netpeerds: dict, root: Path) -> None:
        """A fixture's teardown: this thread first (before the NBs it writes
        to go), then every netpeerd and every site's OVN, each by its pid,
        then ``root``; each step even when one before it failed."""
        try:
            if self.is_alive():
                self.stop()
        finally:
            try:
                for d in netpeerds.values():
                    d.stop()
            finally:
                try:
                    for ovn in self.daemons.values():
                        ovn.stop()
                finally:
                    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ic_keys():
    keys = IcKeys()
    yield keys
    if keys.is_alive():
        keys.stop()


@pytest.fixture
def sites(ic_keys):
    require_ovn()
    root = short_tmpdir("np-s-")
    secret = root / "east-west.secret"
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, secrets.token_urlsafe(32).encode())
    os.close(fd)
    daemons, netpeerds = ic_keys.daemons, {}
    try:
        for here in SITES:
            other = next(s for s in SITES if s != here)
            ovn = daemons[here] = OvnDaemons(root / here / "ovn")
            ovn.start()
            _site_setup(ovn, here, other)
        ic_keys.start()
        for here in SITES:
            other = next(s for s in SITES if s != here)
            netpeerds[here] = start_netpeerd(
                daemons[here], root / here, site=here, gateway_group=f"np-gw-{here}",
                site_listen=f"unix://{root / here / 'site.sock'}",
                sites=(SiteLink(other, f"unix://{root / other / 'site.sock'}", secret),))
        yield netpeerds
    finally:
        ic_keys.stop_all(netpeerds, root)


def wait_phase(client, ns, net, name, phase, timeout=10.0):
    seen = {}

    def reached():
        seen.update(client.get_peering(ns, net, name))
        return dict(seen) if seen["phase"] == phase else None
    return wait_until(reached, timeout,
                      lambda _: f"{ns}/{net}/{name} stayed {seen['phase']} ({seen['reason']}: {seen['message']})")


def rows(netpeerd, table: str) -> list[dict]:
    cols = {"Logical_Router_Port": "name,networks,external_ids",
            "Logical_Router_Static_Route": "ip_prefix,nexthop,output_port,external_ids",
            "Logical_Switch_Port": "name,options,external_ids", "Logical_Router_Policy": "priority,match,external_ids"}
    out = netpeerd.ovn.nbctl("--format=json", f"--columns={cols[table]}", "list", table)
    data = json.loads(out)
    return [dict(zip(data["headings"], r)) for r in data["data"]]


def bind(sites):
    east, west = sites["east"].client(), sites["west"].client()
    a = east.create_network("team-a", "net-a", ["10.1.0.0/24", "fd00:a::/64"])
    b = west.create_network("team-b", "net-b", ["10.2.0.0/24", "fd00:b::/64"])
    first = east.create_peering("team-a", "net-a", "to-b", "net-b", "team-b", remote_site="west")
    west.create_peering("team-b", "net-b", "to-a", "net-a", "team-a", remote_site="east")
    return east, west, a, b, first


def test_a_cross_site_pair_binds_over_the_link_and_each_nb_gets_its_side(sites):
    east, west, a, b, first = bind(sites)
    assert (first["phase"], first["remote_site"]) == ("Pending", "west")
    pa = wait_phase(east, "team-a", "net-a", "to-b", "Bound")
    pb = wait_phase(west, "team-b", "net-b", "to-a", "Bound")
    assert (pa["remote_uid"], pb["remote_uid"]) == (b["uid"], a["uid"])
    # The remote network represented locally, both ways.
    [peer] = east.get_network("team-a", "net-a")["peered_networks"]
    assert peer == {"namespace": "team-b", "name": "net-b", "uid": b["uid"], "site": "west",
                    "prefixes": ["10.2.0.0/24", "fd00:b::/64"]}
    assert west.get_network("team-b", "net-b")["peered_networks"][0]["site"] == "east"
    # Each NB: our transit port on the transit switch, routes to the other side's transit address. The router
    # port and routes follow the switch port's key across sites (ovn-ic's; IcKeys here), in the next sweep.
    for s, uid, other in (("east", a["uid"], "west"), ("west", b["uid"], "east")):
        port = names.transit_router_port(uid, other)
        wait_until(lambda: port in {r["name"] for r in rows(sites[s], "Logical_Router_Port")}, 10,
                   f"{s}: the transit router port never came after the key")
        sites[s].settle()
    ports = {s: {r["name"]: r for r in rows(sites[s], "Logical_Router_Port")} for s in SITES}
    a_port = ports["east"][names.transit_router_port(a["uid"], "west")]
    b_port = ports["west"][names.transit_router_port(b["uid"], "east")]
    b_v4 = next(str(ipaddress.ip_interface(x).ip) for x in b_port["networks"][1] if "." in x)
    a_v4 = next(str(ipaddress.ip_interface(x).ip) for x in a_port["networks"][1] if "." in x)
    routes = {s: {(r["ip_prefix"], r["nexthop"]) for r in rows(sites[s], "Logical_Router_Static_Route")}
              for s in SITES}
    assert ("10.2.0.0/24", b_v4) in routes["east"] and ("10.1.0.0/24", a_v4) in routes["west"]
    assert any(r["name"] == names.transit_switch_port("east", "west", a["uid"])
               for r in rows(sites["east"], "Logical_Switch_Port"))
    # A distributed gateway port on the site's gateway group; the router resolves neighbours on demand.
    ovn = sites["east"].ovn
    group = ovn.nbctl("get", "Logical_Router_Port", names.transit_router_port(a["uid"], "west"), "ha_chassis_group")
    assert group.strip() == ovn.nbctl("get", "HA_Chassis_Group", "np-gw-east", "_uuid").strip()
    assert ovn.nbctl("get", "Logical_Router", names.router(a["uid"]), "options:dynamic_neigh_routers").strip() \
        == '"true"'

    # Repair finds nothing to do on either side.
    for s in SITES:
        assert sites[s].service.repair().repaired_rows == 0


def test_a_pair_is_programmed_only_once_its_router_port_and_routes_are_in(sites, ic_keys):
    """Every chassis can apply a cross-site bind while its router port and
    routes still wait for ovn-ic's key: the pair shows Programming until
    they are in and applied, so a client that waits for Programmed (the
    providers' option) gets traffic when it is told."""
    ic_keys.held.set()
    east, west, a, b, first = bind(sites)
    wait_phase(east, "team-a", "net-a", "to-b", "Bound")
    port = names.transit_router_port(a["uid"], "west")
    sites["east"].settle()          # everything else the chassis acknowledged
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:   # not polling: it must stay so for a second
        assert east.get_peering("team-a", "net-a", "to-b")["dataplane"] == "Programming"
        assert port not in {r["name"] for r in rows(sites["east"], "Logical_Router_Port")}
        time.sleep(0.1)
    ic_keys.held.clear()
    wait_until(lambda: east.get_peering("team-a", "net-a", "to-b")["dataplane"] == "Programmed", 10,
               "the pair never showed Programmed after its rows went in")
    assert port in {r["name"] for r in rows(sites["east"], "Logical_Router_Port")}
    assert any(r["output_port"] == port for r in rows(sites["east"], "Logical_Router_Static_Route"))


def test_withdrawal_reaches_the_other_site_and_removes_its_rows(sites):
    east, west, a, b, _ = bind(sites)
    wait_phase(west, "team-b", "net-b", "to-a", "Bound")
    east.delete_peering("team-a", "net-a", "to-b")
    p = wait_phase(west, "team-b", "net-b", "to-a", "Pending")
    assert p["reason"] == "RemoteWithdrawn"
    sites["west"].settle()
    assert not [r for r in rows(sites["west"], "Logical_Router_Static_Route") if r["ip_prefix"] == "10.1.0.0/24"]
    # East's last half towards west is gone: its routes and allow policies went; its transit port stays
    # (re-created at once, OVN 23.03 keeps the old tunnel key) for attachment_grace, or until the network
    # is deleted.
    sites["east"].settle()
    port = names.transit_switch_port("east", "west", a["uid"])
    assert not [r for r in rows(sites["east"], "Logical_Router_Static_Route") if r["ip_prefix"] == "10.2.0.0/24"]
    assert [r for r in rows(sites["east"], "Logical_Switch_Port") if r["name"] == port]
    east.delete_network("team-a", "net-a")
    sites["east"].settle()
    assert not [r for r in rows(sites["east"], "Logical_Switch_Port") if r["name"] == port]


def test_status_shows_the_links_and_bad_input_names_the_field(sites):
    east = sites["east"].client()
    # east's first calls went out before west listened
    status = wait_until(lambda: (s := east.status())["sites"][0]["reachable"] and s, 20,
                        lambda _: f"west stayed unreachable: {east.status()['sites'][0]}")
    assert status["site"] == "east" and status["sites"][0]["site"] == "west"
    east.create_network("team-a", "net-a", ["10.1.0.0/24"])
    for site, words in (("north", "is not a site this netpeerd is linked to"), ("east", "is this site")):
        with pytest.raises(errors.InvalidArgument) as exc:
            east.create_peering("team-a", "net-a", "p", "net-b", "team-b", remote_site=site)
        assert exc.value.message.startswith("remote.site: ") and words in exc.value.message
    assert east.list_peerings("team-a", "net-a") == []


def test_slots_on_the_link_are_counted_per_namespace_shown_and_released_after_their_grace(sites):
    from datetime import timedelta
    from netpeer.cli.output import status_detail
    from netpeer.core.models import Quotas
    from netpeer.ovn.ic_rows import capacity
    d = sites["east"]
    d.service.quotas = d.service.sites.quotas = Quotas(site_attachments_per_namespace=2)
    d.service.reconciler.attachment_grace = timedelta(seconds=1)
    east = d.client()
    uids = [east.create_network("team-a", f"n{i}", [f"10.{i}.0.0/24"])["uid"] for i in range(3)]
    for i in range(2):
        east.create_peering("team-a", f"n{i}", "p", f"x{i}", "team-b", remote_site="west")
    with pytest.raises(errors.ResourceExhausted) as exc:
        east.create_peering("team-a", "n2", "p", "x2", "team-b", remote_site="west")
    assert "quotas.site_attachments_per_namespace = 2" in exc.value.message and "\n" not in exc.value.message
    [link] = east.status()["sites"]
    assert (link["capacity"], link["slots_used"], link["top_namespaces"]) == \
        (capacity(d.daemon.config.sites[0].transit_ipv4), 2, [{"namespace": "team-a", "slots": 2}])
    port = names.transit_switch_port("east", "west", uids[0])
    east.delete_peering("team-a", "n0", "p")
    d.service.sweep()
    assert east.status()["sites"][0]["slots_used"] == 2        # within its grace: kept, port and all
    assert [r for r in rows(d, "Logical_Switch_Port") if r["name"] == port]
    time.sleep(1.1)   # not polling: the slot's grace (1 s) passes on the real clock the sweep reads
    d.service.sweep()
    d.settle()
    status = east.status()
    assert status["sites"][0]["slots_used"] == 1
    assert not [r for r in rows(d, "Logical_Switch_Port") if r["name"] == port]
    assert f"    slots: 1 of {link['capacity']} used (most: team-a 1)" in status_detail(status).splitlines()
    time.sleep(d.service.sites.REATTACH_HOLD)   # not polling: the hold is on the real (monotonic) clock
    east.create_peering("team-a", "n2", "p", "x2", "team-b", remote_site="west")   # room again


def test_a_caller_without_the_links_secret_is_refused(sites, tmp_path):
    from netpeer.api.sites import SiteTransport
    from netpeer.core.sides import Delta, Digest, Sync
    listen = sites["west"].daemon.config.site_listen
    wrong = SiteTransport("east", {"west": listen}, {"west": "not-the-secret-" + "x" * 20})
    try:
        with pytest.raises(errors.Unauthenticated, match="secret"):
            # East called west before west listened: gRPC backs that connection off for a while, and a new
            # channel to the same address shares it (and its last error) until the backoff ends.
            wait_until(lambda: wrong("west", Sync("east", "west", Delta("s", 0, 0, Digest()))), 10,
                       "west's site link never answered", step=0.1,
                       until=lambda answer: not isinstance(answer, errors.Unavailable), ignore=(errors.Unavailable,))
    finally:
        wrong.close()


def test_config_refuses_bad_site_settings(tmp_path):
    from netpeer.config import Config
    base = ('listen = "unix:///tmp/x.sock"\nstore = "x.db"\novn_nb = "unix:/tmp/nb.sock"\n')
    cases = {
        'site = "East"\n': "site: 'East' is not a valid site name",
        'site = "east"\n': "sites",
        'site = "east"\n[interconnect]\nlisten = "unix:///tmp/s"\ngateway_group = "g"\n[sites.east]\n'
        'endpoint = "x"\nsecret_file = "s"\n': "sites.east: 'east' is this netpeerd's own site",
        'site = "east"\n[interconnect]\nlisten = "unix:///tmp/s"\ngateway_group = "g"\n[sites.west]\n'
        'endpoint = "x"\nsecret_file = "s"\ntransit_ipv4 = "10.0.0.0/16"\n': "sites.west.transit_ipv4",
        'site = "east"\n[interconnect]\nlisten = "unix:///tmp/s"\ngateway_group = "g"\novn_sb = "sb.sock"\n'
        '[sites.west]\nendpoint = "x"\nsecret_file = "s"\n': "interconnect.ovn_sb: 'sb.sock'",
    }
    for text, words in cases.items():
        path = tmp_path / "c.toml"
        path.write_text(base + text)
        with pytest.raises(errors.InvalidArgument) as exc:
            Config.load(path)
        assert words in exc.value.message and "\n" not in exc.value.message



def test_config_reads_the_sites_ovn_sb_back(tmp_path):
    from netpeer.config import Config
    path = tmp_path / "c.toml"
    path.write_text('listen = "unix:///tmp/x.sock"\nstore = "x.db"\novn_nb = "unix:/tmp/nb.sock"\nsite = "east"\n'
                    '[interconnect]\nlisten = "unix:///tmp/s"\ngateway_group = "g"\novn_sb = "unix:/tmp/sb.sock"\n'
                    '[sites.west]\nendpoint = "x"\nsecret_file = "s"\n')
    config = Config.load(path)
    assert config.ovn_sb == "unix:/tmp/sb.sock"
    assert Config.load(config.write(tmp_path / "again.toml")) == config




def test_the_site_link_refuses_bad_calls_in_one_line_and_reads_no_request_without_the_secret(sites, caplog):
    """A call without the link's secret is answered from its metadata, its
    request never parsed; one from a site that is not linked says so; a
    request that does not parse answers INVALID_ARGUMENT, never INTERNAL
    with a traceback."""
    import grpc
    listen = sites["west"].daemon.config.site_listen
    secret = sites["west"].daemon.config.sites[0].secret_file.read_text().strip()
    channel = grpc.insecure_channel(listen, options=[("grpc.max_send_message_length", 64 << 20)])
    call = channel.unary_unary("/netpeer.v1.SiteService/Sync", request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)

    def code_of(body: bytes, *metadata):
        deadline = time.monotonic() + 10
        while True:
            try:
                call(body, metadata=metadata, timeout=10)
                return grpc.StatusCode.OK, ""
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline:
                    time.sleep(0.1)   # east may hold a backed-off connection to the same socket
                    continue
                return exc.code(), exc.details()
    try:
        with caplog.at_level("DEBUG"):
            garbage = b"\xff" * (8 << 20)
            code, text = code_of(garbage, ("authorization", "Bearer nope-" + "x" * 30), ("x-netpeer-site", "east"))
            assert code == grpc.StatusCode.UNAUTHENTICATED and "secret" in text and "\n" not in text
            code, text = code_of(b"", ("authorization", f"Bearer {secret}"), ("x-netpeer-site", "north"))
            assert code == grpc.StatusCode.PERMISSION_DENIED and "'north' is not linked to site west" in text
            code, text = code_of(b"\x0a\x05\xff\xfe\xfd\xfc\xfb", ("authorization", f"Bearer {secret}"),
                                 ("x-netpeer-site", "east"))
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid netpeer.v1.SiteSync" in text, text
        assert "Traceback" not in caplog.text and "Exception deserializing" not in caplog.text
    finally:
        channel.close()


def test_a_request_from_west_is_in_easts_inbox_with_its_site_and_accepting_it_binds_the_pair(sites):
    """docs/inbox.md, requests from other sites: west's half naming east's
    network is listed by east's `netpeer peering requests` once the link has
    carried it; accepting it makes east's half naming west's network, and
    the pair binds over the link as any cross-site pair (the NB rows here;
    the packets over OVN-IC: tests/sites)."""
    from tests.integration.test_inbox import netpeer

    east, west = sites["east"], sites["west"]
    with east.client() as admin:
        db = admin.create_network("team-b", "db", ["10.2.0.0/24"])
    with west.client() as admin:
        web = admin.create_network("team-a", "web", ["10.1.0.0/24"])
    with west.tenant("team-a") as a:
        a.create_peering("team-a", "web", "to-db", "db", "team-b", remote_site="east")
    token = east.token("team-b")

    def listed():
        out = json.loads(netpeer(east, token, "peering", "requests", "-n", "team-b", "-o", "json").stdout)
        return out or None
    [r] = wait_until(listed, 20, "west's request never reached east's inbox")
    assert (r["requester_site"], r["requester_namespace"], r["requester_network"], r["network"], r["prefixes"]) == \
        ("west", "team-a", "web", "db", ["10.1.0.0/24"])
    assert r["requester_uid"] == web["uid"] and r["id"].startswith("west.")
    assert "west:team-a/web" in netpeer(east, token, "peering", "requests", "-n", "team-b").stdout
    # What Pulumi's getPeeringRequests and OpenTofu's data source read: the site to accept it with in code.
    from netpeer_provider import core
    from netpeer_provider.core import inbox
    from netpeer_provider.core.session import CLIENTS
    settings = core.Settings(east.endpoint, token)
    session = core.Session(settings)
    try:
        [coded] = inbox.list_requests(session, "team-b")["requests"]
    finally:
        CLIENTS.drop(settings, session.client())   # its channel, not kept for the process's life
    assert (coded["id"], coded["requester_site"], coded["requester_uid"]) == (r["id"], "west", web["uid"])
    accepted = json.loads(netpeer(east, token, "peering", "accept", "db", r["id"], "--name", "from-web",
                                  "-n", "team-b", "-o", "json").stdout)
    assert (accepted["remote_site"], accepted["remote_namespace"], accepted["remote_network"],
            accepted["remote_uid"]) == ("west", "team-a", "web", web["uid"])
    assert json.loads(netpeer(east, token, "peering", "requests", "-n", "team-b", "-o", "json").stdout) == []
    with east.client() as e, west.client() as w:
        wait_phase(e, "team-b", "db", "from-web", "Bound", timeout=20)
        p = wait_phase(w, "team-a", "web", "to-db", "Bound", timeout=20)
        assert p["remote_uid"] == db["uid"]
    # Each site's NB gets its side of the pair: the port on the transit switch.
    for s, uid, other in (("east", db["uid"], "west"), ("west", web["uid"], "east")):
        assert any(row["name"] == names.transit_switch_port(s, other, uid)
                   for row in rows(sites[s], "Logical_Switch_Port"))
