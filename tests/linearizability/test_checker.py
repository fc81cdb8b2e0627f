"""lincheck itself: its model is netpeer's semantics, it flags what is not
linearizable and names the operation, it reads unknown outcomes as Porcupine
should, and it refuses a file that is not a history with one line.

The model is checked against netpeer's own service: thousands of random
calls of the workload, one at a time, on a ``Service`` in this process
(``tests.linearizability.inprocess``). A history of one client has exactly
one linearization, so any answer the model gets wrong is a violation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.linearizability import checker
from tests.linearizability.inprocess import sequential_history

CALLS = 6000


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def shown(visualization: Path) -> set[str]:
    """The operations Porcupine's page draws (the data it renders)."""
    html = visualization.read_text()
    start = html.index("const data = ") + len("const data = ")
    data, _ = json.JSONDecoder().raw_decode(html[start:])
    return {e["Description"] for p in data["Partitions"] for e in p["History"]}


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("seq")
    counts = sequential_history(d / "history.jsonl", d / "store.db", CALLS, seed=20261127)
    assert counts["ok"] > CALLS // 4 and counts["fail"] > CALLS // 4, counts
    return d / "history.jsonl"


def test_netpeers_own_answers_are_linearizable_under_the_model(lincheck, sequential):
    verdict = checker.check(lincheck, sequential)
    assert verdict.linearizable, verdict.summary
    s = verdict.summary
    assert s["operations"] == s["checked"] == CALLS
    # The history went through every phase and reason the model knows, and every call succeeded and failed.
    seen = set()
    for r in lines(sequential):
        result = r.get("result") or {}
        halves = result.get("peerings", []) + [p for n in result.get("networks", []) for p in n["peerings"]]
        seen |= {(p["phase"], p["reason"]) for p in halves + ([result] if "phase" in result else [])}
    assert {("Pending", "AwaitingRemote"), ("Bound", "Bound"), ("Failed", "OverlappingPrefixes"),
            ("Pending", "RemoteWithdrawn"), ("Pending", "RemoteReplaced")} <= seen, seen
    outcomes = {(r["f"], r["outcome"]) for r in lines(sequential)}
    for f in ("create_network", "update_network", "delete_network", "create_peering", "create_peerings",
              "delete_peering", "unpin_peering", "get_peering"):
        assert {(f, "ok"), (f, "fail")} <= outcomes, f


def test_a_wrong_answer_is_flagged_and_the_visualisation_names_it(lincheck, sequential, workdir):
    records = lines(sequential)
    k = next(i for i, r in enumerate(records) if r["f"] == "get_peering" and r["outcome"] == "ok"
             and r["result"]["phase"] == "Bound")
    records[k]["result"] = {"phase": "Pending", "reason": "RemoteWithdrawn"}
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", records), out=workdir / "out")
    assert verdict.exit_code == 1 and verdict.summary["verdict"] == "not linearizable"
    [v] = verdict.violations
    a = records[k]["args"]
    assert v["operation"] == f"get_peering {a['ns']}/{a['network']}/{a['peering']} => Pending/RemoteWithdrawn"
    assert v["line"] == k + 1 and v["group"] == records[k]["group"]
    assert v["operation"] in shown(Path(v["visualization"]))


def _op(process, f, call, ret, outcome="ok", result=None, error="", **args):
    r = {"type": "op", "process": process, "f": f, "group": "g", "args": {"ns": "g-x", "network": "n1", **args},
         "call": call, "return": ret, "outcome": outcome}
    if result is not None:
        r["result"] = result
    if error:
        r["error"] = error
    return r


VIEW = {"subnets": ["10.0.0.0/24"], "routes": [], "peerings": []}
LISTED = {"networks": [{"name": "n1", **VIEW}]}
NONE = {"networks": []}


@pytest.mark.parametrize("create, later_read, linearizable", [
    # A create answered ok, then a list that does not show it: a lost write.
    ({"outcome": "ok", "result": VIEW}, NONE, False),
    ({"outcome": "ok", "result": VIEW}, LISTED, True),
    # No answer: it may have happened, or not, or happen later.
    ({"outcome": "info", "error": "UNAVAILABLE"}, LISTED, True),
    ({"outcome": "info", "error": "UNAVAILABLE"}, NONE, True),
    # netpeerd answered UNAVAILABLE: nothing was changed, so no read may see it.
    ({"outcome": "fail", "error": "UNAVAILABLE"}, LISTED, False),
    ({"outcome": "fail", "error": "UNAVAILABLE"}, NONE, True),
])
def test_outcomes_of_a_write_bind_later_reads(lincheck, workdir, create, later_read, linearizable):
    records = [
        _op(0, "create_network", 10, 20, subnets=["10.0.0.0/24"], routes=[], **create),
        _op(1, "list_networks", 30, 40, result=later_read),
        _op(1, "list_networks", 50, 60, result=later_read),
    ]
    records[1]["args"] = records[2]["args"] = {"ns": "g-x"}
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", records))
    assert verdict.linearizable is linearizable, verdict.summary


