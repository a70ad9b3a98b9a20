"""The decision core, rule by rule, table-driven where the rule is a table."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.model import Condition, Job, JobSpec, JobStatus, PodInfo
from paralleljob.core.job.sync import (
    PodOutcome,
    SyncContext,
    SyncInput,
    count_and_enact,
    plan_pods,
    pods_for_removal,
    sync_context,
    track,
    want_active,
)

from ..fake_api import Crash
from ..sim import T0, Sim


# ----------------------------------------------------------------------------- wantActive
@pytest.mark.parametrize(
    ("completions", "parallelism", "succeeded", "active", "want"),
    [
        # 1. run once: completions 1, parallelism 1
        (1, 1, 0, 0, 1),
        (1, 1, 1, 0, 0),
        # 2. M completions, N at a time: never more than the successes still missing
        (5, 3, 0, 0, 3),
        (5, 3, 3, 0, 2),
        (5, 3, 4, 1, 1),
        (5, 3, 5, 0, 0),
        (2, 5, 0, 0, 2),
        (5, 3, 7, 0, 0),
        # 3. work queue with parallelism N: N until the first success, then none new
        (None, 3, 0, 0, 3),
        (None, 3, 0, 1, 3),
        (None, 3, 1, 2, 2),
        (None, 3, 1, 0, 0),
        # 4. work queue with parallelism 1
        (None, 1, 0, 0, 1),
        (None, 1, 1, 0, 0),
        # parallelism 0 pauses
        (5, 0, 0, 0, 0),
        (None, 0, 0, 2, 0),
    ],
)
def test_want_active(
    completions: int | None, parallelism: int, succeeded: int, active: int, want: int
) -> None:
    assert want_active(completions, parallelism, succeeded, active) == want


# ----------------------------------------------------------------------------- the verdict
def _context(spec: JobSpec, status: JobStatus, pods: tuple[PodInfo, ...] = ()) -> SyncContext:
    return sync_context(SyncInput(job=Job("ns", "job", "uid", spec, status), pods=pods, now=T0))


def _started(seconds_ago: int) -> JobStatus:
    return JobStatus(start_time=T0 - timedelta(seconds=seconds_ago))


_SCM = Condition(c.COND_SUCCESS_CRITERIA_MET, "True")
_TARGET = Condition(c.COND_FAILURE_TARGET, "True", "Why", "Msg")
_DEADLINE_30S = JobSpec(active_deadline_seconds=30)


@pytest.mark.parametrize(
    ("spec", "status", "verdict", "deadline_requeue"),
    [
        pytest.param(JobSpec(), JobStatus(), None, None, id="new job"),
        pytest.param(
            JobSpec(backoff_limit=1),
            JobStatus(failed=2, conditions=(_SCM,)),
            (c.COND_SUCCESS_CRITERIA_MET, ""),
            None,
            id="pre-existing SuccessCriteriaMet stands past the backoff limit",
        ),
        pytest.param(
            JobSpec(),
            JobStatus(conditions=(_TARGET,)),
            (c.COND_FAILED, "Why"),
            None,
            id="pre-existing FailureTarget becomes Failed",
        ),
        pytest.param(
            JobSpec(backoff_limit=2),
            JobStatus(failed=3),
            (c.COND_FAILURE_TARGET, c.REASON_BACKOFF_LIMIT),
            None,
            id="too many job failures",
        ),
        pytest.param(
            _DEADLINE_30S,
            _started(30),
            (c.COND_FAILURE_TARGET, c.REASON_DEADLINE),
            None,
            id="activeDeadlineSeconds less than single pod execution",
        ),
        pytest.param(_DEADLINE_30S, _started(10), None, 20, id="deadline not yet reached"),
        pytest.param(
            replace(_DEADLINE_30S, suspend=True), _started(30), None, None, id="deadline suspended"
        ),
    ],
)
def test_sync_context_verdict(
    spec: JobSpec,
    status: JobStatus,
    verdict: tuple[str, str] | None,
    deadline_requeue: float | None,
) -> None:
    """syncJob's evaluation of the end state (TestControllerSyncJob, TestSyncJobPastDeadline)."""
    ctx = _context(spec, status)
    got = ctx.verdict
    assert (None if got is None else (got.type, got.reason)) == verdict
    assert ctx.deadline_requeue == deadline_requeue


