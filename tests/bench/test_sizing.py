"""The sizing rule's arithmetic (bench/sizing.py), on curves whose answers
are known: a pure power law is predicted exactly, and a curve that steepens
is under-predicted beyond its range, which the check must show."""

from __future__ import annotations

import pytest

from bench import sizing


def scale_of(points, memory_mib=None):
    out = {str(n): {"traffic": {"ping": {"p50_ms": t * 1000}}} for n, t in points}
    if memory_mib is not None:
        top = str(max(n for n, _ in points))
        out[top]["memory_end_kib"] = {"ovn": {"ovsdb-server-nb": memory_mib * 1024, "ovsdb-server-sb": 0,
                                              "ovn-northd": 0, "ovn-controller": 10 ** 9}}
    return out


def test_a_power_law_is_read_back_exactly():
    law = [(n, 0.5 * (n / 1000) ** 1.5) for n in (100, 1000, 10000)]
    curve = sizing.curve_of(scale_of(law))
    assert curve.exponent_at(50_000) == pytest.approx(1.5)
    assert curve.seconds(4000) == pytest.approx(0.5 * 4 ** 1.5)
    assert curve.networks(4.0) == pytest.approx(4000, abs=1)
    assert all(c["ratio"] == pytest.approx(1.0) for c in sizing.check(curve))


def test_the_table_and_the_region():
    law = [(n, 0.5 * (n / 1000) ** 1.5) for n in (1000, 10000)]
    s = sizing.summary(scale_of(law, memory_mib=7000))   # 0.7 MiB of OVN central per network; chassis not counted
    one_second = next(row for row in s["table"] if row["budget_s"] == 1.0)
    assert one_second["networks_per_site"] == pytest.approx(1000 * 2 ** (1 / 1.5), abs=1)
    assert one_second["sites_for_region"] == -(-100_000 // one_second["networks_per_site"])
    assert one_second["ovn_central_mib_per_site"] == pytest.approx(0.7 * one_second["networks_per_site"])
    assert s["region_in_one_site_s"] == pytest.approx(0.5 * 100 ** 1.5)
    assert s["check"] == []   # two sizes: nothing left over to check against


def test_a_steepening_curve_is_under_predicted_beyond_its_range():
    curve = sizing.curve_of(scale_of([(100, 0.08), (1000, 0.5), (10000, 15.0)]))
    top = sizing.check(curve)[-1]
    assert top["how"] == "extrapolated" and top["ratio"] > 3


def test_too_few_sizes_is_said_not_guessed():
    assert sizing.summary(scale_of([(1000, 0.5)])) is None
    with pytest.raises(ValueError, match="points: 1 usable sizes"):
        sizing.Curve.of([(1000, 0.5)])


def test_a_curve_that_does_not_grow_gives_no_size():
    s = sizing.summary(scale_of([(30, 0.08), (60, 0.08)]))   # a tiny smoke run: noise, no growth
    assert all(row["networks_per_site"] is None and row["sites_for_region"] is None for row in s["table"])
    assert "| 1 s | – | – | – |" in "\n".join(sizing.markdown(s))


def test_a_nearly_flat_curve_says_nothing_rather_than_overflowing():
    """Tiny sizes (the --quick run) can measure almost the same time at two
    sizes: the exponent is then near zero and a budget far above the curve
    would ask for a site of 10^300 networks or more."""
    flat = [(30, 0.0500), (60, 0.0501)]
    s = sizing.summary(scale_of(flat, memory_mib=100))
    assert [row["networks_per_site"] for row in s["table"]] == [None] * len(sizing.BUDGETS_S)
    assert all(row["sites_for_region"] is None for row in s["table"])
