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
