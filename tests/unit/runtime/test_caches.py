"""The caches (runtime/caches.py): pod changes from the pod informer, which jobs exist, and the
controllers attached to caches a standby kept in sync."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, cast

import pytest

from paralleljob import constants as c
from paralleljob.config import MANAGE_JOBS_OFF, ControllerConfig, OperatorConfig
from paralleljob.core.job.kind import PARALLELJOB, is_jobs_pod
from paralleljob.core.job.model import PodInfo
from paralleljob.jobs.controller import Controller
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.runtime.caches import Caches
from paralleljob.runtime.job_records import CachedJob
from paralleljob.runtime.kube import Kube
from paralleljob.runtime.kueue_cache import KueueCache
from tests.unit.fake_api import Call, FakeApi, FakeRecorder
from tests.unit.jobs.support import until

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


def _caches() -> Caches:
    """ParallelJobs' caches, no informer started (their client is never called)."""
    return Caches(cast(Kube, None), OperatorConfig(manage_jobs=MANAGE_JOBS_OFF))


def _attached(
    config: ControllerConfig, jobs: dict[str, bool] | None = None
) -> tuple[Caches, Controller, FakeApi]:
    """Caches with a controller attached, which reads ``jobs`` as the jobs that exist and
    the API's pods as the pod cache."""
    api = FakeApi(JOB)
    known = jobs or {}
    controller = Controller(
        api, FakeRecorder(), config, api.pods_of, job_exists=lambda uid: uid in known
    )
    caches = _caches()
    caches.controllers = {PARALLELJOB.kind: controller}
    return caches, controller, api


def _listed(caches: Caches, *uids: str) -> None:
    """The jobs' informer lists these jobs."""
    [informer] = caches.job_informers[PARALLELJOB.kind]
    informer.store.update({uid: CachedJob(uid) for uid in uids})


async def _pod_event(caches: Caches, body: dict[str, Any] = POD) -> None:
    """The pod informer's change for a pod new to it; and the release it called for."""
    caches.pod_changed(None, caches.read_pod(body), gone=False)
    await asyncio.gather(*caches.tasks)


def test_a_pod_event_settles_its_job_s_expectations_and_wakes_its_loop() -> None:
    async def run() -> JobRuntime:
        caches, controller, _ = _attached(ControllerConfig(), {"u-1": True})
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        rt.pods.expectations.expect_creation("p-1", 0.0)
        await _pod_event(caches)
        return rt

    rt = asyncio.run(run())
    assert rt.loop.woken
    assert rt.pods.expectations.satisfied({}, now=1.0), "the watch showed the pod created"


@pytest.mark.parametrize(("job_known", "released"), [(False, True), (True, False)])
def test_a_pod_of_no_known_job_loses_its_finalizer(job_known: bool, released: bool) -> None:
    async def run() -> FakeApi:
        caches, _, api = _attached(ControllerConfig(), {"u-1": True} if job_known else {})
        api.pods["p-1"] = PodInfo("j-1", "p-1")
        await _pod_event(caches)
        return api

    api = asyncio.run(run())
    assert api.calls == ([Call("remove_pod_finalizer", "j-1")] if released else [])


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
    caches, _, _ = _attached(ControllerConfig(), {"u-1": True})
    caches.pod_changed(None, caches.read_pod({**POD, "metadata": meta}), gone=False)
    [pod] = caches.pods.pods_of("u-1")
    assert (pod.completion_index, pod.index_failure_count) == (4, 2)


def test_a_pod_that_is_no_longer_a_job_s_leaves_the_cache_and_wakes_its_job() -> None:
    """Its labels and finalizer removed (PJ_MANAGE_JOBS=all: no selector makes that a
    DELETED event), the pod is out of the informer's scope: its job sees it gone, and
    nothing is released (it holds no finalizer any more)."""

    async def run() -> tuple[JobRuntime, FakeApi, Caches]:
        caches, controller, api = _attached(ControllerConfig(), {"u-1": True})
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        old = caches.read_pod(POD)
        caches.pod_changed(None, old, gone=False)
        rt.loop.woken_at = None
        caches.pod_changed(old, None, gone=False)
        await asyncio.gather(*caches.tasks)
        return rt, api, caches

    rt, api, caches = asyncio.run(run())
    assert caches.pods.pods_of("u-1") == []
    assert rt.loop.woken
    assert api.calls == []


