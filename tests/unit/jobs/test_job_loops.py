"""The job loops (job_loops.py, through the Controller): a job queued by its first
event, forgotten at its deletion, event batching, the progress markers, a few workers
for every job and one timer."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import replace

import pytest

from paralleljob import constants as c
from paralleljob.config import ControllerConfig
from paralleljob.jobs.job_loops import JobLoops, Sync, loop_clock, pending_since
from paralleljob.jobs.job_runtime import JobRuntime
from paralleljob.jobs.job_sync import SyncReport
from tests.unit.fake_api import FakeApi
from tests.unit.jobs.support import JOB, controller_for, job_named, no_sync, until


def test_the_first_event_of_a_job_starts_its_loop_and_deletion_ends_it() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = controller_for(api)
        controller.job_seen(api.job)
        await until(lambda: len(api.pods) == 2)
        assert list(controller.jobs) == ["job-uid"]
        assert all(p.has_finalizer for p in api.pods.values())
        await asyncio.gather(*controller.job_deleted("job-uid"))
        await until(lambda: controller.jobs == {})
        assert not any(p.has_finalizer for p in api.pods.values()), (
            "a deleted job's pods are released"
        )

    asyncio.run(scenario())


def test_a_job_another_controller_runs_gets_no_loop_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """spec.managedBy is immutable: a job that names another controller is remembered by
    its uid only, never synced (no pod, no status, no finalizer), and forgotten once
    deleted."""

    async def scenario() -> None:
        job = {**JOB, "spec": {**JOB["spec"], "managedBy": "kueue.x-k8s.io/multikueue"}}
        api = FakeApi(job)
        controller = controller_for(api)
        with caplog.at_level(logging.INFO, logger="paralleljob.jobs.controller"):
            for _ in range(3):
                controller.job_seen(api.job)
        assert (controller.jobs, controller.left_alone, api.calls) == ({}, {"job-uid"}, [])
        await asyncio.gather(*controller.job_deleted("job-uid"))
        assert controller.left_alone == set()

    asyncio.run(scenario())
    logged = [r.getMessage() for r in caplog.records if "another controller" in r.getMessage()]
    assert len(logged) == 1 and "kueue.x-k8s.io/multikueue" in logged[0]


def test_spec_defaults_are_written_first_with_a_resource_version_precondition() -> None:
    async def scenario() -> None:
        spec = {k: v for k, v in JOB["spec"].items() if k != "parallelism"}
        api = FakeApi({**JOB, "spec": spec})
        controller = controller_for(api)
        controller.job_seen(api.job)
        await until(lambda: len(api.pods) == 1)
        assert api.job["spec"]["parallelism"] == 1
        first = api.calls[0]
        assert first.method == "patch_job", "before anything else"
        assert first.body is not None and first.body["metadata"]["resourceVersion"] == "5"
        await controller.stop_all()

    asyncio.run(scenario())


def test_a_job_s_loop_runs_to_complete_and_counts_every_pod_once() -> None:
    async def scenario() -> None:
        api = FakeApi(JOB)
        controller = controller_for(api)
        controller.job_seen(api.job)
        rt = controller.jobs["job-uid"]

        def counted() -> bool:
            for uid, pod in list(api.pods.items()):  # the kubelet: every pod there succeeds
                api.pods[uid] = replace(pod, phase=c.SUCCEEDED)
            rt.loop.poke()
            return bool(api.job.get("status", {}).get("succeeded") == 3)

        await until(counted)
        status = api.job["status"]
        assert status["statusText"] == "Complete"
        assert status["uncountedTerminatedPods"] in ({}, {"succeeded": [], "failed": []})
        assert len(api.pods) == 3
        await controller.stop_all()

    asyncio.run(scenario())


def test_an_event_after_a_quiet_spell_syncs_at_once_a_burst_waits_for_the_batch() -> None:
    """A job woken long after its last sync is queued at once; one woken right after a
    sync started waits, on the one timer, for the rest of the batch."""

    async def scenario() -> None:
        controller = controller_for(FakeApi(JOB), sync_batch_seconds=30.0)
        loops = controller.loops
        quiet, busy = JobRuntime(JOB), JobRuntime(job_named("busy"))
        for rt in (quiet, busy):
            loops.jobs[rt.uid] = rt
            rt.loop.attach(functools.partial(loops._woken, rt))
        busy.loop.last_sync_started = time.monotonic()
        quiet.loop.poke()
        busy.loop.poke()
        assert loops.pending_syncs() == 1, "the quiet job only"
        assert busy.loop.timer_due is not None
        assert busy.loop.timer_due - time.monotonic() > 29

    asyncio.run(scenario())


def test_a_few_workers_sync_every_job_never_one_job_twice_at_once() -> None:
    """concurrent_syncs workers for all jobs; an event during a job's sync queues it once
    more, after that sync."""
    running: list[str] = []
    overlaps: list[int] = []
    synced: list[str] = []

    async def sync(rt: JobRuntime) -> SyncReport:
        running.append(rt.uid)
        overlaps.append(len(running))
        assert running.count(rt.uid) == 1, "one job's syncs never overlap"
        await asyncio.sleep(0.01)
        if rt.uid == "j-0" and synced.count("j-0") == 0:
            rt.loop.poke()  # an event while it syncs
        running.remove(rt.uid)
        synced.append(rt.uid)
        return SyncReport(delay=None)

    async def scenario() -> None:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=3)
        loops = JobLoops(sync, config, time.monotonic, on_end=lambda rt: None)
        for i in range(10):
            loops.start(JobRuntime(job_named(f"j-{i}")))
        await until(lambda: len(synced) == 11)
        await loops.stop_all()

    asyncio.run(scenario())
    assert max(overlaps) == 3
    assert synced.count("j-0") == 2


def test_a_worker_lets_the_event_loop_run_between_syncs_that_make_no_call() -> None:
    """Syncs that write nothing never wait: the worker still yields after each, so that
    a backlog of them does not hold the event loop."""
    synced: list[str] = []
    ran_after: list[int] = []

    async def sync(rt: JobRuntime) -> SyncReport:
        if not synced:  # a callback waits for the loop's turn from the first sync on
            asyncio.get_running_loop().call_soon(lambda: ran_after.append(len(synced)))
        synced.append(rt.uid)
        return SyncReport(delay=None)

    async def scenario() -> None:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=1)
        ready = asyncio.Event()  # every job queued before the one worker starts
        loops = JobLoops(sync, config, time.monotonic, on_end=lambda rt: None, ready=ready)
        for i in range(20):
            loops.start(JobRuntime(job_named(f"j-{i}")))
        ready.set()
        await until(lambda: len(synced) == 20)
        await loops.stop_all()

    asyncio.run(scenario())
    assert ran_after == [1], "the loop ran right after the first sync, not after all 20"


def test_the_delay_a_sync_asks_for_is_one_timer_that_queues_the_job() -> None:
    synced: list[float] = []

    async def sync(rt: JobRuntime) -> SyncReport:
        synced.append(time.monotonic())
        return SyncReport(delay=0.05 if len(synced) == 1 else None)

    async def scenario() -> None:
        loops = JobLoops(sync, ControllerConfig(), time.monotonic, on_end=lambda rt: None)
        loops.start(JobRuntime(JOB))
        await until(lambda: len(synced) == 2)
        await loops.stop_all()

    asyncio.run(scenario())
    assert synced[1] - synced[0] >= 0.05


def test_a_sync_in_progress_is_marked_and_clears_the_wake() -> None:
    seen: list[tuple[float | None, float | None, float | None]] = []

    class Probe(JobLoops):
        async def sync_safely(self, rt: JobRuntime, sync: Sync | None = None) -> float | None:
            seen.append((rt.loop.woken_at, rt.loop.timer_due, rt.loop.sync_started))
            rt.loop.poke()  # an event during the sync is pending work again
            return None

    async def run() -> tuple[JobRuntime, JobLoops]:
        loops = Probe(no_sync, ControllerConfig(), time.monotonic, on_end=lambda rt: None)
        rt = JobRuntime(JOB)
        rt.loop.poke()
        rt.loop.timer_due = 1.0
        await loops.timed_sync(rt)
        return rt, loops

    rt, loops = asyncio.run(run())
    [(woken, timer, started)] = seen
    assert woken is None and timer is None and started is not None
    assert loops.queue_moved == started, "the work queue moved when the sync started"
    assert rt.loop.sync_started is None and rt.loop.woken_at is not None


def _marked(marker: str, at: float) -> JobRuntime:
    rt = JobRuntime(JOB)
    if marker == "woken":
        rt.loop.woken_at = at
    elif marker == "timer":
        rt.loop.timer_due = at
    elif marker == "sync":
        rt.loop.sync_started = at
    elif marker == "unechoed":
        rt.status.unechoed = (7, at)
    elif marker == "expected":
        rt.pods.expectations.expect_creation("p-1", at)
    return rt


@pytest.mark.parametrize("marker", ["woken", "timer", "sync", "unechoed", "expected"])
@pytest.mark.parametrize(("at", "pending"), [(9.0, True), (10.0, True), (10.5, False)])
def test_the_probe_looks_at_a_loop_only_once_its_work_is_pending_that_long(
    marker: str, at: float, pending: bool
) -> None:
    """pending_since(rt, 10): work pending since 10 or earlier may be a stall; work
    newer than that (every job woken by a restart's listing) is not read at all."""
    assert pending_since(_marked(marker, at), before=10.0) is pending


def test_an_idle_loop_is_never_pending() -> None:
    assert not pending_since(JobRuntime(JOB), before=float("inf"))


@pytest.mark.parametrize(("queue_moved", "pending"), [(5.0, True), (11.0, False)])
def test_a_job_waiting_for_a_worker_waits_since_the_queue_last_moved(
    queue_moved: float, pending: bool
) -> None:
    """A backlog the workers are getting through is not a stall: woken at 1, the job
    counts as waiting since the last sync a worker started."""
    rt = _marked("woken", 1.0)
    assert pending_since(rt, before=10.0, queue_moved=queue_moved) is pending
    clock = loop_clock(rt, {}, now=200.0, queue_moved=queue_moved)
    assert clock.woken_at == max(1.0, queue_moved)


def test_a_job_no_controller_has_started_is_synced_before_the_resyncs_queued_first() -> None:
    """A restart queues every job it lists; one created meanwhile (no status.startTime)
    goes ahead of them, as do the other new ones, in the order they came."""
    synced: list[str] = []

    async def sync(rt: JobRuntime) -> SyncReport:
        synced.append(rt.uid)
        return SyncReport(delay=None)

    def started(uid: str) -> JobRuntime:
        job = job_named(uid)
        return JobRuntime({**job, "status": {"startTime": "2026-12-02T10:00:00Z"}})

    async def scenario() -> None:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=1)
        ready = asyncio.Event()  # the caches not in sync yet: everything waits in the queue
        loops = JobLoops(sync, config, time.monotonic, on_end=lambda rt: None, ready=ready)
        for uid in ("old-1", "old-2"):
            loops.start(started(uid))
        loops.start(JobRuntime(job_named("new-1")))
        loops.start(started("old-3"))
        loops.start(JobRuntime(job_named("new-2")))
        ready.set()
        await until(lambda: len(synced) == 5)
        await loops.stop_all()

    asyncio.run(scenario())
    assert synced == ["new-1", "new-2", "old-1", "old-2", "old-3"]


