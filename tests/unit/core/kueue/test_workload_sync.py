"""One reconcile of a queued ParallelJob (core/kueue/workload_sync.py), case by case as
Kueue v0.17.0 tests a Job's (jobs/job/job_controller_test.go TestReconciler; the
integration's "job gets suspended when parallelism changes"): each row a job and its
Workloads, and the writes, events and Workload conditions the reconcile makes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from paralleljob.core.event import Event
from paralleljob.core.kueue.podsets import (
    MIN_PARALLELISM_ANNOTATION,
    PRIORITY_CLASS_LABEL,
    STOPPING_ANNOTATION,
    Priority,
    QueuedJob,
    workload_name,
)
from paralleljob.core.kueue.workload_model import PriorityClassRef, Workload
from paralleljob.core.kueue.workload_sync import (
    CreateWorkload,
    DeleteWorkload,
    KueueInput,
    PatchJob,
    PatchWorkloadStatus,
    RemoveFinalizer,
    UpdateWorkload,
    WorkloadPlan,
    plan_workload_sync,
)
from tests.unit.core.kueue.builders import (
    ADMITTED,
    FLAVORS,
    SPOT_TOLERATION,
    T0,
    UID,
    admission,
    cond,
    job,
    workload,
)

WL = workload_name("demo", UID)
NO_PRIORITY = Priority()
SUSPENDED_STATUS = {"conditions": [{"type": "Suspended", "status": "True"}]}


def plan(
    queued: QueuedJob | None,
    *workloads: Workload,
    priority: Priority | None = NO_PRIORITY,
    pods_ready: bool = False,
) -> WorkloadPlan | None:
    return plan_workload_sync(KueueInput(queued, workloads, FLAVORS, T0, priority, pods_ready))


def only(p: WorkloadPlan | None) -> Any:
    assert p is not None and len(p.actions) == 1, p
    return p.actions[0]


def conditions_of(action: PatchWorkloadStatus) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in action.status["conditions"]}


def running_job(**kwargs: Any) -> QueuedJob:
    """The job as it runs once admitted to the on-demand flavor."""
    template = copy.deepcopy(kwargs.pop("template", None) or job().template)
    template["metadata"]["labels"].update(
        {
            "kueue.x-k8s.io/podset": "main",
            "kueue.x-k8s.io/local-queue-name": "lq",
            "kueue.x-k8s.io/cluster-queue-name": "cq",
        }
    )
    template["metadata"]["annotations"] = {"kueue.x-k8s.io/workload": WL}
    template["spec"]["nodeSelector"] = {"pool": "on-demand"}
    status = {"active": 3, "startTime": "2026-01-01T11:00:00Z", **kwargs.pop("status", {})}
    return job(suspend=False, template=template, status=status, **kwargs)


# ----------------------------------------------------------------- not Kueue's, gone
def test_a_job_without_the_queue_label_is_ignored() -> None:
    assert plan(job(queue=None)) is None
    assert plan(job(queue=None, suspend=False, status={"active": 2})) is None


@pytest.mark.parametrize("gone", [None, job(deleting=True)], ids=["job gone", "job deleting"])
def test_a_gone_job_releases_its_workloads(gone: QueuedJob | None) -> None:
    held, released = workload(conditions=ADMITTED), workload(name="other", finalizer=False)
    assert plan(gone, held, released) == WorkloadPlan((RemoveFinalizer(WL),))
    assert plan(gone, released) is None


def test_a_deleting_job_without_the_label_still_releases() -> None:
    assert plan(job(queue=None, deleting=True), workload()) == WorkloadPlan((RemoveFinalizer(WL),))


# ------------------------------------------------------------------------ h. create
def test_created_suspended_job_gets_its_workload() -> None:
    action = only(plan(job()))
    assert isinstance(action, CreateWorkload)
    assert action.body["metadata"]["name"] == WL
    assert action.event == Event("Normal", "CreatedWorkload", f"Created Workload: ns/{WL}")


def test_no_workload_while_pods_are_active() -> None:
    assert plan(job(status={"active": 1})) == WorkloadPlan()


def test_a_missing_priority_class_is_retried() -> None:
    p = plan(job(), priority=None)
    assert p is not None and p.requeue and p.actions == ()


def test_running_without_a_workload_is_stopped_first() -> None:
    """The user unsuspended it before any Workload: suspended, nothing to restore."""
    action = only(plan(job(suspend=False, status={"active": 2})))
    assert action == PatchJob(
        {"spec": {"suspend": True}},
        Event("Normal", "Stopped", "Missing Workload; unable to restore pod templates"),
    )


# ---------------------------------------------------------------- l. start, pending
def test_pending_workload_nothing_to_do() -> None:
    pending = workload(conditions=[cond("QuotaReserved", "False", "Pending")])
    assert plan(job(status=SUSPENDED_STATUS), pending) == WorkloadPlan()


def test_admitted_workload_starts_the_job() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission({"cpu": "spot"}))
    action = only(plan(job(status=SUSPENDED_STATUS), wl))
    assert isinstance(action, PatchJob)
    assert action.event == Event("Normal", "Started", "Admitted by clusterQueue cq")
    spec = action.patch["spec"]
    assert spec["suspend"] is False and "parallelism" not in spec
    assert spec["template"] == {
        "metadata": {
            "labels": {
                "kueue.x-k8s.io/podset": "main",
                "kueue.x-k8s.io/local-queue-name": "lq",
                "kueue.x-k8s.io/cluster-queue-name": "cq",
            },
            "annotations": {"kueue.x-k8s.io/workload": WL},
        },
        "spec": {"nodeSelector": {"pool": "spot", "zone": "a"}, "tolerations": [SPOT_TOLERATION]},
    }


def test_partial_admission_runs_the_admitted_count() -> None:
    partial = job(
        parallelism=5,
        completions=10,
        annotations={MIN_PARALLELISM_ANNOTATION: "2"},
        status=SUSPENDED_STATUS,
    )
    wl = workload(partial, conditions=ADMITTED, admitted_with=admission(count=3))
    action = only(plan(partial, wl))
    assert action.patch["spec"]["parallelism"] == 3 and action.patch["spec"]["suspend"] is False


def test_a_conflict_finishes_the_workload() -> None:
    queued = job(status=SUSPENDED_STATUS)
    queued.template["spec"]["nodeSelector"] = {"pool": "mine"}
    wl = workload(queued, conditions=ADMITTED, admitted_with=admission())
    action = only(plan(queued, wl))
    assert isinstance(action, PatchWorkloadStatus)
    finished = conditions_of(action)["Finished"]
    assert finished == {
        "type": "Finished",
        "status": "True",
        "reason": "FailedToStart",
        "message": "invalid admission check PodSetUpdate: conflict for nodeSelector: "
        "conflict for key=pool, value1=mine, value2=on-demand",
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "observedGeneration": 2,
    }


def test_a_missing_flavor_retries_the_start() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission({"cpu": "gone"}))
    p = plan(job(status=SUSPENDED_STATUS), wl)
    assert p is not None and p.requeue and p.actions == ()


def test_start_waits_while_the_template_may_not_change() -> None:
    """Suspended but its pods not gone yet (a user's suspend): the merge would be refused."""
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    assert (
        plan(job(status={"active": 2, "startTime": "2026-01-01T11:00:00Z"}), wl) == WorkloadPlan()
    )


def test_reserved_with_pending_checks_reports_them() -> None:
    checks = [
        {"name": "prov", "state": "Pending", "message": "waiting for capacity"},
        {"name": "ok", "state": "Ready", "message": "fine"},
    ]
    wl = workload(
        conditions=[cond("QuotaReserved"), cond("Admitted", "False", "UnsatisfiedChecks")],
        admitted_with=admission(),
        checks=checks,
    )
    p = plan(job(status=SUSPENDED_STATUS), wl)
    assert p == WorkloadPlan(
        events=(Event("Normal", "UpdatedAdmissionCheck", "prov: waiting for capacity"),)
    )


def test_queue_change_while_pending_moves_the_workload() -> None:
    wl = workload()
    assert only(plan(job(queue="other", status=SUSPENDED_STATUS), wl)) == UpdateWorkload(
        WL, {"queueName": "other"}
    )


# ------------------------------------------------------------------- m. not admitted
def test_running_but_not_admitted_is_stopped() -> None:
    action = only(plan(job(suspend=False, status={"active": 1}), workload()))
    assert action == PatchJob(
        {"spec": {"suspend": True}}, Event("Normal", "Stopped", "Not admitted by cluster queue")
    )


def test_admitted_and_running_nothing_to_do() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    assert plan(running_job(), wl) == WorkloadPlan()


# ------------------------------------------------------------------------ k. evicted
PREEMPTED = cond(
    "Evicted",
    reason="Preempted",
    message="Preempted to accommodate a workload (UID: x) due to prioritization in the CQ",
    ago=5,
)


def test_evicted_running_job_is_suspended_marked_stopping() -> None:
    wl = workload(conditions=[*ADMITTED, PREEMPTED], admitted_with=admission())
    action = only(plan(running_job(), wl))
    assert action == PatchJob(
        {"spec": {"suspend": True}, "metadata": {"annotations": {STOPPING_ANNOTATION: "true"}}},
        Event("Normal", "Stopped", PREEMPTED["message"]),
    )


def test_evicted_restore_waits_for_the_pods() -> None:
    wl = workload(conditions=[*ADMITTED, PREEMPTED], admitted_with=admission())
    template = running_job().template
    stopping = job(
        template=template, annotations={STOPPING_ANNOTATION: "true"}, status={"active": 2}
    )
    assert plan(stopping, wl) == WorkloadPlan()


def test_evicted_once_pods_are_gone_restores_and_releases_quota() -> None:
    wl = workload(conditions=[*ADMITTED, PREEMPTED], admitted_with=admission())
    template = running_job().template
    stopped = job(
        template=template, annotations={STOPPING_ANNOTATION: "true"}, status=SUSPENDED_STATUS
    )
    p = plan(stopped, wl)
    assert p is not None and len(p.actions) == 2
    restore, release = p.actions
    assert restore == PatchJob(
        {
            "spec": {
                "template": {
                    "metadata": {
                        "labels": {
                            "kueue.x-k8s.io/podset": None,
                            "kueue.x-k8s.io/local-queue-name": None,
                            "kueue.x-k8s.io/cluster-queue-name": None,
                        },
                        "annotations": None,
                    },
                    "spec": {"nodeSelector": None},
                }
            },
            "metadata": {"annotations": {STOPPING_ANNOTATION: None}},
        }
    )
    assert isinstance(release, PatchWorkloadStatus) and release.workload == WL
    assert release.status["admission"] is None
    assert release.status["accumulatedPastExecutionTimeSeconds"] == 120
    conds = conditions_of(release)
    assert conds["Requeued"] == {
        "type": "Requeued",
        "status": "True",
        "reason": "Preempted",
        "message": PREEMPTED["message"],
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "observedGeneration": 2,
    }
    assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == (
        "False",
        "Pending",
    )
    assert conds["QuotaReserved"]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert (
        conds["Admitted"]["status"],
        conds["Admitted"]["reason"],
        conds["Admitted"]["message"],
    ) == ("False", "NoReservation", "The workload has no reservation")
    assert conds["Evicted"] == PREEMPTED  # Kueue's own, untouched


@pytest.mark.parametrize(
    ("reason", "requeued"),
    [
        ("Preempted", "True"),
        ("NodeFailures", "True"),
        ("PodsReadyTimeout", "False"),
        ("DeactivatedDueToRequeuingLimitExceeded", "False"),
    ],
)
def test_requeued_at_once_only_after_preemption_or_node_failure(reason: str, requeued: str) -> None:
    evicted = cond("Evicted", reason=reason, message="m")
    wl = workload(conditions=[*ADMITTED, evicted], admitted_with=admission())
    action = only(plan(job(status=SUSPENDED_STATUS), wl))
    assert conditions_of(action)["Requeued"]["status"] == requeued


def test_evicted_with_unready_checks() -> None:
    evicted = cond("Evicted", reason="AdmissionCheck", message="m")
    wl = workload(
        conditions=[*ADMITTED, evicted],
        admitted_with=admission(),
        checks=[{"name": "prov", "state": "Retry"}],
    )
    action = only(plan(job(status=SUSPENDED_STATUS), wl))
    assert conditions_of(action)["Admitted"]["reason"] == "NoReservationUnsatisfiedChecks"


def test_evicted_already_released_nothing_more() -> None:
    released = [
        cond("QuotaReserved", "False", "Pending"),
        cond("Admitted", "False", "NoReservation"),
        PREEMPTED,
    ]
    assert plan(job(status=SUSPENDED_STATUS), workload(conditions=released)) == WorkloadPlan()


# ------------------------------------------------------------ g. e. f. the end
@pytest.mark.parametrize(("ctype", "reason"), [("Complete", "Succeeded"), ("Failed", "Failed")])
def test_finished_job_finishes_its_workload(ctype: str, reason: str) -> None:
    status = {
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": ctype, "status": "True", "message": "the job's words"},
        ]
    }
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    action = only(plan(running_job(status=status), wl))
    finished = conditions_of(action)["Finished"]
    assert (finished["reason"], finished["message"], finished["lastTransitionTime"]) == (
        reason,
        "the job's words",
        "2026-01-01T12:00:00Z",
    )
    assert action.event == Event(
        "Normal", "FinishedWorkload", f"Workload 'ns/{WL}' is declared finished"
    )