def test_sync_context_counts_new_finished_pods_once_and_starts_the_clock() -> None:
    pods = (
        PodInfo("s", "s", c.SUCCEEDED),
        PodInfo("f", "f", c.FAILED),
        PodInfo("r", "r", c.RUNNING, ready=True),
        PodInfo("t", "t", c.RUNNING, deleting=True),
    )
    ctx = _context(JobSpec(), JobStatus(succeeded=1, uncounted_failed=("f",)), pods)
    # "f" is listed as uncounted already; "t", deleted while running, counts as failed.
    assert (ctx.succeeded, ctx.failed) == (2, 2)
    assert [p.uid for p in ctx.new_succeeded] == ["s"]
    assert [p.uid for p in ctx.new_failed] == ["t"]
    assert [p.uid for p in ctx.active] == ["r"]
    assert (ctx.ready, ctx.terminating) == (1, 1)
    assert ctx.start_time == T0
    assert _context(JobSpec(suspend=True), JobStatus()).start_time is None


# ----------------------------------------------------------------------------- the four workloads
def test_workload_1_run_once_failing_pod_fails_job_with_exactly_one_pod() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=0))
    sim.sync()
    assert len(sim.created) == 1
    assert sim.status.completions_text == "0/1"
    sim.run()
    sim.fail(1)
    sim.advance(60)
    sim.settle()
    assert len(sim.created) == 1, "backoffLimit 0: no second pod"
    assert sim.status.failed == 1
    assert sim.condition(c.COND_FAILURE_TARGET) == "True"
    assert sim.condition(c.COND_FAILED) == "True"
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
    assert sim.status.status_text == "Failed"
    assert sim.status.completion_time is None
    assert sim.with_finalizer() == []
    assert any(e.reason == c.REASON_BACKOFF_LIMIT and e.type == "Warning" for e in sim.events)


def test_workload_2_completions_5_parallelism_3() -> None:
    sim = Sim(JobSpec(completions=5, parallelism=3))
    sim.sync()
    assert len(sim.active()) == 3
    sim.run()
    sim.succeed(3)
    sim.sync()
    assert sim.status.succeeded == 3
    assert len(sim.active()) == 2, "exactly two more: never more than successes still missing"
    assert sim.status.completions_text == "3/5"
    sim.run()
    sim.succeed(2)
    sim.settle()
    assert len(sim.created) == 5
    assert sim.max_active == 3
    assert sim.status.succeeded == 5
    assert sim.condition(c.COND_SUCCESS_CRITERIA_MET) == "True"
    assert sim.condition(c.COND_COMPLETE) == "True"
    assert sim.reason(c.COND_COMPLETE) == c.REASON_COMPLETIONS_REACHED
    assert sim.status.completion_time == T0
    assert (sim.status.status_text, sim.status.completions_text) == ("Complete", "5/5")
    assert sim.with_finalizer() == []


def test_workload_3_work_queue_no_new_pod_after_first_success() -> None:
    sim = Sim(JobSpec(completions=None, parallelism=3))
    sim.sync()
    sim.run()
    assert len(sim.active()) == 3
    assert (sim.status.status_text, sim.status.completions_text) == ("Running", "0/1 of 3")
    sim.succeed(1)
    sim.settle()
    assert len(sim.created) == 3, "no pod is created after the first success"
    assert len(sim.active()) == 2, "running pods keep running"
    assert sim.condition(c.COND_COMPLETE) is None
    sim.succeed(2)
    sim.advance(33)
    sim.settle()
    assert (sim.status.status_text, sim.status.completions_text) == ("Complete", "3/1 of 3")
    assert sim.status.duration_text == "33s"
    # 4. patched to parallelism 1 after it finished, then 2: the column follows.
    sim.patch_spec(parallelism=1)
    sim.advance(3600)
    sim.sync()
    assert sim.status.completions_text == "3/1"
    sim.patch_spec(parallelism=2)
    sim.sync()
    assert (sim.status.status_text, sim.status.completions_text) == ("Complete", "3/1 of 2")
    assert sim.status.duration_text == "33s", "a finished job's DURATION is fixed"
    assert len(sim.created) == 3


def test_workload_4_work_queue_parallelism_1_then_2() -> None:
    sim = Sim(JobSpec(completions=None, parallelism=1))
    sim.sync()
    assert len(sim.active()) == 1
    assert sim.status.completions_text == "0/1"
    sim.patch_spec(parallelism=2)
    sim.sync()
    assert len(sim.active()) == 2
    assert sim.status.completions_text == "0/1 of 2"


