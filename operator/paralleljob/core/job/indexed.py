"""Indexed completion mode: completion indexes, per-index failures, per-index pods.

Ports ``pkg/controller/job/indexed_job_utils.go`` (Kubernetes v1.37.2), plus the
per-index part of ``job_controller.go``'s ``manageJob`` pod creation (its functions
also call ``isPodFailed`` and ``onlyReplaceFailedPods``, which are ``model.py``'s
``is_pod_failed`` and ``JobSpec.only_replace_failed``), and at the end the hooks the
core calls where upstream's ``syncJob``, ``manageJob`` and
``trackJobStatusAndRemoveFinalizers`` branch on an Indexed job. Nothing here does I/O. What differs:

* Keys carry the operator's prefix: ``paralleljob.dev/job-completion-index`` (annotation
  and label), ``paralleljob.dev/job-index-failure-count`` and
  ``paralleljob.dev/job-index-ignored-failure-count`` instead of ``batch.kubernetes.io/``.
* Ordered intervals of indexes are :mod:`.intervals`' value type.
* Where upstream reads a ``*v1.Pod``, the functions take its
  :class:`~paralleljob.core.job.model.PodInfo`, which holds the index annotations, parsed
  once (``model.parse_pod``; the annotation keys and their parsers live in ``model.py``).
  An unknown completion index (upstream ``-1``) is ``None``.
* Where upstream reads the ``*batch.Job``, they take the
  :class:`~paralleljob.core.job.model.Job` (its name names it in log lines); its pod
  failure policy is matched by ``pod_failure_policy.match_pod``.
* Pod templates are JSON dicts; the functions that change one return a changed deep copy
  and never mutate their input. Upstream mutates the template and sorts the caller's
  slice of pods in place; here sorting makes a new tuple.
* Feature gates: ``JobBackoffLimitPerIndex``, ``JobPodReplacementPolicy`` and
  ``PodIndexLabel`` are gone (removed in v1.35 and v1.37, always on), so no branch
  here depends on a gate; :func:`add_completion_index_env_variables` still offers the
  pre-``PodIndexLabel`` annotation field path as an option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from ... import constants as c
from ..dataclass_evolve import evolve
from .active_pods import RemovalKey, removal_order_key
from .intervals import (
    OrderedIntervals,
    intervals_has,
    intervals_string,
    intervals_total,
    merge_intervals,
    parse_indexes_from_string,
    with_ordered_indexes,
)
from .model import (
    Job,
    JobSpec,
    JobStatus,
    PodInfo,
    is_pod_failed,
)
from .pod_failure_policy import ACTION_FAIL_INDEX, counts_as_failed, match_pod

_MAX_INT32: Final = 2**31 - 1

# ------------------------------------------------------------------------ annotations
# getCompletionIndex, getIndexFailureCount and parseIndexFailureIgnoreCountAnnotation are
# model.py's (parse_pod reads them into every PodInfo).


def get_index_absolute_failure_count(pod: PodInfo) -> int:
    """getIndexAbsoluteFailureCount: counted and ignored failures of the index together."""
    return pod.index_failure_count + pod.index_ignored_failure_count


# ---------------------------------------------------------------------- pods and indexes
def _valid_index(pod: PodInfo, completions: int) -> int | None:
    """The pod's completion index when it is known and below ``completions``."""
    ix = pod.completion_index
    return ix if ix is not None and ix < completions else None


def get_indexes(pods: Iterable[PodInfo]) -> frozenset[int]:
    """getIndexes: the known completion indexes of ``pods``."""
    return frozenset(p.completion_index for p in pods if p.completion_index is not None)


def _index_key(pod: PodInfo) -> int:
    # byCompletionIndex.Less compares getCompletionIndex, where unknown is -1.
    return -1 if pod.completion_index is None else pod.completion_index


def by_completion_index(pods: Iterable[PodInfo]) -> tuple[PodInfo, ...]:
    """sort.Sort(byCompletionIndex(pods)), unknown indexes first. Upstream's sort is not
    stable; this one is, which is one of the orders upstream may produce."""
    return tuple(sorted(pods, key=_index_key))


def _completions(job: Job) -> int:
    """spec.completions of an Indexed job (which always has it)."""
    return job.spec.completions or 0