def test_finished_workload_is_released() -> None:
    done = workload(
        conditions=[*ADMITTED, cond("Finished", reason="Succeeded")], admitted_with=admission()
    )
    action = only(plan(job(status={"conditions": [{"type": "Complete", "status": "True"}]}), done))
    assert action == RemoveFinalizer(
        WL, Event("Normal", "FinishedWorkload", f"Workload 'ns/{WL}' is declared finished")
    )
    assert plan(job(), workload(conditions=[cond("Finished")], finalizer=False)) == WorkloadPlan()


def test_finished_job_without_workload_makes_none() -> None:
    assert (
        plan(job(status={"conditions": [{"type": "Complete", "status": "True"}]})) == WorkloadPlan()
    )


def test_deleted_workload_stops_the_job_then_releases() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission(), deleting=True)
    first = plan(running_job(), wl)
    assert first is not None and [type(a) for a in first.actions] == [PatchJob]
    assert first.actions[0].event == Event("Normal", "Stopped", "Workload is deleted")
    stopped = job(
        template=running_job().template,
        annotations={STOPPING_ANNOTATION: "true"},
        status=SUSPENDED_STATUS,
    )
    second = plan(stopped, wl)
    assert second is not None and [type(a) for a in second.actions] == [PatchJob, RemoveFinalizer]


