"""Per-token budgets: what one credential may make netpeerd do for answers
that keep nothing (``[limits]`` in the configuration, docs/design.md).

A budget is a token bucket per caller token id: it holds up to ``burst``,
refills at ``rate`` per second, and a call it refuses answers
RESOURCE_EXHAUSTED with the seconds after which it would be admitted
(``ResourceExhausted.retry_after``). Buckets live in memory, in an LRU of
at most ``size`` token ids, so a flood of tokens costs bounded memory (a
token pushed out starts again full). The admin token is never limited (the
service does not ask).

- ``Validation``: validate-only calls run like a write under the write lock
  and roll back, so other tenants' writes wait for them, and a batch's
  checks and answer take the interpreter for as long again. Each is charged
  the seconds it ran, from its admission to its answer (its time under the
  write lock included); a call is admitted while its token's bucket is
  above zero (so one call can leave a debt, paid back before the next), and
  one at a time per token: a second waits its turn, briefly, behind the
  first (a Pulumi preview asks about several resources at once).
- ``Disclosure``: answers that tell a caller that its pair conflicts with a
  network Bound to the other side (consent rule "third networks",
  docs/design.md). Each such answer costs one; every answer that needed
  that check is refused while less than one is left, whatever the check
  would have found, so a refusal tells nothing either.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from typing import Callable, Iterator

from netpeer.core.models import TokenLimits
from netpeer.errors import ResourceExhausted
from netpeer.reasons import Reason

#: Token ids whose buckets are kept at most (least recently used go first).
MAX_TOKENS = 10_000


@dataclasses.dataclass
class _Bucket:
    level: float
    at: float
    busy: bool = False      # a call of this token holds its turn
    waiting: int = 0        # calls of this token waiting for the turn


class Budget:
    """Token buckets keyed by token id; thread-safe."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic,
                 size: int = MAX_TOKENS):
        self.rate, self.burst, self.clock, self.size = rate, burst, clock, size
        self._buckets: collections.OrderedDict[str, _Bucket] = collections.OrderedDict()
        self._lock = threading.Condition()

    def _bucket(self, key: str) -> _Bucket:
        """The bucket of ``key``, refilled up to now (under ``_lock``)."""
        now = self.clock()
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = _Bucket(self.burst, now)
            self._trim()
        else:
            b.level = min(self.burst, b.level + max(0.0, now - b.at) * self.rate)
            b.at = now
            self._buckets.move_to_end(key)
        return b

    def _trim(self) -> None:
        """Forgets the least recently used idle buckets beyond ``size``."""
        excess = len(self._buckets) - self.size
        for key in [k for k, b in self._buckets.items() if not (b.busy or b.waiting)][:max(0, excess)]:
            del self._buckets[key]

    def level(self, key: str) -> float:
        with self._lock:
            return self._bucket(key).level

    def wait_for(self, level: float, need: float) -> float:
        """Seconds until a bucket at ``level`` holds ``need``."""
        return max(0.1, (need - level) / self.rate)

    def __len__(self) -> int:
        return len(self._buckets)


class Validation(Budget):
    """Seconds of the write lock held by validate-only calls, per token."""

    #: Calls of one token waiting for its turn at most, and for how long.
    QUEUE = 4
    TURN_WAIT = 5.0

    @contextlib.contextmanager
    def turn(self, key: str) -> Iterator[Callable[[float], None]]:
        """Admits one validate-only call of ``key`` (or raises
        ResourceExhausted) and charges it the seconds it ran, when it ends;
        yields a function that charges more."""
        with self._lock:
            b = self._bucket(key)
            if b.busy and b.waiting >= self.QUEUE:
                raise ResourceExhausted(
                    f"validate_only: this token has a validate-only call in flight and {b.waiting} waiting, the "
                    f"most allowed; nothing was changed; retry in {self.TURN_WAIT:.1f} s",
                    field="validate_only", value=True, retry_after=self.TURN_WAIT, reason=Reason.RATE_LIMITED)
            deadline = time.monotonic() + self.TURN_WAIT
            b.waiting += 1
            try:
                while b.busy and self._lock.wait(max(0.0, deadline - time.monotonic())):
                    pass
            finally:
                b.waiting -= 1
            if b.busy:
                raise ResourceExhausted(
                    f"validate_only: this token's earlier validate-only call is still running after "
                    f"{self.TURN_WAIT:.0f} s; nothing was changed; retry in {self.TURN_WAIT:.1f} s",
                    field="validate_only", value=True, retry_after=self.TURN_WAIT, reason=Reason.RATE_LIMITED)
            b = self._bucket(key)
            if b.level <= 0:
                wait = self.wait_for(b.level, 0.0)
                raise ResourceExhausted(
                    f"validate_only: this token used its share of validation time "
                    f"(limits.validate_only_lock_share = {self.rate:g}); nothing was changed; retry in {wait:.1f} s",
                    field="validate_only", value=True, retry_after=wait, reason=Reason.RATE_LIMITED)
            b.busy = True

        def charge(seconds: float) -> None:
            with self._lock:
                self._bucket(key).level -= seconds
        started = time.perf_counter()
        try:
            yield charge
        finally:
            with self._lock:
                b = self._bucket(key)
                b.level -= time.perf_counter() - started
                b.busy = False
                self._lock.notify_all()


class Disclosure(Budget):
    """Answers revealing a conflict with a network Bound to the other side
    of a pair, per token."""

    def __call__(self, key: str, found: bool) -> None:
        """An answer that needed the check: refused (ResourceExhausted)
        while less than one is left, whatever ``found``; else costs one when
        it tells a conflict (``found``)."""
        with self._lock:
            b = self._bucket(key)
            if b.level < 1:
                wait = self.wait_for(b.level, 1.0)
                raise ResourceExhausted(
                    "peering: answering would tell whether a network peered with the other side overlaps, and "
                    f"this token was told of as many such conflicts as allowed "
                    f"(limits.conflict_disclosures_per_minute = {self.rate * 60:g}); nothing was changed; "
                    f"retry in {wait:.1f} s", field="limits.conflict_disclosures_per_minute",
                    value=self.rate * 60, retry_after=wait, reason=Reason.RATE_LIMITED)
            if found:
                b.level -= 1


class Budgets:
    """The budgets of one netpeerd, from its ``[limits]``."""

    def __init__(self, limits: TokenLimits = TokenLimits(), clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.validation = Validation(limits.validate_only_lock_share, limits.validate_only_burst.total_seconds(),
                                     clock)
        per_minute = limits.conflict_disclosures_per_minute
        self.disclosure = Disclosure(per_minute / 60.0, float(per_minute), clock)
