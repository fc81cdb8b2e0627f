"""Watch: every change a tenant may see, as it happens, resumable from a
revision without loss or repeat (also across a kill -9 of netpeerd), and
nothing a Get would not show. Real netpeerd on real OVN."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import grpc
import pytest

from netpeer import errors
from netpeer.api.client import Client
from netpeer.v1 import netpeer_pb2 as pb
from netpeer.v1 import netpeer_pb2_grpc as pb_grpc
from tests.support import ADMIN_TOKEN, netpeerd_process, wait_until


class Watcher:
    """Collects a watch's events in a thread."""

    def __init__(self, client: Client, namespace: str, network: str | None = None, since: int | None = None,
                 resume: bool = False):
        self.events: queue.Queue = queue.Queue()
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(client, namespace, network, since, resume),
                                       daemon=True)
        self.thread.start()

    def _run(self, client, namespace, network, since, resume):
        try:
            for event in client.watch(namespace, network, since, resume=resume):
                self.events.put(event)
        except Exception as exc:   # the test looks at it
            self.error = exc

    def until(self, predicate, timeout: float = 15.0) -> list[dict]:
        """Events up to and including the first that satisfies ``predicate``."""
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            out.append(event)
            if predicate(event):
                return out
        raise AssertionError(f"no such event within {timeout}s; got {[(e['type'], e.get('name')) for e in out]}")


def is_(type_, name=None, **fields):
    return lambda e: e["type"] == type_ and (name is None or e.get("name") == name) and all(
        e.get(k) == v for k, v in fields.items())