def calculate_succeeded_indexes(
    job: Job, pods: Iterable[PodInfo]
) -> tuple[OrderedIntervals, OrderedIntervals]:
    """calculateSucceededIndexes: the succeeded indexes in ``status.completedIndexes``,
    and those plus the indexes of succeeded pods not counted yet (they still have the
    tracking finalizer) with a valid index."""
    completions = _completions(job)
    prev = parse_indexes_from_string(job.status.completed_indexes, completions, job.name)
    new = {
        ix
        for p in pods
        if p.phase == c.SUCCEEDED
        and p.has_finalizer
        and (ix := _valid_index(p, completions)) is not None
    }
    return prev, with_ordered_indexes(prev, sorted(new))


def is_index_failed(job: Job, pod: PodInfo) -> bool:
    """isIndexFailed: the pod failed and its index must not be retried: a FailIndex rule
    of the pod failure policy matched, or the failure counts and the index has already
    failed ``backoffLimitPerIndex`` times before this pod.

    Only for jobs with backoffLimitPerIndex (upstream dereferences it).
    """
    spec = job.spec
    counted = False
    if is_pod_failed(pod, only_replace_failed=spec.only_replace_failed):
        if spec.pod_failure_policy is not None:
            match = match_pod(spec.pod_failure_policy, pod)
            if match.action == ACTION_FAIL_INDEX:
                return True
            counted = match.count_failed
        else:
            counted = True
    if not counted:
        return False
    if spec.backoff_limit_per_index is None:
        raise ValueError("is_index_failed needs a job with backoffLimitPerIndex")
    return pod.index_failure_count >= spec.backoff_limit_per_index


def calculate_failed_indexes(job: Job, pods: Iterable[PodInfo]) -> OrderedIntervals:
    """calculateFailedIndexes: the indexes in ``status.failedIndexes`` plus those of pods
    not counted yet (with the tracking finalizer) whose index failed (is_index_failed)."""
    completions = _completions(job)
    prev: OrderedIntervals = ()
    if job.status.failed_indexes is not None:
        prev = parse_indexes_from_string(job.status.failed_indexes, completions, job.name)
    new = {
        ix
        for p in pods
        if p.has_finalizer
        and (ix := _valid_index(p, completions)) is not None
        and is_index_failed(job, p)
    }
    return with_ordered_indexes(prev, sorted(new))


def first_pending_indexes(
    active_pods: Iterable[PodInfo],
    succeeded_indexes: OrderedIntervals,
    failed_indexes: OrderedIntervals | None,
    count: int,
    completions: int,
    *,
    pods: Iterable[PodInfo] = (),
    only_replace_failed: bool = False,
) -> tuple[int, ...]:
    """firstPendingIndexes: the ``count`` lowest indexes below ``completions`` that no
    active pod holds and that have neither succeeded nor failed.

    When only failed pods are replaced (``only_replace_failed``), the indexes of the
    terminating ones among ``pods`` (all the job's pods) are not pending either: their
    replacement waits until they have failed.
    """
    if count == 0:
        return ()
    non_pending = with_ordered_indexes(succeeded_indexes, sorted(get_indexes(active_pods)))
    if only_replace_failed:
        terminating = get_indexes(p for p in pods if p.terminating)
        non_pending = with_ordered_indexes(non_pending, sorted(terminating))
    if failed_indexes is not None:
        non_pending = merge_intervals(non_pending, failed_indexes)
    # Bounded by len(non_pending) and count, not by completions.
    result: list[int] = []
    candidate = 0
    for first, last in non_pending:
        while candidate < completions and len(result) < count and candidate < first:
            result.append(candidate)
            candidate += 1
        candidate = max(candidate, last + 1)
    while candidate < completions and len(result) < count:
        result.append(candidate)
        candidate += 1
    return tuple(result)


def _before(a: datetime | None, b: datetime | None) -> bool:
    """time.Time.Before, None standing for Go's zero time (before any other)."""
    if a is None:
        return b is not None
    return b is not None and a < b


