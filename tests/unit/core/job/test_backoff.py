"""Pod-failure back-off: 10s x 2^(n-1), capped at 10 minutes (upstream's
MaxJobPodFailureBackOff), counted since the last success; per index with
backoffLimitPerIndex (backoff_utils_test.go, job_controller_test.go at Kubernetes v1.34.4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.backoff import (
    BackoffRecord,
    delay_seconds,
    job_backoff,
    next_record,
    pod_creation_info_for_independent_indexes,
    remaining_seconds,
    remaining_seconds_per_index,
)
from paralleljob.core.job.model import PodFailureBackoff, PodInfo
from tests.unit.sim import T0

DEFAULT_BASE_SECONDS = CoreConfig().backoff_base_seconds
DEFAULT_MAX_SECONDS = CoreConfig().backoff_max_seconds


def test_the_defaults_are_upstream_s() -> None:
    """DefaultJobPodFailureBackOff = 10 * time.Second, MaxJobPodFailureBackOff =
    10 * time.Minute (job_controller.go)."""
    config = CoreConfig()
    assert (config.backoff_base_seconds, config.backoff_max_seconds) == (10, 600)


@pytest.mark.parametrize(
    ("failures", "delay"),
    [(0, 0), (1, 10), (2, 20), (3, 40), (4, 80), (5, 160), (6, 320), (7, 600), (20, 600)],
)
def test_delay_doubles_from_10s_and_caps_at_10_minutes(failures: int, delay: float) -> None:
    assert delay_seconds(failures, DEFAULT_BASE_SECONDS, DEFAULT_MAX_SECONDS) == delay


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


_2009 = datetime(2009, 11, 10, 23, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("failures", "elapsed", "want"),
    [
        pytest.param(0, 0, 0, id="no failures"),
        pytest.param(1, 0, 5, id="one failure; current time and failure time are same"),
        pytest.param(1, 1, 4, id="one failure; current time == 1 second + failure time"),
        pytest.param(1, 5, 0, id="one failure; current time == expected backoff time"),
        pytest.param(1, 6, 0, id="one failure; current time == expected backoff time + 1 Second"),
        pytest.param(3, 0, 20, id="three failures; current time and failure time are same"),
        pytest.param(
            8,
            0,
            640,
            id="eight failures; current time and failure time are same; backoff not "
            "exceeding maxBackoff",
        ),
        pytest.param(
            9,
            0,
            700,
            id="nine failures; current time and failure time are same; backoff exceeding "
            "maxBackoff",
        ),
    ],
)
def test_get_remaining_backoff_time(failures: int, elapsed: int, want: float) -> None:
    """TestGetRemainingBackoffTime (default 5 s, max 700 s)."""
    record = BackoffRecord(failures, _2009 if failures else None)
    now = _2009 + timedelta(seconds=elapsed)
    assert remaining_seconds(record, now, 5, 700) == want


def _failed(index_failures: int, ignored: int, finished: datetime, index: int = 0) -> PodInfo:
    """buildPod().phase(Failed).indexFailureCount(..).customDeletionTimestamp(finished):
    a pod deleted without grace period finished then (getFinishedTime)."""
    return PodInfo(
        "p",
        f"p-{index}-{index_failures}",
        c.FAILED,
        deleting=True,
        finished_at=finished,
        completion_index=index,
        index_failure_count=index_failures,
        index_ignored_failure_count=ignored,
    )


@pytest.mark.parametrize(
    ("last_failed", "want"),
    [
        pytest.param(None, 0, id="no failures"),
        pytest.param(
            _failed(2, 0, _2009),
            20,
            id="two prev failures; current time and failure time are same",
        ),
        pytest.param(
            _failed(1, 1, _2009),
            20,
            id="one prev failure counted and one ignored; current time and failure time are same",
        ),
    ],
)
def test_get_remaining_backoff_time_per_index(last_failed: PodInfo | None, want: float) -> None:
    """TestGetRemainingBackoffTimePerIndex (default 5 s, max 700 s)."""
    assert remaining_seconds_per_index(last_failed, _2009, 5, 700) == want


_NOW = T0


@pytest.mark.parametrize(
    ("indexes", "delayed", "want_indexes", "want_remaining"),
    [
        pytest.param((1, 3), {}, (1, 3), 0, id="simple index creation"),
        pytest.param(
            (1, 3),
            {1: _failed(0, 0, _NOW, 1)},
            (3,),
            0,
            id="subset of indexes can be recreated now",
        ),
        pytest.param(
            (1, 3),
            {1: _failed(0, 0, _NOW, 1), 3: _failed(0, 0, _NOW - timedelta(seconds=10), 3)},
            (3,),
            0,
            id="subset of indexes can be recreated now as the pods failed long time ago",
        ),
        pytest.param(
            (1, 2, 3),
            {1: _failed(1, 0, _NOW, 1), 2: _failed(0, 0, _NOW, 2), 3: _failed(2, 0, _NOW, 3)},
            (),
            10,
            id="no indexes can be recreated now, need to wait default pod failure backoff",
        ),
        pytest.param(
            (1, 2, 3),
            {
                ix: _failed(n, 0, _NOW - timedelta(seconds=1), ix)
                for ix, n in ((1, 1), (2, 0), (3, 2))
            },
            (),
            9,
            id="no indexes can be recreated now, need to wait but 1s already passed",
        ),
    ],
)
def test_get_pod_creation_info_for_independent_indexes(
    indexes: tuple[int, ...],
    delayed: dict[int, PodInfo],
    want_indexes: tuple[int, ...],
    want_remaining: float,
) -> None:
    """TestGetPodCreationInfoForIndependentIndexes (job_controller_test.go; upstream's
    defaults, 10 s and 10 minutes)."""
    got = pod_creation_info_for_independent_indexes(
        indexes, delayed, _NOW, DEFAULT_BASE_SECONDS, DEFAULT_MAX_SECONDS
    )
    assert got == (want_indexes, want_remaining)


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        (None, (10, 600)),
        (PodFailureBackoff(), (10, 600)),
        (PodFailureBackoff(initial_seconds=1), (1, 600)),
        (PodFailureBackoff(max_seconds=60), (10, 60)),
        (PodFailureBackoff(2, 30), (2, 30)),
    ],
)
def test_a_job_s_pod_failure_backoff_overrides_the_operator_s(
    spec: PodFailureBackoff | None, want: tuple[float, float]
) -> None:
    assert job_backoff(spec, 10, 600) == want
