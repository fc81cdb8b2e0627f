"""The targets table of ``make bench`` (bench/report.py): netpeerd's memory,
start-up and CPU at rest at 10,000 networks come out of the scale section
of the same run, each with the verdict its figure earns."""

from __future__ import annotations

from bench import report


def size(rss_mib, start_s, idle_pct, after_start_mib=None):
    return {"networks": 0, "bound_pairs": 0,
            "bind": {"bind": {"p50_ms": 5.0, "p99_ms": 9.0, "max_ms": 10.0, "n": 3}, "unbind": {"p50_ms": 3.0}},
            "netpeerd_start_s": start_s, "netpeerd_idle_cpu_pct": idle_pct,
            "memory_after_start_kib": {"netpeerd": {"VmRSS": (after_start_mib or rss_mib) * 1024}},
            "memory_end_kib": {"netpeerd": {"VmRSS": rss_mib * 1024, "VmHWM": rss_mib * 1024},
                               "ovn": {"ovsdb-server-nb": 1024}}}


def targets(scale):
    return report.summarize({"scale": scale})["targets"]


def test_netpeerd_rows_come_from_the_10000_size():
    t = targets({"1000": size(900, 30.0, 5.0), "10000": size(500.0, 8.2, 0.46, after_start_mib=497)})
    assert t["netpeerd memory at 10,000 networks ≤ 535 MiB"] == {
        "value": 500.0, "target": 1606 / 3, "unit": " MiB", "met": True}
    assert t["start-up at 10,000 networks < 10 s (first sweep completed)"]["met"] is True
    assert t["sweep CPU at rest < 1% of a core at 10,000 networks"]["value"] == 0.46


def test_each_row_says_no_when_its_figure_is_over():
    t = targets({"10000": size(1606.0, 38.1, 11.5)})
    met = {name: row["met"] for name, row in t.items() if "netpeerd" in name or "start-up" in name
           or "sweep CPU" in name}
    assert met == {"netpeerd memory at 10,000 networks ≤ 535 MiB": False,
                   "start-up at 10,000 networks < 10 s (first sweep completed)": False,
                   "sweep CPU at rest < 1% of a core at 10,000 networks": False}


def test_no_row_without_a_size_of_10000():
    t = targets({"100": size(60, 0.9, 0.0), "1000": size(200, 3.2, 2.0)})
    assert not [name for name in t if "networks ≤" in name or "start-up" in name or "sweep CPU" in name]


def test_the_markdown_table_shows_the_rows_with_their_units():
    data = {"meta": {"machine": {"cpus": 2, "mem_gib": 23.5, "ovn": "ovn", "ovs": "ovs", "python": "3",
                                 "git": "x"}, "load_start": [0.1], "load_samples_1min": [0.2]},
            "scale": {"10000": size(497.0, 8.22, 0.46)}}
    md = report.markdown(data, report.summarize(data))
    assert "| netpeerd memory at 10,000 networks ≤ 535 MiB | 497 MiB | yes |" in md
    assert "| start-up at 10,000 networks < 10 s (first sweep completed) | 8.22 s | yes |" in md
    assert "| sweep CPU at rest < 1% of a core at 10,000 networks | 0.46% | yes |" in md


# ---------------------------------------------------------------- region (bench/region.py)
def probe_size(p50, p99, sent, idle_ms):
    return {"bind": {"n": 300, "p50_ms": p50, "p99_ms": p99}, "bind_cpu": {"p50_ms": p50 / 2},
            "bytes_per_bind": {"p50": sent, "max": sent}, "idle_exchange": {"cpu_ms_p50": idle_ms, "bytes_p50": 200},
            "build_s": 1.0, "first_exchanges_s": 1.0}


def region_data(after_p99_10000=12.0, idle_10000=0.07, sent_after=650, daemon_sent=900):
    before = {"100": probe_size(80, 110, 42_000, 16), "10000": probe_size(32_000, 32_400, 3_874_000, 4_171)}
    after = {"100": probe_size(3, 10, 600, 0.07), "10000": probe_size(5, 11, sent_after, idle_10000)}
    netpeerds = {"100": {"bind": {"n": 300, "p50_ms": 8.0, "p99_ms": 10.0}, "bytes_per_bind": 900,
                         "idle": {"cpu_ms_per_exchange": 2.0}},
                 "10000": {"bind": {"n": 300, "p50_ms": 9.0, "p99_ms": after_p99_10000},
                           "bytes_per_bind": daemon_sent, "idle": {"cpu_ms_per_exchange": 2.5}}}
    return {"region": {"in_process": {"before_commit": "458cd90", "before": {"sizes": before},
                                      "after": {"sizes": after}},
                       "netpeerds": {"sizes": netpeerds}}}


GROWTH = "cross-site bind p99 at 10,000 pairs within 1.2x of p99 at 100 (through netpeerds)"
IDLE = "CPU of an exchange with nothing changed < 1 ms at 10,000 pairs"
BYTES = "bytes on the link per bind < 16 KB at any size"


def test_region_rows_carry_after_and_before_side_by_side():
    t = report.summarize(region_data())["targets"]
    assert t[GROWTH]["value"] == 1.2 and t[GROWTH]["met"] is True
    assert t[GROWTH]["in_process"] == 1.1 and round(t[GROWTH]["before"], 2) == 294.55
    assert t[IDLE] == {"value": 0.07, "target": 1.0, "unit": " ms", "met": True, "before": 4_171}
    assert t[BYTES]["met"] is True and t[BYTES]["value"] == 900 / 1024
    assert t[BYTES]["before"] == 3_874_000 / 1024


def test_each_region_row_says_no_when_its_figure_misses_the_target():
    t = report.summarize(region_data(after_p99_10000=12.5, idle_10000=1.2, daemon_sent=17_000))["targets"]
    assert {name: t[name]["met"] for name in (GROWTH, IDLE, BYTES)} == {GROWTH: False, IDLE: False, BYTES: False}
    t = report.summarize(region_data(sent_after=16 * 1024))["targets"]
    assert t[BYTES]["met"] is False          # 16 KB is not under 16 KB, in-process or through netpeerds


def test_the_region_rows_in_the_markdown_table():
    data = {"meta": {"machine": {"cpus": 2, "mem_gib": 23.5, "ovn": "ovn", "ovs": "ovs", "python": "3",
                                 "git": "x"}, "load_start": [0.1], "load_samples_1min": [0.2]}, **region_data()}
    md = report.markdown(data, report.summarize(data))
    assert f"| {GROWTH} | 1.20x (in-process 1.10x; before, in-process 295x) | yes |" in md
    assert f"| {IDLE} | 0.07 ms (before 4,171 ms) | yes |" in md
    assert f"| {BYTES} | 0.88 KB (before 3,783 KB) | yes |" in md
