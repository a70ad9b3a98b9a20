"""The shell's loops and writes (controller.py), against an in-memory API (FakeKube)."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from paralleljob import constants as c
from paralleljob.controller import Controller, ControllerConfig, JobRuntime
from paralleljob.events import EventRecorder
from paralleljob.kube import Kube
from paralleljob.timeutil import format_time

from .fake_kube import FakeKube

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


def _controller(fake: FakeKube, **config: Any) -> tuple[Controller, EventRecorder]:
    kube = cast(Kube, fake)
    recorder = EventRecorder(kube)
    settings = ControllerConfig(sync_batch_seconds=0.0, **config)
    return Controller(kube, recorder, settings), recorder


async def _until(what: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not what():
            await asyncio.sleep(0.005)


def test_the_first_event_of_a_job_starts_its_loop_and_deletion_ends_it() -> None:
    async def scenario() -> None:
        fake = FakeKube(JOB)
        controller, recorder = _controller(fake)
        controller.job_seen(fake.job, fake.pods_of)
        await _until(lambda: len(fake.pods) == 2)
        assert list(controller.jobs) == ["job-uid"]
        assert all(c.TRACKING_FINALIZER in p["metadata"]["finalizers"] for p in fake.pods.values())
        task = controller.jobs["job-uid"].task
        await controller.job_gone("job-uid", "ns", fake.pods_of)
        assert task is not None
        await asyncio.wait_for(task, 5)
        assert controller.jobs == {}
        assert all(p["metadata"]["finalizers"] == [] for p in fake.pods.values()), (
            "a deleted job's pods are released"
        )
        await recorder.close()

    asyncio.run(scenario())


def test_the_old_kopf_finalizer_is_removed_with_a_resource_version_precondition() -> None:
    async def scenario() -> None:
        job = {**JOB, "metadata": {**JOB["metadata"], "finalizers": [c.KOPF_FINALIZER, "x/y"]}}
        fake = FakeKube(job)
        controller, recorder = _controller(fake)
        controller.job_seen(fake.job, fake.pods_of)
        await _until(lambda: len(fake.pods) == 2)
        assert fake.job["metadata"]["finalizers"] == ["x/y"]
        assert fake.calls[0] == ("PATCH", "paralleljobs"), "before anything else"
        await controller.stop_all()
        await recorder.close()

    asyncio.run(scenario())


def test_a_job_s_loop_runs_to_complete_and_counts_every_pod_once() -> None:
    async def scenario() -> None:
        fake = FakeKube(JOB)
        controller, recorder = _controller(fake)
        controller.job_seen(fake.job, fake.pods_of)
        rt = controller.jobs["job-uid"]

        def counted() -> bool:
            fake.finish_all()  # the kubelet: every pod there succeeds
            rt.poke()
            return bool(fake.job.get("status", {}).get("succeeded") == 3)

        await _until(counted)
        status = fake.job["status"]
        assert status["statusText"] == "Complete"
        assert status["uncountedTerminatedPods"] in ({}, {"succeeded": [], "failed": []})
        assert len(fake.pods) == 3
        await controller.stop_all()
        await recorder.close()

    asyncio.run(scenario())


def test_duration_only_writes_wait_for_a_slot_of_the_shared_budget() -> None:
    async def scenario() -> None:
        fakes = [FakeKube(_job(f"u-{i}")) for i in range(3)]
        controller, recorder = _controller(fakes[0], duration_refresh_qps=0.5)
        runtimes = []
        for fake in fakes:
            controller.kube = cast(Kube, fake)
            rt = JobRuntime(fake.job)
            await controller.sync(rt, fake.pods_of)  # creates its pods, writes status
            # A minute later, nothing changed but the DURATION text ("0s" -> "60s").
            started = datetime.fromisoformat(fake.job["status"]["startTime"])
            fake.job["status"]["startTime"] = format_time(started - timedelta(seconds=60))
            rt.offer(copy.deepcopy(fake.job))
            runtimes.append(rt)
        waits = []
        for fake, rt in zip(fakes, runtimes, strict=True):
            controller.kube = cast(Kube, fake)
            before = len(fake.calls)
            waits.append(await controller.sync(rt, fake.pods_of))
            writes = [call for call in fake.calls[before:] if call[1] == "paralleljobs/status"]
            assert len(writes) == (1 if fake is fakes[0] else 0)
        assert fakes[0].job["status"]["durationText"] == "60s"
        assert waits[1] == pytest.approx(2.0, abs=0.1), "0.5 writes/s: the second waits 2 s"
        assert waits[2] == pytest.approx(4.0, abs=0.1), "and the third 4 s"
        assert controller.duration_refresh_waiting() == 2
        await recorder.close()

    asyncio.run(scenario())


def _job(uid: str) -> dict[str, Any]:
    return {**JOB, "metadata": {**JOB["metadata"], "uid": uid, "name": f"job-{uid}"}}


def test_an_event_after_a_quiet_spell_syncs_at_once_a_burst_waits_for_the_batch() -> None:
    async def scenario() -> None:
        fake = FakeKube(JOB)
        controller, recorder = _controller(fake)
        controller.config = ControllerConfig(sync_batch_seconds=0.3)
        rt = JobRuntime(fake.job)
        loop = asyncio.get_running_loop()
        started = loop.time()
        await controller._batch_events(rt)  # never synced: no wait
        assert loop.time() - started < 0.25
        rt.last_sync_started = time.monotonic()
        started = loop.time()
        await controller._batch_events(rt)  # a sync just started: wait out the batch
        assert loop.time() - started >= 0.25
        await recorder.close()

    asyncio.run(scenario())
