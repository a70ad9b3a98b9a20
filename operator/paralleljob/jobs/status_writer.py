"""Writes to the job (upstream's ``updateStatusHandler`` and ``patchJobHandler``): merge
patches with the version they were computed from as precondition, the status writes a
sync makes, and the two budgets they share across jobs: progress-only writes wait for
the job's batch period and a slot of ``PJ_PROGRESS_WRITE_QPS`` (status_batch.py), and a
write that would only refresh DURATION waits for a slot of ``PJ_DURATION_REFRESH_QPS``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from .. import constants as c
from ..config import ControllerConfig
from ..core import (
    INDEXED_COMPLETION,
    NON_INDEXED_COMPLETION,
    JobStatus,
    SyncResult,
    evolve,
    is_finished,
)
from ..json_types import JsonDict
from ..runtime import metrics
from ..runtime.api import ApiError, ControllerApi
from ..runtime.consistency import JOBS
from ..runtime.ratelimit import SlotScheduler
from .job_runtime import JobRuntime
from .status_batch import progress_only, seconds_to_wait


class Conflict(Exception):
    """The job changed under a write; sync again from the fresh object."""


class StatusWriter:
    def __init__(
        self, api: ControllerApi, config: ControllerConfig, monotonic: Callable[[], float]
    ) -> None:
        self.api = api
        self.config = config
        self.monotonic = monotonic
        rate = config.duration_refresh_qps
        self.duration_slots = SlotScheduler(rate) if rate > 0 else None
        rate = config.progress_write_qps
        self.progress_slots = SlotScheduler(rate) if rate > 0 else None

    def duration_refresh_waiting(self) -> int:
        """Jobs holding a slot of the DURATION refresh budget, waiting for its time."""
        return len(self.duration_slots) if self.duration_slots is not None else 0

    def progress_write_waiting(self) -> int:
        """Jobs holding a slot of the progress write budget, waiting for its time."""
        return len(self.progress_slots) if self.progress_slots is not None else 0

    async def patch(
        self,
        rt: JobRuntime,
        call: Callable[[str, str, JsonDict], Awaitable[JsonDict]],
        patch: JsonDict,
    ) -> JsonDict:
        """A merge patch with the version it was computed from as precondition; the
        version written is kept. A conflict fetches the job again and raises Conflict."""
        meta = {
            **patch.get("metadata", {}),
            "resourceVersion": rt.resource_version,
        }
        try:
            written = await call(rt.namespace, rt.name, {**patch, "metadata": meta})
        except ApiError as exc:
            if exc.conflict:
                rt.offer(await self.api.get_job(rt.namespace, rt.name))
                raise Conflict() from exc
            raise
        rt.offer(written)
        rt.own_writes.wrote(JOBS, written.get("metadata", {}).get("resourceVersion"))
        return written

    async def write(self, rt: JobRuntime, status: JobStatus) -> bool:
        """Writes ``status`` unless the job has it already; says whether it wrote.
        The finished pods and jobs it adds are counted in the metrics once written."""
        current = rt.job.status
        kind = rt.kind
        # Equal values first: most syncs change nothing, and building both JSON bodies
        # to find that out was a tenth of a sync's CPU.
        wanted = None if status == current else kind.status_json(status)
        if wanted is None or wanted == kind.status_json(current):
            rt.written(status)
            return False
        before = rt.resource_version
        written = await self.patch(rt, self.api.patch_job_status, {"status": wanted})
        rt.written(status)
        state = rt.status
        state.last_written_rv = str(written.get("metadata", {}).get("resourceVersion", ""))
        state.last_write = self.monotonic()
        state.wrote(before, state.last_written_rv, state.last_write)
        # Any write carries the job's progress: its progress slot is used or freed.
        self.release_slots(rt, self.progress_slots)
        mode = completion_mode(rt.job.spec.completion_mode)
        _record_finished(mode, current, status)
        if mode == INDEXED_COMPLETION:  # only Indexed jobs have finished indexes to count
            metrics.record_finished_indexes(rt.job.spec, current, status)
        return True

    async def write_final(self, rt: JobRuntime, done: SyncResult) -> float | None:
        """The sync's last status write; when DURATION is all it would change, only in
        this job's slot of the DURATION refresh budget, and only while the API client's
        rate limit (PJ_API_QPS) has room and no job waits for the progress budget: a
        cosmetic write never delays real work, nor spends API calls while jobs' progress
        is being held back (the slot that came then goes unused, and the job waits for
        its next one: no job polls); when it only reports progress, once the job's
        batch period is over. Returns when to sync again for the write: its DURATION
        slot, the end of the batch period, or when the text changes next (None: no
        refresh)."""
        slots = self.duration_slots
        status = done.status
        if _only_duration_differs(rt, status):
            if slots is None or not rt.kind.refresh_duration:
                return None
            now = self.monotonic()
            wait = slots.slot(rt.uid, now)
            if wait > 0:
                return wait
            if not self.api.has_spare_budget() or self.progress_write_waiting():
                return slots.postpone(rt.uid, now)
        elif (wait := self.wait(rt, status)) > 0:
            return wait
        if await self.write(rt, status):
            self.release_slots(rt, slots)
        return done.refresh_after if slots is not None and rt.kind.refresh_duration else None

    def wait(self, rt: JobRuntime, wanted: JobStatus) -> float:
        """How long a status write waits (see status_batch.py): one that only reports
        progress waits for the job's batch period, then for a slot of the progress
        budget shared by all jobs; the finalizers of pods it records wait with it."""
        stored = rt.kind.stored_status
        current, wanted = stored(rt.job.status), stored(wanted)
        now = self.monotonic()
        wait = seconds_to_wait(
            current, wanted, rt.status.last_write, now, self.config.status_batch_seconds
        )
        if wait > 0 or self.progress_slots is None or not progress_only(current, wanted):
            return wait
        return self.progress_slots.slot(rt.uid, now)

    def release_slots(self, rt: JobRuntime, *slots: SlotScheduler | None) -> None:
        """The job wrote (or is gone): the slots it held are used or freed for others."""
        now = self.monotonic()
        for scheduler in slots:
            if scheduler is not None:
                scheduler.release(rt.uid, now)

    def forget(self, rt: JobRuntime) -> None:
        """The job's loop ended: it holds no slot any more."""
        self.release_slots(rt, self.duration_slots, self.progress_slots)


