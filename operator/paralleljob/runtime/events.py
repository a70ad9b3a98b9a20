"""Kubernetes Events about ParallelJobs, posted in the background like client-go's recorder.

Posting never blocks a sync: events go through a bounded queue to a few workers, and an
event that cannot be posted is logged and dropped. Under a client-side rate limit
(PJ_API_QPS), an Event waits until the limit has room: it never takes a token pod
creation or a status write is waiting for. Upstream's recorder gets about the same from
its single posting goroutine, which falls behind a busy controller. As client-go's
recorder does, a spam filter lets each job post 25 events of a type at once and then one
per 5 minutes, so that a job of 10,000 pods costs the API server 25 "Created pod" Events,
not 10,000. And as client-go's correlator does (event_correlator.py), an Event that
repeats is counted on the Event already posted (a patch of its ``count``), not posted
again: a ParallelCronJob whose run waits for the last one says so on one Event, however
often it syncs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from .. import constants as c
from ..timeutil import format_time
from .api import ApiError, EventSink
from .event_correlator import EventCorrelator, Occurrence
from .ratelimit import TokenBucket

log = logging.getLogger(__name__)

COMPONENT = "paralleljob-operator"


@dataclass(frozen=True)
class JobRef:
    """The job an Event is about: its kind's apiVersion and kind, and the object."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


#: How often a worker holding an Event looks again for room under the rate limit.
SPARE_BUDGET_POLL_SECONDS = 0.05

#: client-go's defaultSpamBurst, defaultSpamQPS and maxLruCacheEntries.
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
SPAM_CACHE_ENTRIES = 4096


class SpamFilter:
    """EventSourceObjectSpamFilter: a token bucket per (object, event type), in an LRU."""

    def __init__(
        self, burst: int = SPAM_BURST, qps: float = SPAM_QPS, entries: int = SPAM_CACHE_ENTRIES
    ) -> None:
        self._burst, self._qps, self._entries = burst, qps, entries
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()

    def allows(self, job: JobRef, type_: str, now: float) -> bool:
        key = (job.uid, type_)
        bucket = self._buckets.pop(key, None) or TokenBucket(self._qps, self._burst)
        self._buckets[key] = bucket
        while len(self._buckets) > self._entries:
            self._buckets.popitem(last=False)
        return bucket.take(now)


class Recorder(Protocol):
    """client-go's record.EventRecorder, as the controller uses it (tests pass a fake,
    as upstream's tests pass record.FakeRecorder)."""

    def record(self, job: JobRef, type_: str, reason: str, message: str) -> None: ...


class EventRecorder:
    """The operator's :class:`Recorder`: spam-filtered, posted to ``sink`` in the background."""

    def __init__(self, sink: EventSink, *, workers: int = 4, capacity: int = 10000) -> None:
        self._sink = sink
        self._spam = SpamFilter()
        self._correlator = EventCorrelator()
        self._queue: asyncio.Queue[tuple[JobRef, str, str, Occurrence]] = asyncio.Queue(capacity)
        self._tasks = [
            asyncio.create_task(self._work(), name=f"events-{i}") for i in range(workers)
        ]
        self._instance = os.environ.get("POD_ID") or os.uname().nodename

    def record(self, job: JobRef, type_: str, reason: str, message: str) -> None:
        log.debug("event %s/%s %s %s: %s", job.namespace, job.name, type_, reason, message)
        if not self._spam.allows(job, type_, time.monotonic()):
            return
        seen = self._correlator.observe(
            (job.uid, type_, reason),
            message[:1024],
            f"{job.name}.{time.time_ns():x}",
            datetime.now(UTC),
        )
        try:
            self._queue.put_nowait((job, type_, reason, seen))
        except asyncio.QueueFull:
            log.warning(
                "event queue full, dropping %s %s for %s/%s", type_, reason, job.namespace, job.name
            )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _work(self) -> None:
        while True:
            job, type_, reason, seen = await self._queue.get()
            while not self._sink.has_spare_budget():
                await asyncio.sleep(SPARE_BUDGET_POLL_SECONDS)
            try:
                await self._post(job, type_, reason, seen)
            except ApiError as exc:
                log.debug(
                    "could not post event %s for %s/%s: %s", reason, job.namespace, job.name, exc
                )
            except Exception:
                log.exception("could not post event %s for %s/%s", reason, job.namespace, job.name)

    async def _post(self, job: JobRef, type_: str, reason: str, seen: Occurrence) -> None:
        """A new Event, or the count of one posted before (created anew if it is gone:
        expired, or its create still on its way, which then meets AlreadyExists)."""
        now = format_time(datetime.now(UTC))
        if not seen.new:
            patch = {"message": seen.message, "count": seen.count, "lastTimestamp": now}
            try:
                await self._sink.patch_event(job.namespace, seen.name, patch)
                return
            except ApiError as exc:
                if not exc.not_found:
                    raise
        event = {
            "metadata": {"name": seen.name, "namespace": job.namespace},
            "involvedObject": {
                "apiVersion": job.api_version,
                "kind": job.kind,
                "name": job.name,
                "namespace": job.namespace,
                "uid": job.uid,
            },
            "type": type_,
            "reason": reason,
            "message": seen.message,
            "source": {"component": COMPONENT},
            "reportingComponent": f"{c.GROUP}/operator",
            "reportingInstance": self._instance,
            "firstTimestamp": format_time(seen.first),
            "lastTimestamp": now,
            "count": seen.count,
        }
        await self._sink.create_event(job.namespace, event)
