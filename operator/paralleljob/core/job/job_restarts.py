"""spec.restartPolicy (not in the Job; kubernetes#77396, jobset#1129): a job whose verdict
is Failed, for a reason the policy names, starts again from nothing instead, up to
``maxRestarts`` times.

The restart is enacted where upstream enacts Failed (``enactJobFinished``): once every
pod of the attempt is deleted and counted, nothing is uncounted and nothing terminates.
So it is one status write, from a status where each pod is counted once, to a fresh one
(counts, indexes, the pod-failure back-off and the deadline's clock reset, ``restarts``
one more): a crash before it repeats the verdict, a crash after it finds the new
attempt. The new attempt's pods carry the label
:data:`.job_restart_policy.ATTEMPT_LABEL`; the sync reads only the current attempt's pods,
so that a finished pod of an earlier attempt (kept for its logs, like a failed Job's)
neither counts nor matches a FailJob rule again, and one still running is deleted
(:class:`EarlierAttempts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ... import constants as c
from ...timeutil import truncate
from ..dataclass_evolve import evolve
from .job_restart_policy import JobRestartPolicy
from .model import Condition, JobStatus, PodInfo


def restarts_after(policy: JobRestartPolicy | None, status: JobStatus, failed: Condition) -> bool:
    """Whether the job restarts rather than fail with ``failed``."""
    return (
        policy is not None
        and failed.type == c.COND_FAILED
        and failed.reason in policy.on_failure_reasons
        and status.restarts < policy.max_restarts
    )


def restarted_status(status: JobStatus, *, suspended: bool, now: datetime) -> JobStatus:
    """The status of the next attempt: nothing counted, no index done, no back-off, the
    verdict's FailureTarget gone; ``restarts`` one more; the deadline's clock started
    again (or not at all while suspended). The Suspended and PodCreationFailed
    conditions stay: they describe the job, not the attempt."""
    kept = tuple(x for x in status.conditions if x.type != c.COND_FAILURE_TARGET)
    return evolve(
        status,
        conditions=kept,
        start_time=None if suspended else truncate(now),
        completion_time=None,
        active=0,
        ready=0,
        terminating=0,
        succeeded=0,
        failed=0,
        uncounted_succeeded=(),
        uncounted_failed=(),
        completed_indexes="",
        failed_indexes="" if status.failed_indexes is not None else None,
        failures_since_success=0,
        last_failure_time=None,
        restarts=status.restarts + 1,
    )


def restart_message(failed: Condition, restarts: int, policy: JobRestartPolicy) -> str:
    """The restart's Event: why, and which restart of how many."""
    return (
        f"Job failed ({failed.reason}: {failed.message}); "
        f"restarted from nothing, restart {restarts} of {policy.max_restarts}"
    )


@dataclass(frozen=True)
class EarlierAttempts:
    """The pods of a restarted job's earlier attempts that still need a write. A restart
    is enacted only once every pod of its attempt is counted, so these are none but by
    accident: a create whose answer was lost shows its pod only afterwards."""

    #: Finished (or terminating) with the tracking finalizer on: released uncounted,
    #: and kept for their logs, like a failed Job's pods.
    release: tuple[PodInfo, ...] = ()
    #: Still running: deleted, uncounted (their finalizer removed first), so that
    #: nothing of an earlier attempt runs beside the current one's parallelism.
    running: tuple[PodInfo, ...] = ()


NO_EARLIER_ATTEMPTS = EarlierAttempts()


def split_attempts(
    pods: Iterable[PodInfo], restarts: int, expected_removed: frozenset[str]
) -> tuple[tuple[PodInfo, ...], EarlierAttempts]:
    """The pods of the current attempt, and what the earlier attempts' still need."""
    current: list[PodInfo] = []
    release: list[PodInfo] = []
    running: list[PodInfo] = []
    for pod in pods:
        if pod.attempt == restarts:
            current.append(pod)
        elif pod.active:
            running.append(pod)
        elif pod.has_finalizer and pod.uid not in expected_removed:
            release.append(pod)
    return tuple(current), EarlierAttempts(tuple(release), tuple(running))