def test_a_peerings_life_as_a_watcher_sees_it(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    watch_a = Watcher(a, "team-a")
    bookmark = watch_a.until(is_("Bookmark"))[0]
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    b.create_network("team-b", "net-b", ["10.2.0.0/24"])
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")
    got = watch_a.until(is_("Programmed", "to-b"))
    seen = [(e["type"], e["kind"], e["name"], e.get("phase"), e.get("dataplane")) for e in got]
    assert seen[0] == ("Created", "network", "net-a", None, None)
    assert ("Created", "peering", "to-b", "Pending", "Programmed") in seen
    assert ("PhaseChanged", "peering", "to-b", "Bound", "Programming") in seen
    assert seen[-1] == ("Programmed", "peering", "to-b", "Bound", "Programmed")
    # Nothing of team-b's namespace reaches team-a's watch.
    assert all(e["namespace"] == "team-a" for e in got)
    b.delete_peering("team-b", "net-b", "to-a")
    withdrawn = watch_a.until(is_("PhaseChanged", "to-b"))[-1]
    assert (withdrawn["phase"], withdrawn["reason"]) == ("Pending", "RemoteWithdrawn")
    assert "no longer consents" in withdrawn["message"]
    a.delete_peering("team-a", "net-a", "to-b")
    assert watch_a.until(is_("Deleted", "to-b"))[-1]["kind"] == "peering"
    revisions = [e["revision"] for e in got]
    assert revisions == sorted(set(revisions)) and revisions[0] > bookmark["revision"]

    # A second watcher from the bookmark sees the same events, in the same order.
    replay = Watcher(a, "team-a", since=bookmark["revision"])
    again = replay.until(is_("Deleted", "to-b"))
    assert [e["revision"] for e in again[:len(got)]] == revisions
    # One network only, from the same point: only its own events.
    only = Watcher(a, "team-a", network="net-a", since=bookmark["revision"]).until(is_("Deleted", "to-b"))
    assert {e["network"] for e in only} == {"net-a"}


def test_watch_refuses_what_it_must(netpeerd):
    a = netpeerd.tenant("team-a")
    with pytest.raises(errors.PermissionDenied):
        next(a.watch("team-b", resume=False))
    with pytest.raises(errors.InvalidArgument, match="since_revision"):
        next(a.watch("team-a", since=10**9, resume=False))
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    a.create_network("team-a", "net-b", ["10.2.0.0/24"])
    with netpeerd.store.write() as tx:   # what the sweep does with old events
        tx.prune_events(netpeerd.service.clock(), keep=0)
    with pytest.raises(errors.NetpeerError, match="older than the oldest change kept.*list the resources again"):
        next(a.watch("team-a", since=0, resume=False))   # revisions 1 and 2 are gone


def test_a_revoked_token_ends_its_watch(netpeerd):
    with netpeerd.client() as admin:
        minted = admin.create_token(["team-a"])
        tenant = Client(netpeerd.endpoint, minted["token"])
        watcher = Watcher(tenant, "team-a")
        watcher.until(is_("Bookmark"))
        admin.revoke_token(minted["token_id"])
        watcher.thread.join(10)
        assert not watcher.thread.is_alive() and isinstance(watcher.error, errors.Unauthenticated)
        tenant.close()


def test_resume_across_kill9_loses_and_repeats_nothing(ovn, state_dir):
    daemon = netpeerd_process(state_dir, ovn.nb_remote, sweep_interval="30s")
    try:
        daemon.start(sweep=True)
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            start = next(admin.watch("t", resume=False))["revision"]
            for i in range(5):
                admin.create_network("t", f"n{i}", [f"10.{i}.0.0/24"])
        # A watcher that saw up to n2, then lost netpeerd.
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            seen = []
            for e in admin.watch("t", since=start, resume=False):
                seen.append(e)
                if e["name"] == "n2":
                    break
        daemon.kill9()
        daemon.start(sweep=True)
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            admin.create_network("t", "n5", ["10.5.0.0/24"])
            rest = []
            for e in admin.watch("t", since=seen[-1]["revision"], resume=False):
                rest.append(e)
                if e["name"] == "n5":
                    break
        names = [e["name"] for e in seen + rest]
        assert names == [f"n{i}" for i in range(6)], names
    finally:
        daemon.stop()


def test_cli_watch_prints_json_lines(netpeerd, state_dir):
    token = netpeerd.token("team-a")
    env = {"PATH": "/usr/bin:/bin", "NETPEER_ENDPOINT": netpeerd.endpoint, "NETPEER_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "netpeer.cli.main", "peering", "watch", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "Bookmark"
        with netpeerd.tenant("team-a") as a:
            a.create_network("team-a", "net-a", ["10.1.0.0/24"])
            a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
        line = json.loads(proc.stdout.readline())
        assert {"type", "name", "phase", "revision"} <= set(line)
        assert (line["type"], line["name"], line["phase"]) == ("Created", "to-b", "Pending")
    finally:
        proc.terminate()
        proc.wait(10)


def _list_revisions(endpoint: str, token: str, namespace: str, network: str) -> tuple[int, int]:
    """The revisions ListNetworks and ListPeerings answer."""
    with grpc.insecure_channel(endpoint) as ch:
        stub, md = pb_grpc.NetworkServiceStub(ch), (("authorization", f"Bearer {token}"),)
        networks = stub.ListNetworks(pb.ListNetworksRequest(parent=f"namespaces/{namespace}"), metadata=md, timeout=10)
        peerings = stub.ListPeerings(pb.ListPeeringsRequest(parent=f"namespaces/{namespace}/networks/{network}"),
                                     metadata=md, timeout=10)
    return networks.revision, peerings.revision


def test_revisions_count_only_the_namespaces_own_changes(netpeerd):
    """Another tenant's writes move nothing a tenant sees: its lists' revision
    stays, and its own events are numbered one after the other. A watch from
    a list's revision gets exactly what followed the list."""
    token_a = netpeerd.token("team-a")
    a, b = Client(netpeerd.endpoint, token_a), netpeerd.tenant("team-b")
    a.create_network("team-a", "net-a", ["10.1.0.0/24"])
    listed = _list_revisions(netpeerd.endpoint, token_a, "team-a", "net-a")
    assert listed[0] == listed[1] == 1
    for i in range(6):
        b.create_network("team-b", f"n{i}", [f"10.{20 + i}.0.0/24"])
    assert _list_revisions(netpeerd.endpoint, token_a, "team-a", "net-a") == listed

    watch = Watcher(a, "team-a", since=listed[0])
    a.update_network("team-a", "net-a", description="one")
    b.create_network("team-b", "n6", ["10.26.0.0/24"])
    a.create_peering("team-a", "net-a", "to-b", "n6", "team-b")
    b.update_network("team-b", "n6", description="two")
    got = watch.until(is_("Created", "to-b"))
    assert [(e["revision"], e["type"], e["name"]) for e in got] == [
        (listed[0] + 1, "Updated", "net-a"), (listed[0] + 2, "Created", "to-b")]
    assert _list_revisions(netpeerd.endpoint, token_a, "team-a", "net-a") == (listed[0] + 2,) * 2
    # B's own revisions count B's changes only, too: seven networks, one update, and A's half naming n6,
    # which is a request to B (docs/inbox.md).
    assert next(b.watch("team-b", resume=False))["revision"] == 9
    a.close()


def _watch_opener(endpoint: str, calls: list):
    """Opens a watch of team-a with a token; its first event (the bookmark)."""
    channel = grpc.insecure_channel(endpoint)
    stub = pb_grpc.NetworkServiceStub(channel)

    def open_watch(token: str):
        call = stub.Watch(pb.WatchRequest(parent="namespaces/team-a"),
                          metadata=(("authorization", f"Bearer {token}"),), timeout=120)
        calls.append(call)
        return next(call)
    return channel, open_watch


def _refused(open_watch, token: str) -> str:
    with pytest.raises(grpc.RpcError) as err:
        open_watch(token)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
    return err.value.details()


def test_a_tokens_watch_streams_are_capped(ovn, state_dir):
    """A token holds at most 100 watch streams (watch.streams_per_token);
    the next answers RESOURCE_EXHAUSTED in one line naming the limit, another
    token is not held back, and a stream that ends frees its place. Every
    Watch is counted in netpeer_rpc_requests_total when it ends."""
    from tests.integration.test_observe import free_port, scrape
    port = free_port()
    daemon = netpeerd_process(state_dir, ovn.nb_remote, metrics_listen=f"127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}/metrics"
    calls: list = []
    try:
        daemon.start(sweep=True)
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            one, two = (admin.create_token(["team-a"])["token"] for _ in range(2))
        channel, open_watch = _watch_opener(daemon.endpoint, calls)
        for _ in range(100):
            assert open_watch(one).type == pb.WatchEvent.BOOKMARK
        message = _refused(open_watch, one)
        assert "watch.streams_per_token = 100" in message and "\n" not in message, message
        assert open_watch(two).type == pb.WatchEvent.BOOKMARK
        assert scrape(url)["netpeer_watchers"] == 101
        calls[0].cancel()                     # one of the first token's ends: its place is free again
        wait_until(lambda: scrape(url)["netpeer_watchers"] == 100, 10, "an ended watch kept its place", step=0.05)
        assert open_watch(one).type == pb.WatchEvent.BOOKMARK
        metrics = scrape(url)
        assert metrics['netpeer_rpc_requests_total{code="RESOURCE_EXHAUSTED",method="Watch"}'] == 1
        assert metrics['netpeer_rpc_requests_total{code="CANCELLED",method="Watch"}'] == 1
        for call in calls:
            call.cancel()
        channel.close()
    finally:
        daemon.stop()


def test_watch_streams_are_capped_in_total(ovn, state_dir):
    """netpeerd holds at most watch.streams_total streams, whoever asks."""
    from netpeer.core.models import WatchLimits
    daemon = netpeerd_process(state_dir, ovn.nb_remote, watch=WatchLimits(streams_per_token=3, streams_total=5))
    calls: list = []
    try:
        daemon.start(sweep=True)
        with Client(daemon.endpoint, ADMIN_TOKEN) as admin:
            one, two = (admin.create_token(["team-a"])["token"] for _ in range(2))
        channel, open_watch = _watch_opener(daemon.endpoint, calls)
        for _ in range(3):
            open_watch(one)
        assert "watch.streams_per_token = 3" in _refused(open_watch, one)
        for _ in range(2):
            open_watch(two)
        message = _refused(open_watch, two)
        assert "watch.streams_total = 5" in message and "\n" not in message, message
        for call in calls:
            call.cancel()
        channel.close()
    finally:
        daemon.stop()


def test_a_slow_watcher_holds_no_one_up_and_misses_nothing(netpeerd):
    """A watcher that stops reading while 2,000 changes come (more than
    netpeerd keeps for watchers that have not sent them: it must catch up
    from the store) neither delays another watcher nor misses or repeats
    anything once it reads again: its revisions follow one another."""
    token = netpeerd.token("team-a")
    a = Client(netpeerd.endpoint, token)
    for n in range(4):
        a.create_network("team-a", f"net-{n}", [f"10.{n}.0.0/24"])
    # Without BDP probing, the connection's window stays small: netpeerd's
    # sends to it stop after a few hundred events.
    slow_channel = grpc.insecure_channel(netpeerd.endpoint, options=[("grpc.http2.bdp_probe", 0)])
    slow = pb_grpc.NetworkServiceStub(slow_channel).Watch(
        pb.WatchRequest(parent="namespaces/team-a"), metadata=(("authorization", f"Bearer {token}"),), timeout=60)
    start = next(slow).revision
    fast = Watcher(a, "team-a", since=start)
    t0 = time.monotonic()
    for half in range(2):
        a.create_peerings([{"namespace": "team-a", "network": f"net-{2 * half + i // 500}", "name": f"p{i % 500}",
                            "remote_network": f"x{i}", "remote_namespace": "other"} for i in range(1000)])
    fast_got = fast.until(lambda e: e["revision"] == start + 2000, timeout=120)
    fast_s = time.monotonic() - t0
    slow_got = []
    for event in slow:
        slow_got.append(event)
        if event.revision >= start + 2000:
            break
    slow.cancel()
    slow_channel.close()
    a.close()
    assert [e["revision"] for e in fast_got] == list(range(start + 1, start + 2001))
    assert [e.revision for e in slow_got] == list(range(start + 1, start + 2001))
    assert {e.name.rsplit("/", 1)[-1] for e in slow_got} == {f"p{i}" for i in range(500)}
    assert fast_s < 60, fast_s
