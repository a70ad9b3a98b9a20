"""The pod writer (pod_writer.py): slow start that resumes where a successful one ended;
at most ``concurrent_creating_syncs`` syncs creating pods at once; a pod past
podStartDeadlineSeconds failed (its condition written) before it is deleted, and not
deleted unless that write succeeded."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.model import PodInfo, condition_to_dict
from paralleljob.core.job.pod_start_deadline import failed_condition
from paralleljob.core.job.sync import PodPlan
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.json_types import JsonDict
from paralleljob.runtime.api import ApiError
from tests.unit.fake_api import FakeApi, FakeRecorder
from tests.unit.jobs.support import JOB, controller_for, job_named, until


def test_slow_start_resumes_where_a_fully_successful_one_ended_and_restarts_after_an_error() -> (
    None
):
    async def scenario() -> None:
        api = FakeApi({**JOB, "spec": {**JOB["spec"], "completions": 40, "parallelism": 7}})
        controller = controller_for(api)
        rt = JobRuntime(api.job)
        await controller.syncer.sync(rt)
        assert len(api.pods) == 7, "batches of 1, 2 and 4"
        assert rt.pods.slow_start_batch == 4
        for uid, pod in list(api.pods.items()):
            api.pods[uid] = replace(pod, phase=c.SUCCEEDED)
        api.fail("create_pod", ApiError(403, "Forbidden", "exceeded quota"))
        await controller.syncer.sync(rt)
        assert rt.pods.slow_start_batch == 1, "an error: the next slow start begins at 1"
        assert [c.method for c in api.calls].count("create_pod") == 7 + 4, (
            "this sync's first batch was as large as the last one that succeeded"
        )

    asyncio.run(scenario())


class HeldCreations(FakeApi):
    """Each pod creation waits until the test lets them all through; counts how many
    were in flight at once."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.go = asyncio.Event()
        self.in_flight = 0
        self.most_in_flight = 0

    async def create_pod(self, namespace: str, pod: JsonDict) -> JsonDict:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.go.wait()
            return await super().create_pod(namespace, pod)
        finally:
            self.in_flight -= 1


@pytest.mark.parametrize("creating_syncs", [1, 2])
def test_at_most_concurrent_creating_syncs_create_pods_at_once(creating_syncs: int) -> None:
    async def scenario() -> None:
        api = HeldCreations(JOB)
        writer = controller_for(api, concurrent_creating_syncs=creating_syncs).pods
        jobs = [JobRuntime(api.job), JobRuntime(job_named("other-uid"))]
        applied = [asyncio.create_task(writer.apply(rt, PodPlan(create=1))) for rt in jobs]
        await until(lambda: api.in_flight == creating_syncs)
        for _ in range(10):
            await asyncio.sleep(0)  # a turn for the other sync, were it let through
        assert api.in_flight == creating_syncs
        api.go.set()
        outcomes = await asyncio.gather(*applied)
        assert [o.created for o, _ in outcomes] == [1, 1]
        assert api.most_in_flight == creating_syncs

    asyncio.run(scenario())


# ------------------------------------------------------------ podStartDeadlineSeconds
def _pending(api: FakeApi, name: str) -> PodInfo:
    """A pod of the job that never started, as the pod cache holds it."""
    pod = PodInfo(name, f"uid-{name}", c.PENDING, namespace="ns", label_uid="job-uid")
    api.pods[pod.uid] = pod
    return pod


#: The condition a pod past a 5 s podStartDeadlineSeconds gets.
DEADLINE_CONDITION = failed_condition(5, datetime(2026, 1, 1, 12, tzinfo=UTC))
#: As the status write sends it.
WRITTEN = condition_to_dict(DEADLINE_CONDITION)


def _deadline_plan(*pods: PodInfo) -> PodPlan:
    return PodPlan(
        delete=pods,
        remove_finalizer_before_delete=False,
        fail_condition=DEADLINE_CONDITION,
        reason="start-deadline",
    )


def test_a_pod_past_its_start_deadline_is_failed_then_deleted_finalizer_on() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        writer = controller_for(api).pods
        rt = JobRuntime(api.job)
        plan = _deadline_plan(_pending(api, "a"), _pending(api, "b"))
        outcome, retry_in = await writer.apply(rt, plan)
        assert (outcome.deleted, retry_in) == (("uid-a", "uid-b"), None)
        for name in ("a", "b"):
            made = [(x.method, x.body) for x in api.calls if x.name == name]
            assert made == [("fail_pod", WRITTEN), ("delete_pod", None)]
            pod = api.pods[f"uid-{name}"]
            assert (pod.phase, pod.deleting, pod.has_finalizer) == (c.FAILED, True, True)
        # Expected gone, as any deletion: no sync creates the replacement before the
        # cache shows the pod deleted.
        assert rt.pods.expectations.oldest() is not None

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("error", "event"),
    [
        (ApiError(500, "InternalError", "etcdserver: request timed out"), True),
        # The uid in the patch as precondition: the API server refuses to change it.
        (ApiError(422, "Invalid", 'metadata.uid: Invalid value: "x": field is immutable'), True),
        (ApiError(404, "NotFound", 'pods "a" not found'), False),
    ],
    ids=["refused", "another pod of that name", "gone"],
)
def test_a_pod_whose_condition_was_not_written_is_not_deleted(error: ApiError, event: bool) -> None:
    """Deleted without the condition, the pod would count as an unexplained failure that
    no pod failure policy rule on the condition matches: it waits for the next sync."""

    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = controller_for(api)
        rt = JobRuntime(api.job)
        api.fail("fail_pod", error)
        outcome, _ = await controller.pods.apply(rt, _deadline_plan(_pending(api, "a")))
        assert outcome.deleted == ()
        assert [x.method for x in api.calls] == ["fail_pod"]
        assert api.pods["uid-a"].active
        assert isinstance(controller.pods.recorder, FakeRecorder)
        recorded = [e.reason for e in controller.pods.recorder.events]
        assert recorded == (["FailedDelete"] if event else [])

    asyncio.run(scenario())


def test_the_failed_write_is_conditional_on_the_version_judged_unstarted() -> None:
    """A container that starts between the cache read and the PATCH changes the pod: the
    API server refuses the write (409), the pod is neither failed nor deleted, and no
    Warning is recorded (the next sync judges it again)."""

    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = controller_for(api)
        judged = replace(_pending(api, "a"), unstarted_version="41")
        api.pods[judged.uid] = replace(judged, unstarted_version="", started=True)
        outcome, _ = await controller.pods.apply(JobRuntime(api.job), _deadline_plan(judged))
        assert outcome.deleted == ()
        assert [x.method for x in api.calls] == ["fail_pod"]
        assert api.pods["uid-a"].phase == c.PENDING
        assert isinstance(controller.pods.recorder, FakeRecorder)
        assert controller.pods.recorder.events == []

        api.pods[judged.uid] = judged  # unchanged since: written
        outcome, _ = await controller.pods.apply(JobRuntime(api.job), _deadline_plan(judged))
        assert outcome.deleted == ("uid-a",)

    asyncio.run(scenario())


def test_other_deletions_write_no_condition() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        writer = controller_for(api).pods
        plan = PodPlan(delete=(_pending(api, "a"),), reason="scale-down")
        await writer.apply(JobRuntime(api.job), plan)
        assert [x.method for x in api.calls] == ["remove_pod_finalizer", "delete_pod"]

    asyncio.run(scenario())
