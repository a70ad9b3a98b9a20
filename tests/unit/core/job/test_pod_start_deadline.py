"""spec.podStartDeadlineSeconds (core/job/pod_start_deadline.py), not upstream: which pods did
not start in time and when the next may not, case by case; what parse_pod reads as
started; and its hooks in one sync (sync.py), the three steps driven directly as
test_sync.py drives them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    Condition,
    JobSpec,
    JobStatus,
    PodInfo,
    condition_to_dict,
    parse_pod,
    parse_spec,
)
from paralleljob.core.job.pod_start_deadline import (
    NO_DEADLINES,
    StartDeadlines,
    event_message,
    failed_condition,
    has_started,
    start_deadlines,
)
from paralleljob.core.job.sync import (
    PodOutcome,
    PodPlan,
    SyncInput,
    Tracked,
    plan_pods,
    sync_context,
    track,
)
from tests.unit.core.job.test_sync import STARTED, job_of, run_sync
from tests.unit.sim import T0

P, R, S, F, U = c.PENDING, c.RUNNING, c.SUCCEEDED, c.FAILED, c.UNKNOWN
TYPE, REASON = c.POD_COND_START_DEADLINE_EXCEEDED, c.REASON_POD_START_DEADLINE_EXCEEDED


def ago(seconds: float) -> datetime:
    return T0 - timedelta(seconds=seconds)


def pod(
    name: str,
    age: float | None,
    phase: str = P,
    *,
    started: bool = False,
    deleting: bool = False,
    scheduled: bool = False,
) -> PodInfo:
    """A pod of the job created ``age`` seconds before T0 (None: no creation time)."""
    return PodInfo(
        name,
        name,
        phase,
        deleting=deleting,
        started=started,
        node_assigned=scheduled,
        created=None if age is None else ago(age),
        namespace="ns",
    )


# ------------------------------------------------------------------ start_deadlines
@dataclass(frozen=True)
class Case:
    deadline: int | None
    pods: tuple[PodInfo, ...]
    #: The names of the pods past their deadline, in the order they are failed.
    expired: tuple[str, ...] = ()
    next_in: float | None = None
    suspend: bool = False


CASES = [
    pytest.param(Case(None, (pod("p", 600),)), id="no deadline: nothing, however old"),
    pytest.param(Case(10, ()), id="no pods"),
    pytest.param(Case(10, (pod("p", 3),), next_in=7), id="pending 3s of 10: 7s left"),
    pytest.param(Case(10, (pod("p", 9.5),), next_in=0.5), id="pending 9.5s of 10: half a second"),
    pytest.param(Case(10, (pod("p", 10),), expired=("p",)), id="pending exactly 10s: expired"),
    pytest.param(Case(10, (pod("p", 11),), expired=("p",)), id="pending 11s of 10: expired"),
    pytest.param(
        Case(10, (pod("p", 0),), next_in=10), id="created this very second: the whole deadline"
    ),
    pytest.param(
        Case(10, (pod("p", -2),), next_in=12),
        id="created 2s ahead of the operator's clock: 12s left",
    ),
    pytest.param(
        Case(10, (pod("p", 60, scheduled=True),), expired=("p",)),
        id="scheduled, no container started (image pull back-off): expired",
    ),
    pytest.param(
        Case(10, (pod("p", 60, started=True),)),
        id="pending with a regular container running: started",
    ),
    pytest.param(Case(10, (pod("p", 60, R),)), id="running: started"),
    pytest.param(Case(10, (pod("p", 60, U),)), id="unknown (node lost): not judged"),
    pytest.param(Case(10, (pod("p", 60, S), pod("q", 60, F))), id="finished pods: not active"),
    pytest.param(
        Case(10, (pod("p", 60, deleting=True),)), id="being deleted: not active, not failed again"
    ),
    pytest.param(Case(10, (pod("p", None),)), id="no creation time: not judged"),
    pytest.param(Case(10, (pod("p", 60),), suspend=True), id="suspended job: nothing"),
    pytest.param(
        Case(
            10,
            (pod("young", 4), pod("b", 30), pod("running", 30, R), pod("a", 30), pod("old", 50)),
            expired=("old", "a", "b"),
            next_in=6,
        ),
        id="several: oldest first (then by name), the youngest's deadline next",
    ),
    pytest.param(
        Case(10, (pod("p1", 2), pod("p2", 8), pod("p3", 5)), next_in=2),
        id="none expired: the earliest deadline",
    ),
    pytest.param(
        Case(2**40, (pod("p", 60),), next_in=2**40 - 60),
        id="a deadline of 2^40 s: a number of seconds, never a date overflow",
    ),
]


@pytest.mark.parametrize("case", CASES)
def test_start_deadlines(case: Case) -> None:
    spec = JobSpec(pod_start_deadline_seconds=case.deadline, suspend=case.suspend)
    found = start_deadlines(spec, case.pods, T0)
    assert tuple(p.name for p in found.expired) == case.expired
    assert found.next_in == case.next_in


def test_no_deadline_is_the_empty_answer() -> None:
    assert start_deadlines(JobSpec(), (pod("p", 600),), T0) is NO_DEADLINES
    assert StartDeadlines((), None) == NO_DEADLINES


@pytest.mark.parametrize(
    ("phase", "started", "expected"),
    [
        (P, False, False),
        (P, True, True),
        (R, False, True),
        (U, False, True),
        (S, False, True),
        (F, False, True),
    ],
)
def test_has_started(phase: str, started: bool, expected: bool) -> None:
    assert has_started(pod("p", 1, phase, started=started)) is expected


def test_the_condition_and_the_event_say_what_happened() -> None:
    cond = failed_condition(5, T0 + timedelta(microseconds=700))
    assert cond == Condition(
        TYPE,
        "True",
        REASON,
        "The pod did not start within podStartDeadlineSeconds (5s) of its creation: no "
        "container ran. Its job failed and deleted it.",
        last_transition_time=T0,
    )
    # As a v1.PodCondition: no lastProbeTime, whole seconds.
    assert condition_to_dict(cond) == {
        "type": "paralleljob.dev/PodStartDeadlineExceeded",
        "status": "True",
        "reason": "PodStartDeadlineExceeded",
        "message": cond.message,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert event_message("job-abcde", 5) == (
        "Pod job-abcde did not start within podStartDeadlineSeconds (5s) of its creation: "
        "failed and deleted"
    )


def test_the_condition_type_is_a_qualified_name_a_pod_failure_policy_may_name() -> None:
    """ValidateQualifiedName, as upstream validates onPodConditions[].type (and a pod's
    conditions that are not the kubelet's): an optional DNS subdomain prefix and '/',
    then a name of at most 63 alphanumerics, '-', '_' or '.'."""
    prefix, _, name = TYPE.partition("/")
    assert prefix == c.GROUP
    assert 0 < len(name) <= 63 and name.isalnum()


# ------------------------------------------------------------------ parse_pod, parse_spec
def _pod_body(phase: str = P, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u", "creationTimestamp": "2026-01-01T12:00:00Z"},
        "spec": {},
        "status": {"phase": phase, **status},
    }


def _containers(*states: dict[str, Any], last: dict[str, Any] | None = None) -> list[Any]:
    return [{"name": f"c{i}", "state": s, "lastState": last or {}} for i, s in enumerate(states)]


WAITING = {"waiting": {"reason": "ImagePullBackOff"}}
RUNNING = {"running": {"startedAt": "2026-01-01T12:00:01Z"}}
TERMINATED = {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T12:00:02Z"}}


@pytest.mark.parametrize(
    ("body", "started"),
    [
        pytest.param(_pod_body(), False, id="no status yet (unschedulable)"),
        pytest.param(
            _pod_body(containerStatuses=_containers(WAITING)), False, id="waiting: image pull"
        ),
        pytest.param(
            _pod_body(containerStatuses=_containers(WAITING, RUNNING)), True, id="one running"
        ),
        pytest.param(
            _pod_body(containerStatuses=_containers(TERMINATED)), True, id="one terminated"
        ),
        pytest.param(
            _pod_body(containerStatuses=_containers(WAITING, last=TERMINATED)),
            True,
            id="waiting to restart after it ran",
        ),
        pytest.param(
            _pod_body(initContainerStatuses=_containers(RUNNING)),
            False,
            id="init container runs: the deadline covers it",
        ),
        pytest.param(
            _pod_body(
                initContainerStatuses=_containers(TERMINATED),
                containerStatuses=_containers(WAITING),
            ),
            False,
            id="init container done, main image never pulled",
        ),
        pytest.param(
            _pod_body(
                initContainerStatuses=_containers(RUNNING),
                containerStatuses=_containers(WAITING),
            ),
            False,
            id="native sidecar runs, main image never pulled",
        ),
        pytest.param(
            _pod_body(
                initContainerStatuses=_containers(RUNNING),
                containerStatuses=_containers(RUNNING),
            ),
            True,
            id="sidecar and main container run",
        ),
        pytest.param(
            _pod_body(initContainerStatuses=_containers(WAITING)),
            False,
            id="init container waiting",
        ),
    ],
)
def test_parse_pod_reads_whether_a_container_ran(body: dict[str, Any], started: bool) -> None:
    assert parse_pod(body, PARALLELJOB).started is started


def test_an_unstarted_pod_keeps_its_resource_version_a_started_one_none() -> None:
    """The start deadline's write is conditional on it; running pods cost no memory."""
    body = _pod_body(containerStatuses=_containers(WAITING))
    body["metadata"]["resourceVersion"] = "42"
    assert parse_pod(body, PARALLELJOB).unstarted_version == "42"
    body["status"]["containerStatuses"] = _containers(RUNNING)
    assert parse_pod(body, PARALLELJOB).unstarted_version == ""


@pytest.mark.parametrize(
    ("value", "parsed"),
    [(None, None), (5, 5), (2**40, 2**40), (0, None), (-1, None), ("5", None), (True, None)],
)
def test_parse_spec_reads_the_field_a_positive_integer(value: Any, parsed: int | None) -> None:
    spec = {"podStartDeadlineSeconds": value, "template": {"spec": {}}}
    assert parse_spec(spec).pod_start_deadline_seconds == parsed


# ------------------------------------------------------------------ one sync
def sync(
    pods: tuple[PodInfo, ...],
    deadline: int | None = 10,
    status: JobStatus = STARTED,
    **spec: Any,
) -> Any:
    job_spec = JobSpec(parallelism=2, completions=4, pod_start_deadline_seconds=deadline, **spec)
    return run_sync(SyncInput(job=job_of(job_spec, status), pods=pods, now=T0))


def test_a_pod_past_its_deadline_is_failed_and_deleted_with_its_finalizer_on() -> None:
    done = sync((pod("late", 12), pod("young", 4)))
    plan = done.plan
    assert [p.name for p in plan.delete] == ["late"]
    assert plan.reason == "start-deadline"
    assert not plan.remove_finalizer_before_delete, "it must count as failed"
    assert plan.fail_condition == failed_condition(10, T0)
    assert plan.create == 0, "no creation in the sync that deletes"
    assert plan.requeue_after == 6, "the young pod's deadline"
    assert done.result.requeue_after == 6
    status = done.result.status
    # Failed before its deletion: it has finished, so it is not terminating.
    assert (status.active, status.terminating, status.failed) == (1, 0, 0)
    assert done.tracked.events[-1].type == "Warning"
    assert done.tracked.events[-1].reason == REASON
    assert done.tracked.events[-1].message == event_message("late", 10)


def test_the_sync_runs_again_at_the_earliest_deadline() -> None:
    done = sync((pod("a", 3), pod("b", 7)))
    assert not done.plan.delete
    assert done.plan.requeue_after == 3
    assert done.result.requeue_after == 3


def test_active_deadline_seconds_first_when_it_comes_first() -> None:
    # Started 30 s ago with activeDeadlineSeconds 32: 2 s left, before the pod's 7 s.
    done = sync((pod("a", 3), pod("b", 1)), active_deadline_seconds=32)
    assert done.result.requeue_after == 2
    done = sync((pod("a", 3), pod("b", 1)), active_deadline_seconds=60)
    assert done.result.requeue_after == 7


def test_without_the_field_pods_may_stay_pending_for_ever() -> None:
    plain = sync((pod("a", 3600), pod("b", 3600)), deadline=None)
    assert plain.plan == PodPlan()
    assert plain.ctx.start_deadlines is NO_DEADLINES
    assert plain.result.requeue_after is None


def test_the_failed_pod_is_counted_once_in_the_next_sync() -> None:
    done = sync((pod("late", 12), pod("young", 4)))
    # What the cache shows next: the pod Failed and being deleted, finalizer on.
    failed = replace(pod("late", 12, F, deleting=True), has_finalizer=True)
    again = sync((failed, pod("young", 4)), status=done.result.status)
    assert [p.name for p in again.tracked.remove_finalizers] == ["late"]
    assert again.result.status.failed == 1
    # And once more: the finalizer is gone, nothing new to count.
    gone = replace(failed, has_finalizer=False)
    third = sync((gone, pod("young", 4)), status=again.result.status)
    assert third.result.status.failed == 1


def test_scale_down_goes_first_and_counts_nothing() -> None:
    done = sync((pod("a", 60), pod("b", 60), pod("c", 60)))
    assert len(done.plan.delete) == 1
    assert done.plan.reason == "scale-down"
    assert done.plan.fail_condition is None


def test_a_job_with_a_verdict_deletes_its_pods_for_the_verdict() -> None:
    done = sync((pod("late", 60),), backoff_limit=0, status=replace(STARTED, failed=1))
    assert done.plan.reason == "fail"
    assert done.plan.fail_condition is None
    assert done.plan.requeue_after is None


def test_pods_not_yet_in_the_cache_hold_the_deadline_back() -> None:
    job = job_of(JobSpec(parallelism=1, pod_start_deadline_seconds=10))
    done = run_sync(
        SyncInput(job=job, pods=(pod("late", 60),), now=T0, expectations_satisfied=False)
    )
    assert not done.plan.delete


def test_at_most_max_pod_changes_per_sync() -> None:
    spec = JobSpec(parallelism=5, completions=5, pod_start_deadline_seconds=10)
    pods = tuple(pod(f"p{i}", 60) for i in range(5))
    inp = SyncInput(job_of(spec), pods, T0, config=CoreConfig(max_pod_changes_per_sync=2))
    assert len(run_sync(inp).plan.delete) == 2


def test_no_event_for_a_pod_whose_writes_failed() -> None:
    spec = JobSpec(parallelism=2, completions=2, pod_start_deadline_seconds=10)
    ctx = sync_context(SyncInput(job_of(spec), (pod("a", 60), pod("b", 60)), T0))
    plan = plan_pods(ctx)
    tracked: Tracked = track(ctx, plan, PodOutcome(deleted=("b",)))
    assert [e.message for e in tracked.events] == [event_message("b", 10)]
    assert tracked.status.active == 1
