"""Which pods belong to a job: ``PodControllerRefManager.ClaimPods`` for one job
(pkg/controller/controller_ref_manager.go, as the Job controller's getPodsForJob calls it).

A pod belongs to a job when the job is its controller (owner reference) and it matches
the job's selector (the ``paralleljob.dev/controller-uid`` label). An owned pod that no
longer matches is released (owner reference and tracking finalizer removed) unless the
job is being deleted; a matching pod without a controller is adopted (owner reference
and tracking finalizer added) unless the job or the pod is being deleted; a pod that
another object controls is never touched, whatever its labels say.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..core import PodInfo


@dataclass(frozen=True)
class Claims:
    #: Controlled by the job and matching its selector: the job's pods.
    owned: tuple[PodInfo, ...] = ()
    #: Orphans matching the selector: the job's once adopted.
    adopt: tuple[PodInfo, ...] = ()
    #: Controlled by the job but no longer matching: to let go.
    release: tuple[PodInfo, ...] = ()


def matches(pod: PodInfo, job_uid: str) -> bool:
    """The job's selector: ``paralleljob.dev/controller-uid=<uid>`` (status.selector)."""
    return pod.label_uid == job_uid


def claim_pods(job_uid: str, namespace: str, job_deleting: bool, pods: Iterable[PodInfo]) -> Claims:
    owned: list[PodInfo] = []
    adopt: list[PodInfo] = []
    release: list[PodInfo] = []
    for pod in pods:
        if pod.controller_uid == job_uid:
            if matches(pod, job_uid):
                owned.append(pod)
            elif not job_deleting:
                release.append(pod)
        elif pod.controller_uid is None and _adoptable(pod, job_uid, namespace, job_deleting):
            adopt.append(pod)
    return Claims(tuple(owned), tuple(adopt), tuple(release))


def _adoptable(pod: PodInfo, job_uid: str, namespace: str, job_deleting: bool) -> bool:
    return (
        not job_deleting
        and matches(pod, job_uid)
        and not pod.deleting
        and pod.namespace == namespace
    )
