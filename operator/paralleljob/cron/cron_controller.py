"""ParallelCronJobs on the operator's runtime: upstream's CronJob controller
(cronjob_controllerv2.go) syncing ParallelJobs instead of Jobs.

The ParallelCronJob informer (caches.py) hands each object to :meth:`CronController.cron_seen`
and each deletion to :meth:`CronController.cron_deleted`; the ParallelJob informer wakes an
owner through :class:`~.cron_children.CronChildren`. Each ParallelCronJob is a key of one
work queue with the shared timers and retry back-off (sync_loops.py), synced by a few
workers: the pure decision (core/cron/cron_sync.py) over the newest body and its jobs, then
its writes through :class:`~.api.CronControl`.

Upstream's safety reads, as ``syncCronJob`` makes them: a job the caches show unfinished
but the active list lacks is judged unexpected only once the ParallelCronJob read live
lacks it too, and an active job the caches lack is missing only once a GET of it answers
404 ("to avoid a slow watch"). The ParallelCronJob is also read live before any job is
created: a deleted one whose deletion this process has not seen yet (paused, its watch
behind) starts nothing. The status write's answer is the object's last known state, so
the next sync never decides on the version before it.

Exactly once: a run's job name is fixed by its scheduled time (a trigger's by its
change), so a second create of the same run is refused with AlreadyExists and adopted,
provided the ParallelCronJob controls that job (metav1.IsControlledBy)."""

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
    CRON_KIND,
    INVALID_SCHEDULE_REASONS,
    CronPlan,
    build_job,
    controlled_by,
    cron_input,
    cron_status_to_dict,
    plan_cron_sync,
    record_created,
    schedule_conditions,
    version_number,
)
from ..json_types import JsonDict
from ..runtime.api import ApiError, CronControl
from ..runtime.cron_children import CronChildren
from ..runtime.events import JobRef, Recorder
from ..runtime.sync_loops import SyncLoops

log = logging.getLogger(__name__)

#: Upstream's ``--concurrent-cron-job-syncs`` default.
CRON_WORKERS = 5


