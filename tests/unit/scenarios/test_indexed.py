"""Indexed jobs, podReplacementPolicy and successPolicy through the real sync (Sim).

The first tables port upstream's cases (pkg/controller/job/job_controller_test.go at
Kubernetes v1.37.2), each under its upstream name: one sync of a job whose pods are
already there, then the pods created and deleted, the finalizers removed and the status.
1.37 removed the gates these cases once ran with off (JobPodReplacementPolicy,
JobSuccessPolicy: terminal conditions wait for terminating pods and follow
SuccessCriteriaMet/FailureTarget); where a case still differs, the comment says why.
The scenarios after them are this project's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.index_templates import COMPLETION_INDEX_ENV_NAME
from paralleljob.core.job.kind import PARALLELJOB
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    POD_REPLACEMENT_TERMINATING_OR_FAILED,
    Condition,
    JobSpec,
    JobStatus,
    SuccessPolicy,
    SuccessPolicyRule,
    parse_spec,
)
from paralleljob.core.job.pod_failure_policy import (
    OnPodConditionsPattern,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.core.job.success_policy import REASON_SUCCESS_POLICY

from ..fake_api import Crash
from ..sim import CRASH_POINTS, T0, Sim

S, F, P, R = c.SUCCEEDED, c.FAILED, c.PENDING, c.RUNNING
MAX_INT32 = 2**31 - 1
SCM, COMPLETE, TARGET, FAILED = (
    c.COND_SUCCESS_CRITERIA_MET,
    c.COND_COMPLETE,
    c.COND_FAILURE_TARGET,
    c.COND_FAILED,
)
REACHED = (c.REASON_COMPLETIONS_REACHED, c.MSG_COMPLETIONS_REACHED)
BACKOFF = (c.REASON_BACKOFF_LIMIT, c.MSG_BACKOFF_LIMIT)
MATCHED_0 = (REASON_SUCCESS_POLICY, "Matched rules at index 0")
POD_FAILURE_MESSAGE = (
    "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0"
)

COMPLETION_INDEX_ANNOTATION = PARALLELJOB.completion_index_key
COMPLETION_INDEX_LABEL = PARALLELJOB.completion_index_key

CREATE, DELETE, RELEASE = "create_pod", "delete_pod", "remove_pod_finalizer"


def indexed(parallelism: int, completions: int, backoff_limit: int = 6, **more: Any) -> JobSpec:
    """newJob(parallelism, completions, backoffLimit, batch.IndexedCompletion)."""
    return JobSpec(
        parallelism=parallelism,
        completions=completions,
        backoff_limit=backoff_limit,
        completion_mode=INDEXED_COMPLETION,
        **more,
    )


def policy(indexes: str | None = None, count: int | None = None) -> SuccessPolicy:
    """A successPolicy of one rule."""
    return SuccessPolicy(rules=(SuccessPolicyRule(indexes, count),))


def conditions(sim: Sim) -> list[tuple[str, str, str, str]]:
    """The job's conditions as upstream compares them (no times)."""
    return [(x.type, x.status, x.reason, x.message) for x in sim.status.conditions]


def true(ctype: str, reason_message: tuple[str, str]) -> tuple[str, str, str, str]:
    return (ctype, "True", *reason_message)


# ------------------------------------------------------------------- TestControllerSyncJob
@dataclass(frozen=True)
class SyncCase:
    """A TestControllerSyncJob case: the job, its pods (setPodsStatuses: pods without an
    index; setPodsStatusesWithIndexes: (index, phase), "invalid" not parsing), one sync."""

    spec: JobSpec
    pending: int = 0
    active: int = 0
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    with_indexes: tuple[tuple[str, str], ...] = ()
    status: JobStatus | None = None
    # What the sync did, and the status it left.
    creations: int = 0
    created_indexes: tuple[int, ...] = ()
    deletions: int = 0
    pod_patches: int = 0
    want_active: int = 0
    want_ready: int = 0
    want_succeeded: int = 0
    want_completed: str = ""
    want_failed: int = 0
    want_terminating: int = 0
    want_conditions: tuple[tuple[str, str, str, str], ...] = ()


def _add_pods(sim: Sim, case: SyncCase) -> None:
    for _ in range(case.pending):
        sim.add_pod(P)
    for i in range(case.active):
        sim.add_pod(R, ready=i < case.ready)
    for _ in range(case.succeeded):
        sim.add_pod(S)
    for _ in range(case.failed):
        sim.add_pod(F)
    for _ in range(case.terminating):
        sim.add_pod(R, deleting=True)
    for index, phase in case.with_indexes:
        sim.add_pod(phase, index)