# ------------------------------------------------------ i. reclaimable, j. PodsReady
def test_reclaimable_pods_reported_as_the_job_drains() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    draining = running_job(status={"succeeded": 5, "active": 1})
    assert only(plan(draining, wl)) == PatchWorkloadStatus(
        WL, {"reclaimablePods": [{"name": "main", "count": 2}]}
    )
    reported = workload(
        conditions=ADMITTED, admitted_with=admission(), reclaimable=[{"name": "main", "count": 2}]
    )
    assert plan(draining, reported) == WorkloadPlan()


@pytest.mark.parametrize(
    ("previous", "ready", "admitted", "want"),
    [
        pytest.param(None, 0, True, ("False", "WaitForStart"), id="no pods ready yet"),
        pytest.param(None, 3, True, ("True", "Started"), id="all ready"),
        pytest.param(("True", "Started"), 2, True, ("False", "WaitForRecovery"), id="one lost"),
        pytest.param(("False", "WaitForRecovery"), 3, True, ("True", "Recovered"), id="recovered"),
        pytest.param(
            ("False", "WaitForStart"), 1, True, ("False", "WaitForStart"), id="still starting: kept"
        ),
        pytest.param(None, 3, False, ("False", "WaitForStart"), id="not admitted"),
    ],
)
def test_pods_ready(
    previous: tuple[str, str] | None, ready: int, admitted: bool, want: tuple[str, str]
) -> None:
    conditions = list(ADMITTED) if admitted else [cond("QuotaReserved", "False", "Pending")]
    if previous:
        conditions.append(cond("PodsReady", previous[0], previous[1]))
    wl = workload(conditions=conditions, admitted_with=admission() if admitted else None)
    queued = running_job(status={"ready": ready}) if admitted else job(status=SUSPENDED_STATUS)
    assert plan(queued, wl) == WorkloadPlan()  # waitForPodsReady off: never written
    p = plan(queued, wl, pods_ready=True)
    if previous is not None and previous == want:
        assert p == WorkloadPlan()
        return
    got = conditions_of(only(p))["PodsReady"]
    assert (got["status"], got["reason"]) == want
    assert got["observedGeneration"] == 2


