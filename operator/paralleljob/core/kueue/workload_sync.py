"""One reconcile of a queued ParallelJob against its Workload, decided without I/O:
Kueue v0.17.0's ``JobReconciler.ReconcileGenericJob``
(``pkg/controller/jobframework/reconciler.go``) for a Job, whose steps run here in
Kueue's order:

a. the job gone or being deleted: its Workloads' resource-in-use finalizers go (the
   garbage collector deletes them through their owner reference);
b. (the namespace selector: the shell's, it reads the namespace);
c. no ``kueue.x-k8s.io/queue-name`` label: the job is not Kueue's (no plan);
d. ``ensureOneWorkload``: the first equivalent Workload is the job's; a running job
   with none is stopped (restored from the one it had); the others are deleted, and
   the sync stops there; a suspended job's stale unreserved Workload is rewritten; the
   priority follows the ``kueue.x-k8s.io/priority-class`` label;
e. the Workload finished: its finalizer goes;
f. the Workload being deleted: the job stops, then the finalizer goes;
g. the job finished: the Workload is marked Finished (quota freed);
h. no Workload: one is created, once no pod of the job is active;
i. the reclaimable pods, when they changed;
j. ``PodsReady``, when Kueue's waitForPodsReady is on;
k. evicted: the job stops; once its pods are gone the reservation is released
   (Requeued, QuotaReserved=False, no admission, Admitted=False), as only the owner's
   reconciler does;
l. suspended: admitted, it starts with the admission's flavors and count; else the
   Workload follows the job's queue;
m. running without admission: it stops;
n. else nothing.

Stopping (``stopJob``, ``Job.Stop``) suspends the job and restores its template from
the Workload's copy. A ParallelJob's template may change only while it is suspended
with no active pod, and not started or Suspended (the CRD's rule, as a Job's in
Kubernetes 1.36), so a running job's stop takes two writes: suspend with the
``kueue.x-k8s.io/stopping`` annotation (the job then does not count as suspended, as
in Kueue), and the restore once the operator's job sync has removed the pods. A start
waits likewise until the template may change.

The plan lists writes in order; the shell stops at the first that fails (the next sync
decides again), sends an action's Event once it succeeds, and reconciles again soon
when ``requeue`` says so (Kueue's ``ErrNoMatchingWorkloads`` and retried errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, TypeAlias

from ...constants import NORMAL
from ...json_types import JsonDict
from ..event import Event
from .podsets import (
    PRIORITY_CLASS_LABEL,
    STOPPING_ANNOTATION,
    JobChange,
    PodSetError,
    Priority,
    QueuedJob,
    equivalent_to_workload,
    job_pod_sets,
    maximum_execution_time_seconds,
    new_workload,
    pod_sets_info,
    reclaimable_pods,
    restore_change,
    start_change,
    workload_name,
    workload_spec,
)
from .workload_model import (
    ADMITTED,
    CHECK_PENDING,
    CHECK_READY,
    EVICTED,
    FINISHED,
    KUEUE_GROUP,
    PODS_READY,
    QUOTA_RESERVED,
    REQUEUED,
    RESOURCE_IN_USE_FINALIZER,
    ReclaimablePod,
    ResourceFlavor,
    Workload,
    WorkloadCondition,
    condition_to_dict,
    find_condition,
    reclaimable_pods_to_list,
    set_condition,
    truncate_condition_message,
)

# Event reasons (jobframework/events.go).
REASON_STARTED: Final = "Started"
REASON_STOPPED: Final = "Stopped"
REASON_CREATED_WORKLOAD: Final = "CreatedWorkload"
REASON_DELETED_WORKLOAD: Final = "DeletedWorkload"
REASON_UPDATED_WORKLOAD: Final = "UpdatedWorkload"
REASON_FINISHED_WORKLOAD: Final = "FinishedWorkload"
REASON_UPDATED_ADMISSION_CHECK: Final = "UpdatedAdmissionCheck"
# Why a job stops (jobframework StopReason; Job.Stop ignores it, the Event says it).
STOP_WORKLOAD_DELETED: Final = "WorkloadDeleted"
STOP_WORKLOAD_EVICTED: Final = "WorkloadEvicted"
STOP_NO_MATCHING_WORKLOAD: Final = "NoMatchingWorkload"
STOP_NOT_ADMITTED: Final = "NotAdmitted"
# Finished reasons (workload_types.go; reconciler.go FailedToStartFinishedReason).
FINISHED_SUCCEEDED: Final = "Succeeded"
FINISHED_FAILED: Final = "Failed"
FINISHED_FAILED_TO_START: Final = "FailedToStart"
#: The plan's error when it needs the job's priority and KueueInput has none: the shell
#: resolves the priority (API reads) only then, and plans again.
PRIORITY_MISSING: Final = "the job's priority class is missing"
#: The eviction reasons that requeue at once (Requeued=True).
_REQUEUE_AT_ONCE: Final = ("Preempted", "NodeFailures")
# generatePodsReadyCondition's reasons and messages.
WAIT_FOR_START: Final = "WaitForStart"
WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
PODS_STARTED: Final = "Started"
PODS_RECOVERED: Final = "Recovered"
MSG_NOT_READY: Final = "Not all pods are ready or succeeded"
MSG_WAITING_FOR_RECOVERY: Final = "At least one pod has failed, waiting for recovery"
MSG_READY: Final = "All pods reached readiness and the workload is running"


@dataclass(frozen=True)
class KueueInput:
    #: The ParallelJob; None once it is gone.
    job: QueuedJob | None
    #: Its Workloads: those whose owner references name it (kind, apiVersion, name).
    workloads: tuple[Workload, ...]
    #: The ResourceFlavors, by name.
    flavors: Mapping[str, ResourceFlavor]
    now: datetime
    #: The job's priority as resolved by the shell; None when its class is missing or it
    #: is not resolved yet: then no Workload is created or reprioritized, and the plan
    #: ends with PRIORITY_MISSING.
    priority: Priority | None = None
    #: Whether Kueue's configuration sets waitForPodsReady (step j).
    wait_for_pods_ready: bool = False


# ---------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class RemoveFinalizer:
    """Drop kueue.x-k8s.io/resource-in-use from the Workload (workload.RemoveFinalizer)."""

    workload: str
    event: Event | None = None


@dataclass(frozen=True)
class DeleteWorkload:
    workload: str
    event: Event | None = None


@dataclass(frozen=True)
class CreateWorkload:
    body: JsonDict
    event: Event | None = None


@dataclass(frozen=True)
class UpdateWorkload:
    """A merge patch of the Workload's spec (None clears a field)."""

    workload: str
    spec: JsonDict
    event: Event | None = None


