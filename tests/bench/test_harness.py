"""Smoke test of the benchmark harness (``python -m bench --quick``): tiny
sizes, every section runs end to end and lands in the JSON. Timings are
never asserted here; the targets live in docs/performance.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.chassis, pytest.mark.pulumi]


def test_quick_run_writes_every_section(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={k: v for k, v in os.environ.items() if not k.startswith("NETPEER_")})
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = json.loads((out / "results.json").read_text())
    for section in ("scale", "bulk", "stores", "pulumi", "tofu", "shapes", "sites", "region", "summary", "meta"):
        assert section in data, section
    summary = data["summary"]
    for section in ("bind", "traffic", "northd", "memory", "cli", "bulk", "pulumi", "shapes", "targets"):
        assert summary[section], f"summary section {section!r} is empty"
    for size in data["scale"].values():
        assert {"bind", "traffic", "lflows", "memory_end_kib"} <= set(size)
    bulk = data["bulk"]
    assert bulk["rows_api"] == bulk["rows_raw"] == bulk["rows_batch"] == bulk["rows_ovn_alone"]
    assert bulk["ovn_alone"]["rows_changed"] > 0
    md = (out / "results.md").read_text()
    for heading in ("## Targets", "Bulk apply", "API in batches", "OVN layer alone",
                    "OpenTofu and Pulumi, same resources"):
        assert heading in md, heading
    assert set(data["tofu"]["startup"]) == {"plain", "mutual TLS"}
    assert set(data["stores"]["variants"]) == {"sqlite", "postgresql x1", "postgresql x2"}
    assert "## Stores: SQLite, PostgreSQL x1, PostgreSQL x2" in md
    sites = data["sites"]
    assert sites["time_to_traffic"]["cross_site"]["n"], (sites["time_to_traffic"], proc.stderr[-3000:])
    assert sites["failover"]["outage"]["n"], (sites["failover"], proc.stderr[-3000:])
    assert "## Cross-site" in md
    assert summary["sizing"]["table"] and "## Sizing: networks per site" in md
    region = data["region"]   # bench/region.py: before and after side by side, simulated sites, real OVN-IC
    before, after = region["in_process"]["before"], region["in_process"]["after"]
    assert (before["protocol"], after["protocol"]) == ("whole sides", "changes")
    assert set(before["sizes"]) == set(after["sizes"]) == set(region["netpeerds"]["sizes"])
    assert all(v["bind"]["n"] for side in (before, after, region["netpeerds"]) for v in side["sizes"].values())
    assert all(g["bind"]["n"] and len(g["partitions"]) == 2 for g in region["regions"])
    assert all(v["time_to_traffic"]["n"] and v["first_attachment"]["keyed"]["n"]
               for v in region["ovn"]["sizes"].values())
    assert any(name.startswith("cross-site bind p99") for name in summary["targets"])
    assert "## Region: many sites, and one link as its pairs grow" in md
