"""Two tenants' Pulumi stacks (examples/tenant-a and tenant-b, the real
`pulumi` CLI) applied at the same time, twice, ending Bound on both sides;
then destroyed at the same time, leaving nothing in the service or OVN."""

from __future__ import annotations

import threading
import time

import pytest

from netpeer.ovn import names
from tests.trust import report

ROUNDS = 2


def at_once(*calls):
    """Runs the calls in threads released together; returns their results."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(i, call):
        barrier.wait(30)
        try:
            results[i] = call()
        except BaseException as exc:  # re-raised below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


@pytest.mark.pulumi
@pytest.mark.slow
def test_two_tenants_apply_at_the_same_time(stacks, netpeerd):
    a = stacks("tenant-a", netpeerd.token("team-a"))
    b = stacks("tenant-b", netpeerd.token("team-b"))
    a.config("waitForBound", "120")  # A's run waits for B's half, whichever lands first
    seconds = []
    for _ in range(ROUNDS):
        t0 = time.monotonic()
        at_once(a.up, b.up)
        seconds.append(time.monotonic() - t0)
        admin = netpeerd.client()
        pa = admin.get_peering("team-a", "net-a", "to-b")
        pb = admin.get_peering("team-b", "net-b", "to-a")
        assert (pa["phase"], pb["phase"]) == ("Bound", "Bound")
        peer_ports = [r for r in netpeerd.owned_rows().get("Logical_Router_Port", [])
                      if r[names.KIND] == "peer-port"]
        assert len(peer_ports) == 2
        assert a.outputs()["phase"] == "Bound"  # it waited
        # B may have finished first (then Pending in its state): a refresh, run
        # concurrently with A's, brings both states to Bound.
        at_once(lambda: a.run("refresh", "--yes"), lambda: b.run("refresh", "--yes"))
        for s, name in ((a, "to-b"), (b, "to-a")):
            r = s.resource("NetworkPeering", name)
            assert r["outputs"]["phase"] == "Bound", (s.name, r["outputs"])
        assert a.outputs()["remote_uid"] == b.outputs()["network_uid"]
        at_once(lambda: a.run("destroy", "--yes"), lambda: b.run("destroy", "--yes"))
        assert admin.list_networks("team-a") == [] and admin.list_networks("team-b") == []
        assert netpeerd.owned_rows() == {}
        admin.close()
    report.record("pulumi", "concurrent `pulumi up` of tenant-a and tenant-b, ending Bound on both sides",
                  f"{ROUNDS} rounds, {', '.join(f'{s:.1f}' for s in seconds)} s (both ups)")
