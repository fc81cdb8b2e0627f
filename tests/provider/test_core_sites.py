"""A peering half that names another site's network (``remote_site``), through
the provider core: checks and diffs on their own, then two netpeerd services
(sites east and west, each with its gRPC server, exchanging directly as
tests/unit/test_sites.py joins them) on the in-memory dataplane."""

from __future__ import annotations

import shutil

import pytest

from netpeer_provider.core import network, peering, schema
from netpeer_provider.core.values import UNKNOWN
from tests.provider.test_core_api import Api, Server
from tests.support import short_tmpdir

TO_WEST = {"network": "net-e", "name": "to-w", "remote_namespace": "team-w", "remote_network": "net-w",
           "remote_site": "west", "description": "", "ttl": "7d", "wait_for_bound": 0}


# -- on its own -----------------------------------------------------------------------------------

def test_remote_site_is_an_optional_replacing_input_in_every_face_schema():
    f = schema.NETWORK_PEERING.field("remote_site")
    assert (f.role, f.replaces, f.default) == (schema.Role.OPTIONAL, True, "")
    assert schema.NETWORK_PEERING.field("remote_site", output=True)
    assert "remote_site" in [x.name for x in schema.INLINE_PEERING.fields]
    assert "remote_site" in [x.name for x in schema.PEERING_STATUS.fields]


@pytest.mark.parametrize("site, message", [
    ("West", "remote_site: 'West' is not a valid site name: use 1-10 lower-case ASCII letters and digits, "
             "starting with a letter"),
    ("elevenchars", "remote_site: 'elevenchars' is not a valid site name: use 1-10 lower-case ASCII letters "
                    "and digits, starting with a letter"),
    ("1st", "remote_site: '1st' is not a valid site name: use 1-10 lower-case ASCII letters and digits, "
            "starting with a letter"),
])
def test_a_bad_remote_site_is_one_line_naming_field_and_value(site, message):
    _, failures = peering.check({**TO_WEST, "remote_site": site})
    assert [(f.path, f.message) for f in failures] == [("remote_site", message)]
    _, failures = network.check({"name": "net-e", "subnets": ["10.1.0.0/24"],
                                 "peerings": [{"name": "to-w", "remote_network": "net-w", "remote_site": site}]})
    assert [(f.path, f.message) for f in failures] == [("peerings[0].remote_site", "peerings[0]." + message)]


def test_good_empty_and_unknown_sites_pass():
    for site in ("west", "w1", "", None, UNKNOWN):
        assert peering.check({**TO_WEST, "remote_site": site})[1] == []


def test_the_same_names_in_another_site_are_not_a_self_peering():
    same = {"namespace": "a", "network": "n", "name": "p", "remote_network": "n"}
    assert [f.path for f in peering.check(same)[1]] == ["remote_network"]
    assert peering.check({**same, "remote_site": "west"})[1] == []


OLD = {"namespace": "a", "network": "n", "name": "p", "remote_namespace": "b", "remote_network": "m",
       "remote_site": "", "remote_uid": None, "pinned_remote_uid": None, "ttl": "7d", "description": "",
       "wait_for_bound": 0}
NEW = {"network": "n", "name": "p", "remote_network": "m", "remote_namespace": "b"}


@pytest.mark.parametrize("olds, change, replaces", [
    (OLD, {}, ()),
    (OLD, {"remote_site": ""}, ()),
    ({k: v for k, v in OLD.items() if k != "remote_site"}, {"remote_site": ""}, ()),  # a state from before
    (OLD, {"remote_site": "west"}, ("remote_site",)),
    ({**OLD, "remote_site": "west"}, {"remote_site": "west"}, ()),
    ({**OLD, "remote_site": "west"}, {}, ("remote_site",)),                            # back to this site
    (OLD, {"remote_site": UNKNOWN}, ("remote_site",)),
])
def test_changing_the_remote_site_replaces_the_half(olds, change, replaces):
    d = peering.diff(olds, {**NEW, **change})
    assert (d.replaces, d.updates) == (replaces, ())


