"""One sync (job_sync.py) against an in-memory API (FakeApi): the order of its API calls,
which is what makes each pod count exactly once; spec defaults; retries."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    JobSpec,
    SuccessPolicy,
    SuccessPolicyRule,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_FAIL_JOB,
    ACTION_IGNORE,
    OPERATOR_IN,
    OnExitCodes,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.job_sync import SyncReport
from paralleljob.jobs.status_writer import Conflict
from paralleljob.runtime.api import ApiError
from tests.unit.fake_api import Crash, FakeApi, JsonDict
from tests.unit.jobs.support import JOB, REFUSED, controller_for, keeps
from tests.unit.sim import Sim


# -- one sync's calls ------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """A job after its first sync, and what the kubelet or a user did since."""

    id: str
    spec: JobSpec
    then: Callable[[Sim], object]
    #: The next sync's API calls, in order.
    calls: tuple[str, ...]
    #: Succeeded, failed and active pods once every pod change has settled.
    settled: tuple[int, int, int]
    #: An Indexed job's completedIndexes once settled.
    completed: str = ""


def _finish(succeeded: int = 0, failed: int = 0) -> Callable[[Sim], None]:
    def then(sim: Sim) -> None:
        sim.succeed(succeeded)
        sim.fail(failed)

    return then


CREATE, DELETE, WRITE, RELEASE = (
    "create_pod",
    "delete_pod",
    "patch_job_status",
    "remove_pod_finalizer",
)

SCENARIOS = [
    Scenario(
        "two pods succeed, one more is created",
        JobSpec(completions=4, parallelism=3),
        _finish(succeeded=2),
        (CREATE, WRITE, RELEASE, RELEASE, WRITE),
        settled=(2, 0, 2),
    ),
    Scenario(
        "the last pods succeed: the job completes",
        JobSpec(completions=2, parallelism=2),
        _finish(succeeded=2),
        (WRITE, RELEASE, RELEASE, WRITE),
        settled=(2, 0, 0),
    ),
    Scenario(
        "a failure past the backoff limit deletes the active pods, which count as failed",
        JobSpec(completions=3, parallelism=3, backoff_limit=0),
        _finish(failed=1),
        # The job has failed: the deleted pods' finalizers go too (canRemoveFinalizer).
        (DELETE, DELETE, WRITE, RELEASE, RELEASE, RELEASE, WRITE),
        settled=(0, 3, 0),
    ),
    Scenario(
        "a scale-down releases each surplus pod before deleting it: no failure",
        JobSpec(completions=5, parallelism=3, backoff_limit=0),
        lambda sim: sim.patch_spec(parallelism=1),
        (RELEASE, DELETE, RELEASE, DELETE, WRITE),
        settled=(0, 0, 1),
    ),
]


def _indexed(completions: int, parallelism: int, **more: Any) -> JobSpec:
    return JobSpec(
        completions=completions,
        parallelism=parallelism,
        completion_mode=INDEXED_COMPLETION,
        **more,
    )


def _duplicate_index(sim: Sim) -> None:
    sim.add_pod(c.PENDING, 1, uid="dup")


INDEXED_SCENARIOS = [
    Scenario(
        "indexed: two indexes succeed, the next index is created",
        _indexed(4, 3),
        _finish(succeeded=2),
        # Succeeded indexes go into completedIndexes in write 1: nothing left to count.
        (CREATE, WRITE, RELEASE, RELEASE),
        settled=(2, 0, 2),
        completed="0,1",
    ),
    Scenario(
        "indexed: the last indexes succeed: the job completes",
        _indexed(2, 2),
        _finish(succeeded=2),
        (WRITE, RELEASE, RELEASE, WRITE),
        settled=(2, 0, 0),
        completed="0,1",
    ),
    Scenario(
        "indexed: a failure past the backoff limit deletes the active pods",
        _indexed(3, 3, backoff_limit=0),
        _finish(failed=1),
        (DELETE, DELETE, WRITE, RELEASE, RELEASE, RELEASE, WRITE),
        settled=(0, 3, 0),
    ),
    Scenario(
        "indexed: a second pod of an index is released and deleted",
        _indexed(3, 2),
        _duplicate_index,
        (RELEASE, DELETE, WRITE),
        settled=(0, 0, 2),
    ),
    Scenario(
        # podReplacementPolicy Failed: a pod deleted for the verdict whose finalizer a
        # crash left on is not counted as failed (see the test after this table).
        "indexed: a success policy met deletes the other pods, then completes",
        _indexed(
            3,
            3,
            success_policy=SuccessPolicy(rules=(SuccessPolicyRule(succeeded_indexes="0"),)),
            pod_replacement_policy=POD_REPLACEMENT_FAILED,
        ),
        _finish(succeeded=1),
        # The deleted pods' finalizers go at once: they do not count as failed.
        (DELETE, DELETE, WRITE, RELEASE, RELEASE, RELEASE),
        settled=(1, 0, 0),
        completed="0",
    ),
]
SCENARIOS += INDEXED_SCENARIOS

#: Exit code 42 is ignored, 3 fails the job (podFailurePolicy).
_POLICY = PodFailurePolicy(
    rules=(
        PodFailurePolicyRule(ACTION_IGNORE, OnExitCodes(OPERATOR_IN, (42,))),
        PodFailurePolicyRule(ACTION_FAIL_JOB, OnExitCodes(OPERATOR_IN, (3,))),
    )
)


def _with_policy(completions: int, parallelism: int, **more: Any) -> JobSpec:
    return JobSpec(
        completions=completions,
        parallelism=parallelism,
        pod_failure_policy=_POLICY,
        pod_replacement_policy=POD_REPLACEMENT_FAILED,
        **more,
    )


def _exit(*codes: int) -> Callable[[Sim], None]:
    def then(sim: Sim) -> None:
        for pod, code in zip(sim.active(), codes, strict=False):
            sim.fail_with(pod.uid, code)

    return then


FAILURE_SCENARIOS = [
    Scenario(
        "pod failure policy: exit 42 is ignored, exit 1 counted",
        _with_policy(3, 3, backoff_limit=1),
        _exit(42, 1),
        # Both start the back-off: no replacement yet; the ignored one is released only.
        (WRITE, RELEASE, RELEASE, WRITE),
        settled=(0, 1, 1),
    ),
    Scenario(
        "pod failure policy: exit 3 fails the job, the active pods are deleted",
        _with_policy(3, 3),
        _exit(3),
        (DELETE, DELETE, WRITE, RELEASE, RELEASE, RELEASE, WRITE),
        settled=(0, 3, 0),
    ),
    Scenario(
        "backoffLimitPerIndex 0: a failure fails its index, the job goes on",
        _indexed(2, 2, backoff_limit=2**31 - 1, backoff_limit_per_index=0),
        _finish(failed=1),
        (WRITE, RELEASE, WRITE),
        settled=(0, 1, 1),
    ),
]
SCENARIOS += FAILURE_SCENARIOS


def _prepared(scenario: Scenario) -> Sim:
    sim = Sim(scenario.spec)
    sim.sync()
    sim.run()
    scenario.then(sim)
    return sim


def _next_calls(sim: Sim) -> list[str]:
    mark = len(sim.api.calls)
    sim.sync()
    return [call.method for call in sim.api.calls[mark:]]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_a_sync_makes_its_calls_in_upstream_order(scenario: Scenario) -> None:
    assert tuple(_next_calls(_prepared(scenario))) == scenario.calls


def test_status_write_1_lists_the_finished_pods_before_their_finalizers_go() -> None:
    sim = _prepared(SCENARIOS[0])
    finished = {p.name: p.uid for p in sim.pods.values() if p.phase == c.SUCCEEDED}
    mark = len(sim.api.calls)
    sim.sync()
    _, write_1, *removals, write_2 = sim.api.calls[mark:]
    assert write_1.body is not None and write_2.body is not None
    recorded = write_1.body["status"]
    assert sorted(recorded["uncountedTerminatedPods"]["succeeded"]) == sorted(finished.values())
    assert recorded["succeeded"] == 0, "recorded, not yet counted"
    assert sorted(call.name for call in removals) == sorted(finished)
    counted = write_2.body["status"]
    assert counted["succeeded"] == 2
    assert counted["uncountedTerminatedPods"] == {"succeeded": [], "failed": []}


def test_a_refused_finalizer_removal_keeps_that_pod_uncounted() -> None:
    sim = _prepared(SCENARIOS[1])
    stuck, _ = [p for p in sim.pods.values() if p.phase == c.SUCCEEDED]
    sim.api.fail(RELEASE, REFUSED, name=stuck.name)
    sim.sync()
    assert sim.status.succeeded == 1
    assert sim.status.uncounted_succeeded == (stuck.uid,)
    assert sim.condition(c.COND_COMPLETE) is None, "not while a pod is uncounted"
    sim.api.heal(RELEASE, name=stuck.name)
    sim.sync()
    assert sim.status.succeeded == 2 and not sim.status.uncounted_succeeded
    assert sim.condition(c.COND_COMPLETE) == "True"
    assert sim.with_finalizer() == []


def test_a_refused_status_write_1_removes_no_finalizer() -> None:
    sim = _prepared(SCENARIOS[1])
    sim.api.fail(WRITE, REFUSED)
    assert _failed_sync_calls(sim, ApiError) == [WRITE]
    assert len(sim.with_finalizer()) == 2
    sim.api.heal(WRITE)
    sim.settle()
    assert (sim.status.succeeded, sim.with_finalizer()) == (2, [])


def test_a_conflicting_status_write_1_rereads_the_job_and_removes_no_finalizer() -> None:
    sim = _prepared(SCENARIOS[1])
    sim.runtime.offer(copy.deepcopy(sim.api.job))
    sim.api.update_job(sim.api.job)  # someone else wrote: the runtime's copy is stale
    assert _failed_sync_calls(sim, Conflict) == [WRITE, "get_job"]
    assert keeps(sim.runtime, sim.api.job)
    assert len(sim.with_finalizer()) == 2


def _failed_sync_calls(sim: Sim, error: type[Exception]) -> list[str]:
    """The calls of a sync that raises ``error``, run as the job loop runs it."""
    mark = len(sim.api.calls)
    with pytest.raises(error):
        asyncio.run(sim.controller.syncer.sync(sim.runtime))
    return [call.method for call in sim.api.calls[mark:]]


CRASHES = [
    pytest.param(scenario, k, after, id=f"{scenario.id}: {when} call {k + 1}")
    for scenario in SCENARIOS
    for k in range(len(scenario.calls))
    for after, when in ((False, "before"), (True, "after"))
]


@pytest.mark.parametrize(("scenario", "k", "after"), CRASHES)
def test_a_crash_at_any_call_counts_every_pod_exactly_once(
    scenario: Scenario, k: int, after: bool
) -> None:
    """The operator dies before call k reaches the server, or after the server acted on
    it but before the answer arrived; a new operator takes over with no memory."""
    sim = _prepared(scenario)
    sim.api.crash(nth=k + 1, after=after)
    with pytest.raises(Crash):
        sim.sync()
    sim.settle()
    sim.reap()
    sim.settle()
    status = sim.status
    assert (status.succeeded, status.failed, len(sim.active())) == scenario.settled
    assert (status.uncounted_succeeded, status.uncounted_failed) == ((), ())
    assert [p.uid for p in sim.pods.values() if not p.active and p.has_finalizer] == []
    _assert_no_write_counted_a_pod_twice(sim, scenario)
    assert status.completed_indexes == scenario.completed
    if scenario.spec.indexed:
        indexes = [p.completion_index for p in sim.active()]
        assert len(set(indexes)) == len(indexes), "one pod per index"
        assert scenario.spec.completions is not None
        assert all(ix is not None and ix < scenario.spec.completions for ix in indexes)


@pytest.mark.parametrize("k", [1, 2])
def test_a_pod_deleted_for_a_success_policy_and_left_tracked_by_a_crash_counts_as_failed(
    k: int,
) -> None:
    """With podReplacementPolicy TerminatingOrFailed a deleted pod is a failed one
    (upstream's isPodFailed): when the operator dies after deleting the other pods of a
    job that met its success policy, before recording the verdict, the next operator
    counts those pods as failed, each once, as upstream's controller would."""
    policy = SuccessPolicy(rules=(SuccessPolicyRule(succeeded_indexes="0"),))
    sim = _prepared(Scenario("", _indexed(3, 3, success_policy=policy), _finish(1), (), (0, 0, 0)))
    sim.api.crash(method=DELETE, nth=k, after=True)
    with pytest.raises(Crash):
        sim.sync()
    sim.settle()
    sim.reap()
    sim.settle()
    assert (sim.status.succeeded, sim.status.failed) == (1, k)
    assert sim.reason(c.COND_COMPLETE) == "SuccessPolicy"


def _assert_no_write_counted_a_pod_twice(sim: Sim, scenario: Scenario) -> None:
    """Every status written: counted plus listed as uncounted is never more than the
    pods that finished, and the counters never go back."""
    succeeded, failed, _ = scenario.settled
    previous = (0, 0)
    for call in sim.api.calls:
        if call.method != WRITE or call.body is None:
            continue
        status = call.body["status"]
        uncounted = status["uncountedTerminatedPods"]
        assert status["succeeded"] + len(uncounted["succeeded"]) <= succeeded
        assert status["failed"] + len(uncounted["failed"]) <= failed
        counters = (status["succeeded"], status["failed"])
        assert counters[0] >= previous[0] and counters[1] >= previous[1]
        previous = counters


def test_a_job_gets_the_api_server_s_spec_defaults_written_before_anything_else() -> None:
    api = FakeApi({**JOB, "spec": {"template": JOB["spec"]["template"]}})
    rt = JobRuntime(api.job)
    report = asyncio.run(controller_for(api).syncer.sync(rt))
    assert report == SyncReport(delay=0.0), "sync again, from the version written"
    assert [call.method for call in api.calls] == ["patch_job"]
    spec = api.job["spec"]
    assert (spec["parallelism"], spec["completions"]) == (1, 1)
    assert spec["completionMode"] == "NonIndexed"
    assert "podReplacementPolicy" not in spec, "read as TerminatingOrFailed, not written"
    assert keeps(rt, api.job)
    # The next sync starts from the defaulted job and writes no default again.
    report = asyncio.run(controller_for(api).syncer.sync(rt))
    assert report.result is not None
    assert [call.method for call in api.calls].count("patch_job") == 1


def test_a_spec_default_the_api_server_drops_is_not_written_again() -> None:
    """A CRD older than the operator prunes completionMode: the operator warns, stops
    writing that default for the job, and runs it with the default it parsed."""

    class PruningApi(FakeApi):
        async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
            written = await super().patch_job(namespace, name, patch)
            self.job["spec"].pop("completionMode", None)
            written["spec"].pop("completionMode", None)
            return written

    api = PruningApi({**JOB, "spec": {"template": JOB["spec"]["template"]}})
    rt = JobRuntime(api.job)
    controller = controller_for(api)
    assert asyncio.run(controller.syncer.sync(rt)).result is None
    assert rt.unstored_defaults == {"completionMode"}
    rt.offer(copy.deepcopy(api.job))
    assert asyncio.run(controller.syncer.sync(rt)).result is not None
    assert [call.method for call in api.calls].count("patch_job") == 1
    assert len(api.pods) == 1


def test_an_indexed_job_s_pods_are_built_from_the_template_for_their_index() -> None:
    """manageJob's per-index template: annotation and label, JOB_COMPLETION_INDEX in every
    container that does not set it, hostname <job>-<index> (spec.hostname), the
    template's subdomain kept, generateName <job>-<index>-; in slow-start batches."""
    template: dict[str, Any] = {
        "metadata": {"labels": {"app": "x"}, "annotations": {"note": "kept"}},
        "spec": {
            "restartPolicy": "Never",
            "subdomain": "workers",
            "initContainers": [{"name": "init"}],
            "containers": [
                {"name": "c"},
                {"name": "d", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}]},
            ],
        },
    }
    spec = {**JOB["spec"], "completionMode": "Indexed", "parallelism": 3, "template": template}
    api = FakeApi({**JOB, "spec": spec})
    report = asyncio.run(controller_for(api).syncer.sync(JobRuntime(api.job)))
    assert report.plan.create_indexes == (0, 1, 2)
    bodies = [call.body for call in api.calls if call.method == "create_pod"]
    assert [b["metadata"]["generateName"] for b in bodies if b] == ["job-0-", "job-1-", "job-2-"]
    pod = bodies[1]
    assert pod is not None
    meta, pod_spec = pod["metadata"], pod["spec"]
    assert meta["annotations"] == {"note": "kept", "paralleljob.dev/job-completion-index": "1"}
    assert meta["labels"] == {
        "app": "x",
        "paralleljob.dev/job-completion-index": "1",
        c.LABEL_JOB_NAME: "job",
        c.LABEL_CONTROLLER_UID: "job-uid",
    }
    assert meta["finalizers"] == [c.TRACKING_FINALIZER]
    assert (pod_spec["hostname"], pod_spec["subdomain"]) == ("job-1", "workers")
    from_label = {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {
            "fieldRef": {"fieldPath": "metadata.labels['paralleljob.dev/job-completion-index']"}
        },
    }
    assert pod_spec["initContainers"][0]["env"] == [from_label]
    assert pod_spec["containers"][0]["env"] == [from_label]
    assert pod_spec["containers"][1]["env"] == [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}]
    assert "env" not in template["spec"]["containers"][0], "the job's template is not changed"
    assert sorted(
        p.completion_index for p in api.pods.values() if p.completion_index is not None
    ) == [0, 1, 2]