@dataclass(frozen=True)
class PatchWorkloadStatus:
    """A merge patch of the Workload's status subresource; ``conditions`` is the whole
    list (a merge patch replaces lists). Conditional on the Workload's
    resourceVersion the plan was made on."""

    workload: str
    status: JsonDict
    event: Event | None = None


@dataclass(frozen=True)
class PatchJob:
    """A merge patch of the ParallelJob (its spec, and the stopping annotation)."""

    patch: JsonDict
    event: Event | None = None


Action: TypeAlias = (
    RemoveFinalizer
    | DeleteWorkload
    | CreateWorkload
    | UpdateWorkload
    | PatchWorkloadStatus
    | PatchJob
)


@dataclass(frozen=True)
class WorkloadPlan:
    actions: tuple[Action, ...] = ()
    #: Events that go with no write (UpdatedAdmissionCheck).
    events: tuple[Event, ...] = ()
    #: Reconcile again soon, with back-off (Kueue returned an error).
    requeue: bool = False
    #: Why ``requeue`` (for the log), "" when none.
    error: str = ""


@dataclass
class _Plan:
    """A plan being built, step by step."""

    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def done(self, error: str = "") -> WorkloadPlan:
        return WorkloadPlan(tuple(self.actions), tuple(self.events), bool(error), error)