def completion_mode(mode: object) -> str:
    """getCompletionMode: the metrics' completion_mode label for spec.completionMode."""
    return INDEXED_COMPLETION if mode == INDEXED_COMPLETION else NON_INDEXED_COMPLETION


def _only_duration_differs(rt: JobRuntime, wanted: JobStatus) -> bool:
    """Whether writing ``wanted`` would change nothing but DURATION (of what the job's
    kind stores: a Job's status has no DURATION, so nothing)."""
    stored = rt.kind.stored_status
    current, wanted = stored(rt.job.status), stored(wanted)
    return current != wanted and evolve(wanted, duration_text=current.duration_text) == current


def _record_finished(mode: str, before: JobStatus, after: JobStatus) -> None:
    """recordJobPodFinished and the jobs_finished_total count of enactJobFinished
    (``mode``: the job's completion mode label)."""
    succeeded, failed = _pods_counted(before, after)
    if succeeded > 0:
        metrics.JOB_PODS_FINISHED.labels(mode, metrics.SUCCEEDED).inc(succeeded)
    if failed > 0:
        metrics.JOB_PODS_FINISHED.labels(mode, metrics.FAILED).inc(failed)
    if is_finished(after) and not is_finished(before):
        for cond in after.conditions:
            if cond.status == "True" and cond.type in (c.COND_COMPLETE, c.COND_FAILED):
                result = metrics.SUCCEEDED if cond.type == c.COND_COMPLETE else metrics.FAILED
                metrics.JOBS_FINISHED.labels(mode, result, cond.reason).inc()


def _pods_counted(before: JobStatus, after: JobStatus) -> tuple[int, int]:
    """The succeeded and failed pods a write counts: its counters' rise; for the write of
    a job restart (spec.restartPolicy), which counts the attempt's last pods and resets the
    counters at once, the pods the status had recorded as uncounted."""
    if after.restarts > before.restarts:
        return len(set(before.uncounted_succeeded)), len(set(before.uncounted_failed))
    return after.succeeded - before.succeeded, after.failed - before.failed