def test_before_the_caches_are_current_only_the_new_jobs_sync_and_early() -> None:
    """A restart lists every pod before its syncs start (they would create the pods they
    cannot see); a new job's first sync reads its own pods and goes at once, the others
    wait for the caches, then sync as usual."""
    early: list[str] = []
    synced: list[str] = []
    release = asyncio.Event()

    async def sync(rt: JobRuntime) -> SyncReport:
        synced.append(rt.uid)
        return SyncReport(delay=None)

    async def early_sync(rt: JobRuntime) -> SyncReport:
        early.append(rt.uid)
        await release.wait()
        return SyncReport(delay=None)

    async def scenario() -> None:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=3)
        ready = asyncio.Event()
        loops = JobLoops(
            sync, config, time.monotonic, lambda rt: None, ready=ready, early_sync=early_sync
        )
        started = job_named("old-1") | {"status": {"startTime": "2026-12-02T10:00:00Z"}}
        loops.start(JobRuntime(started))
        loops.start(JobRuntime(job_named("new-1")))
        await until(lambda: early == ["new-1"])
        assert synced == [], "the other workers took nothing"
        loops.jobs["new-1"].loop.poke()  # its pods' events: it waits for the caches now
        release.set()
        await until(lambda: loops.pending_syncs() == 1)
        assert (early, synced) == (["new-1"], [])
        ready.set()
        await until(lambda: sorted(synced) == ["new-1", "old-1"])
        await loops.stop_all()

    asyncio.run(scenario())