def test_a_refused_sync_is_retried_with_back_off_and_a_conflict_at_once() -> None:
    sim = Sim(JobSpec(completions=1, parallelism=1))
    sim.api.fail(WRITE, REFUSED)

    def sync_safely() -> float | None:
        return asyncio.run(sim.controller.loops.sync_safely(sim.runtime))

    assert [sync_safely() for _ in range(3)] == [1.0, 2.0, 4.0]
    sim.api.fail(WRITE, ApiError(409, "Conflict", "the object has been modified"))
    assert sync_safely() == 0.0
    sim.api.heal(WRITE)
    assert sync_safely() == pytest.approx(1.0), "the next DURATION change"
    assert sim.runtime.loop.retry.failures == 0


def test_creations_refused_in_a_terminating_namespace_are_no_error_and_not_retried() -> None:
    sim = Sim(JobSpec(completions=3, parallelism=3))
    # The API server's answer (NamespaceLifecycle admission), as it serializes it.
    cause = {
        "details": {
            "name": "pod",
            "kind": "pods",
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": "namespace ns is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        }
    }
    message = "unable to create new content in namespace ns because it is being terminated"
    sim.api.fail("create_pod", ApiError(403, "Forbidden", message, cause))
    report = asyncio.run(sim.controller.syncer.sync(sim.runtime))
    assert report.outcome.create_error is None
    assert sim.runtime.pods.create_retry.failures == 0, (
        "no retry back-off: only an event wakes the job"
    )
    assert sim.condition(c.COND_POD_CREATION_FAILED) is None
    assert [e.reason for e in sim.events] == []
