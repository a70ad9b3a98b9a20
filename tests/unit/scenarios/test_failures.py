"""podFailurePolicy, backoffLimitPerIndex/maxFailedIndexes, managedBy, podFailureBackoff and
the printer text through the real sync (Sim).

The tables port upstream's cases (pkg/controller/job/job_controller_test.go at Kubernetes
v1.34.4), each under its upstream name: one sync of a job whose pods are already there.
The operator has every v1.34 gate on; upstream runs several of these cases with
JobPodReplacementPolicy or JobManagedBy off (no interim condition, no terminating count),
so where a case has a gates-on twin the twin is ported, and where it has none the comment
says what the gates change. Upstream's pods are default/mypod-<i>; the Sim's namespace is
"ns", so the messages name ns/mypod-<i>. The scenarios after the tables are this
project's own.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, replace
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.config import CoreConfig
from paralleljob.core.job.indexed import (
    MSG_FAILED_INDEXES,
    MSG_MAX_FAILED_INDEXES_EXCEEDED,
)
from paralleljob.core.job.managed_by import managed_by_external_controller
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    Condition,
    JobSpec,
    JobStatus,
    PodFailureBackoff,
    PodInfo,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_COUNT,
    ACTION_FAIL_INDEX,
    ACTION_FAIL_JOB,
    ACTION_IGNORE,
    OPERATOR_IN,
    OPERATOR_NOT_IN,
    REASON_POD_FAILURE_POLICY,
    ContainerStatus,
    OnExitCodes,
    OnPodConditionsPattern,
    PodCondition,
    PodFailureFacts,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.job_sync import SyncReport

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
FAILED_INDEXES = (c.REASON_FAILED_INDEXES, MSG_FAILED_INDEXES)
MAX_FAILED = (c.REASON_MAX_FAILED_INDEXES_EXCEEDED, MSG_MAX_FAILED_INDEXES_EXCEEDED)
DISRUPTION = "DisruptionTarget"
CREATE, DELETE, RELEASE, WRITE = (
    "create_pod",
    "delete_pod",
    "remove_pod_finalizer",
    "patch_job_status",
)


def rule(action: str, operator: str, *values: int, container: str | None = None) -> Any:
    return PodFailurePolicyRule(action, on_exit_codes=OnExitCodes(operator, values, container))


def on_condition(action: str, *types: str) -> PodFailurePolicyRule:
    patterns = tuple(OnPodConditionsPattern(t) for t in types)
    return PodFailurePolicyRule(action, on_pod_conditions=patterns)


def pfp(*rules: PodFailurePolicyRule) -> PodFailurePolicy:
    return PodFailurePolicy(rules=rules)


#: onExitCodeRules of TestSyncJobWithJobPodFailurePolicy.
ON_EXIT_CODE_RULES = pfp(
    rule(ACTION_IGNORE, OPERATOR_IN, 1, 2, 3), rule(ACTION_FAIL_JOB, OPERATOR_IN, 5, 6, 7)
)


def spec(
    parallelism: int = 1,
    completions: int | None = 1,
    backoff_limit: int = 6,
    policy: PodFailurePolicy | None = None,
    **more: Any,
) -> JobSpec:
    """newJob with a podFailurePolicy; upstream's test sets podReplacementPolicy Failed
    when unset (SetDefaults_Job does with a policy)."""
    return JobSpec(
        parallelism=parallelism,
        completions=completions,
        backoff_limit=backoff_limit,
        pod_failure_policy=policy,
        pod_replacement_policy=POD_REPLACEMENT_FAILED,
        **more,
    )


def indexed(
    parallelism: int, completions: int, backoff_limit: int = MAX_INT32, **more: Any
) -> JobSpec:
    more.setdefault("backoff_limit_per_index", 1)
    if more.get("pod_failure_policy") is not None:
        more.setdefault("pod_replacement_policy", POD_REPLACEMENT_FAILED)
    return JobSpec(
        parallelism=parallelism,
        completions=completions,
        backoff_limit=backoff_limit,
        completion_mode=INDEXED_COMPLETION,
        **more,
    )


def conditions(sim: Sim) -> tuple[tuple[str, str, str, str], ...]:
    """The job's conditions as upstream compares them (no times)."""
    return tuple((x.type, x.status, x.reason, x.message) for x in sim.status.conditions)


def true(ctype: str, reason_message: tuple[str, str]) -> tuple[str, str, str, str]:
    return (ctype, "True", *reason_message)


def by_policy(ctype: str, message: str) -> tuple[str, str, str, str]:
    return (ctype, "True", REASON_POD_FAILURE_POLICY, message)


def exit_message(container: str, pod: str, code: int, index: int) -> str:
    return (
        f"Container {container} for pod ns/{pod} failed with exit code {code} matching "
        f"FailJob rule at index {index}"
    )