def plan_workload_sync(inp: KueueInput) -> WorkloadPlan | None:
    """What one reconcile of the job does (the steps in the module's docstring); None
    when the job is not Kueue's and nothing of Kueue's is left to release."""
    job = inp.job
    plan = _Plan()
    if job is None or job.deleting:
        plan.actions += [
            RemoveFinalizer(w.name)
            for w in inp.workloads
            if RESOURCE_IN_USE_FINALIZER in w.finalizers
        ]
        return plan.done() if plan.actions else None
    if not job.queue_name:
        return None
    found = _ensure_one_workload(inp, job, plan)
    if not isinstance(found, _Found):
        return plan.done(found)
    wl = found.workload
    if wl is not None and wl.is_finished:
        if RESOURCE_IN_USE_FINALIZER in wl.finalizers:
            plan.actions.append(RemoveFinalizer(wl.name, _finished_event(wl)))
        return plan.done()
    if wl is not None and wl.deleting:
        if (
            _stop(job, wl, "Workload is deleted", plan)
            and RESOURCE_IN_USE_FINALIZER in wl.finalizers
        ):
            plan.actions.append(RemoveFinalizer(wl.name))
        return plan.done()
    verdict = job.finished()
    if verdict is not None:
        if wl is not None:
            message, success = verdict
            reason = FINISHED_SUCCEEDED if success else FINISHED_FAILED
            plan.actions.append(_finish(wl, reason, message, inp.now, _finished_event(wl)))
        return plan.done()
    if wl is None:
        return _create(inp, job, plan)
    return _with_workload(inp, job, wl, plan)


def _with_workload(inp: KueueInput, job: QueuedJob, wl: Workload, plan: _Plan) -> WorkloadPlan:
    """Steps i to n, once the job has its Workload."""
    reclaimable = tuple(ReclaimablePod(name, count) for name, count in reclaimable_pods(job))
    if {p.name: p.count for p in reclaimable} != {p.name: p.count for p in wl.reclaimable_pods}:
        status = {"reclaimablePods": reclaimable_pods_to_list(reclaimable)}
        plan.actions.append(PatchWorkloadStatus(wl.name, status))
        return plan.done()
    if inp.wait_for_pods_ready:
        ready = pods_ready_condition(job, wl)
        if not any(
            (cond.type, cond.status, cond.reason) == (ready.type, ready.status, ready.reason)
            for cond in wl.conditions
        ):
            conditions, _ = set_condition(wl.conditions, ready, inp.now)
            plan.actions.append(PatchWorkloadStatus(wl.name, _conditions(conditions)))
            return plan.done()
    evicted = find_condition(wl.conditions, EVICTED)
    if evicted is not None and evicted.status == "True":
        if _stop(job, wl, evicted.message, plan) and wl.has_quota_reservation and not job.is_active:
            plan.actions.append(PatchWorkloadStatus(wl.name, release_status(wl, evicted, inp.now)))
        return plan.done()
    if job.is_suspended:
        return _suspended(inp, job, wl, plan)
    if not wl.is_admitted:
        _stop(job, wl, "Not admitted by cluster queue", plan)
    return plan.done()


# ------------------------------------------------------------- d. ensureOneWorkload
@dataclass(frozen=True)
class _Found:
    workload: Workload | None


