"""The pure parts of metrics.py (label values, the finalizer transition counter, the
labels and amounts of the ported job metrics) and the hooks that record them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from paralleljob import constants as c
from paralleljob.config import ControllerConfig, CoreConfig
from paralleljob.constants import MANAGED_BY
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    NON_INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    POD_REPLACEMENT_TERMINATING_OR_FAILED,
    JobSpec,
    JobStatus,
    PodInfo,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_COUNT,
    ACTION_FAIL_INDEX,
    ACTION_FAIL_JOB,
    ACTION_IGNORE,
    OPERATOR_IN,
    ContainerStatus,
    OnExitCodes,
    OnPodConditionsPattern,
    PodCondition,
    PodFailureFacts,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.core.job.tracking import record_finished_pods
from paralleljob.jobs.controller import Controller
from paralleljob.runtime import metrics
from tests.unit.fake_api import FakeApi, FakeRecorder
from tests.unit.sim import Sim

#: v1.DisruptionTarget.
DT = "DisruptionTarget"

JOBS = "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/namespaces/ns/pods", "pods"),
        ("/api/v1/namespaces/ns/pods/p-1", "pods"),
        ("/api/v1/namespaces/ns/events", "events"),
        ("/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs/j", "paralleljobs"),
        (
            "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs/j/status",
            "paralleljobs/status",
        ),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/api/v1/namespaces/ns/pods?watch=true", "pods"),
        ("/version", "other"),
        ("/apis/paralleljob.dev/v1alpha1", "other"),
    ],
)
def test_resource_of_a_request_path(path: str, resource: str) -> None:
    assert metrics.resource_of(path) == resource


@pytest.mark.parametrize(
    ("created", "deleted", "managed", "action"),
    [
        (3, 0, True, "pods_created"),
        (0, 2, True, "pods_deleted"),
        (0, 0, True, "tracking"),
        (0, 0, False, "reconciling"),
    ],
)
def test_sync_action_label(created: int, deleted: int, managed: bool, action: str) -> None:
    assert metrics.sync_action(created, deleted, managed) == action


def _finalizer_events(event: str) -> float:
    name = "paralleljob_controller_terminated_pods_tracking_finalizer_total"
    return REGISTRY.get_sample_value(name, {"event": event}) or 0.0


def test_finished_pods_with_finalizer_are_counted_on_entering_and_leaving() -> None:
    added, deleted = _finalizer_events("add"), _finalizer_events("delete")
    state = metrics.FinishedWithFinalizer()
    state.observe("p-1", False)  # running
    state.observe("p-1", True)  # succeeded, finalizer on
    state.observe("p-1", True)  # another event in the same state
    state.observe("p-2", True)
    state.observe("p-1", False)  # finalizer removed
    assert _finalizer_events("add") - added == 2
    assert _finalizer_events("delete") - deleted == 1


# ------------------------------------------------------------------ the ported job metrics
def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(f"paralleljob_controller_{name}_total", labels) or 0.0


def _creations(reason: str) -> float:
    return _sample("job_pods_creation", reason=reason, status="succeeded")


# recordJobPodsCreationTotal; the cases of TestJobPodReplacementPolicy
# (test/integration/job/job_test.go) at the syncs where they create pods.
@pytest.mark.parametrize(
    ("policy", "failed", "terminating", "reason"),
    [
        (POD_REPLACEMENT_TERMINATING_OR_FAILED, 0, 0, "new"),
        (POD_REPLACEMENT_TERMINATING_OR_FAILED, 0, 2, "recreate_terminating_or_failed"),
        (POD_REPLACEMENT_TERMINATING_OR_FAILED, 2, 0, "recreate_terminating_or_failed"),
        (POD_REPLACEMENT_TERMINATING_OR_FAILED, 2, 2, "recreate_terminating_or_failed"),
        (POD_REPLACEMENT_FAILED, 0, 0, "new"),
        (POD_REPLACEMENT_FAILED, 2, 0, "recreate_failed"),
        (POD_REPLACEMENT_FAILED, 2, 2, "recreate_failed"),
        (POD_REPLACEMENT_FAILED, 0, 1, "recreate_terminating_or_failed"),
    ],
)
def test_pod_creation_reason(policy: str, failed: int, terminating: int, reason: str) -> None:
    assert metrics.pod_creation_reason(policy, failed, terminating) == reason


@pytest.mark.parametrize("mode", [INDEXED_COMPLETION, NON_INDEXED_COMPLETION])
@pytest.mark.parametrize("policy", [POD_REPLACEMENT_TERMINATING_OR_FAILED, POD_REPLACEMENT_FAILED])
def test_replacement_pods_are_counted_with_their_reason(mode: str, policy: str) -> None:
    """TestJobPodReplacementPolicy (feature gate on): two pods created, deleted by a user,
    then failed: TerminatingOrFailed replaces them while terminating
    (recreate_terminating_or_failed), Failed once they failed (recreate_failed)."""
    reasons = ("new", "recreate_terminating_or_failed", "recreate_failed")
    before = {r: _creations(r) for r in reasons}
    spec = JobSpec(
        parallelism=2, completions=2, completion_mode=mode, pod_replacement_policy=policy
    )
    sim = Sim(spec, config=CoreConfig(backoff_base_seconds=0.0))
    sim.sync()
    for uid in list(sim.pods):
        sim.user_delete(uid)
    sim.sync()
    sim.terminate()
    sim.settle()
    got = {r: _creations(r) - before[r] for r in reasons}
    want_reason = (
        "recreate_failed" if policy == POD_REPLACEMENT_FAILED else "recreate_terminating_or_failed"
    )
    assert got == {r: 2 if r in ("new", want_reason) else 0 for r in reasons}


# backoffLimitMetricsLabel and the job_finished_indexes_total part of recordJobPodFinished,
# per status write; the end states of TestIndexedJob and TestBackoffLimitPerIndex
# (test/integration/job/job_test.go).
_INDEXED = JobSpec(completions=4, parallelism=4, completion_mode=INDEXED_COMPLETION)
_PER_INDEX = replace(_INDEXED, backoff_limit_per_index=1)


@pytest.mark.parametrize(
    ("spec", "before", "after", "want"),
    [
        pytest.param(
            JobSpec(completions=4), JobStatus(), JobStatus(succeeded=1), (), id="NonIndexed"
        ),
        pytest.param(
            _INDEXED, JobStatus(), JobStatus(), (("succeeded", "global", 0),), id="no change"
        ),
        pytest.param(
            _INDEXED,
            JobStatus(),
            JobStatus(completed_indexes="1"),
            (("succeeded", "global", 1),),
            id="TestIndexedJob: index 1 succeeded",
        ),
        pytest.param(
            _INDEXED,
            JobStatus(completed_indexes="1"),
            JobStatus(completed_indexes="0-3"),
            (("succeeded", "global", 3),),
            id="TestIndexedJob: the rest succeeded",
        ),
        pytest.param(
            replace(_INDEXED, completions=2),
            JobStatus(),
            JobStatus(completed_indexes="0-3"),
            (("succeeded", "global", 2),),
            id="indexes within completions only",
        ),
        pytest.param(
            _INDEXED,
            JobStatus(completed_indexes="0-3"),
            JobStatus(completed_indexes="0"),
            (("succeeded", "global", 0),),
            id="never negative",
        ),
        pytest.param(
            _PER_INDEX,
            JobStatus(failed_indexes=None),
            JobStatus(failed_indexes="0"),
            (("succeeded", "perIndex", 0), ("failed", "perIndex", 1)),
            id="TestBackoffLimitPerIndex: an index failed",
        ),
        pytest.param(
            _PER_INDEX,
            JobStatus(failed_indexes="0"),
            JobStatus(completed_indexes="1", failed_indexes="0,2"),
            (("succeeded", "perIndex", 1), ("failed", "perIndex", 1)),
            id="TestBackoffLimitPerIndex: one more of each",
        ),
        pytest.param(
            _PER_INDEX,
            JobStatus(failed_indexes="0"),
            JobStatus(failed_indexes="0"),
            (("succeeded", "perIndex", 0),),
            id="failedIndexes unchanged",
        ),
        pytest.param(
            _INDEXED,
            JobStatus(),
            JobStatus(failed_indexes="0"),
            (("succeeded", "global", 0),),
            id="failed indexes only with backoffLimitPerIndex",
        ),
    ],
)
def test_finished_indexes(
    spec: JobSpec, before: JobStatus, after: JobStatus, want: tuple[tuple[str, str, int], ...]
) -> None:
    assert metrics.finished_indexes(spec, before, after) == want


def test_finished_indexes_are_counted_as_the_status_writes_land() -> None:
    """TestBackoffLimitPerIndex "job continues execution after a failed index, the job is
    marked Failed due to the failed index": with backoffLimitPerIndex 0, index 0 fails and
    index 1 succeeds: one failed and one succeeded index, each counted once."""
    labels = [("succeeded", "perIndex"), ("failed", "perIndex")]
    before = [_sample("job_finished_indexes", status=s, backoffLimit=b) for s, b in labels]
    spec = JobSpec(
        parallelism=2, completions=2, completion_mode=INDEXED_COMPLETION, backoff_limit_per_index=0
    )
    sim = Sim(spec)
    sim.sync()
    sim.finish_index(0, c.FAILED)
    sim.settle()
    sim.finish_index(1, c.SUCCEEDED)
    sim.settle()
    assert sim.condition(c.COND_FAILED) == "True"
    after = [_sample("job_finished_indexes", status=s, backoffLimit=b) for s, b in labels]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1]


# podFailureCountByPolicyAction of trackJobStatusAndRemoveFinalizers' pod loop; the cases of
# TestJobPodFailurePolicy and the FailIndex case of TestBackoffLimitPerIndex
# (test/integration/job/job_test.go).
_POLICY = PodFailurePolicy(
    rules=(
        PodFailurePolicyRule(ACTION_IGNORE, on_pod_conditions=(OnPodConditionsPattern(DT),)),
        PodFailurePolicyRule(ACTION_COUNT, OnExitCodes(OPERATOR_IN, (10,))),
        PodFailurePolicyRule(ACTION_FAIL_JOB, OnExitCodes(OPERATOR_IN, (5, 6, 7))),
        PodFailurePolicyRule(ACTION_FAIL_INDEX, OnExitCodes(OPERATOR_IN, (13,))),
    )
)


def _failed(uid: str, code: int | None = None, condition: str | None = None) -> PodInfo:
    facts = PodFailureFacts(
        "ns",
        uid,
        container_statuses=() if code is None else (ContainerStatus("main", code),),
        conditions=() if condition is None else (PodCondition(condition, "True"),),
    )
    return PodInfo(uid, uid, c.FAILED, namespace="ns", failure=facts)


@pytest.mark.parametrize(
    ("policy", "pods", "want"),
    [
        pytest.param(_POLICY, [_failed("a", 5)], (("FailJob", 1),), id="FailJob on exit codes"),
        pytest.param(
            _POLICY, [_failed("a", condition=DT)], (("Ignore", 1),), id="Ignore on conditions"
        ),
        pytest.param(_POLICY, [_failed("a", 10)], (("Count", 1),), id="Count on exit codes"),
        pytest.param(_POLICY, [_failed("a", 0)], (), id="no rule matched"),
        pytest.param(_POLICY, [_failed("a", 13)], (("FailIndex", 1),), id="FailIndex"),
        pytest.param(None, [_failed("a", 5)], (), id="no policy"),
        pytest.param(
            _POLICY,
            [_failed("a", 10), _failed("b", condition=DT), _failed("c", 10), _failed("d", 1)],
            (("Count", 2), ("Ignore", 1)),
            id="by action",
        ),
    ],
)
def test_pod_failures_handled_by_failure_policy(
    policy: PodFailurePolicy | None, pods: list[PodInfo], want: tuple[tuple[str, int], ...]
) -> None:
    spec = JobSpec(pod_failure_policy=policy, pod_replacement_policy=POD_REPLACEMENT_FAILED)
    recorded = record_finished_pods(
        pods, JobStatus(), frozenset(), None, job_deleting=False, max_uncounted=500, spec=spec
    )
    assert recorded.policy_actions == want


def test_a_pod_failure_handled_by_the_policy_is_counted_once() -> None:
    """TestJobPodFailurePolicy "pod status matching the configured Count rule on exit
    codes; pod failure counted": counted when status write 1 lands, not again after."""
    before = _sample("pod_failures_handled_by_failure_policy", action="Count")
    spec = JobSpec(
        parallelism=1,
        completions=1,
        pod_failure_policy=_POLICY,
        pod_replacement_policy=POD_REPLACEMENT_FAILED,
    )
    sim = Sim(spec, config=CoreConfig(backoff_base_seconds=0.0))
    sim.sync()
    sim.fail_with(sim.active()[0].uid, 10)
    sim.settle()
    assert sim.status.failed == 1
    assert _sample("pod_failures_handled_by_failure_policy", action="Count") - before == 1


