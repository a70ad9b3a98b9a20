"""Finished-pod tracking with finalizers: the pod side of trackJobStatusAndRemoveFinalizers.

A pod keeps the tracking finalizer until the job has recorded it: its UID goes into
``uncountedTerminatedPods`` first, its finalizer is removed next, and only then is it
moved into the ``succeeded``/``failed`` counters. These pure functions decide which
pods are new, which finalizers may go, and which UIDs are counted; the core
(:func:`paralleljob.core.track`, :func:`paralleljob.core.count_and_enact`) orders them
around the API calls. Upstream they are in ``pkg/controller/job/job_controller.go``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from . import constants as c
from .model import Condition, JobStatus, PodInfo


def tracked_by_finalizer(pod: PodInfo, expected_removed: frozenset[str]) -> bool:
    """Whether the job still has to account for ``pod``: it has the finalizer and no
    removal of it is pending (one pending was processed by an earlier sync)."""
    return pod.has_finalizer and pod.uid not in expected_removed


def uids_with_finalizer(
    pods: Iterable[PodInfo], expected_removed: frozenset[str]
) -> frozenset[str]:
    """trackJobStatusAndRemoveFinalizers' uidsWithFinalizer."""
    return frozenset(p.uid for p in pods if tracked_by_finalizer(p, expected_removed))


def new_finished_pods(
    pods: Iterable[PodInfo], status: JobStatus, expected_removed: frozenset[str]
) -> tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]]:
    """getNewFinishedPods: the succeeded and the failed pods that status neither counts
    nor lists as uncounted."""
    succeeded, failed = set(status.uncounted_succeeded), set(status.uncounted_failed)
    tracked = [p for p in pods if tracked_by_finalizer(p, expected_removed)]
    return (
        tuple(p for p in tracked if p.phase == c.SUCCEEDED and p.uid not in succeeded),
        tuple(p for p in tracked if p.failed and p.uid not in failed),
    )


def can_remove_finalizer(pod: PodInfo, *, job_deleting: bool, verdict: Condition | None) -> bool:
    """canRemoveFinalizer: the job is being deleted or has a verdict, or the pod has
    finished (succeeded, or failed: Failed, or deleted before it could succeed)."""
    return job_deleting or verdict is not None or pod.phase == c.SUCCEEDED or pod.failed


def clean_uncounted_pods_without_finalizers(
    status: JobStatus, with_finalizer: frozenset[str]
) -> JobStatus:
    """cleanUncountedPodsWithoutFinalizers: count the uncounted UIDs whose finalizer is gone."""
    keep_s = tuple(u for u in status.uncounted_succeeded if u in with_finalizer)
    keep_f = tuple(u for u in status.uncounted_failed if u in with_finalizer)
    return replace(
        status,
        succeeded=status.succeeded + len(status.uncounted_succeeded) - len(keep_s),
        failed=status.failed + len(status.uncounted_failed) - len(keep_f),
        uncounted_succeeded=keep_s,
        uncounted_failed=keep_f,
    )


@dataclass(frozen=True)
class RecordedPods:
    """What trackJobStatusAndRemoveFinalizers' loop over the pods decides."""

    uncounted_succeeded: tuple[str, ...]
    uncounted_failed: tuple[str, ...]
    #: podsToRemoveFinalizer: every pod recorded, and those that need no recording.
    remove_finalizers: tuple[PodInfo, ...]
    #: The pods this sync recorded as succeeded or failed, for the back-off record.
    newly_succeeded: tuple[PodInfo, ...]
    newly_failed: tuple[PodInfo, ...]
    #: MaxUncountedPods was reached: the rest waits for the next sync.
    reached_max_uncounted: bool


def record_finished_pods(
    pods: Iterable[PodInfo],
    status: JobStatus,
    expected_removed: frozenset[str],
    verdict: Condition | None,
    *,
    job_deleting: bool,
    max_uncounted: int,
) -> RecordedPods:
    """trackJobStatusAndRemoveFinalizers' loop: adds finished pods to the uncounted UIDs
    of ``status`` (after cleanUncountedPodsWithoutFinalizers) and picks the finalizers
    to remove, up to ``max_uncounted`` UIDs so that status stays small."""
    uncounted_s, uncounted_f = list(status.uncounted_succeeded), list(status.uncounted_failed)
    known_s, known_f = set(uncounted_s), set(uncounted_f)
    # Once the job has failed, every pod not yet terminated counts as failed.
    fail_remaining = verdict is not None and verdict.type != c.COND_SUCCESS_CRITERIA_MET
    remove: list[PodInfo] = []
    newly_s: list[PodInfo] = []
    newly_f: list[PodInfo] = []
    reached_max = False
    for pod in pods:
        if not tracked_by_finalizer(pod, expected_removed) or not can_remove_finalizer(
            pod, job_deleting=job_deleting, verdict=verdict
        ):
            continue
        remove.append(pod)
        if pod.phase == c.SUCCEEDED and pod.uid not in known_f:
            if pod.uid not in known_s:
                uncounted_s.append(pod.uid)
                known_s.add(pod.uid)
                newly_s.append(pod)
        elif (pod.failed or fail_remaining) and pod.uid not in known_f:
            uncounted_f.append(pod.uid)
            known_f.add(pod.uid)
            if pod.failed:
                newly_f.append(pod)
        if len(uncounted_s) + len(uncounted_f) >= max_uncounted:
            reached_max = True
            break
    return RecordedPods(
        uncounted_succeeded=tuple(uncounted_s),
        uncounted_failed=tuple(uncounted_f),
        remove_finalizers=tuple(remove),
        newly_succeeded=tuple(newly_s),
        newly_failed=tuple(newly_f),
        reached_max_uncounted=reached_max,
    )