# ------------------------------------------- d. parallelism change, extra workloads
def test_parallelism_change_while_admitted_evicts_and_recreates() -> None:
    wl = workload(conditions=ADMITTED, admitted_with=admission())
    # 1. Running at 3, parallelism now 4: no Workload matches; stopped, restore marked.
    first = plan(running_job(parallelism=4), wl)
    assert first == WorkloadPlan(
        (
            PatchJob(
                {
                    "spec": {"suspend": True},
                    "metadata": {"annotations": {STOPPING_ANNOTATION: "true"}},
                },
                Event(
                    "Normal",
                    "Stopped",
                    "No matching Workload; restoring pod templates according to existent Workload",
                ),
            ),
        )
    )
    # 2. Pods gone: the template restored from the old Workload, which is deleted.
    stopped = job(
        parallelism=4,
        template=running_job().template,
        annotations={STOPPING_ANNOTATION: "true"},
        status=SUSPENDED_STATUS,
    )
    second = plan(stopped, wl)
    assert second is not None and second.requeue
    assert [type(a) for a in second.actions] == [PatchJob, RemoveFinalizer, DeleteWorkload]
    assert second.actions[2].event == Event(
        "Normal", "DeletedWorkload", f"Deleted not matching Workload: ns/{WL}"
    )
    # 3. No Workload: a new one, the same name, count 4, queued from scratch.
    third = only(plan(job(parallelism=4, status=SUSPENDED_STATUS)))
    assert isinstance(third, CreateWorkload) and third.body["metadata"]["name"] == WL
    assert third.body["spec"]["podSets"][0]["count"] == 4


