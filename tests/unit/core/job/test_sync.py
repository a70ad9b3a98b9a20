"""One sync of the pure core (``core/job/sync.py``), row by row as upstream tests syncJob
(job_controller_test.go at Kubernetes v1.34.4: TestControllerSyncJob and its kin): a
spec, a stored status and pods in given phases; the plan (pods to create, indexes, pods
to delete) and the status after the sync.

Each row runs the three steps on the pure functions directly, with a :class:`SyncInput`
(not through the Sim or the Controller): :func:`sync_context`, :func:`plan_pods`, then
:func:`track` as if every create and delete of the plan succeeded (a row with
``create_error`` creates none), then :func:`count_and_enact` as if every finalizer
:func:`track` asked to remove were removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.model import (
    POD_REPLACEMENT_FAILED,
    Condition,
    Job,
    JobSpec,
    JobStatus,
    PodInfo,
    SuccessPolicy,
    SuccessPolicyRule,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_FAIL_JOB,
    ACTION_IGNORE,
    OPERATOR_IN,
    REASON_POD_FAILURE_POLICY,
    ContainerStatus,
    OnExitCodes,
    PodFailureFacts,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.core.job.success_policy import REASON_SUCCESS_POLICY
from paralleljob.core.job.sync import (
    PodOutcome,
    PodPlan,
    SyncContext,
    SyncInput,
    SyncResult,
    Tracked,
    count_and_enact,
    plan_pods,
    sync_context,
    track,
)
from tests.unit.core.specs import indexed_spec
from tests.unit.sim import T0

P, R, S, F = c.PENDING, c.RUNNING, c.SUCCEEDED, c.FAILED
#: When the stored jobs started, and when their finished pods finished: long enough ago
#: that no back-off holds a creation back and no deadline runs out.
START = T0 - timedelta(seconds=30)
LONG_AGO = T0 - timedelta(hours=1)
STARTED = JobStatus(start_time=START)
#: One pod failed 2 s ago: the pod-failure back-off (10 s) holds creations for 8 s more.
BACKING_OFF = replace(
    STARTED, failed=1, failures_since_success=1, last_failure_time=T0 - timedelta(seconds=2)
)

COMPLETIONS_REACHED = c.REASON_COMPLETIONS_REACHED
BACKOFF_LIMIT = c.REASON_BACKOFF_LIMIT
#: The conditions of a job that reached its completions: SuccessCriteriaMet, Complete.
COMPLETED = (
    (c.COND_SUCCESS_CRITERIA_MET, "True", COMPLETIONS_REACHED),
    (c.COND_COMPLETE, "True", COMPLETIONS_REACHED),
)
#: Past backoffLimit: FailureTarget, then Failed.
BACKOFF_LIMIT_TARGET = (c.COND_FAILURE_TARGET, "True", BACKOFF_LIMIT)
BACKOFF_LIMIT_FAILED = (c.COND_FAILED, "True", BACKOFF_LIMIT)


def pod(
    name: str,
    phase: str = R,
    *,
    ready: bool = False,
    ready_since: datetime = LONG_AGO,
    scheduled: bool = True,
    deleting: bool = False,
    finalizer: bool = True,
    created: datetime = LONG_AGO,
    restarts: int = 0,
    index: int | None = None,
    failures: int = 0,
    exit_code: int | None = None,
) -> PodInfo:
    """A pod of the job (setPodsStatuses): a finished one finished LONG_AGO; a failed
    one's container "main" exited with ``exit_code`` (what a pod failure policy reads)."""
    finished = phase in (S, F) or deleting
    facts = None
    if exit_code is not None:
        facts = PodFailureFacts(
            "ns", name, container_statuses=(ContainerStatus("main", exit_code),)
        )
    return PodInfo(
        name,
        name,
        phase,
        deleting=deleting,
        has_finalizer=finalizer,
        ready=ready,
        ready_since=ready_since if ready else None,
        node_assigned=scheduled,
        restarts=restarts,
        max_restarts=restarts,
        created=created,
        finished_at=LONG_AGO if finished else None,
        namespace="ns",
        completion_index=index,
        index_failure_count=failures,
        failure=facts,
    )


