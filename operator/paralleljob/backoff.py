"""Pod-failure back-off: 10s x 2^(n-1), capped, where n counts failures since the last success.

Upstream keeps this record in memory and loses it on a restart (kubernetes#114650);
here it lives in ``status.podFailureBackoff`` and is written in the same status update
that records the finished pods, so it survives a restart and is counted exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .model import PodInfo

DEFAULT_BASE_SECONDS = 10.0
DEFAULT_MAX_SECONDS = 360.0


@dataclass(frozen=True)
class BackoffRecord:
    failures_since_success: int = 0
    last_failure_time: datetime | None = None


def _finish(pod: PodInfo, fallback: datetime) -> datetime:
    return pod.finished_at or pod.created or fallback


def next_record(
    old: BackoffRecord,
    new_succeeded: Sequence[PodInfo],
    new_failed: Sequence[PodInfo],
    now: datetime,
) -> BackoffRecord:
    """backoffStore.newBackoffRecord, given the pods that finished since the last sync."""
    succeeded = sorted(new_succeeded, key=lambda p: _finish(p, now))
    failed = sorted(new_failed, key=lambda p: _finish(p, now))
    if not succeeded:
        if not failed:
            return old
        return BackoffRecord(
            failures_since_success=old.failures_since_success + len(failed),
            last_failure_time=_finish(failed[-1], now),
        )
    if not failed:
        return BackoffRecord()
    last_success = _finish(succeeded[-1], now)
    count = 0
    last_failure: datetime | None = None
    for pod in reversed(failed):
        when = _finish(pod, now)
        if not when > last_success:
            break
        if last_failure is None:
            last_failure = when
        count += 1
    return BackoffRecord(failures_since_success=count, last_failure_time=last_failure)


def delay_seconds(failures: int, base: float, cap: float) -> float:
    """base * 2^(failures-1), capped; 0 without failures."""
    if failures <= 0:
        return 0.0
    delay = base
    for _ in range(1, failures):
        delay *= 2
        if delay >= cap:
            return cap
    return min(delay, cap)


def remaining_seconds(record: BackoffRecord, now: datetime, base: float, cap: float) -> float:
    """How long pod creation must still wait (getRemainingTimeForFailuresCount)."""
    if record.failures_since_success <= 0 or record.last_failure_time is None:
        return 0.0
    delay = delay_seconds(record.failures_since_success, base, cap)
    elapsed = (now - record.last_failure_time).total_seconds()
    if delay < elapsed:
        return 0.0
    return delay - elapsed