# ------------------------------------------------------- TestSyncJobWithJobPodFailurePolicy
@dataclass(frozen=True)
class PodCase:
    """A pod of the job (mypod-<i>): its phase, and its containers and conditions."""

    phase: str
    containers: tuple[tuple[str, int], ...] = ()
    init_containers: tuple[tuple[str, int], ...] = ()
    conditions: tuple[str, ...] = ()
    deleting: bool = False
    #: The pod was deleted now (customDeletionTimestamp): it finished now.
    finished_now: bool = False


@dataclass(frozen=True)
class PolicyCase:
    spec: JobSpec
    pods: tuple[PodCase, ...]
    want_conditions: tuple[tuple[str, str, str, str], ...] = ()
    want_active: int = 0
    want_failed: int = 0
    want_succeeded: int = 0
    want_terminating: int = 0
    stored: tuple[Condition, ...] = ()


def _facts(pod: PodInfo, case: PodCase) -> PodFailureFacts:
    def statuses(items: tuple[tuple[str, int], ...]) -> tuple[ContainerStatus, ...]:
        return tuple(ContainerStatus(name, code) for name, code in items)

    return PodFailureFacts(
        namespace=pod.namespace,
        name=pod.name,
        init_container_statuses=statuses(case.init_containers),
        container_statuses=statuses(case.containers),
        conditions=tuple(PodCondition(t, "True") for t in case.conditions),
    )


def _add_policy_pods(sim: Sim, pods: tuple[PodCase, ...]) -> None:
    indexed_job = sim.job.spec.indexed
    for i, case in enumerate(pods):
        pod = sim.add_pod(
            case.phase,
            i if indexed_job else None,
            uid=f"uid-{i}",
            name=f"mypod-{i}",
            deleting=case.deleting,
            finished_at=sim.now if case.finished_now else None,
        )
        sim.pods[pod.uid] = replace(pod, failure=_facts(pod, case))


