"""The controller's gates on its caches (controller.CacheSync): no job syncs before the
pods are listed, no pod is judged an orphan before the jobs are."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace

from paralleljob.config import ControllerConfig
from paralleljob.core.job.model import PodInfo
from paralleljob.jobs.controller import Controller
from paralleljob.runtime.subscribers import CacheSync
from tests.unit.fake_api import Call, FakeApi, FakeRecorder
from tests.unit.jobs.support import JOB, REFUSED, until

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
    return CacheSync(jobs=asyncio.Event(), current=asyncio.Event(), listed=asyncio.Event())


def test_no_job_syncs_before_the_caches_are_current() -> None:
    """The pods listed (and, under an election, caught up with the API server as of the
    takeover: CacheSync.current, which caches.py sets); but a new job's first sync, in
    the next test."""

    async def run() -> tuple[int, FakeApi]:
        api = FakeApi({**JOB, "status": {"startTime": "2026-12-07T10:00:00Z"}})
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
        release = controller.observe_pod(ORPHAN, gone=False)
        assert release is not None
        await release
        return api.calls

    assert asyncio.run(run()) == [Call("remove_pod_finalizer", "p")]


def _retrying(api: FakeApi, known: set[str]) -> Controller:
    config = ControllerConfig(sync_batch_seconds=0.0, retry_base_seconds=0.001)
    return Controller(api, FakeRecorder(), config, api.pods_of, job_exists=known.__contains__)


def test_a_refused_orphan_release_is_tried_again_until_it_is_done() -> None:
    """Kubernetes 1.37 (syncOrphanPod requeued rate-limited): an orphan's finalizer
    whose removal the API server refused is removed by a later try, without another
    event of the pod."""

    async def run() -> tuple[int, bool]:
        api = FakeApi(copy.deepcopy(JOB))
        api.pods[ORPHAN.uid] = replace(ORPHAN, has_finalizer=True)
        api.fail("remove_pod_finalizer", REFUSED)
        release = _retrying(api, set()).observe_pod(api.pods[ORPHAN.uid], gone=False)
        assert release is not None
        task = asyncio.create_task(release)
        await until(lambda: len(api.calls) >= 3)
        api.heal("remove_pod_finalizer")
        await asyncio.wait_for(task, 5)
        return len(api.calls), api.pods[ORPHAN.uid].has_finalizer

    tries, finalizer = asyncio.run(run())
    assert tries >= 4 and not finalizer


def test_a_retried_orphan_release_stops_once_the_pod_is_no_orphan() -> None:
    """The retries stop when the cache shows the pod's job (listed late) or the pod
    without its finalizer: nothing more is sent."""

    async def run(change: str) -> int:
        api = FakeApi(copy.deepcopy(JOB))
        known: set[str] = set()
        api.pods[ORPHAN.uid] = replace(ORPHAN, has_finalizer=True)
        api.fail("remove_pod_finalizer", REFUSED)
        release = _retrying(api, known).observe_pod(api.pods[ORPHAN.uid], gone=False)
        assert release is not None
        task = asyncio.create_task(release)
        await until(lambda: len(api.calls) >= 2)
        if change == "job":
            known.add("gone-uid")
        else:
            api.pods[ORPHAN.uid] = replace(ORPHAN, has_finalizer=False)
        await asyncio.wait_for(task, 5)
        return len(api.calls)

    for change in ("job", "finalizer"):
        tries = asyncio.run(run(change))
        assert 2 <= tries <= 3, change


def test_a_job_recreated_under_its_name_does_not_wait_for_the_old_one_s_pods() -> None:
    """Kubernetes 1.37 (deleteJob clears the job's expectations,
    TestDeleteJobClearsPodExpectations): the old job's creations, never seen in the pod
    cache, do not hold back the pods of a new job of the same name."""

    async def run() -> list[str]:
        api = FakeApi(copy.deepcopy(JOB))
        controller = _controller(api, set(), CacheSync())
        controller.job_seen(api.job)
        await until(lambda: len(api.created) == 2)
        # The pod cache lost sight of the creations (a slow watch): unsettled.
        api.pods.clear()
        old = controller.jobs["job-uid"]
        assert not old.pods.expectations.satisfied({}, controller.clock.monotonic())
        assert controller.job_deleted("job-uid") == []
        api.job = {**copy.deepcopy(JOB), "metadata": {**JOB["metadata"], "uid": "new-uid"}}
        controller.job_seen(api.job)
        await until(lambda: len(api.created) == 4)
        await controller.stop_all()
        return [api.pods[uid].label_uid or "" for uid in api.created[2:]]

    assert asyncio.run(run()) == ["new-uid", "new-uid"]


def test_a_new_job_syncs_before_the_caches_from_its_pods_as_listed_counting_each_once() -> None:
    """A restart still listing the pods syncs a new job at once, its pods read from the
    API server: those an earlier leader created before it died (its status write never
    made) are counted, not created again; its next sync waits for the caches."""

    async def run() -> tuple[FakeApi, list[str]]:
        api = FakeApi(copy.deepcopy(JOB))
        earlier = _controller(api, set(), CacheSync())
        api.crash(method="patch_job_status")
        earlier.job_seen(api.job)
        await until(lambda: api.crashed)
        await earlier.stop_all()
        api.recover()
        assert (len(api.pods), api.job.get("status")) == (2, None), "2 pods, no status"
        synced = _unsynced()
        controller = _controller(api, set(), synced)
        controller.pods_of = controller.syncer.pods_of = lambda uid: []  # nothing listed yet
        controller.job_seen(api.job)
        await until(lambda: (api.job.get("status") or {}).get("active") == 2)
        methods = [call.method for call in api.calls]
        await controller.stop_all()
        return api, methods

    api, methods = asyncio.run(run())
    assert len(api.pods) == 2, "no pod created twice"
    assert methods.count("list_job_pods") == 1
    assert methods.count("create_pod") == 2, "the earlier leader's two"