# addJob's jobs_by_external_controller_total; the cases of TestManagedBy
# (test/integration/job/job_test.go) with the JobManagedBy gate on.
@pytest.mark.parametrize(
    ("managed_by", "counted"),
    [
        pytest.param(None, False, id="without the managedBy"),
        pytest.param(MANAGED_BY, False, id="with the operator's own value"),
        pytest.param("example.com/custom-job-controller", True, id="with a custom value"),
    ],
)
def test_jobs_by_external_controller(managed_by: str | None, counted: bool) -> None:
    name = managed_by or MANAGED_BY
    before = _sample("jobs_by_external_controller", controller_name=name)
    spec: dict[str, Any] = {
        "completions": 1,
        "parallelism": 1,
        "completionMode": "NonIndexed",
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
    }
    if managed_by is not None:
        spec["managedBy"] = managed_by
    meta = {"name": "job", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5"}
    job: dict[str, Any] = {"metadata": meta, "spec": spec}

    async def scenario() -> None:
        api = FakeApi(job)
        controller = Controller(
            api, FakeRecorder(), ControllerConfig(sync_batch_seconds=0.0), api.pods_of
        )
        controller.job_seen(api.job)
        controller.job_seen(api.job)  # a later event of the same job
        await controller.stop_all()

    asyncio.run(scenario())
    got = _sample("jobs_by_external_controller", controller_name=name) - before
    assert got == (1 if counted else 0)


def _lag(sample: str) -> float:
    return (
        REGISTRY.get_sample_value(f"paralleljob_controller_event_loop_lag_seconds_{sample}") or 0.0
    )


async def wait_for_sample(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "no loop-lag sample within the deadline"
        await asyncio.sleep(0.01)


def test_the_loop_lag_sampler_observes_a_loop_blocked_past_a_due_timer() -> None:
    count, total = _lag("count"), _lag("sum")

    async def scenario() -> None:
        sampler = asyncio.create_task(metrics.sample_loop_lag(interval=0.01))
        await asyncio.sleep(0)  # the sampler's first timer is due in 10 ms
        time.sleep(0.1)  # the loop is blocked well past it, as a long callback blocks it
        await wait_for_sample(lambda: _lag("count") > count)
        sampler.cancel()

    asyncio.run(scenario())
    assert _lag("sum") - total >= 0.08


def _blocked(sample: str) -> float:
    name = f"paralleljob_controller_event_loop_blocked_seconds_{sample}"
    return REGISTRY.get_sample_value(name) or 0.0


@pytest.mark.parametrize(
    ("after", "own_at_least", "own_at_most"),
    [
        (metrics.ThreadTimes(on_cpu=10.0, waiting_for_cpu=0.0), 0.08, 1.0),
        (metrics.ThreadTimes(on_cpu=10.0, waiting_for_cpu=10.0), 0.0, 0.05),
        (metrics.ThreadTimes(on_cpu=0.0, waiting_for_cpu=0.0), 0.0, 0.05),
        (None, 0.08, 1.0),
    ],
    ids=[
        "the loop's own computing",
        "a machine that gave the thread no CPU",
        "a thread blocked off the CPU",
        "times not known: all of it",
    ],
)
def test_the_loop_lag_sampler_tells_the_loops_own_pauses_from_the_machines(
    after: metrics.ThreadTimes | None, own_at_least: float, own_at_most: float
) -> None:
    start = metrics.ThreadTimes(0.0, 0.0) if after is not None else None
    readings = iter([start, after])
    count, total = _blocked("count"), _blocked("sum")

    async def scenario() -> None:
        sampler = asyncio.create_task(
            metrics.sample_loop_lag(interval=0.01, times=lambda: next(readings, after))
        )
        await asyncio.sleep(0)  # the sampler's first timer is due in 10 ms
        time.sleep(0.1)  # the loop is blocked well past it
        await wait_for_sample(lambda: _blocked("count") > count)
        sampler.cancel()

    asyncio.run(scenario())
    assert own_at_least <= _blocked("sum") - total <= own_at_most


@pytest.mark.parametrize(
    ("lag", "on_cpu", "waited", "own"),
    [
        (0.3, 1.0, 0.0, 0.3),
        (0.3, 1.0, 0.1, 0.2),
        (0.3, 1.0, 0.5, 0.0),
        (0.3, 0.05, 0.0, 0.05),
        (0.0, 1.0, 0.2, 0.0),
    ],
)
def test_the_own_part_of_a_lag_is_what_the_wait_for_a_cpu_leaves_up_to_the_cpu_used(
    lag: float, on_cpu: float, waited: float, own: float
) -> None:
    before = metrics.ThreadTimes(1.0, 1.0)
    after = metrics.ThreadTimes(1.0 + on_cpu, 1.0 + waited)
    assert metrics.own_part_of_lag(lag, before, after) == pytest.approx(own)
    assert metrics.own_part_of_lag(lag, None, after) == lag


def test_the_threads_times_only_grow() -> None:
    first = metrics.thread_times()
    sum(range(1_000_000))  # some work on the CPU
    later = metrics.thread_times()
    assert first is not None and later is not None, "Linux reports a thread's schedstat"
    assert first.on_cpu < later.on_cpu
    assert 0.0 <= first.waiting_for_cpu <= later.waiting_for_cpu