FAIL_5 = PodCase(F, containers=(("main-container", 5),))
TARGET_MSG = exit_message("main-container", "mypod-0", 5, 1)
POLICY_CASES = [
    pytest.param(
        PolicyCase(
            spec(
                policy=pfp(
                    rule(ACTION_IGNORE, OPERATOR_IN, 1, 2, 3, container="main-container"),
                    rule(ACTION_FAIL_JOB, OPERATOR_IN, 5, 6, 7, container="main-container"),
                )
            ),
            (PodCase(F, containers=(("monitoring-container", 5), ("main-container", 42))),),
            want_active=1,
            want_failed=1,
        ),
        id="default handling for pod failure if the container matching the exit codes does "
        "not match the containerName restriction",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES),
            (PodCase(R, containers=(("main-container", 5),)),),
            want_active=1,
        ),
        id="running pod should not result in job fail based on OnExitCodes",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES),
            (FAIL_5,),
            (by_policy(TARGET, TARGET_MSG), by_policy(FAILED, TARGET_MSG)),
            want_failed=1,
        ),
        id="fail job based on OnExitCodes",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES),
            (FAIL_5,),
            (by_policy(TARGET, TARGET_MSG), by_policy(FAILED, TARGET_MSG)),
            want_failed=1,
            stored=(Condition(TARGET, "True", REASON_POD_FAILURE_POLICY, TARGET_MSG),),
        ),
        id="job marked already as failure target with failed pod",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES),
            (FAIL_5,),
            (
                by_policy(TARGET, exit_message("main-container", "already-deleted-pod", 5, 1)),
                by_policy(FAILED, exit_message("main-container", "already-deleted-pod", 5, 1)),
            ),
            want_failed=1,
            stored=(
                Condition(
                    TARGET,
                    "True",
                    REASON_POD_FAILURE_POLICY,
                    exit_message("main-container", "already-deleted-pod", 5, 1),
                ),
            ),
        ),
        id="job marked already as failure target with failed pod, message based on already "
        "deleted pod",
    ),
    pytest.param(
        PolicyCase(
            spec(2, 2, policy=ON_EXIT_CODE_RULES),
            (PodCase(R), FAIL_5),
            (by_policy(TARGET, exit_message("main-container", "mypod-1", 5, 1)),),
            want_failed=2,
            # Gates on: the deleted pod is counted as terminating (upstream's case runs
            # with JobPodReplacementPolicy off: nil).
            want_terminating=1,
        ),
        id="fail job with multiple pods; JobManagedBy enabled delays setting terminal condition",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES, completion_mode=INDEXED_COMPLETION),
            (FAIL_5,),
            (by_policy(TARGET, TARGET_MSG), by_policy(FAILED, TARGET_MSG)),
            want_failed=1,
        ),
        id="fail indexed job based on OnExitCodes",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=pfp(rule(ACTION_FAIL_JOB, OPERATOR_NOT_IN, 5, 6, 7))),
            (PodCase(F, containers=(("main-container", 42),)),),
            (
                by_policy(TARGET, exit_message("main-container", "mypod-0", 42, 0)),
                by_policy(FAILED, exit_message("main-container", "mypod-0", 42, 0)),
            ),
            want_failed=1,
        ),
        id="fail job based on OnExitCodes with NotIn operator",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=pfp(rule(ACTION_FAIL_JOB, OPERATOR_NOT_IN, 5, 6, 7))),
            (FAIL_5,),
            want_active=1,
            want_failed=1,
        ),
        id="default handling job based on OnExitCodes with NotIn operator",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=ON_EXIT_CODE_RULES),
            (
                PodCase(
                    F,
                    containers=(("main-container", 143),),
                    init_containers=(("init-container", 5),),
                ),
            ),
            (
                by_policy(TARGET, exit_message("init-container", "mypod-0", 5, 1)),
                by_policy(FAILED, exit_message("init-container", "mypod-0", 5, 1)),
            ),
            want_failed=1,
        ),
        id="fail job based on OnExitCodes for InitContainer",
    ),
    pytest.param(
        PolicyCase(
            spec(backoff_limit=0, policy=ON_EXIT_CODE_RULES),
            (PodCase(F, containers=(("container1", 2), ("container2", 6))),),
            want_active=1,
        ),
        id="ignore pod failure; both rules are matching, the first is executed only",
    ),
    pytest.param(
        PolicyCase(
            spec(backoff_limit=0, policy=ON_EXIT_CODE_RULES),
            (PodCase(F, containers=(("", 1),)),),
            want_active=1,
        ),
        id="ignore pod failure based on OnExitCodes",
    ),
    pytest.param(
        PolicyCase(
            spec(backoff_limit=0, policy=ON_EXIT_CODE_RULES),
            (PodCase(F, containers=(("", 10),)),),
            (true(TARGET, BACKOFF), true(FAILED, BACKOFF)),
            want_failed=1,
        ),
        id="default job based on OnExitCodes; JobManagedBy enabled triggers adding interim "
        "condition",
    ),
    pytest.param(
        PolicyCase(
            spec(
                policy=pfp(
                    rule(ACTION_COUNT, OPERATOR_IN, 1, 2), rule(ACTION_IGNORE, OPERATOR_IN, 2, 3)
                )
            ),
            (PodCase(F, containers=(("", 2),)),),
            want_active=1,
            want_failed=1,
        ),
        id="count pod failure based on OnExitCodes; both rules are matching, the first is "
        "executed only",
    ),
    pytest.param(
        PolicyCase(
            spec(
                policy=pfp(
                    on_condition(ACTION_COUNT, "ResourceLimitExceeded"),
                    on_condition(ACTION_IGNORE, DISRUPTION),
                )
            ),
            (PodCase(F, conditions=("ResourceLimitExceeded", DISRUPTION)),),
            want_active=1,
            want_failed=1,
        ),
        id="count pod failure based on OnPodConditions; both rules are matching, the first "
        "is executed only",
    ),
    pytest.param(
        PolicyCase(
            spec(backoff_limit=0, policy=pfp(on_condition(ACTION_IGNORE, DISRUPTION))),
            (PodCase(F, conditions=(DISRUPTION,)),),
            want_active=1,
        ),
        id="ignore pod failure based on OnPodConditions",
    ),
    pytest.param(
        PolicyCase(
            spec(backoff_limit=0, policy=pfp(on_condition(ACTION_IGNORE, DISRUPTION))),
            (PodCase(F, conditions=(DISRUPTION,), deleting=True, finished_now=True),),
        ),
        id="ignore pod failure based on OnPodConditions, ignored failures delays pod recreation",
    ),
    pytest.param(
        PolicyCase(
            spec(policy=pfp(on_condition(ACTION_FAIL_JOB, DISRUPTION))),
            (PodCase(F, conditions=(DISRUPTION,)),),
            (
                by_policy(
                    TARGET,
                    "Pod ns/mypod-0 has condition DisruptionTarget matching "
                    "FailJob rule at index 0",
                ),
                by_policy(
                    FAILED,
                    "Pod ns/mypod-0 has condition DisruptionTarget matching "
                    "FailJob rule at index 0",
                ),
            ),
            want_failed=1,
        ),
        id="fail job based on OnPodConditions",
    ),
    pytest.param(
        PolicyCase(
            spec(1, None, 0, policy=pfp(on_condition(ACTION_COUNT, DISRUPTION))),
            (PodCase(P, deleting=True),),
            # Gates on: the pod is counted as terminating (upstream's case: nil).
            want_terminating=1,
        ),
        id="terminating Pod not considered failed when JobPodFailurePolicy is enabled and used",
    ),
]


