"""Pod-failure back-off: 10s x 2^(n-1), capped, where n counts failures since the last success.

Ports ``pkg/controller/job/backoff_utils.go`` (Kubernetes v1.37.2). Upstream keeps the
job-wide record in memory and loses it on a restart (kubernetes#114650); here it lives
in ``status.podFailureBackoff`` and is written in the same status update that records
the finished pods, so it survives a restart and is counted exactly once.

A job with backoffLimitPerIndex has no job-wide back-off: each index waits after its
own failures (getRemainingTimePerIndex), counted in the failure-count annotations of its
last failed pod, which keeps its finalizer until its replacement exists
(``indexed.get_pods_with_delayed_deletion_per_index``).

The base and the cap are upstream's DefaultJobPodFailureBackOff and
MaxJobPodFailureBackOff unless the operator's settings or the job's
``spec.podFailureBackoff`` (:func:`job_backoff`) say otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .indexed import get_index_absolute_failure_count
from .model import PodFailureBackoff, PodInfo


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


def job_backoff(spec: PodFailureBackoff | None, base: float, cap: float) -> tuple[float, float]:
    """The base and the cap of a job's back-off: its spec.podFailureBackoff's
    initialSeconds and maxSeconds where set, else the operator's ``base`` and ``cap``."""
    if spec is None:
        return base, cap
    return (
        float(spec.initial_seconds) if spec.initial_seconds is not None else base,
        float(spec.max_seconds) if spec.max_seconds is not None else cap,
    )


def remaining_seconds_per_index(
    last_failed: PodInfo | None, now: datetime, base: float, cap: float
) -> float:
    """getRemainingTimePerIndex: how long the index of ``last_failed`` (its last failed
    pod, None for none) must still wait before its replacement pod is created; the
    failures are the pod's absolute failure count (counted and ignored) plus its own."""
    if last_failed is None:
        return 0.0
    failures = get_index_absolute_failure_count(last_failed) + 1
    record = BackoffRecord(failures, _finish(last_failed, now))
    return remaining_seconds(record, now, base, cap)


def pod_creation_info_for_independent_indexes(
    indexes: Iterable[int],
    delayed: Mapping[int, PodInfo],
    now: datetime,
    base: float,
    cap: float,
) -> tuple[tuple[int, ...], float]:
    """getPodCreationInfoForIndependentIndexes: of ``indexes``, those whose back-off is
    over (``delayed``: each index's last failed pod); when none is, the shortest wait."""
    ready: list[int] = []
    shortest: float | None = None
    for index in indexes:
        wait = remaining_seconds_per_index(delayed.get(index), now, base, cap)
        if wait == 0:
            ready.append(index)
        elif shortest is None or wait < shortest:
            shortest = wait
    if ready:
        return tuple(ready), 0.0
    return (), shortest or 0.0
