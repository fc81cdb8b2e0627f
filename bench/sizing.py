"""How many networks a site can hold for a time-to-traffic budget, from the
growth curve one ``make bench`` run measured (issue 16, item 5).

On OVN 23.03 a bind costs one full ovn-northd recompute of the whole
deployment, so the time from the second consent to the first answered ping
grows with the site, not with the peering. A cross-site peering changes
rows in both sites' NBs, and each site's ovn-northd recomputes only its own
deployment, so a region's time to traffic is set by its largest site.

The curve is the run's first-ping p50 per size, read as straight segments
in log-log (a power law between two measured sizes) and extended past the
largest size with the exponent of the top segment: the growth is worse
than linear and steepens with size, so the top exponent is the cautious
one. ``check`` predicts each measured size from the others alone, to show
how far the rule can be trusted inside and beyond the measured range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Budgets (s, second consent -> first answered ping) the sizing table lists.
BUDGETS_S = (0.5, 1.0, 2.0, 5.0, 15.0)
#: OVN central's daemons (per site; the chassis are not counted).
CENTRAL = ("ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd")
#: The region the prediction is made for.
REGION_NETWORKS = 100_000
#: Past this, a site size read off the curve says only that the curve is flat.
MAX_NETWORKS = 10 ** 9


@dataclass(frozen=True)
class Curve:
    """Measured (networks, seconds) points, sorted by networks; at least two."""
    points: tuple[tuple[int, float], ...]

    @classmethod
    def of(cls, points) -> "Curve":
        pts = tuple(sorted((int(n), float(t)) for n, t in points if t and t > 0))
        if len(pts) < 2:
            raise ValueError(f"points: {len(pts)} usable sizes; the curve needs two or more")
        return cls(pts)

    def _segment(self, n: float) -> tuple[tuple[int, float], tuple[int, float]]:
        for lo, hi in zip(self.points, self.points[1:]):
            if n <= hi[0]:
                return lo, hi
        return self.points[-2], self.points[-1]

    @staticmethod
    def _exponent(lo, hi) -> float:
        return math.log(hi[1] / lo[1]) / math.log(hi[0] / lo[0])

    def exponent_at(self, n: float) -> float:
        return self._exponent(*self._segment(n))

    def seconds(self, n: float) -> float:
        """Time to traffic at ``n`` networks in one site."""
        lo, hi = self._segment(n)
        return lo[1] * (n / lo[0]) ** self._exponent(lo, hi)

    def networks(self, budget_s: float) -> int | None:
        """The most networks one site can hold within ``budget_s``; None when
        the curve does not grow there, or so slowly that the answer is past
        any deployment (too noisy or too small to say)."""
        for lo, hi in zip(self.points, self.points[1:]):
            if budget_s <= hi[1]:
                break
        k = self._exponent(lo, hi)
        if k <= 0:
            return None
        log_n = math.log(lo[0]) + math.log(budget_s / lo[1]) / k   # in logs: a flat curve overflows a float
        return int(math.exp(log_n)) if log_n <= math.log(MAX_NETWORKS) else None


def curve_of(scale: dict) -> Curve:
    """The run's first-ping p50 per size (``data["scale"]``)."""
    return Curve.of((int(n), r["traffic"]["ping"]["p50_ms"] / 1000) for n, r in scale.items() if "traffic" in r)


def table(curve: Curve, memory_per_network_mib: float | None = None) -> list[dict]:
    """Per budget: networks per site, sites for the region, and OVN central
    memory per site (if the run measured it)."""
    out = []
    for budget in BUDGETS_S:
        per_site = curve.networks(budget)
        row = {"budget_s": budget, "networks_per_site": per_site,
               "sites_for_region": math.ceil(REGION_NETWORKS / per_site) if per_site else None}
        if memory_per_network_mib is not None and per_site:
            row["ovn_central_mib_per_site"] = per_site * memory_per_network_mib
        out.append(row)
    return out