@pytest.mark.parametrize("case", POLICY_CASES)
def test_sync_job_with_job_pod_failure_policy(case: PolicyCase) -> None:
    """TestSyncJobWithJobPodFailurePolicy."""
    sim = Sim(case.spec)
    sim.job = replace(sim.job, status=JobStatus(conditions=case.stored))
    _add_policy_pods(sim, case.pods)
    sim.sync()
    status = sim.status
    assert conditions(sim) == case.want_conditions
    got = (status.active, status.failed, status.succeeded, status.terminating)
    want = (case.want_active, case.want_failed, case.want_succeeded, case.want_terminating)
    assert got == want
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())


# --------------------------------------------------- TestSyncJobWithJobBackoffLimitPerIndex
@dataclass(frozen=True)
class IndexPod:
    uid: str
    index: int
    phase: str
    failure_count: int = 0
    exit_code: int | None = None


@dataclass(frozen=True)
class PerIndexCase:
    spec: JobSpec
    pods: tuple[IndexPod, ...]
    want_active: int = 0
    want_failed: int = 0
    want_succeeded: int = 0
    want_terminating: int = 0
    want_completed: str = ""
    want_failed_indexes: str | None = ""
    want_conditions: tuple[tuple[str, str, str, str], ...] = ()


def _fail_job_on(code: int, action: str) -> PodFailurePolicy:
    return pfp(rule(action, OPERATOR_IN, code))


PER_INDEX_CASES = [
    pytest.param(
        PerIndexCase(
            indexed(2, 2),
            (IndexPod("a1", 0, F), IndexPod("a2", 0, S, 1), IndexPod("b", 1, S)),
            want_failed=1,
            want_succeeded=2,
            want_completed="0,1",
            want_conditions=(true(SCM, REACHED), true(COMPLETE, REACHED)),
        ),
        id="successful job after a single failure within index",
    ),
    pytest.param(
        PerIndexCase(indexed(2, 2), (IndexPod("a", 0, F),), want_active=2),
        id="single failed pod, not counted as the replacement pod creation is delayed",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2),
            (IndexPod("a", 0, F), IndexPod("b", 0, P, 1)),
            want_active=2,
            want_failed=1,
        ),
        id="single failed pod replaced already",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2),
            (IndexPod("a", 0, F, 1),),
            want_active=1,
            want_failed=1,
            want_failed_indexes="0",
        ),
        id="single failed index due to exceeding the backoff limit per index, the job continues",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2, pod_failure_policy=_fail_job_on(3, ACTION_FAIL_INDEX)),
            (IndexPod("a", 0, F, 0, 3),),
            want_active=1,
            want_failed=1,
            want_failed_indexes="0",
        ),
        id="single failed index due to FailIndex action, the job continues",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2, 6, pod_failure_policy=_fail_job_on(3, ACTION_FAIL_JOB)),
            (IndexPod("a", 0, F, 0, 3),),
            want_failed=1,
            want_conditions=(
                by_policy(TARGET, exit_message("x", "mypod-0", 3, 0)),
                by_policy(FAILED, exit_message("x", "mypod-0", 3, 0)),
            ),
        ),
        id="job failed index due to FailJob action",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2, 6, pod_failure_policy=_fail_job_on(3, ACTION_IGNORE)),
            (IndexPod("a", 0, F, 0, 3),),
            want_active=2,
        ),
        id="job pod failure ignored due to matching Ignore action",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2, 1),
            (IndexPod("a", 0, F), IndexPod("b", 1, F)),
            want_failed=2,
            want_conditions=(true(TARGET, BACKOFF), true(FAILED, BACKOFF)),
        ),
        id="job failed due to exceeding backoffLimit before backoffLimitPerIndex",
    ),
    pytest.param(
        PerIndexCase(
            indexed(2, 2),
            (IndexPod("a", 0, F, 1), IndexPod("b", 1, S)),
            want_failed=1,
            want_succeeded=1,
            want_completed="1",
            want_failed_indexes="0",
            want_conditions=(true(TARGET, FAILED_INDEXES), true(FAILED, FAILED_INDEXES)),
        ),
        # Also "job failed due to failed indexes" (the same job and pods).
        id="job failed due to failed indexes; JobManagedBy enabled",
    ),
    pytest.param(
        PerIndexCase(
            indexed(4, 4, max_failed_indexes=1),
            (
                IndexPod("a", 0, F, 1),
                IndexPod("b", 1, S),
                IndexPod("c", 2, F, 1),
                IndexPod("d", 3, R),
            ),
            want_failed=3,
            want_succeeded=1,
            want_terminating=1,
            want_completed="1",
            want_failed_indexes="0,2",
            want_conditions=(true(TARGET, MAX_FAILED),),
        ),
        # Also "job failed due to exceeding max failed indexes" (the same job and pods).
        id="job failed due to exceeding max failed indexes; JobManagedBy enabled",
    ),
]


