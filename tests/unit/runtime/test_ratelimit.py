"""Token buckets and the DURATION refresh slots (ratelimit.py)."""

from __future__ import annotations

import itertools

import pytest

from paralleljob.runtime.ratelimit import SlotScheduler, TokenBucket


def test_a_full_bucket_serves_its_burst_at_once_then_paces_at_its_rate() -> None:
    bucket = TokenBucket(rate=20, burst=30)
    waits = [bucket.reserve(100.0) for _ in range(32)]
    assert waits[:30] == [0.0] * 30
    assert waits[30:] == [pytest.approx(0.05), pytest.approx(0.10)]


def test_reservations_in_debt_are_served_in_order_and_refill_pays_the_debt() -> None:
    bucket = TokenBucket(rate=10, burst=1)
    assert bucket.reserve(0.0) == 0.0
    assert bucket.reserve(0.0) == pytest.approx(0.1)
    assert bucket.reserve(0.0) == pytest.approx(0.2)
    # 1 s later, the two tokens owed are paid and 8 more came (capped at burst 1).
    assert bucket.reserve(1.0) == 0.0
    assert bucket.reserve(1.0) == pytest.approx(0.1)


def test_take_never_goes_into_debt() -> None:
    bucket = TokenBucket(rate=1 / 300, burst=25)
    assert all(bucket.take(0.0) for _ in range(25))
    assert not bucket.take(0.0)
    assert not bucket.take(299.0)
    assert bucket.take(300.5)
    assert not bucket.take(300.5)


def test_a_clock_going_backwards_adds_no_tokens() -> None:
    bucket = TokenBucket(rate=1, burst=1)
    assert bucket.take(10.0)
    assert not bucket.take(5.0)
    assert not bucket.take(10.5)
    assert bucket.take(11.0)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_a_bucket_needs_a_positive_rate_and_burst(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)


def test_slots_go_first_come_first_served_at_the_rate() -> None:
    slots = SlotScheduler(rate=5)
    waits = [slots.slot(f"job-{i}", 0.0) for i in range(4)]
    assert waits == [0.0, pytest.approx(0.2), pytest.approx(0.4), pytest.approx(0.6)]
    assert len(slots) == 4


def test_a_slot_is_kept_until_used_and_its_wait_shrinks_with_time() -> None:
    slots = SlotScheduler(rate=1)
    assert slots.slot("a", 0.0) == 0.0
    assert slots.slot("b", 0.0) == pytest.approx(1.0)
    assert slots.slot("b", 0.4) == pytest.approx(0.6), "the same slot, not a new one"
    assert slots.slot("b", 1.2) == 0.0
    slots.release("a", 1.2)
    slots.release("b", 1.2)
    slots.release("never-had-one", 1.2)
    assert len(slots) == 0
    assert slots.slot("c", 1.2) == pytest.approx(0.8), "used slots are not handed out again"


def test_a_slot_that_came_while_held_back_goes_unused_and_the_caller_waits_its_turn() -> None:
    slots = SlotScheduler(rate=5)
    waits = [slots.slot(f"job-{i}", 0.0) for i in range(3)]  # 0, 0.2, 0.4
    assert waits[0] == 0.0
    assert slots.postpone("job-0", 0.05) == pytest.approx(0.55), "behind the others"
    assert slots.slot("job-0", 0.1) == pytest.approx(0.5), "kept, as any slot"
    assert slots.slot("new", 0.1) == pytest.approx(0.7), "the unused slot is not reused"
    # Its slot long gone (the caller synced late): never now, always a slot ahead.
    slots.release("new", 0.1)
    assert slots.slot("late", 0.0) == pytest.approx(0.8)
    assert slots.postpone("late", 5.0) == pytest.approx(0.2)
    assert len(slots) == 4


def test_the_slots_of_callers_that_went_away_go_to_the_next_ones() -> None:
    slots = SlotScheduler(rate=5)
    for i in range(500):  # 500 jobs: the last one's slot is 100 s away
        slots.slot(f"job-{i}", 0.0)
    for i in range(1, 500):
        slots.release(f"job-{i}", 0.0)  # they finished: their slots are free again
    assert slots.slot("new", 0.0) == pytest.approx(0.2), "not 100 s"
    assert slots.slot("newer", 0.0) == pytest.approx(0.4)


def test_many_jobs_each_get_a_turn_once_per_jobs_over_rate_seconds() -> None:
    rate, jobs = 5.0, 500
    slots = SlotScheduler(rate)
    now = 0.0
    writes: dict[str, list[float]] = {f"job-{i}": [] for i in range(jobs)}
    due = dict.fromkeys(writes, 0.0)
    while now < 300.0:
        for key, at in due.items():
            if at <= now:
                wait = slots.slot(key, now)
                if wait == 0.0:
                    writes[key].append(now)
                    slots.release(key, now)
                    due[key] = now + 1.0  # its DURATION changes again in 1 s
                else:
                    due[key] = now + wait
        now = round(now + 0.05, 2)
    total = sum(len(w) for w in writes.values())
    assert total <= rate * 300 + 1, "never more than the budget"
    assert total >= rate * 300 * 0.95, "and the budget is used"
    gaps = [b - a for w in writes.values() for a, b in itertools.pairwise(w)]
    assert max(gaps) <= jobs / rate + 1.0, "every job is refreshed in its turn"


def test_available_tokens_refill_and_show_debt() -> None:
    bucket = TokenBucket(rate=10, burst=4)
    assert bucket.available(0.0) == 4
    for _ in range(6):
        bucket.reserve(0.0)
    assert bucket.available(0.0) == pytest.approx(-2)
    assert bucket.available(0.5) == pytest.approx(3)
