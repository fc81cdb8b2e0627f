"""The per-token budgets (netpeer.service.budget) on a fake clock: refill,
burst, debt, one validate-only call at a time per token, the refusal's one
line and retry delay, and memory bounded by the number of tokens kept."""

from __future__ import annotations

import re
import threading
import time

import pytest

from netpeer import errors
from netpeer.service.budget import Budgets, Disclosure, Validation


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_validation_time_is_charged_and_refused_once_spent_with_when_to_retry():
    clock = Clock()
    v = Validation(rate=0.1, burst=2.0, clock=clock)
    with v.turn("t1") as charge:
        charge(1.5)
    with v.turn("t1") as charge:          # 0.5 s left: admitted, and may leave a debt
        charge(1.5)
    assert v.level("t1") == pytest.approx(-1.0, abs=0.01)   # and the time they ran (next to nothing here)
    with pytest.raises(errors.ResourceExhausted) as err:
        with v.turn("t1"):
            pass
    # Back above zero after 1.0 / 0.1 = 10 s; said in one line, and carried as a number.
    assert err.value.retry_after == pytest.approx(10.0, abs=0.1)
    assert re.fullmatch(r"validate_only: this token used its share of validation time "
                        r"\(limits.validate_only_lock_share = 0.1\); nothing was changed; retry in 10.0 s",
                        err.value.message)
    assert err.value.field == "validate_only"
    with v.turn("t2"):                    # another token has its own bucket
        pass
    clock.now += 10.1
    with v.turn("t1") as charge:
        charge(0.01)
    clock.now += 3600                     # refills up to the burst, no further
    assert v.level("t1") == pytest.approx(2.0)


def test_one_validate_only_call_at_a_time_per_token_others_wait_briefly_or_are_refused():
    v = Validation(rate=0.1, burst=2.0, clock=Clock())
    v.QUEUE, v.TURN_WAIT = 2, 0.3
    order, release = [], threading.Event()

    def first():
        with v.turn("t"):
            order.append("first in")
            release.wait(5)
        order.append("first out")

    def second():
        with v.turn("t"):
            order.append("second in")

    a = threading.Thread(target=first)
    a.start()
    while "first in" not in order:
        time.sleep(0.001)
    b = threading.Thread(target=second)
    b.start()
    time.sleep(0.05)
    assert order == ["first in"]          # waits its turn ...
    release.set()
    a.join(5), b.join(5)
    assert order == ["first in", "first out", "second in"]   # ... and runs after the first

    # Held for longer than TURN_WAIT: the waiting call is refused, with when to retry.
    release.clear()
    order.clear()
    a = threading.Thread(target=first)
    a.start()
    while "first in" not in order:
        time.sleep(0.001)
    started = time.monotonic()
    with pytest.raises(errors.ResourceExhausted) as err:
        with v.turn("t"):
            pass
    assert 0.25 < time.monotonic() - started < 2 and err.value.retry_after == v.TURN_WAIT
    assert "still running" in err.value.message and "\n" not in err.value.message

    # More than QUEUE waiting: refused at once, not after a TURN_WAIT (made far longer than this test could take).
    v.TURN_WAIT = 30.0
    def waiter():
        try:
            with v.turn("t"):
                pass
        except errors.ResourceExhausted:
            pass
    waiters = [threading.Thread(target=waiter) for _ in range(v.QUEUE)]
    for w in waiters:
        w.start()
    while v._buckets["t"].waiting < v.QUEUE:
        time.sleep(0.001)
    started = time.monotonic()
    with pytest.raises(errors.ResourceExhausted, match="in flight and 2 waiting"):
        with v.turn("t"):
            pass
    assert time.monotonic() - started < v.TURN_WAIT / 2
    release.set()
    a.join(5)
    for w in waiters:
        w.join(5)


def test_disclosures_cost_one_each_and_when_spent_every_such_answer_is_refused():
    clock = Clock()
    d = Disclosure(rate=5 / 60, burst=5.0, clock=clock)
    d("t", False)                         # a check that found nothing costs nothing
    for _ in range(5):
        d("t", True)
    for found in (True, False):           # spent: refused whatever the check would find
        with pytest.raises(errors.ResourceExhausted) as err:
            d("t", found)
        assert err.value.retry_after == pytest.approx(12.0)
        assert "limits.conflict_disclosures_per_minute = 5" in err.value.message and "retry in 12.0 s" in \
            err.value.message and "\n" not in err.value.message
    clock.now += 12.0
    d("t", True)
    with pytest.raises(errors.ResourceExhausted):
        d("t", False)


def test_memory_is_bounded_by_the_tokens_kept_and_busy_ones_stay():
    clock = Clock()
    v = Validation(rate=0.1, burst=2.0, clock=clock, size=3)
    with v.turn("busy") as charge:
        charge(2.0)
        for i in range(10):
            with v.turn(f"t{i}"):
                pass
        assert len(v) == 3 and "busy" in v._buckets
    assert v.level("busy") == pytest.approx(0.0, abs=0.05)   # kept, debt and all, while it was in use


def test_budgets_from_the_limits_and_numbered_errors_keep_the_delay():
    b = Budgets()
    assert (b.validation.rate, b.validation.burst) == (0.1, 2.0)
    assert (b.disclosure.rate, b.disclosure.burst) == (5 / 60, 5.0)
    exc = errors.ResourceExhausted("x", field="validate_only", value=True, retry_after=2.5).within("requests[3]")
    assert (exc.message, exc.field, exc.retry_after) == ("requests[3]: x", "requests[3].validate_only", 2.5)
