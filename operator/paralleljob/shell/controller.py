"""The imperative shell: one sync of one ParallelJob, and the loop that runs it.

Each ParallelJob gets one asyncio task (a kopf daemon) that sleeps until something
wakes it -- one of its pods changed, its spec changed, a timer the core asked for ran
out -- and then runs one sync: read the job and its pods from memory (the pod index
keyed by job uid, so the cost is O(the job's pods)), ask the pure core what to do,
do it through the one shared async API client, and write status. Syncs of one job
never overlap; syncs of different jobs run concurrently.

Its I/O is injected, as upstream's job controller injects ``podControl`` and
``updateStatusHandler``: API calls go through a :class:`~.api.ControllerApi`, Events
through a :class:`~.events.Recorder`, and the time comes from a :class:`Clock`, so that
unit tests run :meth:`Controller.sync` itself against an in-memory API and hold the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from .. import constants as c
from ..config import ControllerConfig
from ..core.indexed import pod_templates
from ..core.managed_by import managed_by_external_controller
from ..core.model import (
    INDEXED_COMPLETION,
    NON_INDEXED_COMPLETION,
    JobStatus,
    PodInfo,
    is_finished,
    parse_job,
    parse_spec,
    parse_status,
    spec_defaults_patch,
    status_to_dict,
)
from ..core.pods import build_pod, job_template, owner_reference
from ..core.sync import (
    Event,
    PodOutcome,
    PodPlan,
    SyncContext,
    SyncInput,
    SyncResult,
    count_and_enact,
    plan_pods,
    sync_context,
    track,
)
from ..json_types import JsonDict
from . import metrics
from .api import ApiError, ControllerApi
from .events import JobRef, Recorder
from .expectations import UIDTrackingExpectations
from .progress import LoopClock, Stall, stalls
from .ratelimit import SlotScheduler
from .ref_manager import claim_pods
from .status_batch import progress_only, seconds_to_wait

log = logging.getLogger(__name__)


#: The largest batch of pod creations sent at once (upstream's
#: MaxPodCreateDeletePerSync bounds a whole sync the same way).
MAX_SLOW_START_BATCH = 500

#: How soon a DURATION refresh put off by a busy API client is tried again.
BUSY_REFRESH_RETRY_SECONDS = 1.0

#: The status cause of a creation refused because the namespace is being deleted.
NAMESPACE_TERMINATING = "NamespaceTerminating"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Clock:
    """Where the shell reads the time (upstream's job controller holds a
    ``clock.WithTicker``): ``now`` is the core's wall clock, ``monotonic`` the seconds
    that expectations, retries and the write budget measure."""

    now: Callable[[], datetime] = _utc_now
    monotonic: Callable[[], float] = time.monotonic


REAL_CLOCK = Clock()


def _rv(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return -1


class Conflict(Exception):
    """The job changed under a status write; sync again from the fresh object."""


class JobRuntime:
    """What the operator keeps in memory about one job between syncs."""

    def __init__(
        self, body: Mapping[str, Any], monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        meta = body["metadata"]
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.body: Mapping[str, Any] = body
        self._monotonic = monotonic
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.stopped = False
        #: The batch size the next pod creations start with (see _create_pods).
        self.slow_start_batch = 1
        #: When the last sync started (monotonic), for batching pod events.
        self.last_sync_started = float("-inf")
        #: Pod changes this loop made that the pod cache does not show yet.
        self.expectations = UIDTrackingExpectations()
        self.create_failures = 0
        self.create_retry_at = 0.0
        self.api_failures = 0
        self.last_written_rv = ""
        #: When this loop last wrote the job's status (monotonic).
        self.last_status_write = float("-inf")
        # Progress markers for the liveness probe (monotonic seconds, see progress.py).
        self.woken_at: float | None = None
        self.timer_due: float | None = None
        self.sync_started: float | None = None
        #: The newest resourceVersion the job watch has shown.
        self.seen_rv = -1
        #: The oldest status write (resourceVersion, when) the job watch has not shown.
        self.unechoed: tuple[int, float] | None = None
        #: Spec defaults the API server dropped when written (a CRD without the field):
        #: not written again, so that the job is not patched at every sync.
        self.unstored_defaults: set[str] = set()
        #: The other controller spec.managedBy names, once logged (see managed_by.py).
        self.managed_by_logged: str | None = None

    @property
    def ref(self) -> JobRef:
        return JobRef(self.namespace, self.name, self.uid)

    def offer(self, body: Mapping[str, Any]) -> bool:
        """Keeps the newest version of the job seen (watch event or our own write)."""
        meta = body.get("metadata", {})
        if meta.get("uid") != self.uid:
            return False
        if _rv(meta.get("resourceVersion")) >= _rv(self.body["metadata"].get("resourceVersion")):
            self.body = body
            return True
        return False

    def stop(self) -> None:
        """Ends the loop after its current sync (the job is gone, or the operator stops)."""
        self.stopped = True
        self.wake.set()

    def poke(self) -> None:
        """Wakes the loop (a pod or job event), remembering since when it has work."""
        if self.woken_at is None:
            self.woken_at = self._monotonic()
        self.wake.set()

    def watched(self, resource_version: object) -> None:
        """The job watch showed this version: status writes up to it have come back."""
        rv = _rv(resource_version)
        self.seen_rv = max(self.seen_rv, rv)
        if self.unechoed is not None and rv >= self.unechoed[0]:
            self.unechoed = None

    def wrote(self, before: object, after: object, now: float) -> None:
        """A status write turned version ``before`` into ``after``: the job watch owes
        an event of at least ``after`` (unless the write changed nothing, or the watch
        was quicker than the response)."""
        rv = _rv(after)
        if rv <= _rv(before) or rv <= self.seen_rv or self.unechoed is not None:
            return
        self.unechoed = (rv, now)

    def loop_clock(self, pods: Mapping[str, PodInfo], now: float) -> LoopClock:
        """The loop's pending work, for the liveness probe (changes nothing)."""
        return LoopClock(
            woken_at=self.woken_at,
            timer_due=self.timer_due,
            sync_started=self.sync_started,
            unobserved_since=self.expectations.unobserved_since(pods, now),
            unechoed_since=self.unechoed[1] if self.unechoed is not None else None,
        )


