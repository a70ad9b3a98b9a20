"""Pod-failure back-off: 10s x 2^(n-1), capped at 6 minutes, counted since the last success."""

from __future__ import annotations

from datetime import timedelta

import pytest

from paralleljob import constants as c
from paralleljob.backoff import BackoffRecord, delay_seconds, next_record, remaining_seconds
from paralleljob.model import PodInfo

from .sim import T0


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0), (1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 320), (7, 360), (20, 360)],
)
def test_delay_doubles_from_10s_and_caps_at_6_minutes(failures: int, delay: float) -> None:
    assert delay_seconds(failures, 10, 360) == delay


def _pod(uid: str, phase: str, at: int) -> PodInfo:
    return PodInfo(uid, uid, phase, finished_at=T0 + timedelta(seconds=at))


@pytest.mark.parametrize(
    ("old", "succeeded", "failed", "expected"),
    [
        (BackoffRecord(), [], [], BackoffRecord()),
        (
            BackoffRecord(),
            [],
            [_pod("a", c.FAILED, 5)],
            BackoffRecord(1, T0 + timedelta(seconds=5)),
        ),
        (
            BackoffRecord(2, T0),
            [],
            [_pod("a", c.FAILED, 7), _pod("b", c.FAILED, 3)],
            BackoffRecord(4, T0 + timedelta(seconds=7)),
        ),
        (BackoffRecord(3, T0), [_pod("s", c.SUCCEEDED, 1)], [], BackoffRecord()),
        # Only failures after the latest success count.
        (
            BackoffRecord(3, T0),
            [_pod("s", c.SUCCEEDED, 5)],
            [_pod("a", c.FAILED, 2), _pod("b", c.FAILED, 6), _pod("d", c.FAILED, 9)],
            BackoffRecord(2, T0 + timedelta(seconds=9)),
        ),
    ],
)
def test_record_counts_failures_since_last_success(
    old: BackoffRecord, succeeded: list[PodInfo], failed: list[PodInfo], expected: BackoffRecord
) -> None:
    assert next_record(old, succeeded, failed, T0) == expected


@pytest.mark.parametrize(
    ("failures", "elapsed", "remaining"),
    [(0, 0, 0), (1, 0, 10), (1, 4, 6), (1, 11, 0), (3, 30, 10), (9, 100, 260)],
)
def test_remaining_time(failures: int, elapsed: float, remaining: float) -> None:
    record = BackoffRecord(failures, T0)
    now = T0 + timedelta(seconds=elapsed)
    assert remaining_seconds(record, now, 10, 360) == pytest.approx(remaining)