def get_pods_with_delayed_deletion_per_index(
    job: Job,
    pods: Iterable[PodInfo],
    succeeded_indexes: OrderedIntervals,
    failed_indexes: OrderedIntervals,
    expected_removed_finalizers: frozenset[str] = frozenset(),
) -> dict[int, PodInfo]:
    """getPodsWithDelayedDeletionPerIndex: per index still to be retried, its last failed
    pod, whose finalizer (and so deletion) waits until the replacement pod is created,
    so that the replacement can carry the index's failure count on.

    Only pods the job still tracks (getValidPodsWithFilter: tracking finalizer, no
    removal pending, valid index) are candidates. An index that succeeded, failed or has
    an active pod (which already carries the count) delays nothing. Among an index's
    failed pods the one kept has the highest absolute failure count and, among equals,
    the latest finish time.
    """
    pods = tuple(pods)
    completions, only_failed = _completions(job), job.spec.only_replace_failed
    active_indexes = get_indexes(p for p in pods if p.active)
    delayed: dict[int, PodInfo] = {}
    for p in pods:
        if not p.has_finalizer or p.uid in expected_removed_finalizers:
            continue
        ix = _valid_index(p, completions)
        if ix is None or not is_pod_failed(p, only_replace_failed=only_failed):
            continue
        if (
            intervals_has(succeeded_indexes, ix)
            or intervals_has(failed_indexes, ix)
            or ix in active_indexes
        ):
            continue
        last = delayed.get(ix)
        if last is None or (
            get_index_absolute_failure_count(last) <= get_index_absolute_failure_count(p)
            and not _before(p.finished_at, last.finished_at)
        ):
            delayed[ix] = p
    return delayed


def get_new_index_failure_counts(job: Job, pod_being_replaced: PodInfo | None) -> tuple[int, int]:
    """getNewIndexFailureCounts: the (failure, ignored failure) counts of the pod that
    replaces ``pod_being_replaced``: its counts plus its own failure, counted as ignored
    when the pod failure policy says it does not count. (0, 0) for an index's first pod.
    """
    if pod_being_replaced is None:
        return 0, 0
    failures = pod_being_replaced.index_failure_count
    ignored = pod_being_replaced.index_ignored_failure_count
    if not counts_as_failed(job.spec.pod_failure_policy, pod_being_replaced):
        ignored = _int32_increment(ignored)
    else:
        failures = _int32_increment(failures)
    return failures, ignored


def _int32_increment(value: int) -> int:
    # Upstream increments an int32, which wraps at MaxInt32 (and the annotation then
    # parses back as 0).
    return value + 1 if value < _MAX_INT32 else -(2**31)


# ---------------------------------------------------------------------- scale-down order
def _pods_with_same_index_for_removal_and_remaining(
    pods: Sequence[PodInfo], index: int, key: RemovalKey = removal_order_key
) -> tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]]:
    """appendPodsWithSameIndexForRemovalAndRemaining, returning (removed, remaining):
    pods without an index all go; of several pods with one index, all go but the one
    that sorts last in controller.ActivePods order (the furthest along)."""
    if index == -1:
        return tuple(pods), ()
    if len(pods) == 1:
        return (), (pods[0],)
    ordered = sorted(pods, key=key)
    return tuple(ordered[:-1]), (ordered[-1],)


def append_duplicated_index_pods_for_removal(
    rm: Sequence[PodInfo],
    left: Sequence[PodInfo],
    pods: Sequence[PodInfo],
    completions: int,
    *,
    key: RemovalKey = removal_order_key,
) -> tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]]:
    """appendDuplicatedIndexPodsForRemoval: of the active ``pods``, those to delete
    appended to ``rm`` and those to keep appended to ``left``, as new tuples.

    Pods without an index or with one at or above ``completions`` go; of n pods with the
    same index, n-1 go (see _pods_with_same_index_for_removal_and_remaining), in the
    order of ``key`` (a ParallelJob's honours the pods' deletion cost).
    """
    ordered = by_completion_index(pods)
    removed, remaining = list(rm), list(left)
    last_index = -1
    first_repeat = 0
    looped = 0
    for i, p in enumerate(ordered):
        ix = _index_key(p)
        if ix >= completions:
            removed.extend(ordered[i:])
            break
        if ix != last_index:
            out, keep = _pods_with_same_index_for_removal_and_remaining(
                ordered[first_repeat:i], last_index, key
            )
            removed.extend(out)
            remaining.extend(keep)
            first_repeat = i
            last_index = ix
        looped += 1
    out, keep = _pods_with_same_index_for_removal_and_remaining(
        ordered[first_repeat:looped], last_index, key
    )
    return (*removed, *out), (*remaining, *keep)


# -------------------------------------------------------------------- the core's hooks
def has_backoff_limit_per_index(spec: JobSpec) -> bool:
    """hasBackoffLimitPerIndex, for a job the operator runs as Indexed."""
    return spec.indexed and spec.backoff_limit_per_index is not None


