"""Two sites (``netpeer_dev.multisite``: per site OVN, ovn-ic, a chassis and
a netpeerd on SQLite; WireGuard over a simulated WAN) under the workload.

Two workloads run at once and go into one history:

- within each site, the groups of ``tests.linearizability.workload``
  (that site's netpeerd is one site: every answer is checked against the
  model, as on the SQLite stack);
- across the sites, clients create, delete and read the two halves of a
  few cross-site pairs, on both sides. Each site is linearizable for the
  existence of its own halves; their phases follow the weaker guarantee of
  docs/cross-site.md, checked after the run: once the last fault has healed
  and no write comes any more, within ``AGREE_S`` both sides show the phase
  the two halves imply, and never one side Bound while the other withdrew
  (tests/linearizability/checker/sites.go).

Faults: ``cut-wan`` (one site's WAN port down for 1-4 s, then up),
``kill-east`` and ``kill-west`` (kill -9 of that site's netpeerd, started
again).
"""

from __future__ import annotations

import ipaddress
import random
import threading
import time
from pathlib import Path

from netpeer import errors
from netpeer.ovn.backend import OvnBackend
from netpeer.store.sqlite import SqliteStore
from netpeer_dev.multisite import MultiSiteStack
from tests.linearizability.history import History, now
from tests.linearizability.stacks import Final, check_faults
from tests.linearizability.workload import RecordingClient, Run, Worker, call
from tests.support import wait_until

SWEEP = "1s"
AGREE_S = 10.0       # after healing, both sides agree within this (sweep interval 1 s: about ten exchanges)
SITES = ("east", "west")


def _other(site: str) -> str:
    return "west" if site == "east" else "east"


def half(site: str, k: int) -> dict:
    """The args of pair ``k``'s half in ``site``."""
    mine, theirs = f"x{site[0]}{k}", f"x{_other(site)[0]}{k}"
    return {"ns": mine, "network": "n", "peering": f"to-{_other(site)}", "remote_site": _other(site),
            "remote_ns": theirs, "remote_network": "n"}


def prefix(site: str, k: int) -> str:
    return f"10.{200 + SITES.index(site)}.{k}.0/24"


