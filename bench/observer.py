"""The one external observer: watches on a namespace's pods and jobs, with the monotonic
time each change was first received.

Object timestamps have one-second resolution, so every latency the bench reports is a
difference of these receive times, both sides seen through the same kind of watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .kube import ApiError, JsonDict, Kube

T = TypeVar("T")


class RoundFailed(Exception):
    """A round cannot produce its figures: a condition did not hold before its
    deadline, or a job Failed (with pods that always succeed, a controller's fault)."""


@dataclass
class PodRecord:
    owner: str | None
    added: float
    running: float | None = None
    succeeded: float | None = None


@dataclass
class JobRecord:
    name: str
    added: float
    #: First seen with a ready pod (status.ready >= 1).
    ready: float | None = None
    #: First seen with every pod ready (status.ready >= spec.parallelism).
    all_ready: float | None = None
    #: First seen counting a succeeded pod (status.succeeded >= 1).
    succeeded: float | None = None
    complete: float | None = None
    failed: float | None = None
    #: When each spec.parallelism value was first seen.
    parallelism_seen: dict[int, float] = field(default_factory=dict)


def _controller_uid(meta: JsonDict) -> str | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref["uid"])
    return None


def condition_true(status: JsonDict, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or []
    )


class Observer:
    """``async with Observer(kube, ns, jobs_path) as seen:`` records until the block ends.

    Counters are kept up to date per event so that a wait's predicate is O(1), however
    many objects the round has.
    """

    def __init__(self, kube: Kube, pods_path: str, jobs_path: str | None) -> None:
        self.kube = kube
        self.paths = [p for p in (pods_path, jobs_path) if p]
        self._jobs_path = jobs_path
        self.pods: dict[str, PodRecord] = {}
        self.jobs: dict[str, JobRecord] = {}
        self.pods_by_job: Counter[str] = Counter()
        self.running = 0
        self.succeeded = 0
        self.ready = 0
        self.all_ready = 0
        self.complete = 0
        self.failed = 0
        #: When the latest change to a pod was received, and how many so far (a
        #: listing's items count too): what tells a busy cluster from a quiet one. Jobs
        #: do not count: the operator refreshes running jobs' DURATION at a steady rate.
        self.last_pod_change = time.monotonic()
        self.pod_changes = 0
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Observer:
        ready = [asyncio.Event() for _ in self.paths]
        self._tasks = [
            asyncio.create_task(self._watch(path, event), name=f"watch {path}")
            for path, event in zip(self.paths, ready, strict=True)
        ]
        await self.wait_for(lambda: all(e.is_set() for e in ready), timeout=60, what="watches")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _watch(self, path: str, ready: asyncio.Event) -> None:
        handle = self._on_job if path == self._jobs_path else self._on_pod
        resource_version = await self._list(path, handle)
        ready.set()
        self._changed.set()
        while True:
            try:
                async for event in self.kube.watch(path, resource_version):
                    if event.type == "ERROR":
                        raise ApiError(int(event.object.get("code", 0)), "WATCH", path, "")
                    resource_version = event.object["metadata"]["resourceVersion"]
                    if event.type != "BOOKMARK":
                        handle(event.object, event.received)
                        self._changed.set()
            except ApiError as exc:
                if exc.status != 410:
                    raise
                # Too old a resourceVersion: list again; records keep first-seen times.
                resource_version = await self._list(path, handle)

    async def _list(self, path: str, handle: Callable[[JsonDict, float], None]) -> str:
        listing = await self.kube.get(path)
        now = time.monotonic()
        for item in listing.get("items") or []:
            handle(item, now)
        return str(listing["metadata"]["resourceVersion"])

    def pods_quiet_for(self, seconds: float) -> bool:
        """No change to a pod received in the last ``seconds``."""
        return time.monotonic() - self.last_pod_change >= seconds

    def _on_pod(self, pod: JsonDict, received: float) -> None:
        self.last_pod_change = received
        self.pod_changes += 1
        uid = pod["metadata"]["uid"]
        record = self.pods.get(uid)
        if record is None:
            record = self.pods[uid] = PodRecord(_controller_uid(pod["metadata"]), received)
            if record.owner:
                self.pods_by_job[record.owner] += 1
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded") and record.running is None:
            record.running = received
            self.running += 1
        if phase == "Succeeded" and record.succeeded is None:
            record.succeeded = received
            self.succeeded += 1

    def _on_job(self, job: JsonDict, received: float) -> None:
        uid = job["metadata"]["uid"]
        record = self.jobs.get(uid)
        if record is None:
            record = self.jobs[uid] = JobRecord(job["metadata"]["name"], received)
        parallelism = (job.get("spec") or {}).get("parallelism")
        if isinstance(parallelism, int):
            record.parallelism_seen.setdefault(parallelism, received)
        status = job.get("status") or {}
        ready = status.get("ready") or 0
        if record.ready is None and ready >= 1:
            record.ready = received
            self.ready += 1
        if record.all_ready is None and isinstance(parallelism, int) and ready >= parallelism > 0:
            record.all_ready = received
            self.all_ready += 1
        if record.succeeded is None and (status.get("succeeded") or 0) >= 1:
            record.succeeded = received
        if record.complete is None and condition_true(status, "Complete"):
            record.complete = received
            self.complete += 1
        if record.failed is None and condition_true(status, "Failed"):
            record.failed = received
            self.failed += 1

    async def wait_for(self, predicate: Callable[[], T | None], *, timeout: float, what: str) -> T:
        """Waits, woken by every event, until ``predicate`` returns a truthy value."""
        deadline = time.monotonic() + timeout
        while not (value := predicate()):
            if self.failed:
                raise RoundFailed(f"{self.failed} job(s) Failed while waiting for {what}")
            for task in self._tasks:
                if task.done() and not task.cancelled() and task.exception():
                    raise RuntimeError(f"{task.get_name()} failed") from task.exception()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RoundFailed(
                    f"timed out after {timeout:.0f}s waiting for {what}; seen: {self.progress()}"
                )
            self._changed.clear()
            # Woken by the next event, or at the latest after 5 s to check the watches.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 5))
        return value

    def job_named(self, name: str) -> JobRecord | None:
        return next((j for j in self.jobs.values() if j.name == name), None)

    def job_uid(self, name: str) -> str | None:
        return next((uid for uid, j in self.jobs.items() if j.name == name), None)

    def succeeded_times(self, owner: str | None = None) -> list[float]:
        """When each pod (of ``owner``, or all) was first seen Succeeded, sorted."""
        return sorted(
            p.succeeded
            for p in self.pods.values()
            if p.succeeded is not None and (owner is None or p.owner == owner)
        )

    def progress(self) -> dict[str, Any]:
        """What has been seen so far, for timeout messages and progress lines."""
        return {
            "jobs": len(self.jobs),
            "complete": self.complete,
            "pods": len(self.pods),
            "succeeded": self.succeeded,
        }
