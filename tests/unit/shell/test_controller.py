"""The controller's gates on its caches (controller.CacheSync): no job syncs before the
pods are listed, no pod is judged an orphan before the jobs are."""

from __future__ import annotations

import asyncio
import copy

from paralleljob.config import ControllerConfig
from paralleljob.core.model import PodInfo
from paralleljob.shell.controller import CacheSync, Controller

from ..fake_api import Call, FakeApi, FakeRecorder
from .support import JOB, until

ORPHAN = PodInfo("p", "p-1", label_uid="gone-uid", controller_uid="gone-uid", namespace="ns")


def _controller(api: FakeApi, known: set[str], synced: CacheSync) -> Controller:
    return Controller(
        api,
        FakeRecorder(),
        ControllerConfig(sync_batch_seconds=0.0),
        api.pods_of,
        job_exists=known.__contains__,
        synced=synced,
    )


def _unsynced() -> CacheSync:
    return CacheSync(jobs=asyncio.Event(), current=asyncio.Event())


def test_no_job_syncs_before_the_caches_are_current() -> None:
    """The pods listed (and, under an election, caught up with the API server as of the
    takeover: CacheSync.current, which caches.py sets)."""

    async def run() -> tuple[int, FakeApi]:
        api = FakeApi(copy.deepcopy(JOB))
        synced = _unsynced()
        controller = _controller(api, set(), synced)
        controller.job_seen(api.job)
        for _ in range(20):
            await asyncio.sleep(0)
        before = len(api.calls)
        synced.current.set()
        await until(lambda: len(api.pods) == 2)
        await controller.stop_all()
        return before, api

    before, api = asyncio.run(run())
    assert before == 0, "nothing was written while the pods were being listed"
    assert [call.method for call in api.calls].count("create_pod") == 2


def test_a_pod_of_an_unknown_job_is_judged_once_the_jobs_are_listed() -> None:
    """While the jobs are being listed, a pod whose job is not known yet may be one of a
    job listed later: it is kept, and released only if its job is still unknown."""

    async def run(known_later: bool) -> list[Call]:
        api = FakeApi(copy.deepcopy(JOB))
        known: set[str] = set()
        synced = _unsynced()
        controller = _controller(api, known, synced)
        assert controller.observe_pod(ORPHAN, gone=False) is None
        assert api.calls == []
        if known_later:
            known.add("gone-uid")
        synced.jobs.set()
        await controller.judge_orphans()
        return api.calls

    assert asyncio.run(run(known_later=False)) == [Call("remove_pod_finalizer", "p")]
    assert asyncio.run(run(known_later=True)) == []


def test_a_pod_deleted_before_the_jobs_are_listed_is_not_judged() -> None:
    async def run() -> list[Call]:
        api = FakeApi(copy.deepcopy(JOB))
        synced = _unsynced()
        controller = _controller(api, set(), synced)
        controller.observe_pod(ORPHAN, gone=False)
        gone = PodInfo("p", "p-1", has_finalizer=False, label_uid="gone-uid", namespace="ns")
        assert controller.observe_pod(gone, gone=True) is None
        synced.jobs.set()
        await controller.judge_orphans()
        return api.calls

    assert asyncio.run(run()) == []


def test_once_synced_an_orphan_is_released_at_once() -> None:
    async def run() -> list[Call]:
        api = FakeApi(copy.deepcopy(JOB))
        controller = _controller(api, set(), CacheSync())
        await controller.pod_seen(ORPHAN, gone=False)
        return api.calls

    assert asyncio.run(run()) == [Call("remove_pod_finalizer", "p")]
