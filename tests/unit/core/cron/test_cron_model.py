"""cron_model.py: a ParallelCronJob and its ParallelJobs read from JSON, the status written
back, the InvalidSchedule condition, and a ParallelJob built from the jobTemplate
(upstream's getJobFromTemplate2)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from paralleljob import constants as c
from paralleljob.core.cron.cron_model import (
    SCHEDULED_TIMESTAMP_ANNOTATION,
    TRIGGER_ANNOTATION,
    build_job,
    child_job,
    cron_input,
    cron_owner_uid,
    cron_status_to_dict,
    parse_cron_spec,
    parse_cron_status,
    schedule_conditions,
)
from paralleljob.core.cron.cron_sync import ActiveRef, ChildJob, CronSpec, CronStatus, JobToCreate

NOW = datetime(2026, 12, 4, 12, 0, 30, tzinfo=UTC)
T = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def cron(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "nightly",
            "namespace": "ns",
            "uid": "cron-uid",
            "creationTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {
                "metadata": {"labels": {"app": "x"}, "annotations": {"team": "a"}},
                "spec": {"completions": 2, "template": {"spec": {"restartPolicy": "Never"}}},
            },
            **spec,
        },
    }


def test_the_spec_with_the_crd_s_defaults() -> None:
    assert parse_cron_spec({"schedule": "* * * * *"}) == CronSpec(schedule="* * * * *")
    full = {
        "schedule": "@hourly",
        "timeZone": "Asia/Tokyo",
        "startingDeadlineSeconds": 30,
        "concurrencyPolicy": "Forbid",
        "suspend": True,
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 5,
        "catchUpPolicy": "All",
        "maxActiveJobs": 2,
    }
    assert parse_cron_spec(full) == CronSpec(
        schedule="@hourly",
        time_zone="Asia/Tokyo",
        starting_deadline_seconds=30,
        concurrency_policy="Forbid",
        suspend=True,
        successful_jobs_history_limit=0,
        failed_jobs_history_limit=5,
        catch_up="All",
        max_active=2,
    )


def test_the_status_round_trips() -> None:
    status = CronStatus(
        active=(ActiveRef("a", "ua"), ActiveRef("b", "ub")),
        last_schedule_time=T,
        last_successful_time=NOW,
        next_schedule_time=T,
        last_missed_time=T,
        last_trigger="7",
    )
    written = cron_status_to_dict(status, "ns", [])
    assert written["activeCount"] == 2
    assert written["active"][0] == {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "namespace": "ns",
        "name": "a",
        "uid": "ua",
    }
    assert written["conditions"] is None
    assert parse_cron_status(written) == status


def test_an_empty_status_clears_every_field() -> None:
    written = cron_status_to_dict(CronStatus(), "ns", [])
    assert written["active"] == [] and written["activeCount"] == 0
    assert all(
        written[k] is None
        for k in ("lastScheduleTime", "nextScheduleTime", "lastMissedTime", "lastTrigger")
    )


@pytest.mark.parametrize(
    ("refs", "want"),
    [
        pytest.param([], None, id="none"),
        pytest.param(
            [{"apiVersion": "paralleljob.dev/v1alpha1", "kind": "ParallelCronJob", "uid": "u"}],
            None,
            id="not the controller",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "paralleljob.dev/v1alpha1",
                    "kind": "ParallelCronJob",
                    "uid": "u",
                    "controller": True,
                }
            ],
            "u",
            id="controller",
        ),
        pytest.param(
            [{"apiVersion": "batch/v1", "kind": "CronJob", "uid": "u", "controller": True}],
            None,
            id="a CronJob",
        ),
    ],
)
def test_cron_owner_uid(refs: list[dict[str, Any]], want: str | None) -> None:
    assert cron_owner_uid({"ownerReferences": refs}) == want


def test_a_child_job_read_from_its_body() -> None:
    body = {
        "metadata": {
            "name": "nightly-100",
            "uid": "j",
            "annotations": {SCHEDULED_TIMESTAMP_ANNOTATION: "2026-12-04T21:00:00+09:00"},
        },
        "status": {
            "startTime": "2026-12-04T12:00:01Z",
            "conditions": [
                {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-04T12:00:09Z"}
            ],
        },
    }
    assert child_job(body) == ChildJob(
        name="nightly-100",
        uid="j",
        finished="Complete",
        finish_time=datetime(2026, 12, 4, 12, 0, 9, tzinfo=UTC),
        start_time=datetime(2026, 12, 4, 12, 0, 1, tzinfo=UTC),
        scheduled_time=T,
    )
    running = child_job({"metadata": {"name": "r", "uid": "r"}, "status": {}})
    assert (running.finished, running.scheduled_time) == (None, None)


def test_the_input_takes_the_trigger_annotation() -> None:
    body = cron()
    body["metadata"]["annotations"] = {TRIGGER_ANNOTATION: "now-1"}
    inp = cron_input(body, (), NOW, T)
    assert (inp.name, inp.trigger, inp.leading_since, inp.now) == ("nightly", "now-1", T, NOW)
    assert inp.creation_timestamp == datetime(2026, 12, 1, tzinfo=UTC)
    body["metadata"]["annotations"] = {TRIGGER_ANNOTATION: ""}
    assert cron_input(body, (), NOW, T).trigger is None


def test_a_scheduled_job_from_the_template() -> None:
    job = build_job(cron(timeZone="Asia/Tokyo"), JobToCreate("nightly-29413440", T))
    assert job["apiVersion"] == c.API_VERSION and job["kind"] == c.KIND
    meta = job["metadata"]
    assert (meta["name"], meta["namespace"]) == ("nightly-29413440", "ns")
    assert meta["labels"] == {"app": "x"}
    assert meta["annotations"] == {
        "team": "a",
        SCHEDULED_TIMESTAMP_ANNOTATION: "2026-12-04T21:00:00+09:00",
    }
    assert meta["ownerReferences"] == [
        {
            "apiVersion": c.API_VERSION,
            "kind": "ParallelCronJob",
            "name": "nightly",
            "uid": "cron-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == cron()["spec"]["jobTemplate"]["spec"]


def test_a_triggered_job_has_no_scheduled_timestamp() -> None:
    job = build_job(cron(), JobToCreate("nightly-mabc", None))
    assert job["metadata"]["annotations"] == {"team": "a"}


def test_the_template_is_copied_not_shared() -> None:
    body = cron()
    job = build_job(body, JobToCreate("n", T))
    job["spec"]["completions"] = 9
    job["metadata"]["labels"]["b"] = "c"
    assert body["spec"]["jobTemplate"]["spec"]["completions"] == 2
    assert body["spec"]["jobTemplate"]["metadata"]["labels"] == {"app": "x"}


def test_the_invalid_schedule_condition_set_kept_and_cleared() -> None:
    assert schedule_conditions([], None, NOW) == []
    [cond] = schedule_conditions([], ("UnparseableSchedule", "bad"), NOW)
    assert cond == {
        "type": "InvalidSchedule",
        "status": "True",
        "reason": "UnparseableSchedule",
        "message": "bad",
        "lastTransitionTime": "2026-12-04T12:00:30Z",
    }
    later = datetime(2026, 12, 4, 13, 0, tzinfo=UTC)
    assert schedule_conditions([cond], ("UnparseableSchedule", "bad"), later) == [cond]
    [changed] = schedule_conditions([cond], ("UnknownTimeZone", "zone"), later)
    assert changed["reason"] == "UnknownTimeZone"
    assert changed["lastTransitionTime"] == cond["lastTransitionTime"], "still True"
    [cleared] = schedule_conditions([cond], None, later)
    assert (cleared["status"], cleared["lastTransitionTime"]) == ("False", "2026-12-04T13:00:00Z")


def test_all_with_replace_stored_before_the_crd_refused_it_catches_up_as_latest() -> None:
    spec = parse_cron_spec(
        {"schedule": "* * * * *", "catchUpPolicy": "All", "concurrencyPolicy": "Replace"}
    )
    assert (spec.catch_up, spec.concurrency_policy) == ("Latest", "Replace")
    assert parse_cron_spec({"schedule": "* * * * *", "catchUpPolicy": "All"}).catch_up == "All"
