"""The shell (controller.py) against an in-memory API (FakeApi): the job runtime and
the job loops."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.controller import Controller, ControllerConfig, JobRuntime
from paralleljob.model import PodInfo
from paralleljob.timeutil import format_time

from .fake_api import FakeApi, FakeRecorder

JOB: dict[str, Any] = {
    "apiVersion": "paralleljob.dev/v1alpha1",
    "kind": "ParallelJob",
    "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5"},
    "spec": {
        "completions": 3,
        "parallelism": 2,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
    },
}


# -- the job runtime -------------------------------------------------------------------
def test_runtime_keeps_the_newest_job_version() -> None:
    rt = JobRuntime(JOB)
    newer = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "9"}}
    older = {**JOB, "metadata": {**JOB["metadata"], "resourceVersion": "7"}}
    other = {**JOB, "metadata": {**JOB["metadata"], "uid": "u-2", "resourceVersion": "99"}}
    assert rt.offer(newer) and rt.body is newer
    assert not rt.offer(older) and rt.body is newer
    assert not rt.offer(other) and rt.body is newer


def test_a_poke_wakes_the_loop_and_keeps_the_first_wake_time() -> None:
    ticks = iter([1.0, 2.0])
    rt = JobRuntime(JOB, lambda: next(ticks))
    rt.poke()
    rt.poke()
    assert rt.wake.is_set() and rt.woken_at == 1.0


def test_the_loop_clock_shows_the_unsettled_expectations() -> None:
    rt = JobRuntime(JOB)
    rt.expectations.expect_creation("new", 10.0)
    assert rt.loop_clock({}, now=30.0).unobserved_since == 10.0
    assert rt.loop_clock({"new": PodInfo("n", "new")}, now=30.0).unobserved_since is None


def test_a_status_write_is_pending_until_the_job_watch_shows_it() -> None:
    rt = JobRuntime(JOB)
    rt.wrote("5", "7", now=100.0)
    assert rt.loop_clock({}, now=101.0).unechoed_since == 100.0
    rt.wrote("7", "9", now=102.0)  # the oldest unechoed write counts
    rt.watched("6")
    assert rt.loop_clock({}, now=103.0).unechoed_since == 100.0
    rt.watched("8")  # an event at or after the write: it came back
    assert rt.loop_clock({}, now=103.0).unechoed_since is None


def test_writes_the_watch_cannot_echo_are_not_expected() -> None:
    rt = JobRuntime(JOB)
    rt.wrote("7", "7", now=1.0)  # the write changed nothing: no new version, no event
    assert rt.unechoed is None
    rt.watched("12")
    rt.wrote("10", "12", now=2.0)  # the watch showed it before the response arrived
    assert rt.unechoed is None


# -- the job loops -----------------------------------------------------------------------
def _controller(api: FakeApi, **config: Any) -> Controller:
    return Controller(
        api, FakeRecorder(), ControllerConfig(**{"sync_batch_seconds": 0.0, **config})
    )


async def _until(what: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not what():
            await asyncio.sleep(0.005)


def test_the_first_event_of_a_job_starts_its_loop_and_deletion_ends_it() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = _controller(api)
        controller.job_seen(api.job, api.pods_of)
        await _until(lambda: len(api.pods) == 2)
        assert list(controller.jobs) == ["job-uid"]
        assert all(p.has_finalizer for p in api.pods.values())
        task = controller.jobs["job-uid"].task
        await controller.job_gone("job-uid", "ns", api.pods_of)
        assert task is not None
        await asyncio.wait_for(task, 5)
        assert controller.jobs == {}
        assert not any(p.has_finalizer for p in api.pods.values()), (
            "a deleted job's pods are released"
        )

    asyncio.run(scenario())


def test_the_old_kopf_finalizer_is_removed_with_a_resource_version_precondition() -> None:
    async def scenario() -> None:
        job = {**JOB, "metadata": {**JOB["metadata"], "finalizers": [c.KOPF_FINALIZER, "x/y"]}}
        api = FakeApi(job)
        controller = _controller(api)
        controller.job_seen(api.job, api.pods_of)
        await _until(lambda: len(api.pods) == 2)
        assert api.job["metadata"]["finalizers"] == ["x/y"]
        first = api.calls[0]
        assert first.method == "patch_job", "before anything else"
        assert first.body is not None and first.body["metadata"]["resourceVersion"] == "5"
        await controller.stop_all()

    asyncio.run(scenario())


def test_a_job_s_loop_runs_to_complete_and_counts_every_pod_once() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = _controller(api)
        controller.job_seen(api.job, api.pods_of)
        rt = controller.jobs["job-uid"]

        def counted() -> bool:
            for uid, pod in list(api.pods.items()):  # the kubelet: every pod there succeeds
                api.pods[uid] = replace(pod, phase=c.SUCCEEDED)
            rt.poke()
            return bool(api.job.get("status", {}).get("succeeded") == 3)

        await _until(counted)
        status = api.job["status"]
        assert status["statusText"] == "Complete"
        assert status["uncountedTerminatedPods"] in ({}, {"succeeded": [], "failed": []})
        assert len(api.pods) == 3
        await controller.stop_all()

    asyncio.run(scenario())


def test_duration_only_writes_wait_for_a_slot_of_the_shared_budget() -> None:
    async def scenario() -> None:
        apis = [FakeApi(_job(f"u-{i}")) for i in range(3)]
        controller = _controller(apis[0], duration_refresh_qps=0.5)
        runtimes = []
        for api in apis:
            controller.api = api
            rt = JobRuntime(api.job)
            await controller.sync(rt, api.pods_of)  # creates its pods, writes status
            # A minute later, nothing changed but the DURATION text ("0s" -> "60s").
            started = datetime.fromisoformat(api.job["status"]["startTime"])
            api.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
            rt.offer(copy.deepcopy(api.job))
            runtimes.append(rt)
        waits = []
        for api, rt in zip(apis, runtimes, strict=True):
            controller.api = api
            before = len(api.calls)
            waits.append((await controller.sync(rt, api.pods_of)).delay)
            writes = [call for call in api.calls[before:] if call.method == "patch_job_status"]
            assert len(writes) == (1 if api is apis[0] else 0)
        assert apis[0].job["status"]["durationText"] == "60s"
        assert waits[1] == pytest.approx(2.0, abs=0.1), "0.5 writes/s: the second waits 2 s"
        assert waits[2] == pytest.approx(4.0, abs=0.1), "and the third 4 s"
        assert controller.duration_refresh_waiting() == 2

    asyncio.run(scenario())


def _job(uid: str) -> dict[str, Any]:
    return {**JOB, "metadata": {**JOB["metadata"], "uid": uid, "name": f"job-{uid}"}}


def test_an_event_after_a_quiet_spell_syncs_at_once_a_burst_waits_for_the_batch() -> None:
    async def scenario() -> None:
        controller = _controller(FakeApi(JOB), sync_batch_seconds=0.3)
        rt = JobRuntime(JOB)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await controller._batch_events(rt)  # never synced: no wait
        assert loop.time() - started < 0.25
        rt.last_sync_started = time.monotonic()
        started = loop.time()
        await controller._batch_events(rt)  # a sync just started: wait out the batch
        assert loop.time() - started >= 0.25

    asyncio.run(scenario())


def test_a_sync_in_progress_is_marked_and_clears_the_wake() -> None:
    seen: list[tuple[float | None, float | None, float | None]] = []

    class Probe(Controller):
        async def sync_safely(self, rt: JobRuntime, pods_of: Any) -> float | None:
            seen.append((rt.woken_at, rt.timer_due, rt.sync_started))
            rt.poke()  # an event during the sync is pending work again
            return None

    async def run() -> JobRuntime:
        controller = Probe(FakeApi(JOB), FakeRecorder(), ControllerConfig())
        rt = JobRuntime(JOB)
        rt.poke()
        rt.timer_due = 1.0
        await controller._timed_sync(rt, lambda uid: [])
        return rt

    rt = asyncio.run(run())
    [(woken, timer, started)] = seen
    assert woken is None and timer is None and started is not None
    assert rt.sync_started is None and rt.woken_at is not None
