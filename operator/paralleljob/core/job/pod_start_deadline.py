"""spec.podStartDeadlineSeconds: which pods did not start in time, and when the next may
not.

Not upstream: users have asked the Job for it for years (kubernetes/kubernetes#58384,
#111948, #95431; Argo's ``pendingTimeout``). A pod that never starts (unschedulable, its
image never pulled, a volume that never mounts) holds its slot of ``parallelism`` for
ever, and ``activeDeadlineSeconds`` can only fail the whole job. With the field set, a
pod of the job whose containers have not started within that many seconds of its
creation is failed: the shell writes the phase Failed and the pod condition
:data:`~paralleljob.constants.POD_COND_START_DEADLINE_EXCEEDED` on it, then deletes it
(as the pod GC's ``markFailedAndDeletePodWithCondition`` fails a pod before deleting
it), keeping its tracking finalizer. From there it is any failed pod: counted once
through the finalizer (``tracking.py``), against ``backoffLimit`` or as a
``podFailurePolicy`` rule on that condition says, and replaced after the pod-failure
back-off.

"Started" means that one of the pod's regular containers is running or has run
(:attr:`~.model.PodInfo.started`), or that the pod is past Pending: one crash-looping has
started (its restarts are ``backoffLimit``'s business, not this deadline's). Init
containers do not count: a finished one, or a native sidecar (``restartPolicy: Always``,
as service meshes inject) running beside a main container whose image is never pulled,
would otherwise keep the deadline from ever firing. The deadline so covers the pod's
init containers, as the Pending phase does. It counts from the pod's
``creationTimestamp``, on the operator's clock, as ``activeDeadlineSeconds`` counts from
``startTime``. The Failed write is conditional on the resourceVersion the decision was
made on (:attr:`~.model.PodInfo.unstarted_version`): a container that starts in between
makes the API server refuse it, and the next sync judges the pod again.

Only a job that manages its pods (not suspended, no verdict) fails them; the sync asks to
run again when the next unstarted pod's deadline comes (:attr:`StartDeadlines.next_in`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ... import constants as c
from ...timeutil import truncate
from .model import Condition, JobSpec, PodInfo


@dataclass(frozen=True)
class StartDeadlines:
    """What the start deadline asks of a job's active pods now."""

    #: The active pods not started by their deadline, oldest first.
    expired: tuple[PodInfo, ...] = ()
    #: Seconds until the earliest deadline of the other unstarted pods (None: none).
    next_in: float | None = None


#: A job without the field, or one that does not manage its pods now.
NO_DEADLINES = StartDeadlines()


def has_started(pod: PodInfo) -> bool:
    """A regular container of the pod runs or has run, or its phase is past Pending
    (Running, finished, or Unknown: a pod the node no longer reports is not judged)."""
    return pod.started or pod.phase != c.PENDING


def start_deadlines(spec: JobSpec, pods: Iterable[PodInfo], now: datetime) -> StartDeadlines:
    """The active ``pods`` past ``spec.pod_start_deadline_seconds`` without having
    started, and when the next one will be; nothing for a job without the field or
    suspended (its pods are deleted anyway, uncounted). A pod whose creation time is
    unknown is not judged."""
    deadline = spec.pod_start_deadline_seconds
    if deadline is None or spec.suspend:
        return NO_DEADLINES
    expired: list[PodInfo] = []
    next_in: float | None = None
    for pod in pods:
        if not pod.active or has_started(pod) or pod.created is None:
            continue
        # In seconds, not datetimes: a deadline of decades is a number, not a date overflow.
        left = deadline - (now - pod.created).total_seconds()
        if left <= 0:
            expired.append(pod)
        elif next_in is None or left < next_in:
            next_in = left
    expired.sort(key=_creation_order)
    return StartDeadlines(tuple(expired), next_in)


def _creation_order(pod: PodInfo) -> tuple[datetime, str]:
    assert pod.created is not None  # start_deadlines keeps only such pods
    return pod.created, pod.name


def failed_condition(deadline_seconds: int, now: datetime) -> Condition:
    """The pod condition written, with the phase Failed, on a pod that did not start in
    time (a v1.PodCondition's fields; metav1.Time has whole seconds)."""
    stamp = truncate(now)
    return Condition(
        type=c.POD_COND_START_DEADLINE_EXCEEDED,
        status="True",
        reason=c.REASON_POD_START_DEADLINE_EXCEEDED,
        message=(
            f"The pod did not start within podStartDeadlineSeconds ({deadline_seconds}s) "
            "of its creation: no container ran. Its job failed and deleted it."
        ),
        last_transition_time=stamp,
    )


def event_message(pod_name: str, deadline_seconds: int) -> str:
    """The message of the Warning Event on the job, for one pod failed and deleted."""
    return (
        f"Pod {pod_name} did not start within podStartDeadlineSeconds "
        f"({deadline_seconds}s) of its creation: failed and deleted"
    )