def on_exit_code(action: str, code: int) -> PodFailurePolicy:
    """A podFailurePolicy with one rule: ``action`` when a container exits with ``code``."""
    return PodFailurePolicy(
        rules=(PodFailurePolicyRule(action, OnExitCodes(OPERATOR_IN, (code,))),)
    )


def cond(ctype: str, reason: str = "", status: str = "True") -> Condition:
    return Condition(ctype, status, reason, last_transition_time=START)


@dataclass(frozen=True)
class Run:
    """What one sync decided, step by step."""

    ctx: SyncContext
    plan: PodPlan
    tracked: Tracked
    result: SyncResult


def run_sync(inp: SyncInput, create_error: str | None = None) -> Run:
    """The three steps, every create, delete and finalizer removal succeeding (no
    creation at all with ``create_error``)."""
    ctx = sync_context(inp)
    plan = plan_pods(ctx)
    outcome = PodOutcome(
        created=0 if create_error else plan.create,
        deleted=tuple(p.uid for p in plan.delete),
        create_error=create_error,
    )
    tracked = track(ctx, plan, outcome)
    removed = [p.uid for p in tracked.remove_finalizers]
    return Run(ctx, plan, tracked, count_and_enact(ctx, tracked, removed, plan))


def job_of(spec: JobSpec, status: JobStatus = STARTED) -> Job:
    return Job("ns", "job", "uid", spec, status)


@dataclass(frozen=True)
class Row:
    """A TestControllerSyncJob row: the input, then what the sync must decide."""

    spec: JobSpec
    pods: tuple[PodInfo, ...] = ()
    status: JobStatus = STARTED
    #: False while pods created or deleted are not in the cache yet.
    satisfied: bool = True
    config: CoreConfig = field(default_factory=CoreConfig)
    create_error: str | None = None
    # The plan (step 1).
    create: int = 0
    create_indexes: tuple[int, ...] = ()
    delete: tuple[str, ...] = ()
    reason: str = ""
    requeue: float | None = None
    # The finalizers removed (step 2) and the status after the sync (step 3).
    removed: tuple[str, ...] = ()
    active: int = 0
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    completed_indexes: str = ""
    failed_indexes: str | None = None
    #: (type, status, reason) of every condition, in order.
    conditions: tuple[tuple[str, str, str], ...] = ()


