"""Two-sample tests written out (scipy is not a dependency of netpeer).

``mann_whitney_u``: two-sided, normal approximation with tie correction and
continuity correction (fine for samples of a few dozen and more).
``ks_2samp``: two-sided Kolmogorov-Smirnov statistic with the asymptotic
Kolmogorov distribution (Stephens' small-sample adjustment).
``permutation_median``: two-sided permutation test on the difference of
medians, as a distribution-free cross-check.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Sequence


def _ranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) and the tie term sum(t^3 - t)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    return ranks, ties


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(U of x, two-sided p)."""
    n1, n2 = len(x), len(y)
    ranks, ties = _ranks(list(x) + list(y))
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    n = n1 + n2
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return u1, 1.0
    z = (abs(u1 - mu) - 0.5) / sigma
    return u1, min(1.0, 2 * _norm_sf(max(z, 0.0)))


def _kolmogorov_sf(lam: float) -> float:
    if lam < 1e-3:
        return 1.0
    total = 0.0
    for k in range(1, 101):
        term = 2 * (-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
        total += term
        if abs(term) < 1e-12:
            break
    return max(0.0, min(1.0, total))


def ks_2samp(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(D, two-sided asymptotic p)."""
    xs, ys = sorted(x), sorted(y)
    n1, n2 = len(xs), len(ys)
    i = j = 0
    d = 0.0
    while i < n1 and j < n2:
        v = min(xs[i], ys[j])
        while i < n1 and xs[i] == v:
            i += 1
        while j < n2 and ys[j] == v:
            j += 1
        d = max(d, abs(i / n1 - j / n2))
    en = math.sqrt(n1 * n2 / (n1 + n2))
    return d, _kolmogorov_sf((en + 0.12 + 0.11 / en) * d)


def permutation_median(x: Sequence[float], y: Sequence[float], rounds: int = 2000,
                       seed: int = 1) -> float:
    """Two-sided p of |median(x) - median(y)| under random relabelling."""
    rng = random.Random(seed)
    observed = abs(statistics.median(x) - statistics.median(y))
    pooled = list(x) + list(y)
    n1 = len(x)
    hits = 0
    for _ in range(rounds):
        rng.shuffle(pooled)
        if abs(statistics.median(pooled[:n1]) - statistics.median(pooled[n1:])) >= observed:
            hits += 1
    return (hits + 1) / (rounds + 1)
