"""ttlSecondsAfterFinished, case by case as upstream tests it
(ttlafterfinished_controller_test.go: TestTimeLeft)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from paralleljob import constants as c
from paralleljob.core.job.model import Condition, Job, JobSpec, JobStatus
from paralleljob.core.job.ttl import process_ttl
from tests.unit.sim import T0


def finished(ctype: str, ago: int) -> JobStatus:
    at = T0 - timedelta(seconds=ago)
    return JobStatus(conditions=(Condition(ctype, "True", last_transition_time=at),))


@pytest.mark.parametrize(
    ("status", "ttl", "expected"),
    [
        pytest.param(JobStatus(), 10, (False, None), id="Job unfinished"),
        pytest.param(finished(c.COND_COMPLETE, 0), None, (False, None), id="completed, no TTL"),
        pytest.param(finished(c.COND_COMPLETE, 0), 0, (True, None), id="completed now, 0s TTL"),
        pytest.param(finished(c.COND_COMPLETE, 0), 10, (False, 10), id="completed now, 10s TTL"),
        pytest.param(finished(c.COND_COMPLETE, 10), 15, (False, 5), id="completed 10s ago, 15s"),
        pytest.param(finished(c.COND_FAILED, 0), None, (False, None), id="failed, no TTL"),
        pytest.param(finished(c.COND_FAILED, 0), 0, (True, None), id="failed now, 0s TTL"),
        pytest.param(finished(c.COND_FAILED, 0), 10, (False, 10), id="failed now, 10s TTL"),
        pytest.param(finished(c.COND_FAILED, 10), 15, (False, 5), id="failed 10s ago, 15s TTL"),
        pytest.param(finished(c.COND_FAILED, 20), 15, (True, None), id="failed 20s ago, 15s TTL"),
        # Beyond the calendar (year 9999): a number of seconds, never a date overflow.
        pytest.param(finished(c.COND_COMPLETE, 0), 2**40, (False, 2**40), id="TTL 2^40"),
    ],
)
def test_process_ttl(
    status: JobStatus, ttl: int | None, expected: tuple[bool, float | None]
) -> None:
    job = Job("ns", "job", "uid", spec=JobSpec(ttl_seconds_after_finished=ttl))
    assert process_ttl(job, status, T0) == expected


def test_a_job_being_deleted_needs_no_cleanup() -> None:
    job = Job("ns", "job", "uid", spec=JobSpec(ttl_seconds_after_finished=0), deleting=True)
    assert process_ttl(job, finished(c.COND_COMPLETE, 10), T0) == (False, None)
