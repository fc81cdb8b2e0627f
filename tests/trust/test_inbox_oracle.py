"""The request inbox is no enumeration oracle (docs/inbox.md): the
requester's half answers the same, its calls run the same store statements
and take times no simple statistical test tells apart, whether the network
it names (a) does not exist, (b) exists and its owner has listed the
request, (c) its owner dismissed it, or (d) is in a namespace without
networks (whose requests get no Watch events). Measured as
tests/trust/test_enumeration.py measures creations: kinds interleaved in
shuffled rounds, medians compared as ratios side by side."""

from __future__ import annotations

import os
import random
import re
import statistics
import time

import grpc
from google.protobuf import duration_pb2, field_mask_pb2, json_format

from netpeer.v1 import netpeer_pb2 as pb
from tests.trust import report
from tests.trust.rpc import Raw
from tests.trust.stats import ks_2samp, mann_whitney_u

OKC = grpc.StatusCode.OK
# (label, the network the requester's half names, its namespace)
KINDS = (("missing", "no-such-net", "bank"), ("listed", "listed", "bank"), ("dismissed", "dismissed", "bank"),
         ("no namespace", "no-such-net", "nobody"))
CALLS = ("create", "get", "update", "delete")
ROUNDS = int(os.environ.get("NETPEER_INBOX_ORACLE_ROUNDS", "150"))
PARENT = "namespaces/acme/networks/net-a"


def setup_world(d):
    with d.client() as admin:
        admin.create_network("acme", "net-a", ["10.1.0.0/24"])
        admin.create_network("bank", "listed", ["10.2.0.0/24"])
        admin.create_network("bank", "dismissed", ["10.3.0.0/24"])
    return d.token("acme"), d.token("bank")


def _half(kind) -> str:
    return "to-" + kind[0].replace(" ", "-")


def _name(kind) -> str:
    return f"{PARENT}/peerings/{_half(kind)}"


def requester_calls(raw, acme, kind):
    """The requester's calls on its half towards ``kind``, as (call, request)."""
    ttl = duration_pb2.Duration(seconds=7200)
    return {
        "create": ("CreatePeering", pb.CreatePeeringRequest(parent=PARENT, peering_id=_half(kind), peering=pb.Peering(
            remote=pb.RemoteRef(namespace=kind[2], network=kind[1])))),
        "get": ("GetPeering", pb.GetPeeringRequest(name=_name(kind))),
        "update": ("UpdatePeering", pb.UpdatePeeringRequest(peering=pb.Peering(name=_name(kind), ttl=ttl),
                                                            update_mask=field_mask_pb2.FieldMask(paths=["ttl"]))),
        "delete": ("DeletePeering", pb.DeletePeeringRequest(name=_name(kind))),
    }


def target_acts(raw, bank, kind):
    """What the target's owner does before the requester reads its half:
    nothing (there is no network), lists the request, or dismisses it."""
    if kind[0] in ("missing", "no namespace"):
        return
    code, details, listed = raw.call("ListPeeringRequests", pb.ListPeeringRequestsRequest(
        parent=f"namespaces/bank/networks/{kind[1]}"), bank)
    assert code == OKC and len(listed.requests) == 1, (code, details, listed)
    if kind[0] == "dismissed":
        code, details, _ = raw.call("DismissPeeringRequest", pb.DismissPeeringRequestRequest(
            name=listed.requests[0].name), bank)
        assert code == OKC, details
        code, _, after = raw.call("ListPeeringRequests", pb.ListPeeringRequestsRequest(
            parent=f"namespaces/bank/networks/{kind[1]}"), bank)
        assert code == OKC and not after.requests


def normalized(msg, kind) -> str:
    out = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    for field in ("create_time", "last_phase_transition_time", "expires_at"):
        out.pop(field, None)
    return repr(out).replace(_half(kind), "<NAME>").replace(kind[1], "<NET>").replace(f"'{kind[2]}'", "<NS>") \
        .replace(f"{kind[2]}/", "<NS>/")


