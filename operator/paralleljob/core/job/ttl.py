"""ttlSecondsAfterFinished: what upstream's TTL-after-finished controller
(``pkg/controller/ttlafterfinished``) does, decided in the job's own sync."""

from __future__ import annotations

from datetime import datetime

from ... import constants as c
from .model import Job, JobStatus, find_condition


def job_finish_time(status: JobStatus) -> datetime | None:
    """jobFinishTime: the Complete or Failed condition's transition time."""
    for ctype in (c.COND_COMPLETE, c.COND_FAILED):
        cond = find_condition(status.conditions, ctype)
        if cond is not None and cond.status == "True":
            return cond.last_transition_time
    return None


def process_ttl(job: Job, status: JobStatus, now: datetime) -> tuple[bool, float | None]:
    """processTTL for ``job`` with the ``status`` this sync writes: whether its TTL has
    run out, else the seconds until it does (None: no TTL, not finished, or already
    being deleted)."""
    ttl = job.spec.ttl_seconds_after_finished
    finished_at = job_finish_time(status)
    if ttl is None or finished_at is None or job.deleting:
        return False, None
    # In seconds, not datetimes: a TTL of decades stays a number, never a date overflow.
    left = ttl - (now - finished_at).total_seconds()
    if left <= 0:
        return True, None
    return False, left
