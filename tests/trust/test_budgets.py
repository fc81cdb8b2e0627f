"""What answers that keep nothing may cost other tenants (issue 29), on a
real netpeerd process and real OVN.

- Validate-only batches held the write lock: eight loops of validate-only
  ``BatchCreatePeerings`` of 1,000 requests, in a process of their own,
  must leave another tenant's writes about as fast as they were just
  before, once the attacker's burst is spent (p50 within 3x, no write
  slower than the validation burst plus a second), and the attacker is
  told RESOURCE_EXHAUSTED with when to retry.
- A third tenant's prefixes could be probed: a/na, with b's half towards it,
  halves its subnet with validate-only creates towards c/nc, Bound to b;
  the answers never name c's network, namespace or prefix, and the search
  is stopped before it finds the /24.

Each test prints its figures as one ``[name] {json}`` line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from netpeer import errors
from tests.support import ROOT, netpeerd_process
from tests.trust import report

WRITES, GAP = 150, 0.02   # the victim's writes, before and during, one every GAP s at most (about 5 s)
THREADS, SIZE = 8, 1000
BURST = 2.0          # TokenLimits.validate_only_burst, in seconds


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def figures(name: str, values: dict) -> None:
    for key, value in values.items():
        report.record(name, key, value)
    print(f"[{name}] {json.dumps(values, sort_keys=True)}")


def timed_writes(client, n: int, gap: float = 0.0) -> list[float]:
    """The victim's writes: its routes, back and forth (one OVN transaction each)."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        client.update_network("victim", "net-v", routes=[f"10.200.{i % 2}.0/24"])
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(max(0.0, gap - out[-1] / 1000))
    return out


@pytest.fixture
def process(ovn, state_dir):
    d = netpeerd_process(state_dir / "np", ovn.nb_remote)
    d.start(sweep=True)
    try:
        yield d
    finally:
        d.stop()


def test_validate_only_batches_do_not_hold_other_tenants_writes(process, state_dir):
    d = process
    with d.client() as admin:
        victim_token = admin.create_token(["victim"])["token"]
        attacker_token = admin.create_token(["mallory"])["token"]
        admin.create_network("victim", "net-v", ["10.1.0.0/24"])
        for i in range(4):   # 250 halves each: under peerings_per_network
            admin.create_network("mallory", f"m{i}", [f"10.{10 + i}.0.0/24"])
    out = state_dir / "flood.json"
    from netpeer.api.client import Client
    with Client(d.endpoint, victim_token, timeout=60) as victim:
        timed_writes(victim, 10)                                  # warm up
        load_before = os.getloadavg()[0]
        before = timed_writes(victim, WRITES, GAP)
        flood = subprocess.Popen(
            [sys.executable, "-m", "tests.trust.flood", d.endpoint, attacker_token, "mallory", "4", str(THREADS),
             str(SIZE), str(out)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=f"{ROOT}:{ROOT / 'dev'}"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(BURST + 1.0)                               # the loops are at it, past their burst
            during = timed_writes(victim, WRITES, GAP)
            load_during = os.getloadavg()[0]
        finally:
            flood.terminate()                                     # by its pid
            _, err = flood.communicate(timeout=120)
    assert flood.returncode == 0, err.decode()[-2000:]
    got = json.loads(out.read_text())
    p50b, p99b, p50d, p99d = (percentile(before, .5), percentile(before, .99), percentile(during, .5),
                              percentile(during, .99))
    figures("validate-only flood", {
        "victim write ms before p50/p99": [round(p50b, 1), round(p99b, 1)],
        "victim write ms during p50/p99/max": [round(p50d, 1), round(p99d, 1), round(max(during), 1)],
        "ratio p50/p99": [round(p50d / p50b, 2), round(p99d / p99b, 2)],
        "attacker batches answered / refused": [got["ok"], got["refused"]],
        "attacker batch s median": round(percentile(got["ok_seconds"], .5), 2) if got["ok_seconds"] else None,
        "retry in s (min/max)": [min(got["retry_after"]), max(got["retry_after"])] if got["retry_after"] else None,
        "load before/during": [round(load_before, 2), round(load_during, 2)],
        "threads x requests": [THREADS, SIZE]})
    assert not got["other"], got["other"][:3]
    assert got["refused"] > 0 and got["retry_after"], "the attacker was never told to wait"
    assert all(0 < r <= 60 for r in got["retry_after"])
    assert p50d <= 3 * p50b, (p50b, p50d)
    assert max(during) <= (BURST + 1.0) * 1000, max(during)


def probe(victim, subnet: str) -> dict:
    victim.update_network("a", "na", subnets=[subnet])
    return victim.create_peering("a", "na", "to-b", "nb", "b", validate_only=True)


def test_a_third_tenants_prefix_cannot_be_found_by_probing(process):
    d = process
    with d.client() as admin:
        tokens = {ns: admin.create_token([ns])["token"] for ns in ("a", "b", "c")}
        admin.create_network("a", "na", ["10.1.0.0/24"])
        admin.create_network("b", "nb", ["192.168.5.0/24"])
        admin.create_network("c", "nc", ["10.121.37.0/24"])
    from netpeer.api.client import Client
    clients = {ns: Client(d.endpoint, t, timeout=30) for ns, t in tokens.items()}
    try:
        a, b, c = clients["a"], clients["b"], clients["c"]
        b.create_peering("b", "nb", "to-c", "nc", "c")
        assert c.create_peering("c", "nc", "to-b", "nb", "b")["phase"] == "Bound"
        b.create_peering("b", "nb", "to-a", "na", "a")               # b's half only
        # Overlapping b's own network (and c's): only that is told.
        p = probe(a, "192.168.0.0/16")
        assert p["phase"] == "Failed" and "already peered" not in p["message"]
        # The search: halve 10.0.0.0/8 towards c/nc's /24, as in the issue.
        lo, length, told, answers, refused = 10 << 24, 8, 0, [], None
        for i in range(1, 20):
            half = ".".join(str((lo >> s) & 255) for s in (24, 16, 8, 0)) + f"/{length + 1}"
            try:
                p = probe(a, half)
            except errors.ResourceExhausted as exc:
                refused = (i, exc.message)
                break
            answers.append(p["message"])
            length += 1
            if p["phase"] == "Failed":
                told += 1
            else:
                lo += 1 << (32 - length)
        figures("third-network probing", {"probes answered": len(answers), "conflicts told": told,
                                          "refused at probe": refused[0] if refused else None,
                                          "prefix length reached": length, "load": round(os.getloadavg()[0], 2)})
        assert refused is not None, f"{len(answers)} probes answered, down to a /{length}: {answers[-3:]}"
        assert refused[0] <= 12 and length < 24, refused
        for m in answers:   # the third network is never named, nor its namespace
            assert "c/nc" not in m and "nc" not in m.split() and " c/" not in m, m
        assert re.fullmatch(r".*limits\.conflict_disclosures_per_minute = 5\); nothing was changed; "
                            r"retry in \d+\.\d s", refused[1]), refused[1]
        assert a.list_peerings("a", "na") == []
    finally:
        for x in clients.values():
            x.close()