def _uid(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


def _version(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("resourceVersion") or "")


def newer_or_same(body: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``body`` is as new as ``than`` by resourceVersion (one that is no number,
    on an API server not backed by etcd, counts as newer: the informer's word goes)."""
    mine, theirs = version_number(_version(body)), version_number(_version(than))
    return mine is None or theirs is None or mine >= theirs


def reported_already(conditions: list[Any], reason: str, message: str) -> bool:
    """An unusable schedule's Warning that the stored condition InvalidSchedule already
    reports (reason and message): posted once per change, not at every sync."""
    return reason in INVALID_SCHEDULE_REASONS and any(
        isinstance(x, Mapping)
        and x.get("type") == c.COND_INVALID_SCHEDULE
        and x.get("status") == "True"
        and (x.get("reason"), x.get("message")) == (reason, message)
        for x in conditions
    )


class CronController:
    def __init__(
        self,
        api: CronControl,
        recorder: Recorder,
        children: CronChildren,
        config: ControllerConfig,
        *,
        leading_since: datetime,
        monotonic: Callable[[], float],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        ready: asyncio.Event | None = None,
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.children = children
        self.leading_since = leading_since
        self.now = now
        #: The newest version known of each ParallelCronJob, by uid.
        self.crons: dict[str, Mapping[str, Any]] = {}
        self.loops = SyncLoops(
            self.sync, config, monotonic, workers=CRON_WORKERS, name="parallelcronjob", ready=ready
        )

    # -- what the informers hand over ----------------------------------------------------
    def cron_seen(self, body: Mapping[str, Any]) -> None:
        """A ParallelCronJob listed, added or modified: kept unless what is known is
        newer (the answer to this process's own status write), and synced."""
        uid = _uid(body)
        known = self.crons.get(uid)
        if known is not None and (
            _version(known) == _version(body) or not newer_or_same(body, known)
        ):
            return
        self.crons[uid] = body
        self.loops.add(uid)

    def cron_deleted(self, uid: str) -> None:
        """Deleted (or no longer listed after a re-list): never synced again."""
        self.crons.pop(uid, None)
        self.loops.forget(uid)

    def job_changed(self, owner: str) -> None:
        """One of a ParallelCronJob's jobs changed or went (CronChildren.changed)."""
        if owner in self.crons:
            self.loops.add(owner)

    async def stop_all(self) -> None:
        await self.loops.stop()

    # -- one sync ------------------------------------------------------------------------
    async def sync(self, uid: str) -> float | None:
        """Decide, read what the caches cannot tell, then write. Seconds until the next
        sync is due (None: only on an event)."""
        body = self.crons.get(uid)
        if body is None:
            return None  # deleted
        now = self.now()
        plan = plan_cron_sync(cron_input(body, self.children.of(uid), now, self.leading_since))
        if plan.verify.cron or plan.create:
            live = await self._read_live(uid, body)
            if live is None:
                return None
            body = live
            plan = plan_cron_sync(cron_input(body, self.children.of(uid), now, self.leading_since))
        if plan.verify:
            plan = await self._plan_checked(body, uid, plan, now)
        await self._enact(uid, body, plan, now)
        return plan.requeue_after

    async def _read_live(self, uid: str, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The ParallelCronJob as the API server holds it now, kept as the newest known;
        None once it is gone (or another object has its name), and then forgotten."""
        meta = body.get("metadata") or {}
        try:
            live = await self.api.get_cron(str(meta.get("namespace")), str(meta.get("name")))
        except ApiError as exc:
            if not exc.not_found:
                raise
            live = {}
        if _uid(live) != uid:
            log.info("parallelcronjob %s/%s is gone", meta.get("namespace"), meta.get("name"))
            self.cron_deleted(uid)
            return None
        if uid in self.crons:
            self.crons[uid] = live
        return live

    async def _plan_checked(
        self, body: Mapping[str, Any], uid: str, plan: CronPlan, now: datetime
    ) -> CronPlan:
        """The plan once the active jobs the caches lack were read live."""
        namespace = str((body.get("metadata") or {}).get("namespace"))
        found = set()
        for name in plan.verify.jobs:
            try:
                await self.api.get_job(namespace, name)
            except ApiError as exc:
                if not exc.not_found:
                    raise
            else:
                found.add(name)
        inp = cron_input(body, self.children.of(uid), now, self.leading_since)
        return plan_cron_sync(replace(inp, live_checked=True, found_live=frozenset(found)))

    async def _enact(
        self, uid: str, body: Mapping[str, Any], plan: CronPlan, now: datetime
    ) -> None:
        meta = body.get("metadata") or {}
        ref = JobRef(
            c.API_VERSION, CRON_KIND, str(meta.get("namespace")), str(meta.get("name")), uid
        )
        stored = (body.get("status") or {}).get("conditions") or []
        for event in plan.events:
            if not reported_already(stored, event.reason, event.message):
                self.recorder.record(ref, event.type, event.reason, event.message)
        for job in plan.delete:
            await self._delete(ref, job)
        created = {}
        for create in plan.create:
            created[create.name] = await self._create(ref, build_job(body, create))
        await self._write_status(ref, body, plan, created, now)

    async def _delete(self, ref: JobRef, job: str) -> None:
        try:
            await self.api.delete_job_in_background(ref.namespace, job)
        except ApiError as exc:
            if exc.not_found:
                return  # gone already: nothing this sync deleted
            self.recorder.record(
                ref, c.WARNING, c.REASON_FAILED_DELETE, f"Deleted job {job}: {exc.message}"
            )
            raise
        self.recorder.record(ref, c.NORMAL, c.REASON_SUCCESSFUL_DELETE, f"Deleted job {job}")

    async def _create(self, ref: JobRef, job: JsonDict) -> str:
        """The job created (its uid), or found created by an earlier sync of this
        ParallelCronJob (AlreadyExists: the same name is the same run). A job of that
        name that another owner controls is an error, as upstream's."""
        name = job["metadata"]["name"]
        try:
            made = await self.api.create_job(ref.namespace, job)
        except ApiError as exc:
            if exc.conflict and exc.reason == "AlreadyExists":
                return await self._adopt(ref, name)
            self.recorder.record(
                ref, c.WARNING, c.REASON_FAILED_CREATE, f"Error creating job: {exc.message}"
            )
            raise
        self.recorder.record(ref, c.NORMAL, c.REASON_SUCCESSFUL_CREATE, f"Created job {name}")
        return _uid(made)

    async def _adopt(self, ref: JobRef, name: str) -> str:
        existing = await self.api.get_job(ref.namespace, name)
        if not controlled_by(existing, ref.uid):
            message = f"job {name} already exists and is not controlled by {ref.name}"
            self.recorder.record(
                ref, c.WARNING, c.REASON_FAILED_CREATE, f"Error creating job: {message}"
            )
            raise ApiError(409, "AlreadyExists", message)
        return _uid(existing)

    async def _write_status(
        self,
        ref: JobRef,
        body: Mapping[str, Any],
        plan: CronPlan,
        created: Mapping[str, str],
        now: datetime,
    ) -> None:
        """The plan's status, with the resourceVersion it was decided on; its answer is
        the newest version known. A conflict: the object read live, and synced again."""
        status = plan.status
        for name, uid in created.items():
            status = record_created(status, name, uid)
        stored = body.get("status") or {}
        invalid = next(
            ((e.reason, e.message) for e in plan.events if e.reason in INVALID_SCHEDULE_REASONS),
            None,
        )
        conditions = schedule_conditions(list(stored.get("conditions") or []), invalid, now)
        patch = cron_status_to_dict(status, ref.namespace, conditions)
        if all(stored.get(k) == v for k, v in patch.items() if v is not None) and all(
            k not in stored for k, v in patch.items() if v is None
        ):
            return  # nothing new
        write = {"metadata": {"resourceVersion": _version(body)}, "status": patch}
        try:
            written = await self.api.patch_cron_status(ref.namespace, ref.name, write)
        except ApiError as exc:
            if exc.not_found:
                self.cron_deleted(ref.uid)
                return
            if exc.conflict:
                await self._read_live(ref.uid, body)
            raise
        if ref.uid in self.crons and newer_or_same(written, self.crons[ref.uid]):
            self.crons[ref.uid] = written