def test_a_deleted_pod_leaves_the_cache_and_wakes_its_job() -> None:
    """The informer hands a DELETED event's last state on (its finalizer matters to the
    controller), but the pod is gone: filed again, a pod deleted before it ended would
    count as terminating for ever and hold its job's terminal condition back."""

    async def run() -> tuple[list[PodInfo], JobRuntime]:
        caches, controller, _ = _attached(ControllerConfig(), {"u-1": True})
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        cached = caches.read_pod({**POD, "metadata": {**POD["metadata"], "finalizers": []}})
        caches.pod_changed(None, cached, gone=False)
        caches.pod_changed(cached, cached, gone=True)
        await asyncio.gather(*caches.tasks)
        return caches.pods.pods_of("u-1"), rt

    pods, rt = asyncio.run(run())
    assert pods == []
    assert rt.loop.woken


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
def test_which_pods_the_caches_keep(meta: dict[str, Any], watched: bool) -> None:
    """With PJ_MANAGE_JOBS=all the pod watch has no selector: the caches take a job's
    pods, and a pod whose labels were removed while it holds a tracking finalizer, which
    its job must release."""
    assert is_jobs_pod(meta) is watched


def test_a_job_the_jobs_informer_listed_is_no_orphan_s() -> None:
    """Which jobs exist, for the orphan check, is read from the jobs' informers as they
    are when asked."""
    caches, controller, _ = _attached(ControllerConfig())
    exists = caches.job_exists_for(PARALLELJOB.kind, controller)
    _listed(caches, "u-9")
    assert exists("u-9")
    assert not exists("u-0")


def test_a_job_deleted_mid_sync_releases_the_pods_its_last_sync_created() -> None:
    """kopf's watch shows the deletion first: the loop stops, but its last sync still
    creates a pod, whose event finds the job listed by the (later) jobs' informer. Its
    deletion there releases the pod; a stopped loop alone keeps no job alive."""

    async def run() -> tuple[FakeApi, list[Call]]:
        caches, controller, api = _attached(ControllerConfig())
        _listed(caches, "u-1")  # the informer has not seen the deletion yet
        controller.job_exists = caches.job_exists_for(PARALLELJOB.kind, controller)
        rt = JobRuntime(JOB)
        controller.jobs[rt.uid] = rt
        rt.loop.stopped = True  # kopf's DELETED came first
        api.pods["p-1"] = PodInfo("j-1", "p-1", label_uid="u-1")
        await _pod_event(caches)
        before = list(api.calls)
        [informer] = caches.job_informers[PARALLELJOB.kind]
        del informer.store["u-1"]
        caches._job_listed(PARALLELJOB.kind)(CachedJob("u-1"), None, True)
        await asyncio.gather(*caches.tasks)
        return api, before

    api, before = asyncio.run(run())
    assert before == [], "the job was still listed when its pod came"
    assert api.calls == [Call("remove_pod_finalizer", "j-1")]


# -- a warm standby ---------------------------------------------------------------------
def _standby_with(pods: list[dict[str, Any]], *, listed: tuple[str, ...]) -> Caches:
    """Caches a standby kept: these pods cached, these jobs listed, both in sync."""
    caches = _caches()
    [pod_informer] = caches.pod_informers
    for body in pods:
        cached = caches.read_pod(body)
        assert cached is not None
        pod_informer.store[body["metadata"]["uid"]] = cached
        caches.pod_changed(None, cached, gone=False)
    _listed(caches, *listed)
    caches.synced.current.set()
    caches.synced.jobs.set()
    return caches


def _pod(name: str, job_uid: str) -> dict[str, Any]:
    meta = {**POD["metadata"], "name": name, "uid": f"uid-{name}"}
    return {**POD, "metadata": {**meta, "labels": {c.LABEL_CONTROLLER_UID: job_uid}}}