ROWS = [
    # ------------------------------------------------------------- creations
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5),
            status=JobStatus(),
            create=2,
            reason="create",
            active=2,
        ),
        id="job start",
    ),
    pytest.param(
        Row(JobSpec(parallelism=2, completions=None), create=2, reason="create", active=2),
        id="WQ job start",
    ),
    pytest.param(
        Row(JobSpec(parallelism=2, completions=5), pods=(pod("p0", P), pod("p1", P)), active=2),
        id="pending pods",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5),
            pods=(pod("r0", ready=True), pod("r1")),
            active=2,
            ready=1,
        ),
        id="correct # of pods",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5),
            pods=(pod("r0"), pod("s0", S)),
            create=1,
            reason="create",
            removed=("s0",),
            active=2,
            succeeded=1,
        ),
        id="too few active pods",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2),
            pods=(pod("s0", S),),
            create=1,
            reason="create",
            removed=("s0",),
            active=1,
            succeeded=1,
        ),
        id="no more pods than completions left",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=10, completions=10),
            config=CoreConfig(max_pod_changes_per_sync=3),
            create=3,
            reason="create",
            active=3,
        ),
        id="creations limited by MaxPodCreateDeletePerSync",
    ),
    pytest.param(
        Row(JobSpec(parallelism=2, completions=5), satisfied=False),
        id="expectations not satisfied: no creations",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=5),
            status=BACKING_OFF,
            reason="backoff",
            requeue=8.0,
            failed=1,
        ),
        id="the pod-failure back-off holds creations back",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2),
            pods=(pod("r0", ready=True),),
            status=BACKING_OFF,
            reason="backoff",
            requeue=8.0,
            active=1,
            ready=1,
            failed=1,
        ),
        # kubernetes/kubernetes#139428, fixed in 1.36.3: manageJob returned 0 active
        # during the back-off, and the API server refused ready > active.
        id="too few active pods and active back-off with running pods",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1),
            create_error="exceeded quota",
            create=1,
            reason="create",
            conditions=((c.COND_POD_CREATION_FAILED, "True", "FailedCreate"),),
        ),
        id="a rejected creation: PodCreationFailed",
    ),
    # ------------------------------------------------------------ scale-down
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5),
            pods=(pod("r0"), pod("r1"), pod("r2", created=T0 - timedelta(seconds=5))),
            delete=("r2",),
            reason="scale-down",
            active=2,
            terminating=1,
        ),
        id="too many active pods: the newest goes",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=5),
            pods=(
                pod("ready-old", ready=True),
                pod("ready-new", ready=True, ready_since=T0 - timedelta(minutes=1)),
                pod("unscheduled", P, scheduled=False),
            ),
            delete=("unscheduled", "ready-new"),
            reason="scale-down",
            active=1,
            ready=1,
            terminating=2,
        ),
        id="scale-down in ActivePods order",
    ),
    # --------------------------------------------------------------- suspend
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5, suspend=True),
            pods=(pod("r0"), pod("r1", created=T0 - timedelta(seconds=5))),
            delete=("r1", "r0"),
            reason="suspend",
            terminating=2,
            conditions=((c.COND_SUSPENDED, "True", "JobSuspended"),),
        ),
        id="suspending a job deletes its active pods",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=5, suspend=True),
            status=JobStatus(),
            reason="suspend",
            conditions=((c.COND_SUSPENDED, "True", "JobSuspended"),),
        ),
        id="a job created suspended",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1),
            status=replace(STARTED, conditions=(cond(c.COND_SUSPENDED, "JobSuspended"),)),
            create=1,
            reason="create",
            active=1,
            conditions=((c.COND_SUSPENDED, "False", "JobResumed"),),
        ),
        id="resuming a job",
    ),
    # --------------------------------------------------------------- success
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=None),
            pods=(pod("s0", S), pod("r0")),
            removed=("s0",),
            active=1,
            succeeded=1,
        ),
        id="WQ job: a success stops creations, the running pod finishes",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=None),
            pods=(pod("s0", S), pod("s1", S)),
            removed=("s0", "s1"),
            succeeded=2,
            conditions=COMPLETED,
        ),
        id="WQ job finished",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2),
            pods=(pod("s0", S), pod("s1", S)),
            removed=("s0", "s1"),
            succeeded=2,
            conditions=COMPLETED,
        ),
        id="job finished: SuccessCriteriaMet, then Complete",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2, pod_replacement_policy=POD_REPLACEMENT_FAILED),
            pods=(pod("s0", S), pod("s1", S), pod("t0", deleting=True)),
            removed=("s0", "s1", "t0"),
            succeeded=2,
            terminating=1,
            conditions=(COMPLETED[0],),
        ),
        id="completions reached with a pod terminating: Complete waits",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2),
            status=replace(
                STARTED,
                succeeded=2,
                conditions=(cond(c.COND_SUCCESS_CRITERIA_MET, COMPLETIONS_REACHED),),
            ),
            reason="fail",
            succeeded=2,
            conditions=COMPLETED,
        ),
        id="a stored SuccessCriteriaMet completes once no pod terminates",
    ),
    # --------------------------------------------------------------- failure
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=5, backoff_limit=2),
            pods=(pod("f0", F), pod("f1", F)),
            create=1,
            reason="create",
            removed=("f0", "f1"),
            active=1,
            failed=2,
        ),
        id="failures within backoffLimit are replaced",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=5, backoff_limit=1),
            pods=(pod("f0", F), pod("f1", F), pod("r0")),
            delete=("r0",),
            reason="fail",
            removed=("f0", "f1", "r0"),
            terminating=1,
            failed=3,
            conditions=(BACKOFF_LIMIT_TARGET,),
        ),
        id="backoffLimit exceeded: FailureTarget, the active pod deleted and failed",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=5, backoff_limit=1),
            status=replace(
                STARTED, failed=3, conditions=(cond(c.COND_FAILURE_TARGET, BACKOFF_LIMIT),)
            ),
            reason="fail",
            failed=3,
            conditions=(BACKOFF_LIMIT_TARGET, BACKOFF_LIMIT_FAILED),
        ),
        id="a stored FailureTarget becomes Failed once no pod terminates",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1, backoff_limit=0),
            pods=(pod("f0", F),),
            reason="fail",
            removed=("f0",),
            failed=1,
            conditions=(BACKOFF_LIMIT_TARGET, BACKOFF_LIMIT_FAILED),
        ),
        id="backoffLimit 0: one failure fails the job in one sync",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1, backoff_limit=2, restart_policy="OnFailure"),
            pods=(pod("r0", restarts=2),),
            delete=("r0",),
            reason="fail",
            removed=("r0",),
            terminating=1,
            failed=1,
            conditions=(BACKOFF_LIMIT_TARGET,),
        ),
        id="restartPolicy OnFailure: container restarts reach backoffLimit",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1, active_deadline_seconds=10),
            pods=(pod("r0"),),
            delete=("r0",),
            reason="fail",
            removed=("r0",),
            terminating=1,
            failed=1,
            conditions=((c.COND_FAILURE_TARGET, "True", c.REASON_DEADLINE),),
        ),
        id="activeDeadlineSeconds exceeded",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=1, completions=1, active_deadline_seconds=60),
            pods=(pod("r0"),),
            requeue=30.0,
            active=1,
        ),
        id="activeDeadlineSeconds not yet: sync again when it runs out",
    ),
    # ------------------------------------------------------ podReplacementPolicy
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2, pod_replacement_policy=POD_REPLACEMENT_FAILED),
            pods=(pod("r0"), pod("t0", deleting=True)),
            active=1,
            terminating=1,
        ),
        id="podReplacementPolicy Failed: a terminating pod is not replaced",
    ),
    pytest.param(
        Row(
            JobSpec(parallelism=2, completions=2),
            pods=(pod("r0"), pod("t0", deleting=True)),
            create=1,
            reason="create",
            removed=("t0",),
            active=2,
            terminating=1,
            failed=1,
        ),
        id="podReplacementPolicy TerminatingOrFailed: a terminating pod failed, replaced",
    ),
    # ------------------------------------------------------ podFailurePolicy
    pytest.param(
        Row(
            JobSpec(
                parallelism=1, completions=1, pod_failure_policy=on_exit_code(ACTION_FAIL_JOB, 42)
            ),
            pods=(pod("f0", F, exit_code=42),),
            reason="fail",
            removed=("f0",),
            failed=1,
            conditions=(
                (c.COND_FAILURE_TARGET, "True", REASON_POD_FAILURE_POLICY),
                (c.COND_FAILED, "True", REASON_POD_FAILURE_POLICY),
            ),
        ),
        id="podFailurePolicy FailJob rule",
    ),
    pytest.param(
        Row(
            JobSpec(
                parallelism=1,
                completions=1,
                backoff_limit=0,
                pod_failure_policy=on_exit_code(ACTION_IGNORE, 1),
            ),
            pods=(pod("f0", F, exit_code=1),),
            create=1,
            reason="create",
            removed=("f0",),
            active=1,
        ),
        id="podFailurePolicy Ignore rule: the failure is not counted",
    ),
    # --------------------------------------------------------------- Indexed
    pytest.param(
        Row(
            indexed_spec(4, 2),
            pods=(pod("s0", S, index=0), pod("r1", index=1)),
            create=1,
            create_indexes=(2,),
            reason="create",
            removed=("s0",),
            active=2,
            succeeded=1,
            completed_indexes="0",
        ),
        id="Indexed: the lowest pending index",
    ),
    pytest.param(
        Row(
            indexed_spec(3, 3),
            pods=(
                pod("a", index=0, ready=True),
                pod("b", index=0),
                pod("c", index=1),
                pod("d", index=5),
            ),
            delete=("b", "d"),
            reason="scale-down",
            active=2,
            ready=1,
            terminating=2,
        ),
        id="Indexed: a duplicate index and one past completions go",
    ),
    pytest.param(
        Row(
            indexed_spec(5, 1),
            status=replace(STARTED, completed_indexes="0-1", succeeded=2),
            pods=(pod("s2", S, index=2), pod("s3", S, index=3)),
            create=1,
            create_indexes=(4,),
            reason="create",
            removed=("s2", "s3"),
            active=1,
            succeeded=4,
            completed_indexes="0-3",
        ),
        id="Indexed: completedIndexes from status and from new pods",
    ),
    pytest.param(
        Row(
            indexed_spec(2, 2),
            pods=(pod("s0", S, index=0), pod("x", S, index=7)),
            create=1,
            create_indexes=(1,),
            reason="create",
            removed=("s0", "x"),
            active=1,
            succeeded=1,
            completed_indexes="0",
        ),
        id="Indexed: a pod with an index past completions is released, not counted",
    ),
    pytest.param(
        Row(
            indexed_spec(2, 2),
            pods=(pod("s0", S, index=0), pod("s1", S, index=1)),
            removed=("s0", "s1"),
            succeeded=2,
            completed_indexes="0,1",
            conditions=COMPLETED,
        ),
        id="Indexed: every index succeeded",
    ),
    pytest.param(
        Row(
            indexed_spec(2, 2, backoff_limit_per_index=0),
            pods=(pod("f0", F, index=0), pod("r1", index=1)),
            reason="create",
            removed=("f0",),
            active=1,
            failed=1,
            failed_indexes="0",
        ),
        id="backoffLimitPerIndex: a failed index gets no new pod",
    ),
    pytest.param(
        Row(
            indexed_spec(1, 1, backoff_limit_per_index=1),
            pods=(pod("f0", F, index=0),),
            create=1,
            create_indexes=(0,),
            reason="create",
            active=1,
            failed_indexes="",
        ),
        id="backoffLimitPerIndex: the index's failed pod stays until its replacement exists",
    ),
    pytest.param(
        Row(
            indexed_spec(3, 3, backoff_limit_per_index=0, max_failed_indexes=0),
            pods=(pod("f0", F, index=0), pod("r1", index=1)),
            delete=("r1",),
            reason="fail",
            removed=("f0", "r1"),
            terminating=1,
            failed=2,
            failed_indexes="0",
            conditions=((c.COND_FAILURE_TARGET, "True", "MaxFailedIndexesExceeded"),),
        ),
        id="maxFailedIndexes exceeded",
    ),
    pytest.param(
        Row(
            indexed_spec(
                3, 3, success_policy=SuccessPolicy((SuccessPolicyRule(succeeded_indexes="0"),))
            ),
            pods=(pod("s0", S, index=0), pod("r1", index=1)),
            delete=("r1",),
            reason="fail",
            removed=("r1", "s0"),
            terminating=1,
            succeeded=1,
            completed_indexes="0",
            conditions=((c.COND_SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY),),
        ),
        id="successPolicy met: SuccessCriteriaMet, the other pods deleted, not failed",
    ),
]


