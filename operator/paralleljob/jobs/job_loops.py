"""The job loops: every job's syncs, run by a few workers from one work queue
(work_queue.py; upstream's ``--concurrent-job-syncs``, ``PJ_CONCURRENT_JOB_SYNCS``),
with one timer for every job's next due sync (timers.py). A job is queued by its first
event, by any later one (one of its pods changed, its spec changed), and when the delay
its last sync asked for runs out. Syncs of one job never overlap; at most one
event-driven sync of a job starts per ``sync_batch_seconds`` (an event after a quiet
spell is acted on at once, a burst is gathered into the next sync). A job costs no task
and no timer of its own, and a finished job nothing but its record. A failed sync is
retried with back-off (retry.py); a conflict syncs again at once."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from ..config import ControllerConfig
from ..core import PodInfo
from ..runtime.api import ApiError
from ..runtime.progress import LoopClock
from ..runtime.retry import Retry
from ..runtime.timers import Timers
from ..runtime.work_queue import WorkQueue
from .job_runtime import JobRuntime
from .status_writer import Conflict

log = logging.getLogger(__name__)


class Synced(Protocol):
    """What a sync reports to its loop: when to sync again (None: at the next event)."""

    @property
    def delay(self) -> float | None: ...


#: The new jobs a start syncs early at most (JobLoops._work): each is one LIST of its
#: pods, which the API server answers by filtering every pod of the namespace; the rest
#: wait for the caches, as every job did before.
EARLY_SYNCS_AT_MOST = 100


#: One sync of a job.
Sync = Callable[["JobRuntime"], Awaitable[Synced]]


def pending_since(rt: JobRuntime, before: float, queue_moved: float = float("-inf")) -> bool:
    """Whether any work the liveness probe looks at has been pending since ``before``
    or earlier (cheap: no pods are read), so that the probe reads the pods of only the
    loops that may be stalled, not of every job that was just woken. A job waiting for
    a worker waits since the work queue last handed one out (``queue_moved``)."""
    loop, unechoed = rt.loop, rt.status.unechoed
    oldest_expected = rt.pods.expectations.oldest()
    return any(
        since is not None and since <= before
        for since in (
            _waiting_since(loop.woken_at, queue_moved),
            _waiting_since(loop.timer_due, queue_moved),
            loop.sync_started,
            unechoed[1] if unechoed is not None else None,
            oldest_expected,
        )
    )


def _waiting_since(due: float | None, queue_moved: float) -> float | None:
    """How long a job due since ``due`` has waited for a sync that is late: a backlog the
    workers are getting through is not a stall (10,000 jobs created at once keep some
    waiting for minutes), a queue that has not moved since the job was due is."""
    return None if due is None else max(due, queue_moved)


def loop_clock(
    rt: JobRuntime,
    pods: Mapping[str, PodInfo],
    now: float,
    queue_moved: float = float("-inf"),
) -> LoopClock:
    """The job's pending work, for the liveness probe (changes nothing)."""
    loop, unechoed = rt.loop, rt.status.unechoed
    return LoopClock(
        woken_at=_waiting_since(loop.woken_at, queue_moved),
        timer_due=_waiting_since(loop.timer_due, queue_moved),
        sync_started=loop.sync_started,
        unobserved_since=rt.pods.expectations.unobserved_since(pods, now),
        unechoed_since=unechoed[1] if unechoed is not None else None,
    )