def test_a_standby_files_pods_for_no_controller() -> None:
    """Standing by, pods are cached and nothing else happens: no controller, so no
    release, even of a pod whose job is not listed."""

    async def run() -> Caches:
        caches = _caches()
        await _pod_event(caches, _pod("lone", "u-gone"))
        return caches

    caches = asyncio.run(run())
    assert [p.name for p in caches.pods.pods_of("u-gone")] == ["lone"]
    assert not caches.tasks


def test_controllers_attached_to_a_warm_cache_judge_its_orphans() -> None:
    """Attached once leading, the controller sees every cached pod as a listing would
    have handed it on: the pod of a job no longer listed (deleted while no replica led)
    is released; the pod of a listed job is kept, and in the cache for its job's sync."""

    async def run() -> tuple[FakeApi, Caches]:
        caches = _standby_with([_pod("kept", "u-1"), _pod("orphan", "u-gone")], listed=("u-1",))
        api = FakeApi(JOB)
        api.pods["uid-orphan"] = PodInfo("orphan", "uid-orphan")
        controller = Controller(api, FakeRecorder(), ControllerConfig(), caches.pods.pods_of)
        await caches.attach({PARALLELJOB.kind: controller})
        await asyncio.gather(*caches.tasks - _freezes(caches))
        for task in _freezes(caches):
            task.cancel()
        return api, caches

    api, caches = asyncio.run(run())
    assert api.calls == [Call("remove_pod_finalizer", "orphan")]
    assert [p.name for p in caches.pods.pods_of("u-1")] == ["kept"]


def _freezes(caches: Caches) -> set[asyncio.Task[None]]:
    return {t for t in caches.tasks if t.get_name().startswith("freeze")}


def test_the_startup_is_busy_until_the_controller_has_seen_every_listed_job() -> None:
    """The freezes go on while the controller has not seen every job the jobs' informer
    lists (a warm standby's caches are in sync before the records start the jobs)."""
    caches = _standby_with([], listed=("u-1",))
    controller = Controller(FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of)
    caches.controllers = {PARALLELJOB.kind: controller}
    assert caches._busy()
    controller.jobs["u-1"] = JobRuntime(JOB)
    assert not caches._busy()


# -- the jobs a standby keeps -----------------------------------------------------------
def _job(name: str, uid: str, rv: str, **status: Any) -> dict[str, Any]:
    meta = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "resourceVersion": rv,
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
    }
    return {"metadata": meta, "spec": {"parallelism": 1}, "status": status}


def _read(caches: Caches, body: dict[str, Any]) -> CachedJob:
    [informer] = caches.job_informers[PARALLELJOB.kind]
    cached = informer._project(body)
    assert cached is not None
    informer.store[cached[0]] = cached
    return cached


def test_a_standby_keeps_each_job_s_record_without_its_managed_fields() -> None:
    caches = _caches()
    uid, record, _, new = _read(caches, _job("a", "u-a", "7", startTime="2026-12-03T10:00:00Z"))
    assert (uid, new) == ("u-a", False)
    assert _read(caches, _job("c", "u-c", "9")).new, "no controller started it yet"
    kept = json.loads(record)
    assert kept["metadata"] == {
        "name": "a",
        "namespace": "ns",
        "uid": "u-a",
        "resourceVersion": "7",
    }
    assert kept["spec"] == {"parallelism": 1}
    assert kept["status"] == {"startTime": "2026-12-03T10:00:00Z"}
    other = _job("b", "u-b", "8")
    other["spec"]["managedBy"] = "example.com/other"
    assert _read(caches, other) == CachedJob("u-b"), "a job left to another controller: no record"


