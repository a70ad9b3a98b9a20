"""The per-job loops: one asyncio task per job that sleeps until something wakes it --
one of its pods changed, its spec changed, a timer a sync asked for ran out -- and then
runs one sync. Syncs of one job never overlap; syncs of different jobs run concurrently.
A failed sync is retried with back-off (retry.py); a conflict syncs again at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from ..config import ControllerConfig
from ..core.model import PodInfo
from .api import ApiError
from .progress import LoopClock
from .retry import Retry
from .status_writer import Conflict

if TYPE_CHECKING:
    from .runtime import JobRuntime

log = logging.getLogger(__name__)


class Synced(Protocol):
    """What a sync reports to its loop: when to sync again (None: at the next event)."""

    @property
    def delay(self) -> float | None: ...


#: One sync of a job.
Sync = Callable[["JobRuntime"], Awaitable[Synced]]


class LoopState:
    """The loop's part of a job's state: what wakes it, and the progress markers the
    liveness probe reads (monotonic seconds, see progress.py)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.stopped = False
        #: When the last sync started, for batching pod events.
        self.last_sync_started = float("-inf")
        #: Consecutive failed syncs.
        self.retry = Retry()
        self.woken_at: float | None = None
        self.timer_due: float | None = None
        self.sync_started: float | None = None

    def stop(self) -> None:
        """Ends the loop after its current sync (the job is gone, or the operator stops)."""
        self.stopped = True
        self.wake.set()

    def poke(self) -> None:
        """Wakes the loop (a pod or job event), remembering since when it has work."""
        if self.woken_at is None:
            self.woken_at = self._monotonic()
        self.wake.set()


def has_pending_work(rt: JobRuntime, now: float) -> bool:
    """Anything the liveness probe would look at (cheap: no pods are read)."""
    loop = rt.loop
    return (
        loop.woken_at is not None
        or (loop.timer_due is not None and loop.timer_due <= now)
        or loop.sync_started is not None
        or rt.status.unechoed is not None
        or rt.pods.expectations.pending()
    )


def loop_clock(rt: JobRuntime, pods: Mapping[str, PodInfo], now: float) -> LoopClock:
    """The job's pending work, for the liveness probe (changes nothing)."""
    loop, unechoed = rt.loop, rt.status.unechoed
    return LoopClock(
        woken_at=loop.woken_at,
        timer_due=loop.timer_due,
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
    ) -> None:
        self._sync = sync
        #: Set once the pod cache has listed: a job syncs only then.
        self._ready = ready
        self.config = config
        self.monotonic = monotonic
        self._on_end = on_end
        self.jobs: dict[str, JobRuntime] = {}

    def start(self, rt: JobRuntime) -> None:
        self.jobs[rt.uid] = rt
        rt.loop.task = asyncio.create_task(self._run(rt), name=f"job {rt.namespace}/{rt.name}")

    async def stop_all(self) -> None:
        """Operator shutdown: every loop stops after its current sync."""
        tasks = [rt.loop.task for rt in self.jobs.values() if rt.loop.task is not None]
        for rt in list(self.jobs.values()):
            rt.loop.stop()
        await asyncio.gather(*tasks, return_exceptions=True)

    def pending_syncs(self) -> int:
        """Jobs woken (by an event, or their timer) whose sync has not started yet."""
        now = self.monotonic()
        return sum(
            1
            for rt in list(self.jobs.values())
            if rt.loop.sync_started is None
            and (
                rt.loop.woken_at is not None
                or (rt.loop.timer_due is not None and rt.loop.timer_due <= now)
            )
        )

    async def _run(self, rt: JobRuntime) -> None:
        loop = rt.loop
        delay: float | None = 0.0
        try:
            if self._ready is not None:
                await self._ready.wait()
            while not loop.stopped:
                if delay is None or delay > 0:
                    loop.timer_due = None if delay is None else self.monotonic() + delay
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(loop.wake.wait(), timeout=delay)
                    if loop.stopped:
                        break
                    if loop.wake.is_set():
                        await self.batch_events(rt)
                loop.wake.clear()
                delay = await self.timed_sync(rt)
        finally:
            if self.jobs.get(rt.uid) is rt:
                del self.jobs[rt.uid]
            self._on_end(rt)

    async def batch_events(self, rt: JobRuntime) -> None:
        """At most one event-driven sync per ``sync_batch_seconds``: an event after a
        quiet spell is acted on at once; a burst of pod events is gathered into the
        next sync (upstream always waits its 1 s batch period)."""
        wait = rt.loop.last_sync_started + self.config.sync_batch_seconds - self.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    async def timed_sync(self, rt: JobRuntime) -> float | None:
        """sync_safely, with the progress markers the liveness probe reads."""
        loop = rt.loop
        loop.woken_at = loop.timer_due = None
        loop.sync_started = loop.last_sync_started = self.monotonic()
        try:
            return await self.sync_safely(rt)
        finally:
            loop.sync_started = None

    async def sync_safely(self, rt: JobRuntime) -> float | None:
        """One sync; never raises (a failure is logged and retried with back-off)."""
        retry = rt.loop.retry
        try:
            delay = (await self._sync(rt)).delay
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