class _Syncs:
    """The loops' syncs, each recording the jobs it was given: the usual and the early."""

    def __init__(self) -> None:
        self.synced: list[str] = []
        self.early: list[str] = []

    async def sync(self, rt: JobRuntime) -> SyncReport:
        self.synced.append(rt.uid)
        return SyncReport(delay=None)

    async def early_sync(self, rt: JobRuntime) -> SyncReport:
        self.early.append(rt.uid)
        return SyncReport(delay=None)

    def loops(self, ready: asyncio.Event, listed: asyncio.Event | None = None) -> JobLoops:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=1)
        return JobLoops(
            self.sync, config, time.monotonic, lambda rt: None, ready, self.early_sync, listed
        )


def test_past_the_early_syncs_allowed_a_new_job_waits_for_the_caches_then_goes_first() -> None:
    """Each early sync is a LIST the API server filters over the namespace's pods: a
    start makes EARLY_SYNCS_AT_MOST of them, then the new jobs wait as every job did,
    ahead of the others once the caches are current."""
    syncs = _Syncs()

    async def scenario() -> None:
        ready = asyncio.Event()
        loops = syncs.loops(ready)
        loops._early_left = 2
        started = job_named("old-1") | {"status": {"startTime": "2026-12-02T10:00:00Z"}}
        loops.start(JobRuntime(started))
        for uid in ("new-1", "new-2", "new-3"):
            loops.start(JobRuntime(job_named(uid)))
        await until(lambda: len(syncs.early) == 2 and loops.pending_syncs() == 2)
        assert (syncs.early, syncs.synced) == (["new-1", "new-2"], [])
        ready.set()
        await until(lambda: len(syncs.synced) == 2)
        await loops.stop_all()

    asyncio.run(scenario())
    assert syncs.synced == ["new-3", "old-1"]