def test_the_leader_starts_the_cached_jobs_new_ones_first_and_keeps_no_record() -> None:
    """Attached, the controller runs every job the standby kept, without listing them
    again; the job created last (during the failover) first. A relisting of the same
    version then changes nothing."""

    async def run() -> tuple[list[str], Caches, Controller]:
        caches = _standby_with([], listed=())
        _read(caches, _job("old", "u-old", "5", startTime="2026-12-03T10:00:00Z"))
        _read(caches, _job("new", "u-new", "9"))
        _read(caches, _job("older", "u-older", "3", startTime="2026-12-03T09:00:00Z"))
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        await caches.attach({PARALLELJOB.kind: controller})
        order = list(controller.jobs)
        woken = {uid: rt.loop.woken for uid, rt in controller.jobs.items()}
        controller.job_seen(_job("old", "u-old", "5", startTime="2026-12-03T10:00:00Z"))
        assert {uid: rt.loop.woken for uid, rt in controller.jobs.items()} == woken
        await controller.stop_all()
        for task in list(caches.tasks):
            task.cancel()
        return order, caches, controller

    order, caches, _ = asyncio.run(run())
    assert order == ["u-new", "u-older", "u-old"], "the new job, then the last seen first"
    [informer] = caches.job_informers[PARALLELJOB.kind]
    assert informer.store == {uid: CachedJob(uid) for uid in ("u-old", "u-new", "u-older")}
    assert _read(caches, _job("later", "u-later", "11")) == CachedJob("u-later"), "leading"


def test_a_record_keeps_the_template_as_the_runtime_will_and_hands_it_over() -> None:
    """The standby's record keeps the pod template apart, as text; the runtime started
    from it keeps that text (nothing serialized again at the takeover) and reads the
    job as the body says."""
    body = _job("t", "u-t", "4")
    template = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "w"}]}}
    body["spec"]["template"] = template
    caches = _standby_with([], listed=())
    cached = _read(caches, body)
    assert "template" not in json.loads(cached.record)["spec"]
    assert json.loads(cached.template) == template

    async def run() -> JobRuntime:
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        await caches.attach({PARALLELJOB.kind: controller})
        [rt] = controller.jobs.values()
        await controller.stop_all()
        for task in list(caches.tasks):
            task.cancel()
        return rt

    rt = asyncio.run(run())
    assert rt._template is cached.template
    assert rt.body["spec"] == {"parallelism": 1, "template": template}
    assert rt.job.spec.containers_text == "w"


# -- a takeover trusts nothing stale (issue 34) ------------------------------------------
class Etcd:
    """One resourceVersion counter for every resource, as etcd's revision."""

    def __init__(self) -> None:
        self.rv = 0


class Server:
    """One resource as the API server's watch cache serves it: a long watch brings the
    events there when it started, then nothing (a standby whose watch is behind); a
    watch of at most 3 s ends with a bookmark at the current version."""

    def __init__(self, etcd: Etcd) -> None:
        self.etcd = etcd
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    def put(self, body: dict[str, Any]) -> None:
        self.etcd.rv += 1
        meta = {**body["metadata"], "resourceVersion": str(self.etcd.rv)}
        body = {**body, "metadata": meta}
        kind = "MODIFIED" if meta["uid"] in self.objects else "ADDED"
        self.objects[meta["uid"]] = body
        self.events.append({"type": kind, "object": body})

    async def list_page(self, query: list[tuple[str, str]]) -> dict[str, Any]:
        items = list(self.objects.values())[: int(dict(query)["limit"])]
        return {"metadata": {"resourceVersion": str(self.etcd.rv)}, "items": items}

    def watch(self, query: list[tuple[str, str]]) -> Any:
        args = dict(query)
        return self._watch(int(args["resourceVersion"]), int(args["timeoutSeconds"]))

    async def _watch(self, since: int, timeout: int) -> Any:
        await asyncio.sleep(0)
        for event in list(self.events):
            if int(event["object"]["metadata"]["resourceVersion"]) > since:
                yield event
        if timeout <= 3:
            rv = str(self.etcd.rv)
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv}}}
            return
        self.idle.set()
        await asyncio.Event().wait()