def one_round(raw, acme, bank, rng, times=None, answers=None):
    """Each call of the requester on each kind's half, the kinds in a new
    shuffled order for each call; what the targets do comes after every
    creation and before every read, so no kind's call follows another
    kind of call than the others' do."""
    calls = {kind[0]: requester_calls(raw, acme, kind) for kind in KINDS}
    for call in CALLS:
        order = list(KINDS)
        rng.shuffle(order)
        for kind in order:
            method, request = calls[kind[0]][call]
            t0 = time.perf_counter()
            code, details, answer = raw.call(method, request, acme)
            elapsed = time.perf_counter() - t0
            assert code == OKC, (call, details)
            if times is not None:
                times[kind[0]][call].append(elapsed * 1e6)
            if call in ("create", "get", "update"):
                assert (answer.phase, answer.reason) == (pb.PENDING, "AwaitingRemote"), (kind, call, answer)
                if answers is not None:
                    answers[kind[0]].append((call, normalized(answer, kind)))
        if call == "create":
            for kind in KINDS:
                target_acts(raw, bank, kind)


def test_the_requester_sees_the_same_answers(netpeerd):
    acme, bank = setup_world(netpeerd)
    with Raw(netpeerd.endpoint) as raw:
        answers = {k[0]: [] for k in KINDS}
        for _ in range(2):
            one_round(raw, acme, bank, random.Random(1), answers=answers)
    assert answers["missing"] == answers["listed"] == answers["dismissed"] == answers["no namespace"], answers


def test_the_requester_runs_the_same_statements(netpeerd):
    """The store does the same statements, in the same order, for each of
    the requester's calls, whatever became of its request."""
    acme, bank = setup_world(netpeerd)
    netpeerd.settle()
    service = netpeerd.service
    # Only the calls' own statements: no background reads meanwhile.
    service.programmer.check = lambda: 0
    service.health = lambda: (True, "")
    service.namespaces_changed = lambda after: (after, set())
    time.sleep(1.5)
    store = netpeerd.store
    traces: dict[str, list] = {}
    with Raw(netpeerd.endpoint) as raw:
        for kind in KINDS + KINDS:
            calls = requester_calls(raw, acme, kind)
            for call in CALLS:
                statements: list[str] = []
                for db in [store._db] + store.readers.connections():
                    db.set_trace_callback(statements.append)
                try:
                    method, request = calls[call]
                    code, details, _ = raw.call(method, request, acme)
                finally:
                    for db in [store._db] + store.readers.connections():
                        db.set_trace_callback(None)
                assert code == OKC, details
                if call == "create":
                    target_acts(raw, bank, kind)
                traces.setdefault(call, []).append([re.sub(r"'[^']*'|\b\d+\b", "?", s) for s in statements])
    for call, runs in traces.items():
        assert runs[0] and all(t == runs[0] for t in runs), (call, [len(t) for t in runs])
    report.record("inbox oracle", "store statements per create / get / update / delete (same for all kinds)",
                  " / ".join(str(len(traces[c][0])) for c in CALLS))


def test_the_requester_times_do_not_tell(netpeerd, request):
    acme, bank = setup_world(netpeerd)
    rng = random.Random(int(os.environ.get("NETPEER_ORACLE_SEED", "0")) or None)
    times = {k[0]: {c: [] for c in CALLS} for k in KINDS}
    with Raw(netpeerd.endpoint) as raw:
        for r in range(ROUNDS + 10):   # the first 10 rounds warm up
            one_round(raw, acme, bank, rng, times if r >= 10 else None)
    load = os.getloadavg()[0]
    figures: dict[str, object] = {"rounds": ROUNDS, "load_1min": round(load, 2)}
    failures = []
    labels = [k[0] for k in KINDS]
    for call in CALLS:
        medians = {k: statistics.median(times[k][call]) for k in labels}
        figures[f"{call} median us"] = {k: round(v) for k, v in medians.items()}
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                _, p_mw = mann_whitney_u(times[a][call], times[b][call])
                _, p_ks = ks_2samp(times[a][call], times[b][call])
                ratio = medians[a] / medians[b]
                figures[f"{call} {a}/{b}"] = f"ratio {ratio:.3f}, Mann-Whitney p={p_mw:.3f}, KS p={p_ks:.3f}"
                # As in test_enumeration: both tests must agree at p < 0.001 to call the kinds apart.
                if (p_mw < 0.001 and p_ks < 0.001) or not 0.67 < ratio < 1.5:
                    failures.append((call, a, b, ratio, p_mw, p_ks))
    report.publish(request, "inbox oracle", figures)
    assert not failures, failures
