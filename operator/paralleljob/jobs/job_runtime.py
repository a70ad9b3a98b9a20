"""One job as the shell keeps it between syncs: a compact record of the newest version
seen, parsed once per resourceVersion, and each collaborator's own part of the per-job
state (the loop's :class:`LoopState`, the pod writer's :class:`PodState`, the status
writer's :class:`StatusState`), kept here so that those who use them (job_loops.py,
pod_writer.py, status_writer.py) import this module and it imports none of them.

The record keeps only what the operator reads of a job's body (as upstream's informer
transform strips managedFields): the metadata of :data:`KEPT_METADATA` and the spec as
written, its pod template as compact JSON text (read only to build pods: a dict of the
JSON costs about six times its text); the status only as parsed (``rt.job``). A watch
event's body, with its managedFields and kubectl's last-applied-configuration
annotation, is not held."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core import PARALLELJOB, Job, JobKind, JobStatus, evolve, parse_job, version_number
from ..json_types import JsonDict
from ..runtime.consistency import WrittenVersions
from ..runtime.events import JobRef
from ..runtime.metadata import compact_metadata, template_text
from ..runtime.retry import Retry
from .expectations import UIDTrackingExpectations

#: The metadata of a job the operator reads: parse_job's (name, namespace, uid,
#: generation, resourceVersion, deletionTimestamp), the pods it builds (name, namespace,
#: uid), the precondition of its writes (resourceVersion). Not kept: managedFields,
#: labels, annotations (kubectl's last-applied-configuration), owner references.


def resource_version(value: object) -> int:
    """A resourceVersion as a number to compare (-1: none, or not a number):
    core.version_number, ordered below every real version."""
    number = version_number(str(value or ""))
    return -1 if number is None else number


class LoopState:
    """The loop's part of a job's state: the progress markers the liveness probe reads
    (monotonic seconds, see progress.py), and how it is woken."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        #: Hands the job to its loops (set by JobLoops.start).
        self._wake: Callable[[], None] = _unattached
        self.stopped = False
        #: When the last sync started, for batching pod events.
        self.last_sync_started = float("-inf")
        #: Consecutive failed syncs.
        self.retry = Retry()
        self.woken_at: float | None = None
        self.timer_due: float | None = None
        self.sync_started: float | None = None

    def attach(self, wake: Callable[[], None]) -> None:
        """The loops this job is handed to are woken by ``wake``."""
        self._wake = wake

    def detach(self) -> None:
        """The job's loops are over. The wake closes over the runtime: a cycle, which a
        frozen runtime (see gc_pauses.freeze_until_quiet) would never leave."""
        self._wake = _unattached

    def stop(self) -> None:
        """Ends the job's syncs after the current one (it is gone, or the operator stops)."""
        self.stopped = True
        self._wake()

    def poke(self) -> None:
        """Wakes the loop (a pod or job event), remembering since when it has work."""
        if self.woken_at is None:
            self.woken_at = self._monotonic()
        self._wake()

    @property
    def woken(self) -> bool:
        """An event is waiting for a sync."""
        return self.woken_at is not None


def _unattached() -> None:
    return None


@dataclass
class PodState:
    """The pod writer's part of a job's state."""

    #: Pod changes this job's syncs made that the pod cache does not show yet.
    expectations: UIDTrackingExpectations = field(default_factory=UIDTrackingExpectations)
    #: The batch size the next pod creations start with (see PodWriter._create_pods).
    slow_start_batch: int = 1
    #: Consecutive failed creations, and when creating may be tried again (monotonic).
    create_retry: Retry = field(default_factory=Retry)
    create_retry_at: float = 0.0


@dataclass
class StatusState:
    """The status writer's part of a job's state."""

    #: The resourceVersion of this operator's last status write.
    last_written_rv: str = ""
    #: When this operator last wrote the job's status (monotonic).
    last_write: float = float("-inf")
    #: The newest resourceVersion the job watch has shown.
    seen_rv: int = -1
    #: The oldest status write (resourceVersion, when) the job watch has not shown.
    unechoed: tuple[int, float] | None = None

    def watched(self, version: object) -> None:
        """The job watch showed this version: status writes up to it have come back."""
        rv = resource_version(version)
        self.seen_rv = max(self.seen_rv, rv)
        if self.unechoed is not None and rv >= self.unechoed[0]:
            self.unechoed = None

    def wrote(self, before: object, after: object, now: float) -> None:
        """A status write turned version ``before`` into ``after``: the job watch owes
        an event of at least ``after`` (unless the write changed nothing, or the watch
        was quicker than the response)."""
        rv = resource_version(after)
        if rv <= resource_version(before) or rv <= self.seen_rv or self.unechoed is not None:
            return
        self.unechoed = (rv, now)