def test_stale_unreserved_workload_of_a_suspended_job_is_rewritten() -> None:
    p = plan(job(parallelism=4, status=SUSPENDED_STATUS), workload())
    assert p is not None and not p.requeue
    action = p.actions[0]
    assert isinstance(action, UpdateWorkload) and action.spec["podSets"][0]["count"] == 4
    assert action.spec["maximumExecutionTimeSeconds"] is None and action.spec["active"] is None
    assert action.event == Event(
        "Normal", "UpdatedWorkload", f"Updated not matching Workload for suspended job: ns/{WL}"
    )


def test_extra_workloads_are_deleted() -> None:
    extra = workload(name="paralleljob-demo-old")
    p = plan(job(status=SUSPENDED_STATUS), workload(), extra)
    assert p is not None and p.requeue
    assert p.actions == (
        RemoveFinalizer("paralleljob-demo-old"),
        DeleteWorkload(
            "paralleljob-demo-old",
            Event(
                "Normal",
                "DeletedWorkload",
                "Deleted not matching Workload: ns/paralleljob-demo-old",
            ),
        ),
    )


def test_priority_follows_the_label() -> None:
    high = Priority(1000, PriorityClassRef("kueue.x-k8s.io", "WorkloadPriorityClass", "high"))
    p = plan(
        job(labels={PRIORITY_CLASS_LABEL: "high"}, status=SUSPENDED_STATUS),
        workload(),
        priority=high,
    )
    assert p is not None
    assert p.actions[0] == UpdateWorkload(
        WL,
        {
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            },
            "priority": 1000,
        },
        Event("Normal", "UpdatedWorkload", f"Updated workload priority class: ns/{WL}"),
    )
    pod_class = workload(
        priority=Priority(5, PriorityClassRef("scheduling.k8s.io", "PriorityClass", "pc"))
    )
    assert (
        plan(
            job(labels={PRIORITY_CLASS_LABEL: "high"}, status=SUSPENDED_STATUS),
            pod_class,
            priority=high,
        )
        == WorkloadPlan()
    )


def test_finished_is_written_once() -> None:
    """A finished job whose Workload is already Finished and released: nothing."""
    done = workload(conditions=[cond("Finished", ago=3600)], finalizer=False)
    assert (
        plan(job(status={"conditions": [{"type": "Complete", "status": "True"}]}), done)
        == WorkloadPlan()
    )
