"""One sync of one job (upstream's ``syncJob``): the core's three steps, their API calls
in upstream's order. A crash between any two calls counts no pod twice and loses none:
the next sync resumes from what the API server holds."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..config import ControllerConfig
from ..core import (
    Event,
    JobStatus,
    PodInfo,
    PodOutcome,
    PodPlan,
    SyncContext,
    SyncInput,
    SyncResult,
    count_and_enact,
    managed_by_external_controller,
    plan_pods,
    sync_context,
    track,
)
from ..runtime import metrics
from ..runtime.api import ControllerApi
from ..runtime.consistency import PODS, CacheVersion, unknown_version
from ..runtime.events import Recorder
from .claims import PodsOf, claim
from .job_runtime import JobRuntime
from .pod_writer import PodWriter
from .status_writer import StatusWriter, completion_mode

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Clock:
    """Where the shell reads the time (upstream's job controller holds a
    ``clock.WithTicker``): ``now`` is the core's wall clock, ``monotonic`` the seconds
    that expectations, retries and the write budgets measure."""

    now: Callable[[], datetime] = _utc_now
    monotonic: Callable[[], float] = time.monotonic


REAL_CLOCK = Clock()


@dataclass(frozen=True)
class SyncReport:
    """What one sync did: when to sync again and, when the core ran, what it planned,
    what the pod calls achieved, whose finalizers went, and its result."""

    delay: float | None
    plan: PodPlan = field(default_factory=PodPlan)
    outcome: PodOutcome = field(default_factory=PodOutcome)
    removed: tuple[str, ...] = ()
    result: SyncResult | None = None


class JobSync:
    def __init__(
        self,
        api: ControllerApi,
        recorder: Recorder,
        config: ControllerConfig,
        clock: Clock,
        pods_of: PodsOf,
        pods: PodWriter,
        status: StatusWriter,
        cache_version: CacheVersion = unknown_version,
    ) -> None:
        self.api = api
        #: Where the sync reads how far each cache has come (read-your-writes).
        self.cache_version = cache_version
        self.recorder = recorder
        self.config = config
        self.clock = clock
        self.pods_of = pods_of
        self.pods = pods
        self.status = status

    async def sync(self, rt: JobRuntime) -> SyncReport:
        """syncJob: a write the job needs first, if any (then sync again); else the
        core's three steps: the pods, status write 1 (finished pods recorded by UID),
        finalizer removals, status write 2 (those pods counted). A job that
        spec.managedBy gives to another controller is left alone. No sync begins before
        the caches show the job's own last writes (consistency.py)."""
        return await self._sync(rt, self.pods_of)

    async def sync_early(self, rt: JobRuntime) -> SyncReport:
        """The sync of a job no controller has started yet, before the pod cache is
        current (a restart still listing every pod: 35 s at 150,000 pods, job_loops.py):
        its pods read from the API server, one LIST by its selector, as the cache would
        show them once current. A consistent read, so it sees every pod an earlier
        leader created for the job; the pods this sync creates are expected as in any
        sync (expectations.py) and the next sync waits for the cache to show them."""
        pods = await self.api.list_job_pods(rt.namespace, rt.uid)
        log.debug("%s/%s: synced before the pods are listed (%d)", rt.namespace, rt.name, len(pods))
        return await self._sync(rt, lambda uid: pods if uid == rt.uid else [])

    async def _sync(self, rt: JobRuntime, pods_of: PodsOf) -> SyncReport:
        if self._stale(rt):
            return SyncReport(delay=rt.own_writes.retry_in())
        if self._managed_elsewhere(rt):
            return SyncReport(delay=None)
        if await self._write_spec_defaults(rt):
            return SyncReport(delay=0.0)
        ctx = self._sync_context(rt, await claim(self.api, rt, pods_of))
        plan = plan_pods(ctx)
        started = self.clock.monotonic()
        outcome = PodOutcome()
        result = "error"
        try:
            outcome, retry_in = await self.pods.apply(rt, plan, _creation_reason(ctx))
            removed, done = await self._track_and_count(rt, ctx, plan, outcome)
            refresh_in = await self.status.write_final(rt, done)
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

    def _stale(self, rt: JobRuntime) -> bool:
        """EnsureReady at the head of syncJob: a cache behind the job's own writes."""
        stale = rt.own_writes.stale(rt.namespace, self.cache_version)
        if stale is None:
            return False
        group, resource = ("", PODS) if stale.resource == PODS else (rt.kind.group, rt.kind.plural)
        metrics.record_stale_sync(group, resource)
        log.debug(
            "%s/%s: %s cache at %d, behind this job's write %d: sync skipped",
            rt.namespace,
            rt.name,
            stale.resource,
            stale.read,
            stale.written,
        )
        return True

    def _managed_elsewhere(self, rt: JobRuntime) -> bool:
        """syncJob's managedByExternalController check, logged once per job."""
        other = managed_by_external_controller(rt.spec, rt.kind)
        if other is not None and rt.managed_by_logged != other:
            rt.managed_by_logged = other
            log.info(
                "%s/%s: skipped, managed by another controller: spec.managedBy=%s",
                rt.namespace,
                rt.name,
                other,
            )
        return other is not None

    async def _write_spec_defaults(self, rt: JobRuntime) -> bool:
        """Writes the defaults a batch/v1 Job gets from the API server; says whether it
        wrote (the next sync starts from the version written). A default the API server
        does not store (the CRD predates the field) is not written again for this job;
        the core applies it anyway (model.parse_spec)."""
        defaults = {
            k: v
            for k, v in (rt.kind.spec_defaults(rt.spec) or {}).items()
            if k not in rt.unstored_defaults
        }
        if rt.job.deleting or not defaults:
            return False
        written = await self.status.patch(rt, self.api.patch_job, {"spec": defaults})
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

    def _sync_context(self, rt: JobRuntime, claimed: Iterable[PodInfo]) -> SyncContext:
        """The core's view of the job: its pods from the cache, the expectations the
        cache does not settle yet, and the time."""
        pods = {p.uid: p for p in claimed}
        now = self.clock.monotonic()
        expectations = rt.pods.expectations
        return sync_context(
            SyncInput(
                job=rt.job,
                pods=tuple(pods.values()),
                now=self.clock.now(),
                expectations_satisfied=expectations.satisfied(pods, now),
                expected_removed_finalizers=expectations.expected_removed_finalizers(pods, now),
                config=self.config.core,
                kind=rt.kind,
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
        if tracked.remove_finalizers and self.status.wait(rt, tracked.status) <= 0:
            await self.status.write(rt, tracked.status)
            metrics.record_pod_failure_policy_actions(tracked.policy_actions)
            removed = await self.pods.remove_finalizers(rt, tracked.remove_finalizers)
        return removed, count_and_enact(ctx, tracked, removed, plan)

    def _observe_sync(
        self, ctx: SyncContext, started: float, result: str, outcome: PodOutcome
    ) -> None:
        """job_sync_duration_seconds and job_syncs_total."""
        managed = ctx.inp.expectations_satisfied and not ctx.job.deleting
        action = metrics.sync_action(outcome.created, len(outcome.deleted), managed)
        mode = completion_mode(ctx.job.spec.completion_mode)
        elapsed = self.clock.monotonic() - started
        metrics.JOB_SYNC_DURATION.labels(mode, result, action).observe(elapsed)
        metrics.JOB_SYNCS.labels(mode, result, action).inc()

    def _emit(self, rt: JobRuntime, events: Iterable[Event]) -> None:
        for event in events:
            self.recorder.record(rt.ref, event.type, event.reason, event.message)


def _creation_reason(ctx: SyncContext) -> str:
    """recordJobPodsCreationTotal's reason for this sync's creations (a sync that creates
    deletes nothing, so the terminating pods are those the sync started with)."""
    spec = ctx.job.spec
    return metrics.pod_creation_reason(spec.pod_replacement_policy, ctx.failed, ctx.terminating)


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
