"""What the caches publish to, and the gates they open: the caches (caches.py) know
these protocols, never a controller, as client-go's informers know only the event
handlers registered on them. A controller subscribes by being handed to
``Caches.attach`` once the process leads; standing by, nothing is subscribed and the
caches only keep what they list."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core import PodInfo
from .consistency import CacheVersion

#: A pod's finalizer release, for the caches to run beside the watch (None: nothing).
Release = Coroutine[Any, Any, None] | None


def _synced_now() -> asyncio.Event:
    synced = asyncio.Event()
    synced.set()
    return synced


@dataclass
class CacheSync:
    """The gates the caches open as their informers sync."""

    #: The pods and which jobs exist: no pod is taken for an orphan before.
    jobs: asyncio.Event = field(default_factory=_synced_now)
    #: The pods listed, and at least as new as the API server was when this process
    #: began to lead (caches.py): no job syncs before, as it would create the pods it
    #: cannot see, or act on what they do not show of the last leader's writes.
    current: asyncio.Event = field(default_factory=_synced_now)
    #: Every pod listed once (a standby's before it leads): until then a new job syncs
    #: early, its pods read live (job_loops.py); after, it waits for ``current``.
    listed: asyncio.Event = field(default_factory=_synced_now)


class JobSubscriber(Protocol):
    """A kind's job controller, as its caches feed it (upstream: the job and pod
    informers' event handlers, addJob, updatePod, deleteJob, ...)."""

    #: Set by the caches when it subscribes: which jobs exist, and how far they are.
    job_exists: Callable[[str], bool]
    cache_version: CacheVersion

    def job_seen(self, body: Mapping[str, Any], *, template: str | None = None) -> None:
        """A job listed, added or modified (``template``: its pod template's text, from
        a standby's record)."""
        ...

    def job_deleted(self, uid: str) -> list[Coroutine[Any, Any, None]]:
        """A job deleted: the releases of its pods' finalizers, for the caches to run."""
        ...

    def observe_pod(self, pod: PodInfo, gone: bool) -> Release: ...

    async def judge_orphans(self) -> None:
        """Every job is listed: the pods that looked orphaned meanwhile are judged."""
        ...

    def runs(self, uid: str) -> bool:
        """Whether the job is known to the controller: its loop runs, or it is left to
        another controller."""
        ...

    def known_jobs(self) -> int:
        """How many jobs the controller has seen (running or left alone)."""
        ...

    def pending_syncs(self) -> int: ...


class CronSubscriber(Protocol):
    """The ParallelCronJob controller, as the caches feed it."""

    def cron_seen(self, body: Mapping[str, Any]) -> None: ...

    def cron_deleted(self, uid: str) -> None: ...

    def job_changed(self, owner: str) -> None:
        """A ParallelJob the ParallelCronJob ``owner`` controls changed or went."""
        ...


class KueueSubscriber(Protocol):
    """The Kueue controller, as the Kueue cache (kueue_cache.py) feeds it."""

    def changed(self, key: str) -> None:
        """The queued ParallelJob ``key`` (``namespace/name``), or one of its Workloads,
        changed or went."""
        ...
