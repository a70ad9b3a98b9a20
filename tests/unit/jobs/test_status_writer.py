"""The status writer's shared budgets (status_writer.py): DURATION refreshes and
progress writes wait for slots shared by all jobs, and for a busy client.

Both clocks are held (support.HeldClock): the budgets' slots are measured on the
monotonic one and DURATION on the wall clock, and a start time has whole seconds, so a
test on the real clocks sees "61s" for "60s" whenever it runs across a second boundary
(more often under load), and slot waits shrink by the time its own syncs took."""

from __future__ import annotations

import asyncio
import copy
import heapq
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from paralleljob import constants as c
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.timeutil import format_time
from tests.unit.fake_api import FakeApi
from tests.unit.jobs.support import HeldClock, controller_for, job_named, use_api

WRITE, RELEASE = "patch_job_status", "remove_pod_finalizer"


def _started_a_minute_ago(api: FakeApi, rt: JobRuntime) -> None:
    """Nothing changed but the DURATION text ("0s" -> "60s")."""
    started = datetime.fromisoformat(api.job["status"]["startTime"])
    api.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
    rt.offer(copy.deepcopy(api.job))


async def _started(
    controller: Controller, held: HeldClock, uids: list[str]
) -> list[tuple[FakeApi, JobRuntime]]:
    """A job per uid, each synced once (its pods created, its status written)."""
    jobs = []
    for uid in uids:
        api = FakeApi(job_named(uid), now=lambda: held.wall)
        use_api(controller, api)
        rt = JobRuntime(api.job, controller.clock.monotonic)
        await controller.syncer.sync(rt)
        jobs.append((api, rt))
    return jobs


def test_duration_only_writes_wait_for_a_slot_of_the_shared_budget() -> None:
    async def scenario() -> None:
        held = HeldClock()
        controller = controller_for(FakeApi(job_named("u-0")), held.clock, duration_refresh_qps=0.5)
        jobs = await _started(controller, held, [f"u-{i}" for i in range(3)])
        for api, rt in jobs:
            _started_a_minute_ago(api, rt)
        waits = []
        for api, rt in jobs:
            use_api(controller, api)
            before = len(api.calls)
            waits.append((await controller.syncer.sync(rt)).delay)
            writes = [call for call in api.calls[before:] if call.method == WRITE]
            assert len(writes) == (1 if api is jobs[0][0] else 0)
        assert jobs[0][0].job["status"]["durationText"] == "60s"
        # 0.5 writes/s: one slot per 2 s; the first job used the one that had come, the
        # second job gets the next slot, the third the one after it.
        assert waits[1:] == [pytest.approx(2.0), pytest.approx(4.0)]
        assert controller.duration_refresh_waiting() == 2

    asyncio.run(scenario())


def test_progress_writes_of_many_jobs_share_the_progress_budget() -> None:
    async def scenario() -> None:
        held = HeldClock()
        controller = controller_for(
            FakeApi(job_named("u-0")), held.clock, status_batch_seconds=0.0, progress_write_qps=0.5
        )
        jobs = await _started(controller, held, [f"u-{i}" for i in range(3)])

        async def one_pod_succeeds_and_syncs(api: FakeApi, rt: JobRuntime) -> tuple[float, int]:
            uid = sorted(api.pods)[0]
            api.pods[uid] = replace(api.pods[uid], phase=c.SUCCEEDED)
            use_api(controller, api)
            rt.offer(copy.deepcopy(api.job))
            before = len(api.calls)
            delay = (await controller.syncer.sync(rt)).delay
            released = [call for call in api.calls[before:] if call.method == RELEASE]
            return delay or 0.0, len(released)

        results = [await one_pod_succeeds_and_syncs(api, rt) for api, rt in jobs]
        # 0.5 writes/s: one slot per 2 s. The first job records its pod and releases its
        # finalizer now, and its counting write takes the next slot; the other jobs wait
        # for the slots after it, their finalizers with them (their replacement pods are
        # created at once).
        assert [released for _, released in results] == [1, 0, 0]
        assert [wait for wait, _ in results] == [
            pytest.approx(2.0),
            pytest.approx(4.0),
            pytest.approx(6.0),
        ]
        assert all(len(api.pods) == 3 for api, _ in jobs), "replaced without waiting"
        assert controller.progress_write_waiting() == 3
        # A failure is no progress: written at once, and the slot is freed for others.
        api, rt = jobs[2]
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
        held = HeldClock()
        # DURATION: 5 writes/s, a slot per 0.2 s.
        controller = controller_for(FakeApi(job_named("u-busy")), held.clock)
        [(api, rt)] = await _started(controller, held, ["u-busy"])
        _started_a_minute_ago(api, rt)
        api.busy = True
        before = len(api.calls)
        report = await controller.syncer.sync(rt)
        assert [c.method for c in api.calls[before:]] == [], "no cosmetic write while busy"
        assert report.delay == pytest.approx(0.2), "the slot that came went unused: the next"
        api.busy = False
        held.advance(0.2)
        await controller.syncer.sync(rt)
        assert api.job["status"]["durationText"] == "60s"

    asyncio.run(scenario())


