"""Model-based tests of the links between sites: three or four services with
their own stores and in-memory dataplanes, random operations on a small key
space (so that pairs form, overlap and part), random link cuts, lost calls
and lost answers, crashes in the middle of a write and restarts. After the
region heals, what each site tells each other one and what that one holds
of it must equal the whole side computed from scratch (the reference the
changes stand in for), the digests of both ends of every link must agree,
and every cross-site pair must be Bound on both sides or on neither.

``test_the_checks_catch_a_lossy_delta`` runs the same checks against a
delta that drops a change and a receiver that does not look at digests,
and requires them to fail: the checks can tell a lossy protocol.

``NETPEER_SITES_SEED`` and ``NETPEER_SITES_STEPS`` run other or longer
histories."""

from __future__ import annotations

import dataclasses
import os
import random

import pytest

from netpeer import errors
from netpeer.core import sides
from netpeer.core.models import Caller, NetworkKey, Phase, Quotas
from netpeer.service import Service, Settings, sitelog
from netpeer.service.memory import MemoryDataplane
from netpeer.store.sqlite import SqliteStore
from tests.sitecheck import link_problems

ADMIN = Caller("admin", frozenset(), True)
SEED = int(os.environ.get("NETPEER_SITES_SEED", "20261127"))
STEPS = int(os.environ.get("NETPEER_SITES_STEPS", "600"))
# Mostly apart, now and then overlapping: pairs bind, fail and part.
PREFIXES = [f"10.{i}.0.0/24" for i in range(40)] + ["10.0.0.0/16", "fd00:1::/64", "fd00:1::/48"]


class Crash(BaseException):
    """The process died here (nothing after it in this write happens)."""


class Region:
    """Sites joined directly by a transport that can be cut, lose calls and
    lose answers; a site can crash in the middle of a write and restart on
    its store."""

    def __init__(self, tmp_path, names=("east", "west", "north"), rng: random.Random | None = None):
        self.tmp, self.names, self.rng = tmp_path, names, rng or random.Random(SEED)
        self.cut: set[frozenset] = set()
        self.faults = 0.0            # chance that a call or its answer is lost
        self.crash_next: str | None = None
        self.services = {n: self._open(n) for n in names}
        self.counts = {"lost_calls": 0, "lost_answers": 0, "crashes": 0, "restarts": 0}

    def _open(self, name: str) -> Service:
        svc = Service(SqliteStore(self.tmp / f"{name}.db"), MemoryDataplane(),
                      Settings(quotas=Quotas(networks_per_namespace=10_000, pending_peerings_per_namespace=10_000)))
        svc.link_sites(name, {o: 1000 for o in self.names if o != name}, transport=self._transport(name))
        original = svc.writes.before_commit

        def before_commit(tx, name=name, original=original):
            out = original(tx)
            if self.crash_next == name:   # dies with the write's changes made but not committed
                self.crash_next = None
                raise Crash(name)
            return out
        svc.writes.before_commit = before_commit
        svc.sites.prepare()
        return svc

    def restart(self, name: str) -> None:
        self.services[name].store.close()
        self.services[name] = self._open(name)
        self.counts["restarts"] += 1

    def _transport(self, here: str):
        def call(site, msg):
            if frozenset((here, site)) in self.cut:
                raise ConnectionError(f"link {here}-{site} is cut")
            if self.faults and self.rng.random() < self.faults:
                self.counts["lost_calls"] += 1
                raise ConnectionError("the call was lost")
            answer = self.services[site].sites.receive(msg)
            if self.faults and self.rng.random() < self.faults:
                self.counts["lost_answers"] += 1
                raise ConnectionError("the answer was lost")
            return answer
        return call

    def __getitem__(self, name: str) -> Service:
        return self.services[name]

    def exchange(self, a: str, b: str) -> None:
        try:
            self.services[a].sites.exchange(b)
        except Crash as crash:
            self._crashed(str(crash))
        except errors.NetpeerError:
            pass

    def _crashed(self, name: str) -> None:
        self.counts["crashes"] += 1
        self.restart(name)

    def settle(self, rounds: int = 8) -> None:
        """Exchanges on every link, in both directions, with no fault."""
        faults, self.faults, self.cut = self.faults, 0.0, set()
        for _ in range(rounds):
            for a in self.names:
                for b in self.names:
                    if a != b:
                        self.exchange(a, b)
        self.faults = faults

    # ------------------------------------------------------------ checks
    def problems(self) -> list[str]:
        """Everything that differs from the reference; empty when all agree."""
        return link_problems({n: svc.store for n, svc in self.services.items()}) + self.disagreements()

    def disagreements(self) -> list[str]:
        """Cross-site pairs Bound on one side and not on the other."""
        out = []
        for a in self.names:
            with self.services[a].store.read() as tx:
                halves = [p for b in self.names if b != a for p in tx.halves_to_site(b)]
            for p in halves:
                with self.services[p.remote_site].store.read() as tx:
                    q = tx.find_peering_to(NetworkKey(p.remote_namespace, p.remote_network),
                                           NetworkKey(p.namespace, p.network, a))
                mine, theirs = p.phase == Phase.BOUND, q is not None and q.phase == Phase.BOUND
                if mine != theirs:
                    out.append(f"{a}:{p.key} is {p.phase.value}, its other half is "
                               f"{q.phase.value if q else 'missing'}")
        return out

    def close(self) -> None:
        for svc in self.services.values():
            svc.store.close()


def read(svc: Service, fn):
    with svc.store.read() as tx:
        return fn(tx)


