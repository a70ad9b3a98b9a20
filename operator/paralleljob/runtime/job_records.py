"""What a standby keeps of each job, to start its loop with when it leads (runtime/caches.py
says when): the job informers' CachedJob, its record (job_record: what a runtime reads,
1-2 KB of compact JSON), and the start of the recorded jobs once controllers attach, the
new ones first (a job created during a failover is the one waiting for a pod: listed
last, it had its first pod 18-30 s after the takeover at 10,000 jobs when the new leader
listed the jobs again, issue 23)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .informer import Informer
from .metadata import compact_metadata
from .subscribers import JobSubscriber


class CachedJob(NamedTuple):
    """A job as a job informer keeps it."""

    uid: str
    #: While no controller of its kind is attached, its job_record (b"": none kept, once
    #: a controller runs the job, or for a job its kind leaves to another controller).
    record: bytes = b""
    #: No controller has started it yet (no status.startTime): its first pods wait.
    new: bool = False


def job_record(body: Mapping[str, Any]) -> bytes:
    """What a standby keeps of a job to start its loop with when it leads: the fields a
    runtime reads (its compact metadata, the spec and the status), as compact JSON (a
    dict of the JSON costs about six times its text; no managedFields)."""
    meta = body.get("metadata") or {}
    record = {
        "metadata": compact_metadata(meta),
        "spec": body.get("spec") or {},
        "status": body.get("status") or {},
    }
    return json.dumps(record, separators=(",", ":")).encode()


async def start_recorded_jobs(
    controllers: Mapping[str, JobSubscriber],
    informers: Mapping[str, Iterable[Informer[CachedJob]]],
    *,
    new: bool,
    yield_every: int,
) -> int:
    """The loops of the recorded jobs that are ``new`` (or not) started from their
    records, the last the informer saw first (those its watch added after its listing:
    created since), a turn of the event loop every ``yield_every`` jobs; the records are
    dropped. The new ones start before the cached pods are replayed (a new job has
    none). A job deleted, or changed, while this goes (the informer runs between the
    turns) is not started from its record: its deletion ended it, its change started
    it. The number started."""
    started = 0
    for name, controller in controllers.items():
        for informer in informers[name]:
            for cached in reversed(list(informer.store.values())):
                if not cached.record or cached.new != new:
                    continue
                if informer.store.get(cached.uid) is not cached:
                    continue  # deleted, or its event came meanwhile
                informer.store[cached.uid] = CachedJob(cached.uid)
                controller.job_seen(json.loads(cached.record))
                started += 1
                if started % yield_every == 0:
                    await asyncio.sleep(0)
    return started