PodsOf = Callable[[str], Iterable[PodInfo]]


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: when to sync again and, when the core ran, what it planned,
    what the pod calls achieved, whose finalizers went, and its result."""

    delay: float | None
    plan: PodPlan = field(default_factory=PodPlan)
    outcome: PodOutcome = field(default_factory=PodOutcome)
    removed: tuple[str, ...] = ()
    result: SyncResult | None = None


class Controller:
    def __init__(
        self,
        api: ControllerApi,
        recorder: Recorder,
        config: ControllerConfig,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.api = api
        self.recorder = recorder
        self.config = config
        self.clock = clock
        self.jobs: dict[str, JobRuntime] = {}
        rate = config.duration_refresh_qps
        self.duration_slots = SlotScheduler(rate) if rate > 0 else None
        rate = config.progress_write_qps
        self.progress_slots = SlotScheduler(rate) if rate > 0 else None
        self.finished_with_finalizer = metrics.FinishedWithFinalizer()
        #: Pods (namespace, name) whose orphan release is in flight.
        self.releasing_orphans: set[tuple[str, str]] = set()

    def duration_refresh_waiting(self) -> int:
        """Jobs holding a slot of the DURATION refresh budget, waiting for its time."""
        return len(self.duration_slots) if self.duration_slots is not None else 0

    def progress_write_waiting(self) -> int:
        """Jobs holding a slot of the progress write budget, waiting for its time."""
        return len(self.progress_slots) if self.progress_slots is not None else 0

    def pending_syncs(self) -> int:
        """Jobs woken (by an event, or their timer) whose sync has not started yet."""
        now = self.clock.monotonic()
        return sum(
            1
            for rt in list(self.jobs.values())
            if rt.sync_started is None
            and (rt.woken_at is not None or (rt.timer_due is not None and rt.timer_due <= now))
        )

    # -- the per-job loops -----------------------------------------------------------
    def job_seen(self, body: Mapping[str, Any], pods_of: PodsOf) -> None:
        """A watch event (or the initial listing) of an existing job: starts its loop, or
        hands the loop the newer version and wakes it unless the version is its own
        status write. No finalizer is needed: deleting a job never waits for us."""
        meta = body["metadata"]
        rt = self.jobs.get(meta["uid"])
        if rt is None:
            rt = JobRuntime(body, self.clock.monotonic)
            self.jobs[rt.uid] = rt
            # addJob: a job's first event (the initial listing too) counts it once per loop.
            metrics.record_job_added(managed_by_external_controller(body.get("spec") or {}))
            rt.task = asyncio.create_task(
                self._run_job(rt, pods_of), name=f"job {rt.namespace}/{rt.name}"
            )
            return
        rv = meta.get("resourceVersion")
        rt.watched(rv)
        if rt.offer(body) and rv != rt.last_written_rv:
            rt.poke()

    async def job_gone(self, uid: str, namespace: str, pods_of: PodsOf) -> None:
        """The job was deleted: its loop ends, and its pods' tracking finalizers are
        released (upstream's deleteJob queues them as orphans); garbage collection
        deletes the pods by their owner reference."""
        rt = self.jobs.get(uid)
        if rt is not None:
            rt.stop()
        held = [pod for pod in pods_of(uid) if pod.has_finalizer]
        # Concurrently, as the pod deletions go (the client bounds what is in flight).
        await asyncio.gather(*(self.release_orphan(namespace, pod.name) for pod in held))

    async def stop_all(self) -> None:
        """Operator shutdown: every loop stops after its current sync."""
        tasks = [rt.task for rt in self.jobs.values() if rt.task is not None]
        for rt in list(self.jobs.values()):
            rt.stop()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_job(self, rt: JobRuntime, pods_of: PodsOf) -> None:
        delay: float | None = 0.0
        try:
            while not rt.stopped:
                if delay is None or delay > 0:
                    rt.timer_due = None if delay is None else self.clock.monotonic() + delay
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(rt.wake.wait(), timeout=delay)
                    if rt.stopped:
                        break
                    if rt.wake.is_set():
                        await self._batch_events(rt)
                rt.wake.clear()
                delay = await self._timed_sync(rt, pods_of)
        finally:
            if self.jobs.get(rt.uid) is rt:
                del self.jobs[rt.uid]
            self._release_slots(rt, self.duration_slots, self.progress_slots)

    async def _batch_events(self, rt: JobRuntime) -> None:
        """At most one event-driven sync per ``sync_batch_seconds``: an event after a
        quiet spell is acted on at once; a burst of pod events is gathered into the
        next sync (upstream always waits its 1 s batch period)."""
        wait = rt.last_sync_started + self.config.sync_batch_seconds - self.clock.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    async def _timed_sync(self, rt: JobRuntime, pods_of: PodsOf) -> float | None:
        """sync_safely, with the progress markers the liveness probe reads."""
        rt.woken_at = rt.timer_due = None
        rt.sync_started = rt.last_sync_started = self.clock.monotonic()
        try:
            return await self.sync_safely(rt, pods_of)
        finally:
            rt.sync_started = None

    def stalls(self, pods_of: PodsOf, now: float) -> list[Stall]:
        """The job loops with work pending for longer than ``stall_seconds``."""
        clocks = {
            f"{rt.namespace}/{rt.name}": rt.loop_clock({p.uid: p for p in pods_of(rt.uid)}, now)
            for rt in list(self.jobs.values())
        }
        return stalls(clocks, now, self.config.stall_seconds)

    async def sync_safely(self, rt: JobRuntime, pods_of: PodsOf) -> float | None:
        """One sync; never raises (a failure is logged and retried with back-off)."""
        try:
            report = await self.sync(rt, pods_of)
        except Conflict:
            rt.api_failures = 0
            return 0.0
        except ApiError as exc:
            if exc.not_found:
                log.debug("%s/%s is gone", rt.namespace, rt.name)
                return None
            delay = self._retry_delay(rt)
            log.warning(
                "sync of %s/%s failed, retrying in %.0fs: %s", rt.namespace, rt.name, delay, exc
            )
            return delay
        except Exception:
            delay = self._retry_delay(rt)
            log.exception("sync of %s/%s failed, retrying in %.0fs", rt.namespace, rt.name, delay)
            return delay
        rt.api_failures = 0
        return report.delay

    def _retry_delay(self, rt: JobRuntime) -> float:
        rt.api_failures += 1
        cfg = self.config
        return min(cfg.retry_base_seconds * 2.0 ** (rt.api_failures - 1), cfg.retry_max_seconds)

    # -- one sync --------------------------------------------------------------------
    async def sync(self, rt: JobRuntime, pods_of: PodsOf) -> SyncReport:
        """syncJob: a write the job needs first, if any (then sync again); else the
        core's three steps, their API calls in upstream's order: the pods,
        status write 1 (finished pods recorded by UID), finalizer removals, status
        write 2 (those pods counted). A crash between any two calls counts no pod
        twice and loses none: the next sync resumes from what the API server holds.
        A job that spec.managedBy gives to another controller is left alone."""
        if self._managed_elsewhere(rt):
            return SyncReport(delay=None)
        if await self._prepare(rt):
            return SyncReport(delay=0.0)
        pods = await self._claim_pods(rt, pods_of)
        ctx = self._sync_context(rt, pods)
        plan = plan_pods(ctx)
        started = self.clock.monotonic()
        outcome = PodOutcome()
        result = "error"
        try:
            outcome, retry_in = await self._apply(rt, rt.body, plan, _creation_reason(ctx))
            removed, done = await self._track_and_count(rt, ctx, plan, outcome)
            refresh_in = await self._write_final_status(rt, done)
            result = "success"
        finally:
            self._observe_sync(ctx, started, result, outcome)
        self._emit(rt, done.events)
        if done.delete_job:
            log.info("%s/%s: ttlSecondsAfterFinished expired, deleting it", rt.namespace, rt.name)
            await self.api.delete_job(rt.namespace, rt.name, rt.uid)
        delay = _next_delay(
            ctx.inp.expectations_satisfied, done.requeue_after, retry_in, refresh_in
        )
        report = SyncReport(delay, plan, outcome, tuple(removed), done)
        _log_sync(rt, report, done.status)
        return report

    def _managed_elsewhere(self, rt: JobRuntime) -> bool:
        """syncJob's managedByExternalController check, logged once per job."""
        other = managed_by_external_controller(rt.body.get("spec") or {})
        if other is not None and rt.managed_by_logged != other:
            rt.managed_by_logged = other
            log.info(
                "%s/%s: skipped, managed by another controller: spec.managedBy=%s",
                rt.namespace,
                rt.name,
                other,
            )
        return other is not None

    async def _prepare(self, rt: JobRuntime) -> bool:
        """Writes what the job needs before the core acts on it, if anything (the next
        sync starts from the version written); says whether it wrote."""
        return await self._drop_kopf_finalizer(rt) or await self._write_spec_defaults(rt)

    async def _drop_kopf_finalizer(self, rt: JobRuntime) -> bool:
        """Removes the finalizer an operator version that ran each job as a kopf daemon left."""
        meta = rt.body["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if c.KOPF_FINALIZER not in finalizers:
            return False
        kept = [f for f in finalizers if f != c.KOPF_FINALIZER]
        patch = {"metadata": {"finalizers": kept or None}}
        rt.offer(await self._patch(rt, self.api.patch_job, patch, meta.get("resourceVersion")))
        log.info("%s/%s: removed the old finalizer %s", rt.namespace, rt.name, c.KOPF_FINALIZER)
        return True

    async def _write_spec_defaults(self, rt: JobRuntime) -> bool:
        """Writes the defaults a batch/v1 Job gets from the API server. A default the
        API server does not store (the CRD predates the field) is not written again for
        this job; the core applies it anyway (model.parse_spec)."""
        meta = rt.body["metadata"]
        defaults = {
            k: v
            for k, v in (spec_defaults_patch(rt.body.get("spec") or {}) or {}).items()
            if k not in rt.unstored_defaults
        }
        if meta.get("deletionTimestamp") is not None or not defaults:
            return False
        patch = {"spec": defaults}
        written = await self._patch(rt, self.api.patch_job, patch, meta.get("resourceVersion"))
        rt.offer(written)
        stored = written.get("spec") or {}
        dropped = {k for k in defaults if stored.get(k) is None}
        if dropped:
            log.warning(
                "%s/%s: the API server did not store the spec defaults %s (is the CRD older "
                "than the operator?)",
                rt.namespace,
                rt.name,
                sorted(dropped),
            )
            rt.unstored_defaults |= dropped
        return True

    async def _claim_pods(self, rt: JobRuntime, pods_of: PodsOf) -> list[PodInfo]:
        """getPodsForJob: the pods the job owns, after adopting the orphans that match
        it and releasing its pods that no longer do (ref_manager.py). A refused adoption
        or release fails the sync (retried), as upstream's does.

        The pods returned are the cache as it is when this returns: the caller checks
        the expectations against them with no await in between, since a pod event
        handled meanwhile settles an expectation that an older snapshot would not show
        (and the sync would create that pod again)."""
        deleting = rt.body["metadata"].get("deletionTimestamp") is not None
        claims = claim_pods(rt.uid, rt.namespace, deleting, pods_of(rt.uid))
        if not (claims.adopt or claims.release):
            return list(claims.owned)
        owner = owner_reference(rt.body)
        adopted, released = await asyncio.gather(
            asyncio.gather(*(self._adopt(rt, p, owner) for p in claims.adopt)),
            asyncio.gather(*(self._release(rt, p) for p in claims.release)),
        )
        errors = [e for e in (*adopted, *released) if isinstance(e, ApiError)]
        if errors:
            raise errors[0]
        # A fresh snapshot; the pods just adopted as the adoption left them until the
        # cache shows it.
        now_adopted = {p.uid: p for p in adopted if isinstance(p, PodInfo)}
        fresh = claim_pods(rt.uid, rt.namespace, deleting, pods_of(rt.uid))
        owned = {p.uid: p for p in fresh.owned}
        return list({**owned, **{u: p for u, p in now_adopted.items() if u not in owned}}.values())

    async def _adopt(
        self, rt: JobRuntime, pod: PodInfo, owner: JsonDict
    ) -> PodInfo | ApiError | None:
        try:
            await self.api.adopt_pod(rt.namespace, pod.name, pod.uid, owner)
        except ApiError as exc:
            return None if exc.not_found else exc
        log.info("%s/%s: adopted pod %s", rt.namespace, rt.name, pod.name)
        return replace(pod, controller_uid=rt.uid, has_finalizer=True)

    async def _release(self, rt: JobRuntime, pod: PodInfo) -> ApiError | None:
        try:
            await self.api.release_pod(rt.namespace, pod.name, pod.uid, rt.uid)
        except ApiError as exc:
            # Gone, or no longer the pod of that uid (422/409): nothing left to release.
            return None if exc.status in (404, 409, 422) else exc
        log.info("%s/%s: released pod %s (it no longer matches)", rt.namespace, rt.name, pod.name)
        return None

    def _sync_context(self, rt: JobRuntime, claimed: Iterable[PodInfo]) -> SyncContext:
        """The core's view of the job: its pods from the cache, the expectations the
        cache does not settle yet, and the time."""
        job = parse_job(rt.body)
        pods = {p.uid: p for p in claimed}
        now = self.clock.monotonic()
        return sync_context(
            SyncInput(
                job=job,
                pods=tuple(pods.values()),
                now=self.clock.now(),
                expectations_satisfied=rt.expectations.satisfied(pods, now),
                expected_removed_finalizers=rt.expectations.expected_removed_finalizers(pods, now),
                config=self.config.core,
            )
        )

    async def _track_and_count(
        self, rt: JobRuntime, ctx: SyncContext, plan: PodPlan, outcome: PodOutcome
    ) -> tuple[list[str], SyncResult]:
        """trackJobStatusAndRemoveFinalizers: status write 1 is durable before any
        finalizer goes, and only the pods whose finalizer went are counted."""
        tracked = track(ctx, plan, outcome)
        self._emit(rt, tracked.events)
        removed: list[str] = []
        if tracked.remove_finalizers and self._status_wait(rt, tracked.status) <= 0:
            await self._write_status(rt, tracked.status)
            metrics.record_pod_failure_policy_actions(tracked.policy_actions)
            removed = await self._remove_finalizers(rt, tracked.remove_finalizers)
        return removed, count_and_enact(ctx, tracked, removed, plan)

    def _observe_sync(
        self, ctx: SyncContext, started: float, result: str, outcome: PodOutcome
    ) -> None:
        """job_sync_duration_seconds and job_syncs_total."""
        managed = ctx.inp.expectations_satisfied and not ctx.job.deleting
        action = metrics.sync_action(outcome.created, len(outcome.deleted), managed)
        mode = _completion_mode(ctx.job.spec.completion_mode)
        elapsed = self.clock.monotonic() - started
        metrics.JOB_SYNC_DURATION.labels(mode, result, action).observe(elapsed)
        metrics.JOB_SYNCS.labels(mode, result, action).inc()

    async def _patch(
        self,
        rt: JobRuntime,
        call: Callable[[str, str, JsonDict], Awaitable[JsonDict]],
        patch: JsonDict,
        resource_version: object,
    ) -> JsonDict:
        """A merge patch with the resourceVersion it was computed from as precondition."""
        meta = {**patch.get("metadata", {}), "resourceVersion": resource_version}
        patch = {**patch, "metadata": meta}
        try:
            result = await call(rt.namespace, rt.name, patch)
        except ApiError as exc:
            if exc.conflict:
                rt.offer(await self.api.get_job(rt.namespace, rt.name))
                raise Conflict() from exc
            raise
        return result

    async def _write_final_status(self, rt: JobRuntime, done: SyncResult) -> float | None:
        """The sync's last status write; when DURATION is all it would change, only in
        this job's slot of the DURATION refresh budget, and only while the API client's
        rate limit (PJ_API_QPS) has room and no job waits for the progress budget: a
        cosmetic write never delays real work, nor spends API calls while jobs' progress
        is being held back; when it only reports progress, once the job's batch period
        is over. Returns when to sync again for the write: its DURATION slot, a retry
        while busy, the end of the batch period, or when the text changes next (None: no
        refresh)."""
        slots = self.duration_slots
        status = done.status
        if _only_duration_differs(parse_status(rt.body.get("status") or {}), status):
            if slots is None:
                return None
            if not self.api.has_spare_budget() or self.progress_write_waiting():
                return BUSY_REFRESH_RETRY_SECONDS
            wait = slots.slot(rt.uid, self.clock.monotonic())
            if wait > 0:
                return wait
        elif (wait := self._status_wait(rt, status)) > 0:
            return wait
        if await self._write_status(rt, status):
            self._release_slots(rt, slots)
        return done.refresh_after if slots is not None else None

    def _status_wait(self, rt: JobRuntime, wanted: JobStatus) -> float:
        """How long a status write waits (see status_batch.py): one that only reports
        progress waits for the job's batch period, then for a slot of the progress
        budget shared by all jobs; the finalizers of pods it records wait with it."""
        current = parse_status(rt.body.get("status") or {})
        now = self.clock.monotonic()
        wait = seconds_to_wait(
            current, wanted, rt.last_status_write, now, self.config.status_batch_seconds
        )
        if wait > 0 or self.progress_slots is None or not progress_only(current, wanted):
            return wait
        return self.progress_slots.slot(rt.uid, now)

    def _release_slots(self, rt: JobRuntime, *slots: SlotScheduler | None) -> None:
        """The job wrote (or is gone): the slots it held are used or freed for others."""
        now = self.clock.monotonic()
        for scheduler in slots:
            if scheduler is not None:
                scheduler.release(rt.uid, now)

    async def _write_status(self, rt: JobRuntime, status: JobStatus) -> bool:
        """Writes ``status`` unless the job has it already; says whether it wrote.
        The finished pods and jobs it adds are counted in the metrics once written."""
        current = parse_status(rt.body.get("status") or {})
        wanted = status_to_dict(status)
        if wanted == status_to_dict(current):
            return False
        before = rt.body["metadata"].get("resourceVersion")
        written = await self._patch(rt, self.api.patch_job_status, {"status": wanted}, before)
        rt.last_written_rv = str(written.get("metadata", {}).get("resourceVersion", ""))
        rt.last_status_write = self.clock.monotonic()
        rt.wrote(before, rt.last_written_rv, rt.last_status_write)
        rt.offer(written)
        # Any write carries the job's progress: its progress slot is used or freed.
        self._release_slots(rt, self.progress_slots)
        spec = rt.body.get("spec") or {}
        mode = _completion_mode(spec.get("completionMode"))
        _record_finished(mode, current, status)
        if mode == INDEXED_COMPLETION:  # only Indexed jobs have finished indexes to count
            metrics.record_finished_indexes(parse_spec(spec), current, status)
        return True

    # -- pods ------------------------------------------------------------------------
    async def _apply(
        self,
        rt: JobRuntime,
        body: Mapping[str, Any],
        plan: PodPlan,
        creation_reason: str = metrics.CREATE_NEW,
    ) -> tuple[PodOutcome, float | None]:
        if plan.delete:
            results = await asyncio.gather(
                *(self._delete_pod(rt, p, plan.remove_finalizer_before_delete) for p in plan.delete)
            )
            return PodOutcome(
                deleted=tuple(p.uid for p, ok in zip(plan.delete, results, strict=True) if ok)
            ), None
        if plan.create <= 0:
            return PodOutcome(), None
        wait = rt.create_retry_at - self.clock.monotonic()
        if wait > 0:
            return PodOutcome(), wait
        created, error = await self._create_pods(rt, body, plan, creation_reason)
        if error is None:
            rt.create_failures = 0
            return PodOutcome(created=created), None
        rt.create_failures += 1
        cfg = self.config
        retry = min(cfg.retry_base_seconds * 2.0 ** (rt.create_failures - 1), cfg.retry_max_seconds)
        rt.create_retry_at = self.clock.monotonic() + retry
        log.warning(
            "%s/%s: pod creation failed (retry in %.0fs): %s", rt.namespace, rt.name, retry, error
        )
        return PodOutcome(created=created, create_error=error), retry

    async def _create_pods(
        self,
        rt: JobRuntime,
        body: Mapping[str, Any],
        plan: PodPlan,
        reason: str = metrics.CREATE_NEW,
    ) -> tuple[int, str | None]:
        """Slow start, as upstream: batches of 1, 2, 4, ...; stop at the first error.
        An Indexed job's pods are created for ``plan.create_indexes`` in order.

        Unlike upstream, a job whose creations all succeeded last time starts where that
        slow start ended rather than at 1: slow start guards against a flood of doomed
        requests (quota, admission), and a batch that just succeeded in full says the
        next is not doomed. An error starts the next slow start at 1 again."""
        created = 0
        batch = rt.slow_start_batch
        remaining = plan.create
        new_pods = _new_pods(body, plan)
        while remaining > 0:
            size = min(batch, remaining)
            batch_pods = [next(new_pods) for _ in range(size)]
            results = await asyncio.gather(*(self._create_pod(rt, pod) for pod in batch_pods))
            created += sum(1 for r in results if r is None)
            errors = [r for r in results if r is not None]
            # As upstream, a creation refused for a terminating namespace counts neither way.
            refused = sum(1 for e in errors if not e.has_cause(NAMESPACE_TERMINATING))
            metrics.record_pods_creation(reason, size - len(errors), refused)
            if errors:
                rt.slow_start_batch = 1
                if all(e.has_cause(NAMESPACE_TERMINATING) for e in errors):
                    # As upstream: every later creation fails too, and the namespace's
                    # deletion takes the job with it; no error, no retry, no event.
                    return created, None
                return created, errors[0].message or str(errors[0])
            remaining -= size
            rt.slow_start_batch = max(rt.slow_start_batch, size)
            batch = min(batch * 2, MAX_SLOW_START_BATCH)
        return created, None

    async def _create_pod(self, rt: JobRuntime, new_pod: JsonDict) -> ApiError | None:
        try:
            pod = await self.api.create_pod(rt.namespace, new_pod)
        except ApiError as exc:
            return exc
        meta = pod.get("metadata", {})
        rt.expectations.expect_creation(str(meta.get("uid", "")), self.clock.monotonic())
        self.recorder.record(
            rt.ref, "Normal", "SuccessfulCreate", f"Created pod: {meta.get('name')}"
        )
        return None

    async def _delete_pod(self, rt: JobRuntime, pod: PodInfo, remove_finalizer: bool) -> bool:
        """deleteJobPods: the finalizer first when the pod must not count as failed."""
        try:
            if remove_finalizer and pod.has_finalizer:
                try:
                    await self.api.remove_pod_finalizer(rt.namespace, pod.name)
                    rt.expectations.expect_finalizer_removed(pod.uid, self.clock.monotonic())
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            await self.api.delete_pod(rt.namespace, pod.name, pod.uid)
        except ApiError as exc:
            if exc.not_found:
                return True
            self.recorder.record(
                rt.ref, "Warning", "FailedDelete", f"Error deleting: {exc.message}"
            )
            log.warning("%s/%s: deleting pod %s failed: %s", rt.namespace, rt.name, pod.name, exc)
            return False
        rt.expectations.expect_deletion(pod.uid, self.clock.monotonic())
        self.recorder.record(rt.ref, "Normal", "SuccessfulDelete", f"Deleted pod: {pod.name}")
        return True

    async def _remove_finalizers(self, rt: JobRuntime, pods: Iterable[PodInfo]) -> list[str]:
        pods = list(pods)

        async def remove(pod: PodInfo) -> bool:
            try:
                await self.api.remove_pod_finalizer(rt.namespace, pod.name)
            except ApiError as exc:
                if not exc.not_found:
                    log.warning(
                        "%s/%s: releasing pod %s failed: %s", rt.namespace, rt.name, pod.name, exc
                    )
                    return False
            rt.expectations.expect_finalizer_removed(pod.uid, self.clock.monotonic())
            return True

        results = await asyncio.gather(*(remove(p) for p in pods))
        return [p.uid for p, ok in zip(pods, results, strict=True) if ok]

    def _emit(self, rt: JobRuntime, events: Iterable[Event]) -> None:
        for event in events:
            self.recorder.record(rt.ref, event.type, event.reason, event.message)

    # -- pods without a job ------------------------------------------------------------
    async def release_orphan(self, namespace: str, name: str) -> None:
        """A pod whose job is gone keeps no finalizer (upstream's orphan queue); a pod
        already being released (its job's deletion, then its own events) is released once."""
        key = (namespace, name)
        if key in self.releasing_orphans:
            return
        self.releasing_orphans.add(key)
        try:
            await self.api.remove_pod_finalizer(namespace, name)
            log.info("released orphan pod %s/%s", namespace, name)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("releasing orphan pod %s/%s failed: %s", namespace, name, exc)
        finally:
            self.releasing_orphans.discard(key)

    async def release_unwatched(self, pod: PodInfo) -> None:
        """A pod that left the operator's pod watch (its job label removed) with the
        tracking finalizer on: ReleasePod, whatever its job is doing."""
        try:
            if pod.controller_uid:
                await self.api.release_pod(pod.namespace, pod.name, pod.uid, pod.controller_uid)
            else:
                await self.api.remove_pod_finalizer(pod.namespace, pod.name)
            log.info(
                "released pod %s/%s: it no longer has its job's label", pod.namespace, pod.name
            )
        except ApiError as exc:
            if exc.status not in (404, 409, 422):
                log.warning("releasing pod %s/%s failed: %s", pod.namespace, pod.name, exc)


def _new_pods(body: Mapping[str, Any], plan: PodPlan) -> Iterator[JsonDict]:
    """The pods ``plan`` creates, built as they are needed: from the job's template, or
    for an Indexed job from its index's (addCompletionIndexEnvVariables and the rest of
    manageJob's per-index template)."""
    if not plan.create_indexes:
        while True:
            yield build_pod(body)
    job = parse_job(body)
    templates = pod_templates(job, job_template(body), plan.create_indexes, dict(plan.replaced))
    for template, generate_name in templates:
        yield build_pod(body, template, generate_name)


def _completion_mode(completion_mode: object) -> str:
    """getCompletionMode: the metrics' completion_mode label for spec.completionMode."""
    if completion_mode == INDEXED_COMPLETION:
        return INDEXED_COMPLETION
    return NON_INDEXED_COMPLETION


def _creation_reason(ctx: SyncContext) -> str:
    """recordJobPodsCreationTotal's reason for this sync's creations (a sync that creates
    deletes nothing, so the terminating pods are those the sync started with)."""
    spec = ctx.job.spec
    return metrics.pod_creation_reason(spec.pod_replacement_policy, ctx.failed, ctx.terminating)


def _only_duration_differs(current: JobStatus, wanted: JobStatus) -> bool:
    return current != wanted and replace(wanted, duration_text=current.duration_text) == current


def _record_finished(mode: str, before: JobStatus, after: JobStatus) -> None:
    """recordJobPodFinished and the jobs_finished_total count of enactJobFinished
    (``mode``: the job's completion mode label)."""
    if after.succeeded > before.succeeded:
        metrics.JOB_PODS_FINISHED.labels(mode, metrics.SUCCEEDED).inc(
            after.succeeded - before.succeeded
        )
    if after.failed > before.failed:
        metrics.JOB_PODS_FINISHED.labels(mode, metrics.FAILED).inc(after.failed - before.failed)
    if is_finished(after) and not is_finished(before):
        for cond in after.conditions:
            if cond.status == "True" and cond.type in (c.COND_COMPLETE, c.COND_FAILED):
                result = metrics.SUCCEEDED if cond.type == c.COND_COMPLETE else metrics.FAILED
                metrics.JOBS_FINISHED.labels(mode, result, cond.reason).inc()


def _next_delay(satisfied: bool, *delays: float | None) -> float | None:
    """The soonest delay asked for (None: wait for an event)."""
    present = [d for d in delays if d is not None]
    if not satisfied:
        present.append(5.0)  # a safety net: watch events normally settle expectations
    return max(min(present), 0.0) if present else None


def _log_sync(rt: JobRuntime, report: SyncReport, status: JobStatus) -> None:
    """One line for a sync that changed pods."""
    plan, outcome = report.plan, report.outcome
    if not (plan.create or plan.delete or report.removed):
        return
    log.info(
        "%s/%s: %s created %d/%d, deleted %d/%d, released %d; %s",
        rt.namespace,
        rt.name,
        plan.reason,
        outcome.created,
        plan.create,
        len(outcome.deleted),
        len(plan.delete),
        len(report.removed),
        _summary(status),
    )


def _summary(status: JobStatus) -> str:
    return (
        f"active={status.active} succeeded={status.succeeded} failed={status.failed} "
        f"uncounted={len(status.uncounted_succeeded) + len(status.uncounted_failed)} "
        f"[{status.status_text} {status.completions_text} {status.duration_text}]"
    )
