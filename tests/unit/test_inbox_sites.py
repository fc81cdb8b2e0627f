"""Requests from other sites (docs/inbox.md): a half at west naming a network
at east, carried by the site exchange, is a request in east's inbox. Two
services with their own stores, joined directly (the Link of
test_site_changes); the gRPC link carries the same messages
(tests/integration/test_inbox.py runs two real netpeerds)."""

from __future__ import annotations

import pytest

from netpeer import errors
from netpeer.core.models import Caller, Phase, Quotas
from netpeer.reasons import Reason as Why
from netpeer.service import Service, Settings
from netpeer.service.memory import MemoryDataplane
from tests.pgsupport import make_store
from tests.unit.test_site_changes import Link

ADMIN = Caller("admin", frozenset(), True)
EAST_B = Caller("b", frozenset({"team-b"}), False)
EAST_A = Caller("a", frozenset({"team-a"}), False)


class Stores(Link):
    """The Link of test_site_changes on either store."""

    def __init__(self, tmp_path, kind, cluster):
        self.kind, self.cluster = kind, cluster
        super().__init__(tmp_path)

    def open(self, name: str, store_path=None) -> Service:
        (self.tmp / name).mkdir(exist_ok=True)
        svc = Service(make_store(self.kind, self.tmp / name, self.cluster), MemoryDataplane(),
                      Settings(quotas=Quotas(networks_per_namespace=100, pending_peerings_per_namespace=100)))
        svc.link_sites(name, {o: 1000 for o in self.names if o != name}, transport=self._transport(name))
        svc.sites.prepare()
        return svc


@pytest.fixture(params=["sqlite", "postgresql"])
def link(request, tmp_path):
    cluster = request.getfixturevalue("pg_cluster") if request.param == "postgresql" else None
    f = Stores(tmp_path, request.param, cluster)
    f["east"].create_network(ADMIN, "team-b", "db", ["10.2.0.0/24"])
    f["west"].create_network(ADMIN, "team-a", "web", ["10.1.0.0/24"])
    yield f
    f.close()


def ask(link: Link) -> None:
    link["west"].create_peering(ADMIN, "team-a", "web", "to-db", "team-b", "db", remote_site="east",
                                description="please")


def inbox(link: Link, caller: Caller = EAST_B):
    return link["east"].list_peering_requests(caller, "team-b")


def request_events(link: Link, since: int) -> list[tuple[str, str]]:
    events, _ = link["east"].watch_events("team-b", None, since)
    return [(e.type, e.name) for e in events if e.kind == "peering_request"]


def test_a_half_at_west_naming_east_is_listed_at_east_with_its_site_after_the_exchange(link):
    ask(link)
    assert inbox(link) == []            # nothing crossed yet
    link.settle()
    [r] = inbox(link)
    assert (r.site, r.requester.namespace, r.requester.name, r.half.name) == ("west", "team-a", "web", "to-db")
    assert (r.target.namespace, r.target.name) == ("team-b", "db")
    assert r.prefixes == ("10.1.0.0/24",)
    assert r.id.startswith("west.team-a.web.to-db.")
    assert r.expires_at is None          # the exchange tells no TTL
    # Only the target's namespace sees it; west's own inbox holds nothing.
    with pytest.raises(errors.PermissionDenied):
        inbox(link, EAST_A)
    assert link["west"].list_peering_requests(ADMIN, "team-b") == []
    assert link["east"].list_peering_requests(EAST_B, "team-b", "db") == [r]


def test_accept_creates_the_half_naming_west_and_both_bind(link):
    ask(link)
    link.settle()
    [r] = inbox(link)
    made = link["east"].accept_peering_request(EAST_B, "team-b", "db", r.id, "from-web")
    assert (made.remote_site, made.remote_namespace, made.remote_network) == ("west", "team-a", "web")
    assert inbox(link) == []             # answered: gone at once
    link.settle()
    assert link["east"].get_peering(ADMIN, "team-b", "db", "from-web").phase == Phase.BOUND
    assert link["west"].get_peering(ADMIN, "team-a", "web", "to-db").phase == Phase.BOUND
    with pytest.raises(errors.AlreadyExists):
        link["east"].accept_peering_request(EAST_B, "team-b", "db", r.id, "again")


def test_dismissed_is_not_listed_again_and_west_sees_no_difference(link):
    ask(link)
    link.settle()
    [r] = inbox(link)
    before = link["west"].get_peering(ADMIN, "team-a", "web", "to-db")
    sent = len(link.sent)
    link["east"].dismiss_peering_request(EAST_B, "team-b", "db", r.id)
    link["east"].dismiss_peering_request(EAST_B, "team-b", "db", r.id)   # twice is no error
    assert inbox(link) == []
    link.settle()
    assert inbox(link) == []
    after = link["west"].get_peering(ADMIN, "team-a", "web", "to-db")
    assert (after.phase, after.reason, after.message, after.last_phase_transition_time) == \
        (before.phase, before.reason, before.message, before.last_phase_transition_time)
    # Nothing about the dismissal crossed: what east told west holds no new item.
    assert sum(len(m.delta.items) for m in link.sent[sent:] if m.site == "east") == 0


