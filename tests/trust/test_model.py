"""Model-based test of the consent rules: a hypothesis state machine drives
the real service over gRPC (one token per tenant) and, after every step,
compares it with the reference model of tests/trust/model.py (networks,
halves, phases, reasons, learned uids, and the outcome of every call) and
checks the state invariants, OVN included.

NETPEER_MODEL_EXAMPLES sets the number of runs (default 100) of up to
NETPEER_MODEL_STEPS steps (default 40).
"""

from __future__ import annotations

import collections
import os
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition, rule,
                                 run_state_machine_as_test)

from netpeer import errors
from netpeer.core.models import TokenLimits
from netpeer.service.budget import Budgets
from tests.trust import report
from tests.trust.model import Model, diff, service_view

EXAMPLES = int(os.environ.get("NETPEER_MODEL_EXAMPLES", "100"))
STEPS = int(os.environ.get("NETPEER_MODEL_STEPS", "40"))
NAMESPACES = ("a", "b", "c")
NETWORKS = ("n1", "n2")
PEERINGS = ("p1", "p2")
# Overlapping in many ways, so pairs bind, fail and block each other.
V4 = ("10.0.0.0/16", "10.0.1.0/24", "10.1.0.0/24", "10.2.0.0/24", "10.3.0.0/24")
V6 = ("fd00::/48", "fd00:0:0:1::/64", "fd01::/64")
subnets = st.lists(st.sampled_from(V4 + V6), min_size=1, max_size=2, unique=True)
routes = st.lists(st.sampled_from(V4 + ("10.9.0.0/16",)), max_size=1)
STATS = {"runs": 0, "steps": 0, "calls": 0, "bound": 0, "failed": 0, "withdrawn": 0}
OUTCOMES: collections.Counter = collections.Counter()


def outcome(fn):
    try:
        return "OK", fn()
    except errors.NetpeerError as exc:
        return type(exc).__name__, None