def job_succeeded_indexes(
    job: Job, pods: Iterable[PodInfo]
) -> tuple[OrderedIntervals, OrderedIntervals]:
    """syncJob's calculateSucceededIndexes for an Indexed job: status.completedIndexes,
    and those plus the indexes of the succeeded pods not counted yet. ``((), ())`` for a
    NonIndexed job."""
    if not job.spec.indexed:
        return (), ()
    return calculate_succeeded_indexes(job, pods)


@dataclass(frozen=True)
class IndexFailures:
    """syncJob's view of an Indexed job with backoffLimitPerIndex: jobCtx.failedIndexes
    and jobCtx.podsWithDelayedDeletionPerIndex."""

    failed: OrderedIntervals = ()
    #: Per index still to be retried, its last failed pod: its finalizer stays until the
    #: replacement pod exists, which carries its failure count on.
    delayed: Mapping[int, PodInfo] = dataclasses.field(default_factory=dict)


def job_index_failures(
    job: Job,
    pods: Iterable[PodInfo],
    succeeded: OrderedIntervals,
    expected_removed_finalizers: frozenset[str],
) -> IndexFailures | None:
    """calculateFailedIndexes and getPodsWithDelayedDeletionPerIndex for a job with
    backoffLimitPerIndex; None for any other job (upstream's nil failedIndexes)."""
    if not has_backoff_limit_per_index(job.spec):
        return None
    pods = tuple(pods)
    failed = calculate_failed_indexes(job, pods)
    delayed = get_pods_with_delayed_deletion_per_index(
        job, pods, succeeded, failed, expected_removed_finalizers
    )
    return IndexFailures(failed=failed, delayed=delayed)


#: syncJob's messages for batch/v1 JobReasonMaxFailedIndexesExceeded and
#: JobReasonFailedIndexes.
MSG_MAX_FAILED_INDEXES_EXCEEDED: Final = (
    "Job has exceeded the specified maximal number of failed indexes"
)
MSG_FAILED_INDEXES: Final = "Job has failed indexes"


def failed_indexes_verdict(
    spec: JobSpec, failed: OrderedIntervals, succeeded: OrderedIntervals
) -> tuple[str, str] | None:
    """syncJob's failure scenarios for backoffLimitPerIndex, as (reason, message): more
    failed indexes than maxFailedIndexes, or every index succeeded or failed and some
    failed."""
    total = intervals_total(failed)
    if spec.max_failed_indexes is not None and total > spec.max_failed_indexes:
        return c.REASON_MAX_FAILED_INDEXES_EXCEEDED, MSG_MAX_FAILED_INDEXES_EXCEEDED
    if total > 0 and total + intervals_total(succeeded) >= (spec.completions or 0):
        return c.REASON_FAILED_INDEXES, MSG_FAILED_INDEXES
    return None


def track_succeeded_indexes(
    spec: JobSpec,
    status: JobStatus,
    succeeded: OrderedIntervals,
    new_indexes: Sequence[int],
    failures: IndexFailures | None = None,
) -> JobStatus:
    """trackJobStatusAndRemoveFinalizers' Indexed branch after its pod loop: the
    succeeded indexes with ``new_indexes`` (those the loop recorded, in increasing
    order) become status.completedIndexes and their number status.succeeded; the failed
    indexes (``failures``, with backoffLimitPerIndex) status.failedIndexes, "" when none
    failed, and without backoffLimitPerIndex the job has no failedIndexes. A NonIndexed
    job's status is returned as it is."""
    if not spec.indexed:
        return status
    intervals = with_ordered_indexes(succeeded, new_indexes)
    return evolve(
        status,
        completed_indexes=intervals_string(intervals),
        succeeded=intervals_total(intervals),
        failed_indexes=None if failures is None else intervals_string(failures.failed),
    )


def pending_indexes(
    job: Job,
    active_pods: Iterable[PodInfo],
    pods: Iterable[PodInfo],
    succeeded_indexes: OrderedIntervals,
    count: int,
    failures: IndexFailures | None = None,
) -> tuple[int, ...]:
    """manageJob's indexesToAdd: the ``count`` lowest indexes that need a pod
    (firstPendingIndexes; with backoffLimitPerIndex, failed indexes get none)."""
    spec = job.spec
    return first_pending_indexes(
        active_pods,
        succeeded_indexes,
        None if failures is None else failures.failed,
        count,
        spec.completions or 0,
        pods=pods,
        only_replace_failed=spec.only_replace_failed,
    )
