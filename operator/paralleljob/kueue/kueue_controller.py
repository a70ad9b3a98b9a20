"""Queued ParallelJobs on the operator's runtime: Kueue v0.17.0's JobReconciler
(``pkg/controller/jobframework/reconciler.go``) for a ParallelJob, as Kueue runs it for
a batch/v1 Job, so that Kueue's scheduler queues, admits and preempts the job as one
Workload.

The Kueue cache (runtime/kueue_cache.py) wakes a job's key, ``namespace/name``, when the
job or one of its Workloads changes; each key is synced by one of a few workers of one
work queue with the shared timers and retry back-off (sync_loops.py): the pure decision
(core/kueue/workload_sync.py) over what the cache holds, then its writes in order
through :class:`~.api.KueueControl`, stopping at the first that fails. Every write of
an object the decision read carries the resourceVersion it read (a 409 makes the next
sync decide on the newer one); each answer is kept (the next sync never decides on the
version before its own write), and a sync that wrote runs again at once, as Kueue's
reconciler runs again on the events of its own writes.

What the cache cannot tell is read live: a job with Workloads but not in the cache (it
lost its queue label, or is gone), and, when the decision needs it (a Workload to create
or reprioritize), the job's priority (its WorkloadPriorityClass, the template's
PriorityClass or the cluster's global default), as Kueue's ``ExtractPriority`` reads
them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from .. import constants as c
from ..config import ControllerConfig
from ..core import (
    POD_PRIORITY_CLASS,
    PRIORITY_CLASS_LABEL,
    PRIORITY_MISSING,
    RESOURCE_IN_USE_FINALIZER,
    WORKLOAD_PRIORITY_CLASS,
    Action,
    CreateWorkload,
    DeleteWorkload,
    KueueInput,
    PatchJob,
    PatchWorkloadStatus,
    Priority,
    QueuedJob,
    RemoveFinalizer,
    UpdateWorkload,
    Workload,
    parse_queued_job,
    plan_workload_sync,
)
from ..json_types import JsonDict
from ..runtime.api import ApiError, KueueControl
from ..runtime.events import JobRef, Recorder
from ..runtime.kueue_cache import KueueCache
from ..runtime.sync_loops import SyncLoops

log = logging.getLogger(__name__)

#: Kueue's default concurrency for a job integration's reconciler is 1 per kind; a
#: few workers keep one slow write from holding every other job.
KUEUE_WORKERS = 3
#: How soon a sync the decision asked to repeat runs again (Kueue returns an error:
#: its work queue's back-off starts at 5 ms; a second is enough for a write to show).
REQUEUE_SECONDS = 1.0


class KueueController:
    def __init__(
        self,
        api: KueueControl,
        recorder: Recorder,
        cache: KueueCache,
        config: ControllerConfig,
        *,
        monotonic: Callable[[], float],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        wait_for_pods_ready: bool = False,
        ready: asyncio.Event | None = None,
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.cache = cache
        self.now = now
        self.wait_for_pods_ready = wait_for_pods_ready
        self.loops = SyncLoops(
            self.sync, config, monotonic, workers=KUEUE_WORKERS, name="kueue", ready=ready
        )

    def changed(self, key: str) -> None:
        """KueueSubscriber: the job or one of its Workloads changed."""
        self.loops.add(key)

    async def stop_all(self) -> None:
        await self.loops.stop()

    # -- one sync ------------------------------------------------------------------------
    async def sync(self, key: str) -> float | None:
        known = self.cache.job(key)
        workloads = self.cache.workloads_of(key)
        if known is None and not workloads:
            self.loops.forget(key)
            return None
        if known is None:
            known = await self._read_live(key)
        job, version = known if known is not None else (None, "")
        inp = KueueInput(
            job=job,
            workloads=workloads,
            flavors=self.cache.flavors(),
            now=self.now(),
            wait_for_pods_ready=self.wait_for_pods_ready,
        )
        plan = plan_workload_sync(inp)
        if plan is not None and plan.error == PRIORITY_MISSING and job is not None:
            # Only a Workload's creation or a change of its priority reads the classes.
            plan = plan_workload_sync(replace(inp, priority=await self._priority(job)))
        if plan is None:
            return None
        ref = _ref(job, key)
        for event in plan.events:
            self.recorder.record(ref, event.type, event.reason, event.message)
        for action in plan.actions:
            await self._enact(ref, action, job, version, workloads)
        if plan.error:
            log.info("kueue %s: %s; again in %.0fs", key, plan.error, REQUEUE_SECONDS)
            return REQUEUE_SECONDS
        return 0.0 if plan.actions else None

    async def _read_live(self, key: str) -> tuple[QueuedJob, str] | None:
        """A job that has Workloads but is not among the queued ones: read live (None
        once it is gone)."""
        namespace, name = key.split("/", 1)
        try:
            body = await self.api.get_job(namespace, name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        meta = body.get("metadata") or {}
        return parse_queued_job(body), str(meta.get("resourceVersion") or "")

    async def _priority(self, job: QueuedJob) -> Priority | None:
        """ExtractPriority: the WorkloadPriorityClass the label names, else the
        PriorityClass the template names, else the global default (the lowest, if
        several); None when a class named is missing."""
        name = job.labels.get(PRIORITY_CLASS_LABEL, "")
        if name:
            found = await self._get(self.api.get_workload_priority_class, name)
            if found is None:
                return None
            return Priority(_value(found), replace(WORKLOAD_PRIORITY_CLASS, name=name))
        name = str((job.template.get("spec") or {}).get("priorityClassName") or "")
        if name:
            found = await self._get(self.api.get_priority_class, name)
            if found is None:
                return None
            return Priority(_value(found), replace(POD_PRIORITY_CLASS, name=name))
        items = (await self.api.list_priority_classes()).get("items") or []
        defaults = [pc for pc in items if isinstance(pc, Mapping) and pc.get("globalDefault")]
        if not defaults:
            return Priority()
        lowest = min(defaults, key=_value)
        name = str((lowest.get("metadata") or {}).get("name") or "")
        return Priority(_value(lowest), replace(POD_PRIORITY_CLASS, name=name))

    @staticmethod
    async def _get(read: Callable[[str], Any], name: str) -> JsonDict | None:
        try:
            found: JsonDict = await read(name)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return found

    # -- the writes ----------------------------------------------------------------------
    async def _enact(
        self,
        ref: JobRef,
        action: Action,
        job: QueuedJob | None,
        version: str,
        workloads: tuple[Workload, ...],
    ) -> None:
        """One write; raises ApiError when it fails (the sync stops there)."""
        by_name = {wl.name: wl for wl in workloads}
        namespace = ref.namespace
        match action:
            case CreateWorkload(body=body):
                self.cache.workload_written(await self.api.create_workload(namespace, body))
            case UpdateWorkload(workload=name, spec=spec):
                patch = {"metadata": _version(by_name[name]), "spec": spec}
                self.cache.workload_written(await self.api.patch_workload(namespace, name, patch))
            case PatchWorkloadStatus(workload=name, status=status):
                patch = {"metadata": _version(by_name[name]), "status": status}
                written = await self.api.patch_workload_status(namespace, name, patch)
                self.cache.workload_written(written)
            case RemoveFinalizer(workload=name):
                wl = by_name[name]
                kept = [f for f in wl.finalizers if f != RESOURCE_IN_USE_FINALIZER]
                patch = {"metadata": {**_version(wl), "finalizers": kept}}
                try:
                    written = await self.api.patch_workload(namespace, name, patch)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                else:
                    self.cache.workload_written(written)
            case DeleteWorkload(workload=name):
                try:
                    await self.api.delete_workload(namespace, name, by_name[name].uid)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            case PatchJob(patch=patch):
                assert job is not None, "a job's patch without the job"
                meta = {**(patch.get("metadata") or {}), "resourceVersion": version}
                written = await self.api.patch_job(namespace, job.name, {**patch, "metadata": meta})
                self.cache.job_written(written)
        if action.event is not None:
            self.recorder.record(ref, action.event.type, action.event.reason, action.event.message)


def _version(wl: Workload) -> JsonDict:
    return {"resourceVersion": wl.resource_version}


def _value(priority_class: Mapping[str, Any]) -> int:
    value = priority_class.get("value")
    return value if isinstance(value, int) else 0


def _ref(job: QueuedJob | None, key: str) -> JobRef:
    namespace, name = key.split("/", 1)
    return JobRef(c.API_VERSION, c.KIND, namespace, name, job.uid if job else "")