def _ensure_one_workload(inp: KueueInput, job: QueuedJob, plan: _Plan) -> _Found | str:
    """ensureOneWorkload: the job's Workload (or None), or why the sync stops here
    ("" for a wait)."""
    match: Workload | None = None
    others: list[Workload] = []
    for wl in sorted(inp.workloads, key=lambda w: w.name):
        if match is None and equivalent_to_workload(job, wl, inp.flavors):
            match = wl
        else:
            others.append(wl)
    stale = None
    if match is None and others and job.is_suspended and not others[0].has_quota_reservation:
        stale = others.pop(0)
    if match is None and not job.is_suspended and job.finished() is None:
        # A job running with no Workload of its own (a count changed, or none was ever
        # made): stopped, its template taken back from the Workload it had, if one.
        previous = others[0] if len(others) == 1 else None
        message = (
            "Missing Workload; unable to restore pod templates"
            if previous is None
            else "No matching Workload; restoring pod templates according to existent Workload"
        )
        if not _stop(job, previous, message, plan):
            return ""
    for wl in others:
        if RESOURCE_IN_USE_FINALIZER in wl.finalizers:
            plan.actions.append(RemoveFinalizer(wl.name))
        if not wl.deleting:
            event = Event(
                NORMAL, REASON_DELETED_WORKLOAD, f"Deleted not matching Workload: {wl.key}"
            )
            plan.actions.append(DeleteWorkload(wl.name, event))
    if others:
        what = "no matching workloads" if match is None else "extra workloads"
        return f"{what}: deleted {len(others)} workloads"
    if stale is not None:
        return _rewrite(inp, job, stale, plan)
    if match is not None:
        return _follow_priority(inp, job, match, plan)
    return _Found(None)


def _rewrite(inp: KueueInput, job: QueuedJob, wl: Workload, plan: _Plan) -> _Found | str:
    """updateWorkloadToMatchJob: a suspended job's unreserved Workload takes the job's
    spec (keeping spec.active), instead of being replaced."""
    if inp.priority is None:
        return PRIORITY_MISSING
    spec = workload_spec(job, inp.priority, wl.active)
    message = f"Updated not matching Workload for suspended job: {wl.key}"
    plan.actions.append(
        UpdateWorkload(wl.name, spec, Event(NORMAL, REASON_UPDATED_WORKLOAD, message))
    )
    return _Found(
        replace(
            _with_priority(wl, inp.priority),
            queue_name=job.queue_name,
            pod_sets=job_pod_sets(job),
            maximum_execution_time_seconds=maximum_execution_time_seconds(job.labels),
        )
    )


def _follow_priority(inp: KueueInput, job: QueuedJob, wl: Workload, plan: _Plan) -> _Found | str:
    """UpdateWorkloadPriority: a Workload with no priority class, or a
    WorkloadPriorityClass, follows the job's priority-class label."""
    ref = wl.priority_class_ref
    by_label = ref is None or (ref.group == KUEUE_GROUP and ref.kind == "WorkloadPriorityClass")
    if not by_label or job.labels.get(PRIORITY_CLASS_LABEL, "") == (ref.name if ref else ""):
        return _Found(wl)
    if inp.priority is None:
        return PRIORITY_MISSING
    spec = {k: v for k, v in workload_spec(job, inp.priority).items() if k.startswith("priority")}
    message = f"Updated workload priority class: {wl.key}"
    plan.actions.append(
        UpdateWorkload(wl.name, spec, Event(NORMAL, REASON_UPDATED_WORKLOAD, message))
    )
    return _Found(_with_priority(wl, inp.priority))


def _with_priority(wl: Workload, priority: Priority) -> Workload:
    return replace(wl, priority_class_ref=priority.class_ref, priority=priority.value)


# ------------------------------------------------------------------ h. no Workload
def _create(inp: KueueInput, job: QueuedJob, plan: _Plan) -> WorkloadPlan:
    """handleJobWithNoWorkload: once no pod of the job is active, its Workload."""
    if job.is_active:
        return plan.done()
    if inp.priority is None:
        return plan.done(PRIORITY_MISSING)
    name = workload_name(job.name, job.uid)
    event = Event(NORMAL, REASON_CREATED_WORKLOAD, f"Created Workload: {job.namespace}/{name}")
    plan.actions.append(CreateWorkload(new_workload(job, inp.priority), event))
    return plan.done()


