"""One job as the shell keeps it between syncs: the newest version seen, parsed once
per resourceVersion, and each collaborator's own part of the per-job state (the loop's
in :class:`~.job_loops.LoopState`, the pod writer's in :class:`~.pod_writer.PodState`,
the status writer's in :class:`~.status_writer.StatusState`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..core.kind import PARALLELJOB, JobKind
from ..core.model import Job, JobStatus, parse_job
from .events import JobRef
from .job_loops import LoopState
from .pod_writer import PodState
from .status_writer import StatusState, resource_version


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
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self._body: Mapping[str, Any] = body
        self._job: Job | None = None
        self.loop = LoopState(monotonic)
        self.pods = PodState()
        self.status = StatusState()
        #: Spec defaults the API server dropped when written (a CRD without the field):
        #: not written again, so that the job is not patched at every sync.
        self.unstored_defaults: set[str] = set()
        #: The other controller spec.managedBy names, once logged (see managed_by.py).
        self.managed_by_logged: str | None = None
        #: The pod-failure back-off of a kind whose status cannot keep it (a Job's, as
        #: upstream's backoffRecordStore: in memory, lost on restart).
        self._backoff: tuple[int, datetime | None] = (0, None)

    @property
    def ref(self) -> JobRef:
        kind = self.kind
        return JobRef(kind.api_version, kind.kind, self.namespace, self.name, self.uid)

    @property
    def body(self) -> Mapping[str, Any]:
        """The newest version of the job seen."""
        return self._body

    @body.setter
    def body(self, body: Mapping[str, Any]) -> None:
        self._body = body
        self._job = None

    @property
    def job(self) -> Job:
        """The body parsed, once per version kept (with the back-off kept in memory,
        for a kind whose status has no place for it)."""
        if self._job is None:
            job = parse_job(self.body)
            if not self.kind.stores_backoff:
                failures, last = self._backoff
                status = replace(
                    job.status, failures_since_success=failures, last_failure_time=last
                )
                job = replace(job, status=status)
            self._job = job
        return self._job

    def written(self, status: JobStatus) -> None:
        """``status`` is the job's now (written, or already there): a kind whose status
        cannot keep the back-off keeps it here."""
        backoff = (status.failures_since_success, status.last_failure_time)
        if not self.kind.stores_backoff and backoff != self._backoff:
            self._backoff = backoff
            self._job = None

    def offer(self, body: Mapping[str, Any]) -> bool:
        """Keeps the newest version of the job seen (watch event or our own write)."""
        meta = body.get("metadata", {})
        if meta.get("uid") != self.uid:
            return False
        newest = resource_version(self.body["metadata"].get("resourceVersion"))
        if resource_version(meta.get("resourceVersion")) >= newest:
            self.body = body
            return True
        return False
