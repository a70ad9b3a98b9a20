"""The controller: what the informers (caches.py) and the kopf probe call, one method per
watch event.

It wires the shell's collaborators, each owning its part of a job's state
(runtime.py): the per-job loops (job_loops.py), one sync in upstream's order
(job_sync.py), the pod writer (pod_writer.py) and the status writer
(status_writer.py). Its I/O is injected, as upstream's job controller injects
``podControl`` and ``updateStatusHandler``: API calls go through a
:class:`~.api.ControllerApi`, Events through a :class:`~.events.Recorder`, the pod
cache through ``pods_of`` and the time through a :class:`~.job_sync.Clock`, so that
unit tests run a whole sync against an in-memory API and hold the clock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from .. import constants as c
from ..config import ControllerConfig
from ..core import PARALLELJOB, JobKind, PodInfo, candidate_jobs, managed_by_external_controller
from ..runtime import metrics
from ..runtime.api import ControllerApi
from ..runtime.consistency import CacheVersion, unknown_version
from ..runtime.events import Recorder
from ..runtime.progress import Stall, stalls
from ..runtime.subscribers import CacheSync, Release
from .claims import PodsOf
from .job_loops import JobLoops, loop_clock, pending_since
from .job_runtime import JobRuntime
from .job_sync import REAL_CLOCK, Clock, JobSync
from .pod_writer import PodWriter
from .status_writer import StatusWriter

log = logging.getLogger(__name__)


def _no_job_known(uid: str) -> bool:
    return False


class Controller:
    def __init__(
        self,
        api: ControllerApi,
        recorder: Recorder,
        config: ControllerConfig,
        pods_of: PodsOf,
        clock: Clock = REAL_CLOCK,
        job_exists: Callable[[str], bool] = _no_job_known,
        kind: JobKind = PARALLELJOB,
        synced: CacheSync | None = None,
    ) -> None:
        #: The kind of job this controller runs (core/job/kind.py).
        self.kind = kind
        self.config = config
        self.clock = clock
        self.pods_of = pods_of
        self.job_exists = job_exists
        #: How far the caches have come, per resource and namespace (read-your-writes:
        #: consistency.py); the caches set it when the controller attaches.
        self.cache_version: CacheVersion = unknown_version
        self.pods = PodWriter(api, recorder, config, clock.monotonic)
        self.status = StatusWriter(api, config, clock.monotonic)
        self.syncer = JobSync(
            api, recorder, config, clock, pods_of, self.pods, self.status, self._cache_version
        )
        self.synced = synced or CacheSync()
        self.loops = JobLoops(
            self.syncer.sync,
            config,
            clock.monotonic,
            self.status.forget,
            ready=self.synced.current,
            early_sync=self.syncer.sync_early,
            listed=self.synced.listed,
        )
        #: Pods that looked orphaned before the caches synced, by uid: judged then.
        self.orphans_to_judge: dict[str, PodInfo] = {}
        self.finished_with_finalizer = metrics.FinishedWithFinalizer()
        #: The uids of the jobs another controller runs (spec.managedBy), seen.
        self.left_alone: set[str] = set()

    def _cache_version(self, resource: str, namespace: str) -> int | None:
        return self.cache_version(resource, namespace)

    @property
    def jobs(self) -> dict[str, JobRuntime]:
        return self.loops.jobs

    def duration_refresh_waiting(self) -> int:
        return self.status.duration_refresh_waiting()

    def progress_write_waiting(self) -> int:
        return self.status.progress_write_waiting()

    def pending_syncs(self) -> int:
        return self.loops.pending_syncs()

    def runs(self, uid: str) -> bool:
        """A running loop's job (a stopped loop's job is gone), or one left to another
        controller."""
        rt = self.jobs.get(uid)
        return (rt is not None and not rt.loop.stopped) or uid in self.left_alone

    def known_jobs(self) -> int:
        return len(self.jobs) + len(self.left_alone)

    # -- watch events ------------------------------------------------------------------
    def job_seen(self, body: Mapping[str, Any], *, template: str | None = None) -> None:
        """A watch event (or the initial listing) of an existing job: starts its loop, or
        hands the loop the newer version and wakes it unless the version is its own
        status write. No finalizer is needed: deleting a job never waits for us.
        ``template``: the body's pod template as text, from a standby's record."""
        meta = body["metadata"]
        rt = self.jobs.get(meta["uid"])
        if rt is None:
            spec = body.get("spec") or {}
            if not self.kind.reconciles(spec):
                self._leave_alone(meta, spec)
                return
            rt = JobRuntime(body, self.clock.monotonic, self.kind, template=template)
            self.loops.start(rt)
            return
        rv = meta.get("resourceVersion")
        rt.status.watched(rv)
        if rv is not None and rv == rt.resource_version:
            return  # the version kept: a relisting, or a record's job listed again
        if rt.offer(body) and rv != rt.status.last_written_rv:
            rt.loop.poke()

    def _leave_alone(self, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
        """A job whose spec.managedBy (immutable) names another controller gets no loop
        and no memory but its uid: counted and logged once (addJob)."""
        uid = meta["uid"]
        if uid in self.left_alone:
            return
        self.left_alone.add(uid)
        other = managed_by_external_controller(spec, self.kind)
        metrics.record_job_added(other)
        log.info(
            "%s/%s: skipped, managed by another controller: spec.managedBy=%s",
            meta.get("namespace"),
            meta.get("name"),
            other,
        )

    def job_deleted(self, uid: str) -> list[Coroutine[Any, Any, None]]:
        """The job was deleted (or is no longer listed): its loop ends, and the releases
        of the tracking finalizers its pods still hold (upstream's deleteJob queues them
        as orphans), for the caller to run beside the watch, as the pod deletions go;
        garbage collection deletes the pods by their owner reference. A pod the loop's
        last sync creates after this is an orphan's: released when its event comes
        (observe_pod: a stopped loop's job no longer exists)."""
        self.left_alone.discard(uid)
        rt = self.jobs.get(uid)
        if rt is not None:
            rt.loop.stop()
        return self._release_held(uid)

    def _release_held(self, uid: str) -> list[Coroutine[Any, Any, None]]:
        """The releases of the finalizers the job's pods still hold."""
        held = [pod for pod in self.pods_of(uid) if pod.has_finalizer]
        return [self._release(pod) for pod in held]

    def _release(self, pod: PodInfo) -> Coroutine[Any, Any, None]:
        return self.pods.release_orphan(pod.namespace, pod.name, lambda: self._still_orphan(pod))

    def _still_orphan(self, pod: PodInfo) -> bool:
        """Whether the pod cache still shows ``pod`` with a finalizer and no job of its
        exists (syncOrphanPod's checks before each try)."""
        candidates = candidate_jobs(pod)
        if any(self.job_exists(uid) for uid in candidates):
            return False
        cached = (p for uid in candidates for p in self.pods_of(uid) if p.uid == pod.uid)
        return any(p.has_finalizer for p in cached)

    def observe_pod(self, pod: PodInfo, gone: bool) -> Release:
        """A pod event: it settles the expectations of the jobs it may belong to and
        wakes their loops. Returns the release of an orphan, or of a pod that left the
        watch, for the caller to run (the pod informer runs it beside the watch)."""
        finished = pod.phase in (c.SUCCEEDED, c.FAILED)
        self.finished_with_finalizer.observe(pod.uid, finished and pod.has_finalizer and not gone)
        self.orphans_to_judge.pop(pod.uid, None)
        if gone and pod.has_finalizer:
            # A pod holding a finalizer cannot be gone: its label was removed, so the
            # filtered watch let it go (and shows its last matching state). No job sees
            # it again: release it now, or deleting it would hang on the finalizer.
            return self.pods.release_unwatched(pod)
        looked_at = False
        for uid in candidate_jobs(pod):
            rt = self.jobs.get(uid)
            # A stopped loop (its job deleted) may still be finishing a sync that creates
            # pods: those are orphans already, released below.
            if rt is not None and not rt.loop.stopped:
                rt.pods.expectations.observe_pod(
                    pod.uid, gone=gone, deleting=pod.deleting, has_finalizer=pod.has_finalizer
                )
                rt.loop.poke()
                looked_at = True
        if not pod.has_finalizer or gone or looked_at:
            return None
        if not self.synced.jobs.is_set():
            self.orphans_to_judge[pod.uid] = pod
            return None
        return self._release_if_orphan(pod)

    def _release_if_orphan(self, pod: PodInfo) -> Release:
        if any(self.job_exists(uid) for uid in candidate_jobs(pod)):
            return None
        return self._release(pod)

    async def judge_orphans(self) -> None:
        """The caches have synced: the pods that looked orphaned meanwhile are judged
        now, by which jobs exist (those whose job was listed meanwhile are kept)."""
        pods = list(self.orphans_to_judge.values())
        self.orphans_to_judge.clear()
        releases = [r for r in map(self._release_if_orphan, pods) if r is not None]
        await asyncio.gather(*releases)

    async def stop_all(self) -> None:
        """Operator shutdown: every loop stops after its current sync."""
        await self.loops.stop_all()

    def stalls(self, now: float) -> list[Stall]:
        """The job loops with work pending for longer than ``stall_seconds``; a loop
        with nothing pending that long costs a few comparisons (the probe runs every few
        seconds over every job: reading the pods of all 10,000 jobs woken at a restart
        held the event loop for 0.3 s)."""
        before = now - self.config.stall_seconds
        moved = self.loops.queue_moved
        clocks = {
            f"{rt.namespace}/{rt.name}": loop_clock(
                rt, {p.uid: p for p in self.pods_of(rt.uid)}, now, moved
            )
            for rt in list(self.jobs.values())
            if pending_since(rt, before, moved)
        }
        return stalls(clocks, now, self.config.stall_seconds)
