"""Kubernetes Events about ParallelJobs, posted in the background like client-go's recorder.

Posting never blocks a sync: events go through a bounded queue to a few workers, and an
event that cannot be posted is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from . import constants as c
from .kube import ApiError, Kube
from .timeutil import format_time

log = logging.getLogger(__name__)

COMPONENT = "paralleljob-operator"


@dataclass(frozen=True)
class JobRef:
    namespace: str
    name: str
    uid: str


class EventRecorder:
    def __init__(self, kube: Kube, *, workers: int = 4, capacity: int = 10000) -> None:
        self._kube = kube
        self._queue: asyncio.Queue[tuple[JobRef, str, str, str]] = asyncio.Queue(capacity)
        self._tasks = [
            asyncio.create_task(self._work(), name=f"events-{i}") for i in range(workers)
        ]
        self._instance = os.environ.get("POD_ID") or os.uname().nodename

    def record(self, job: JobRef, type_: str, reason: str, message: str) -> None:
        log.debug("event %s/%s %s %s: %s", job.namespace, job.name, type_, reason, message)
        try:
            self._queue.put_nowait((job, type_, reason, message))
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
            job, type_, reason, message = await self._queue.get()
            now = datetime.now(UTC)
            event = {
                "metadata": {"name": f"{job.name}.{time.time_ns():x}", "namespace": job.namespace},
                "involvedObject": {
                    "apiVersion": c.API_VERSION,
                    "kind": c.KIND,
                    "name": job.name,
                    "namespace": job.namespace,
                    "uid": job.uid,
                },
                "type": type_,
                "reason": reason,
                "message": message[:1024],
                "source": {"component": COMPONENT},
                "reportingComponent": f"{c.GROUP}/operator",
                "reportingInstance": self._instance,
                "firstTimestamp": format_time(now),
                "lastTimestamp": format_time(now),
                "count": 1,
            }
            try:
                await self._kube.create_event(job.namespace, event)
            except ApiError as exc:
                log.debug(
                    "could not post event %s for %s/%s: %s", reason, job.namespace, job.name, exc
                )
            except Exception:
                log.exception("could not post event %s for %s/%s", reason, job.namespace, job.name)