def test_changing_an_inline_peerings_site_updates_the_network():
    olds = {"namespace": "a", "name": "n", "uid": "u", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
            "inline_peerings": [{"name": "p", "remote_network": "m"}]}
    news = {"name": "n", "subnets": ["10.1.0.0/24"], "routes": [], "description": "",
            "peerings": [{"name": "p", "remote_network": "m", "remote_site": "west"}]}
    d = network.diff(olds, news)
    assert (d.replaces, d.updates) == ((), ("peerings",))
    assert network.diff(olds, {**news, "peerings": [{"name": "p", "remote_network": "m", "remote_site": ""}]}) \
        .changes is False


# -- two sites ------------------------------------------------------------------------------------

class Sites:
    """Sites east and west: a netpeerd service and gRPC server each, linked directly."""

    def __init__(self):
        self.dirs = {name: short_tmpdir() for name in ("east", "west")}
        self.servers = {name: Server(d) for name, d in self.dirs.items()}
        for name, s in self.servers.items():
            other = "west" if name == "east" else "east"
            s.service.link_sites(name, {other: 1000}, transport=lambda site, view: self.servers[site].service.sites
                                 .receive(view))

    def api(self, name: str) -> Api:
        return Api(self.servers[name].endpoint)

    def settle(self, rounds: int = 6) -> None:
        """Runs the exchanges the link threads of netpeerd run."""
        for _ in range(rounds):
            for name, s in self.servers.items():
                for other in s.service.sites.capacity:
                    s.service.sites.exchange(other)

    def close(self):
        for name, s in self.servers.items():
            s.stop()
            s.store.close()
            shutil.rmtree(self.dirs[name], ignore_errors=True)


@pytest.fixture
def sites():
    s = Sites()
    try:
        yield s
    finally:
        s.close()


def test_a_half_naming_another_sites_network_binds_across_sites(sites):
    east, west = sites.api("east").session("team-e"), sites.api("west").session("team-w")
    network.create(east, {"name": "net-e", "subnets": ["10.1.0.0/24"], "routes": [], "description": ""})
    assert peering.preview(east, TO_WEST).outputs["remote_site"] == "west"
    half = peering.create(east, TO_WEST)
    assert (half.outputs["remote_site"], half.outputs["phase"]) == ("west", "Pending")
    assert peering.diff(half.outputs, peering.check(TO_WEST)[0]).changes is False

    # The other half declared inline on west's network.
    net_w = network.create(west, {"name": "net-w", "subnets": ["10.2.0.0/24"], "routes": [], "description": "",
                                  "peerings": [{"name": "to-e", "remote_namespace": "team-e",
                                                "remote_network": "net-e", "remote_site": "east"}]})
    assert [(p["name"], p["remote_site"]) for p in net_w.outputs["peerings"]] == [("to-e", "east")]
    sites.settle()

    now = peering.read(east, half.id, half.outputs)
    assert (now.outputs["phase"], now.outputs["remote_site"], now.inputs["remote_site"]) == ("Bound", "west", "west")
    assert peering.diff(now.outputs, peering.check(TO_WEST)[0]).changes is False
    w = network.read(west, net_w.id, net_w.outputs)
    assert w.inputs["peerings"] == [{"name": "to-e", "remote_network": "net-e", "remote_namespace": "team-e",
                                     "remote_site": "east", "ttl": "7d"}]
    assert [(p["namespace"], p["name"], p["site"], p["prefixes"]) for p in w.outputs["peered_networks"]] == \
        [("team-e", "net-e", "east", ["10.1.0.0/24"])]
    assert network.diff(w.outputs, network.check(w.inputs)[0]).changes is False

    # An imported half reads its site: no diff after it.
    imported = peering.import_(east, half.id)
    assert imported.inputs["remote_site"] == "west"
    assert peering.diff(imported.outputs, peering.check(imported.inputs)[0]).changes is False


def test_a_site_the_service_does_not_know_fails_the_preview_with_its_line(sites):
    east = sites.api("east").session("team-e")
    network.create(east, {"name": "net-e", "subnets": ["10.1.0.0/24"], "routes": [], "description": ""})
    with pytest.raises(Exception) as info:
        peering.preview(east, {**TO_WEST, "remote_site": "north"})
    assert "remote.site" in str(info.value) and "'north'" in str(info.value), str(info.value)
    assert "\n" not in str(info.value)