def test_failures_after_a_work_queue_success_are_not_replaced_but_count() -> None:
    sim = Sim(JobSpec(completions=None, parallelism=3, backoff_limit=6))
    sim.sync()
    sim.succeed(1)
    sim.fail(1)
    sim.advance(60)
    sim.settle()
    assert len(sim.created) == 3
    assert (sim.status.succeeded, sim.status.failed) == (1, 1)


# ----------------------------------------------------------------------------- backoffLimit
@pytest.mark.parametrize("limit", [0, 1, 2, 3])
def test_backoff_limit_p_gives_exactly_p_plus_1_failed_pods(limit: int) -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=limit))
    for _ in range(limit + 5):
        sim.settle()
        if sim.condition(c.COND_FAILED) == "True":
            break
        if sim.active():
            sim.fail(1)
        sim.advance(400)
    assert sim.condition(c.COND_FAILED) == "True"
    assert len(sim.created) == limit + 1
    assert sim.status.failed == limit + 1


def test_backoff_limit_is_strictly_greater_than() -> None:
    sim = Sim(JobSpec(completions=3, parallelism=3, backoff_limit=2))
    sim.sync()
    sim.fail(2)
    sim.sync()
    assert sim.status.failed == 2
    assert sim.condition(c.COND_FAILURE_TARGET) is None, "failed == limit is not a failure"
    sim.fail(1)
    sim.sync()
    assert sim.condition(c.COND_FAILURE_TARGET) == "True"


def test_failure_verdict_deletes_active_pods_and_counts_them_failed() -> None:
    sim = Sim(JobSpec(completions=5, parallelism=3, backoff_limit=0))
    sim.sync()
    sim.run()
    sim.fail(1)
    sim.sync()
    plan = sim.last_plan
    assert plan is not None and len(plan.delete) == 2
    assert not plan.remove_finalizer_before_delete
    # Terminating pods delay the Failed condition (upstream's delayTerminalCondition).
    assert sim.condition(c.COND_FAILURE_TARGET) == "True"
    assert sim.condition(c.COND_FAILED) is None
    assert sim.status.status_text == "FailureTarget"
    assert sim.status.terminating == 2
    assert sim.status.failed == 3
    sim.reap()
    sim.sync()
    assert sim.condition(c.COND_FAILED) == "True"
    assert sim.status.failed == 3 and sim.status.active == 0
    assert len(sim.created) == 3


@pytest.mark.parametrize(
    ("limit", "restarts", "fails"),
    [(0, 0, False), (0, 1, True), (2, 1, False), (2, 2, True), (3, 5, True)],
)
def test_on_failure_counts_container_restarts(limit: int, restarts: int, fails: bool) -> None:
    sim = Sim(
        JobSpec(completions=1, parallelism=1, backoff_limit=limit, restart_policy="OnFailure")
    )
    sim.sync()
    sim.run()
    uid = sim.active()[0].uid
    sim.pods[uid] = replace(sim.pods[uid], restarts=restarts)
    sim.sync()
    assert (sim.condition(c.COND_FAILURE_TARGET) == "True") is fails
    if fails:
        sim.reap()
        sim.settle()
        assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
        assert sim.status.failed == 1
        assert len(sim.created) == 1


def test_restarts_do_not_count_with_restart_policy_never() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=0))
    sim.sync()
    uid = sim.active()[0].uid
    sim.pods[uid] = replace(sim.pods[uid], phase=c.RUNNING, restarts=5)
    sim.sync()
    assert sim.condition(c.COND_FAILURE_TARGET) is None


# ----------------------------------------------------------------------------- parallelism
def test_parallelism_raised_mid_run_creates_pods() -> None:
    sim = Sim(JobSpec(completions=10, parallelism=2))
    sim.sync()
    sim.patch_spec(parallelism=5)
    sim.sync()
    assert len(sim.active()) == 5