@pytest.mark.parametrize("row", ROWS)
def test_sync_job(row: Row) -> None:
    """TestControllerSyncJob: the plan, the finalizers removed and the status written."""
    inp = SyncInput(
        job=job_of(row.spec, row.status),
        pods=row.pods,
        now=T0,
        expectations_satisfied=row.satisfied,
        config=row.config,
    )
    got = run_sync(inp, row.create_error)
    plan, status = got.plan, got.result.status
    assert (plan.create, plan.create_indexes, plan.reason) == (
        row.create,
        row.create_indexes,
        row.reason,
    )
    assert tuple(p.name for p in plan.delete) == row.delete
    assert got.result.requeue_after == row.requeue
    assert tuple(sorted(p.name for p in got.tracked.remove_finalizers)) == row.removed
    assert (status.active, status.ready, status.terminating) == (
        row.active,
        row.ready,
        row.terminating,
    )
    assert (status.succeeded, status.failed) == (row.succeeded, row.failed)
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())
    assert (status.completed_indexes, status.failed_indexes) == (
        row.completed_indexes,
        row.failed_indexes,
    )
    assert tuple((x.type, x.status, x.reason) for x in status.conditions) == row.conditions
    # As upstream's rows at 1.36: a suspended job that manageJob saw has no startTime
    # (every suspended row starts without its Suspended condition), a running one has.
    if row.satisfied:
        assert (status.start_time is None) is row.spec.suspend


