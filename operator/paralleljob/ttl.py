"""ttlSecondsAfterFinished: what upstream's TTL-after-finished controller
(``pkg/controller/ttlafterfinished``) does, decided in the job's own sync."""

from __future__ import annotations

from datetime import datetime, timedelta

from . import constants as c
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
    expires = finished_at + timedelta(seconds=ttl)
    if now >= expires:
        return True, None
    return False, (expires - now).total_seconds()