def test_parallelism_lowered_deletes_surplus_never_counted_as_failures() -> None:
    sim = Sim(JobSpec(completions=10, parallelism=5, backoff_limit=0))
    sim.sync()
    sim.run(3)  # three running, two pending
    sim.patch_spec(parallelism=2)
    sim.sync()
    plan = sim.last_plan
    assert plan is not None and plan.reason == "scale-down"
    assert plan.remove_finalizer_before_delete
    assert [p.phase for p in plan.delete] == [c.PENDING, c.PENDING, c.RUNNING]
    assert len(sim.active()) == 2
    sim.reap()
    sim.settle()
    assert sim.status.failed == 0
    assert sim.condition(c.COND_FAILURE_TARGET) is None, "backoffLimit 0 and still no failure"
    # ... and the job still completes.
    for _ in range(10):
        if sim.condition(c.COND_COMPLETE) == "True":
            break
        sim.run()
        sim.succeed(len(sim.active()))
        sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"
    assert (sim.status.succeeded, sim.status.failed) == (10, 0)


def test_parallelism_zero_pauses_and_deletes_active_pods() -> None:
    sim = Sim(JobSpec(completions=4, parallelism=2))
    sim.sync()
    sim.patch_spec(parallelism=0)
    sim.sync()
    assert sim.active() == []
    sim.reap()
    sim.settle()
    assert sim.status.failed == 0 and sim.status.active == 0
    assert sim.status.status_text == "Running"
    sim.patch_spec(parallelism=2)
    sim.sync()
    assert len(sim.active()) == 2


def test_scale_down_order_pending_before_running_not_ready_before_ready() -> None:
    t = T0
    pods = [
        PodInfo(
            "ready-old", "1", c.RUNNING, node_assigned=True, ready=True, ready_since=t, created=t
        ),
        PodInfo(
            "ready-new",
            "2",
            c.RUNNING,
            node_assigned=True,
            ready=True,
            ready_since=t + timedelta(seconds=5),
            created=t,
        ),
        PodInfo("running-not-ready", "3", c.RUNNING, node_assigned=True, created=t),
        PodInfo("pending-scheduled", "4", c.PENDING, node_assigned=True, created=t),
        PodInfo("pending-unscheduled", "5", c.PENDING, created=t),
        PodInfo("restarty", "6", c.RUNNING, node_assigned=True, max_restarts=3, created=t),
    ]
    order = [p.name for p in pods_for_removal(pods, len(pods))]
    assert order == [
        "pending-unscheduled",
        "pending-scheduled",
        "restarty",
        "running-not-ready",
        "ready-new",
        "ready-old",
    ]
    assert [p.name for p in pods_for_removal(pods, 2)] == order[:2]
    assert pods_for_removal(pods, 0) == ()


# ----------------------------------------------------------------------------- suspend
def test_suspend_deletes_active_pods_and_resume_restarts_the_clock() -> None:
    sim = Sim(JobSpec(completions=4, parallelism=2, backoff_limit=0))
    sim.sync()
    sim.run()
    sim.patch_spec(suspend=True)
    sim.advance(5)
    sim.sync()
    assert sim.active() == []
    assert sim.condition(c.COND_SUSPENDED) == "True"
    assert sim.reason(c.COND_SUSPENDED) == "JobSuspended"
    assert sim.status.status_text == "Suspended"
    sim.reap()
    sim.advance(100)
    sim.settle()
    assert sim.active() == [] and sim.status.failed == 0
    assert any(e.reason == "Suspended" for e in sim.events)
    sim.patch_spec(suspend=False)
    sim.sync()
    assert len(sim.active()) == 2
    assert sim.condition(c.COND_SUSPENDED) == "False"
    assert sim.reason(c.COND_SUSPENDED) == "JobResumed"
    assert sim.status.start_time == sim.now
    assert sim.status.status_text == "Running"
    assert any(e.reason == "Resumed" for e in sim.events)


def test_created_suspended_makes_no_pods_and_has_no_start_time() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, suspend=True))
    sim.settle()
    assert sim.created == []
    assert sim.status.start_time is None
    assert sim.status.duration_text == ""
    assert sim.status.status_text == "Suspended"


# ------------------------------------------------------------------ activeDeadlineSeconds
def test_active_deadline_fails_the_job() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, active_deadline_seconds=30))
    done = sim.sync()
    assert done.requeue_after is not None and done.requeue_after <= 30
    assert sim.last_plan is not None and sim.last_plan.requeue_after == 30
    sim.run()
    sim.advance(30)
    sim.sync()
    assert sim.condition(c.COND_FAILURE_TARGET) == "True"
    assert sim.active() == []
    sim.reap()
    sim.settle()
    assert sim.condition(c.COND_FAILED) == "True"
    assert sim.reason(c.COND_FAILED) == c.REASON_DEADLINE
    assert sim.status.failed == 1


