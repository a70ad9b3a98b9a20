"""Liveness that means progress: the pure stall rules (progress.py)."""

from __future__ import annotations

import pytest

from paralleljob.runtime.progress import LoopClock, Stall, describe, stalls

T = 180.0


# -- the pure rules --------------------------------------------------------------------


def test_an_idle_loop_never_stalls() -> None:
    assert stalls({"ns/a": LoopClock()}, now=10_000.0, threshold=T) == []


def test_a_timer_in_the_future_is_not_pending_work() -> None:
    clock = LoopClock(timer_due=10_000.0 + 3600)  # e.g. the next DURATION refresh
    assert stalls({"ns/a": clock}, now=10_000.0, threshold=T) == []


@pytest.mark.parametrize(
    ("clock", "what"),
    [
        (LoopClock(woken_at=0.0), "due and not synced"),
        (LoopClock(timer_due=0.0), "due and not synced"),
        (LoopClock(sync_started=0.0), "sync running"),
        (LoopClock(unobserved_since=0.0), "pod change not seen by the pod watch"),
        (LoopClock(unechoed_since=0.0), "status write not seen by the job watch"),
    ],
)
def test_each_kind_of_pending_work_stalls_only_after_the_threshold(
    clock: LoopClock, what: str
) -> None:
    assert stalls({"ns/a": clock}, now=T, threshold=T) == []
    assert stalls({"ns/a": clock}, now=T + 1, threshold=T) == [Stall("ns/a", what, T + 1)]


def test_due_since_is_the_earlier_of_wake_and_timer() -> None:
    clock = LoopClock(woken_at=50.0, timer_due=20.0)
    [stall] = stalls({"ns/a": clock}, now=20.0 + T + 1, threshold=T)
    assert stall.seconds == T + 1


def test_stalls_come_oldest_first_and_the_message_is_one_line() -> None:
    clocks = {
        "ns/a": LoopClock(sync_started=100.0),
        "ns/b": LoopClock(woken_at=0.0),
        "ns/c": LoopClock(unobserved_since=50.0),
        "ns/d": LoopClock(unechoed_since=60.0),
        "ns/e": LoopClock(),
    }
    found = stalls(clocks, now=1000.0, threshold=T)
    assert [s.job for s in found] == ["ns/b", "ns/c", "ns/d", "ns/a"]
    text = describe(found)
    assert "\n" not in text
    assert text == (
        "no progress: ns/b: due and not synced for 1000s; "
        "ns/c: pod change not seen by the pod watch for 950s; "
        "ns/d: status write not seen by the job watch for 940s (and 1 more)"
    )
