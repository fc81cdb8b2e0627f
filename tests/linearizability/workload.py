"""The workload: concurrent clients calling netpeerd over gRPC on a small key
space, so that they contend, every call recorded in the history
(``tests.linearizability.history``).

The key space is cut into groups. A group is two namespaces of its own
(``<group>-x``, ``<group>-y``) holding three networks (x/n1, x/n2, y/n1);
its halves only ever name networks of the group, and its prefixes come from
a pool whose members overlap on purpose. A few clients share each group
and call, at random: create and delete networks (a network with a Bound
peering is refused deletion), create and delete halves from both sides
(also two at once, all or nothing), clear a half's pin on its remote's
uid, change a network's prefixes (into an overlap too), read a half's phase
and list a namespace's networks. Nothing a call on one group does reads or
changes another (names, prefixes and Bound peers stay inside it), which is
what lets the checker take each group as an independent object
(tests/linearizability/checker/netmodel.go). Clients move on to a fresh
group after a number of calls, so each group's history stays small enough
to check quickly however long the run.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from typing import Callable

import grpc

from netpeer import errors
from netpeer.api.client import Client, never_reached
from netpeer.api.errors import code_for
from netpeer.reasons import Reason
from tests.linearizability.history import History, now

#: Prefix sets a network takes: (subnets, routes). 10.0.0.0/23 overlaps the
#: first two, and the two routes overlap each other.
POOL: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("10.0.0.0/24",), ()),
    (("10.0.1.0/24",), ()),
    (("10.0.0.0/23",), ()),
    (("10.0.2.0/24",), ("10.0.8.0/24",)),
    (("10.0.3.0/24",), ("10.0.8.0/23",)),
    (("10.0.4.0/24",), ()),
)

#: Answers that say a call changed nothing and that the model knows.
MODELLED = {"NOT_FOUND", "ALREADY_EXISTS", "FAILED_PRECONDITION"}

WEIGHTS = (("create_network", 1.5), ("update_network", 2.0), ("delete_network", 1.0), ("create_peering", 3.0),
           ("delete_peering", 2.5), ("get_peering", 3.0), ("list_networks", 1.0), ("create_peerings", 1.0),
           ("unpin_peering", 0.5))


@dataclasses.dataclass(frozen=True)
class Group:
    """One independent key space."""

    name: str

    @property
    def namespaces(self) -> tuple[str, str]:
        return f"{self.name}-x", f"{self.name}-y"

    @property
    def networks(self) -> tuple[tuple[str, str], ...]:
        x, y = self.namespaces
        return (x, "n1"), (x, "n2"), (y, "n1")


def peering_name(remote: tuple[str, str]) -> str:
    return f"to-{remote[0]}-{remote[1]}"


def next_op(rnd: random.Random, group: Group) -> tuple[str, dict]:
    """A random call on ``group``: (f, args)."""
    f = rnd.choices([w[0] for w in WEIGHTS], [w[1] for w in WEIGHTS])[0]
    nets = group.networks
    if f in ("create_network", "update_network"):
        ns, net = rnd.choice(nets)
        subnets, routes = rnd.choice(POOL)
        return f, {"ns": ns, "network": net, "subnets": list(subnets), "routes": list(routes)}
    if f == "delete_network":
        ns, net = rnd.choice(nets)
        return f, {"ns": ns, "network": net}
    if f == "list_networks":
        return f, {"ns": rnd.choice(group.namespaces)}
    if f == "create_peerings":
        # Both halves of a pair at once (as one owner of both sides would), or any two.
        a, b = rnd.sample(nets, 2)
        c, d = (b, a) if rnd.random() < 0.7 else rnd.sample(nets, 2)
        return f, {"halves": [{"ns": x[0], "network": x[1], "peering": peering_name(y), "remote_ns": y[0],
                               "remote_network": y[1]} for x, y in ((a, b), (c, d))]}
    a, b = rnd.sample(nets, 2)
    args = {"ns": a[0], "network": a[1], "peering": peering_name(b)}
    if f == "create_peering":
        args.update(remote_ns=b[0], remote_network=b[1])
    return f, args


def _view(n: dict) -> dict:
    return {"subnets": n["subnets"], "routes": n["routes"],
            "peerings": [{"name": p["name"], "phase": p["phase"], "reason": p["reason"]} for p in n["peerings"]]}


def call(client: Client, f: str, a: dict):
    """Runs one call of the workload; what the history keeps of its answer."""
    if f == "create_network":
        return _view(client.create_network(a["ns"], a["network"], a["subnets"], a["routes"]))
    if f == "update_network":
        return _view(client.update_network(a["ns"], a["network"], subnets=a["subnets"], routes=a["routes"]))
    if f == "delete_network":
        client.delete_network(a["ns"], a["network"])
        return None
    if f in ("create_peering", "create_half"):
        p = client.create_peering(a["ns"], a["network"], a["peering"], a["remote_network"], a["remote_ns"],
                                  remote_site=a.get("remote_site", ""))
        return {"phase": p["phase"], "reason": p["reason"]}
    if f in ("delete_peering", "delete_half"):
        client.delete_peering(a["ns"], a["network"], a["peering"])
        return None
    if f == "create_peerings":
        made = client.create_peerings([{"namespace": h["ns"], "network": h["network"], "name": h["peering"],
                                        "remote_namespace": h["remote_ns"], "remote_network": h["remote_network"]}
                                       for h in a["halves"]])
        return {"peerings": [{"name": p["name"], "phase": p["phase"], "reason": p["reason"]} for p in made]}
    if f == "unpin_peering":
        p = client.update_peering(a["ns"], a["network"], a["peering"], remote_uid="")
        return {"phase": p["phase"], "reason": p["reason"]}
    if f in ("get_peering", "get_half"):
        p = client.get_peering(a["ns"], a["network"], a["peering"])
        return {"phase": p["phase"], "reason": p["reason"]}
    if f == "list_networks":
        return {"networks": [{"name": n["name"], **_view(n)} for n in client.list_networks(a["ns"])]}
    if f == "status":
        return {"leading": bool(client.status()["leading"])}
    raise ValueError(f)


class RecordingClient(Client):
    """The API client, noting for each failed call whether a server answered
    it (its status carries the request id netpeerd sends back) or it never
    left (nothing listened): both mean the call was not applied, when the
    answer is UNAVAILABLE; anything else (a timeout, a connection lost after
    the request went out) leaves it in doubt."""

    failed_at: str | None = None

    def _call(self, method, request):
        self.failed_at = None
        return super()._call(method, request)

    def _error(self, exc: grpc.RpcError, endpoint: str, method: str):
        self.failed_at = endpoint
        error = super()._error(exc, endpoint, method)
        trailer = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
        # A deadline is never taken as an answer: the call may have run after it.
        error.answered = "x-request-id" in trailer and exc.code() == grpc.StatusCode.UNAVAILABLE
        error.not_sent = never_reached(exc)
        return error

    @property
    def last_endpoint(self) -> str:
        """The endpoint that answered the last call (or failed it last)."""
        return self.failed_at or self.endpoints[self._current]


def outcome_of(exc: errors.NetpeerError) -> tuple[str, str]:
    """(outcome, code) of a failed call."""
    code = code_for(exc).name if type(exc) is not errors.NetpeerError else exc.message.split(":")[0]
    if isinstance(exc, errors.Unavailable):
        sure = getattr(exc, "not_sent", False) or (getattr(exc, "answered", False)
                                                  and exc.reason != Reason.OUTCOME_UNKNOWN)
        return ("fail" if sure else "info"), "UNAVAILABLE"
    return "fail", code


class Worker(threading.Thread):
    """One client: calls at random on the groups of its slot until stopped.
    ``clients`` are its connections (one per order of the endpoints, picked
    at random for each call, so that every replica serves it)."""

    def __init__(self, run: "Run", slot: int, index: int, seed: int):
        super().__init__(name=f"client-{slot}-{index}", daemon=True)
        self.run_ = run
        self.slot = slot
        self.rnd = random.Random(seed)
        self.process = run.history.process()
        self.clients = [RecordingClient(e, run.token, timeout=run.timeout) for e in run.endpoint_orders()]
        self.calls = 0

    def run(self) -> None:
        try:
            while not self.run_.stop.is_set():
                group = self.run_.group(self.slot, self.calls // self.run_.calls_per_group)
                f, args = next_op(self.rnd, group)
                self.one(self.rnd.choice(self.clients), group.name, f, args)
                self.calls += 1
        finally:
            for c in self.clients:
                c.close()

    def one(self, client: RecordingClient, group: str, f: str, args: dict, site: str = "") -> None:
        """One call through ``client``, recorded."""
        start = now()
        result, outcome, code, message = None, "ok", "", ""
        try:
            result = call(client, f, args)
        except errors.NetpeerError as exc:
            outcome, code = outcome_of(exc)
            message = exc.message
            if isinstance(exc, errors.Unavailable):
                time.sleep(self.rnd.uniform(0.02, 0.1))   # as a client that retries would
            if getattr(exc, "not_sent", False):
                self.run_.not_sent += 1   # nothing listened: it tells nothing, and is not kept
                return
        end = now()
        node = self.run_.node_of(client.last_endpoint) if not site else ""
        self.run_.history.op(process=self.process, f=f, group=group, args=args, call=start, ret=end,
                             outcome=outcome, result=result, error=code, message=message, node=node, site=site)
        if outcome == "info":
            self.process = self.run_.history.process()   # that call may still take effect: a new process
            self.run_.in_doubt += 1


class StatusProbe(threading.Thread):
    """Asks one replica every ``interval`` whether it leads (the lease
    partition of the checker)."""

    def __init__(self, run: "Run", node: str, endpoint: str, interval: float = 0.05):
        super().__init__(name=f"status-{node}", daemon=True)
        self.run_, self.node, self.interval = run, node, interval
        self.client = RecordingClient(endpoint, run.token, timeout=min(run.timeout, 2.0))
        self.process = run.history.process()

    def run(self) -> None:
        try:
            while not self.run_.stop.wait(self.interval):
                start = now()
                try:
                    result, outcome, code, message = call(self.client, "status", {}), "ok", "", ""
                except errors.NetpeerError as exc:
                    result, (outcome, code), message = None, outcome_of(exc), exc.message
                self.run_.history.op(process=self.process, f="status", group="lease", args={}, call=start,
                                     ret=now(), outcome=outcome, result=result, error=code, message=message,
                                     node=self.node)
        finally:
            self.client.close()


class Run:
    """One workload run against ``endpoints`` (node name -> endpoint)."""

    def __init__(self, history: History, endpoints: dict[str, str], token: str, *, slots: int = 4,
                 clients_per_slot: int = 3, calls_per_group: int = 60, seed: int = 1, timeout: float = 10.0,
                 prefix: str = "g", probe_status: bool = False):
        self.history = history
        self.endpoints = endpoints
        self.token = token
        self.timeout = timeout
        self.calls_per_group = calls_per_group
        self.prefix = prefix
        self.stop = threading.Event()
        self.in_doubt = 0
        self.not_sent = 0
        rnd = random.Random(seed)
        self.workers = [Worker(self, slot, i, rnd.randrange(2 ** 32)) for slot in range(slots)
                        for i in range(clients_per_slot)]
        self.probes = [StatusProbe(self, node, e) for node, e in endpoints.items()] if probe_status else []

    def endpoint_orders(self) -> list[str]:
        """Every rotation of the endpoints, as a comma-separated list."""
        items = list(self.endpoints.values())
        return [",".join(items[k:] + items[:k]) for k in range(len(items))]

    def node_of(self, endpoint: str) -> str:
        return next((n for n, e in self.endpoints.items() if e == endpoint), endpoint)

    def group(self, slot: int, epoch: int) -> Group:
        return Group(f"{self.prefix}{slot}e{epoch}")

    def start(self) -> None:
        for t in self.workers + self.probes:
            t.start()

    def finish(self, timeout: float = 120.0) -> None:
        """Stops the clients (each ends its call in flight) and waits for them."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.workers + self.probes:
            t.join(max(0.1, deadline - time.monotonic()))
        hung = [t.name for t in self.workers + self.probes if t.is_alive()]
        assert not hung, f"clients did not stop within {timeout:.0f}s: {hung}"

    def groups_used(self) -> list[Group]:
        return sorted({self.group(w.slot, e) for w in self.workers
                       for e in range(w.calls // self.calls_per_group + 1)}, key=lambda g: g.name)


def run_for(run: Run, seconds: float, during: Callable[[float], None] | None = None) -> None:
    """Runs the workload for ``seconds``, and as long as ``during(deadline)``
    (the faults, run meanwhile in this thread) goes on."""
    run.start()
    deadline = time.monotonic() + seconds
    try:
        if during is not None:
            during(deadline)
        while time.monotonic() < deadline:   # not polling: the workload runs its time
            time.sleep(0.1)
        time.sleep(0.5)   # calls after the last fault, so that every group ends on answered calls
    finally:
        run.finish()