@pytest.mark.parametrize("case", PER_INDEX_CASES)
def test_sync_job_with_job_backoff_limit_per_index(case: PerIndexCase) -> None:
    """TestSyncJobWithJobBackoffLimitPerIndex (its gates-on cases; the
    JobBackoffLimitPerIndex gate is locked on, so "failedIndexes are cleaned when
    JobBackoffLimitPerIndex disabled" has no counterpart)."""
    sim = Sim(case.spec)
    for i, pod in enumerate(case.pods):
        sim.add_pod(
            pod.phase,
            pod.index,
            uid=pod.uid,
            name=f"mypod-{i}",
            failure_count=pod.failure_count,
            exit_code=pod.exit_code,
            container="x",
        )
    sim.sync()
    status = sim.status
    got = (status.active, status.failed, status.succeeded, status.terminating)
    want = (case.want_active, case.want_failed, case.want_succeeded, case.want_terminating)
    assert got == want
    assert (status.completed_indexes, status.failed_indexes) == (
        case.want_completed,
        case.want_failed_indexes,
    )
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())
    assert conditions(sim) == case.want_conditions


def test_the_replacement_of_a_failed_index_carries_its_failure_count() -> None:
    """checkIndexedJobPods with backoffLimitPerIndex: the new pod of index 0 gets
    job-index-failure-count 1 (its predecessor's 0 plus its failure); its predecessor's
    finalizer went once it existed."""
    sim = Sim(indexed(2, 2))
    sim.add_pod(F, 0, uid="a", failure_count=0)
    sim.sync()
    [new0] = [sim.pods[u] for u in sim.created if sim.pods[u].completion_index == 0]
    assert (new0.index_failure_count, new0.index_ignored_failure_count) == (1, 0)
    [new1] = [sim.pods[u] for u in sim.created if sim.pods[u].completion_index == 1]
    assert new1.index_failure_count == 0
    assert sim.pods["a"].has_finalizer, "kept until the replacement exists"
    sim.sync()
    assert not sim.pods["a"].has_finalizer
    assert sim.status.failed == 1


def test_an_ignored_failure_is_carried_as_an_ignored_count() -> None:
    sim = Sim(indexed(1, 1, pod_failure_policy=_fail_job_on(42, ACTION_IGNORE)))
    sim.add_pod(F, 0, uid="a", failure_count=0, ignored_count=2, exit_code=42)
    sim.sync()
    [new] = [sim.pods[u] for u in sim.created]
    assert (new.index_failure_count, new.index_ignored_failure_count) == (0, 3)
    assert sim.status.failed == 0


# -------------------------------------------------------------- TestSyncJobWhenManagedBy
def _sync(sim: Sim) -> SyncReport:
    """One Controller.sync of the Sim's job, whatever it does (Sim.sync wants a result)."""
    sim.runtime.offer(copy.deepcopy(sim.api.job))
    return asyncio.run(sim.controller.syncer.sync(sim.runtime))


RUNNING_JOB = JobStatus(active=1, ready=1, start_time=T0)


@pytest.mark.parametrize(
    ("managed_by", "left_alone"),
    [
        pytest.param(
            "custom-managed-by",
            True,
            id="job with custom value of managedBy; feature enabled; the status is unchanged",
        ),
        pytest.param(
            c.MANAGED_BY,
            False,
            id="job with well known value of the managedBy; feature enabled; the status is updated",
        ),
        pytest.param(
            None, False, id="job without the managedBy; feature enabled; the status is updated"
        ),
    ],
)
def test_sync_job_when_managed_by(managed_by: str | None, left_alone: bool) -> None:
    """TestSyncJobWhenManagedBy (the JobManagedBy gate is locked on); the operator's own
    value stands for upstream's kubernetes.io/job-controller."""
    sim = Sim(JobSpec(parallelism=2, completions=2, managed_by=managed_by))
    sim.job = replace(sim.job, status=RUNNING_JOB)
    before = copy.deepcopy(sim.api.job)
    mark = len(sim.api.calls)
    report = _sync(sim)
    if left_alone:
        assert report.delay is None and report.result is None
        assert sim.api.calls[mark:] == [], "no pods, no status, no finalizers"
        assert sim.api.job == before
    else:
        status = sim.status
        assert (status.active, status.ready, status.terminating) == (2, 0, 0)
        assert status.start_time == T0


def test_a_job_managed_elsewhere_keeps_its_pods_and_finalizers_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = Sim(JobSpec(parallelism=2, completions=2, managed_by="kueue.x-k8s.io/multikueue"))
    sim.add_pod(F, uid="a")
    sim.add_pod(S, uid="b")
    sim.add_pod(R, uid="c", deleting=True)
    with caplog.at_level(logging.INFO, logger="paralleljob.jobs.job_sync"):
        for _ in range(3):
            assert _sync(sim).delay is None, "nothing to wait for"
            sim.advance(60)
    assert sim.api.calls == []
    assert sim.with_finalizer() == ["a", "b", "c"]
    logged = [r for r in caplog.records if "managed by another controller" in r.getMessage()]
    assert len(logged) == 1
    assert "kueue.x-k8s.io/multikueue" in logged[0].getMessage()


