"""One job as the shell keeps it between syncs: a compact record of the newest version
seen, parsed once per resourceVersion, and each collaborator's own part of the per-job
state (the loop's in :class:`~.job_loops.LoopState`, the pod writer's in
:class:`~.pod_writer.PodState`, the status writer's in :class:`~.status_writer.StatusState`).

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
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from ..core.kind import PARALLELJOB, JobKind
from ..core.model import Job, JobStatus, parse_job
from ..json_types import JsonDict
from .consistency import WrittenVersions
from .events import JobRef
from .job_loops import LoopState
from .pod_writer import PodState
from .status_writer import StatusState, resource_version

#: The metadata of a job the operator reads: parse_job's (name, namespace, uid,
#: generation, resourceVersion, deletionTimestamp), the pods it builds (name, namespace,
#: uid), the precondition of its writes (resourceVersion). Not kept: managedFields,
#: labels, annotations (kubectl's last-applied-configuration), owner references.
KEPT_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
)


def compact_metadata(meta: Mapping[str, Any]) -> JsonDict:
    """What a runtime keeps of a job's metadata: the fields of :data:`KEPT_METADATA`."""
    kept: JsonDict = {key: meta[key] for key in KEPT_METADATA if key in meta}
    namespace = kept.get("namespace")
    if isinstance(namespace, str):
        kept["namespace"] = sys.intern(namespace)  # one string for a namespace's jobs
    return kept


def _text(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class JobRuntime:
    """What the operator keeps in memory about one job between syncs."""

    def __init__(
        self,
        body: Mapping[str, Any],
        monotonic: Callable[[], float] = time.monotonic,
        kind: JobKind = PARALLELJOB,
    ) -> None:
        meta = body["metadata"]
        #: The job's kind: its API, its pods' keys and finalizer (core/kind.py).
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
        self.body = body

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
        """Keeps ``body``'s record and parses it (once per version kept); nothing else
        of ``body`` is held. A template is serialized once per generation of the job
        (metadata.generation changes with every change of the spec)."""
        meta = body.get("metadata") or {}
        generation = meta.get("generation")
        same_spec = generation is not None and generation == self._meta.get("generation")
        spec = body.get("spec")
        if isinstance(spec, Mapping) and "template" in spec:
            if not same_spec or self._template is None:
                self._template = _text(spec["template"])
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
        status = replace(job.status, failures_since_success=failures, last_failure_time=last)
        return replace(job, status=status)

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