class SitesStack:
    """A running two-site stack (started here, or the one a test module shares)."""

    name = "sites"
    FAULTS = ("cut-wan", "kill-east", "kill-west")

    def __init__(self, directory: Path, multi: MultiSiteStack | None = None, pairs: int = 6):
        self.own = multi is None
        self.multi = multi or MultiSiteStack(directory, list(SITES))
        self.pairs = pairs
        self.lease_s = 0.0
        self.cut: str | None = None

    def start(self) -> None:
        if self.own:
            self.multi.up(SWEEP, lambda m: None)

    def endpoint(self, site: str) -> str:
        return self.multi.stacks[site].endpoint

    def token(self, site: str) -> str:
        return self.multi.stacks[site].admin_token()

    def make_networks(self) -> None:
        """Each pair's two networks (not part of the history: never changed)."""
        for site in SITES:
            with RecordingClient(self.endpoint(site), self.token(site), timeout=30) as c:
                for k in range(self.pairs):
                    a = half(site, k)
                    try:
                        c.create_network(a["ns"], a["network"], [prefix(site, k)])
                    except errors.AlreadyExists:
                        pass

    def inject(self, kind: str, history: History, rnd: random.Random) -> None:
        check_faults(self.name, [kind], self.FAULTS)
        start = now()
        if kind == "cut-wan":
            site, hold = rnd.choice(SITES), rnd.uniform(1.0, 4.0)
            self.cut = site
            self.multi.sites.cut(site)
            time.sleep(hold)   # not polling: the cut lasts this long
            self.multi.sites.heal(site)
            self.cut = None
            history.nemesis(kind, site, start, now(), f"{site}'s WAN port down for {hold:.1f}s")
            return
        site = kind.split("-", 1)[1]
        self.multi.stacks[site].netpeerd().kill9()
        self.multi.up(SWEEP, lambda m: None)     # starts the killed netpeerd again
        history.nemesis(kind, site, start, now(), f"kill -9 of {site}'s netpeerd, started again")

    def final(self, sample: int = 2, seed: int = 0) -> Final:
        from tests.sites.test_faults import _wait_ovn_matches_store
        took = 0.0
        for site in SITES:
            store = SqliteStore(self.multi.stacks[site].config().store)
            backend = OvnBackend(self.multi.sites.central[site].nb_remote)
            try:
                assert backend.wait_connected(30), f"the checker cannot reach {site}'s OVN NB"
                took = max(took, _wait_ovn_matches_store(self.multi, site, store, backend, timeout=30))
            finally:
                backend.close()
                store.close()
        return Final(took, self.ping_sample(sample, seed))

    def phases(self) -> dict[int, tuple[str | None, str | None]]:
        """Each pair's phase on each side (None: no half)."""
        out = {}
        clients = {site: RecordingClient(self.endpoint(site), self.token(site), timeout=30) for site in SITES}
        try:
            for k in range(self.pairs):
                seen = []
                for site in SITES:
                    a = half(site, k)
                    try:
                        seen.append(clients[site].get_peering(a["ns"], a["network"], a["peering"])["phase"])
                    except errors.NotFound:
                        seen.append(None)
                out[k] = tuple(seen)
        finally:
            for c in clients.values():
                c.close()
        return out

    def both_kinds(self, timeout: float = 30.0) -> None:
        """At least one pair Bound and one not (the run may end with all
        of one kind): binds pair 0 or withdraws pair 0's west half, and waits
        until both sides show it."""
        phases = self.phases()
        if any(p == ("Bound", "Bound") for p in phases.values()) and any("Bound" not in p for p in phases.values()):
            return
        bind = not any(p == ("Bound", "Bound") for p in phases.values())
        for site, present in zip(SITES, phases[0]):
            a = half(site, 0)
            with RecordingClient(self.endpoint(site), self.token(site), timeout=30) as c:
                if bind and present is None:
                    call(c, "create_half", a)
                elif not bind and site == "west":
                    c.delete_peering(a["ns"], a["network"], a["peering"])
        want = ("Bound", "Bound") if bind else ("Pending", None)
        wait_until(lambda: self.phases()[0], timeout, lambda got: f"pair 0 is {got}, not {want}", step=0.2,
                   until=lambda got: got == want)

    def ping_sample(self, sample: int, seed: int) -> dict:
        """Instances on both sides of some Bound pairs and some others: east
        pings west, answered exactly when the pair is Bound."""
        rnd = random.Random(seed)
        self.both_kinds()
        phases = self.phases()
        bound = [k for k, p in phases.items() if p == ("Bound", "Bound")]
        other = [k for k, p in phases.items() if "Bound" not in p]
        chosen = rnd.sample(bound, min(sample, len(bound))) + rnd.sample(other, min(sample, len(other)))
        made: list[tuple[str, str]] = []
        wrong = []
        try:
            vms = {}
            for k in chosen:
                for site in SITES:
                    a = half(site, k)
                    with RecordingClient(self.endpoint(site), self.token(site), timeout=30) as c:
                        network = c.get_network(a["ns"], a["network"])
                    name = f"lz{site[0]}{k}"
                    with self.multi.fleet(site) as fleet:
                        vms[(site, k)] = fleet.add(network, name)
                    made.append((site, name))
            from netpeer_dev import netns as nsx
            for k in chosen:
                want = k in bound
                src, dst = vms[("east", k)], vms[("west", k)]
                address = str(ipaddress.ip_interface(dst.ips[0]).ip)
                deadline = time.monotonic() + (15.0 if want else 0.0)
                while True:
                    answered = nsx.ping(src.netns, address, count=1 if want else 2, timeout=1.0)
                    if answered == want or time.monotonic() > deadline:
                        break
                if answered != want:
                    wrong.append(f"pair {k}: east -> west {address} {'no answer' if want else 'answered'} although "
                                 f"{'Bound' if want else 'not Bound'} ({phases[k]})")
        finally:
            for site, name in made:
                with self.multi.fleet(site) as fleet:
                    fleet.delete(name)
        assert not wrong, f"pings disagree with the final Bound set: {wrong}"
        return {"bound_pairs_answered": len([k for k in chosen if k in bound]),
                "other_pairs_silent": len([k for k in chosen if k not in bound])}

    def stop(self) -> None:
        if self.cut is not None:
            self.multi.sites.heal(self.cut)
        if self.own:
            self.multi.down(purge=False, say=lambda m: None)

    def logs_clean(self) -> None:
        for site in SITES:
            self.multi.stacks[site].netpeerd().assert_no_internal_errors()


class CrossSiteWorker(Worker):
    """A client of both sites: creates, deletes and reads the halves of the
    cross-site pairs, at random."""

    def __init__(self, run: "CrossSiteRun", seed: int):
        threading.Thread.__init__(self, name=f"cross-{seed}", daemon=True)
        self.run_ = run
        self.rnd = random.Random(seed)
        self.process = run.history.process()
        self.clients_of = {site: RecordingClient(run.stack.endpoint(site), run.stack.token(site), timeout=run.timeout)
                           for site in SITES}
        self.calls = 0

    def run(self) -> None:
        try:
            while not self.run_.stop.is_set():
                k, site = self.rnd.randrange(self.run_.stack.pairs), self.rnd.choice(SITES)
                f = self.rnd.choices(("create_half", "delete_half", "get_half"), (2, 1.5, 2))[0]
                a = half(site, k)
                args = a if f == "create_half" else {x: a[x] for x in ("ns", "network", "peering")}
                self.one(self.clients_of[site], f"x{k}", f, args, site=site)
                self.calls += 1
        finally:
            for c in self.clients_of.values():
                c.close()