SYNC_CASES = [
    pytest.param(
        SyncCase(
            indexed(2, 5),
            creations=2,
            created_indexes=(0, 1),
            want_active=2,
        ),
        id="indexed job start",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 5, pod_replacement_policy=POD_REPLACEMENT_FAILED),
            terminating=1,
            creations=1,
            created_indexes=(0,),
            want_active=1,
            want_terminating=1,
        ),
        id="indexed job with some pods deleted, podReplacementPolicy Failed",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 5, pod_replacement_policy=POD_REPLACEMENT_TERMINATING_OR_FAILED),
            terminating=1,
            creations=2,
            created_indexes=(0, 1),
            pod_patches=1,
            want_active=2,
            want_terminating=1,
        ),
        id="indexed job with some pods deleted, podReplacementPolicy TerminatingOrFailed",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 3),
            with_indexes=(("0", S), ("1", F), ("1", S), ("2", S)),
            pod_patches=4,
            want_succeeded=3,
            want_completed="0-2",
            want_failed=1,
            # Gates on: SuccessCriteriaMet first, then Complete (upstream's case: Complete).
            want_conditions=(true(SCM, REACHED), true(COMPLETE, REACHED)),
        ),
        id="indexed job completed",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 3, backoff_limit=0),
            with_indexes=(("0", S), ("1", F), ("2", R)),
            deletions=1,
            pod_patches=3,
            want_succeeded=1,
            want_completed="0",
            want_failed=2,
            want_terminating=1,
            want_conditions=(true(TARGET, BACKOFF),),
        ),
        # Also "backoff limit exceeded; JobManagedBy enabled" (the same job and pods).
        id="count terminating pods when indexed job fails and PodReplacementPolicy enabled",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 3),
            with_indexes=(("0", S), ("1", S), ("1", S)),
            creations=1,
            created_indexes=(2,),
            pod_patches=3,
            want_active=1,
            want_succeeded=2,
            want_completed="0,1",
        ),
        id="indexed job repeated completed index",
    ),
    pytest.param(
        SyncCase(
            indexed(8, 20),
            with_indexes=(
                ("0", R),
                ("2", S),
                ("3", P),
                ("4", S),
                ("5", S),
                ("7", S),
                ("8", S),
                ("9", S),
            ),
            creations=6,
            created_indexes=(1, 6, 10, 11, 12, 13),
            pod_patches=6,
            want_active=8,
            want_succeeded=6,
            want_completed="2,4,5,7-9",
        ),
        id="indexed job some running and completed pods",
    ),
    pytest.param(
        SyncCase(
            indexed(3, 4),
            with_indexes=(("0", F), ("1", P), ("2", F)),
            creations=2,
            created_indexes=(0, 2),
            pod_patches=2,
            want_active=3,
            want_failed=2,
        ),
        id="indexed job some failed pods",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 5),
            active=1,
            succeeded=1,
            failed=1,
            with_indexes=(
                ("invalid", R),
                ("invalid", S),
                ("invalid", F),
                ("invalid", P),
                ("0", S),
                ("1", R),
                ("2", R),
            ),
            deletions=3,
            pod_patches=8,
            want_active=2,
            want_succeeded=1,
            want_completed="0",
            want_terminating=3,  # gates on (upstream's case, gate off: nil)
        ),
        id="indexed job some pods without index",
    ),
    pytest.param(
        SyncCase(
            indexed(5, 5),
            succeeded=1,
            failed=1,
            with_indexes=(("invalid", R), ("0", S), ("1", R), ("2", R), ("2", P)),
            deletions=2,
            pod_patches=5,
            want_active=2,
            want_succeeded=1,
            want_completed="0",
            want_terminating=2,  # gates on (upstream's case, gate off: nil)
        ),
        id="indexed job repeated indexes",
    ),
    pytest.param(
        SyncCase(
            indexed(2, 5),
            with_indexes=(("0", S), ("5", R), ("6", S), ("7", P), ("8", F)),
            deletions=2,  # only one of creations and deletions can happen in a sync
            pod_patches=5,
            want_succeeded=1,
            want_completed="0",
            want_terminating=2,  # gates on (upstream's case, gate off: nil)
        ),
        id="indexed job with indexes outside of range",
    ),
    pytest.param(
        SyncCase(
            JobSpec(parallelism=1, completions=None, pod_replacement_policy=POD_REPLACEMENT_FAILED),
            active=1,
            failed=1,
            terminating=1,
            pod_patches=1,  # the failed pod's; the terminating one is not failed yet
            want_active=1,
            want_failed=1,
            want_terminating=1,
        ),
        id="WQ job: recreate pods when failed",
    ),
    pytest.param(
        SyncCase(
            JobSpec(parallelism=1, completions=1),
            active=1,
            failed=1,
            terminating=1,
            pod_patches=2,
            want_active=1,
            want_failed=2,
            want_terminating=1,
        ),
        id="WQ job: turn on PodReplacementPolicy but not set PodReplacementPolicy",
    ),
    pytest.param(
        SyncCase(
            JobSpec(
                parallelism=1,
                completions=None,
                pod_replacement_policy=POD_REPLACEMENT_TERMINATING_OR_FAILED,
            ),
            active=1,
            failed=1,
            terminating=1,
            pod_patches=2,
            want_active=1,
            want_failed=2,
            want_terminating=1,
        ),
        id="WQ job: recreate pods when terminating or failed",
    ),
    pytest.param(
        SyncCase(
            JobSpec(parallelism=1, completions=1, pod_replacement_policy=POD_REPLACEMENT_FAILED),
            active=2,
            terminating=4,
            deletions=1,
            pod_patches=1,
            want_active=1,
            want_terminating=5,
        ),
        id="more terminating pods than parallelism",
    ),
    pytest.param(
        SyncCase(
            # An empty podFailurePolicy, with the podReplacementPolicy the API
            # defaults it to (upstream's case sets it since 1.37).
            JobSpec(
                parallelism=1,
                completions=1,
                pod_failure_policy=PodFailurePolicy(),
                pod_replacement_policy=POD_REPLACEMENT_FAILED,
            ),
            active=2,
            terminating=4,
            deletions=1,
            pod_patches=1,
            want_active=1,
            want_terminating=5,
        ),
        id="more terminating pods than parallelism; PodFailurePolicy used",
    ),
    pytest.param(
        SyncCase(
            JobSpec(parallelism=2, completions=5),
            active=3,
            deletions=1,
            pod_patches=1,
            want_active=2,
            want_terminating=1,
        ),
        id="too many active pods; PodReplacementPolicy enabled",
    ),
    pytest.param(
        SyncCase(
            JobSpec(parallelism=1, completions=1),
            active=1,
            ready=1,
            status=JobStatus(
                active=1,
                start_time=T0,
                conditions=(Condition(SCM, "False", "ConditionAddedManually", "Testing"),),
            ),
            want_active=1,
            want_ready=1,
            want_conditions=((SCM, "False", "ConditionAddedManually", "Testing"),),
        ),
        id="SuccessCriteriaMet=False condition added manually is ignored",
    ),
]


