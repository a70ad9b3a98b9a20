"""The wiring (handlers.py): pod changes from the pod informer, and the liveness probe."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

import kopf
import pytest

from paralleljob import constants as c
from paralleljob import handlers
from paralleljob.config import ControllerConfig
from paralleljob.core.kind import PARALLELJOB
from paralleljob.core.model import PodInfo
from paralleljob.shell.controller import Controller
from paralleljob.shell.informer import Informer, ListWatch
from paralleljob.shell.pod_cache import PodCache
from paralleljob.shell.runtime import JobRuntime

from .fake_api import Call, FakeApi, FakeRecorder

# kopf's decorators type handlers as its ActivityFn; call them as the plain coroutines.
progress_probe = cast(Callable[..., Coroutine[Any, Any, dict[str, int]]], handlers.progress)

JOB: dict[str, Any] = {
    "metadata": {"name": "j", "namespace": "ns", "uid": "u-1", "resourceVersion": "5"},
    "spec": {},
}
POD: dict[str, Any] = {
    "metadata": {
        "name": "j-1",
        "namespace": "ns",
        "uid": "p-1",
        "labels": {c.LABEL_CONTROLLER_UID: "u-1"},
        "finalizers": [c.TRACKING_FINALIZER],
    },
    "status": {"phase": c.PENDING},
}


def _memo(
    config: ControllerConfig, jobs: dict[str, bool] | None = None
) -> tuple[kopf.Memo, Controller, FakeApi]:
    """The handlers' memo, its controller reading ``jobs`` as the index of jobs that
    exist (startup hands it kopf's) and the API's pods as the pod index."""
    api = FakeApi(JOB)
    app = handlers.App()
    known = jobs or {}
    controller = Controller(
        api, FakeRecorder(), config, api.pods_of, job_exists=lambda uid: uid in known
    )
    app.kinds = (PARALLELJOB,)
    app.controllers = {PARALLELJOB.kind: controller}
    app.pods = PodCache()
    app.tasks = set()
    return kopf.Memo(app=app), controller, api


async def _pod_event(memo: kopf.Memo) -> None:
    """The pod informer's change for POD, new to it; and the release it called for."""
    app = memo.app
    handlers.pod_changed(app, None, handlers.read_pod(app, POD), gone=False)
    await asyncio.gather(*app.tasks)


def test_a_pod_event_settles_its_job_s_expectations_and_wakes_its_loop() -> None:
    async def run() -> JobRuntime:
        memo, controller, _ = _memo(ControllerConfig(), {"u-1": True})
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        rt.pods.expectations.expect_creation("p-1", 0.0)
        await _pod_event(memo)
        return rt

    rt = asyncio.run(run())
    assert rt.loop.woken
    assert rt.pods.expectations.satisfied({}, now=1.0), "the watch showed the pod created"


@pytest.mark.parametrize(("job_known", "released"), [(False, True), (True, False)])
def test_a_pod_of_no_known_job_loses_its_finalizer(job_known: bool, released: bool) -> None:
    async def run() -> FakeApi:
        memo, _, api = _memo(ControllerConfig(), {"u-1": True} if job_known else {})
        api.pods["p-1"] = PodInfo("j-1", "p-1")
        await _pod_event(memo)
        return api

    api = asyncio.run(run())
    assert api.calls == ([Call("remove_pod_finalizer", "j-1")] if released else [])


def test_the_probe_fails_with_the_stalls_and_passes_otherwise() -> None:
    async def run() -> None:
        memo, controller, _ = _memo(ControllerConfig(stall_seconds=60.0))
        assert await progress_probe(memo=memo) == {"jobs": 0}
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        assert await progress_probe(memo=memo) == {"jobs": 1}
        rt.loop.sync_started = time.monotonic() - 61  # a sync that has hung for a minute
        with pytest.raises(kopf.PermanentError, match=r"no progress: ns/j: sync running for"):
            await progress_probe(memo=memo)

    asyncio.run(run())


def test_the_probe_passes_before_startup() -> None:
    result = asyncio.run(progress_probe(memo=kopf.Memo()))
    assert result == {"jobs": 0}


def test_the_pod_cache_keeps_a_pod_s_completion_index() -> None:
    """The core's Indexed decisions read the index from the pod cache (PodInfo), never a
    pod body: the annotations are parsed into plain int fields."""
    meta = {
        **POD["metadata"],
        "annotations": {
            "paralleljob.dev/job-completion-index": "4",
            "paralleljob.dev/job-index-failure-count": "2",
        },
    }

    async def run() -> list[PodInfo]:
        memo, _, _ = _memo(ControllerConfig(), {"u-1": True})
        cached = handlers.read_pod(memo.app, {**POD, "metadata": meta})
        handlers.pod_changed(memo.app, None, cached, gone=False)
        pods: list[PodInfo] = memo.app.pods.pods_of("u-1")
        return pods

    [pod] = asyncio.run(run())
    assert (pod.completion_index, pod.index_failure_count) == (4, 2)


def test_a_pod_that_is_no_longer_a_job_s_leaves_the_cache_and_wakes_its_job() -> None:
    """Its labels and finalizer removed (PJ_MANAGE_JOBS=all: no selector makes that a
    DELETED event), the pod is out of the informer's scope: its job sees it gone, and
    nothing is released (it holds no finalizer any more)."""

    async def run() -> tuple[JobRuntime, FakeApi, kopf.Memo]:
        memo, controller, api = _memo(ControllerConfig(), {"u-1": True})
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        old = handlers.read_pod(memo.app, POD)
        handlers.pod_changed(memo.app, None, old, gone=False)
        rt.loop.woken_at = None
        handlers.pod_changed(memo.app, old, None, gone=False)
        await asyncio.gather(*memo.app.tasks)
        return rt, api, memo

    rt, api, memo = asyncio.run(run())
    assert memo.app.pods.pods_of("u-1") == []
    assert rt.loop.woken
    assert api.calls == []


def test_kopf_keeps_no_diff_base_of_the_objects() -> None:
    """kopf would deep-copy every object on every event to diff it for change handlers;
    the operator has none, so its diff base is empty and never stored."""
    storage = handlers.NoDiffBase()
    raw = {**POD, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    body = kopf.Body(cast(kopf.RawBody, raw))
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert not patch


@pytest.mark.parametrize(
    ("meta", "watched"),
    [
        pytest.param({"labels": {c.LABEL_CONTROLLER_UID: "u"}}, True, id="the operator's"),
        pytest.param(
            {"labels": {"batch.kubernetes.io/controller-uid": "u"}}, True, id="the built-in's"
        ),
        pytest.param(
            {"labels": {}, "finalizers": ["batch.kubernetes.io/job-tracking"]},
            True,
            id="relabelled, still tracked",
        ),
        pytest.param({"labels": {"app": "web"}, "finalizers": ["x/y"]}, False, id="not a job's"),
        pytest.param({}, False, id="no labels"),
    ],
)
def test_which_pods_the_handlers_see(meta: dict[str, Any], watched: bool) -> None:
    """With PJ_MANAGE_JOBS=all the pod watch has no selector: the handlers take a job's
    pods, and a pod whose labels were removed while it holds a tracking finalizer, which
    its job must release."""
    assert handlers._is_jobs_pod(meta) is watched


def test_a_job_the_jobs_informer_listed_is_no_orphan_s() -> None:
    """Which jobs exist, for the orphan check, is read from the jobs' informers as they
    are when asked (they are started after the controllers are built)."""
    memo, controller, _ = _memo(ControllerConfig())
    app = memo.app
    exists = handlers._job_exists(app, PARALLELJOB, controller)
    listed: Informer[str] = Informer(
        cast(ListWatch, None), project=lambda raw: "", on_change=lambda *_: None, name="pjs"
    )
    listed.store["u-9"] = "u-9"
    app.job_informers = {PARALLELJOB.kind: [listed]}
    assert exists("u-9")
    assert not exists("u-0")


def test_a_job_deleted_mid_sync_releases_the_pods_its_last_sync_created() -> None:
    """kopf's watch shows the deletion first: the loop stops, but its last sync still
    creates a pod, whose event finds the job listed by the (later) jobs' informer. Its
    deletion there releases the pod; a stopped loop alone keeps no job alive."""

    async def run() -> tuple[FakeApi, list[Call]]:
        memo, controller, api = _memo(ControllerConfig())
        app = memo.app
        listed: Informer[str] = Informer(
            cast(ListWatch, None), project=lambda raw: "", on_change=lambda *_: None, name="pjs"
        )
        listed.store["u-1"] = "u-1"  # the informer has not seen the deletion yet
        app.job_informers = {PARALLELJOB.kind: [listed]}
        controller.job_exists = handlers._job_exists(app, PARALLELJOB, controller)
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        rt.loop.stopped = True  # kopf's DELETED came first
        api.pods["p-1"] = PodInfo("j-1", "p-1", label_uid="u-1")
        handlers.pod_changed(app, None, handlers.read_pod(app, POD), gone=False)
        await asyncio.gather(*app.tasks)
        before = list(api.calls)
        del listed.store["u-1"]
        handlers._job_listed(app, PARALLELJOB.kind)("u-1", None, True)
        await asyncio.gather(*app.tasks)
        return api, before

    api, before = asyncio.run(run())
    assert before == [], "the job was still listed when its pod came"
    assert api.calls == [Call("remove_pod_finalizer", "j-1")]


def test_a_deleted_pod_leaves_the_cache_and_wakes_its_job() -> None:
    """The informer hands a DELETED event's last state on (its finalizer matters to the
    controller), but the pod is gone: filed again, a pod deleted before it ended would
    count as terminating for ever and hold its job's terminal condition back."""

    async def run() -> tuple[list[PodInfo], JobRuntime]:
        memo, controller, _ = _memo(ControllerConfig(), {"u-1": True})
        app = memo.app
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        deleting = {**POD, "metadata": {**POD["metadata"], "finalizers": []}}
        cached = handlers.read_pod(app, deleting)
        handlers.pod_changed(app, None, cached, gone=False)
        handlers.pod_changed(app, cached, cached, gone=True)
        await asyncio.gather(*app.tasks)
        pods: list[PodInfo] = app.pods.pods_of("u-1")
        return pods, rt

    pods, rt = asyncio.run(run())
    assert pods == []
    assert rt.loop.woken