def run_history(region: Region, rng: random.Random, steps: int) -> dict:
    """Random operations, link cuts, lost calls, crashes and restarts."""
    names = region.names
    made = {"ops": 0, "refused": 0}
    region.faults = 0.15
    for _ in range(steps):
        r = rng.random()
        site = rng.choice(names)
        svc = region[site]
        ns, net = rng.choice(["a", "b"]), f"n{rng.randrange(4)}"
        try:
            if r < 0.15:
                svc.create_network(ADMIN, ns, net, rng.sample(PREFIXES, rng.choice([1, 1, 2])))
            elif r < 0.45:
                other = rng.choice([n for n in names if n != site])
                rns, rnet = rng.choice(["a", "b"]), f"n{rng.randrange(4)}"
                halves = read(svc, lambda tx: [p for b in names if b != site for p in tx.halves_to_site(b)])
                if halves and rng.random() < 0.6:   # the other half of a pair one site asked for
                    p = rng.choice(halves)
                    site, svc, other = p.remote_site, region[p.remote_site], site
                    ns, net, rns, rnet = p.remote_namespace, p.remote_network, p.namespace, p.network
                    if read(svc, lambda tx: tx.get_network(NetworkKey(ns, net))) is None:
                        svc.create_network(ADMIN, ns, net, [rng.choice(PREFIXES)])
                svc.create_peering(ADMIN, ns, net, f"to-{other}-{rns}-{rnet}", rns, rnet, remote_site=other)
            elif r < 0.55:
                peerings = svc.list_peerings(ADMIN, ns, net)
                if peerings:
                    svc.delete_peering(ADMIN, ns, net, rng.choice(peerings).name)
            elif r < 0.62:
                svc.update_network(ADMIN, ns, net, subnets=rng.sample(PREFIXES, 1))
            elif r < 0.65:
                svc.delete_network(ADMIN, ns, net)
            elif r < 0.72:
                a, b = rng.sample(list(names), 2)
                region.cut ^= {frozenset((a, b))}
            elif r < 0.75:
                region.restart(site)
            elif r < 0.78:
                region.crash_next = site   # its next write dies before it commits
            else:
                for _ in range(rng.randrange(1, 4)):
                    a, b = rng.sample(list(names), 2)
                    region.exchange(a, b)
            made["ops"] += 1
        except Crash as crash:
            region._crashed(str(crash))
        except errors.NetpeerError:
            made["refused"] += 1
    region.crash_next = None
    return made


@pytest.mark.parametrize("sites", [3, 4])
def test_after_healing_every_site_holds_exactly_what_the_others_tell(tmp_path, sites):
    rng = random.Random(SEED + sites)
    region = Region(tmp_path, ("east", "west", "north", "south")[:sites], rng)
    try:
        made = {"ops": 0, "refused": 0}
        for _ in range(2):   # heal and check half way too, then go on from there
            for k, v in run_history(region, rng, STEPS // 2).items():
                made[k] += v
            region.settle()
            problems = region.problems()
            assert problems == [], "\n".join(problems[:10])
        bound = sum(1 for n in region.names for p in read(region[n], lambda tx: [
            p for b in region.names if b != n for p in tx.halves_to_site(b)]) if p.phase == Phase.BOUND)
        print(f"[sites-model] {dict(sites=sites, steps=STEPS, **made, **region.counts, bound_halves=bound)}")
        assert problems == [], "\n".join(problems[:10])
        assert made["ops"] > STEPS // 2 and region.counts["crashes"] > 0 and region.counts["lost_answers"] > 0
        assert bound >= 4     # the history made pairs, not only lone halves
    finally:
        region.close()


def test_the_checks_catch_a_lossy_delta(tmp_path, monkeypatch):
    """A delta that drops one change, and a receiver that never compares
    digests: the checks above must see what went missing."""
    real_message = sitelog.message

    def lossy_message(*args, **kwargs):
        msg = real_message(*args, **kwargs)
        if not msg.delta.full and len(msg.delta.items) > 1:
            msg = dataclasses.replace(msg, delta=dataclasses.replace(msg.delta, items=msg.delta.items[1:]))
        return msg

    monkeypatch.setattr(sitelog, "message", lossy_message)
    monkeypatch.setattr(sitelog, "compare", lambda link, delta: None)   # digests never looked at
    rng = random.Random(SEED)
    region = Region(tmp_path, ("east", "west", "north"), rng)
    try:
        run_history(region, rng, 120)
        region.settle()
        assert region.problems() != []
    finally:
        region.close()


def test_a_lost_change_is_noticed_by_its_digest_and_repaired_by_a_full_copy(tmp_path, monkeypatch):
    """The same lossy delta with digests compared as netpeer does: the
    receiver asks for a full copy, and the region agrees again."""
    real_message = sitelog.message
    dropped = []

    def lossy_message(*args, **kwargs):
        msg = real_message(*args, **kwargs)
        if not msg.delta.full and len(msg.delta.items) > 1:
            dropped.append(msg.delta.items[0][0])
            msg = dataclasses.replace(msg, delta=dataclasses.replace(msg.delta, items=msg.delta.items[1:]))
        return msg
    monkeypatch.setattr(sitelog, "message", lossy_message)
    rng = random.Random(SEED)
    region = Region(tmp_path, ("east", "west", "north"), rng)
    try:
        run_history(region, rng, 120)
        monkeypatch.setattr(sitelog, "message", real_message)
        region.settle()
        assert dropped and region.problems() == []
        resyncs = sum(link.resyncs_received for n in region.names for link in read(region[n], lambda tx: tx.links()))
        assert resyncs > 0
    finally:
        region.close()
