"""Hostile input: property-based fuzzing of every RPC of netpeer.v1.

Every call, whatever it carries: never INTERNAL, never UNKNOWN, never a
crash (the server still answers health checks and calls), every error
message on one line; UNAUTHENTICATED without a valid token, unless the
request is larger than its method takes (RESOURCE_EXHAUSTED); after every call the state invariants hold (see
invariants.py: store consistency, consent fixpoint, nothing invalid stored,
OVN equal to what the store implies, no duplicate netpeer:id).

NETPEER_FUZZ_EXAMPLES sets the examples per RPC (default 400) and
NETPEER_FUZZ_SEQUENCES the mixed call sequences (default 250).
"""

from __future__ import annotations

import collections
import os
import time

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netpeer.api.server import Limits
from netpeer.v1 import netpeer_pb2 as pb
from tests.support import ADMIN_TOKEN
from tests.trust import report
from tests.trust.invariants import Checker
from tests.trust.rpc import ALL_RPCS, Raw, path
from tests.trust.strategies import plausible, requests

EXAMPLES = int(os.environ.get("NETPEER_FUZZ_EXAMPLES", "400"))
SEQUENCES = int(os.environ.get("NETPEER_FUZZ_SEQUENCES", "250"))
NEVER = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED,
         grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.DATA_LOSS}
CALLERS = ("admin", "admin", "admin", "fz-a", "fz-ab", "bad", "none")
TRIED: collections.Counter = collections.Counter()
CODES: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
LIMITS = Limits()
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)


class Fuzz:
    def __init__(self, d):
        self.d = d
        self.raw = Raw(d.endpoint)
        self.check = Checker(d)
        self.tokens = {"admin": ADMIN_TOKEN, "fz-a": d.token("fz-a"), "fz-ab": d.token("fz-a", "fz-b"),
                       "bad": "np_" + "f" * 12 + "_" + "x" * 43, "none": None}
        self.seconds = 0.0
        self.broken: str | None = None

    def close(self):
        self.check.close()
        self.raw.close()

    def uids(self) -> list[str]:
        nets, _ = self.check.state()
        return sorted(n.uid for n in nets.values())

    def fire(self, method: str, request, who: str) -> grpc.StatusCode:
        # State is shared by all examples: once an invariant broke, every later
        # example fails, and shrinking would report an innocent one. Name the culprit.
        assert self.broken is None, f"state already broken by {self.broken}"
        try:
            return self._fire(method, request, who)
        except AssertionError as exc:
            self.broken = f"{method} as {who}: {request!r:.3000}\n  -> {str(exc)[:1000]}"
            raise

    def _fire(self, method: str, request, who: str) -> grpc.StatusCode:
        t0 = time.monotonic()
        code, details, resp = self.raw.call(method, request, self.tokens[who])
        TRIED[method] += 1
        CODES[method][code.name] += 1
        assert code not in NEVER, f"{method} as {who} answered {code.name}: {details!r}\nrequest: {request!r:.2000}"
        # An answer too big for the client's metadata limit loses its status.
        assert "metadata size exceeds" not in details, f"{method}: answer lost: {details!r}"
        if code != grpc.StatusCode.OK:
            assert details and len(details.splitlines()) == 1, f"{method}: message not one line: {details!r:.500}"
            assert len(details) < 2000, f"{method}: message of {len(details)} characters"
        if request.ByteSize() > LIMITS.request_limit(path(method)):   # refused unparsed, whoever sent it
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and details.startswith("request: "), (method, details)
        elif who in ("bad", "none"):
            assert code == grpc.StatusCode.UNAUTHENTICATED, (method, code, details)
        self.check()
        assert self.raw.healthy()
        code2, details2, _ = self.raw.call("GetCaller", pb.GetCallerRequest(), ADMIN_TOKEN)
        assert code2 == grpc.StatusCode.OK, details2
        self.seconds += time.monotonic() - t0
        return code


def seed(d):
    """Networks in three namespaces with Bound, Failed and Pending peerings."""
    with d.client() as c:
        c.create_network("fz-a", "n1", ["10.1.0.0/24", "fd00:0:0:1::/64"])
        c.create_network("fz-b", "n1", ["10.2.0.0/24"], routes=["10.50.0.0/16"])
        c.create_network("fz-c", "n1", ["10.2.0.0/23"])
        c.create_network("fz-c", "n2", ["10.3.0.0/24"])
        c.create_peering("fz-a", "n1", "p1", "n1", "fz-b")
        c.create_peering("fz-b", "n1", "p1", "n1", "fz-a")   # Bound
        c.create_peering("fz-c", "n1", "p1", "n1", "fz-b")
        c.create_peering("fz-b", "n1", "p2", "n1", "fz-c")   # Failed: 10.2.0.0/23 overlaps 10.2.0.0/24
        c.create_peering("fz-c", "n2", "p1", "n1", "fz-a")   # Pending