def test_a_standby_that_leads_has_its_pods_listed_and_syncs_no_job_early() -> None:
    """A takeover's caches are listed, current about a second later (caught up): a
    LIST of a new job's pods would only cost the API server."""
    syncs = _Syncs()

    async def scenario() -> None:
        ready, listed = asyncio.Event(), asyncio.Event()
        listed.set()
        loops = syncs.loops(ready, listed)
        loops.start(JobRuntime(job_named("new-1")))
        for _ in range(10):  # turns of the event loop for the workers, which take nothing
            await asyncio.sleep(0)
        assert loops.pending_syncs() == 1
        assert (syncs.early, syncs.synced) == ([], [])
        ready.set()
        await until(lambda: syncs.synced == ["new-1"])
        await loops.stop_all()

    asyncio.run(scenario())
    assert syncs.early == []


def test_a_new_job_whose_early_sync_wrote_its_spec_defaults_syncs_early_again() -> None:
    """A ParallelJob without parallelism gets its spec defaults written first, and the
    sync ends there (sync again at once): still new, it goes early again, for its pods."""
    early: list[float | None] = []

    async def early_sync(rt: JobRuntime) -> SyncReport:
        early.append(0.0 if not early else None)
        return SyncReport(delay=early[-1])

    async def scenario() -> None:
        config = ControllerConfig(sync_batch_seconds=0.0, concurrent_syncs=1)
        ready = asyncio.Event()
        loops = JobLoops(no_sync, config, time.monotonic, lambda rt: None, ready, early_sync)
        loops.start(JobRuntime(job_named("new-1")))
        await until(lambda: len(early) == 2)
        await loops.stop_all()

    asyncio.run(scenario())
    assert early == [0.0, None]
