"""Finished-pod tracking with finalizers: the pod side of trackJobStatusAndRemoveFinalizers.

A pod keeps the tracking finalizer until the job has recorded it: its UID goes into
``uncountedTerminatedPods`` first, its finalizer is removed next, and only then is it
moved into the ``succeeded``/``failed`` counters. These pure functions decide which
pods are new, which finalizers may go, and which UIDs are counted; the core
(:func:`~paralleljob.core.job.sync.track`, :func:`~paralleljob.core.job.sync.count_and_enact`)
orders them around the API calls. Upstream they are in ``pkg/controller/job/job_controller.go``.

An Indexed job records a succeeded pod by its completion index instead of its UID
(``status.completedIndexes``, written with the other uncounted pods before the
finalizer goes; see :func:`~paralleljob.core.job.indexed.track_succeeded_indexes`), and only
pods with an index below ``completions`` count at all. A job whose podReplacementPolicy
is Failed does not take a terminating pod for failed (upstream's ``isPodFailed``).

With a pod failure policy, a failed pod that matches an Ignore rule is released without
being counted (``countFailed``); with backoffLimitPerIndex, the last failed pod of an
index still to be retried keeps its finalizer until its replacement exists
(``canRemoveFinalizer``'s ``podsWithDelayedDeletionPerIndex``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ... import constants as c
from ..dataclass_evolve import evolve
from .indexed import by_completion_index
from .intervals import OrderedIntervals, intervals_has
from .model import Condition, JobSpec, JobStatus, PodInfo, is_pod_failed
from .pod_failure_policy import match_pod

#: A NonIndexed job that replaces terminating pods: what the functions assume unless told.
_PLAIN = JobSpec()


def tracked_by_finalizer(pod: PodInfo, expected_removed: frozenset[str]) -> bool:
    """Whether the job still has to account for ``pod``: it has the finalizer and no
    removal of it is pending (one pending was processed by an earlier sync)."""
    return pod.has_finalizer and pod.uid not in expected_removed


def uids_with_finalizer(
    pods: Iterable[PodInfo], expected_removed: frozenset[str]
) -> frozenset[str]:
    """trackJobStatusAndRemoveFinalizers' uidsWithFinalizer."""
    return frozenset(p.uid for p in pods if tracked_by_finalizer(p, expected_removed))


def has_valid_index(pod: PodInfo, spec: JobSpec) -> bool:
    """Whether an Indexed job counts ``pod``: its completion index is known and below
    ``completions`` (getValidPodsWithFilter). Every pod of a NonIndexed job counts."""
    if not spec.indexed:
        return True
    index = pod.completion_index
    return index is not None and spec.completions is not None and index < spec.completions


def new_finished_pods(
    pods: Iterable[PodInfo],
    status: JobStatus,
    expected_removed: frozenset[str],
    spec: JobSpec = _PLAIN,
) -> tuple[tuple[PodInfo, ...], tuple[PodInfo, ...]]:
    """getNewFinishedPods: the succeeded and the failed pods that status neither counts
    nor lists as uncounted (of an Indexed job, those with a valid index)."""
    known_s, known_f = set(status.uncounted_succeeded), set(status.uncounted_failed)
    only_failed, indexed = spec.only_replace_failed, spec.indexed
    succeeded: list[PodInfo] = []
    failed: list[PodInfo] = []
    for p in pods:
        if not tracked_by_finalizer(p, expected_removed):
            continue
        if indexed and not has_valid_index(p, spec):
            continue
        if p.phase == c.SUCCEEDED:  # never failed too
            if p.uid not in known_s:
                succeeded.append(p)
        elif is_pod_failed(p, only_replace_failed=only_failed) and p.uid not in known_f:
            failed.append(p)
    return tuple(succeeded), tuple(failed)