@pytest.mark.parametrize("case", SYNC_CASES)
def test_controller_sync_job(case: SyncCase) -> None:
    """TestControllerSyncJob: the Indexed, podReplacementPolicy and successPolicy cases."""
    sim = Sim(case.spec)
    if case.status is not None:
        sim.job = replace(sim.job, status=case.status)
    _add_pods(sim, case)
    mark = len(sim.api.calls)
    sim.sync()
    calls = sim.api.calls[mark:]
    methods = [call.method for call in calls]
    assert methods.count(CREATE) == case.creations
    assert sorted(sim.created_indexes()) == list(case.created_indexes)
    assert methods.count(DELETE) == case.deletions
    assert methods.count(RELEASE) == case.pod_patches
    status = sim.status
    assert (status.active, status.ready, status.terminating) == (
        case.want_active,
        case.want_ready,
        case.want_terminating,
    )
    assert (status.succeeded, status.completed_indexes, status.failed) == (
        case.want_succeeded,
        case.want_completed,
        case.want_failed,
    )
    assert tuple(conditions(sim)) == case.want_conditions
    assert status.start_time is not None
    for call in calls:
        if call.method == CREATE and case.spec.indexed:
            assert call.body is not None
            _check_indexed_pod(call.body)


def _check_indexed_pod(pod: dict[str, Any]) -> None:
    """checkIndexedJobPods: the index's annotation and label, the env variable read from
    the label, the hostname and the generateName."""
    meta, spec = pod["metadata"], pod["spec"]
    index = int(meta["annotations"][COMPLETION_INDEX_ANNOTATION])
    assert meta["labels"][COMPLETION_INDEX_LABEL] == str(index)
    assert spec["hostname"] == f"job-{index}"
    assert meta["generateName"] == f"job-{index}-"
    for container in spec["containers"]:
        [env] = [e for e in container["env"] if e["name"] == COMPLETION_INDEX_ENV_NAME]
        path = env["valueFrom"]["fieldRef"]["fieldPath"]
        assert path == f"metadata.labels['{COMPLETION_INDEX_LABEL}']"