def test_a_job_managed_elsewhere_gets_no_spec_defaults_written() -> None:
    sim = Sim(JobSpec(managed_by="example.com/other"))
    del sim.api.job["spec"]["parallelism"]
    rt = JobRuntime(copy.deepcopy(sim.api.job))
    report = asyncio.run(sim.controller.syncer.sync(rt))
    assert report.delay is None and report.result is None
    assert sim.api.calls == []


@pytest.mark.parametrize(
    ("spec_json", "want"),
    [
        ({}, None),
        ({"managedBy": c.MANAGED_BY}, None),
        ({"managedBy": "kubernetes.io/job-controller"}, "kubernetes.io/job-controller"),
        ({"managedBy": "example.com/x"}, "example.com/x"),
    ],
)
def test_managed_by_external_controller(spec_json: dict[str, Any], want: str | None) -> None:
    assert c.MANAGED_BY == "paralleljob.dev/job-controller"
    assert managed_by_external_controller(spec_json) == want


# ------------------------------------------------------------------------- scenarios
#: Exit code 42 is ignored, 3 fails the job, any other exit code counts.
POLICY_42_3 = pfp(rule(ACTION_IGNORE, OPERATOR_IN, 42), rule(ACTION_FAIL_JOB, OPERATOR_IN, 3))


def test_exit_code_42_is_ignored_and_the_job_completes_with_no_failure() -> None:
    sim = Sim(spec(2, 3, backoff_limit=0, policy=POLICY_42_3))
    sim.sync()
    sim.run()
    first = sim.active()[0].uid
    sim.fail_with(first, 42)
    sim.sync()
    assert sim.status.failed == 0, "not counted, not even against backoffLimit 0"
    assert sim.condition(TARGET) is None
    assert not sim.pods[first].has_finalizer, "released all the same"
    assert len(sim.active()) == 1, "an ignored failure starts the back-off too"
    sim.advance(10)
    sim.sync()
    assert len(sim.active()) == 2, "replaced"
    for _ in range(5):
        if sim.condition(COMPLETE) == "True":
            break
        sim.run()
        sim.succeed(len(sim.active()))
        sim.settle()
    status = sim.status
    assert conditions(sim) == (true(SCM, REACHED), true(COMPLETE, REACHED))
    assert (status.succeeded, status.failed) == (3, 0)
    assert sim.with_finalizer() == []


def test_exit_code_3_fails_the_job_at_once_with_reason_pod_failure_policy() -> None:
    sim = Sim(spec(3, 3, backoff_limit=6, policy=POLICY_42_3))
    sim.sync()
    sim.run()
    pod = sim.active()[0]
    sim.fail_with(pod.uid, 3)
    sim.sync()
    message = exit_message("main", pod.name, 3, 1)
    assert conditions(sim) == (by_policy(TARGET, message),), "Failed waits for the others"
    plan = sim.last_plan
    assert plan is not None and len(plan.delete) == 2 and not plan.remove_finalizer_before_delete
    assert (sim.status.failed, sim.status.terminating) == (3, 2)
    assert sim.with_finalizer() == []
    sim.reap()
    sim.sync()
    assert conditions(sim) == (by_policy(TARGET, message), by_policy(FAILED, message))
    assert sim.status.status_text == "Failed"
    assert any(e.reason == REASON_POD_FAILURE_POLICY and e.message == message for e in sim.events)
    assert len(sim.created) == 3, "no replacement"


def test_a_count_rule_counts_against_the_backoff_limit() -> None:
    sim = Sim(spec(1, 1, backoff_limit=1, policy=pfp(rule(ACTION_COUNT, OPERATOR_IN, 9))))
    sim.sync()
    sim.fail_with(sim.active()[0].uid, 9)
    sim.sync()
    assert sim.status.failed == 1 and sim.condition(TARGET) is None
    sim.advance(10)
    sim.sync()
    sim.fail_with(sim.active()[0].uid, 9)
    sim.sync()
    assert sim.reason(FAILED) == c.REASON_BACKOFF_LIMIT
    assert sim.status.failed == 2


def test_a_job_that_fails_does_not_count_its_deleted_pods_an_ignore_rule_matches() -> None:
    """trackJobStatusAndRemoveFinalizers matches every pod of a failing job, running ones
    too: a pod being deleted (facts kept) with a DisruptionTarget condition is not counted."""
    policy = pfp(rule(ACTION_FAIL_JOB, OPERATOR_IN, 3), on_condition(ACTION_IGNORE, DISRUPTION))
    sim = Sim(spec(2, 2, policy=policy))
    sim.sync()
    sim.run()
    a, b = (p.uid for p in sim.active())
    sim.fail_with(a, 3)
    sim.pods[b] = replace(
        sim.pods[b],
        failure=PodFailureFacts(
            "ns", sim.pods[b].name, conditions=(PodCondition(DISRUPTION, "True"),)
        ),
    )
    sim.sync()
    assert sim.status.failed == 1, "the evicted pod is not a failure"
    sim.reap()
    sim.sync()
    assert sim.reason(FAILED) == REASON_POD_FAILURE_POLICY