@pytest.fixture
def fuzz(netpeerd):
    seed(netpeerd)
    f = Fuzz(netpeerd)
    f.check()
    yield f
    f.close()


@pytest.mark.parametrize("method", ALL_RPCS)
def test_fuzz_each_rpc(fuzz, method):
    @settings(max_examples=EXAMPLES, **SETTINGS)
    @given(data=st.data())
    def run(data):
        request = data.draw(requests(method), label="request")
        who = data.draw(st.sampled_from(CALLERS), label="caller")
        if method == "CreatePeering" and data.draw(st.booleans()):
            # Pin a uid that exists: often the parent's own (self-peering by uid).
            uids = fuzz.uids()
            if uids:
                request.peering.remote.uid = data.draw(st.sampled_from(uids), label="known uid")
        fuzz.fire(method, request, who)

    run()
    report.add("fuzz", f"{method}: inputs", 0)  # keeps the RPC order of the report stable


@pytest.mark.slow
def test_fuzz_sequences(fuzz):
    """Sequences of mostly plausible calls (which build networks, Bound and
    Failed pairs) mixed with adversarial ones, with expiry and repair sweeps
    in between."""
    @settings(max_examples=SEQUENCES, **SETTINGS)
    @given(data=st.data())
    def run(data):
        steps = data.draw(st.integers(1, 12), label="steps")
        for _ in range(steps):
            method = data.draw(st.sampled_from(ALL_RPCS), label="method")
            adversarial = data.draw(st.integers(0, 9), label="mix") < 3
            request = data.draw(requests(method) if adversarial else plausible(method), label="request")
            who = data.draw(st.sampled_from(CALLERS if adversarial else ("admin",) * 5 + ("fz-a",)), label="caller")
            fuzz.fire(method, request, who)
        if data.draw(st.integers(0, 9), label="sweep") == 0:
            fuzz.d.service.sweep()
            fuzz.check()

    run()
    nets, peers = fuzz.check.state()
    report.record("fuzz", "state at the end of the sequences",
                  f"{len(nets)} networks, {len(peers)} peerings "
                  f"({collections.Counter(p.phase for p in peers.values())})")


def teardown_module(module):
    total = sum(TRIED.values())
    if not total:
        return
    for method in ALL_RPCS + ("credentials",):
        codes = ", ".join(f"{k} {v}" for k, v in CODES[method].most_common())
        report.record("fuzz", f"{method}: inputs", f"{TRIED[method]} ({codes})")
    report.record("fuzz", "total inputs (each followed by the invariant check)", total)
    report.record("fuzz", "examples per RPC / sequences (NETPEER_FUZZ_EXAMPLES / _SEQUENCES)",
                  f"{EXAMPLES} / {SEQUENCES}")


def test_fuzz_credentials(fuzz):
    """Random bearer values (any printable ASCII, token-shaped or not, real ids
    with wrong secrets) on random RPCs: UNAUTHENTICATED, every time."""
    real = [t for t in fuzz.tokens.values() if t]
    printable = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=120)
    shaped = st.builds(lambda i, s: f"np_{i}_{s}", printable, printable)
    near = st.builds(lambda t, cut, extra: t.split("_", 2)[0] + "_" + t.split("_", 2)[1] + "_" +
                     t.split("_", 2)[2][:cut] + extra, st.sampled_from(real), st.integers(0, 60),
                     st.text(alphabet="abcdefABCDEF0123456789-", min_size=1, max_size=3))
    schemes = st.sampled_from(["Bearer", "bearer", "BEARER", "Basic", "Token", "", "Bearer "])

    @settings(max_examples=max(EXAMPLES // 2, 50), **SETTINGS)
    @given(scheme=schemes, value=st.one_of(printable, shaped, near), method=st.sampled_from(ALL_RPCS))
    def run(scheme, value, method):
        if value in real and scheme.lower().strip() == "bearer":
            return  # a real token: not a bad credential
        header = f"{scheme} {value}".strip() if scheme else value
        code, details, _ = fuzz.raw.call(method, requests_default(method), metadata=(("authorization", header),))
        TRIED["credentials"] += 1
        CODES["credentials"][code.name] += 1
        assert code == grpc.StatusCode.UNAUTHENTICATED, (header, method, code, details)
        assert details in ("invalid token",
                           "missing credentials: pass a token (--token-file, --token or NETPEER_TOKEN)"), details

    run()
    fuzz.check()


def requests_default(method):
    from tests.trust.rpc import request_class
    return request_class(method)()