def test_an_unanswered_write_may_take_effect_long_after_its_caller_gave_up(lincheck, workdir):
    records = [
        _op(0, "create_network", 10, 20, "info", error="UNAVAILABLE", subnets=["10.0.0.0/24"], routes=[]),
        {**_op(1, "list_networks", 30, 40, result=NONE), "args": {"ns": "g-x"}},
        {**_op(1, "list_networks", 5000, 5010, result=LISTED), "args": {"ns": "g-x"}},
        {**_op(1, "list_networks", 6000, 6010, result=NONE), "args": {"ns": "g-x"}},
    ]
    assert checker.check(lincheck, write(workdir / "h.jsonl", records[:3])).linearizable
    # Once seen, it stays (nothing deleted it).
    assert not checker.check(lincheck, write(workdir / "h.jsonl", records)).linearizable


def _status(process, node, call, ret, leading):
    return {"type": "op", "process": process, "f": "status", "node": node, "args": {}, "call": call,
            "return": ret, "outcome": "ok", "result": {"leading": leading}}


S = 1_000_000_000


def test_two_replicas_leading_within_one_lease_is_flagged(lincheck, workdir):
    meta = {"type": "meta", "lease_s": 2.0}
    # r1 leads, r2 takes over (the lease ran out), r1 claims again 0.5 s later, r2 again.
    overlap = [meta, _status(0, "r1", 0, S // 100, True), _status(1, "r2", 3 * S, 3 * S + S // 100, True),
               _status(0, "r1", 3 * S + S // 2, 3 * S + S // 2 + S // 100, True),
               _status(1, "r2", 4 * S, 4 * S + S // 100, True)]
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", overlap), out=workdir / "out")
    assert not verdict.linearizable
    [v] = verdict.violations
    assert v["group"] == "lease" and v["operation"].startswith("status r") and v["operation"].endswith("leading")
    # The same claims a lease apart are legal; "not leading" never constrains.
    apart = [meta, _status(0, "r1", 0, S // 100, True), _status(1, "r2", 3 * S, 3 * S + S // 100, True),
             _status(0, "r1", 3 * S + S // 2, 3 * S + S // 2 + S // 100, False),
             _status(0, "r1", 6 * S, 6 * S + S // 100, True), _status(1, "r2", 6 * S, 6 * S + S // 100, False)]
    assert checker.check(lincheck, write(workdir / "h.jsonl", apart)).linearizable


@pytest.mark.parametrize("content, message", [
    ("", "holds no operation"),
    ("{not json\n", ":1: not a JSON object"),
    ('{"type": "op"}\n', ':1: unknown operation f=""'),
    ('{"type": "nothing"}\n', ':1: type "nothing" is not op, nemesis or meta'),
    ('{"type": "op", "process": 0, "f": "get_peering", "group": "g", "call": 5, "return": 4, "outcome": "ok", '
     '"args": {"ns": "a", "network": "b", "peering": "c"}, "result": {}}\n', ":1: get_peering: returns (4) before"),
    ('{"type": "op", "process": 0, "f": "get_peering", "group": "g", "call": 5, "return": 6, "outcome": "ok", '
     '"args": {"ns": "a", "network": "b"}, "result": {}}\n', ":1: get_peering: args.peering is missing"),
    ('{"type": "op", "process": 0, "f": "status", "node": "r1", "call": 5, "return": 6, "outcome": "ok", '
     '"result": {"leading": true}}\n', "status operations need the lease"),
])
def test_a_file_that_is_not_a_history_gets_one_line(lincheck, workdir, content, message):
    path = workdir / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(checker.CheckerError) as exc:
        checker.check(lincheck, path)
    text = str(exc.value)
    assert message in text and "\n" not in text and text.startswith("lincheck: ") and str(path) in text


def test_a_missing_file_and_bad_arguments_get_one_line(lincheck, workdir):
    missing = subprocess.run([str(lincheck), "check", str(workdir / "nope.jsonl")], capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr == f"lincheck: {workdir / 'nope.jsonl'}: cannot be read (no such file or directory)\n"
    usage = subprocess.run([str(lincheck), "verify"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "usage: lincheck check" in usage.stderr


def _half(process, f, site, call, ret, outcome="ok", result=None, error=""):
    mine, other = ("xe0", "xw0") if site == "east" else ("xw0", "xe0")
    remote = "west" if site == "east" else "east"
    args = {"ns": mine, "network": "n", "peering": f"to-{remote}"}
    if f == "create_half":
        args.update(remote_site=remote, remote_ns=other, remote_network="n")
    r = {"type": "op", "process": process, "f": f, "group": "x0", "site": site, "args": args, "call": call,
         "return": ret, "outcome": outcome}
    if result is not None:
        r["result"] = result
    if error:
        r["error"] = error
    return r


BOUND, WITHDRAWN = {"phase": "Bound", "reason": "Bound"}, {"phase": "Pending", "reason": "RemoteWithdrawn"}


@pytest.mark.parametrize("east_reads, agree", [(WITHDRAWN, True), (BOUND, False)])
def test_sites_must_agree_once_healed(lincheck, workdir, east_reads, agree):
    records = [{"type": "meta", "agree_within_s": 1.0},
               _half(0, "create_half", "east", 0, S // 10, result=BOUND),
               _half(1, "create_half", "west", 0, S // 10, result=BOUND),
               _half(1, "delete_half", "west", S, S + S // 10),
               {"type": "nemesis", "kind": "cut-wan", "target": "east", "start": S // 2, "end": 2 * S},
               # 3 s after the last fault healed and the last write: east still says Bound, or has heard.
               _half(2, "get_half", "east", 5 * S, 5 * S + S // 10, result=east_reads),
               _half(2, "get_half", "west", 5 * S, 5 * S + S // 10, "fail", error="NOT_FOUND")]
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", records))
    sites = verdict.summary["sites"]
    assert verdict.linearizable is agree and (not sites["disagreements"]) is agree, verdict.summary
    if not agree:
        assert "xe0/n/to-west reads Bound 3.0s after healing (the other half is absent)" in \
            sites["disagreements"][0]


def test_a_site_that_forgets_its_own_half_is_flagged(lincheck, workdir):
    records = [{"type": "meta", "agree_within_s": 1.0},
               _half(0, "create_half", "east", 0, 10, result=BOUND),
               _half(0, "get_half", "east", 20, 30, "fail", error="NOT_FOUND")]
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", records))
    assert not verdict.linearizable
    assert verdict.violations[0]["operation"] == "get_half east:xe0/n/to-west => NOT_FOUND"


def test_the_tools_refuse_bad_input_in_one_line(workdir):
    """The picture of a violation needs one; the long run needs faults its stacks can inject."""
    import sys
    summary = workdir / "summary.json"
    summary.write_text(json.dumps({"verdict": "linearizable", "violations": []}))
    plot = subprocess.run([sys.executable, "-m", "tests.linearizability.plot", str(workdir / "h.jsonl"),
                           str(summary), str(workdir / "v.png")], capture_output=True, text=True)
    assert (plot.returncode, plot.stderr) == (2, f"plot: {summary}: names no violation\n")
    for argv, line in [(["--stacks", "sqlite", "--faults", "sqlite=pause-leader"],
                        "jepsen: fault 'pause-leader' cannot be injected into the sqlite stack (it can: kill)\n"),
                       (["--stacks", "mars"], "jepsen: --stacks: 'mars' is not a stack (known: sqlite, replicas, "
                                              "sites)\n"),
                       (["--faults", "replicas"], "jepsen: --faults: 'replicas' is not STACK=KIND[,KIND...] for one "
                                                  "of sqlite, replicas, sites\n")]:
        run = subprocess.run([sys.executable, "-m", "tests.linearizability", *argv], capture_output=True, text=True)
        assert (run.returncode, run.stderr) == (2, line), run


def _batch(process, call, ret, outcome, result=None, error=""):
    halves = [{"ns": "g-x", "network": "n1", "peering": "to-g-y-n1", "remote_ns": "g-y", "remote_network": "n1"},
              {"ns": "g-y", "network": "n1", "peering": "to-g-x-n1", "remote_ns": "g-x", "remote_network": "n1"}]
    r = {"type": "op", "process": process, "f": "create_peerings", "group": "g", "args": {"halves": halves},
         "call": call, "return": ret, "outcome": outcome}
    if result is not None:
        r["result"] = result
    if error:
        r["error"] = error
    return r


BOTH = {"peerings": [{"name": "to-g-y-n1", "phase": "Bound", "reason": "Bound"},
                     {"name": "to-g-x-n1", "phase": "Bound", "reason": "Bound"}]}


@pytest.mark.parametrize("batch, first_half_after, linearizable", [
    (("ok", BOTH, ""), {"phase": "Bound", "reason": "Bound"}, True),
    # All or nothing: a refused batch leaves no half; an accepted one both.
    (("fail", None, "NOT_FOUND"), None, True),
    (("fail", None, "NOT_FOUND"), {"phase": "Pending", "reason": "AwaitingRemote"}, False),
    (("ok", BOTH, ""), None, False),
])
def test_a_batch_of_halves_is_all_or_nothing(lincheck, workdir, batch, first_half_after, linearizable):
    y = {**_op(0, "create_network", 0, 10, subnets=["10.0.1.0/24"], routes=[], result={**VIEW, "subnets": ["10.0.1.0/24"]}),
         "args": {"ns": "g-y", "network": "n1", "subnets": ["10.0.1.0/24"], "routes": []}}
    records = [_op(0, "create_network", 0, 10, subnets=["10.0.0.0/24"], routes=[], result=VIEW)]
    if batch[2] != "NOT_FOUND":
        records.append(y)       # without g-y/n1 the second half's network is missing: NOT_FOUND
    records.append(_batch(1, 20, 30, *batch))
    read = _op(2, "get_peering", 40, 50, peering="to-g-y-n1")
    read.update({"outcome": "ok", "result": first_half_after} if first_half_after else
                {"outcome": "fail", "error": "NOT_FOUND"})
    verdict = checker.check(lincheck, write(workdir / "h.jsonl", records + [read]))
    assert verdict.linearizable is linearizable, verdict.summary
