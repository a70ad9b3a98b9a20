"""The pod writer (pod_writer.py): slow start that resumes where a successful one ended;
at most ``concurrent_creating_syncs`` syncs creating pods at once."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.sync import PodPlan
from paralleljob.json_types import JsonDict
from paralleljob.shell.api import ApiError
from paralleljob.shell.runtime import JobRuntime

from ..fake_api import FakeApi
from .support import JOB, controller_for, job_named, until


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
