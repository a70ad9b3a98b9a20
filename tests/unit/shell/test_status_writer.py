"""The status writer's shared budgets (status_writer.py): DURATION refreshes and
progress writes wait for slots shared by all jobs, and for a busy client."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.config import ControllerConfig
from paralleljob.shell.controller import Controller
from paralleljob.shell.job_sync import Clock
from paralleljob.shell.runtime import JobRuntime
from paralleljob.timeutil import format_time

from ..fake_api import FakeApi, FakeRecorder
from .support import controller_for, job_named, use_api

WRITE, RELEASE = "patch_job_status", "remove_pod_finalizer"


def test_duration_only_writes_wait_for_a_slot_of_the_shared_budget() -> None:
    async def scenario() -> None:
        apis = [FakeApi(job_named(f"u-{i}")) for i in range(3)]
        controller = controller_for(apis[0], duration_refresh_qps=0.5)
        runtimes = []
        for api in apis:
            use_api(controller, api)
            rt = JobRuntime(api.job)
            await controller.syncer.sync(rt)  # creates its pods, writes status
            # A minute later, nothing changed but the DURATION text ("0s" -> "60s").
            started = datetime.fromisoformat(api.job["status"]["startTime"])
            api.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
            rt.offer(copy.deepcopy(api.job))
            runtimes.append(rt)
        waits = []
        for api, rt in zip(apis, runtimes, strict=True):
            use_api(controller, api)
            before = len(api.calls)
            waits.append((await controller.syncer.sync(rt)).delay)
            writes = [call for call in api.calls[before:] if call.method == WRITE]
            assert len(writes) == (1 if api is apis[0] else 0)
        assert apis[0].job["status"]["durationText"] == "60s"
        # 0.5 writes/s: one slot per 2 s; the second job gets the next slot (at most
        # 2 s away), the third the one after it.
        assert waits[1] is not None and 0 < waits[1] <= 2.1
        assert waits[2] == pytest.approx(waits[1] + 2.0, abs=0.1)
        assert controller.duration_refresh_waiting() == 2

    asyncio.run(scenario())


def test_progress_writes_of_many_jobs_share_the_progress_budget() -> None:
    async def scenario() -> None:
        apis = [FakeApi(job_named(f"u-{i}")) for i in range(3)]
        controller = controller_for(apis[0], status_batch_seconds=0.0, progress_write_qps=0.5)
        runtimes = []
        for api in apis:
            use_api(controller, api)
            rt = JobRuntime(api.job)
            await controller.syncer.sync(rt)  # creates its pods, writes the start
            runtimes.append(rt)

        async def one_pod_succeeds_and_syncs(api: FakeApi, rt: JobRuntime) -> tuple[float, int]:
            uid = sorted(api.pods)[0]
            api.pods[uid] = replace(api.pods[uid], phase=c.SUCCEEDED)
            use_api(controller, api)
            rt.offer(copy.deepcopy(api.job))
            before = len(api.calls)
            delay = (await controller.syncer.sync(rt)).delay
            released = [call for call in api.calls[before:] if call.method == RELEASE]
            return delay or 0.0, len(released)

        results = [
            await one_pod_succeeds_and_syncs(a, r) for a, r in zip(apis, runtimes, strict=True)
        ]
        # 0.5 writes/s: one slot per 2 s. The first job records its pod and releases its
        # finalizer now, and its counting write takes the next slot; the other jobs wait
        # for the slots after it, their finalizers with them (their replacement pods are
        # created at once).
        assert [released for _, released in results] == [1, 0, 0]
        assert [wait > 0 for wait, _ in results] == [True, True, True]
        assert results[1][0] == pytest.approx(results[0][0] + 2.0, abs=0.1)
        assert results[2][0] == pytest.approx(results[1][0] + 2.0, abs=0.1)
        assert all(len(api.pods) == 3 for api in apis), "replaced without waiting"
        assert controller.progress_write_waiting() == 3
        # A failure is no progress: written at once, and the slot is freed for others.
        api, rt = apis[2], runtimes[2]
        uid = next(u for u, p in sorted(api.pods.items()) if p.phase != c.SUCCEEDED)
        api.pods[uid] = replace(api.pods[uid], phase=c.FAILED)
        rt.offer(copy.deepcopy(api.job))
        use_api(controller, api)
        await controller.syncer.sync(rt)
        assert api.job["status"]["failed"] == 1
        assert controller.progress_write_waiting() == 2

    asyncio.run(scenario())


def test_duration_only_writes_wait_while_the_api_client_is_busy() -> None:
    async def scenario() -> None:
        api = FakeApi(job_named("u-busy"))
        controller = controller_for(api)
        rt = JobRuntime(api.job)
        await controller.syncer.sync(rt)
        started = datetime.fromisoformat(api.job["status"]["startTime"])
        api.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
        rt.offer(copy.deepcopy(api.job))
        api.busy = True
        before = len(api.calls)
        report = await controller.syncer.sync(rt)
        assert [c.method for c in api.calls[before:]] == [], "no cosmetic write while busy"
        assert report.delay == pytest.approx(1.0)
        api.busy = False
        await controller.syncer.sync(rt)
        assert api.job["status"]["durationText"] == "60s"

    asyncio.run(scenario())


def test_duration_only_writes_wait_while_jobs_wait_for_the_progress_budget() -> None:
    async def scenario() -> None:
        busy, idle = FakeApi(job_named("u-progress")), FakeApi(job_named("u-idle"))
        config = ControllerConfig(
            sync_batch_seconds=0.0, status_batch_seconds=0.0, progress_write_qps=0.5
        )
        # Held mid-slot: the busy job's first progress write is due now, its next one not.
        now = [1001.0]
        controller = Controller(
            busy, FakeRecorder(), config, busy.pods_of, clock=Clock(monotonic=lambda: now[0])
        )
        busy_rt, idle_rt = JobRuntime(busy.job), JobRuntime(idle.job)
        for api, rt in ((busy, busy_rt), (idle, idle_rt)):
            use_api(controller, api)
            await controller.syncer.sync(rt)
        # The busy job's progress takes a slot of the budget two seconds ahead.
        use_api(controller, busy)
        for _ in range(2):
            uid = next(u for u, p in sorted(busy.pods.items()) if p.phase != c.SUCCEEDED)
            busy.pods[uid] = replace(busy.pods[uid], phase=c.SUCCEEDED)
            busy_rt.offer(copy.deepcopy(busy.job))
            await controller.syncer.sync(busy_rt)
        assert controller.progress_write_waiting() == 1
        # The idle job's DURATION is a minute stale: its refresh waits for that write.
        use_api(controller, idle)
        started = datetime.fromisoformat(idle.job["status"]["startTime"])
        idle.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
        idle_rt.offer(copy.deepcopy(idle.job))
        before = len(idle.calls)
        report = await controller.syncer.sync(idle_rt)
        assert [c.method for c in idle.calls[before:]] == [], "no cosmetic write meanwhile"
        assert report.delay == pytest.approx(1.0)
        # The busy job's slots come, one per 2 s: it records its pod, then counts it.
        use_api(controller, busy)
        for _ in range(2):
            now[0] += 2.0
            busy_rt.offer(copy.deepcopy(busy.job))
            await controller.syncer.sync(busy_rt)
        assert controller.progress_write_waiting() == 0
        use_api(controller, idle)
        await controller.syncer.sync(idle_rt)
        assert idle.job["status"]["durationText"] == "60s"

    asyncio.run(scenario())