# --------------------------------------------------------------------- l. suspended
def _suspended(inp: KueueInput, job: QueuedJob, wl: Workload, plan: _Plan) -> WorkloadPlan:
    if wl.is_admitted:
        return _start(inp, job, wl, plan)
    if wl.has_quota_reservation:
        message = "; ".join(
            f"{check.name}: {check.message}"
            for check in wl.admission_checks
            if check.state == CHECK_PENDING and check.message
        )
        if message:
            plan.events.append(Event(NORMAL, REASON_UPDATED_ADMISSION_CHECK, message))
    if wl.queue_name != job.queue_name:
        plan.actions.append(UpdateWorkload(wl.name, {"queueName": job.queue_name}))
    return plan.done()


def _start(inp: KueueInput, job: QueuedJob, wl: Workload, plan: _Plan) -> WorkloadPlan:
    """startJob: the admission's infos applied to the job, unsuspended. A conflict
    finishes the Workload (FailedToStart); a missing flavor is retried."""
    infos = pod_sets_info(wl, inp.flavors)
    change = infos if isinstance(infos, PodSetError) else start_change(job, infos)
    if isinstance(change, PodSetError):
        if not change.permanent:
            return plan.done(change.message)
        plan.actions.append(_finish(wl, FINISHED_FAILED_TO_START, change.message, inp.now))
        return plan.done()
    if (
        change.template is not None
        and change.template != job.template
        and not template_may_change(job)
    ):
        return plan.done()  # the job's pods are still going; its next change syncs again
    cluster_queue = wl.admission.cluster_queue if wl.admission else ""
    event = Event(NORMAL, REASON_STARTED, f"Admitted by clusterQueue {cluster_queue}")
    plan.actions.append(PatchJob(job_patch(job, change), event))
    return plan.done()


# --------------------------------------------------------------------------- stopping
def template_may_change(job: QueuedJob) -> bool:
    """The ParallelJob CRD's rule (validatePodTemplateUpdate, Kubernetes 1.36): its
    template may change only while it is suspended with no active pod, and has not
    started or its Suspended condition is True."""
    status = job.status
    suspended = any(
        cond.type == "Suspended" and cond.status == "True" for cond in status.conditions
    )
    return job.spec.suspend and status.active == 0 and (status.start_time is None or suspended)


def _stop(job: QueuedJob, wl: Workload | None, message: str, plan: _Plan) -> bool:
    """stopJob (Job.Stop): suspend, then restore the template from ``wl``. Whether the
    job is fully stopped once the plan's writes are done (False: a restore waits for
    the job's pods to go; the sync stops there, as Kueue's does on a failed restore)."""
    restore = restore_change(job, wl)
    if not job.spec.suspend:
        # The template may not change in the write that suspends: it waits, marked.
        now = replace(restore, suspend=True, template=None)
        patch = job_patch(job, now, stopping=True if restore.template is not None else None)
        plan.actions.append(PatchJob(patch, Event(NORMAL, REASON_STOPPED, message)))
        return restore.template is None
    if restore.template is not None and not template_may_change(job):
        return False
    if restore != JobChange() or STOPPING_ANNOTATION in job.annotations:
        plan.actions.append(PatchJob(job_patch(job, restore, stopping=False)))
    return True


