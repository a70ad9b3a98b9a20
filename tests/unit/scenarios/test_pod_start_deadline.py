"""spec.podStartDeadlineSeconds through the real sync (Sim): whole jobs whose pods never
start. Each such pod is failed (the phase Failed and the condition
paralleljob.dev/PodStartDeadlineExceeded written first), deleted, counted once as a
failed pod and replaced after the back-off; backoffLimit, a podFailurePolicy rule on the
condition, or the operator dying at any call, change nothing of that. This project's own
scenarios: the Job has no such field."""

from __future__ import annotations

from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.event import Event
from paralleljob.core.job.model import (
    INDEXED_COMPLETION,
    POD_REPLACEMENT_FAILED,
    JobSpec,
    PodFailureBackoff,
)
from paralleljob.core.job.pod_failure_policy import (
    ACTION_FAIL_JOB,
    ACTION_IGNORE,
    REASON_POD_FAILURE_POLICY,
    OnPodConditionsPattern,
    PodCondition,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from paralleljob.core.job.pod_start_deadline import event_message
from paralleljob.runtime.api import ApiError

from ..fake_api import Crash
from ..sim import CRASH_POINTS, Sim

TYPE = c.POD_COND_START_DEADLINE_EXCEEDED
REASON = c.REASON_POD_START_DEADLINE_EXCEEDED
#: A back-off of 1 s before each replacement, so that the scenarios read in seconds.
QUICK = PodFailureBackoff(initial_seconds=1, max_seconds=1)


def spec(
    deadline: int | None = 5,
    *,
    parallelism: int = 1,
    completions: int = 1,
    backoff_limit: int = 1,
    **more: Any,
) -> JobSpec:
    """One pod at a time by default, podStartDeadlineSeconds ``deadline``."""
    return JobSpec(
        parallelism=parallelism,
        completions=completions,
        backoff_limit=backoff_limit,
        pod_start_deadline_seconds=deadline,
        pod_failure_backoff=QUICK,
        **more,
    )


def on_deadline(action: str) -> PodFailurePolicy:
    """A pod failure policy with one rule: ``action`` for a pod failed by its deadline."""
    rule = PodFailurePolicyRule(action, on_pod_conditions=(OnPodConditionsPattern(TYPE),))
    return PodFailurePolicy(rules=(rule,))


def calls(sim: Sim, *methods: str) -> list[tuple[str, str]]:
    return [(x.method, x.name) for x in sim.api.calls if x.method in methods]


def start_a_pod(sim: Sim) -> str:
    """A sync creates the job's pod, the next sees it (as its watch event would)."""
    sim.sync()
    uid = sim.created[-1]
    sim.sync()
    return uid


def test_a_pod_that_never_starts_is_failed_at_its_deadline_then_counted_once() -> None:
    sim = Sim(spec(backoff_limit=6))
    first = start_a_pod(sim)
    name = sim.pods[first].name
    assert sim.sync().requeue_after == 5, "the sync runs again at the pod's deadline"
    sim.advance(4.5)
    assert sim.sync().requeue_after == pytest.approx(0.5)
    assert calls(sim, "fail_pod", "delete_pod") == []
    sim.advance(0.5)
    sim.sync()
    # The condition first, then the deletion; the finalizer stays on: it counts.
    assert calls(sim, "fail_pod", "delete_pod", "remove_pod_finalizer") == [
        ("fail_pod", name),
        ("delete_pod", name),
    ]
    [written] = [x.body for x in sim.api.calls if x.method == "fail_pod"]
    assert written is not None
    assert (written["type"], written["status"], written["reason"]) == (TYPE, "True", REASON)
    pod = sim.pods[first]
    assert (pod.phase, pod.deleting, pod.has_finalizer) == (c.FAILED, True, True)
    assert pod.failure is not None and PodCondition(TYPE, "True") in pod.failure.conditions
    assert Event("Warning", REASON, event_message(name, 5)) in sim.events
    assert Event("Normal", "SuccessfulDelete", f"Deleted pod: {name}") in sim.events
    assert sim.status.failed == 0, "counted by the next sync, through its finalizer"
    sim.sync()
    assert sim.status.failed == 1
    assert not sim.pods[first].has_finalizer
    sim.reap()
    sim.advance(1)
    sim.settle()
    assert sim.status.failed == 1, "once"
    assert len(sim.created) == 2, "replaced after the back-off"
    assert len(sim.active()) == 1


def test_each_pod_is_replaced_until_backoff_limit_fails_the_job() -> None:
    """backoffLimit 1: the first pod fails by its deadline and is replaced; the
    replacement fails too, and the job ends Failed with BackoffLimitExceeded."""
    sim = Sim(spec(backoff_limit=1))
    for _ in range(2):
        start_a_pod(sim)
        sim.advance(5)
        sim.settle()
        sim.reap()
        sim.advance(1)
    sim.settle()
    assert len(sim.created) == 2
    assert sim.status.failed == 2
    assert sim.reason(c.COND_FAILED) == c.REASON_BACKOFF_LIMIT
    assert [e.reason for e in sim.events].count(REASON) == 2
    assert sim.with_finalizer() == []


def test_a_fail_job_rule_on_the_condition_fails_the_job_at_once() -> None:
    sim = Sim(spec(backoff_limit=6, pod_failure_policy=on_deadline(ACTION_FAIL_JOB)))
    sim.patch_spec(pod_replacement_policy=POD_REPLACEMENT_FAILED)  # as the operator writes
    first = start_a_pod(sim)
    sim.advance(5)
    sim.settle()
    name = sim.pods[first].name
    assert sim.reason(c.COND_FAILED) == REASON_POD_FAILURE_POLICY
    [failed] = [x for x in sim.status.conditions if x.type == c.COND_FAILED]
    assert failed.message == f"Pod ns/{name} has condition {TYPE} matching FailJob rule at index 0"
    assert sim.status.failed == 1
    assert len(sim.created) == 1, "no replacement"


def test_an_ignore_rule_on_the_condition_retries_without_counting() -> None:
    sim = Sim(spec(backoff_limit=0, pod_failure_policy=on_deadline(ACTION_IGNORE)))
    sim.patch_spec(pod_replacement_policy=POD_REPLACEMENT_FAILED)
    for _ in range(3):
        start_a_pod(sim)
        sim.advance(5)
        sim.settle()
        sim.reap()
        sim.advance(1)
    assert sim.status.failed == 0
    assert sim.condition(c.COND_FAILED) is None
    assert len(sim.created) == 3
    # The replacement of a pod that did start runs to its end.
    start_a_pod(sim)
    sim.run()
    sim.advance(60)
    sim.settle()
    sim.succeed(1)
    sim.settle()
    assert sim.condition(c.COND_COMPLETE) == "True"


def test_a_pod_that_started_in_time_is_never_touched() -> None:
    sim = Sim(spec())
    start_a_pod(sim)
    sim.advance(4)
    sim.run()
    assert sim.sync().requeue_after is None, "no pod left to wait for"
    sim.advance(3600)
    sim.settle()
    assert calls(sim, "fail_pod", "delete_pod") == []


def test_a_job_without_the_field_lets_its_pods_pend_for_ever() -> None:
    sim = Sim(spec(deadline=None))
    start_a_pod(sim)
    sim.advance(86400)
    assert sim.settle().requeue_after is None
    assert calls(sim, "fail_pod", "delete_pod") == []
    assert len(sim.active()) == 1


def test_several_pods_the_earliest_deadline_wakes_the_job() -> None:
    sim = Sim(spec(parallelism=3, completions=3))
    sim.sync()
    sim.advance(2)
    sim.settle()  # the three pods, then the sync that sees them
    sim.advance(1)
    # Created at 0 s; 3 s later: 2 s left for each.
    assert sim.sync().requeue_after == 2
    sim.run(1)
    sim.advance(2)
    sim.sync()
    assert len(calls(sim, "fail_pod")) == 2, "the running pod stays"
    assert len(sim.active()) == 1


def test_a_failed_write_of_the_condition_deletes_nothing() -> None:
    sim = Sim(spec())
    first = start_a_pod(sim)
    sim.advance(5)
    sim.api.fail("fail_pod", ApiError(500, "InternalError", "etcdserver: request timed out"))
    sim.sync()
    assert calls(sim, "delete_pod") == []
    assert sim.pods[first].active
    assert not [e for e in sim.events if e.reason == REASON]
    sim.api.heal("fail_pod")
    sim.sync()
    assert calls(sim, "fail_pod", "delete_pod")[-1][0] == "delete_pod"
    assert [e.reason for e in sim.events].count(REASON) == 1


def test_an_indexed_job_retries_the_index_with_its_failure_count() -> None:
    sim = Sim(
        spec(
            parallelism=2,
            completions=2,
            completion_mode=INDEXED_COMPLETION,
            backoff_limit=6,
            backoff_limit_per_index=1,
        )
    )
    sim.sync()
    sim.sync()
    sim.run(1)  # index 0 runs, index 1 never starts
    sim.advance(5)
    sim.settle()
    sim.reap()
    sim.advance(1)
    sim.settle()
    active = sorted(sim.active(), key=lambda p: p.completion_index or 0)
    assert [(p.completion_index, p.index_failure_count) for p in active] == [(0, 0), (1, 1)]
    sim.advance(5)
    sim.settle()
    assert sim.status.failed_indexes == "1", "its second failure fails the index"


CRASHES = [
    *CRASH_POINTS,
    "after-fail-pod",
    "before-delete-pod",
    "after-delete-pod",
]


@pytest.mark.parametrize("where", CRASHES)
def test_a_crash_at_any_call_counts_the_pod_once(where: str) -> None:
    """The operator dies at ``where`` (of the sync that fails the pod, or of the one that
    counts it); a new one, knowing only what the API server holds, counts the pod once
    and replaces it once."""
    sim = Sim(spec(backoff_limit=6))
    first = start_a_pod(sim)
    sim.advance(5)
    if where in CRASH_POINTS:
        sim.sync()  # failed and deleted; the crash comes as it is counted
        sim.crash_at = where
    elif where == "after-fail-pod":
        sim.api.crash(method="fail_pod", after=True)
    elif where == "before-delete-pod":
        sim.api.crash(method="delete_pod")
    else:
        sim.api.crash(method="delete_pod", after=True)
    with pytest.raises(Crash):
        sim.sync()
    sim.restart_operator()
    sim.settle()
    sim.reap()
    sim.advance(1)
    sim.settle()
    assert sim.status.failed == 1
    assert (sim.status.uncounted_succeeded, sim.status.uncounted_failed) == ((), ())
    assert len(calls(sim, "fail_pod")) == 1, "failed once"
    assert first not in sim.with_finalizer()
    assert len(sim.created) == 2 and len(sim.active()) == 1