class JobRuntime:
    """What the operator keeps in memory about one job between syncs."""

    def __init__(
        self,
        body: Mapping[str, Any],
        monotonic: Callable[[], float] = time.monotonic,
        kind: JobKind = PARALLELJOB,
        *,
        template: str | None = None,
    ) -> None:
        """``template``: the body's pod template as template_text made it, when the
        caller has it (a standby's record): kept as it is, not serialized again."""
        meta = body["metadata"]
        #: The job's kind: its API, its pods' keys and finalizer (core/job/kind.py).
        self.kind = kind
        self.uid: str = meta["uid"]
        self.namespace: str = sys.intern(meta["namespace"])
        self.name: str = meta["name"]
        self.loop = LoopState(monotonic)
        self.pods = PodState()
        self.status = StatusState()
        #: Its own last writes the caches have yet to be checked against (read-your-writes).
        self.own_writes = WrittenVersions()
        #: Spec defaults the API server dropped when written (a CRD without the field):
        #: not written again, so that the job is not patched at every sync.
        self.unstored_defaults: set[str] = set()
        #: The other controller spec.managedBy names, once logged (see managed_by.py).
        self.managed_by_logged: str | None = None
        #: The pod-failure back-off of a kind whose status cannot keep it (a Job's, as
        #: upstream's backoffRecordStore: in memory, lost on restart).
        self._backoff: tuple[int, datetime | None] = (0, None)
        #: The record (see the module's docs): the metadata kept, the spec but for its
        #: template (None: the body has no spec), the template's JSON (None: none).
        self._meta: JsonDict = {}
        self._spec: Mapping[str, Any] | None = None
        self._template: str | None = None
        self._job: Job
        self._keep(body, template)

    @property
    def ref(self) -> JobRef:
        kind = self.kind
        return JobRef(kind.api_version, kind.kind, self.namespace, self.name, self.uid)

    @property
    def body(self) -> Mapping[str, Any]:
        """The newest version of the job seen, as its record keeps it: the metadata of
        KEPT_METADATA and the spec, its template parsed again at each call (the body
        pods are built from; ``spec`` is the rest); the status is ``job``'s."""
        record: JsonDict = {"metadata": self._meta}
        if self._spec is not None:
            spec = dict(self._spec)
            if self._template is not None:
                spec["template"] = json.loads(self._template)
            record["spec"] = spec
        return record

    @body.setter
    def body(self, body: Mapping[str, Any]) -> None:
        self._keep(body)

    def _keep(self, body: Mapping[str, Any], template: str | None = None) -> None:
        """Keeps ``body``'s record and parses it (once per version kept); nothing else
        of ``body`` is held. A template is serialized once per generation of the job
        (metadata.generation changes with every change of the spec), unless given."""
        meta = body.get("metadata") or {}
        generation = meta.get("generation")
        same_spec = generation is not None and generation == self._meta.get("generation")
        spec = body.get("spec")
        if isinstance(spec, Mapping) and "template" in spec:
            if template is not None:
                self._template = template
            elif not same_spec or self._template is None:
                self._template = template_text(spec["template"])
            spec = {key: value for key, value in spec.items() if key != "template"}
        else:
            self._template = None
        self._meta = compact_metadata(meta)
        self._spec = spec
        self._job = self._with_backoff(parse_job(body))

    @property
    def spec(self) -> Mapping[str, Any]:
        """The job's spec as written, but for its pod template (``body`` has it)."""
        return self._spec or {}

    @property
    def resource_version(self) -> str | None:
        """The resourceVersion of the version kept."""
        version: str | None = self._meta.get("resourceVersion")
        return version

    @property
    def job(self) -> Job:
        """The version kept, parsed (with the back-off kept in memory, for a kind whose
        status has no place for it)."""
        return self._job

    def _with_backoff(self, job: Job) -> Job:
        if self.kind.stores_backoff:
            return job
        failures, last = self._backoff
        status = evolve(job.status, failures_since_success=failures, last_failure_time=last)
        return evolve(job, status=status)

    def written(self, status: JobStatus) -> None:
        """``status`` is the job's now (written, or already there): a kind whose status
        cannot keep the back-off keeps it here."""
        backoff = (status.failures_since_success, status.last_failure_time)
        if not self.kind.stores_backoff and backoff != self._backoff:
            self._backoff = backoff
            self._job = self._with_backoff(self._job)

    def offer(self, body: Mapping[str, Any]) -> bool:
        """Keeps the newest version of the job seen (watch event or our own write)."""
        meta = body.get("metadata", {})
        if meta.get("uid") != self.uid:
            return False
        newest = resource_version(self.resource_version)
        if resource_version(meta.get("resourceVersion")) >= newest:
            self.body = body
            return True
        return False