def _policy_crash_cases() -> list[Any]:
    return [pytest.param(where, id=where) for where in CRASH_POINTS]


@pytest.mark.parametrize("where", _policy_crash_cases())
def test_a_crash_at_any_point_keeps_counts_exact_with_a_pod_failure_policy(where: str) -> None:
    """Three pods finish at once: exit 42 (ignored), exit 1 (counted), success; the
    operator dies at ``where``; a new one counts 1 failed and 1 succeeded, never the
    ignored pod, and every finalizer goes."""
    sim = Sim(spec(3, 4, backoff_limit=6, policy=POLICY_42_3))
    sim.sync()
    sim.run()
    a, b, d = (p.uid for p in sim.active())
    sim.fail_with(a, 42)
    sim.fail_with(b, 1)
    sim.pods[d] = replace(sim.pods[d], phase=S, finished_at=sim.now)
    sim.crash_at = where
    with pytest.raises(Crash):
        sim.sync()
    sim.restart_operator()
    sim.settle()
    status = sim.status
    assert (status.succeeded, status.failed) == (1, 1)
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())
    assert not any(sim.pods[u].has_finalizer for u in (a, b, d))
    assert sim.condition(TARGET) is None
    sim.advance(60)
    sim.settle()
    sim.run()
    sim.succeed(len(sim.active()))
    sim.settle()
    assert (sim.status.succeeded, sim.status.failed) == (4, 1)
    assert sim.condition(COMPLETE) == "True"


@pytest.mark.parametrize("where", _policy_crash_cases())
def test_a_crash_at_any_point_of_a_fail_job_verdict_counts_each_pod_once(where: str) -> None:
    sim = Sim(spec(3, 3, policy=POLICY_42_3))
    sim.sync()
    sim.run()
    pod = sim.active()[0]
    sim.fail_with(pod.uid, 3)
    sim.crash_at = where
    with pytest.raises(Crash):
        sim.sync()
    sim.restart_operator()
    sim.settle()
    sim.reap()
    sim.settle()
    assert sim.reason(FAILED) == REASON_POD_FAILURE_POLICY
    assert sim.status.failed == 3
    assert sim.with_finalizer() == []
    assert len(sim.created) == 3


def test_backoff_limit_per_index_1_with_an_always_failing_index_ends_failed_indexes() -> None:
    sim = Sim(indexed(3, 3))
    sim.sync()
    sim.run()
    first = sim.fail_index_with(1, 1)
    sim.finish_index(0, S)
    sim.sync()
    assert sim.indexes() == [2], "index 1 waits for its back-off"
    assert sim.status.failed_indexes == ""
    assert sim.pods[first].has_finalizer, "kept to hand its failure count on"
    assert sim.status.failed == 0
    sim.advance(10)
    sim.sync()
    assert sim.indexes() == [1, 2]
    [retry] = [p for p in sim.active() if p.completion_index == 1]
    assert retry.index_failure_count == 1
    sim.sync()
    assert not sim.pods[first].has_finalizer and sim.status.failed == 1
    sim.run()
    sim.fail_index_with(1, 1)
    sim.sync()
    assert sim.status.failed_indexes == "1", "the second failure of index 1 fails it"
    assert sim.status.failed == 2
    assert sim.condition(TARGET) is None, "the job goes on with index 2"
    sim.advance(600)
    sim.sync()
    assert sim.indexes() == [2], "a failed index is not retried"
    sim.finish_index(2, S)
    sim.settle()
    status = sim.status
    assert conditions(sim) == (true(TARGET, FAILED_INDEXES), true(FAILED, FAILED_INDEXES))
    assert (status.completed_indexes, status.failed_indexes) == ("0,2", "1")
    assert (status.succeeded, status.failed) == (2, 2)
    assert status.status_text == "Failed"
    assert sim.with_finalizer() == []
    assert sorted(sim.created_indexes()) == [0, 1, 1, 2]


def test_more_failed_indexes_than_max_failed_indexes_fail_the_job_at_once() -> None:
    sim = Sim(indexed(4, 4, backoff_limit_per_index=0, max_failed_indexes=1))
    sim.sync()
    sim.run()
    sim.finish_index(0, F)
    sim.sync()
    assert sim.status.failed_indexes == "0" and sim.condition(TARGET) is None
    sim.finish_index(3, F)
    sim.sync()
    assert sim.reason(TARGET) == c.REASON_MAX_FAILED_INDEXES_EXCEEDED
    assert sim.status.failed_indexes == "0,3"
    assert sim.active() == []
    sim.reap()
    sim.settle()
    assert sim.reason(FAILED) == c.REASON_MAX_FAILED_INDEXES_EXCEEDED
    assert sim.status.failed == 4