# ------------------------------------------------- TestTrackJobStatusAndRemoveFinalizers
@dataclass(frozen=True)
class TrackRow:
    """Steps 2 and 3 around the finalizer removals: what status write 1 records, which
    finalizers go, and what is counted once only ``gone`` of them went."""

    pods: tuple[PodInfo, ...]
    status: JobStatus = STARTED
    spec: JobSpec = field(default_factory=lambda: JobSpec(parallelism=3, completions=3))
    expected_removed: frozenset[str] = frozenset()
    max_uncounted: int = 500
    #: The finalizers whose removal succeeded (None: all that track asked for).
    gone: tuple[str, ...] | None = None
    # Status write 1 (track).
    uncounted_succeeded: tuple[str, ...] = ()
    uncounted_failed: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()
    reached_max: bool = False
    # After counting (count_and_enact).
    succeeded: int = 0
    failed: int = 0
    left_succeeded: tuple[str, ...] = ()
    left_failed: tuple[str, ...] = ()
    complete: bool = False


TRACK_ROWS = [
    pytest.param(
        TrackRow(
            pods=(pod("s0", S), pod("f0", F), pod("r0")),
            uncounted_succeeded=("s0",),
            uncounted_failed=("f0",),
            remove=("f0", "s0"),
            succeeded=1,
            failed=1,
        ),
        id="finished pods are recorded, their finalizers removed, then counted",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S), pod("f0", F), pod("r0")),
            gone=("f0",),
            uncounted_succeeded=("s0",),
            uncounted_failed=("f0",),
            remove=("f0", "s0"),
            failed=1,
            left_succeeded=("s0",),
        ),
        id="a finalizer that did not go keeps its pod uncounted",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S),),
            status=replace(STARTED, uncounted_succeeded=("s0",)),
            uncounted_succeeded=("s0",),
            remove=("s0",),
            succeeded=1,
        ),
        id="a pod recorded by an earlier sync is not recorded twice",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("r0"),),
            status=replace(STARTED, succeeded=1, uncounted_failed=("gone",)),
            succeeded=1,
            failed=1,
        ),
        id="an uncounted pod whose finalizer is gone is counted in status write 1",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S), pod("r0")),
            status=replace(STARTED, succeeded=1),
            expected_removed=frozenset({"s0"}),
            succeeded=1,
        ),
        id="a pod whose finalizer removal is pending is not tracked again",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S, finalizer=False), pod("r0")),
            status=replace(STARTED, succeeded=1),
            succeeded=1,
        ),
        id="a pod without the finalizer was counted already",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S), pod("s1", S), pod("s2", S)),
            max_uncounted=2,
            uncounted_succeeded=("s0", "s1"),
            remove=("s0", "s1"),
            reached_max=True,
            succeeded=2,
        ),
        id="MaxUncountedPods: the rest waits, and so does Complete",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s0", S), pod("s1", S), pod("s2", S)),
            uncounted_succeeded=("s0", "s1", "s2"),
            remove=("s0", "s1", "s2"),
            succeeded=3,
            complete=True,
        ),
        id="below MaxUncountedPods the job completes in the same sync",
    ),
    pytest.param(
        TrackRow(
            pods=(pod("s2", S, index=2), pod("s0", S, index=0), pod("f1", F, index=1)),
            spec=indexed_spec(3, 3),
            uncounted_failed=("f1",),
            remove=("f1", "s0", "s2"),
            succeeded=2,
            failed=1,
        ),
        id="Indexed: succeeded pods are recorded by index, not by UID",
    ),
]