def test_duration_only_writes_wait_while_jobs_wait_for_the_progress_budget() -> None:
    async def scenario() -> None:
        held = HeldClock(mono=1001.0)
        # Held mid-slot: the busy job's first progress write is due now, its next one not.
        controller = controller_for(
            FakeApi(job_named("u-progress")),
            held.clock,
            status_batch_seconds=0.0,
            progress_write_qps=0.5,
        )
        (busy, busy_rt), (idle, idle_rt) = await _started(
            controller, held, ["u-progress", "u-idle"]
        )
        # The busy job's progress takes a slot of the budget two seconds ahead.
        use_api(controller, busy)
        for _ in range(2):
            uid = next(u for u, p in sorted(busy.pods.items()) if p.phase != c.SUCCEEDED)
            busy.pods[uid] = replace(busy.pods[uid], phase=c.SUCCEEDED)
            busy_rt.offer(copy.deepcopy(busy.job))
            await controller.syncer.sync(busy_rt)
        assert controller.progress_write_waiting() == 1
        # The idle job's DURATION is a minute stale: its refresh waits for that write,
        # its slot (5 writes/s) unused: it syncs again at its next one.
        use_api(controller, idle)
        _started_a_minute_ago(idle, idle_rt)
        before = len(idle.calls)
        report = await controller.syncer.sync(idle_rt)
        assert [c.method for c in idle.calls[before:]] == [], "no cosmetic write meanwhile"
        assert report.delay == pytest.approx(0.2)
        # The busy job's slots come, one per 2 s: it records its pod, then counts it.
        use_api(controller, busy)
        for _ in range(2):
            held.advance(2.0)
            busy_rt.offer(copy.deepcopy(busy.job))
            await controller.syncer.sync(busy_rt)
        assert controller.progress_write_waiting() == 0
        use_api(controller, idle)
        await controller.syncer.sync(idle_rt)
        assert idle.job["status"]["durationText"] == "64s"

    asyncio.run(scenario())


def test_jobs_that_only_wait_for_duration_sync_at_their_slots_not_every_second() -> None:
    """Issue 23's re-sync storm: while a job waits for the progress budget, jobs whose
    only change is DURATION each synced again once a second (2,000 jobs: 2,000 syncs a
    second). They sync in their slots of the DURATION budget: 5 a second in all, however
    many jobs wait; and once the progress budget is free, each refreshes in its slot."""

    async def scenario() -> None:
        held = HeldClock()
        jobs_n, rate, seconds = 20, 5.0, 20.0
        controller = controller_for(
            FakeApi(job_named("u-0")), held.clock, duration_refresh_qps=rate
        )
        jobs = await _started(controller, held, [f"u-{i}" for i in range(jobs_n)])
        progress = controller.status.progress_slots
        assert progress is not None
        progress.slot("a-job-with-progress-to-write", held.mono)  # holds the budget
        for api, rt in jobs:
            _started_a_minute_ago(api, rt)
        syncs: Counter[int] = Counter()
        due = [(held.mono, i) for i in range(jobs_n)]

        async def run_until(end: float) -> None:
            while due and due[0][0] <= end:
                at, i = heapq.heappop(due)
                held.advance(at - held.mono)
                api, rt = jobs[i]
                use_api(controller, api)
                delay = (await controller.syncer.sync(rt)).delay
                syncs[i] += 1
                assert delay is not None and delay > 0, "a job held back must not spin"
                heapq.heappush(due, (held.mono + delay, i))

        start = held.mono
        await run_until(start + seconds)
        assert controller.progress_write_waiting() == 1
        assert {api.job["status"]["durationText"] for api, _ in jobs} == {"0s"}, "none written"
        # Each job's first sync, then a sync per slot of the budget, none written.
        assert sum(syncs.values()) <= jobs_n + rate * seconds + 1
        assert max(syncs.values()) <= 2 + seconds / (jobs_n / rate)
        # The progress budget is free again: every job refreshes in its next slot.
        progress.release("a-job-with-progress-to-write", held.mono)
        await run_until(held.mono + jobs_n / rate + 1.0)
        # Started 60 s before the held clock's whole second, 20 s ago; 4 s of slots.
        written = {api.job["status"]["durationText"] for api, _ in jobs}
        assert written <= {f"{s}s" for s in range(80, 86)}

    asyncio.run(scenario())
