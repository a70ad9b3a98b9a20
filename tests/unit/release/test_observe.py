"""The upgrade test's observers: the Lease's holders in turn, and the minutes a schedule
of every minute must have run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from tests.release.observe import LeaseLog, minute_boundaries

T0 = datetime(2026, 12, 6, 20, 0, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _spec(holder: str, acquired: float, renewed: float) -> SimpleNamespace:
    return SimpleNamespace(
        holder_identity=holder, acquire_time=_at(acquired), renew_time=_at(renewed)
    )


def test_a_release_then_a_takeover_is_one_hand_over_timed_from_the_release() -> None:
    log = LeaseLog(coordination_v1=None, namespace="ns", name="lease")
    for spec in (
        _spec("old", 0, 2),
        _spec("old", 0, 4),
        _spec("", 5, 5),  # released as it stopped
        _spec("new", 5.4, 5.4),
        _spec("new", 5.4, 7),
    ):
        log._sample(spec)
    assert [t.holder for t in log.tenures] == ["old", "new"]
    assert log.takeovers() == 1
    assert log.leaderless_s() == [0.4]


def test_a_holder_that_dies_leaves_the_lease_until_it_expires() -> None:
    log = LeaseLog(coordination_v1=None, namespace="ns", name="lease")
    for spec in (_spec("a", 0, 4), _spec("b", 19, 19), _spec("a", 30, 30)):
        log._sample(spec)
    assert [t.holder for t in log.tenures] == ["a", "b", "a"]
    assert log.leaderless_s() == [15.0, 11.0]


def test_the_minutes_after_a_time_up_to_another() -> None:
    assert minute_boundaries(_at(20), _at(20)) == set()
    assert minute_boundaries(_at(20), _at(60)) == {_at(60)}
    assert minute_boundaries(_at(0), _at(179)) == {_at(60), _at(120)}