def can_remove_finalizer(
    pod: PodInfo,
    *,
    job_deleting: bool,
    verdict: Condition | None,
    consider_failed: bool | None = None,
    delayed: Mapping[int, PodInfo] | None = None,
) -> bool:
    """canRemoveFinalizer: the job is being deleted or has a verdict, or the pod has
    finished: succeeded, or failed (``consider_failed``, upstream's considerPodFailed:
    is_pod_failed for the job; by default for a job that replaces terminating pods:
    Failed, or deleted before it could succeed), unless it is its index's last failed
    pod in ``delayed`` (backoffLimitPerIndex: podsWithDelayedDeletionPerIndex)."""
    if job_deleting or verdict is not None or pod.phase == c.SUCCEEDED:
        return True
    if not (pod.failed if consider_failed is None else consider_failed):
        return False
    return not _deletion_delayed(pod, delayed)


def _deletion_delayed(pod: PodInfo, delayed: Mapping[int, PodInfo] | None) -> bool:
    """The pod is its index's last failed pod, whose finalizer waits for the replacement."""
    if not delayed or pod.completion_index is None:
        return False
    waiting = delayed.get(pod.completion_index)
    return waiting is not None and waiting.uid == pod.uid


def clean_uncounted_pods_without_finalizers(
    status: JobStatus, with_finalizer: frozenset[str]
) -> JobStatus:
    """cleanUncountedPodsWithoutFinalizers: count the uncounted UIDs whose finalizer is gone."""
    if not (status.uncounted_succeeded or status.uncounted_failed):
        return status  # most syncs: nothing uncounted (replace alone was 7 % of a sync)
    keep_s = tuple(u for u in status.uncounted_succeeded if u in with_finalizer)
    keep_f = tuple(u for u in status.uncounted_failed if u in with_finalizer)
    return evolve(
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
    #: Indexed jobs: the indexes of the succeeded pods recorded (newSucceededIndexes), in
    #: increasing order; they go into status.completedIndexes instead of the UIDs.
    new_succeeded_indexes: tuple[int, ...]
    #: podsToRemoveFinalizer: every pod recorded, and those that need no recording.
    remove_finalizers: tuple[PodInfo, ...]
    #: The pods this sync recorded as succeeded or failed, for the back-off record.
    newly_succeeded: tuple[PodInfo, ...]
    newly_failed: tuple[PodInfo, ...]
    #: MaxUncountedPods was reached: the rest waits for the next sync.
    reached_max_uncounted: bool
    #: podFailureCountByPolicyAction: (action, pods) for the failed pods recorded whose
    #: failure matched a rule of the pod failure policy, by action, in action order
    #: (pod_failures_handled_by_failure_policy_total; counted here, where the match is
    #: made, so that the rules are matched once).
    policy_actions: tuple[tuple[str, int], ...] = ()


@dataclass
class _Uncounted:
    """What trackJobStatusAndRemoveFinalizers' loop accumulates: uncountedStatus (the
    UIDs), newSucceededIndexes, podsToRemoveFinalizer, the new finished pods and
    podFailureCountByPolicyAction."""

    spec: JobSpec
    prev_succeeded_indexes: OrderedIntervals
    succeeded: list[str]
    failed: list[str]
    #: The UIDs of ``succeeded`` and ``failed``, for membership tests.
    known_succeeded: set[str] = field(init=False)
    known_failed: set[str] = field(init=False)
    new_indexes: list[int] = field(default_factory=list)
    remove: list[PodInfo] = field(default_factory=list)
    newly_succeeded: list[PodInfo] = field(default_factory=list)
    newly_failed: list[PodInfo] = field(default_factory=list)
    actions: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.known_succeeded = set(self.succeeded)
        self.known_failed = set(self.failed)

    @classmethod
    def of(
        cls, status: JobStatus, spec: JobSpec, prev_succeeded_indexes: OrderedIntervals
    ) -> _Uncounted:
        """The loop's start: the UIDs ``status`` already lists as uncounted."""
        return cls(
            spec,
            prev_succeeded_indexes,
            list(status.uncounted_succeeded),
            list(status.uncounted_failed),
        )

    def size(self) -> int:
        """What MaxUncountedPods bounds: new indexes and uncounted UIDs."""
        return len(self.new_indexes) + len(self.succeeded) + len(self.failed)

    def add_succeeded(self, pod: PodInfo) -> None:
        """The loop's branch for a succeeded pod: by its completion index for an Indexed
        job (unless status.completedIndexes has it; the index is enough not to count a
        pod twice), else by its UID."""
        if not self.spec.indexed:
            if pod.uid not in self.known_succeeded:
                self.succeeded.append(pod.uid)
                self.known_succeeded.add(pod.uid)
                self.newly_succeeded.append(pod)
            return
        index = pod.completion_index
        if (
            index is not None
            and has_valid_index(pod, self.spec)
            and not intervals_has(self.prev_succeeded_indexes, index)
        ):
            self.new_indexes.append(index)
            self.newly_succeeded.append(pod)

    def add_failed(self, pod: PodInfo, failed: bool) -> None:
        """The loop's branch for a failed pod (``failed``), or one a failing job fails: its
        UID unless the pod failure policy ignores it (countFailed), the rule's action
        counted (podFailureCountByPolicyAction). A pod that did fail starts the back-off
        (newFailedPods), ignored or not."""
        if pod.uid in self.known_failed or not has_valid_index(pod, self.spec):
            return
        match = match_pod(self.spec.pod_failure_policy, pod)  # no policy: no action
        if match.action is not None:
            self.actions[match.action] += 1
        if match.count_failed:
            self.failed.append(pod.uid)
            self.known_failed.add(pod.uid)
        if failed:
            self.newly_failed.append(pod)

    def recorded(self, reached_max: bool) -> RecordedPods:
        return RecordedPods(
            uncounted_succeeded=tuple(self.succeeded),
            uncounted_failed=tuple(self.failed),
            new_succeeded_indexes=tuple(self.new_indexes),
            remove_finalizers=tuple(self.remove),
            newly_succeeded=tuple(self.newly_succeeded),
            newly_failed=tuple(self.newly_failed),
            reached_max_uncounted=reached_max,
            policy_actions=tuple(sorted(self.actions.items())),
        )


def _fails_remaining(verdict: Condition | None) -> bool:
    """Once the job has failed (a verdict other than SuccessCriteriaMet,
    isSuccessCriteriaMetCondition), every pod not yet terminated counts as failed."""
    return verdict is not None and verdict.type != c.COND_SUCCESS_CRITERIA_MET


def record_finished_pods(
    pods: Iterable[PodInfo],
    status: JobStatus,
    expected_removed: frozenset[str],
    verdict: Condition | None,
    *,
    job_deleting: bool,
    max_uncounted: int,
    spec: JobSpec = _PLAIN,
    prev_succeeded_indexes: OrderedIntervals = (),
    delayed: Mapping[int, PodInfo] | None = None,
) -> RecordedPods:
    """trackJobStatusAndRemoveFinalizers' loop: adds finished pods to the uncounted UIDs
    of ``status`` (after cleanUncountedPodsWithoutFinalizers) and picks the finalizers
    to remove, up to ``max_uncounted`` UIDs so that status stays small.

    An Indexed job's pods are looked at in index order; a succeeded one is recorded by
    its index unless ``prev_succeeded_indexes`` (status.completedIndexes as the sync
    found it) has it, and only pods with a valid index are recorded at all. A failed
    pod that the job's pod failure policy ignores is released but not counted (it is
    among ``newly_failed`` all the same: it starts the back-off, as upstream's
    newFailedPods); the pods in ``delayed`` keep their finalizer.
    """
    if spec.indexed:
        pods = by_completion_index(pods)  # to introduce completed indexes in order
    uncounted = _Uncounted.of(status, spec, prev_succeeded_indexes)
    fail_remaining = _fails_remaining(verdict)
    for pod in pods:
        if not tracked_by_finalizer(pod, expected_removed):
            continue  # processed by an earlier sync
        failed = is_pod_failed(pod, only_replace_failed=spec.only_replace_failed)
        if not can_remove_finalizer(
            pod, job_deleting=job_deleting, verdict=verdict, consider_failed=failed, delayed=delayed
        ):
            continue
        uncounted.remove.append(pod)
        if pod.phase == c.SUCCEEDED and pod.uid not in uncounted.known_failed:
            uncounted.add_succeeded(pod)
        elif failed or fail_remaining:
            uncounted.add_failed(pod, failed)
        if uncounted.size() >= max_uncounted:
            return uncounted.recorded(reached_max=True)
    return uncounted.recorded(reached_max=False)
