"""The decision core: the batch/v1 Job controller's syncJob as pure functions.

Given a job, its pods (from the operator's cache) and the time, the core says what
to do; it never does I/O. One sync runs in three steps, each a pure function whose
inputs include what the previous step's API calls achieved, exactly as upstream
interleaves them (``pkg/controller/job/job_controller.go``):

1. :func:`plan_pods` -- manageJob: pods to create, or pods to delete (deletes win),
   and when to look again (back-off, active deadline).
2. :func:`track` -- given which creates/deletes succeeded: the status to write
   *before* any finalizer is removed (finished pods recorded by UID in
   ``uncountedTerminatedPods``, interim FailureTarget/SuccessCriteriaMet conditions,
   the persisted back-off record), and the pods whose tracking finalizer to remove.
3. :func:`finish` -- given which finalizers are gone: move those UIDs into the
   ``succeeded``/``failed`` counters, enact Complete/Failed once nothing is uncounted
   or terminating, and say when to sync again (TTL) and when DURATION changes.

A pod is therefore counted exactly once, whatever crashes between the steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from . import constants as c
from . import display
from .backoff import BackoffRecord, next_record, remaining_seconds
from .model import (
    Condition,
    Job,
    JobStatus,
    PodInfo,
    find_condition,
    has_true_condition,
    is_finished,
    selector_for,
)
from .timeutil import truncate

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True)
class CoreConfig:
    backoff_base_seconds: float = 10.0
    backoff_max_seconds: float = 360.0
    #: MaxPodCreateDeletePerSync upstream.
    max_pod_changes_per_sync: int = 500
    #: MaxUncountedPods upstream.
    max_uncounted: int = 500


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


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class PodPlan:
    """Step 1: what manageJob (or a failure verdict) does to pods."""

    create: int = 0
    delete: tuple[PodInfo, ...] = ()
    #: True for scale-down and suspend (such pods are never counted as failures);
    #: False when a failed job's active pods are deleted (they count as failed).
    remove_finalizer_before_delete: bool = True
    #: Seconds until the next sync is needed for this plan (back-off, deadline).
    requeue_after: float | None = None
    #: Why, for logs: "create", "scale-down", "suspend", "fail", "backoff", "".
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
    #: The terminal condition (Complete or Failed) to set once nothing is pending.
    finishing: Condition | None
    reached_max_uncounted: bool
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Finished:
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


def active_pods(pods: Iterable[PodInfo]) -> list[PodInfo]:
    return [p for p in pods if p.active]


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def removal_order_key(pod: PodInfo) -> tuple[int, int, int, float, int, float]:
    """controller.ActivePods: unscheduled < scheduled, Pending < Unknown < Running,
    not ready < ready, ready for less time < more, more restarts < fewer, newer < older."""
    phase_rank = {c.PENDING: 0, c.UNKNOWN: 1, c.RUNNING: 2}.get(pod.phase, 0)
    # A zero ready time sorts first; otherwise later (more recent) first.
    ready_since = -_ts(pod.ready_since) if pod.ready and pod.ready_since else float("-inf")
    created = -_ts(pod.created) if pod.created else float("-inf")
    return (
        1 if pod.node_assigned else 0,
        phase_rank,
        1 if pod.ready else 0,
        ready_since,
        -pod.max_restarts,
        created,
    )


def pods_for_removal(pods: Sequence[PodInfo], count: int) -> tuple[PodInfo, ...]:
    """activePodsForRemoval: the first ``count`` pods in deletion order."""
    if count <= 0:
        return ()
    return tuple(sorted(pods, key=removal_order_key)[:count])


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


# ----------------------------------------------------------------------------- context


@dataclass(frozen=True)
class _Ctx:
    active: tuple[PodInfo, ...]
    new_succeeded: tuple[PodInfo, ...]
    new_failed: tuple[PodInfo, ...]
    succeeded: int
    failed: int
    start_time: datetime | None
    finishing: Condition | None
    deadline_requeue: float | None


def _context(inp: SyncInput) -> _Ctx:
    job, now = inp.job, inp.now
    status, spec = job.status, job.spec
    uncounted_s = set(status.uncounted_succeeded)
    uncounted_f = set(status.uncounted_failed)
    expected_rm = inp.expected_removed_finalizers

    def is_new(pod: PodInfo, uncounted: set[str]) -> bool:
        return pod.has_finalizer and pod.uid not in uncounted and pod.uid not in expected_rm

    new_succeeded = tuple(p for p in inp.pods if p.phase == c.SUCCEEDED and is_new(p, uncounted_s))
    new_failed = tuple(p for p in inp.pods if p.failed and is_new(p, uncounted_f))
    succeeded = status.succeeded + len(new_succeeded) + len(uncounted_s)
    failed = status.failed + len(new_failed) + len(uncounted_f)

    start_time = status.start_time
    if start_time is None and not spec.suspend:
        start_time = truncate(now)

    finishing: Condition | None = None
    deadline_requeue: float | None = None
    scm = find_condition(status.conditions, c.COND_SUCCESS_CRITERIA_MET)
    if scm is not None and scm.status == "True":
        finishing = scm
    else:
        target = find_condition(status.conditions, c.COND_FAILURE_TARGET)
        if target is not None and target.status == "True":
            finishing = new_condition(c.COND_FAILED, "True", target.reason, target.message, now)
    if finishing is None:
        if failed > spec.backoff_limit or past_backoff_limit_on_failure(
            spec.restart_policy, spec.backoff_limit, inp.pods
        ):
            finishing = new_condition(
                c.COND_FAILURE_TARGET, "True", c.REASON_BACKOFF_LIMIT, c.MSG_BACKOFF_LIMIT, now
            )
        elif past_active_deadline(inp, start_time):
            finishing = new_condition(
                c.COND_FAILURE_TARGET, "True", c.REASON_DEADLINE, c.MSG_DEADLINE, now
            )
        elif spec.active_deadline_seconds is not None and not spec.suspend and start_time:
            elapsed = (now - start_time).total_seconds()
            deadline_requeue = max(spec.active_deadline_seconds - elapsed, 0.0)
    return _Ctx(
        active=tuple(active_pods(inp.pods)),
        new_succeeded=new_succeeded,
        new_failed=new_failed,
        succeeded=succeeded,
        failed=failed,
        start_time=start_time,
        finishing=finishing,
        deadline_requeue=deadline_requeue,
    )


def _min_delay(*delays: float | None) -> float | None:
    values = [d for d in delays if d is not None]
    return min(values) if values else None


# ----------------------------------------------------------------------------- step 1


def plan_pods(inp: SyncInput) -> PodPlan:
    """manageJob, or the deletion of a failed job's active pods."""
    job = inp.job
    if is_finished(job.status):
        return PodPlan()
    ctx = _context(inp)
    if ctx.finishing is not None:
        if not ctx.active:
            return PodPlan(reason="fail")
        return PodPlan(delete=ctx.active, remove_finalizer_before_delete=False, reason="fail")
    if not inp.expectations_satisfied or job.deleting:
        return PodPlan(requeue_after=ctx.deadline_requeue)
    spec = job.spec
    limit = inp.config.max_pod_changes_per_sync
    if spec.suspend:
        return PodPlan(delete=pods_for_removal(ctx.active, len(ctx.active)), reason="suspend")
    active = len(ctx.active)
    want = want_active(spec.completions, spec.parallelism, ctx.succeeded, active)
    surplus = active - want
    if surplus > 0:
        return PodPlan(
            delete=pods_for_removal(ctx.active, min(surplus, limit)),
            reason="scale-down",
            requeue_after=ctx.deadline_requeue,
        )
    missing = want - active
    if missing > 0:
        record = next_record(
            BackoffRecord(job.status.failures_since_success, job.status.last_failure_time),
            ctx.new_succeeded,
            ctx.new_failed,
            inp.now,
        )
        wait = remaining_seconds(
            record, inp.now, inp.config.backoff_base_seconds, inp.config.backoff_max_seconds
        )
        if wait > 0:
            return PodPlan(requeue_after=_min_delay(wait, ctx.deadline_requeue), reason="backoff")
        return PodPlan(
            create=min(missing, limit), reason="create", requeue_after=ctx.deadline_requeue
        )
    return PodPlan(requeue_after=ctx.deadline_requeue)


