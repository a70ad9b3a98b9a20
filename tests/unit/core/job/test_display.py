"""What `kubectl get pj` prints, string for string as kubectl prints Jobs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from paralleljob import constants as c
from paralleljob.core.job.display import (
    completions_text,
    duration_text,
    human_duration,
    refresh_in,
    seconds_until_change,
    status_text,
)
from paralleljob.core.job.model import Condition, JobSpec, JobStatus
from tests.unit.sim import T0


@pytest.mark.parametrize(
    ("completions", "parallelism", "succeeded", "text"),
    [
        (5, 3, 2, "2/5"),
        (1, 1, 0, "0/1"),
        (5, 10, 5, "5/5"),
        (None, 3, 0, "0/1 of 3"),
        (None, 3, 3, "3/1 of 3"),
        (None, 1, 3, "3/1"),
        (None, 2, 3, "3/1 of 2"),
        (None, 0, 0, "0/1"),
    ],
)
def test_completions_column(
    completions: int | None, parallelism: int, succeeded: int, text: str
) -> None:
    assert (
        completions_text(JobSpec(completions=completions, parallelism=parallelism), succeeded)
        == text
    )


def _cond(ctype: str, status: str = "True") -> Condition:
    return Condition(ctype, status)


@pytest.mark.parametrize(
    ("conditions", "deleting", "text"),
    [
        ((), False, "Running"),
        ((_cond(c.COND_COMPLETE),), True, "Complete"),
        ((_cond(c.COND_FAILED), _cond(c.COND_COMPLETE)), False, "Complete"),
        ((_cond(c.COND_FAILURE_TARGET), _cond(c.COND_FAILED)), True, "Failed"),
        ((_cond(c.COND_SUSPENDED),), True, "Terminating"),
        ((_cond(c.COND_FAILURE_TARGET), _cond(c.COND_SUSPENDED)), False, "Suspended"),
        ((_cond(c.COND_FAILURE_TARGET),), False, "FailureTarget"),
        ((_cond(c.COND_SUSPENDED, "False"),), False, "Running"),
        ((_cond(c.COND_COMPLETE, "False"),), False, "Running"),
        ((_cond(c.COND_SUCCESS_CRITERIA_MET),), False, "SuccessCriteriaMet"),
        (
            (_cond(c.COND_FAILURE_TARGET), _cond(c.COND_SUCCESS_CRITERIA_MET)),
            False,
            "FailureTarget",
        ),
        ((_cond(c.COND_SUCCESS_CRITERIA_MET, "False"),), False, "Running"),
    ],
)
def test_status_column_precedence(
    conditions: tuple[Condition, ...], deleting: bool, text: str
) -> None:
    assert status_text(JobStatus(conditions=conditions), deleting) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (0.9, "0s"),
        (6, "6s"),
        (33, "33s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (3 * 3600 - 1, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60 * 7, "3h7m"),
        (8 * 3600, "8h"),
        (47 * 3600 + 59 * 60, "47h"),
        (48 * 3600, "2d"),
        (50 * 3600, "2d2h"),
        (8 * 86400, "8d"),
        (400 * 86400, "400d"),
        (2 * 365 * 86400, "2y"),
        (2 * 365 * 86400 + 3 * 86400, "2y3d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    "seconds",
    [0, 0.4, 59.5, 119.2, 150, 599.9, 600, 1234.5, 3 * 3600 + 5, 9 * 3600, 50 * 3600, 9 * 86400],
)
def test_refresh_happens_exactly_when_the_text_changes(seconds: float) -> None:
    wait = seconds_until_change(seconds)
    assert human_duration(seconds + wait) != human_duration(seconds)
    assert human_duration(seconds + wait * 0.999) == human_duration(seconds)


def test_duration_column() -> None:
    start = T0
    running = JobStatus(start_time=start)
    assert duration_text(running, start + timedelta(seconds=6)) == "6s"
    done = JobStatus(start_time=start, completion_time=start + timedelta(seconds=33))
    assert duration_text(done, start + timedelta(hours=5)) == "33s"
    assert duration_text(JobStatus(), start) == ""
    assert refresh_in(done, start) is None
    assert refresh_in(JobStatus(), start) is None
    assert refresh_in(running, start + timedelta(seconds=1.5)) == pytest.approx(0.5)