@pytest.mark.parametrize("row", TRACK_ROWS)
def test_track_job_status_and_remove_finalizers(row: TrackRow) -> None:
    """TestTrackJobStatusAndRemoveFinalizers, through track and count_and_enact."""
    inp = SyncInput(
        job=job_of(row.spec, row.status),
        pods=row.pods,
        now=T0,
        expected_removed_finalizers=row.expected_removed,
        config=CoreConfig(max_uncounted=row.max_uncounted),
    )
    ctx = sync_context(inp)
    plan = PodPlan()
    tracked = track(ctx, plan, PodOutcome())
    written = tracked.status
    assert (written.uncounted_succeeded, written.uncounted_failed) == (
        row.uncounted_succeeded,
        row.uncounted_failed,
    )
    assert tuple(sorted(p.name for p in tracked.remove_finalizers)) == row.remove
    assert tracked.reached_max_uncounted is row.reached_max
    gone = [p.uid for p in tracked.remove_finalizers] if row.gone is None else row.gone
    status = count_and_enact(ctx, tracked, gone, plan).status
    assert (status.succeeded, status.failed) == (row.succeeded, row.failed)
    assert (status.uncounted_succeeded, status.uncounted_failed) == (
        row.left_succeeded,
        row.left_failed,
    )
    complete = any(x.type == c.COND_COMPLETE for x in status.conditions)
    assert complete is row.complete


