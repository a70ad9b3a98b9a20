"""spec.restartPolicy's pure parts: the policy as parsed, whether a Failed verdict
restarts, the next attempt's status, the pods' attempt label (job_restart_policy.py,
job_restarts.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.job.job_restart_policy import (
    ATTEMPT_LABEL,
    RESTARTABLE_REASONS,
    JobRestartPolicy,
    attempt_labels,
    attempt_of,
    parse_job_restart_policy,
)
from paralleljob.core.job.job_restarts import (
    restart_message,
    restarted_status,
    restarts_after,
    split_attempts,
)
from paralleljob.core.job.model import Condition, JobStatus, PodInfo

NOW = datetime(2026, 12, 4, 12, 0, 0, 500000, tzinfo=UTC)
EARLIER = datetime(2026, 12, 4, 11, 0, tzinfo=UTC)
ALL = frozenset(RESTARTABLE_REASONS)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param({}, None, id="unset"),
        pytest.param({"restartPolicy": None}, None, id="null"),
        pytest.param({"restartPolicy": {}}, None, id="no maxRestarts"),
        pytest.param({"restartPolicy": {"maxRestarts": 0}}, None, id="zero"),
        pytest.param({"restartPolicy": {"maxRestarts": -1}}, None, id="negative"),
        pytest.param({"restartPolicy": {"maxRestarts": True}}, None, id="a bool"),
        pytest.param({"restartPolicy": {"maxRestarts": "2"}}, None, id="a string"),
        pytest.param({"restartPolicy": "Never"}, None, id="not an object"),
        pytest.param({"restartPolicy": {"maxRestarts": 2}}, JobRestartPolicy(2, ALL), id="two"),
        pytest.param(
            {"restartPolicy": {"maxRestarts": 1, "onFailureReasons": []}},
            JobRestartPolicy(1, ALL),
            id="empty reasons: all",
        ),
        pytest.param(
            {"restartPolicy": {"maxRestarts": 3, "onFailureReasons": ["DeadlineExceeded"]}},
            JobRestartPolicy(3, frozenset({"DeadlineExceeded"})),
            id="one reason",
        ),
    ],
)
def test_parse_job_restart_policy(raw: dict[str, Any], want: JobRestartPolicy | None) -> None:
    assert parse_job_restart_policy(raw) == want


def failed(reason: str = c.REASON_BACKOFF_LIMIT, ctype: str = c.COND_FAILED) -> Condition:
    return Condition(ctype, "True", reason, "why", NOW, NOW)


@pytest.mark.parametrize(
    ("policy", "restarts", "verdict", "want"),
    [
        pytest.param(None, 0, failed(), False, id="no policy"),
        pytest.param(JobRestartPolicy(1), 0, failed(), True, id="first restart"),
        pytest.param(JobRestartPolicy(2), 1, failed(), True, id="second of two"),
        pytest.param(JobRestartPolicy(2), 2, failed(), False, id="all used"),
        pytest.param(JobRestartPolicy(1), 5, failed(), False, id="more than max (lowered)"),
        pytest.param(JobRestartPolicy(1), 0, failed(c.REASON_DEADLINE), True, id="deadline"),
        pytest.param(
            JobRestartPolicy(1, frozenset({c.REASON_DEADLINE})),
            0,
            failed(c.REASON_BACKOFF_LIMIT),
            False,
            id="a reason not named",
        ),
        pytest.param(
            JobRestartPolicy(1, frozenset({"PodFailurePolicy"})),
            0,
            failed("PodFailurePolicy"),
            True,
            id="pod failure policy named",
        ),
        pytest.param(
            JobRestartPolicy(1),
            0,
            Condition(c.COND_COMPLETE, "True", c.REASON_COMPLETIONS_REACHED),
            False,
            id="complete",
        ),
    ],
)
def test_restarts_after(
    policy: JobRestartPolicy | None, restarts: int, verdict: Condition, want: bool
) -> None:
    assert restarts_after(policy, JobStatus(restarts=restarts), verdict) is want


SUSPENDED = Condition(c.COND_SUSPENDED, "False", "JobResumed", "Job resumed", EARLIER, EARLIER)
TARGET = failed(ctype=c.COND_FAILURE_TARGET)
SPENT = JobStatus(
    conditions=(SUSPENDED, TARGET),
    start_time=EARLIER,
    active=0,
    succeeded=3,
    failed=7,
    completed_indexes="0-2",
    failed_indexes="4",
    failures_since_success=7,
    last_failure_time=EARLIER,
    restarts=1,
    selector="paralleljob.dev/controller-uid=u",
    observed_generation=4,
    containers_text="main",
)


def test_the_next_attempts_status_keeps_only_what_describes_the_job() -> None:
    fresh = restarted_status(SPENT, suspended=False, now=NOW)
    assert fresh == JobStatus(
        conditions=(SUSPENDED,),
        start_time=NOW.replace(microsecond=0),
        failed_indexes="",
        restarts=2,
        selector="paralleljob.dev/controller-uid=u",
        observed_generation=4,
        containers_text="main",
    )


def test_a_suspended_job_restarts_without_a_start_time() -> None:
    assert restarted_status(SPENT, suspended=True, now=NOW).start_time is None


def test_failed_indexes_stay_unset_without_backoff_limit_per_index() -> None:
    status = JobStatus(conditions=(TARGET,), failed=1)
    assert restarted_status(status, suspended=False, now=NOW).failed_indexes is None


def test_the_event_names_the_reason_and_the_count() -> None:
    message = restart_message(failed(), 1, JobRestartPolicy(3))
    assert message == (
        "Job failed (BackoffLimitExceeded: why); restarted from nothing, restart 1 of 3"
    )


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param({}, 0, id="none"),
        pytest.param({ATTEMPT_LABEL: "3"}, 3, id="three"),
        pytest.param({ATTEMPT_LABEL: "x"}, 0, id="not a number"),
        pytest.param({ATTEMPT_LABEL: "-1"}, 0, id="negative"),
        pytest.param({ATTEMPT_LABEL: "٣"}, 0, id="a non-ASCII digit"),
        pytest.param({ATTEMPT_LABEL: 3}, 0, id="not a string"),
    ],
)
def test_attempt_of(labels: dict[str, Any], want: int) -> None:
    assert attempt_of(labels) == want


def test_the_first_attempts_pods_have_no_label() -> None:
    assert attempt_labels(0) == {}
    assert attempt_labels(2) == {ATTEMPT_LABEL: "2"}


def test_split_attempts() -> None:
    pods = (
        PodInfo("a", "a", attempt=2),
        PodInfo("b", "b", c.FAILED, attempt=1, has_finalizer=False),
        PodInfo("c", "c", c.FAILED, attempt=1),
        PodInfo("d", "d", c.SUCCEEDED, attempt=0),
        PodInfo("e", "e", attempt=2, has_finalizer=False),
        PodInfo("f", "f", c.RUNNING, attempt=1),
        PodInfo("g", "g", c.PENDING, attempt=0, has_finalizer=False),
        PodInfo("h", "h", c.RUNNING, attempt=0, deleting=True),
    )
    current, earlier = split_attempts(pods, 2, frozenset({"d"}))
    assert [p.name for p in current] == ["a", "e"]
    assert [p.name for p in earlier.release] == ["c", "h"], "finalizer on, not being removed"
    assert [p.name for p in earlier.running] == ["f", "g"], "running, finalizer or not"
