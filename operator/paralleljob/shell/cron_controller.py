"""ParallelCronJobs: a loop per object, as upstream's CronJob controller (cronjob_controllerv2.go)
runs a sync per key and requeues it at the next scheduled time.

kopf hands each ParallelCronJob event to :meth:`CronController.seen` (kopf runs only
while the process leads, so only the leader's loops run); the ParallelJob informer's
events wake the owner's loop through :class:`~.cron_children.CronChildren`. A sync is the
pure decision (core/cron_sync.py) over the latest body and its jobs, then its writes:
deletions, creations (a job's name is fixed by its scheduled time, so a second create of
the same run is refused with AlreadyExists: exactly once across crashes and failovers),
Events, and the status, written with the resourceVersion it was decided on (a conflict
means a newer body is on its way, and with it another sync)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from .. import constants as c
from ..core import (
    CRON_KIND,
    CRON_PLURAL,
    INVALID_SCHEDULE_REASONS,
    PARALLELJOB,
    CronPlan,
    build_job,
    cron_input,
    cron_status_to_dict,
    plan_cron_sync,
    record_created,
    schedule_conditions,
)
from ..json_types import JsonDict
from .api import ApiError
from .cron_children import CronChildren
from .events import JobRef, Recorder
from .kube import MERGE_PATCH

log = logging.getLogger(__name__)

#: After a failed write, the sync runs again this much later (and on the next event).
RETRY_SECONDS = 5.0


class Requests(Protocol):
    """The API calls a cron sync makes (Kube.request; a fake in the unit tests)."""

    async def request(
        self, method: str, path: str, *, body: object = None, content_type: str = ...
    ) -> JsonDict: ...


def _status_path(namespace: str, name: str) -> str:
    """A ParallelCronJob's status subresource (its ParallelJobs: PARALLELJOB.path)."""
    return f"/apis/{c.API_VERSION}/namespaces/{namespace}/{CRON_PLURAL}/{name}/status"


class CronLoop:
    """One ParallelCronJob's loop: the newest body, and a wake-up."""

    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.wake = asyncio.Event()
        self.wake.set()
        self.task: asyncio.Task[None] | None = None


class CronController:
    def __init__(
        self,
        kube: Requests,
        recorder: Recorder,
        children: CronChildren,
        *,
        leading_since: datetime,
        jobs_synced: asyncio.Event,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.recorder = recorder
        self.children = children
        self.leading_since = leading_since
        self.jobs_synced = jobs_synced
        self.now = now
        self.loops: dict[str, CronLoop] = {}
        children.changed = self.wake

    # -- events ------------------------------------------------------------------------
    def seen(self, body: Mapping[str, Any]) -> None:
        """A ParallelCronJob listed, added or modified."""
        uid = str((body.get("metadata") or {}).get("uid") or "")
        loop = self.loops.get(uid)
        if loop is None:
            loop = self.loops[uid] = CronLoop(body)
            loop.task = asyncio.create_task(self._run(uid, loop), name=f"cron {uid}")
        loop.body = body
        loop.wake.set()

    def deleted(self, uid: str) -> None:
        loop = self.loops.pop(uid, None)
        if loop is not None and loop.task is not None:
            loop.task.cancel()

    def wake(self, uid: str) -> None:
        loop = self.loops.get(uid)
        if loop is not None:
            loop.wake.set()

    async def stop_all(self) -> None:
        tasks = [loop.task for loop in self.loops.values() if loop.task is not None]
        self.loops.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the loop ----------------------------------------------------------------------
    async def _run(self, uid: str, loop: CronLoop) -> None:
        # No job is judged missing, nor created again, before every job is listed.
        await self.jobs_synced.wait()
        delay: float | None = None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(loop.wake.wait(), delay)
            loop.wake.clear()
            try:
                delay = await self.sync(uid, loop.body)
            except ApiError as exc:
                log.warning("parallelcronjob %s: %s; again in %.0fs", uid, exc, RETRY_SECONDS)
                delay = RETRY_SECONDS
            except Exception:
                log.exception("parallelcronjob %s: sync failed", uid)
                delay = RETRY_SECONDS

    async def sync(self, uid: str, body: Mapping[str, Any]) -> float | None:
        """One sync: decide, then write. Seconds until the next one is due (None: only
        on an event)."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        ref = JobRef(c.API_VERSION, CRON_KIND, namespace, name, uid)
        now = self.now()
        plan = plan_cron_sync(cron_input(body, self.children.of(uid), now, self.leading_since))
        for job in plan.delete:
            await self._delete(ref, job)
        created = {}
        for create in plan.create:
            created[create.name] = await self._create(ref, body, build_job(body, create))
        for event in plan.events:
            self.recorder.record(ref, event.type, event.reason, event.message)
        await self._write_status(ref, body, plan, created, now)
        return plan.requeue_after

    async def _delete(self, ref: JobRef, job: str) -> None:
        try:
            await self.kube.request(
                "DELETE",
                PARALLELJOB.path(ref.namespace, job),
                body={"propagationPolicy": "Background"},
            )
        except ApiError as exc:
            if not exc.not_found:
                self.recorder.record(
                    ref, "Warning", "FailedDelete", f"Deleted job {job}: {exc.message}"
                )
                raise
        self.recorder.record(ref, "Normal", "SuccessfulDelete", f"Deleted job {job}")

    async def _create(self, ref: JobRef, cron: Mapping[str, Any], job: JsonDict) -> str:
        """The job created (its uid), or found created by an earlier sync (AlreadyExists:
        the same name is the same scheduled run)."""
        name = job["metadata"]["name"]
        try:
            made = await self.kube.request("POST", PARALLELJOB.path(ref.namespace), body=job)
        except ApiError as exc:
            if exc.conflict and exc.reason == "AlreadyExists":
                got = await self.kube.request("GET", PARALLELJOB.path(ref.namespace, name))
                return str((got.get("metadata") or {}).get("uid") or "")
            self.recorder.record(
                ref, "Warning", "FailedCreate", f"Error creating job: {exc.message}"
            )
            raise
        self.recorder.record(ref, "Normal", "SuccessfulCreate", f"Created job {name}")
        return str((made.get("metadata") or {}).get("uid") or "")

    async def _write_status(
        self,
        ref: JobRef,
        body: Mapping[str, Any],
        plan: CronPlan,
        created: Mapping[str, str],
        now: datetime,
    ) -> None:
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
        version = (body.get("metadata") or {}).get("resourceVersion")
        try:
            await self.kube.request(
                "PATCH",
                _status_path(ref.namespace, ref.name),
                body={"metadata": {"resourceVersion": version}, "status": patch},
                content_type=MERGE_PATCH,
            )
        except ApiError as exc:
            if not (exc.conflict or exc.not_found):
                raise
            # A newer body is coming (its event wakes the loop), or the object is gone.
