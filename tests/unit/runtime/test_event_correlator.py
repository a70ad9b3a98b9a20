"""The event correlator (client-go's events_cache.go, EventAggregator and EventLogger):
an Event that repeats is counted on the one posted; more than 10 similar ones within 10
minutes are combined into one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from paralleljob.runtime.event_correlator import COMBINED, EventCorrelator

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
KEY = ("cron-uid", "Normal", "JobAlreadyActive")


def test_a_repeated_event_is_counted_on_the_first_one() -> None:
    correlator = EventCorrelator()
    seen = [
        correlator.observe(KEY, "waiting", f"name-{i}", T0 + timedelta(seconds=i))
        for i in range(42)
    ]
    assert seen[0].new and all(not s.new for s in seen[1:])
    assert {s.name for s in seen} == {"name-0"}, "one Event object"
    assert [s.count for s in seen] == list(range(1, 43))
    assert {s.first for s in seen} == {T0}


def test_another_reason_type_or_object_is_another_event() -> None:
    correlator = EventCorrelator()
    assert correlator.observe(KEY, "m", "a", T0).new
    for key in (("other-uid", *KEY[1:]), (KEY[0], "Warning", KEY[2]), (*KEY[:2], "Other")):
        assert correlator.observe(key, "m", "b", T0).new


def test_more_than_ten_similar_messages_are_combined_into_one_event() -> None:
    correlator = EventCorrelator()
    seen = [correlator.observe(KEY, f"pod {i}", f"n{i}", T0) for i in range(15)]
    assert all(s.new and s.count == 1 for s in seen[:9]), "nine messages: each its own"
    combined = seen[9:]
    assert combined[0].new and combined[0].message == COMBINED + "pod 9"
    assert [s.name for s in combined] == ["n9"] * 6
    assert [s.count for s in combined] == [1, 2, 3, 4, 5, 6]
    assert combined[-1].message == COMBINED + "pod 14"


def test_similar_messages_are_counted_afresh_after_ten_quiet_minutes() -> None:
    correlator = EventCorrelator()
    for i in range(9):
        correlator.observe(KEY, f"pod {i}", f"n{i}", T0)
    later = correlator.observe(KEY, "pod 99", "late", T0 + timedelta(minutes=11))
    assert later.message == "pod 99"