# ------------------------------------------------------------- TestSyncJobWithJobSuccessPolicy
RULE_0_1 = policy("0,1", 1)
_SCM_0 = Condition(SCM, "True", *MATCHED_0)


@dataclass(frozen=True)
class PolicyCase:
    spec: JobSpec
    #: (uid, index, phase, has the tracking finalizer)
    pods: tuple[tuple[str, int, str, bool], ...]
    want: JobStatus
    want_conditions: tuple[tuple[str, str, str, str], ...]
    status: JobStatus = field(default_factory=JobStatus)
    #: (uid, the index's failure count annotation) of pods that have one.
    failure_counts: tuple[tuple[str, int], ...] = ()
    #: Failed pods with the DisruptionTarget condition.
    disrupted: tuple[str, ...] = ()


_FAIL_JOB_ON_DISRUPTION = PodFailurePolicy(
    rules=(
        PodFailurePolicyRule(
            "FailJob", on_pod_conditions=(OnPodConditionsPattern("DisruptionTarget"),)
        ),
    )
)
_NS_POD_FAILURE_MESSAGE = (
    "Pod ns/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0"
)
FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")

POLICY_CASES = [
    pytest.param(
        PolicyCase(
            indexed(3, 3, MAX_INT32, success_policy=RULE_0_1),
            (("a1", 0, F, True), ("a2", 0, R, True), ("b", 1, S, True), ("c", 2, R, True)),
            JobStatus(failed=1, succeeded=1, terminating=2, completed_indexes="1"),
            (true(SCM, MATCHED_0),),
        ),
        id="job with successPolicy; jobPodReplacementPolicy feature enabled; job has "
        "SuccessCriteriaMet condition if job meets to successPolicy and some indexes fail",
    ),
    pytest.param(
        PolicyCase(
            # Upstream runs this case with the JobBackoffLimitPerIndex gate off; on, the
            # job also has failedIndexes "".
            indexed(2, 2, MAX_INT32, backoff_limit_per_index=2, success_policy=RULE_0_1),
            (("a", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1", failed_indexes=""),
            (true(SCM, MATCHED_0), true(COMPLETE, MATCHED_0)),
            status=JobStatus(conditions=(_SCM_0,)),
        ),
        id="job with successPolicy; jobPodReplacementPolicy feature enabled; job has both "
        "Complete and SuccessCriteriaMet condition when job meets to successPolicy and all "
        "pods have been already removed",
    ),
    pytest.param(
        PolicyCase(
            # Upstream runs this case with the JobBackoffLimitPerIndex gate off (see above).
            indexed(3, 3, MAX_INT32, backoff_limit_per_index=3, success_policy=RULE_0_1),
            (("a1", 0, F, True), ("a2", 1, R, True), ("b", 1, S, True), ("c", 2, R, True)),
            JobStatus(
                failed=1, succeeded=1, terminating=2, completed_indexes="1", failed_indexes=""
            ),
            (true(SCM, MATCHED_0),),
            status=JobStatus(conditions=(_SCM_0,)),
        ),
        id="job with successPolicy; jobPodReplacementPolicy feature enabled; job has "
        "SuccessCriteriaMet condition when job meets to successPolicy and some pods still "
        "are running",
    ),
    pytest.param(
        PolicyCase(
            indexed(2, 2, 1, success_policy=RULE_0_1),
            (("a1", 0, F, True), ("a2", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=2, succeeded=1, completed_indexes="1"),
            (true(TARGET, BACKOFF), true(FAILED, BACKOFF)),
        ),
        id="job with successPolicy and backoffLimit; jobPodReplacementPolicy feature "
        "enabled; job has a failed condition when job meets to both successPolicy and "
        "backoffLimit",
    ),
    pytest.param(
        PolicyCase(
            indexed(2, 2, 1, success_policy=RULE_0_1),
            (("a", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1"),
            (true(SCM, MATCHED_0), true(COMPLETE, MATCHED_0)),
            status=JobStatus(succeeded=1, completed_indexes="1", conditions=(_SCM_0,)),
        ),
        id="job with successPolicy and backoffLimit; jobPodReplacementPolicy feature "
        "enabled; job with SuccessCriteriaMet has never been transitioned to FailureTarget "
        "and Failed even if job meets backoffLimit",
    ),
    pytest.param(
        PolicyCase(
            indexed(
                2,
                2,
                MAX_INT32,
                success_policy=RULE_0_1,
                pod_failure_policy=PodFailurePolicy(
                    rules=(
                        PodFailurePolicyRule(
                            "FailJob",
                            on_pod_conditions=(OnPodConditionsPattern("DisruptionTarget"),),
                        ),
                    )
                ),
            ),
            (("a", 0, F, False), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1"),
            (
                (TARGET, "True", "PodFailurePolicy", POD_FAILURE_MESSAGE),
                (FAILED, "True", "PodFailurePolicy", POD_FAILURE_MESSAGE),
            ),
            status=JobStatus(
                failed=1,
                completed_indexes="1",
                conditions=(Condition(TARGET, "True", "PodFailurePolicy", POD_FAILURE_MESSAGE),),
            ),
        ),
        id="job with successPolicy and podFailureTarget; jobPodReplacementPolicy feature "
        "enabled; job with FailureTarget has never been transitioned to SuccessCriteriaMet "
        "even if job meets successPolicy",
    ),
    pytest.param(
        PolicyCase(
            indexed(
                2, 2, MAX_INT32, success_policy=RULE_0_1, pod_failure_policy=_FAIL_JOB_ON_DISRUPTION
            ),
            (("a1", 0, F, True), ("a2", 0, R, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, terminating=1, completed_indexes="1"),
            (true(SCM, MATCHED_0),),
        ),
        id="job with podFailurePolicy and successPolicy; jobPodReplacementPolicy feature "
        "enabled; job has SuccessCriteriaMet condition if job meets to successPolicy and "
        "doesn't meet to podFailurePolicy",
    ),
    pytest.param(
        PolicyCase(
            indexed(2, 2, MAX_INT32, backoff_limit_per_index=2, success_policy=RULE_0_1),
            (("a1", 0, F, True), ("a2", 0, R, True), ("b", 1, S, True)),
            JobStatus(
                failed=1, succeeded=1, terminating=1, completed_indexes="1", failed_indexes=""
            ),
            (true(SCM, MATCHED_0),),
        ),
        id="job with backoffLimitPerIndex and successPolicy; jobPodReplacementPolicy feature "
        "enabled; job has SuccessCriteriaMet condition if job meets to successPolicy and "
        "doesn't meet backoffLimitPerIndex",
    ),
    pytest.param(
        PolicyCase(
            indexed(
                2, 2, MAX_INT32, success_policy=RULE_0_1, pod_failure_policy=_FAIL_JOB_ON_DISRUPTION
            ),
            (("a1", 0, F, True), ("a2", 0, R, True), ("b", 1, S, True)),
            JobStatus(failed=2, succeeded=1, terminating=1, completed_indexes="1"),
            ((TARGET, "True", "PodFailurePolicy", _NS_POD_FAILURE_MESSAGE),),
            disrupted=("a1",),
        ),
        id="job with successPolicy and podFailurePolicy; jobPodReplacementPolicy feature "
        "enabled; job has a failed condition when job meets to both successPolicy and "
        "podFailurePolicy",
    ),
    pytest.param(
        PolicyCase(
            indexed(2, 2, MAX_INT32, backoff_limit_per_index=1, success_policy=RULE_0_1),
            (("a", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1", failed_indexes="0"),
            (true(TARGET, FAILED_INDEXES), true(FAILED, FAILED_INDEXES)),
            failure_counts=(("a", 1),),
        ),
        id="job with successPolicy and backoffLimitPerIndex; jobPodReplacementPolicy feature "
        "enabled; job has a failed condition when job meets to both successPolicy and "
        "backoffLimitPerIndex",
    ),
    pytest.param(
        PolicyCase(
            indexed(
                2,
                2,
                MAX_INT32,
                success_policy=policy(count=1),
                pod_failure_policy=_FAIL_JOB_ON_DISRUPTION,
            ),
            (("a", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1"),
            (true(SCM, MATCHED_0), true(COMPLETE, MATCHED_0)),
            status=JobStatus(succeeded=1, completed_indexes="1", conditions=(_SCM_0,)),
            disrupted=("a",),
        ),
        id="job with successPolicy and podFailurePolicy; jobPodReplacementPolicy feature "
        "enabled; job with SuccessCriteriaMet has never been transitioned to FailureTarget "
        "and Failed even if job meets podFailurePolicy",
    ),
    pytest.param(
        PolicyCase(
            indexed(2, 2, MAX_INT32, backoff_limit_per_index=1, success_policy=policy("1")),
            (("a", 0, F, True), ("b", 1, S, True)),
            JobStatus(failed=1, succeeded=1, completed_indexes="1", failed_indexes="0"),
            (true(SCM, MATCHED_0), true(COMPLETE, MATCHED_0)),
            status=JobStatus(succeeded=1, completed_indexes="1", conditions=(_SCM_0,)),
            failure_counts=(("a", 1),),
        ),
        id="job with successPolicy and backoffLimitPerIndex; jobPodReplacementPolicy feature "
        "enabled; job with SuccessCriteriaMet has never been transitioned to FailureTarget "
        "and Failed even if job meet backoffLimitPerIndex",
    ),
    pytest.param(
        PolicyCase(
            indexed(1, 1, MAX_INT32),
            (("a1", 0, S, True),),
            JobStatus(succeeded=1, completed_indexes="0"),
            (true(SCM, REACHED), true(COMPLETE, REACHED)),
        ),
        id="job without successPolicy; jobSuccessPolicy is enabled; job got "
        "SuccessCriteriaMet and Completion with CompletionsReached reason conditions",
    ),
]


@pytest.mark.parametrize("case", POLICY_CASES)
def test_sync_job_with_job_success_policy(case: PolicyCase) -> None:
    """TestSyncJobWithJobSuccessPolicy (the cases with every gate on; "when the
    JobSuccessPolicy is disabled" has no counterpart, the gate being locked on)."""
    sim = Sim(case.spec)
    sim.job = replace(sim.job, status=case.status)
    counts = dict(case.failure_counts)
    for i, (uid, index, phase, finalizer) in enumerate(case.pods):
        sim.add_pod(
            phase,
            index,
            uid=uid,
            name=f"mypod-{i}",
            finalizer=finalizer,
            failure_count=counts.get(uid),
            conditions=("DisruptionTarget",) if uid in case.disrupted else (),
        )
    sim.sync()
    status = sim.status
    got = (status.active, status.failed, status.succeeded, status.terminating)
    want = case.want
    assert got == (want.active, want.failed, want.succeeded, want.terminating)
    assert (status.completed_indexes, status.failed_indexes) == (
        want.completed_indexes,
        want.failed_indexes,
    )
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())
    assert tuple(conditions(sim)) == case.want_conditions


# --------------------------------------------------------------------------- scenarios
def test_indexed_job_of_5_with_parallelism_2_completes_with_one_pod_per_index() -> None:
    sim = Sim(indexed(2, 5))
    sim.sync()
    assert sim.indexes() == [0, 1]
    assert sim.status.completions_text == "0/5"
    sim.run()
    sim.finish_index(1, S)
    sim.sync()
    assert sim.indexes() == [0, 2], "the lowest pending index"
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("1", 1)
    for _ in range(5):
        if sim.condition(COMPLETE) == "True":
            break
        sim.run()
        sim.succeed(len(sim.active()))
        sim.settle()
    status = sim.status
    assert status.completed_indexes == "0-4"
    assert (status.succeeded, status.failed, status.active) == (5, 0, 0)
    assert sorted(sim.created_indexes()) == [0, 1, 2, 3, 4], "one pod per index"
    assert sim.max_active == 2
    assert conditions(sim) == [true(SCM, REACHED), true(COMPLETE, REACHED)]
    assert (status.status_text, status.completions_text) == ("Complete", "5/5")
    assert sim.with_finalizer() == []
    pods = {p.completion_index: p.name for p in sim.pods.values()}
    assert all(name.startswith(f"job-{ix}-") for ix, name in pods.items())


def test_a_failed_index_is_retried_with_the_same_index_after_the_back_off() -> None:
    sim = Sim(indexed(3, 3))
    sim.sync()
    sim.run()
    sim.finish_index(1, F)
    sim.sync()
    assert sim.status.failed == 1
    assert sim.indexes() == [0, 2], "the back-off holds the replacement"
    sim.advance(10)
    sim.sync()
    assert sim.indexes() == [0, 1, 2]
    assert sim.created_indexes() == [0, 1, 2, 1]


def _crash_cases() -> list[Any]:
    cases = []
    for where in CRASH_POINTS:
        # Succeeded indexes are counted in status write 1: no write 2 to crash at.
        for phase in (S, F) if where != "before-status-2" else (F,):
            cases.append(pytest.param(where, phase, id=f"{where}-{phase}"))
    return cases


@pytest.mark.parametrize(("where", "phase"), _crash_cases())
def test_a_crash_between_any_two_steps_counts_each_index_once(where: str, phase: str) -> None:
    sim = Sim(indexed(3, 3))
    sim.sync()
    sim.finish_index(0, phase)
    sim.finish_index(2, phase)
    sim.crash_at = where
    with pytest.raises(Crash):
        sim.sync()
    sim.restart_operator()
    sim.sync()
    sim.sync()
    status = sim.status
    if phase == S:
        assert (status.succeeded, status.completed_indexes, status.failed) == (2, "0,2", 0)
    else:
        assert (status.succeeded, status.completed_indexes, status.failed) == (0, "", 2)
    assert status.uncounted_failed == ()
    assert [p for p in sim.pods.values() if not p.active and p.has_finalizer] == []
    assert sim.indexes() == [1]
    assert len(sim.created) == 3, "no index got a second pod"


def test_a_crash_after_recording_the_indexes_does_not_count_them_again() -> None:
    sim = Sim(indexed(2, 2))
    sim.sync()
    sim.succeed(2)
    sim.crash_at = "before-finalizers"
    with pytest.raises(Crash):
        sim.sync()
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("0,1", 2)
    assert len(sim.with_finalizer()) == 2
    sim.settle()
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("0,1", 2)
    assert sim.condition(COMPLETE) == "True"
    assert sim.with_finalizer() == []


def test_duplicate_and_out_of_range_index_pods_are_removed_and_never_counted() -> None:
    sim = Sim(indexed(3, 3, backoff_limit=0))
    sim.sync()
    sim.run()
    dup = sim.add_pod(P, 1, uid="dup")
    far = sim.add_pod(R, 7, uid="far")
    none = sim.add_pod(R, "invalid", uid="none")
    sim.sync()
    plan = sim.last_plan
    assert plan is not None and plan.remove_finalizer_before_delete
    assert sorted(p.uid for p in plan.delete) == sorted([dup.uid, far.uid, none.uid])
    assert sim.indexes() == [0, 1, 2]
    assert all(not sim.pods[u].has_finalizer for u in ("dup", "far", "none"))
    sim.terminate()
    sim.reap()
    sim.settle()
    assert sim.status.failed == 0, "not failures, even with backoffLimit 0"
    assert sim.condition(TARGET) is None
    sim.succeed(3)
    sim.settle()
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("0-2", 3)
    assert sim.condition(COMPLETE) == "True"


def test_of_two_pods_with_one_index_the_one_further_along_is_kept() -> None:
    sim = Sim(indexed(2, 2))
    sim.sync()
    sim.run(ready=False)
    [first] = [p for p in sim.active() if p.completion_index == 0]
    sim.pods[first.uid] = replace(first, ready=True, ready_since=sim.now)
    sim.add_pod(R, 0, uid="newer")
    sim.sync()
    assert sim.last_plan is not None
    assert [p.uid for p in sim.last_plan.delete] == ["newer"], "not ready goes before ready"


def test_success_policy_on_index_0_deletes_the_other_pods_then_completes() -> None:
    sim = Sim(indexed(3, 3, backoff_limit=0, success_policy=policy("0")))
    sim.sync()
    sim.run()
    sim.finish_index(0, S)
    sim.sync()
    plan = sim.last_plan
    assert plan is not None and sorted(p.completion_index or 0 for p in plan.delete) == [1, 2]
    assert not plan.remove_finalizer_before_delete
    assert conditions(sim) == [true(SCM, MATCHED_0)], "Complete waits for the terminating pods"
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("0", 1)
    assert sim.status.terminating == 2
    assert sim.with_finalizer() == [], "the deleted pods' finalizers went too"
    sim.reap()
    sim.sync()
    status = sim.status
    assert conditions(sim) == [true(SCM, MATCHED_0), true(COMPLETE, MATCHED_0)]
    assert (status.succeeded, status.failed, status.active) == (1, 0, 0)
    assert status.completion_time == T0
    assert status.status_text == "Complete"
    assert any(e.reason == "Completed" for e in sim.events)
    assert len(sim.created) == 3


def test_success_policy_with_a_count_and_pods_that_failed_before() -> None:
    sim = Sim(indexed(4, 4, success_policy=policy(count=2)))
    sim.sync()
    sim.run()
    sim.finish_index(3, F)
    sim.finish_index(1, S)
    sim.sync()
    assert sim.condition(SCM) is None
    assert sim.status.failed == 1
    sim.finish_index(2, S)
    sim.sync()
    assert sim.reason(SCM) == REASON_SUCCESS_POLICY
    sim.reap()
    sim.settle()
    assert sim.reason(COMPLETE) == REASON_SUCCESS_POLICY
    assert (sim.status.completed_indexes, sim.status.failed) == ("1,2", 1)


def test_a_success_policy_on_a_non_indexed_job_is_ignored() -> None:
    sim = Sim(JobSpec(completions=2, parallelism=2, success_policy=policy("0")))
    sim.sync()
    sim.succeed(1)
    sim.sync()
    assert sim.condition(SCM) is None
    assert sim.status.completed_indexes == ""


@pytest.mark.parametrize("mode", ["NonIndexed", INDEXED_COMPLETION])
def test_pod_replacement_policy_failed_waits_for_the_deleted_pod_to_fail(mode: str) -> None:
    sim = Sim(
        JobSpec(
            completions=2,
            parallelism=1,
            completion_mode=mode,
            pod_replacement_policy=POD_REPLACEMENT_FAILED,
        )
    )
    sim.sync()
    sim.run()
    [pod] = sim.active()
    sim.user_delete(pod.uid)
    sim.advance(60)
    sim.settle()
    assert sim.active() == [], "no replacement while the pod terminates"
    assert (sim.status.terminating, sim.status.failed) == (1, 0)
    assert sim.pods[pod.uid].has_finalizer, "not failed yet: not recorded"
    sim.terminate()
    sim.sync()
    assert (sim.status.terminating, sim.status.failed) == (0, 1)
    assert not sim.pods[pod.uid].has_finalizer
    sim.advance(10)  # the pod-failure back-off
    sim.sync()
    assert len(sim.active()) == 1
    if mode == INDEXED_COMPLETION:
        assert sim.created_indexes() == [0, 0]


def test_pod_replacement_policy_terminating_or_failed_replaces_a_deleted_pod_at_once() -> None:
    sim = Sim(JobSpec(completions=2, parallelism=1))
    sim.sync()
    sim.run()
    [pod] = sim.active()
    sim.user_delete(pod.uid)
    sim.advance(60)  # no back-off left by the time the next pod starts
    sim.sync()
    assert sim.status.failed == 1
    sim.advance(10)
    sim.sync()
    assert len(sim.active()) == 1
    assert sim.pods[pod.uid].terminating, "replaced while it still terminates"


def test_a_pod_failure_policy_makes_only_failed_pods_be_replaced() -> None:
    spec = parse_spec({"completions": 1, "parallelism": 1, "podFailurePolicy": {"rules": []}})
    assert spec.pod_replacement_policy == POD_REPLACEMENT_FAILED, "SetDefaults_Job"
    sim = Sim(spec)
    sim.sync()
    [pod] = sim.active()
    sim.user_delete(pod.uid)
    sim.advance(60)
    sim.sync()
    assert sim.active() == [] and sim.status.failed == 0


def test_scale_down_of_an_indexed_job_picks_pods_as_upstream_and_recreates_those_indexes() -> None:
    sim = Sim(indexed(4, 10))
    sim.sync()
    running = [p.uid for p in sim.active() if p.completion_index in (0, 3)]
    for uid in running:
        sim.pods[uid] = replace(sim.pods[uid], phase=R, node_assigned=True)
    sim.patch_spec(parallelism=2)
    sim.sync()
    assert sim.indexes() == [0, 3], "pending before running"
    sim.reap()
    sim.settle()
    assert sim.status.failed == 0
    sim.patch_spec(parallelism=4)
    sim.sync()
    assert sim.indexes() == [0, 1, 2, 3]


def test_suspending_an_indexed_job_deletes_its_pods_and_resuming_recreates_pending_indexes() -> (
    None
):
    sim = Sim(indexed(3, 4))
    sim.sync()
    sim.run()
    sim.finish_index(1, S)
    sim.sync()
    assert sim.indexes() == [0, 2, 3]
    sim.patch_spec(suspend=True)
    sim.sync()
    assert sim.active() == []
    sim.reap()
    sim.settle()
    assert (sim.status.failed, sim.status.completed_indexes) == (0, "1")
    sim.patch_spec(suspend=False)
    sim.sync()
    assert sim.indexes() == [0, 2, 3]


def test_an_indexed_job_deleted_mid_run_counts_its_succeeded_indexes() -> None:
    sim = Sim(indexed(2, 4))
    sim.sync()
    sim.finish_index(1, S)
    sim.job = replace(sim.job, deleting=True)
    sim.sync()
    assert sim.with_finalizer() == []
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("1", 1)


def test_the_max_uncounted_cap_counts_indexes_too() -> None:
    sim = Sim(indexed(4, 4), config=CoreConfig(max_uncounted=2))
    sim.sync()
    sim.succeed(4)
    sim.sync()
    assert len([p for p in sim.pods.values() if p.has_finalizer]) == 2
    assert sim.condition(COMPLETE) is None
    sim.settle()
    assert (sim.status.completed_indexes, sim.status.succeeded) == ("0-3", 4)
    assert sim.condition(COMPLETE) == "True"


def test_a_deadline_still_requeues_an_indexed_job() -> None:
    sim = Sim(indexed(1, 2, active_deadline_seconds=30))
    done = sim.sync()
    assert done.requeue_after is not None and done.requeue_after <= 30
    sim.advance(30)
    sim.sync()
    assert sim.reason(TARGET) == c.REASON_DEADLINE
    sim.reap()
    sim.settle()
    assert sim.condition(FAILED) == "True"
    assert sim.status.failed == 1