def job_patch(job: QueuedJob, change: JobChange, stopping: bool | None = None) -> JsonDict:
    """The merge patch of the job for ``change``: the template as a diff against the
    job's; ``stopping`` True sets the stopping annotation, False removes it."""
    spec: JsonDict = {}
    for key, value in (
        ("suspend", change.suspend),
        ("parallelism", change.parallelism),
        ("completions", change.completions),
    ):
        if value is not None:
            spec[key] = value
    if change.template is not None:
        spec["template"] = merge_diff(job.template, change.template)
    patch: JsonDict = {"spec": spec} if spec else {}
    if stopping is True:
        patch["metadata"] = {"annotations": {STOPPING_ANNOTATION: "true"}}
    elif stopping is False and STOPPING_ANNOTATION in job.annotations:
        patch["metadata"] = {"annotations": {STOPPING_ANNOTATION: None}}
    return patch


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> JsonDict:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``."""
    out: JsonDict = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if key in old and before == value:
            continue
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            out[key] = merge_diff(before, value)
        else:
            out[key] = value
    return out


# ------------------------------------------------------------- Workload status writes
def _conditions(conditions: tuple[WorkloadCondition, ...]) -> JsonDict:
    return {"conditions": [condition_to_dict(cond) for cond in conditions]}


def _finished_event(wl: Workload) -> Event:
    return Event(NORMAL, REASON_FINISHED_WORKLOAD, f"Workload '{wl.key}' is declared finished")


def _finish(
    wl: Workload, reason: str, message: str, now: datetime, event: Event | None = None
) -> PatchWorkloadStatus:
    """workload.Finish: Finished=True (SetFinishedCondition)."""
    finished = WorkloadCondition(
        FINISHED, "True", reason, truncate_condition_message(message), now, wl.generation
    )
    conditions, _ = set_condition(wl.conditions, finished, now)
    return PatchWorkloadStatus(wl.name, _conditions(conditions), event)


def pods_ready_condition(job: QueuedJob, wl: Workload) -> WorkloadCondition:
    """generatePodsReadyCondition: True once the pods are ready (Recovered after a
    wait for recovery); else False, WaitForRecovery once they had been ready."""
    previous = find_condition(wl.conditions, PODS_READY)

    def cond(status: str, reason: str, message: str) -> WorkloadCondition:
        return WorkloadCondition(PODS_READY, status, reason, message, None, wl.generation)

    if not wl.is_admitted:
        return cond("False", WAIT_FOR_START, MSG_NOT_READY)
    if job.pods_ready():
        recovering = previous is not None and previous.reason in (WAIT_FOR_RECOVERY, PODS_RECOVERED)
        return cond("True", PODS_RECOVERED if recovering else PODS_STARTED, MSG_READY)
    if previous is not None and (previous.status == "True" or previous.reason == WAIT_FOR_RECOVERY):
        return cond("False", WAIT_FOR_RECOVERY, MSG_WAITING_FOR_RECOVERY)
    return cond("False", WAIT_FOR_START, MSG_NOT_READY)


def release_status(wl: Workload, evicted: WorkloadCondition, now: datetime) -> JsonDict:
    """The status patch that releases an evicted Workload's quota: SetRequeuedCondition
    (True only for a preemption or node failures), then
    UnsetQuotaReservationWithCondition("Pending"): QuotaReserved=False, no admission,
    and SyncAdmittedCondition's Admitted=False, adding the time admitted to
    accumulatedPastExecutionTimeSeconds."""
    message = truncate_condition_message(evicted.message)
    requeued = "True" if evicted.reason in _REQUEUE_AT_ONCE else "False"
    conditions = wl.conditions
    for new in (
        WorkloadCondition(REQUEUED, requeued, evicted.reason, message, None, wl.generation),
        WorkloadCondition(QUOTA_RESERVED, "False", "Pending", message, now, wl.generation),
    ):
        conditions, _ = set_condition(conditions, new, now)
    status: JsonDict = {"admission": None}
    admitted = find_condition(conditions, ADMITTED)
    if admitted is not None and admitted.status == "True":
        # The reservation is gone: Admitted=False whatever the checks say.
        if admitted.last_transition_time is not None:
            past = wl.accumulated_past_execution_time_seconds or 0
            spent = int((now - admitted.last_transition_time).total_seconds())
            status["accumulatedPastExecutionTimeSeconds"] = past + spent
        checks_ready = all(check.state == CHECK_READY for check in wl.admission_checks)
        reason, text = (
            ("NoReservation", "The workload has no reservation")
            if checks_ready
            else (
                "NoReservationUnsatisfiedChecks",
                "The workload has no reservation and not all checks ready",
            )
        )
        not_admitted = WorkloadCondition(ADMITTED, "False", reason, text, now, wl.generation)
        conditions, _ = set_condition(conditions, not_admitted, now)
    return {**_conditions(conditions), **status}
