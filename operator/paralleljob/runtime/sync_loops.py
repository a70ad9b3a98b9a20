"""The loop engine a controller of a kind with few objects syncs on: a few workers over
one work queue (work_queue.py), one timer heap (timers.py) and a retry back-off per key
(retry.py), the parts the job loops (job_loops.py) are built of, without what only jobs
need (event batching, urgent new jobs, the liveness markers). Upstream's controllers
all run so: a rate-limited work queue, ``--concurrent-*-syncs`` workers, ``AddAfter``
for a requeue.

A key is synced by one worker at a time; added while it syncs, it is synced again once
that sync is done. A sync returns when it is due again (None: at its next event). A
failed sync is retried after 1 s doubling to 1 min (a 409 Conflict at once: the newer
object is what the next sync reads); a key forgotten (its object deleted) is never
synced again unless added anew."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..config import ControllerConfig
from .api import ApiError
from .retry import Retry
from .timers import Timers
from .work_queue import WorkQueue

log = logging.getLogger(__name__)

#: One sync of a key: the seconds until it is due again (None: at its next event).
KeySync = Callable[[str], Awaitable[float | None]]


class SyncLoops:
    def __init__(
        self,
        sync: KeySync,
        config: ControllerConfig,
        monotonic: Callable[[], float],
        *,
        workers: int,
        name: str,
        ready: asyncio.Event | None = None,
    ) -> None:
        self._sync = sync
        self._config = config
        self._workers_wanted = max(workers, 1)
        self._name = name
        #: Set once the caches the syncs read are in sync: no key syncs before.
        self._ready = ready
        self._queue = WorkQueue()
        self._timers = Timers(monotonic, self._queue.add)
        self._monotonic = monotonic
        #: The keys this engine syncs, with their retry state.
        self._retries: dict[str, Retry] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, key: str) -> None:
        """``key`` is synced as soon as a worker is free."""
        if not self._tasks:
            self._start()
        self._retries.setdefault(key, Retry())
        self._queue.add(key)

    def forget(self, key: str) -> None:
        """``key``'s object is gone: no timer, no retry, and no sync unless added anew
        (a sync running now ends as it will, and sets no timer)."""
        self._retries.pop(key, None)
        self._timers.cancel(key)

    def __contains__(self, key: str) -> bool:
        return key in self._retries

    def pending(self) -> int:
        """Keys waiting for a worker."""
        return len(self._queue)

    def _start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(), name=f"{self._name} worker {i}")
            for i in range(self._workers_wanted)
        ]
        self._tasks.append(asyncio.create_task(self._timers.run(), name=f"{self._name} timers"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self) -> None:
        if self._ready is not None:
            await self._ready.wait()
        while True:
            key = await self._queue.get()
            try:
                if key in self._retries:
                    self._after(key, await self.sync_safely(key))
            finally:
                self._queue.done(key)
            await asyncio.sleep(0)  # a backlog of quick syncs never holds the event loop

    def _after(self, key: str, delay: float | None) -> None:
        """The key's next sync, unless it was forgotten meanwhile."""
        self._timers.cancel(key)
        if delay is None or key not in self._retries:
            return
        if delay <= 0:
            self._queue.add(key)
        else:
            self._timers.set(key, self._monotonic() + delay)

    async def sync_safely(self, key: str) -> float | None:
        """One sync; never raises: a failure is logged and retried with back-off."""
        retry = self._retries.get(key) or Retry()
        try:
            delay = await self._sync(key)
        except ApiError as exc:
            if exc.conflict and exc.reason != "AlreadyExists":
                retry.succeeded()
                return 0.0
            delay = self._retry_delay(retry)
            log.warning("%s %s: %s; again in %.0fs", self._name, key, exc, delay)
            return delay
        except Exception:
            delay = self._retry_delay(retry)
            log.exception("%s %s: sync failed; again in %.0fs", self._name, key, delay)
            return delay
        retry.succeeded()
        return delay

    def _retry_delay(self, retry: Retry) -> float:
        return retry.failed(self._config.retry_base_seconds, self._config.retry_max_seconds)