def test_a_fail_index_rule_fails_the_index_at_once() -> None:
    policy = _fail_job_on(7, ACTION_FAIL_INDEX)
    sim = Sim(indexed(2, 2, backoff_limit_per_index=5, pod_failure_policy=policy))
    sim.sync()
    sim.run()
    sim.fail_index_with(0, 7)
    sim.sync()
    assert sim.status.failed_indexes == "0"
    sim.finish_index(1, S)
    sim.settle()
    assert sim.reason(FAILED) == c.REASON_FAILED_INDEXES
    assert len(sim.created) == 2


def test_the_per_index_back_off_doubles_with_the_index_s_failures_only() -> None:
    sim = Sim(indexed(2, 2, backoff_limit_per_index=5))
    sim.sync()
    sim.run()
    for failures, wait in ((1, 10.0), (2, 20.0), (3, 40.0)):
        sim.fail_index_with(0, 1)
        done = sim.sync()
        assert done.requeue_after == pytest.approx(wait), f"after {failures} failures"
        assert sim.indexes() == [1], "index 1 runs on"
        sim.advance(wait - 1)
        sim.sync()
        assert sim.indexes() == [1]
        sim.advance(1)
        sim.sync()
        assert sim.indexes() == [0, 1]
        sim.run()


def test_indexes_failing_together_each_wait_for_their_own_back_off_only() -> None:
    """With backoffLimitPerIndex there is no job-wide back-off: two indexes failing at
    once wait 10 s each (the job-wide record would say 20 s for its two failures)."""
    sim = Sim(indexed(2, 2, backoff_limit_per_index=5))
    sim.sync()
    sim.run()
    sim.fail(2)
    assert sim.sync().requeue_after == pytest.approx(10)
    sim.advance(10)
    sim.sync()
    assert sim.indexes() == [0, 1]


@pytest.mark.parametrize("indexed_job", [False, True], ids=["job-wide", "per-index"])
def test_a_job_s_pod_failure_backoff_sets_its_own_base_and_cap(indexed_job: bool) -> None:
    backoff = PodFailureBackoff(initial_seconds=2, max_seconds=5)
    job_spec = (
        indexed(1, 1, backoff_limit_per_index=9, pod_failure_backoff=backoff)
        if indexed_job
        else JobSpec(pod_failure_backoff=backoff, backoff_limit=9)
    )
    sim = Sim(job_spec, config=CoreConfig(backoff_base_seconds=30, backoff_max_seconds=900))
    sim.sync()
    for wait in (2.0, 4.0, 5.0, 5.0):
        sim.fail(1)
        done = sim.sync()
        assert done.requeue_after == pytest.approx(wait)
        sim.advance(wait)
        sim.sync()
        if indexed_job:
            sim.sync()  # the failed pod's finalizer goes once its replacement exists
        assert len(sim.active()) == 1


def test_without_pod_failure_backoff_the_operator_s_settings_apply() -> None:
    sim = Sim(JobSpec(backoff_limit=9), config=CoreConfig(backoff_base_seconds=30))
    sim.sync()
    sim.fail(1)
    assert sim.sync().requeue_after == pytest.approx(30)


# --------------------------------------------------------------------- printer text
def test_containers_and_images_text_come_with_the_first_status_write_only() -> None:
    sim = Sim(JobSpec(parallelism=2, completions=2))
    template = sim.api.job["spec"]["template"]["spec"]
    template["containers"] = [
        {"name": "main", "image": "busybox:1.36"},
        {"name": "sidecar", "image": "envoy:1"},
    ]
    sim.sync()
    status = sim.status
    assert (status.containers_text, status.images_text) == ("main,sidecar", "busybox:1.36,envoy:1")
    writes = [call for call in sim.api.calls if call.method == WRITE]
    assert len(writes) == 1
    assert writes[0].body is not None
    assert writes[0].body["status"]["containersText"] == "main,sidecar"
    mark = len(sim.api.calls)
    sim.advance(0.5)  # DURATION does not change: nothing to write
    sim.sync()
    assert [call.method for call in sim.api.calls[mark:]] == []


def test_a_job_without_the_text_gets_it_written_once() -> None:
    """An operator upgrade: a running job's status has no containersText yet."""
    sim = Sim(JobSpec(parallelism=1, completions=1))
    sim.sync()
    raw = sim.api.job["status"]
    del raw["containersText"], raw["imagesText"]
    sim.sync()
    assert sim.status.containers_text == "main"
    mark = len(sim.api.calls)
    sim.sync()
    assert sim.api.calls[mark:] == []
