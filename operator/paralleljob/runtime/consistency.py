"""Read-your-writes: no sync of a job until the caches have seen its own last writes.

Kubernetes 1.36 (StaleControllerConsistencyJob, on by default; upstream's
``pkg/controller/util/consistency``): after each write the job controller records the
resourceVersion the API server returned, per job and per resource (the job's status
and spec patches; its pods' creations and patches: finalizer removals, adoptions,
releases; not deletions, which upstream does not record either), and a sync begins only
once the informer of each resource has applied events at least that new. Otherwise it
is skipped (``stale_sync_skips_total``) and tried again after a short back-off: a sync
that read a cache older than its own writes could act twice on what it already did.

The operator's expectations (expectations.py) already hold back what a sync would
redo by pod UID, and a job's runtime keeps the job as its own writes returned it; this
is the same guard upstream added on top, by resourceVersion, for every write. As
upstream's, it fails open on a version that is not a number. Not on a cache listing
again after a 410 Gone: its store is still the one from before the gap, so it reports the
version it had applied until the new listing is in (informer.py's ``applied_version``),
and a job's write newer than that holds its sync back until then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..core import version_number
from .retry import Retry

#: The resources whose writes are recorded (the informers' and the metric's names).
JOBS = "jobs"
PODS = "pods"

#: (resource, namespace) -> the resourceVersion up to which the cache holding that
#: namespace's objects has applied events; None when unknown.
CacheVersion = Callable[[str, str], int | None]

#: The back-off of a skipped sync, as client-go's per-item rate limiter that requeues
#: upstream's: 5 ms, doubling; capped at 1 s, as an echo rarely takes longer.
STALE_RETRY_BASE_SECONDS = 0.005
STALE_RETRY_MAX_SECONDS = 1.0


def unknown_version(resource: str, namespace: str) -> int | None:
    """No cache to ask (unit tests): every check passes."""
    return None


@dataclass(frozen=True)
class Stale:
    """A cache behind a write: the resource, the version written and the one read."""

    resource: str
    written: int
    read: int


@dataclass
class WrittenVersions:
    """One job's newest own write per resource not yet checked against its cache
    (upstream's ownerRecord), and the back-off of its skipped syncs."""

    versions: dict[str, int] = field(default_factory=dict)
    skips: Retry = field(default_factory=Retry)

    def wrote(self, resource: str, resource_version: object) -> None:
        """WroteAt: a write returned this version (an older one changes nothing)."""
        number = version_number(str(resource_version or ""))
        if number is not None and number > self.versions.get(resource, -1):
            self.versions[resource] = number

    def stale(self, namespace: str, read: CacheVersion) -> Stale | None:
        """EnsureReady: the first resource whose cache is behind this job's write to it;
        None when every cache has caught up, and then the record is cleared."""
        for resource, written in self.versions.items():
            current = read(resource, namespace)
            if current is not None and current < written:
                return Stale(resource, written, current)
        self.versions.clear()
        self.skips.succeeded()
        return None

    def retry_in(self) -> float:
        """How long a skipped sync waits before it is tried again."""
        return self.skips.failed(STALE_RETRY_BASE_SECONDS, STALE_RETRY_MAX_SECONDS)