# ----------------------------------------------------------------------------- exactly once
def test_three_steps_record_then_remove_finalizer_then_count() -> None:
    sim = Sim(JobSpec(completions=2, parallelism=2))
    sim.sync()
    [uid] = sim.succeed(1)
    ctx = sync_context(SyncInput(job=sim.job, pods=tuple(sim.pods.values()), now=sim.now))
    plan = plan_pods(ctx)
    tracked = track(ctx, plan, PodOutcome())
    # Step 1: recorded by UID, not yet counted, finalizer still on.
    assert tracked.status.uncounted_succeeded == (uid,)
    assert tracked.status.succeeded == 0
    assert [p.uid for p in tracked.remove_finalizers] == [uid]
    # Step 3 after step 2 succeeded: counted, no longer uncounted.
    done = count_and_enact(ctx, tracked, [uid], plan)
    assert done.status.succeeded == 1 and done.status.uncounted_succeeded == ()
    # Step 3 after step 2 failed: stays uncounted.
    kept = count_and_enact(ctx, tracked, [], plan)
    assert kept.status.succeeded == 0 and kept.status.uncounted_succeeded == (uid,)


@pytest.mark.parametrize("where", ["before-status-1", "before-finalizers", "before-status-2"])
@pytest.mark.parametrize("phase", [c.SUCCEEDED, c.FAILED])
def test_a_crash_between_any_two_steps_counts_each_pod_once(where: str, phase: str) -> None:
    sim = Sim(JobSpec(completions=3, parallelism=3, backoff_limit=6))
    sim.sync()
    sim.finish_pods(2, phase)
    sim.crash_at = where
    with pytest.raises(Crash):
        sim.sync()
    sim.restart_operator()
    sim.sync()
    sim.sync()
    counted = sim.status.succeeded if phase == c.SUCCEEDED else sim.status.failed
    assert counted == 2
    assert sim.status.uncounted_succeeded == () and sim.status.uncounted_failed == ()
    assert [p for p in sim.pods.values() if not p.active and p.has_finalizer] == []


def test_a_pod_gone_after_its_finalizer_was_removed_is_still_counted() -> None:
    sim = Sim(JobSpec(completions=3, parallelism=3))
    sim.sync()
    [uid] = sim.succeed(1)
    sim.crash_at = "before-status-2"
    with pytest.raises(Crash):
        sim.sync()
    del sim.pods[uid]  # garbage-collected while the operator was down
    sim.sync()
    assert sim.status.succeeded == 1


def test_a_pod_deleted_before_it_finished_counts_failed_and_is_replaced() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=3))
    sim.sync()
    sim.run()
    [pod] = sim.active()
    sim.user_delete(pod.uid)
    sim.sync()
    assert sim.status.failed == 1
    assert sim.status.terminating == 1
    assert sim.active() == [], "the replacement waits for the back-off"
    sim.reap()
    sim.advance(10)
    sim.sync()
    assert len(sim.active()) == 1


def test_uncounted_pods_are_capped_per_sync_and_block_the_terminal_condition() -> None:
    sim = Sim(JobSpec(completions=5, parallelism=5), config=CoreConfig(max_uncounted=2))
    sim.sync()
    sim.succeed(5)
    sim.sync()
    assert sim.status.succeeded == 2
    assert sim.condition(c.COND_COMPLETE) is None
    sim.settle()
    assert sim.status.succeeded == 5
    assert sim.condition(c.COND_COMPLETE) == "True"


def test_no_pods_are_created_while_expectations_are_unsatisfied() -> None:
    sim = Sim(JobSpec(completions=5, parallelism=3))
    inp = SyncInput(job=sim.job, pods=(), now=sim.now, expectations_satisfied=False)
    plan = plan_pods(sync_context(inp))
    assert plan.create == 0 and plan.delete == ()


def test_a_deleted_job_releases_every_finalizer_and_creates_nothing() -> None:
    sim = Sim(JobSpec(completions=5, parallelism=3))
    sim.sync()
    sim.succeed(1)
    sim.job = replace(sim.job, deleting=True)
    sim.sync()
    assert sim.with_finalizer() == []
    assert sim.status.succeeded == 1
    assert len(sim.created) == 3
    assert sim.status.status_text == "Terminating"