# ---------------------------------------------------------------------- the rest of a sync
def test_the_first_sync_of_a_running_job_sets_its_start_time() -> None:
    """startTime: the first sync that is not suspended, in whole seconds."""
    now = T0 + timedelta(microseconds=700)
    inp = SyncInput(job=job_of(JobSpec(), JobStatus()), pods=(), now=now)
    assert run_sync(inp).result.status.start_time == T0
    suspended = SyncInput(job=job_of(JobSpec(suspend=True), JobStatus()), pods=(), now=now)
    assert run_sync(suspended).result.status.start_time is None


def test_resuming_restarts_the_clock_of_active_deadline_seconds() -> None:
    """The job's startTime is reset when it resumes, with the Resumed event. The sync
    asks to be run again when the deadline runs out counting from the start time it
    began with (30 s ago), as upstream's queue.AddAfter comes before manageJob; the
    next sync counts from the new one."""
    status = replace(STARTED, conditions=(cond(c.COND_SUSPENDED, "JobSuspended"),))
    got = run_sync(
        SyncInput(job=job_of(JobSpec(active_deadline_seconds=60), status), pods=(), now=T0)
    )
    assert got.result.status.start_time == T0
    assert [(e.type, e.reason) for e in got.tracked.events] == [("Normal", "Resumed")]
    assert got.result.requeue_after == 30.0


def test_suspending_a_started_job_clears_its_start_time() -> None:
    """Kubernetes 1.36: the sync that sets Suspended=True clears startTime (so that
    the API server allows template edits while the job stays suspended); a later sync
    of the suspended job leaves it unset, and resuming sets it again."""
    suspending = run_sync(SyncInput(job=job_of(JobSpec(suspend=True)), pods=(), now=T0))
    suspended = suspending.result.status
    assert suspended.start_time is None
    assert [(e.type, e.reason) for e in suspending.tracked.events] == [("Normal", "Suspended")]
    again = run_sync(SyncInput(job=job_of(JobSpec(suspend=True), suspended), pods=(), now=T0))
    assert again.result.status.start_time is None
    assert again.tracked.events == ()
    later = T0 + timedelta(minutes=5)
    resumed = run_sync(SyncInput(job=job_of(JobSpec(), suspended), pods=(), now=later))
    assert resumed.result.status.start_time == later