class CrossSiteRun:
    """The cross-site clients, and the reads that watch the sides agree once the run is over."""

    def __init__(self, stack: SitesStack, history: History, clients: int, seed: int, timeout: float):
        self.stack, self.history, self.timeout = stack, history, timeout
        self.stop = threading.Event()
        self.in_doubt = self.not_sent = 0
        rnd = random.Random(seed)
        self.workers = [CrossSiteWorker(self, rnd.randrange(2 ** 32)) for _ in range(clients)]

    def node_of(self, endpoint: str) -> str:
        return ""

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def finish(self, timeout: float = 120.0) -> None:
        self.stop.set()
        for w in self.workers:
            w.join(timeout)
        assert not any(w.is_alive() for w in self.workers), "cross-site clients did not stop"

    def settle(self, timeout: float = AGREE_S + 5.0) -> float:
        """Reads every half on both sides until every pair agrees twice in a
        row (or ``timeout``): the reads the agreement check looks at. How
        long the sides took to agree."""
        reader = CrossSiteWorker(self, 0)
        start = time.monotonic()
        agreed_in_a_row = 0
        try:
            while agreed_in_a_row < 2 and time.monotonic() - start < timeout:
                seen = {}
                for k in range(self.stack.pairs):
                    for site in SITES:
                        a = half(site, k)
                        args = {x: a[x] for x in ("ns", "network", "peering")}
                        started = now()
                        client = reader.clients_of[site]
                        try:
                            result, outcome, code = call(client, "get_half", args), "ok", ""
                        except errors.NotFound:
                            result, outcome, code = None, "fail", "NOT_FOUND"
                        except errors.NetpeerError:
                            result, outcome, code = None, "info", "UNAVAILABLE"
                        self.history.op(process=reader.process, f="get_half", group=f"x{k}", args=args,
                                        call=started, ret=now(), outcome=outcome, result=result, error=code,
                                        site=site)
                        seen[(site, k)] = result["phase"] if result else (None if outcome == "fail" else "?")
                pairs = [(seen[("east", k)], seen[("west", k)]) for k in range(self.stack.pairs)]
                agree = all(p in (("Bound", "Bound"), (None, None)) or ("Bound" not in p and None in p
                                                                         and "?" not in p) for p in pairs)
                agreed_in_a_row = agreed_in_a_row + 1 if agree else 0
                time.sleep(0.2)   # not polling: a reader's pace; every round is recorded in the history
        finally:
            for c in reader.clients_of.values():
                c.close()
        return time.monotonic() - start


def run_sites(stack: SitesStack, directory: Path, settings, binary: Path):
    """``tests.linearizability.run.run`` for two sites: the within-site
    groups on each site and the cross-site clients, faults meanwhile; the
    sides' agreement read after; the final checks; the checker's verdict."""
    from tests.linearizability.run import Report, checked
    from tests.linearizability.stacks import nemesis
    began = time.monotonic()
    check_faults(stack.name, list(settings.faults), stack.FAULTS)
    directory.mkdir(parents=True, exist_ok=True)
    stack.make_networks()
    history = History(directory / "history.jsonl")
    history.meta(stack=stack.name, seed=settings.seed, faults=list(settings.faults), seconds=settings.seconds,
                 agree_within_s=AGREE_S)
    local = [Run(history, {site: stack.endpoint(site)}, stack.token(site), slots=2,
                 clients_per_slot=settings.clients_per_slot, calls_per_group=settings.calls_per_group,
                 seed=settings.seed + i, timeout=settings.timeout, prefix=f"{site[0]}{settings.prefix}")
             for i, site in enumerate(SITES)]
    cross = CrossSiteRun(stack, history, clients=4, seed=settings.seed, timeout=settings.timeout)
    rnd = random.Random(settings.seed)
    injected: dict[str, int] = {}
    started = time.monotonic()
    try:
        for r in local + [cross]:
            r.start()
        deadline = time.monotonic() + settings.seconds
        if settings.faults:
            injected.update(nemesis(stack, history, list(settings.faults), rnd, deadline, settings.every,
                                    rounds=settings.rounds))
        while time.monotonic() < deadline:   # not polling: the workload runs its time
            time.sleep(0.1)
        time.sleep(0.5)   # calls after the last fault, so that every group ends on answered calls
    finally:
        for r in local + [cross]:
            r.finish()
    seconds = time.monotonic() - started
    try:
        cross.settle()
    finally:
        history.close()
    final = stack.final(settings.sample, settings.seed)
    verdict = checked(binary, history.path, directory)
    return Report(stack.name, history.path, seconds, verdict, injected, final, time.monotonic() - began)