def test_a_withdrawn_request_goes_at_the_next_exchange_and_accepting_it_is_refused(link):
    ask(link)
    link.settle()
    [r] = inbox(link)
    link["west"].delete_peering(ADMIN, "team-a", "web", "to-db")
    link.settle()
    assert inbox(link) == []
    with pytest.raises(errors.NotFound) as err:
        link["east"].accept_peering_request(EAST_B, "team-b", "db", r.id, "from-web")
    assert err.value.reason == Why.REQUEST_WITHDRAWN


def test_watch_shows_a_remote_request_come_and_go_at_the_next_exchange(link):
    head = link["east"].watch_head("team-b")
    ask(link)
    link.settle()
    [r] = inbox(link)
    assert [t for t, _ in request_events(link, head)] == ["Created"]
    events, _ = link["east"].watch_events("team-b", None, head)
    [created] = [e for e in events if e.kind == "peering_request"]
    assert created.obj == r and created.obj.site == "west"
    head = link["east"].watch_head("team-b")
    link.settle()                         # nothing new: no event
    assert request_events(link, head) == []
    link["west"].delete_peering(ADMIN, "team-a", "web", "to-db")
    link.settle()
    assert [t for t, _ in request_events(link, head)] == ["Deleted"]


def test_accepting_or_dismissing_sends_one_deleted_event_and_withdrawing_the_answer_brings_it_back(link):
    ask(link)
    link.settle()
    [r] = inbox(link)
    head = link["east"].watch_head("team-b")
    link["east"].accept_peering_request(EAST_B, "team-b", "db", r.id, "from-web")
    link.settle()
    assert [t for t, _ in request_events(link, head)] == ["Deleted"]
    head = link["east"].watch_head("team-b")
    link["east"].delete_peering(ADMIN, "team-b", "db", "from-web")
    link.settle()                         # west's half is Pending again: a request again
    assert [t for t, _ in request_events(link, head)] == ["Created"]
    [again] = inbox(link)
    assert again.id == r.id
    head = link["east"].watch_head("team-b")
    link["east"].dismiss_peering_request(EAST_B, "team-b", "db", r.id)
    link.settle()
    assert [t for t, _ in request_events(link, head)] == ["Deleted"]


def test_a_full_copy_sends_events_only_for_requests_that_came_or_went(link):
    from netpeer.service import sitelog
    ask(link)
    link["west"].create_network(ADMIN, "team-a", "api", ["10.1.1.0/24"])
    link["west"].create_peering(ADMIN, "team-a", "api", "to-db", "team-b", "db", remote_site="east")
    link.settle()
    stay = next(r for r in inbox(link) if r.requester.name == "api")
    head = link["east"].watch_head("team-b")
    # Between exchanges west withdraws one request and makes another; east takes it in as a full copy.
    link["west"].delete_peering(ADMIN, "team-a", "web", "to-db")
    link["west"].create_peering(ADMIN, "team-a", "web", "again", "team-b", "db", remote_site="east")
    with link["west"].store.read() as tx:
        msg = sitelog.message(tx, "west", "east", full=True)
    link["east"].sites.receive(msg)
    assert sorted((r.requester.name, r.half.name) for r in inbox(link)) == [("api", "to-db"), ("web", "again")]
    events, _ = link["east"].watch_events("team-b", None, head)
    assert sorted((e.type, e.name.rsplit("/", 1)[-1].split(".")[3]) for e in events
                  if e.kind == "peering_request") == [("Created", "again"), ("Deleted", "to-db")]
    assert stay.id in {r.id for r in inbox(link)}


def test_pages_run_through_requests_of_this_site_and_of_another(link):
    link["east"].create_network(ADMIN, "team-c", "app", ["10.3.0.0/24"])
    link["east"].create_peering(ADMIN, "team-c", "app", "to-db", "team-b", "db")
    ask(link)
    link.settle()
    whole = inbox(link)
    assert [r.site for r in whole] == ["", "west"]
    first = link["east"].list_peering_requests(EAST_B, "team-b", limit=1)
    from netpeer.service.inbox import encode_after
    second = link["east"].list_peering_requests(EAST_B, "team-b", after=encode_after(first[0]), limit=1)
    third = link["east"].list_peering_requests(EAST_B, "team-b", after=encode_after(second[0]), limit=1)
    assert first + second == whole and third == []


def test_the_cli_and_the_console_show_the_requesters_site(link):
    from netpeer.api.client import request_json
    from netpeer.api.convert import request_to_pb
    from netpeer.cli.output import requests_table
    from netpeer.console.pages import _request_row
    ask(link)
    link.settle()
    [r] = inbox(link)
    shown = request_json(request_to_pb(r))
    assert (shown["requester_site"], shown["expires_at"]) == ("west", None)
    assert "west:team-a/web" in requests_table([shown])
    row = _request_row("team-b", shown, "token")
    assert "west:team-a/web (to-db)" in row and "None" not in row


def test_requests_from_a_retired_site_go_with_its_mirror(link):
    ask(link)
    link.settle()
    [r] = inbox(link)
    head = link["east"].watch_head("team-b")
    assert link["east"].sites.reconfigure({}) == ([], ["west"])
    assert inbox(link) == []
    assert [t for t, _ in request_events(link, head)] == ["Deleted"]
