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

from ..json_types import JsonDict
from .informer import Informer
from .metadata import compact_metadata, template_text
from .subscribers import JobSubscriber


class CachedJob(NamedTuple):
    """A job as a job informer keeps it."""

    uid: str
    #: While no controller of its kind is attached, its job_record (b"": none kept, once
    #: a controller runs the job, or for a job its kind leaves to another controller).
    record: bytes = b""
    #: The record's pod template, as the job's runtime will keep it (template_text; ""
    #: for none): kept apart so that a takeover hands it over as it is (serializing
    #: 30,000 templates again was a quarter of a takeover's start at 180,000 objects).
    template: str = ""
    #: No controller has started it yet (no status.startTime): its first pods wait.
    new: bool = False


def job_record(body: Mapping[str, Any]) -> tuple[bytes, str]:
    """What a standby keeps of a job to start its loop with when it leads: the fields a
    runtime reads (its compact metadata, the spec but for its pod template, and the
    status) as compact JSON (a dict of the JSON costs about six times its text; no
    managedFields), and the template's text ("" for none)."""
    meta = body.get("metadata") or {}
    spec = dict(body.get("spec") or {})
    template = spec.pop("template", None)
    record = {"metadata": compact_metadata(meta), "spec": spec, "status": body.get("status") or {}}
    text = "" if template is None else template_text(template)
    return json.dumps(record, separators=(",", ":")).encode(), text


def recorded_body(cached: CachedJob) -> JsonDict:
    """The job as its record keeps it, its template whole again."""
    body: JsonDict = json.loads(cached.record)
    if cached.template:
        body["spec"]["template"] = json.loads(cached.template)
    return body


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
                controller.job_seen(recorded_body(cached), template=cached.template or None)
                started += 1
                if started % yield_every == 0:
                    await asyncio.sleep(0)
    return started
