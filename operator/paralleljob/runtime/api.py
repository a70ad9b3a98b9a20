"""The Kubernetes API calls the operator makes, as typed protocols: the shell's seam.

Upstream's job controller reaches the API server only through injected pieces --
``podControl`` (``controller.PodControlInterface``), ``updateStatusHandler`` and
``patchJobHandler`` -- so that ``job_controller_test.go`` runs the real controller
against ``controller.FakePodControl``. :class:`PodControl` and :class:`JobControl` are
those pieces here, :class:`EventSink` is client-go's ``record.EventSink``.
:class:`~paralleljob.kube.Kube` satisfies them against an API server; the unit tests'
fake satisfies them in memory. Every call raises :class:`ApiError` when the API server
refuses it or cannot be reached.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..core import PodInfo
from ..json_types import JsonDict


class ApiError(Exception):
    """A request the API server answered with an error (or that never reached it)."""

    def __init__(
        self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None
    ):
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] = body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    def has_cause(self, cause_type: str) -> bool:
        """apierrors.HasStatusCause. A StatusCause's type is serialized as ``reason``."""
        details = self.body.get("details")
        causes = details.get("causes") if isinstance(details, Mapping) else None
        return any(isinstance(x, Mapping) and x.get("reason") == cause_type for x in (causes or []))


class Fence(Protocol):
    """What the client asks last before each write under a leader election (the
    election's WriteFence): raises ApiError when this process may not write now, else
    returns the seconds it may still write (the request's deadline; inf for a read)."""

    def check(self, method: str, path: str) -> float: ...


class PodControl(Protocol):
    """controller.PodControlInterface: the writes to a job's pods; and one read."""

    async def list_job_pods(self, namespace: str, job_uid: str) -> list[PodInfo]:
        """The pods labelled as the job's (its kind's controller-uid label), as the API
        server has them now: a consistent read (job_sync.sync_early)."""
        ...

    async def create_pod(self, namespace: str, pod: JsonDict) -> JsonDict:
        """Creates ``pod`` (named by its generateName); returns it as stored."""
        ...

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Deletes the pod, provided it is still the one with this ``uid``."""
        ...

    async def remove_pod_finalizer(self, namespace: str, name: str) -> JsonDict:
        """Removes the job tracking finalizers (upstream's removeTrackingFinalizerPatch);
        returns the pod as stored."""
        ...

    async def fail_pod(
        self, namespace: str, name: str, uid: str, resource_version: str, condition: JsonDict
    ) -> JsonDict:
        """Sets the phase of the pod with this ``uid`` to Failed and adds (or updates, by
        its type) the pod ``condition``, in one write of its status (as the pod GC's
        markFailedAndDeletePodWithCondition, through utilpod.PatchPodStatus), unless the
        pod changed since ``resource_version`` ("": whatever its version; a conflict
        otherwise); returns the pod as stored. Not upstream's job controller:
        podStartDeadlineSeconds."""
        ...

    async def adopt_pod(
        self, namespace: str, name: str, uid: str, owner: JsonDict, finalizer: str
    ) -> JsonDict:
        """AdoptPod: adds the controller reference ``owner`` and the tracking
        ``finalizer`` to the pod with this ``uid``; returns the pod as stored."""
        ...

    async def release_pod(self, namespace: str, name: str, uid: str, owner_uid: str) -> JsonDict:
        """ReleasePod: removes the owner reference to ``owner_uid`` and the tracking
        finalizers from the pod with this ``uid``; returns the pod as stored."""
        ...


class JobControl(Protocol):
    """updateStatusHandler, patchJobHandler and the job client's Get and Delete."""

    async def get_job(self, namespace: str, name: str) -> JsonDict: ...

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the job; returns the job as stored."""
        ...

    async def patch_job_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the status subresource; returns the job as stored."""
        ...

    async def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """Deletes the job and, in the foreground, its pods (ttlSecondsAfterFinished)."""
        ...


class CronControl(Protocol):
    """cronjob_controllerv2's ``cronJobControl`` and ``jobControl``: a ParallelCronJob's
    reads and writes of itself and of its ParallelJobs."""

    async def get_cron(self, namespace: str, name: str) -> JsonDict: ...

    async def patch_cron_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the status subresource; returns the object as stored."""
        ...

    async def get_job(self, namespace: str, name: str) -> JsonDict: ...

    async def create_job(self, namespace: str, job: JsonDict) -> JsonDict:
        """Creates ``job``; returns it as stored."""
        ...

    async def delete_job_in_background(self, namespace: str, name: str) -> None:
        """Deletes the job, its pods after it (propagation Background, as upstream)."""
        ...


class KueueControl(Protocol):
    """Kueue's JobReconciler's client: a queued ParallelJob's Workloads, the priority
    classes its priority comes from, and the job's own spec (suspend, template).
    Writes that carry ``metadata.resourceVersion`` are refused (409) once the object
    changed."""

    async def create_workload(self, namespace: str, workload: JsonDict) -> JsonDict: ...

    async def patch_workload(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the Workload (its spec, its finalizers)."""
        ...

    async def patch_workload_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the Workload's status subresource."""
        ...

    async def delete_workload(self, namespace: str, name: str, uid: str) -> None: ...

    async def get_workload_priority_class(self, name: str) -> JsonDict: ...

    async def get_job(self, namespace: str, name: str) -> JsonDict:
        """The ParallelJob as stored."""
        ...

    async def get_priority_class(self, name: str) -> JsonDict: ...

    async def list_priority_classes(self) -> JsonDict: ...

    async def patch_job(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        """A merge patch of the ParallelJob; returns it as stored."""
        ...


class ControllerApi(PodControl, JobControl, Protocol):
    """Every call :class:`~paralleljob.controller.Controller` makes."""

    def has_spare_budget(self) -> bool:
        """Whether a request sent now would not wait for the client-side rate limit
        (always, without one): optional writes are only made then."""
        ...


class EventSink(Protocol):
    """client-go's record.EventSink: where the event recorder posts Events."""

    async def create_event(self, namespace: str, event: JsonDict) -> None: ...

    async def patch_event(self, namespace: str, name: str, patch: JsonDict) -> None:
        """A strategic merge patch of a posted Event (its count, lastTimestamp, message)."""
        ...

    def has_spare_budget(self) -> bool:
        """As :meth:`ControllerApi.has_spare_budget`: Events wait for it."""
        ...