def test_leftover_finalizers_of_a_finished_job_are_removed_without_counting() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1))
    sim.sync()
    sim.succeed(1)
    sim.settle()
    assert sim.status.succeeded == 1
    owner = "job-uid"
    stray = PodInfo("job-stray", "stray", c.SUCCEEDED, namespace="ns", label_uid=owner)
    sim.pods["stray"] = replace(stray, controller_uid=owner)
    sim.sync()
    assert sim.with_finalizer() == []
    assert sim.status.succeeded == 1


def test_a_finished_job_does_not_remove_a_finalizer_again_before_the_cache_shows_it() -> None:
    # Seen in the benchmark: the sync that completed a job removed its pods' finalizers,
    # and the next one, its cache still showing them, removed them again.
    sim = Sim(JobSpec(completions=2, parallelism=2))
    sim.sync()
    sim.succeed(2)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"
    uid = next(iter(sim.pods))
    sim.pods[uid] = replace(sim.pods[uid], has_finalizer=True)  # the cache lags the patch
    sim.runtime.pods.expectations.expect_finalizer_removed(uid, sim.now.timestamp())
    mark = len(sim.api.calls)
    sim.sync()
    assert [call.method for call in sim.api.calls[mark:]] == []


# ----------------------------------------------------------------------------- back-off
def test_recreation_waits_10s_then_20s_and_the_record_is_in_status() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=6))
    sim.sync()
    sim.fail(1)
    sim.sync()
    assert sim.status.failures_since_success == 1
    assert sim.status.last_failure_time == T0
    assert sim.active() == []
    assert sim.last_plan is not None and sim.last_plan.requeue_after == pytest.approx(10)
    sim.advance(9)
    sim.sync()
    assert sim.active() == []
    sim.advance(1)
    sim.sync()
    assert len(sim.active()) == 1
    sim.fail(1)
    sim.sync()
    assert sim.status.failures_since_success == 2
    sim.advance(19)
    sim.sync()
    assert sim.active() == []
    sim.advance(1)
    sim.sync()
    assert len(sim.active()) == 1


def test_back_off_survives_an_operator_restart() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, backoff_limit=6))
    sim.sync()
    sim.fail(1)
    sim.sync()
    # A new process knows only the stored status and the pods.
    fresh = Sim(sim.spec, now=sim.now + timedelta(seconds=5))
    fresh.job = sim.job
    fresh.pods = dict(sim.pods)
    fresh.created = list(sim.created)
    fresh.sync()
    assert fresh.active() == []
    assert fresh.last_plan is not None and fresh.last_plan.requeue_after == pytest.approx(5)


def test_a_success_resets_the_back_off() -> None:
    sim = Sim(JobSpec(completions=3, parallelism=2, backoff_limit=6))
    sim.sync()
    sim.fail(1)
    sim.sync()
    assert sim.status.failures_since_success == 1
    sim.advance(1)
    sim.succeed(1)
    sim.sync()
    assert sim.status.failures_since_success == 0
    assert len(sim.active()) == 2


# ----------------------------------------------------------------------------- API rejections, TTL
def test_rejected_pod_template_gives_condition_and_event_then_recovers() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1))
    sim.create_error = 'Pod "job-" is invalid: spec.containers[0].image: Required value'
    sim.sync()
    assert sim.condition(c.COND_POD_CREATION_FAILED) == "True"
    assert sim.status.active == 0
    assert any(
        e.reason == "FailedCreate" and e.type == "Warning" and "Required value" in e.message
        for e in sim.events
    )
    sim.create_error = None
    sim.advance(1)  # the shell retries a rejected creation after 1 s
    sim.sync()
    assert sim.condition(c.COND_POD_CREATION_FAILED) == "False"
    assert sim.status.active == 1


def test_ttl_after_finished_deletes_the_job() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1, ttl_seconds_after_finished=5))
    sim.sync()
    sim.succeed(1)
    done = sim.settle()
    assert done.requeue_after == pytest.approx(5)
    assert not sim.job_deleted
    sim.advance(5)
    assert sim.sync().delete_job


def test_running_job_says_when_its_duration_changes() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1))
    sim.sync()
    sim.advance(0.25)
    done = sim.sync()
    assert done.refresh_after == pytest.approx(0.75)
    assert done.requeue_after is None
    assert sim.status.duration_text == "0s"
