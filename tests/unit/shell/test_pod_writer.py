"""The pod writer (pod_writer.py): slow start that resumes where a successful one ended."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from paralleljob import constants as c
from paralleljob.shell.api import ApiError
from paralleljob.shell.runtime import JobRuntime

from ..fake_api import FakeApi
from .support import JOB, controller_for


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
