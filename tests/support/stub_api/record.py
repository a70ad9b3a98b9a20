"""What the stub saw, timed on the harness's monotonic clock: the requests, each job's
status writes, each job's first pod creation, when a job's ADDED event reached a job
watch, and the listings. "Every job synced" is every expected job's status written at
least once: a fact of the API traffic, whatever the operator does inside."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Listing:
    """One LIST request: when it was answered, what, and whether it was a last page."""

    at: float
    resource: str
    items: int
    nbytes: int
    paged: bool
    last_page: bool


@dataclass
class Recorder:
    clock: Callable[[], float] = time.monotonic
    #: Requests by (verb, resource, code); paths the stub does not serve, by "VERB path".
    requests: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    #: Status writes per job uid, and when each job's first one was answered.
    status_writes: Counter[str] = field(default_factory=Counter)
    first_status_write: dict[str, float] = field(default_factory=dict)
    #: Writes to a job itself (not its status), per job uid.
    job_writes: Counter[str] = field(default_factory=Counter)
    #: Pods created, and when each job's first pod POST arrived (by its owner's uid).
    pod_creations: int = 0
    first_pod_post: dict[str, float] = field(default_factory=dict)
    #: When a job's ADDED event was first written to a watch of its kind (recorded for
    #: the uids in ``timed``, the probes).
    timed: set[str] = field(default_factory=set)
    delivered: dict[str, float] = field(default_factory=dict)
    listings: list[Listing] = field(default_factory=list)
    #: Watch requests: (when, resource, query string).
    watches: list[tuple[float, str, str]] = field(default_factory=list)
    #: The jobs that must be synced, and when the last of them was.
    expected: set[str] = field(default_factory=set)
    #: The expected jobs not yet synced: a status write is then O(1), not O(jobs) (a
    #: count over ``expected`` at each write made the harness itself the bottleneck,
    #: quadratic in the jobs: 266 s to see 30,000 jobs synced).
    unsynced: set[str] = field(default_factory=set)
    synced_at: float | None = None
    all_synced: asyncio.Event = field(default_factory=asyncio.Event)
    #: Called at once (synchronously) when the last expected job is synced and when the
    #: first full pod listing has been sent: the harness reads /proc there.
    on_synced: list[Callable[[], None]] = field(default_factory=list)
    on_pods_listed: list[Callable[[], None]] = field(default_factory=list)
    pods_listed_at: float | None = None

    def expect(self, uids: Iterable[str]) -> None:
        self.expected = set(uids)
        self.unsynced = self.expected - self.first_status_write.keys()
        self.synced_at = None
        self.all_synced.clear()

    def request(self, verb: str, resource: str, code: int) -> None:
        self.requests[(verb, resource, code)] += 1

    def unknown_path(self, verb: str, path: str) -> None:
        self.unknown[f"{verb} {path}"] += 1

    def status_written(self, uid: str) -> None:
        self.status_writes[uid] += 1
        if uid in self.first_status_write:
            return
        self.first_status_write[uid] = self.clock()
        self.unsynced.discard(uid)
        if self.expected and not self.unsynced:
            self.mark_synced()

    def mark_synced(self) -> None:
        """Every expected job is synced (by its status write, or as the operator's own
        metrics say where no write is due: the harness's ``--current-status``)."""
        if self.synced_at is not None:
            return
        self.unsynced.clear()
        self.synced_at = self.clock()
        self.all_synced.set()
        for callback in self.on_synced:
            callback()

    def synced(self) -> int:
        """How many expected jobs have had a status write."""
        return len(self.expected) - len(self.unsynced)

    def job_written(self, uid: str) -> None:
        self.job_writes[uid] += 1

    def pod_created(self, owner_uid: str) -> None:
        self.pod_creations += 1
        self.first_pod_post.setdefault(owner_uid, self.clock())

    def job_delivered(self, uid: str) -> None:
        if uid in self.timed:
            self.delivered.setdefault(uid, self.clock())

    def listed(self, listing: Listing) -> None:
        self.listings.append(listing)
        # An informer's listing is paged; a LIST of one job's pods (an early sync's) is not.
        informers = listing.resource == "pods" and listing.paged
        if informers and listing.last_page and self.pods_listed_at is None:
            self.pods_listed_at = listing.at
            for callback in self.on_pods_listed:
                callback()

    def watched(self, resource: str, query: str) -> None:
        self.watches.append((self.clock(), resource, query))
