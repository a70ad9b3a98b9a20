"""The decision core: the batch/v1 Job controller's syncJob as pure functions.

Given a job, its pods (from the operator's cache) and the time, the core says what
to do; it never does I/O. :func:`sync_context` reads the job once per sync (syncJob's
``syncJobCtx``: the counts, the start time, the verdict on the job); then one sync
runs in three steps, each a pure function of that context and of what the previous
step's API calls achieved, exactly as upstream interleaves them
(``pkg/controller/job/job_controller.go``):

1. :func:`plan_pods` -- manageJob, or deleteActivePods once the job has a verdict:
   pods to create, or pods to delete (deletes win), and when to look again
   (back-off, active deadline).
2. :func:`track` -- given which creates/deletes succeeded: the status to write
   *before* any finalizer is removed (finished pods recorded by UID in
   ``uncountedTerminatedPods``, interim FailureTarget/SuccessCriteriaMet conditions,
   the persisted back-off record), and the pods whose tracking finalizer to remove
   (the pod side of it is in :mod:`.tracking`).
3. :func:`count_and_enact` -- given which finalizers are gone: move those UIDs into
   the ``succeeded``/``failed`` counters, enact Complete/Failed once nothing is
   uncounted or terminating, and say when to sync again (TTL, see :mod:`.ttl`) and
   when DURATION changes.

A pod is therefore counted exactly once, whatever crashes between the steps.

Indexed jobs, podReplacementPolicy, successPolicy, podFailurePolicy and
backoffLimitPerIndex hook in where upstream's syncJob branches on them, and
podStartDeadlineSeconds (not upstream) where manageJob would create pods; the decisions
themselves are in :mod:`.indexed` (which indexes succeeded or failed, which to create,
duplicate indexes to remove, ``completedIndexes``, ``failedIndexes``; the indexes are
:mod:`.intervals`' ordered intervals), :mod:`.active_pods` (the order in which pods go),
:mod:`.success_policy` (whether a rule is met), :mod:`.pod_failure_policy` (the FailJob
verdict, which failures count), :mod:`.backoff` (job-wide and per-index back-off, the
job's own podFailureBackoff), :mod:`.pod_start_deadline` (which pods did not start in
time) and :mod:`.tracking` (how a finished pod is recorded).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ... import constants as c
from ...config import CoreConfig
from ...constants import NORMAL, WARNING
from ...timeutil import truncate
from ..dataclass_evolve import evolve
from ..event import Event
from . import display
from .active_pods import active_pods, removal_key
from .backoff import (
    BackoffRecord,
    job_backoff,
    next_record,
    pod_creation_info_for_independent_indexes,
    remaining_seconds,
)
from .indexed import (
    IndexFailures,
    append_duplicated_index_pods_for_removal,
    failed_indexes_verdict,
    job_index_failures,
    job_succeeded_indexes,
    pending_indexes,
    track_succeeded_indexes,
)
from .intervals import OrderedIntervals, intervals_total
from .job_restarts import (
    NO_EARLIER_ATTEMPTS,
    EarlierAttempts,
    restart_message,
    restarted_status,
    restarts_after,
    split_attempts,
)
from .kind import PARALLELJOB, JobKind
from .model import (
    Condition,
    Job,
    JobStatus,
    PodInfo,
    find_condition,
    has_true_condition,
    is_finished,
)
from .pod_failure_policy import (
    REASON_POD_FAILURE_POLICY,
    fail_job_message,
    non_ignored_failed_count,
)
from .pod_start_deadline import (
    NO_DEADLINES,
    StartDeadlines,
    event_message,
    failed_condition,
    start_deadlines,
)
from .success_policy import REASON_SUCCESS_POLICY, matches_success_policy
from .tracking import (
    RecordedPods,
    clean_uncounted_pods_without_finalizers,
    new_finished_pods,
    record_finished_pods,
    uids_with_finalizer,
)
from .ttl import process_ttl


@dataclass(frozen=True)
class SyncInput:
    job: Job
    pods: tuple[PodInfo, ...]
    now: datetime
    #: False while pods this operator created or deleted are not yet in its cache.
    expectations_satisfied: bool = True
    #: Pods whose finalizer removal succeeded but is not yet in the cache.
    expected_removed_finalizers: frozenset[str] = frozenset()
    config: CoreConfig = field(default_factory=CoreConfig)
    #: The job's kind: the label its pods' selector names, whether its finished jobs
    #: are the operator's to delete.
    kind: JobKind = PARALLELJOB


@dataclass(frozen=True)
class SyncContext:
    """syncJobCtx: what one sync knows about its job before it acts. Computed once per
    sync by :func:`sync_context`; all three steps read it."""

    inp: SyncInput
    active: tuple[PodInfo, ...]
    #: Active pods that are ready (countReadyPods).
    ready: int
    #: Pods being deleted that have not terminated (CountTerminatingPods).
    terminating: int
    #: Finished pods that status neither counts nor lists (getNewFinishedPods).
    new_succeeded: tuple[PodInfo, ...]
    new_failed: tuple[PodInfo, ...]
    #: Counted, uncounted and new finished pods together.
    succeeded: int
    failed: int
    #: status.startTime, set by the first sync of an unsuspended job.
    start_time: datetime | None
    #: jobCtx.finishedCondition before any pod changes: a stored SuccessCriteriaMet,
    #: Failed for a stored FailureTarget, or a new FailureTarget.
    verdict: Condition | None
    #: Seconds until activeDeadlineSeconds runs out, while it has not, or until the
    #: next unstarted pod's podStartDeadlineSeconds does, if sooner.
    deadline_requeue: float | None
    #: Indexed jobs: status.completedIndexes (prevSucceededIndexes), and those with the
    #: indexes of the succeeded pods not counted yet (succeededIndexes).
    prev_succeeded_indexes: OrderedIntervals = ()
    succeeded_indexes: OrderedIntervals = ()
    #: With backoffLimitPerIndex: the failed indexes (jobCtx.failedIndexes) and each
    #: index's last failed pod (podsWithDelayedDeletionPerIndex); None otherwise.
    index_failures: IndexFailures | None = None
    #: podStartDeadlineSeconds: the active pods that did not start in time (while the
    #: job has no verdict).
    start_deadlines: StartDeadlines = NO_DEADLINES
    #: spec.restartPolicy: pods of the job's earlier attempts still to release or
    #: delete, uncounted (``inp.pods`` has only the current attempt's).
    earlier_attempts: EarlierAttempts = NO_EARLIER_ATTEMPTS

    @property
    def job(self) -> Job:
        return self.inp.job

    @property
    def now(self) -> datetime:
        return self.inp.now


@dataclass(frozen=True)
class PodPlan:
    """Step 1: what manageJob (or a verdict) does to pods."""

    create: int = 0
    #: Indexed jobs: the completion index of each pod to create, in creation order
    #: (``create`` is their number); empty for a NonIndexed job.
    create_indexes: tuple[int, ...] = ()
    #: With backoffLimitPerIndex: the last failed pod of each index in
    #: ``create_indexes`` that has one, whose failure counts the new pod carries on.
    replaced: tuple[tuple[int, PodInfo], ...] = ()
    delete: tuple[PodInfo, ...] = ()
    #: True for scale-down and suspend (such pods are never counted as failures);
    #: False when a job's active pods are deleted for its verdict (they count as failed).
    remove_finalizer_before_delete: bool = True
    #: podStartDeadlineSeconds: the pod condition each pod of ``delete`` gets, with the
    #: phase Failed, before it is deleted (it counts as failed, and a pod failure policy
    #: can match the condition); None for every other deletion.
    fail_condition: Condition | None = None
    #: Seconds until the next sync is needed for this plan (back-off, deadline).
    requeue_after: float | None = None
    #: Why, for logs: "create", "scale-down", "suspend", "fail", "start-deadline",
    #: "backoff", "earlier-attempt", "".
    reason: str = ""


@dataclass(frozen=True)
class PodOutcome:
    """What the API did with a PodPlan."""

    created: int = 0
    deleted: tuple[str, ...] = ()
    #: The API's message when a pod create was rejected.
    create_error: str | None = None


@dataclass(frozen=True)
class Tracked:
    """Step 2: the status to write before removing finalizers, and which to remove."""

    status: JobStatus
    remove_finalizers: tuple[PodInfo, ...]
    uids_with_finalizer: frozenset[str]
    #: Complete or Failed, to enact in step 3 once no pod is uncounted or terminating.
    terminal_condition: Condition | None
    reached_max_uncounted: bool
    events: tuple[Event, ...] = ()
    #: (action, pods) of the failures recorded that matched a pod failure policy rule
    #: (tracking.RecordedPods.policy_actions): counted in the metrics once status write
    #: 1 is done, as upstream's flushUncountedAndRemoveFinalizers does.
    policy_actions: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SyncResult:
    """Step 3: the status after counting, events, and what to do next."""

    status: JobStatus
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    #: Seconds until the printed DURATION changes (None once it is fixed): a refresh
    #: that the shell schedules within its write budget, apart from ``requeue_after``.
    refresh_after: float | None = None
    #: ttlSecondsAfterFinished has run out: delete the job.
    delete_job: bool = False


# ----------------------------------------------------------------------------- helpers


def new_condition(ctype: str, status: str, reason: str, message: str, now: datetime) -> Condition:
    stamp = truncate(now)  # as stored: metav1.Time has whole seconds
    return Condition(ctype, status, reason, message, stamp, stamp)


def ensure_condition(
    conditions: Sequence[Condition],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> tuple[tuple[Condition, ...], bool]:
    """ensureJobConditionStatus: update in place, append only if not False."""
    out = list(conditions)
    for i, cond in enumerate(out):
        if cond.type == ctype:
            if cond.status != status or cond.reason != reason or cond.message != message:
                out[i] = new_condition(ctype, status, reason, message, now)
                return tuple(out), True
            return tuple(out), False
    if status != "False":
        out.append(new_condition(ctype, status, reason, message, now))
        return tuple(out), True
    return tuple(out), False


def _failed_for_target(target: Condition, now: datetime) -> Condition:
    """newFailedConditionForFailureTarget."""
    return new_condition(c.COND_FAILED, "True", target.reason, target.message, now)


def pods_for_removal(
    pods: Sequence[PodInfo],
    count: int,
    indexed_completions: int | None = None,
    *,
    by_deletion_cost: bool = False,
) -> tuple[PodInfo, ...]:
    """activePodsForRemoval: the first ``count`` pods in deletion order. For an Indexed
    job (``indexed_completions``: its completions) first every pod without a valid index
    and all but one of the pods of each index, however many they are. With
    ``by_deletion_cost`` (a ParallelJob), the order honours each pod's
    controller.kubernetes.io/pod-deletion-cost (active_pods.removal_order_key_by_cost)."""
    key = removal_key(by_deletion_cost)
    rm: tuple[PodInfo, ...] = ()
    left: Sequence[PodInfo] = pods
    if indexed_completions is not None:
        rm, left = append_duplicated_index_pods_for_removal(
            (), (), pods, indexed_completions, key=key
        )
    if len(rm) < count:
        rm = (*rm, *sorted(left, key=key)[: count - len(rm)])
    return rm


def want_active(completions: int | None, parallelism: int, succeeded: int, active: int) -> int:
    """How many pods should be active (manageJob's wantActive)."""
    if completions is None:
        # Work queue: parallelism until the first success, then no new pod ever.
        return active if succeeded > 0 else parallelism
    return max(0, min(completions - succeeded, parallelism))


def past_backoff_limit_on_failure(
    restart_policy: str, backoff_limit: int, pods: Iterable[PodInfo]
) -> bool:
    """With restartPolicy OnFailure, container restarts of pending/running pods count."""
    if restart_policy != "OnFailure":
        return False
    restarts = sum(p.restarts for p in pods if p.phase in (c.RUNNING, c.PENDING))
    if backoff_limit == 0:
        return restarts > 0
    return restarts >= backoff_limit


def past_active_deadline(inp: SyncInput, start_time: datetime | None) -> bool:
    spec = inp.job.spec
    if spec.active_deadline_seconds is None or start_time is None or spec.suspend:
        return False
    return (inp.now - start_time).total_seconds() >= spec.active_deadline_seconds


def _next_backoff(
    status: JobStatus,
    succeeded: Sequence[PodInfo],
    failed: Sequence[PodInfo],
    now: datetime,
) -> BackoffRecord:
    """The back-off record stored in ``status``, updated for newly finished pods."""
    stored = BackoffRecord(status.failures_since_success, status.last_failure_time)
    return next_record(stored, succeeded, failed, now)


def _min_delay(*delays: float | None) -> float | None:
    values = [d for d in delays if d is not None]
    return min(values) if values else None


def _may_manage_pods(ctx: SyncContext) -> bool:
    """Upstream calls manageJob only when every pod it created or deleted is in the
    cache (else it would count them twice) and the job is not being deleted."""
    return ctx.inp.expectations_satisfied and not ctx.job.deleting


def _with_display(ctx: SyncContext, status: JobStatus) -> JobStatus:
    job = ctx.job
    return evolve(
        status,
        selector=ctx.inp.kind.selector(job.uid),
        observed_generation=job.generation,
        status_text=display.status_text(status, job.deleting),
        completions_text=display.completions_text(job.spec, status.succeeded),
        duration_text=display.duration_text(status, ctx.now),
        containers_text=job.spec.containers_text,
        images_text=job.spec.images_text,
    )


# ----------------------------------------------------------------------------- context


def sync_context(inp: SyncInput) -> SyncContext:
    """syncJob up to manageJob: the counts, startTime, and the verdict on the job."""
    inp, earlier_attempts = _current_attempt(inp)
    job, status = inp.job, inp.job.status
    active = tuple(active_pods(inp.pods))
    new_succeeded, new_failed = new_finished_pods(
        inp.pods, status, inp.expected_removed_finalizers, job.spec
    )
    # nonIgnoredFailedPodsCount: failures a pod failure policy ignores do not count.
    new_counted = non_ignored_failed_count(job.spec.pod_failure_policy, new_failed)
    failed = status.failed + new_counted + len(set(status.uncounted_failed))
    succeeded = status.succeeded + len(new_succeeded) + len(set(status.uncounted_succeeded))
    # An Indexed job counts its succeeded indexes.
    prev_indexes, indexes = job_succeeded_indexes(job, inp.pods)
    if job.spec.indexed:
        succeeded = intervals_total(indexes)
    start_time = _start_time(inp)
    verdict = _verdict(inp, failed, start_time)
    unstarted = start_deadlines(job.spec, active, inp.now) if verdict is None else NO_DEADLINES
    deadline_requeue = _deadline_requeue(inp, start_time, unstarted) if verdict is None else None
    index_failures = job_index_failures(job, inp.pods, indexes, inp.expected_removed_finalizers)
    if verdict is None:
        verdict = _failed_indexes_verdict(inp, index_failures, indexes)
    if verdict is None:
        verdict = _success_policy_verdict(inp, indexes)
    return SyncContext(
        inp=inp,
        active=active,
        ready=sum(1 for p in active if p.ready),
        terminating=sum(1 for p in inp.pods if p.terminating),
        new_succeeded=new_succeeded,
        new_failed=new_failed,
        succeeded=succeeded,
        failed=failed,
        start_time=start_time,
        verdict=verdict,
        deadline_requeue=deadline_requeue,
        prev_succeeded_indexes=prev_indexes,
        succeeded_indexes=indexes,
        index_failures=index_failures,
        start_deadlines=unstarted,
        earlier_attempts=earlier_attempts,
    )


def _current_attempt(inp: SyncInput) -> tuple[SyncInput, EarlierAttempts]:
    """A restarted job (spec.restartPolicy) syncs with its current attempt's pods only."""
    restarts = inp.job.status.restarts
    if restarts == 0:
        return inp, NO_EARLIER_ATTEMPTS
    current, earlier = split_attempts(inp.pods, restarts, inp.expected_removed_finalizers)
    return evolve(inp, pods=current), earlier


def _start_time(inp: SyncInput) -> datetime | None:
    """The job's first start: set only while it is not suspended."""
    start_time = inp.job.status.start_time
    if start_time is None and not inp.job.spec.suspend:
        return truncate(inp.now)
    return start_time


def _verdict(inp: SyncInput, failed: int, start_time: datetime | None) -> Condition | None:
    """syncJob's evaluation of the end state: a verdict of an earlier sync stands,
    else the failure scenarios: a FailJob rule of the pod failure policy, then
    backoffLimit and the deadline (the failed indexes and success are evaluated after)."""
    stored = _stored_verdict(inp.job.status, inp.now)
    if stored is not None:
        return stored
    fail_job = _pod_failure_policy_verdict(inp)
    return fail_job if fail_job is not None else _failure_verdict(inp, failed, start_time)


def _pod_failure_policy_verdict(inp: SyncInput) -> Condition | None:
    """The interim FailureTarget (reason PodFailurePolicy) for a failed pod that matches
    a FailJob rule (getFailJobMessage)."""
    message = fail_job_message(inp.job.spec.pod_failure_policy, inp.pods)
    if message is None:
        return None
    return new_condition(c.COND_FAILURE_TARGET, "True", REASON_POD_FAILURE_POLICY, message, inp.now)


def _failed_indexes_verdict(
    inp: SyncInput, failures: IndexFailures | None, succeeded: OrderedIntervals
) -> Condition | None:
    """With backoffLimitPerIndex: FailureTarget for MaxFailedIndexesExceeded, or for
    FailedIndexes once every index has succeeded or failed."""
    if failures is None:
        return None
    found = failed_indexes_verdict(inp.job.spec, failures.failed, succeeded)
    if found is None:
        return None
    return new_condition(c.COND_FAILURE_TARGET, "True", *found, inp.now)


def _stored_verdict(status: JobStatus, now: datetime) -> Condition | None:
    """The pre-existing SuccessCriteriaMet, or Failed for a pre-existing FailureTarget."""
    met = find_condition(status.conditions, c.COND_SUCCESS_CRITERIA_MET)
    if met is not None and met.status == "True":
        return met
    target = find_condition(status.conditions, c.COND_FAILURE_TARGET)
    if target is not None and target.status == "True":
        return _failed_for_target(target, now)
    return None


def _failure_verdict(inp: SyncInput, failed: int, start_time: datetime | None) -> Condition | None:
    """newFailureCondition for BackoffLimitExceeded or DeadlineExceeded."""
    spec = inp.job.spec
    if failed > spec.backoff_limit or past_backoff_limit_on_failure(
        spec.restart_policy, spec.backoff_limit, inp.pods
    ):
        return new_condition(
            c.COND_FAILURE_TARGET, "True", c.REASON_BACKOFF_LIMIT, c.MSG_BACKOFF_LIMIT, inp.now
        )
    if past_active_deadline(inp, start_time):
        return new_condition(
            c.COND_FAILURE_TARGET, "True", c.REASON_DEADLINE, c.MSG_DEADLINE, inp.now
        )
    return None


def _success_policy_verdict(inp: SyncInput, succeeded: OrderedIntervals) -> Condition | None:
    """An Indexed job's SuccessCriteriaMet for a rule of its successPolicy its succeeded
    indexes meet, evaluated after the failure scenarios (matchSuccessPolicy)."""
    job = inp.job
    if not job.spec.indexed:
        return None
    met, message = matches_success_policy(
        job.spec.success_policy, job.name, job.spec.completions or 0, succeeded
    )
    if not met:
        return None
    return new_condition(
        c.COND_SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY, message, inp.now
    )


def _deadline_requeue(
    inp: SyncInput, start_time: datetime | None, unstarted: StartDeadlines
) -> float | None:
    """When to sync again for activeDeadlineSeconds (syncJob's queue.AddAfter), or for
    the next unstarted pod's podStartDeadlineSeconds if that comes first."""
    spec = inp.job.spec
    if spec.active_deadline_seconds is None or spec.suspend or not start_time:
        return unstarted.next_in
    elapsed = (inp.now - start_time).total_seconds()
    return _min_delay(max(spec.active_deadline_seconds - elapsed, 0.0), unstarted.next_in)


# ----------------------------------------------------------------------------- step 1


def plan_pods(ctx: SyncContext) -> PodPlan:
    """syncJob's pod changes: deleteActivePods once the job has a verdict, else manageJob;
    first, an earlier attempt's pods still running (spec.restartPolicy) go, uncounted."""
    if ctx.earlier_attempts.running:
        return PodPlan(delete=ctx.earlier_attempts.running, reason="earlier-attempt")
    if is_finished(ctx.job.status):
        return PodPlan()
    if ctx.verdict is not None:
        return _delete_active_pods(ctx)
    if not _may_manage_pods(ctx):
        return PodPlan(requeue_after=ctx.deadline_requeue)
    return _manage_job(ctx)


def _delete_active_pods(ctx: SyncContext) -> PodPlan:
    """deleteActivePods: the finalizers stay on, so that the pods count as failed."""
    if not ctx.active:
        return PodPlan(reason="fail")
    return PodPlan(delete=ctx.active, remove_finalizer_before_delete=False, reason="fail")


def _manage_job(ctx: SyncContext) -> PodPlan:
    """manageJob: delete a suspended job's pods or the surplus (and an Indexed job's
    duplicate and out-of-range indexes), or create the missing; never both in one sync."""
    spec = ctx.job.spec
    limit = ctx.inp.config.max_pod_changes_per_sync
    if spec.suspend:
        return PodPlan(delete=_pods_for_removal(ctx, len(ctx.active)), reason="suspend")
    active = len(ctx.active)
    want = want_active(spec.completions, spec.parallelism, ctx.succeeded, active)
    surplus = _pods_for_removal(ctx, active - want)[:limit]
    if surplus:
        return PodPlan(delete=surplus, reason="scale-down", requeue_after=ctx.deadline_requeue)
    # After scale-down, which removes unscheduled and Pending pods first and uncounted.
    if ctx.start_deadlines.expired:
        return _fail_unstarted_pods(ctx, limit)
    # With podReplacementPolicy Failed, a terminating pod is replaced once it has failed.
    terminating = ctx.terminating if spec.only_replace_failed else 0
    if want - terminating > active:
        return _create_after_backoff(ctx, min(want - terminating - active, limit))
    return PodPlan(requeue_after=ctx.deadline_requeue)


def _fail_unstarted_pods(ctx: SyncContext, limit: int) -> PodPlan:
    """podStartDeadlineSeconds: the pods that did not start in time are failed and
    deleted with their finalizer on, so that each counts as one failed pod."""
    deadline = ctx.job.spec.pod_start_deadline_seconds
    assert deadline is not None  # start_deadlines found pods past it
    return PodPlan(
        delete=ctx.start_deadlines.expired[:limit],
        remove_finalizer_before_delete=False,
        fail_condition=failed_condition(deadline, ctx.now),
        reason="start-deadline",
        requeue_after=ctx.deadline_requeue,
    )


def _pods_for_removal(ctx: SyncContext, count: int) -> tuple[PodInfo, ...]:
    spec = ctx.job.spec
    return pods_for_removal(
        ctx.active,
        count,
        spec.completions if spec.indexed else None,
        by_deletion_cost=ctx.inp.kind.honours_deletion_cost,
    )


def _create_after_backoff(ctx: SyncContext, count: int) -> PodPlan:
    """manageJob's creations, held back while the pod-failure back-off runs (job-wide,
    or per index with backoffLimitPerIndex); an Indexed job's for its lowest pending
    indexes."""
    wait = _job_wide_backoff(ctx)
    indexes: tuple[int, ...] = ()
    if wait <= 0 and ctx.job.spec.indexed:
        indexes, wait = _indexes_to_create(ctx, count)
        count = len(indexes)
    if wait > 0:
        return PodPlan(requeue_after=_min_delay(wait, ctx.deadline_requeue), reason="backoff")
    return PodPlan(
        create=count,
        create_indexes=indexes,
        replaced=_replaced_pods(ctx, indexes),
        reason="create",
        requeue_after=ctx.deadline_requeue,
    )


def _backoff_settings(ctx: SyncContext) -> tuple[float, float]:
    """The base and cap of the job's pod-failure back-off (spec.podFailureBackoff, else
    the operator's)."""
    cfg = ctx.inp.config
    return job_backoff(
        ctx.job.spec.pod_failure_backoff, cfg.backoff_base_seconds, cfg.backoff_max_seconds
    )


def _job_wide_backoff(ctx: SyncContext) -> float:
    """Seconds the job-wide back-off still holds creations back (none with
    backoffLimitPerIndex, whose indexes each have their own)."""
    if ctx.index_failures is not None:
        return 0.0
    record = _next_backoff(ctx.job.status, ctx.new_succeeded, ctx.new_failed, ctx.now)
    return remaining_seconds(record, ctx.now, *_backoff_settings(ctx))


def _indexes_to_create(ctx: SyncContext, count: int) -> tuple[tuple[int, ...], float]:
    """firstPendingIndexes, then with backoffLimitPerIndex only those whose back-off is
    over (getPodCreationInfoForIndependentIndexes): the indexes, or how long to wait."""
    failures = ctx.index_failures
    indexes = pending_indexes(
        ctx.job, ctx.active, ctx.inp.pods, ctx.succeeded_indexes, count, failures
    )
    if failures is None:
        return indexes, 0.0
    return pod_creation_info_for_independent_indexes(
        indexes, failures.delayed, ctx.now, *_backoff_settings(ctx)
    )


def _replaced_pods(ctx: SyncContext, indexes: Iterable[int]) -> tuple[tuple[int, PodInfo], ...]:
    """The last failed pod of each of ``indexes`` that has one (backoffLimitPerIndex)."""
    delayed = ctx.index_failures.delayed if ctx.index_failures is not None else {}
    return tuple((ix, delayed[ix]) for ix in indexes if ix in delayed)


# ----------------------------------------------------------------------------- step 2


@dataclass(frozen=True)
class _PodCounts:
    """The job's pods once this sync's creates and deletes are done."""

    active: int
    ready: int
    terminating: int
    #: How many active pods this sync deleted.
    deleted: int


def track(ctx: SyncContext, plan: PodPlan, outcome: PodOutcome) -> Tracked:
    """syncJob after manageJob, then trackJobStatusAndRemoveFinalizers up to its first
    status write: everything status write 1 carries, and the finalizers to remove."""
    if is_finished(ctx.job.status):
        return _release_leftover_finalizers(ctx)
    pods = _pod_counts(ctx, plan, outcome)
    verdict = _verdict_after_pod_changes(ctx, pods)
    status = evolve(
        ctx.job.status,
        start_time=ctx.start_time,
        active=pods.active,
        ready=pods.ready,
        terminating=pods.terminating,
    )
    events: tuple[Event, ...] = ()
    if ctx.verdict is None and verdict is None and _may_manage_pods(ctx):
        status, events = _update_suspended_condition(ctx, status)
    status, create_events = _update_pod_creation_condition(status, outcome, ctx.now)
    deadline_events = _start_deadline_events(ctx, plan, outcome)
    return _track_job_status(ctx, status, verdict, (*events, *create_events, *deadline_events))


def _release_leftover_finalizers(ctx: SyncContext) -> Tracked:
    """A finished job counts nothing more (upstream's syncJob returns early); finalizers
    left on its pods only keep them from going away. Those whose removal the cache does
    not show yet are gone already (the sync that finished the job removed them)."""
    expected = ctx.inp.expected_removed_finalizers
    return Tracked(
        status=_with_display(ctx, ctx.job.status),
        remove_finalizers=tuple(
            p for p in ctx.inp.pods if p.has_finalizer and p.uid not in expected
        ),
        uids_with_finalizer=frozenset(),
        terminal_condition=None,
        reached_max_uncounted=False,
    )


def _pod_counts(ctx: SyncContext, plan: PodPlan, outcome: PodOutcome) -> _PodCounts:
    done = set(outcome.deleted)
    deleted = [p for p in plan.delete if p.uid in done]
    # A pod failed before its deletion (fail_condition) has finished: not terminating.
    terminating = 0 if plan.fail_condition is not None else len(deleted)
    return _PodCounts(
        active=len(ctx.active) - len(deleted) + outcome.created,
        ready=ctx.ready - sum(1 for p in deleted if p.ready),
        terminating=ctx.terminating + terminating,
        deleted=len(deleted),
    )


def _start_deadline_events(
    ctx: SyncContext, plan: PodPlan, outcome: PodOutcome
) -> tuple[Event, ...]:
    """A Warning Event on the job for each pod failed and deleted for its start
    deadline (only those whose writes succeeded)."""
    deadline = ctx.job.spec.pod_start_deadline_seconds
    if plan.fail_condition is None or deadline is None:
        return ()
    done = set(outcome.deleted)
    reason = c.REASON_POD_START_DEADLINE_EXCEEDED
    return tuple(
        Event(WARNING, reason, event_message(p.name, deadline))
        for p in plan.delete
        if p.uid in done
    )


def _verdict_after_pod_changes(ctx: SyncContext, pods: _PodCounts) -> Condition | None:
    """A verdict waits while pods remain that are not deleted or not yet in the cache;
    without one, syncJob evaluates the success scenario for completions."""
    if ctx.verdict is not None:
        all_deleted = pods.deleted == len(ctx.active) and ctx.inp.expectations_satisfied
        return ctx.verdict if all_deleted else None
    return _completions_reached(ctx, pods.active)


def _completions_reached(ctx: SyncContext, active: int) -> Condition | None:
    """newSuccessCondition once enough pods succeeded and none is active (a work queue
    needs one success)."""
    completions = ctx.job.spec.completions
    needed = 1 if completions is None else completions
    if active > 0 or ctx.succeeded < needed:
        return None
    return new_condition(
        c.COND_SUCCESS_CRITERIA_MET,
        "True",
        c.REASON_COMPLETIONS_REACHED,
        c.MSG_COMPLETIONS_REACHED,
        ctx.now,
    )


def _update_suspended_condition(
    ctx: SyncContext, status: JobStatus
) -> tuple[JobStatus, tuple[Event, ...]]:
    """syncJob's Suspended condition, updated only in a sync that called manageJob."""
    now = ctx.now
    if ctx.job.spec.suspend:
        conditions, changed = ensure_condition(
            status.conditions, c.COND_SUSPENDED, "True", "JobSuspended", "Job suspended", now
        )
        if not changed:
            return evolve(status, conditions=conditions), ()
        # Kubernetes 1.36 (MutableSchedulingDirectivesForSuspendedJobs, on by
        # default): a newly suspended job has not started, so that its template's
        # scheduling directives may change until it resumes, which sets it again.
        suspended = evolve(status, conditions=conditions, start_time=None)
        return suspended, (Event(NORMAL, c.REASON_SUSPENDED, "Job suspended"),)
    conditions, changed = ensure_condition(
        status.conditions, c.COND_SUSPENDED, "False", "JobResumed", "Job resumed", now
    )
    if not changed:
        return evolve(status, conditions=conditions), ()
    # activeDeadlineSeconds counts continuous activity: restart the clock.
    resumed = evolve(status, conditions=conditions, start_time=truncate(now))
    return resumed, (Event(NORMAL, c.REASON_RESUMED, "Job resumed"),)


def _update_pod_creation_condition(
    status: JobStatus, outcome: PodOutcome, now: datetime
) -> tuple[JobStatus, tuple[Event, ...]]:
    """Not upstream: PodCreationFailed (and a FailedCreate event) while the API server
    rejects the job's pods, cleared by the next pod created."""
    if outcome.create_error is not None:
        conditions, _ = ensure_condition(
            status.conditions,
            c.COND_POD_CREATION_FAILED,
            "True",
            "FailedCreate",
            outcome.create_error,
            now,
        )
        event = Event(WARNING, c.REASON_FAILED_CREATE, f"Error creating: {outcome.create_error}")
        return evolve(status, conditions=conditions), (event,)
    if outcome.created > 0:
        conditions, _ = ensure_condition(
            status.conditions, c.COND_POD_CREATION_FAILED, "False", "PodCreated", "", now
        )
        return evolve(status, conditions=conditions), ()
    return status, ()


def _track_job_status(
    ctx: SyncContext, status: JobStatus, verdict: Condition | None, events: tuple[Event, ...]
) -> Tracked:
    """trackJobStatusAndRemoveFinalizers up to flushUncountedAndRemoveFinalizers' first
    status write; the back-off record of the pods recorded goes into the same write."""
    inp = ctx.inp
    with_finalizer = uids_with_finalizer(inp.pods, inp.expected_removed_finalizers)
    status = clean_uncounted_pods_without_finalizers(status, with_finalizer)
    recorded = _record_finished_pods(ctx, status, verdict)
    status, terminal = _with_recorded_pods(ctx, status, recorded, verdict)
    return Tracked(
        status=_with_display(ctx, status),
        remove_finalizers=(*recorded.remove_finalizers, *ctx.earlier_attempts.release),
        uids_with_finalizer=with_finalizer,
        terminal_condition=terminal,
        reached_max_uncounted=recorded.reached_max_uncounted,
        events=events,
        policy_actions=recorded.policy_actions,
    )


def _record_finished_pods(
    ctx: SyncContext, status: JobStatus, verdict: Condition | None
) -> RecordedPods:
    """trackJobStatusAndRemoveFinalizers' loop over the job's pods (tracking.py)."""
    inp = ctx.inp
    return record_finished_pods(
        inp.pods,
        status,
        inp.expected_removed_finalizers,
        verdict,
        job_deleting=ctx.job.deleting,
        max_uncounted=inp.config.max_uncounted,
        spec=ctx.job.spec,
        prev_succeeded_indexes=ctx.prev_succeeded_indexes,
        delayed=ctx.index_failures.delayed if ctx.index_failures is not None else None,
    )


def _with_recorded_pods(
    ctx: SyncContext, status: JobStatus, recorded: RecordedPods, verdict: Condition | None
) -> tuple[JobStatus, Condition | None]:
    """``status`` after the loop: the uncounted pods (an Indexed job's succeeded indexes
    and failed indexes), the back-off record and the interim condition; and the terminal
    condition to enact later."""
    status = track_succeeded_indexes(
        ctx.job.spec,
        status,
        ctx.succeeded_indexes,
        recorded.new_succeeded_indexes,
        ctx.index_failures,
    )
    record = _next_backoff(status, recorded.newly_succeeded, recorded.newly_failed, ctx.now)
    conditions, terminal = _interim_condition(status.conditions, verdict, ctx.now)
    status = evolve(
        status,
        conditions=conditions,
        uncounted_succeeded=recorded.uncounted_succeeded,
        uncounted_failed=recorded.uncounted_failed,
        failures_since_success=record.failures_since_success,
        last_failure_time=record.last_failure_time,
    )
    return status, terminal


def _interim_condition(
    conditions: tuple[Condition, ...], verdict: Condition | None, now: datetime
) -> tuple[tuple[Condition, ...], Condition | None]:
    """The interim FailureTarget or SuccessCriteriaMet goes into the status written
    before finalizers (which let the pods go) are removed; the terminal condition to
    enact later is Failed or Complete."""
    if verdict is None:
        return conditions, None
    if verdict.type == c.COND_FAILURE_TARGET:
        return (*conditions, verdict), _failed_for_target(verdict, now)
    if verdict.type == c.COND_SUCCESS_CRITERIA_MET:
        if not has_true_condition(conditions, c.COND_SUCCESS_CRITERIA_MET):
            conditions = (*conditions, verdict)
        complete = new_condition(c.COND_COMPLETE, "True", verdict.reason, verdict.message, now)
        return conditions, complete
    return conditions, verdict  # Failed, for a FailureTarget of an earlier sync


# ----------------------------------------------------------------------------- step 3


def count_and_enact(
    ctx: SyncContext, tracked: Tracked, removed: Iterable[str], plan: PodPlan
) -> SyncResult:
    """The end of trackJobStatusAndRemoveFinalizers once finalizers are removed: count
    the pods whose finalizer is gone, enact Complete/Failed, and say when to sync again."""
    status = tracked.status
    events: tuple[Event, ...] = ()
    if not is_finished(ctx.job.status):
        still_tracked = tracked.uids_with_finalizer - set(removed)
        status = clean_uncounted_pods_without_finalizers(status, still_tracked)
        status, events = _enact_job_finished(ctx, tracked, status)
        status = _with_display(ctx, status)
    expired, ttl_left = (
        process_ttl(ctx.job, status, ctx.now) if ctx.inp.kind.deletes_expired else (False, None)
    )
    return SyncResult(
        status=status,
        events=events,
        requeue_after=_min_delay(plan.requeue_after, ttl_left),
        refresh_after=display.refresh_in(status, ctx.now),
        delete_job=expired,
    )


def _enact_job_finished(
    ctx: SyncContext, tracked: Tracked, status: JobStatus
) -> tuple[JobStatus, tuple[Event, ...]]:
    """enactJobFinished (unless MaxUncountedPods was reached) and recordJobFinished's
    events: the terminal condition, once no pod is uncounted or terminating; or, for a
    Failed that spec.restartPolicy restarts, the next attempt's status (job_restarts.py)."""
    cond = tracked.terminal_condition
    if (
        cond is None
        or tracked.reached_max_uncounted
        or status.uncounted_succeeded
        or status.uncounted_failed
        or status.terminating > 0
    ):
        return status, ()
    policy = ctx.job.spec.job_restart
    if policy is not None and restarts_after(policy, status, cond):
        status = restarted_status(status, suspended=ctx.job.spec.suspend, now=ctx.now)
        message = restart_message(cond, status.restarts, policy)
        return status, (Event(WARNING, c.REASON_RESTARTED, message),)
    conditions, _ = ensure_condition(
        status.conditions, cond.type, cond.status, cond.reason, cond.message, ctx.now
    )
    status = evolve(status, conditions=conditions)
    if cond.type == c.COND_COMPLETE:
        status = evolve(status, completion_time=truncate(ctx.now))
    return status, _job_finished_events(ctx, status, cond)


def _job_finished_events(ctx: SyncContext, status: JobStatus, cond: Condition) -> tuple[Event, ...]:
    """recordJobFinished's events (its metric is counted by the shell)."""
    if cond.type != c.COND_COMPLETE:
        return (Event(WARNING, cond.reason, cond.message),)
    completed = Event(NORMAL, c.REASON_COMPLETED, "Job completed")
    completions = ctx.job.spec.completions
    if completions is None or status.succeeded <= completions:
        return (completed,)
    too_many = "Too many succeeded pods running after completion count reached"
    return (Event(WARNING, c.REASON_TOO_MANY_SUCCEEDED_PODS, too_many), completed)