async def _standing_by(jobs: Server, pods: Server, crons: Server | None = None) -> Caches:
    """An elected replica's caches, standing by: listed, and their long watches idle."""
    crons = crons or Server(jobs.etcd)
    caches = Caches(cast(Kube, None), OperatorConfig(manage_jobs=MANAGE_JOBS_OFF), elected=True)
    caches.job_informers[PARALLELJOB.kind][0]._source = jobs
    caches.pod_informers[0]._source = pods
    caches.cron_informers[0]._source = crons
    caches.start()
    idle = (jobs.idle.wait(), pods.idle.wait(), crons.idle.wait())
    await asyncio.wait_for(asyncio.gather(*idle), 5)
    return caches


async def _stop(caches: Caches) -> None:
    """The informers and gates stopped (their client is no real one to close)."""
    tasks = list(caches.tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def test_a_takeover_acts_on_nothing_older_than_the_api_server() -> None:
    """The leader being replaced started a job and created its pod; the standby's
    watches had not brought either when it took the Lease. The new leader starts the job
    from its version now (not the record it kept), and syncs no job before its pod cache
    shows that pod: without the catch-up it would create the pod again."""

    async def run() -> tuple[list[str], bool]:
        etcd = Etcd()
        jobs, pods = Server(etcd), Server(etcd)
        jobs.put(_job("a", "u-a", "0"))
        caches = await _standing_by(jobs, pods)
        # The last leader's writes, after the standby's watches last brought anything.
        jobs.put(_job("a", "u-a", "0", startTime="2026-12-04T10:00:00Z"))
        pods.put(_pod("a-1", "u-a"))
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        current_before_attach = caches.synced.current.is_set()
        await asyncio.wait_for(caches.attach({PARALLELJOB.kind: controller}), 5)
        await asyncio.wait_for(caches.synced.current.wait(), 5)
        seen = [p.name for p in caches.pods.pods_of("u-a")]
        await controller.stop_all()
        await _stop(caches)
        return seen, current_before_attach

    seen, current_before_attach = asyncio.run(run())
    assert not current_before_attach, "no job syncs on what the standby cached"
    assert seen == ["a-1"], "the last leader's pod is in the cache before any sync"


def test_a_takeover_starts_a_job_from_its_version_at_the_api_server() -> None:
    async def run() -> JobRuntime:
        etcd = Etcd()
        jobs, pods = Server(etcd), Server(etcd)
        jobs.put(_job("a", "u-a", "0"))
        caches = await _standing_by(jobs, pods)
        jobs.put(_job("a", "u-a", "0", startTime="2026-12-04T10:00:00Z"))
        api = FakeApi(JOB)
        controller = Controller(api, FakeRecorder(), ControllerConfig(), caches.pods.pods_of)
        await asyncio.wait_for(caches.attach({PARALLELJOB.kind: controller}), 5)
        rt = controller.jobs["u-a"]
        await controller.stop_all()
        await _stop(caches)
        return rt

    rt = asyncio.run(run())
    assert rt.resource_version == "2", "the version the last leader wrote, not the record's 1"


# Issue 34 named these ways for stale state to act; each is tested above or below, or
# cannot happen any more, for the reason given:
# - a job deleted while a stream relisted after a 410 kept its pods' finalizers: a relist
#   that no longer shows a job is its deletion (Informer.list_all hands on ``gone``), the
#   same call as a DELETED event, tested next;
# - a late event of the other stream restarted a deleted job's loop: there is no other
#   stream (one watch per kind; tests/chaos/test_takeover.py counts the watches), and
#   one watch's events come in order, nothing after a DELETED;
# - starting the cached jobs revived a job deleted meanwhile: tested below;
# - finalizers released for pods whose job is not known yet: a pod is created after its
#   job, by a process that knew the job; alone, this process's first job listing comes
#   after every earlier process's writes; under an election, the job informers have
#   caught up with the API server as of the takeover before any pod is judged
#   (attach), and the fence keeps a deposed leader from creating pods after it;
# - a standby taking over with its own stale caches and none of the last leader's
#   expectations: the takeover tests below (and the fence, tests/unit/election/test_fence.py);
# - finalizer-removal expectations expiring: tests/unit/jobs/test_expectations.py.


def test_the_jobs_informer_hands_each_job_to_its_loop_and_its_deletion_ends_it() -> None:
    """One watch per kind: the informer's events are what the loops read (kopf watches
    no job). A deletion, or a relisting that no longer shows the job, ends its loop and
    releases its pods."""

    async def run() -> tuple[Controller, FakeApi, JobRuntime]:
        caches, controller, api = _attached(ControllerConfig())
        caches._job_watched(PARALLELJOB.kind)(JOB)
        rt = controller.jobs[JOB["metadata"]["uid"]]
        api.pods["p"] = PodInfo("p", "p", label_uid=rt.uid)
        caches._job_listed(PARALLELJOB.kind)(CachedJob(rt.uid), None, True)
        await asyncio.gather(*caches.tasks)
        await controller.stop_all()
        return controller, api, rt

    controller, api, rt = asyncio.run(run())
    assert rt.loop.stopped and controller.jobs == {}
    assert Call("remove_pod_finalizer", "p") in api.calls, "its pods released"


def test_a_job_deleted_while_the_records_start_is_not_revived(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new leader starts the standby's records a batch at a time, and the informer
    runs between two batches: a job deleted then must not be started from its record
    (nor put back in the informer's store)."""
    import paralleljob.runtime.caches as caches_module

    monkeypatch.setattr(caches_module, "REPLAY_YIELD_EVERY", 1)

    async def run() -> tuple[list[str], Caches]:
        caches = _standby_with([], listed=())
        _read(caches, _job("a", "u-a", "5"))
        _read(caches, _job("b", "u-b", "6"))  # the last seen: started first
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        attaching = asyncio.create_task(caches.attach({PARALLELJOB.kind: controller}))
        await asyncio.sleep(0)  # attach starts "b", then yields
        assert list(controller.jobs) == ["u-b"]
        [informer] = caches.job_informers[PARALLELJOB.kind]
        caches._job_listed(PARALLELJOB.kind)(informer.store.pop("u-a"), None, True)
        await attaching
        started = list(controller.jobs)
        await controller.stop_all()
        await _stop(caches)
        return started, caches

    started, caches = asyncio.run(run())
    [informer] = caches.job_informers[PARALLELJOB.kind]
    assert started == ["u-b"] and "u-a" not in informer.store


class CronsSeen:
    """A cron subscriber that keeps what the caches publish."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.deleted: list[str] = []
        self.woken: list[str] = []

    def cron_seen(self, body: Mapping[str, Any]) -> None:
        self.seen[body["metadata"]["uid"]] = body["metadata"]["resourceVersion"]

    def cron_deleted(self, uid: str) -> None:
        self.deleted.append(uid)

    def job_changed(self, owner: str) -> None:
        self.woken.append(owner)


def _cron(name: str, uid: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": uid, "managedFields": [{"manager": "x"}]}
    return {"metadata": meta, "spec": {"schedule": "* * * * *"}}


def test_a_takeover_hands_the_cron_subscriber_every_parallelcronjob_as_of_now() -> None:
    """A ParallelCronJob the last leader saw created after the standby's watch last
    brought anything is handed over at the takeover (caught up like the jobs), without
    the metadata no controller reads; a deletion after it is published too."""

    async def run() -> tuple[CronsSeen, Caches]:
        etcd = Etcd()
        jobs, pods, crons = Server(etcd), Server(etcd), Server(etcd)
        crons.put(_cron("old", "c-old"))
        caches = await _standing_by(jobs, pods, crons)
        crons.put(_cron("new", "c-new"))
        subscriber = CronsSeen()
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        await asyncio.wait_for(caches.attach({PARALLELJOB.kind: controller}, subscriber), 5)
        [informer] = caches.cron_informers
        assert "managedFields" not in informer.store["c-new"]["metadata"]
        caches._cron_changed(informer.store["c-old"], None, True)  # a re-list's drop
        await controller.stop_all()
        await _stop(caches)
        return subscriber, caches

    subscriber, caches = asyncio.run(run())
    assert set(subscriber.seen) == {"c-old", "c-new"}
    assert subscriber.deleted == ["c-old"]
    assert caches.cron_children.changed == subscriber.job_changed


class KueueWoken:
    """A Kueue subscriber that keeps the keys it is woken with."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def changed(self, key: str) -> None:
        self.keys.append(key)


def _workload(name: str, uid: str, owner: str) -> dict[str, Any]:
    ref = {"apiVersion": c.API_VERSION, "kind": c.KIND, "name": owner, "uid": f"u-{owner}"}
    return {"metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": [ref]}}


def test_a_takeover_wakes_the_kueue_subscriber_for_every_queued_job_and_workload() -> None:
    """A standby's Kueue cache, filled before it leads: at the takeover every job that
    owns a Workload (one made after the standby's watch last brought anything too: the
    Kueue informers catch up like the jobs') and every queued job is handed over, so a
    Workload whose job went while no replica led is released."""

    async def run() -> list[str]:
        etcd = Etcd()
        jobs, pods, crons, workloads, flavors = (Server(etcd) for _ in range(5))
        queued = _job("queued", "u-queued", "0")
        queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
        jobs.put(queued)
        jobs.put(_job("plain", "u-plain", "0"))
        workloads.put(_workload("wl-gone", "w-gone", "gone"))
        caches = Caches(cast(Kube, None), OperatorConfig(manage_jobs=MANAGE_JOBS_OFF), elected=True)
        caches.kueue = KueueCache(cast(Kube, None), caches.scopes)
        for informer, source in (
            (caches.job_informers[PARALLELJOB.kind][0], jobs),
            (caches.pod_informers[0], pods),
            (caches.cron_informers[0], crons),
            (caches.kueue.workload_informers[0], workloads),
            (caches.kueue.flavor_informer, flavors),
        ):
            informer._source = source
        caches.start()
        servers = (jobs, pods, crons, workloads, flavors)
        await asyncio.wait_for(asyncio.gather(*(s.idle.wait() for s in servers)), 5)
        workloads.put(_workload("wl-late", "w-late", "late"))
        subscriber = KueueWoken()
        controller = Controller(
            FakeApi(JOB), FakeRecorder(), ControllerConfig(), caches.pods.pods_of
        )
        await asyncio.wait_for(caches.attach({PARALLELJOB.kind: controller}, None, subscriber), 5)
        await controller.stop_all()
        await _stop(caches)
        return subscriber.keys

    assert sorted(set(asyncio.run(run()))) == ["ns/gone", "ns/late", "ns/queued"]


class HeldServer(Server):
    """A Server whose LIST waits until ``release`` is set, logging each LIST's name."""

    def __init__(self, etcd: Etcd, name: str, log: list[str]) -> None:
        super().__init__(etcd)
        self.name, self.log, self.release = name, log, asyncio.Event()

    async def list_page(self, query: list[tuple[str, str]]) -> dict[str, Any]:
        self.log.append(self.name)
        await self.release.wait()
        return await super().list_page(query)


@pytest.mark.parametrize(("elected", "first"), [(False, ["jobs"]), (True, ["jobs", "pods"])])
def test_a_process_that_leads_at_once_lists_its_jobs_before_its_pods(
    elected: bool, first: list[str]
) -> None:
    """Alone, the pods are listed once the jobs are (a restart's new jobs are seen
    early, JobLoops); a standby lists both at once."""

    async def run() -> list[str]:
        etcd, log = Etcd(), list[str]()
        jobs, pods = HeldServer(etcd, "jobs", log), HeldServer(etcd, "pods", log)
        config = OperatorConfig(manage_jobs=MANAGE_JOBS_OFF)
        caches = Caches(cast(Kube, None), config, elected=elected)
        caches.job_informers[PARALLELJOB.kind][0]._source = jobs
        caches.pod_informers[0]._source = pods
        caches.cron_informers[0]._source = Server(etcd)
        caches.start()
        await until(lambda: "jobs" in log)
        for _ in range(10):
            await asyncio.sleep(0)
        held = sorted(log)
        jobs.release.set()
        pods.release.set()
        await until(lambda: "pods" in log)
        await _stop(caches)
        return held

    assert asyncio.run(run()) == first