class ConsentMachine(RuleBasedStateMachine):
    d = None
    check = None
    clients: dict = {}

    def __init__(self):
        super().__init__()
        self.model = Model()
        assert service_view(self.d.service) == ({}, {}), "the previous run left state behind"
        STATS["runs"] += 1

    @initialize(data=st.data())
    def some_networks(self, data):
        for ns in NAMESPACES:
            for name in NETWORKS:
                if data.draw(st.integers(0, 3)):
                    self.create_network(ns, name, data.draw(subnets), data.draw(routes))

    def _agree(self, what, got, expected):
        STATS["calls"] += 1
        OUTCOMES[(what.split(" ")[0] + " " + what.split(" ")[1], got)] += 1
        assert got == expected, f"{what}: service {got}, model {expected}"

    @rule(ns=st.sampled_from(NAMESPACES), name=st.sampled_from(NETWORKS), subnets=subnets, routes=routes)
    def create_network(self, ns, name, subnets, routes):
        code, net = outcome(lambda: self.clients[ns].create_network(ns, name, subnets, routes))
        expected = self.model.create_network(ns, name, subnets, routes, net["uid"] if net else None)
        self._agree(f"create network {ns}/{name} {subnets} {routes}", code, expected)

    def update_network(self, ns, name, subnets, routes):
        code, _ = outcome(lambda: self.clients[ns].update_network(ns, name, subnets=subnets, routes=routes))
        self._agree(f"update network {ns}/{name} {subnets} {routes}", code,
                    self.model.update_network(ns, name, subnets, routes))

    def delete_network(self, ns, name):
        code, _ = outcome(lambda: self.clients[ns].delete_network(ns, name))
        self._agree(f"delete network {ns}/{name}", code, self.model.delete_network(ns, name))

    @rule(ns=st.sampled_from(NAMESPACES), net=st.sampled_from(NETWORKS), name=st.sampled_from(PEERINGS),
          rns=st.sampled_from(NAMESPACES + ("",)), rnet=st.sampled_from(NETWORKS),
          pin=st.sampled_from(["none"] * 6 + ["remote", "own", "random"]))
    def create_peering(self, ns, net, name, rns, rnet, pin):
        remote = self.model.nets.get((rns or ns, rnet))
        own = self.model.nets.get((ns, net))
        uid = {"none": None, "remote": remote.uid if remote else None, "own": own.uid if own else None,
               "random": str(uuid.uuid4())}[pin]
        code, _ = outcome(lambda: self.clients[ns].create_peering(ns, net, name, rnet, rns or None, remote_uid=uid))
        self._agree(f"create peering {ns}/{net}/{name} -> {rns or ns}/{rnet} pin {pin}", code,
                    self.model.create_peering(ns, net, name, rns or None, rnet, uid))

    def delete_peering(self, ns, net, name):
        code, _ = outcome(lambda: self.clients[ns].delete_peering(ns, net, name))
        self._agree(f"delete peering {ns}/{net}/{name}", code, self.model.delete_peering(ns, net, name))

    @precondition(lambda self: len(self.model.nets) >= 2)
    @rule(data=st.data(), name=st.sampled_from(PEERINGS),
          pin=st.sampled_from(["none"] * 6 + ["remote", "own", "random"]))
    def peer_existing_networks(self, data, name, pin):
        (ns, net), (rns, rnet) = data.draw(st.lists(st.sampled_from(sorted(self.model.nets)), min_size=2,
                                                    max_size=2, unique=True))
        self.create_peering(ns, net, name, "" if rns == ns and data.draw(st.booleans()) else rns, rnet, pin)

    @precondition(lambda self: len(self.model.nets) >= 2)
    @rule(data=st.data(), names=st.tuples(st.sampled_from(PEERINGS), st.sampled_from(PEERINGS)))
    def both_halves(self, data, names):
        """Two owners consent to each other, one after the other."""
        (ns, net), (rns, rnet) = data.draw(st.lists(st.sampled_from(sorted(self.model.nets)), min_size=2,
                                                    max_size=2, unique=True))
        self.create_peering(ns, net, names[0], rns, rnet, "none")
        self.create_peering(rns, rnet, names[1], ns, net, "none")

    @precondition(lambda self: len(self.model.nets) >= 3)
    @rule(data=st.data())
    def wait_then_bind_elsewhere(self, data):
        """A network consents towards one network, then binds with another:
        the older consent may later be blocked, and unblocked, by the pair."""
        (ns, net), (ans, anet), (bns, bnet) = data.draw(st.lists(st.sampled_from(sorted(self.model.nets)),
                                                                 min_size=3, max_size=3, unique=True))
        self.create_peering(ns, net, "p1", ans, anet, "none")
        self.create_peering(ns, net, "p2", bns, bnet, "none")
        self.create_peering(bns, bnet, "p1", ns, net, "none")

    @precondition(lambda self: any(p.remote_key in self.model.nets for p in self.model.peers.values()))
    @rule(data=st.data(), name=st.sampled_from(PEERINGS))
    def consent_back(self, data, name):
        """The other side declares its half."""
        p = data.draw(st.sampled_from(sorted((k for k, p in self.model.peers.items()
                                              if p.remote_key in self.model.nets))))
        p = self.model.peers[p]
        self.create_peering(p.remote_namespace, p.remote_network, name, p.namespace, p.network, "none")

    def _some_network(self, data):
        if self.model.nets and data.draw(st.integers(0, 4)):
            return data.draw(st.sampled_from(sorted(self.model.nets)))
        return data.draw(st.sampled_from(NAMESPACES)), data.draw(st.sampled_from(NETWORKS))

    @rule(data=st.data(), subnets=st.none() | subnets, routes=st.none() | routes)
    def update_a_network(self, data, subnets, routes):
        self.update_network(*self._some_network(data), subnets, routes)

    @rule(data=st.data())
    def delete_a_network(self, data):
        self.delete_network(*self._some_network(data))

    @rule(data=st.data())
    def delete_a_peering(self, data):
        """Mostly an existing one; sometimes any name (NotFound)."""
        if self.model.peers and data.draw(st.integers(0, 4)):
            ns, net, name = data.draw(st.sampled_from(sorted(self.model.peers)))
        else:
            ns, net, name = (data.draw(st.sampled_from(x)) for x in (NAMESPACES, NETWORKS, PEERINGS))
        self.delete_peering(ns, net, name)

    @rule(data=st.data())
    def update_peering(self, data):
        from datetime import timedelta
        if self.model.peers and data.draw(st.integers(0, 4)):
            ns, net, name = data.draw(st.sampled_from(sorted(self.model.peers)))
        else:
            ns, net, name = (data.draw(st.sampled_from(x)) for x in (NAMESPACES, NETWORKS, PEERINGS))
        code, _ = outcome(lambda: self.clients[ns].update_peering(ns, net, name, description="d",
                                                                   ttl=timedelta(days=3)))
        self._agree(f"update peering {ns}/{net}/{name}", code, self.model.update_peering(ns, net, name))

    @invariant()
    def service_matches_model(self):
        STATS["steps"] += 1
        problems = diff(self.model.view(), service_view(self.d.service))
        assert not problems, "service and model differ:\n" + problems
        self.check()
        for p in self.model.peers.values():
            STATS["bound"] += p.phase == "Bound"
            STATS["failed"] += p.phase == "Failed"
            STATS["withdrawn"] += p.reason == "RemoteWithdrawn"

    def teardown(self):
        with self.d.client() as admin:
            for ns, net, name in list(self.model.peers):
                admin.delete_peering(ns, net, name)
            for ns, name in list(self.model.nets):
                admin.delete_network(ns, name)
        assert service_view(self.d.service) == ({}, {})
        assert self.d.owned_rows() == {}


@pytest.mark.slow
def test_consent_model(netpeerd, checker):
    # The consent rules are checked here, not the per-token budget of conflicts told (test_budgets.py).
    netpeerd.service.budgets = Budgets(TokenLimits(conflict_disclosures_per_minute=10_000))
    ConsentMachine.d = netpeerd
    ConsentMachine.check = staticmethod(checker)
    ConsentMachine.clients = {ns: netpeerd.tenant(ns) for ns in NAMESPACES}
    try:
        run_state_machine_as_test(ConsentMachine, settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
            suppress_health_check=list(HealthCheck)))
    finally:
        for c in ConsentMachine.clients.values():
            c.close()
    report.record("model (sequential)", "runs x max steps", f"{STATS['runs']} x {STEPS}")
    report.record("model (sequential)", "steps compared with the model (state + invariants + OVN)", STATS["steps"])
    report.record("model (sequential)", "calls whose outcome matched the model", STATS["calls"])
    report.record("model (sequential)", "outcomes", ", ".join(f"{k[0]} {k[1]}: {v}" for k, v in sorted(OUTCOMES.items())))
    report.record("model (sequential)", "Bound / Failed / RemoteWithdrawn halves seen after steps",
                  f"{STATS['bound']} / {STATS['failed']} / {STATS['withdrawn']}")