class JobLoops:
    def __init__(
        self,
        sync: Sync,
        config: ControllerConfig,
        monotonic: Callable[[], float],
        on_end: Callable[[JobRuntime], None],
        ready: asyncio.Event | None = None,
        early_sync: Sync | None = None,
        listed: asyncio.Event | None = None,
    ) -> None:
        self._sync = sync
        self.config = config
        self.monotonic = monotonic
        self._on_end = on_end
        #: Set once the caches are current (CacheSync.current): no job syncs before,
        #: but a new job's first, by ``early_sync`` (None: none), while the pods are
        #: being listed (``listed``, CacheSync.listed, not set: a cold start; a standby
        #: that leads has them, current a second later).
        self._ready = ready
        self._early_sync = early_sync
        self._listed = listed
        #: The early syncs left.
        self._early_left = EARLY_SYNCS_AT_MOST
        self.jobs: dict[str, JobRuntime] = {}
        self._queue = WorkQueue()
        self._timers = Timers(monotonic, self._queue.add)
        self._workers: list[asyncio.Task[None]] = []
        #: When a worker last started a sync (monotonic): the work queue moves.
        self.queue_moved = float("-inf")

    def start(self, rt: JobRuntime) -> None:
        """A job's first event: it is synced as soon as a worker is free (a job not
        started yet before the jobs queued otherwise, work_queue.py)."""
        if not self._workers:
            self._start_workers()
        self.jobs[rt.uid] = rt
        rt.loop.attach(functools.partial(self._woken, rt))
        # A job no controller has started yet is new work: ahead of every resync.
        self._queue.add(rt.uid, urgent=rt.job.status.start_time is None)

    def _start_workers(self) -> None:
        count = max(self.config.concurrent_syncs, 1)
        self._workers = [
            asyncio.create_task(self._work(), name=f"job sync worker {i}") for i in range(count)
        ]
        self._workers.append(asyncio.create_task(self._timers.run(), name="job timers"))
        if self._early_sync is not None and not self._is_ready():
            self._workers.append(asyncio.create_task(self._wake_when_ready(), name="job gate"))

    def _is_ready(self) -> bool:
        return self._ready is None or self._ready.is_set()

    def _not_ready(self) -> bool:
        return not self._is_ready()

    def _paused(self) -> bool:
        """No job may be taken: the caches are not current and no early sync may go
        (the pods are listed, or EARLY_SYNCS_AT_MOST went): the new jobs wait, queued
        ahead of the others."""
        if self._is_ready():
            return False
        listing = self._listed is None or not self._listed.is_set()
        return not (listing and self._early_left > 0)

    async def _wake_when_ready(self) -> None:
        """The caches are current: the workers take every job now."""
        assert self._ready is not None
        await self._ready.wait()
        self._queue.wake()

    async def stop_all(self) -> None:
        """Operator shutdown: the syncs running end, then the workers."""
        for rt in list(self.jobs.values()):
            rt.loop.stopped = True
        while any(self._queue.processing(uid) for uid in self.jobs):
            await asyncio.sleep(0.01)
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        for rt in list(self.jobs.values()):
            self._end(rt)

    def pending_syncs(self) -> int:
        """Jobs woken (by an event, or their timer) whose sync has not started yet."""
        return len(self._queue)

    def _woken(self, rt: JobRuntime) -> None:
        """An event (or stop) for a job: queued now, or once its event batch is over
        (a job being synced is queued again when its sync ends)."""
        if self._queue.processing(rt.uid):
            return
        if rt.loop.stopped:
            self._end(rt)
            return
        wait = rt.loop.last_sync_started + self.config.sync_batch_seconds - self.monotonic()
        if wait > 0:
            self._due_in(rt, wait, earliest=True)
        else:
            self._queue.add(rt.uid)

    def _due_in(self, rt: JobRuntime, delay: float, *, earliest: bool = False) -> None:
        """The job's next sync is due ``delay`` from now (``earliest``: unless due sooner)."""
        due = self.monotonic() + delay
        current = self._timers.due(rt.uid)
        if earliest and current is not None and current <= due:
            return
        rt.loop.timer_due = due
        self._timers.set(rt.uid, due)

    async def _work(self) -> None:
        """Syncs the jobs queued, one at a time. Until the caches are current only the
        new jobs (queued urgent, first events of jobs no controller has started) are
        taken, each synced early, its pods read from the API server: its first pods
        wait for no listing (a restart lists 150,000 pods in 35 s); past
        EARLY_SYNCS_AT_MOST they wait too. Without an early sync nothing is taken
        before."""
        if self._early_sync is None and self._ready is not None:
            await self._ready.wait()
        while True:
            uid = await self._queue.get(urgent_only=self._not_ready, paused=self._paused)
            rt = self.jobs.get(uid)
            try:
                if rt is not None and not rt.loop.stopped:
                    delay = await self.timed_sync(rt, self._sync_now(rt))
                    self._after_sync(rt, delay)
            finally:
                self._queue.done(uid)
            if rt is not None and rt.loop.stopped:
                self._end(rt)
            # A queued key is taken without a wait, and a sync with nothing to write
            # makes no API call: without this turn one worker ran a backlog of such
            # syncs in one go, holding the event loop and with it the watches, the other
            # workers and a new job's first pod (own pauses of 1-2.5 s at 10,000 running
            # jobs in scenario 8; py-spy saw the loop busy for 3 s in back-to-back syncs).
            await asyncio.sleep(0)

    def _after_sync(self, rt: JobRuntime, delay: float | None) -> None:
        """What the sync asked for: its next sync after ``delay`` (None: at the next
        event); an event during the sync is acted on once its batch is over."""
        self._timers.cancel(rt.uid)
        rt.loop.timer_due = None
        if delay is not None:
            if delay <= 0:
                # A new job still (a spec defaults' write first): ahead, early if it may.
                self._queue.add(rt.uid, urgent=rt.job.status.start_time is None)
            else:
                self._due_in(rt, delay)
        if rt.loop.woken:
            wait = rt.loop.last_sync_started + self.config.sync_batch_seconds - self.monotonic()
            self._due_in(rt, max(wait, 0.0), earliest=True)

    def _end(self, rt: JobRuntime) -> None:
        """The job's syncs are over: it is forgotten."""
        self._timers.cancel(rt.uid)
        rt.loop.detach()
        if self.jobs.get(rt.uid) is rt:
            del self.jobs[rt.uid]
            self._on_end(rt)

    def _sync_now(self, rt: JobRuntime) -> Sync:
        """The sync a job taken now gets: an early one while the caches are not current
        (only new jobs are taken then, and only while one may go: _paused)."""
        if self._early_sync is None or self._is_ready():
            return self._sync
        self._early_left -= 1
        return self._early_sync

    async def timed_sync(self, rt: JobRuntime, sync: Sync | None = None) -> float | None:
        """sync_safely, with the progress markers the liveness probe reads."""
        loop = rt.loop
        loop.woken_at = loop.timer_due = None
        loop.sync_started = loop.last_sync_started = self.queue_moved = self.monotonic()
        try:
            return await self.sync_safely(rt, sync)
        finally:
            loop.sync_started = None

    async def sync_safely(self, rt: JobRuntime, sync: Sync | None = None) -> float | None:
        """One sync (``sync``, else the loops' own); never raises (a failure is logged
        and retried with back-off)."""
        retry = rt.loop.retry
        try:
            delay = (await (sync or self._sync)(rt)).delay
        except Conflict:
            retry.succeeded()
            return 0.0
        except ApiError as exc:
            if exc.not_found:
                log.debug("%s/%s is gone", rt.namespace, rt.name)
                return None
            delay = self._retry_delay(retry)
            log.warning(
                "sync of %s/%s failed, retrying in %.0fs: %s", rt.namespace, rt.name, delay, exc
            )
            return delay
        except Exception:
            delay = self._retry_delay(retry)
            log.exception("sync of %s/%s failed, retrying in %.0fs", rt.namespace, rt.name, delay)
            return delay
        retry.succeeded()
        return delay

    def _retry_delay(self, retry: Retry) -> float:
        return retry.failed(self.config.retry_base_seconds, self.config.retry_max_seconds)