# ----------------------------------------------------------------------------- step 2


def _clean_uncounted(status: JobStatus, with_finalizer: frozenset[str]) -> JobStatus:
    """cleanUncountedPodsWithoutFinalizers: count UIDs whose finalizer is gone."""
    keep_s = tuple(u for u in status.uncounted_succeeded if u in with_finalizer)
    keep_f = tuple(u for u in status.uncounted_failed if u in with_finalizer)
    return replace(
        status,
        succeeded=status.succeeded + len(status.uncounted_succeeded) - len(keep_s),
        failed=status.failed + len(status.uncounted_failed) - len(keep_f),
        uncounted_succeeded=keep_s,
        uncounted_failed=keep_f,
    )


def _with_display(status: JobStatus, inp: SyncInput) -> JobStatus:
    job = inp.job
    return replace(
        status,
        selector=selector_for(job.uid),
        observed_generation=job.generation,
        status_text=display.status_text(status, job.deleting),
        completions_text=display.completions_text(job.spec, status.succeeded),
        duration_text=display.duration_text(status, inp.now),
    )


def track(inp: SyncInput, plan: PodPlan, outcome: PodOutcome) -> Tracked:
    """The rest of syncJob up to the first status write of trackJobStatusAndRemoveFinalizers."""
    job, now = inp.job, inp.now
    status, spec = job.status, job.spec
    events: list[Event] = []

    if is_finished(status):
        # Nothing to count any more; leftover finalizers only keep pods from going away.
        leftovers = tuple(p for p in inp.pods if p.has_finalizer)
        return Tracked(
            status=_with_display(status, inp),
            remove_finalizers=leftovers,
            uids_with_finalizer=frozenset(),
            finishing=None,
            reached_max_uncounted=False,
            events=(),
        )

    ctx = _context(inp)
    deleted = set(outcome.deleted)
    deleted_pods = [p for p in plan.delete if p.uid in deleted]
    active = len(ctx.active) - len(deleted_pods) + outcome.created
    ready = sum(1 for p in ctx.active if p.ready) - sum(1 for p in deleted_pods if p.ready)
    terminating = sum(1 for p in inp.pods if p.terminating) + len(deleted_pods)
    conditions = status.conditions
    start_time = ctx.start_time
    finishing = ctx.finishing

    if finishing is not None:
        if len(deleted_pods) != len(ctx.active) or not inp.expectations_satisfied:
            # Pods may remain that are not deleted or not yet in the cache.
            finishing = None
    else:
        manage_called = inp.expectations_satisfied and not job.deleting
        if spec.completions is None:
            complete = ctx.succeeded > 0 and active == 0
        else:
            complete = ctx.succeeded >= spec.completions and active == 0
        if complete:
            finishing = new_condition(
                c.COND_SUCCESS_CRITERIA_MET,
                "True",
                c.REASON_COMPLETIONS_REACHED,
                c.MSG_COMPLETIONS_REACHED,
                now,
            )
        elif manage_called:
            if spec.suspend:
                conditions, changed = ensure_condition(
                    conditions, c.COND_SUSPENDED, "True", "JobSuspended", "Job suspended", now
                )
                if changed:
                    events.append(Event(NORMAL, "Suspended", "Job suspended"))
            else:
                conditions, changed = ensure_condition(
                    conditions, c.COND_SUSPENDED, "False", "JobResumed", "Job resumed", now
                )
                if changed:
                    events.append(Event(NORMAL, "Resumed", "Job resumed"))
                    # activeDeadlineSeconds counts continuous activity: restart the clock.
                    start_time = truncate(now)

    if outcome.create_error is not None:
        conditions, _ = ensure_condition(
            conditions,
            c.COND_POD_CREATION_FAILED,
            "True",
            "FailedCreate",
            outcome.create_error,
            now,
        )
    elif outcome.created > 0:
        conditions, _ = ensure_condition(
            conditions, c.COND_POD_CREATION_FAILED, "False", "PodCreated", "", now
        )

    # trackJobStatusAndRemoveFinalizers
    expected_rm = inp.expected_removed_finalizers
    with_finalizer = frozenset(
        p.uid for p in inp.pods if p.has_finalizer and p.uid not in expected_rm
    )
    base = replace(
        status,
        conditions=conditions,
        start_time=start_time,
        active=active,
        ready=ready,
        terminating=terminating,
    )
    base = _clean_uncounted(base, with_finalizer)
    uncounted_s = list(base.uncounted_succeeded)
    uncounted_f = list(base.uncounted_failed)
    known_s, known_f = set(uncounted_s), set(uncounted_f)
    can_remove_all = job.deleting or finishing is not None
    fail_remaining = finishing is not None and finishing.type != c.COND_SUCCESS_CRITERIA_MET
    to_remove: list[PodInfo] = []
    recorded_s: list[PodInfo] = []
    recorded_f: list[PodInfo] = []
    reached_max = False
    for pod in inp.pods:
        if not pod.has_finalizer or pod.uid in expected_rm:
            continue  # processed in an earlier sync
        considered_failed = pod.failed
        if not (can_remove_all or pod.phase == c.SUCCEEDED or considered_failed):
            continue
        to_remove.append(pod)
        if pod.phase == c.SUCCEEDED and pod.uid not in known_f:
            if pod.uid not in known_s:
                uncounted_s.append(pod.uid)
                known_s.add(pod.uid)
                recorded_s.append(pod)
        elif (considered_failed or fail_remaining) and pod.uid not in known_f:
            # When the job has failed, every pod not yet terminated counts as failed.
            uncounted_f.append(pod.uid)
            known_f.add(pod.uid)
            if considered_failed:
                recorded_f.append(pod)
        if len(uncounted_s) + len(uncounted_f) >= inp.config.max_uncounted:
            reached_max = True
            break

    record = next_record(
        BackoffRecord(status.failures_since_success, status.last_failure_time),
        recorded_s,
        recorded_f,
        now,
    )
    conditions = base.conditions
    if finishing is not None and finishing.type == c.COND_FAILURE_TARGET:
        # Record the verdict before finalizers (which let the pods go) are removed.
        conditions = (*conditions, finishing)
        finishing = new_condition(c.COND_FAILED, "True", finishing.reason, finishing.message, now)
    elif finishing is not None and finishing.type == c.COND_SUCCESS_CRITERIA_MET:
        if not has_true_condition(conditions, c.COND_SUCCESS_CRITERIA_MET):
            conditions = (*conditions, finishing)
        finishing = new_condition(c.COND_COMPLETE, "True", finishing.reason, finishing.message, now)
    step1 = replace(
        base,
        conditions=conditions,
        uncounted_succeeded=tuple(uncounted_s),
        uncounted_failed=tuple(uncounted_f),
        failures_since_success=record.failures_since_success,
        last_failure_time=record.last_failure_time,
    )
    if outcome.create_error is not None:
        events.append(Event(WARNING, "FailedCreate", f"Error creating: {outcome.create_error}"))
    return Tracked(
        status=_with_display(step1, inp),
        remove_finalizers=tuple(to_remove),
        uids_with_finalizer=with_finalizer,
        finishing=finishing,
        reached_max_uncounted=reached_max,
        events=tuple(events),
    )


