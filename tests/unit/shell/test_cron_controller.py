"""CronController.sync: the decision's writes against a fake API (creates, the
AlreadyExists of a run created before, deletions, Events, the status written with the
resourceVersion it was decided on, nothing written when nothing changed)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from paralleljob.json_types import JsonDict
from paralleljob.shell.api import ApiError
from paralleljob.shell.cron_children import CronChildren
from paralleljob.shell.cron_controller import CronController

from ..fake_api import FakeRecorder

CREATED = datetime(2026, 12, 4, 11, 59, 30, tzinfo=UTC)
NOW = datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
#: 2026-12-04T12:00:00Z in minutes since the epoch: the name of that minute's job.
MINUTE = int(datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()) // 60
JOBS = "/apis/paralleljob.dev/v1alpha1/namespaces/ns/paralleljobs"
STATUS = "/apis/paralleljob.dev/v1alpha1/namespaces/ns/parallelcronjobs/every/status"


class FakeRequests:
    """Answers each request from ``answers`` by (method, path), else {}; keeps the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.answers: dict[tuple[str, str], JsonDict | ApiError] = {}

    async def request(
        self, method: str, path: str, *, body: object = None, content_type: str = ""
    ) -> JsonDict:
        self.calls.append((method, path, body))
        answer = self.answers.get((method, path), {})
        if isinstance(answer, ApiError):
            raise answer
        return answer

    def of(self, method: str) -> list[tuple[str, str, Any]]:
        return [c for c in self.calls if c[0] == method]


def body(schedule: str = "* * * * *", status: JsonDict | None = None) -> JsonDict:
    return {
        "metadata": {
            "name": "every",
            "namespace": "ns",
            "uid": "cron-uid",
            "resourceVersion": "41",
            "creationTimestamp": "2026-12-04T11:59:30Z",
        },
        "spec": {
            "schedule": schedule,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never"}}}},
        },
        "status": status or {},
    }


def controller() -> tuple[CronController, FakeRequests, FakeRecorder]:
    api, recorder = FakeRequests(), FakeRecorder()
    crons = CronController(
        api,
        recorder,
        CronChildren(),
        leading_since=CREATED,
        jobs_synced=asyncio.Event(),
        now=lambda: NOW,
    )
    return crons, api, recorder


def test_a_due_minute_creates_its_job_and_records_it() -> None:
    crons, api, recorder = controller()
    api.answers[("POST", JOBS)] = {"metadata": {"uid": "job-uid"}}
    requeue = asyncio.run(crons.sync("cron-uid", body()))
    [(_, _, job)] = api.of("POST")
    assert job["metadata"]["name"] == f"every-{MINUTE}"
    assert [e.reason for e in recorder.events] == ["SuccessfulCreate"]
    [(_, path, patch)] = api.of("PATCH")
    assert path == STATUS
    assert patch["metadata"] == {"resourceVersion": "41"}, "decided on version 41"
    status = patch["status"]
    assert [(a["name"], a["uid"]) for a in status["active"]] == [(f"every-{MINUTE}", "job-uid")]
    assert status["lastScheduleTime"] == "2026-12-04T12:00:00Z"
    assert status["nextScheduleTime"] == "2026-12-04T12:01:00Z"
    assert requeue == pytest.approx(55.1)


def test_a_run_created_before_is_adopted_not_created_again() -> None:
    crons, api, recorder = controller()
    name = f"every-{MINUTE}"
    api.answers[("POST", JOBS)] = ApiError(409, "AlreadyExists", "exists")
    api.answers[("GET", f"{JOBS}/{name}")] = {"metadata": {"uid": "earlier"}}
    asyncio.run(crons.sync("cron-uid", body()))
    assert recorder.events == [], "no SuccessfulCreate for a job this sync did not make"
    [(_, _, patch)] = api.of("PATCH")
    assert [a["uid"] for a in patch["status"]["active"]] == ["earlier"]


def test_a_refused_create_writes_no_status() -> None:
    crons, api, recorder = controller()
    api.answers[("POST", JOBS)] = ApiError(403, "Forbidden", "quota")
    with pytest.raises(ApiError):
        asyncio.run(crons.sync("cron-uid", body()))
    assert api.of("PATCH") == []
    assert [(e.reason, e.message) for e in recorder.events] == [
        ("FailedCreate", "Error creating job: quota")
    ]


def test_a_conflicting_status_write_waits_for_the_newer_body() -> None:
    crons, api, _ = controller()
    api.answers[("PATCH", STATUS)] = ApiError(409, "Conflict", "modified")
    asyncio.run(crons.sync("cron-uid", body()))  # no error: the newer body's event comes
    assert len(api.of("PATCH")) == 1


def test_nothing_new_is_not_written() -> None:
    crons, api, _ = controller()
    stored = {
        "active": [],
        "activeCount": 0,
        "lastScheduleTime": "2026-12-04T12:00:00Z",
        "nextScheduleTime": "2026-12-04T12:01:00Z",
    }
    asyncio.run(crons.sync("cron-uid", body(status=stored)))
    assert api.calls == []


def test_an_unparseable_schedule_is_a_condition() -> None:
    crons, api, recorder = controller()
    assert asyncio.run(crons.sync("cron-uid", body(schedule="61 * * * *"))) is None
    assert api.of("POST") == []
    [(_, _, patch)] = api.of("PATCH")
    [cond] = patch["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "InvalidSchedule",
        "True",
        "UnparseableSchedule",
    )
    assert [e.reason for e in recorder.events] == ["UnparseableSchedule"]