def check(curve: Curve) -> list[dict]:
    """Each measured size predicted from the other sizes alone: between two
    of them (interpolation, how the rule is used within the measured range)
    and the largest from the smaller ones (extrapolation, as for a region)."""
    out = []
    for i, (n, measured) in enumerate(curve.points):
        others = curve.points[:i] + curve.points[i + 1:]
        if i == 0 or len(others) < 2:
            continue
        rest = Curve(others)
        predicted = rest.seconds(n)
        out.append({"networks": n, "predicted_s": predicted, "measured_s": measured, "ratio": measured / predicted,
                    "exponent_used": rest.exponent_at(n),
                    "how": "interpolated" if i < len(curve.points) - 1 else "extrapolated"})
    return out


def summary(scale: dict) -> dict | None:
    """Everything the report shows, or None if the run has too few sizes."""
    try:
        curve = curve_of(scale)
    except ValueError:
        return None
    top = str(curve.points[-1][0])
    mem = scale[top].get("memory_end_kib", {}).get("ovn")
    per_network = None
    if mem:
        central = sum(kib for name, kib in mem.items() if name in CENTRAL and kib)
        per_network = central / 1024 / curve.points[-1][0] if central else None
    return {"points": [list(p) for p in curve.points], "top_exponent": curve.exponent_at(curve.points[-1][0]),
            "table": table(curve, per_network), "region_networks": REGION_NETWORKS,
            "region_in_one_site_s": curve.seconds(REGION_NETWORKS), "check": check(curve),
            "ovn_central_mib_per_network": per_network}


def markdown(s: dict) -> list[str]:
    lines = ["## Sizing: networks per site for a time-to-traffic budget", "",
             "From this run's first-ping p50 per size (log-log segments; past the largest size, the exponent of "
             f"the top segment: {s['top_exponent']:.2f}).", "",
             "| budget (second consent → first ping) | networks per site | sites for "
             f"{s['region_networks']:,} networks | OVN central memory per site |", "|---|---|---|---|"]
    for row in s["table"]:
        mem = row.get("ovn_central_mib_per_site")
        per_site, sites = row["networks_per_site"], row["sites_for_region"]
        memory = "–" if mem is None else f"{mem / 1024:.1f} GiB"
        lines.append(f"| {row['budget_s']:g} s | {'–' if per_site is None else f'{per_site:,}'} | "
                     f"{'–' if sites is None else f'{sites:,}'} | {memory} |")
    lines += ["", f"{s['region_networks']:,} networks in one site: about {s['region_in_one_site_s']:,.0f} s "
              "per bind (extrapolated)."]
    for c in s.get("check") or ():
        lines += [f"Check: {c['networks']:,} networks {c['how']} from the other sizes alone (exponent "
                  f"{c['exponent_used']:.2f}): {c['predicted_s']:.2f} s; measured {c['measured_s']:.2f} s "
                  f"({c['ratio']:.2f}x the prediction)."]
    return lines


def plot(plt, s: dict):
    """Time to traffic against networks per site: the measured points, the
    curve read through them (dashed past the largest size) and the budgets."""
    curve = Curve.of(s["points"])
    fig, ax = plt.subplots(figsize=(7.6, 4))
    top = curve.points[-1][0]
    inside = [curve.points[0][0] * (top / curve.points[0][0]) ** (i / 40) for i in range(41)]
    beyond = [top * (REGION_NETWORKS / top) ** (i / 20) for i in range(21)]
    ax.plot(inside, [curve.seconds(n) for n in inside], "-", color="C0", label="rule (between measured sizes)")
    ax.plot(beyond, [curve.seconds(n) for n in beyond], "--", color="C0", label="rule (extrapolated)")
    ax.plot([n for n, _ in curve.points], [t for _, t in curve.points], "o", color="C1",
            label="measured: second consent → first ping p50")
    for row in s["table"]:
        ax.axhline(row["budget_s"], color="grey", lw=0.5, alpha=0.6)
        per_site = row["networks_per_site"]
        ax.text(1.01, row["budget_s"], f"{row['budget_s']:g} s: " + ("–" if per_site is None else f"{per_site:,}")
                + " per site", transform=ax.get_yaxis_transform(), fontsize=7, color="dimgrey", va="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("networks in one site (as many Bound pairs)")
    ax.set_ylabel("seconds")
    ax.set_title("How large a site can be for a time-to-traffic budget")
    ax.legend(fontsize=8, loc="upper left")
    return fig