# ----------------------------------------------------------------------------- step 3


def finish_time(status: JobStatus) -> datetime | None:
    """When the job finished: the Complete or Failed condition's transition time."""
    for ctype in (c.COND_COMPLETE, c.COND_FAILED):
        cond = find_condition(status.conditions, ctype)
        if cond is not None and cond.status == "True":
            return cond.last_transition_time
    return None


def finish(inp: SyncInput, tracked: Tracked, removed: Iterable[str], plan: PodPlan) -> Finished:
    """Counts the pods whose finalizer is gone and enacts Complete/Failed (enactJobFinished)."""
    job, now = inp.job, inp.now
    removed_set = set(removed)
    already_finished = is_finished(job.status)
    status = tracked.status
    events: list[Event] = []
    if not already_finished:
        status = _clean_uncounted(status, tracked.uids_with_finalizer - removed_set)
        cond = tracked.finishing
        if (
            cond is not None
            and not tracked.reached_max_uncounted
            and not status.uncounted_succeeded
            and not status.uncounted_failed
            and status.terminating == 0
        ):
            conditions, _ = ensure_condition(
                status.conditions, cond.type, cond.status, cond.reason, cond.message, now
            )
            status = replace(status, conditions=conditions)
            if cond.type == c.COND_COMPLETE:
                status = replace(status, completion_time=truncate(now))
                spec = job.spec
                if spec.completions is not None and status.succeeded > spec.completions:
                    events.append(
                        Event(
                            WARNING,
                            "TooManySucceededPods",
                            "Too many succeeded pods running after completion count reached",
                        )
                    )
                events.append(Event(NORMAL, "Completed", "Job completed"))
            else:
                events.append(Event(WARNING, cond.reason, cond.message))
        status = _with_display(status, inp)

    requeue = plan.requeue_after
    delete_job = False
    ttl = job.spec.ttl_seconds_after_finished
    finished_at = finish_time(status)
    if ttl is not None and finished_at is not None and not job.deleting:
        expires = finished_at + timedelta(seconds=ttl)
        if now >= expires:
            delete_job = True
        else:
            requeue = _min_delay(requeue, (expires - now).total_seconds())
    return Finished(
        status=status,
        events=tuple(events),
        requeue_after=requeue,
        refresh_after=display.refresh_in(status, now),
        delete_job=delete_job,
    )