def test_a_replacement_carries_the_failed_pod_of_its_index() -> None:
    """backoffLimitPerIndex: the plan names the pod whose failure counts the new one
    carries on (podsWithDelayedDeletionPerIndex)."""
    failed = pod("f0", F, index=0, failures=1)
    spec = indexed_spec(2, 2, backoff_limit_per_index=3)
    ctx = sync_context(SyncInput(job=job_of(spec), pods=(failed,), now=T0))
    plan = plan_pods(ctx)
    assert (plan.create_indexes, plan.replaced) == ((0, 1), ((0, failed),))


def test_a_verdict_waits_for_pods_not_yet_deleted() -> None:
    """The terminal condition waits until every active pod is deleted: with one delete
    that did not succeed, no FailureTarget is written yet."""
    spec = JobSpec(parallelism=2, completions=5, backoff_limit=0)
    inp = SyncInput(job=job_of(spec), pods=(pod("f0", F), pod("r0"), pod("r1")), now=T0)
    ctx = sync_context(inp)
    plan = plan_pods(ctx)
    assert [p.name for p in plan.delete] == ["r0", "r1"]
    assert plan.remove_finalizer_before_delete is False
    tracked = track(ctx, plan, PodOutcome(deleted=("r0",)))
    assert tracked.terminal_condition is None
    assert tracked.status.conditions == ()
    assert (tracked.status.active, tracked.status.terminating) == (1, 1)


def test_the_events_of_a_finished_job() -> None:
    """recordJobFinished: Completed, and TooManySucceededPods when more pods succeeded
    than completions."""
    spec = JobSpec(parallelism=2, completions=1)
    pods = (pod("s0", S), pod("s1", S))
    got = run_sync(SyncInput(job=job_of(spec), pods=pods, now=T0))
    assert [(e.type, e.reason) for e in got.result.events] == [
        ("Warning", "TooManySucceededPods"),
        ("Normal", "Completed"),
    ]
    assert got.result.status.completion_time == T0
    failed = run_sync(
        SyncInput(job=job_of(replace(spec, backoff_limit=0)), pods=(pod("f0", F),), now=T0)
    )
    assert [(e.type, e.reason) for e in failed.result.events] == [("Warning", BACKOFF_LIMIT)]


def test_a_finished_job_only_releases_leftover_finalizers() -> None:
    """syncJob returns early for a finished job: nothing is planned or counted, and the
    finalizers still on its pods go (those whose removal is pending excepted)."""
    status = replace(STARTED, succeeded=1, conditions=(cond(c.COND_COMPLETE, COMPLETIONS_REACHED),))
    pods = (pod("s0", S), pod("s1", S), pod("r0"))
    inp = SyncInput(
        job=job_of(JobSpec(), status),
        pods=pods,
        now=T0,
        expected_removed_finalizers=frozenset({"s1"}),
    )
    got = run_sync(inp)
    assert got.plan == PodPlan()
    assert [p.name for p in got.tracked.remove_finalizers] == ["s0", "r0"]
    assert (got.result.status.succeeded, got.result.status.conditions) == (1, status.conditions)


@pytest.mark.parametrize(
    ("ttl", "delete_job", "requeue"),
    [
        pytest.param(None, False, None, id="no TTL"),
        pytest.param(0, True, None, id="TTL 0"),
        pytest.param(20, True, None, id="TTL run out"),
        pytest.param(100, False, 70.0, id="TTL pending: sync again when it runs out"),
    ],
)
def test_ttl_seconds_after_finished(
    ttl: int | None, delete_job: bool, requeue: float | None
) -> None:
    """processTTL, on the status the sync writes: the job finished 30 s ago."""
    status = replace(STARTED, succeeded=1, conditions=(cond(c.COND_COMPLETE, COMPLETIONS_REACHED),))
    spec = JobSpec(ttl_seconds_after_finished=ttl)
    result = run_sync(SyncInput(job=job_of(spec, status), pods=(), now=T0)).result
    assert (result.delete_job, result.requeue_after) == (delete_job, requeue)
