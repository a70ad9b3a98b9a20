"""CronController: the decision's writes against an in-memory API (creates, the
AlreadyExists of a run created before and whose it is, deletions, Events, the status
written with the resourceVersion it was decided on and its answer kept), and upstream's
live reads before a job is judged unexpected or missing, or one is created."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

from paralleljob.config import ControllerConfig
from paralleljob.core import child_job
from paralleljob.cron.cron_controller import CronController
from paralleljob.json_types import JsonDict
from paralleljob.runtime.api import ApiError
from paralleljob.runtime.cron_children import CronChildren
from tests.unit.fake_api import FakeRecorder

NOW = datetime(2026, 12, 4, 12, 0, 5, tzinfo=UTC)
#: 2026-12-04T12:00:00Z in minutes since the epoch: the name of that minute's job.
MINUTE = int(datetime(2026, 12, 4, 12, 0, tzinfo=UTC).timestamp()) // 60
JOB = f"every-{MINUTE}"
UID = "cron-uid"


class FakeCronApi:
    """A ParallelCronJob and ParallelJobs in memory, as an API server keeps them: a
    resourceVersion bumped by each write, merge patches of the status with a
    resourceVersion precondition; ``refuse`` makes the next call of a method fail."""

    def __init__(self, cron: JsonDict) -> None:
        self.crons: dict[str, JsonDict] = {cron["metadata"]["name"]: copy.deepcopy(cron)}
        self.jobs: dict[str, JsonDict] = {}
        self.calls: list[tuple[str, str]] = []
        self.refuse: dict[str, ApiError] = {}
        self._version = 41

    def _call(self, method: str, name: str) -> None:
        self.calls.append((method, name))
        if method in self.refuse:
            raise self.refuse.pop(method)

    def _bump(self) -> str:
        self._version += 1
        return str(self._version)

    def of(self, method: str) -> list[str]:
        return [name for m, name in self.calls if m == method]

    async def get_cron(self, namespace: str, name: str) -> JsonDict:
        self._call("get_cron", name)
        if name not in self.crons:
            raise ApiError(404, "NotFound", name)
        return copy.deepcopy(self.crons[name])

    async def patch_cron_status(self, namespace: str, name: str, patch: JsonDict) -> JsonDict:
        self._call("patch_cron_status", name)
        cron = self.crons[name]
        if patch["metadata"]["resourceVersion"] != cron["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        status = cron.setdefault("status", {})
        for key, value in patch["status"].items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        cron["metadata"]["resourceVersion"] = self._bump()
        return copy.deepcopy(cron)

    async def get_job(self, namespace: str, name: str) -> JsonDict:
        self._call("get_job", name)
        if name not in self.jobs:
            raise ApiError(404, "NotFound", name)
        return copy.deepcopy(self.jobs[name])

    async def create_job(self, namespace: str, job: JsonDict) -> JsonDict:
        self._call("create_job", job["metadata"]["name"])
        name = job["metadata"]["name"]
        if name in self.jobs:
            raise ApiError(409, "AlreadyExists", f"{name} already exists")
        stored = copy.deepcopy(job)
        stored["metadata"] |= {"uid": f"uid-{name}", "resourceVersion": self._bump()}
        self.jobs[name] = stored
        return copy.deepcopy(stored)

    async def delete_job_in_background(self, namespace: str, name: str) -> None:
        self._call("delete_job", name)
        if self.jobs.pop(name, None) is None:
            raise ApiError(404, "NotFound", name)


def cron_body(schedule: str = "* * * * *", **spec: object) -> JsonDict:
    return {
        "metadata": {
            "name": "every",
            "namespace": "ns",
            "uid": UID,
            "resourceVersion": "41",
            "creationTimestamp": "2026-12-04T11:59:30Z",
        },
        "spec": {
            "schedule": schedule,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never"}}}},
            **spec,
        },
        "status": {},
    }


def running_job(name: str, owner: str = UID) -> JsonDict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "paralleljob.dev/v1alpha1",
                    "kind": "ParallelCronJob",
                    "name": "every",
                    "uid": owner,
                    "controller": True,
                }
            ],
        },
        "status": {"startTime": "2026-12-04T12:00:01Z"},
    }


class Setup:
    """A controller on an event loop of its own whose workers never start (their gate
    stays shut): each test calls ``sync`` itself, one at a time."""

    def __init__(self, body: JsonDict | None = None) -> None:
        body = body or cron_body()
        self.loop = asyncio.new_event_loop()
        self.api = FakeCronApi(body)
        self.recorder = FakeRecorder()
        self.children = CronChildren()

        async def build() -> CronController:
            return CronController(
                self.api,
                self.recorder,
                self.children,
                ControllerConfig(),
                leading_since=datetime(2026, 12, 4, 11, 0, tzinfo=UTC),
                monotonic=time.monotonic,
                now=lambda: NOW,
                ready=asyncio.Event(),
            )

        self.crons = self.loop.run_until_complete(build())
        self.seen(body)

    def seen(self, body: JsonDict) -> None:
        async def seen() -> None:
            self.crons.cron_seen(body)

        self.loop.run_until_complete(seen())

    def sync(self) -> float | None:
        return self.loop.run_until_complete(self.crons.sync(UID))

    def close(self) -> None:
        self.loop.run_until_complete(self.crons.stop_all())
        self.loop.close()

    def reasons(self) -> list[str]:
        return [e.reason for e in self.recorder.events]

    def job_informer_sees(self, name: str) -> None:
        self.children.observe(self.api.jobs.get(name) or running_job(name))


Make = Callable[..., Setup]


@pytest.fixture
def setup() -> Iterator[Make]:
    made: list[Setup] = []

    def make(body: JsonDict | None = None) -> Setup:
        made.append(Setup(body))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_due_minute_creates_its_job_and_records_it(setup: Make) -> None:
    s = setup()
    requeue = s.sync()
    assert s.api.of("create_job") == [JOB]
    assert s.reasons() == ["SuccessfulCreate"]
    stored = s.api.crons["every"]
    assert [(a["name"], a["uid"]) for a in stored["status"]["active"]] == [(JOB, f"uid-{JOB}")]
    assert stored["status"]["lastScheduleTime"] == "2026-12-04T12:00:00Z"
    assert stored["status"]["nextScheduleTime"] == "2026-12-04T12:01:00Z"
    assert requeue == pytest.approx(55.1)


def test_the_status_writes_answer_is_what_the_next_sync_decides_on(
    setup: Callable[..., Setup],
) -> None:
    """The new job's informer event comes before the ParallelCronJob's: the next sync
    reads the written version, so the job is in its active list (no live read, no
    UnexpectedJob), and the informer's older version is not taken back."""
    s = setup()
    s.sync()
    s.job_informer_sees(JOB)
    s.api.calls.clear()
    s.sync()
    assert s.api.calls == [], "nothing to read live, nothing to write"
    assert s.reasons() == ["SuccessfulCreate"]
    s.seen(cron_body())  # the pre-write version, delivered late
    written = s.api.crons["every"]["metadata"]["resourceVersion"]
    assert s.crons.crons[UID]["metadata"]["resourceVersion"] == written


def test_an_unfinished_job_not_in_the_cached_active_list_is_read_live_first(
    setup: Callable[..., Setup],
) -> None:
    """The cached ParallelCronJob lags its own last write: the live one lists the job."""
    s = setup()
    s.sync()
    s.job_informer_sees(JOB)
    s.crons.crons[UID] = cron_body()  # as if the write's answer had been lost
    s.api.calls.clear()
    s.sync()
    assert s.api.of("get_cron") == ["every"]
    assert "UnexpectedJob" not in s.reasons()
    assert s.api.of("create_job") == []


def test_a_job_the_live_object_does_not_list_either_is_unexpected(
    setup: Callable[..., Setup],
) -> None:
    s = setup()
    s.api.jobs["stranger"] = running_job("stranger")
    s.job_informer_sees("stranger")
    s.sync()
    assert s.api.of("get_cron") == ["every"]
    assert "UnexpectedJob" in s.reasons()


def test_an_active_job_the_job_informer_lacks_is_read_before_it_is_missing(
    setup: Callable[..., Setup],
) -> None:
    """Forbid: the running job the cache does not show yet still holds the next run."""
    body = cron_body(concurrencyPolicy="Forbid")
    body["status"] = {
        "active": [{"name": "slow", "uid": "uid-slow"}],
        "lastScheduleTime": "2026-12-04T11:59:00Z",
    }
    s = setup(body)
    s.api.jobs["slow"] = running_job("slow")
    s.sync()
    assert s.api.of("get_job") == ["slow"]
    assert "MissingJob" not in s.reasons()
    assert s.reasons() == ["JobAlreadyActive"]
    assert s.api.of("create_job") == []
    assert [a["name"] for a in s.api.crons["every"]["status"]["active"]] == ["slow"]


def test_an_active_job_the_api_server_lacks_too_is_missing(setup: Make) -> None:
    body = cron_body(concurrencyPolicy="Forbid")
    body["status"] = {
        "active": [{"name": "gone", "uid": "uid-gone"}],
        "lastScheduleTime": "2026-12-04T11:59:00Z",
    }
    s = setup(body)
    s.sync()
    assert s.reasons() == ["MissingJob", "SuccessfulCreate"]


def test_a_run_created_before_is_adopted_not_created_again(setup: Make) -> None:
    s = setup()
    s.api.jobs[JOB] = running_job(JOB)
    s.sync()
    assert s.api.of("create_job") == [JOB]
    assert s.reasons() == [], "no SuccessfulCreate for a job this sync did not make"
    assert [a["uid"] for a in s.api.crons["every"]["status"]["active"]] == [f"uid-{JOB}"]


def test_a_job_of_that_name_that_another_owner_controls_is_not_adopted(
    setup: Callable[..., Setup],
) -> None:
    s = setup()
    s.api.jobs[JOB] = running_job(JOB, owner="someone-else")
    with pytest.raises(ApiError):
        s.sync()
    assert s.reasons() == ["FailedCreate"]
    assert "not controlled by every" in s.recorder.events[0].message
    assert s.api.of("patch_cron_status") == []


def test_a_refused_create_writes_no_status(setup: Make) -> None:
    s = setup()
    s.api.refuse["create_job"] = ApiError(403, "Forbidden", "quota")
    with pytest.raises(ApiError):
        s.sync()
    assert s.api.of("patch_cron_status") == []
    assert [(e.reason, e.message) for e in s.recorder.events] == [
        ("FailedCreate", "Error creating job: quota")
    ]


def test_a_conflicting_status_write_reads_the_object_and_syncs_again(
    setup: Callable[..., Setup],
) -> None:
    s = setup()
    s.api.refuse["patch_cron_status"] = ApiError(409, "Conflict", "modified")
    s.api.crons["every"]["spec"]["suspend"] = False  # the change the conflict was about
    s.api.crons["every"]["metadata"]["resourceVersion"] = "50"
    with pytest.raises(ApiError) as refused:
        s.sync()
    assert refused.value.conflict, "the engine syncs again at once"
    assert s.crons.crons[UID]["metadata"]["resourceVersion"] == "50"
    s.job_informer_sees(JOB)
    s.sync()
    assert s.api.of("create_job") == [JOB], "the run is not created twice"
    assert [a["name"] for a in s.api.crons["every"]["status"]["active"]] == [JOB]


def test_nothing_new_is_not_written(setup: Make) -> None:
    body = cron_body()
    body["status"] = {
        "active": [],
        "activeCount": 0,
        "lastScheduleTime": "2026-12-04T12:00:00Z",
        "nextScheduleTime": "2026-12-04T12:01:00Z",
    }
    s = setup(body)
    s.sync()
    assert s.api.calls == []


def test_an_unparseable_schedule_is_a_condition_and_one_warning(
    setup: Callable[..., Setup],
) -> None:
    s = setup(cron_body(schedule="61 * * * *"))
    assert s.sync() is None
    assert s.api.of("create_job") == []
    [cond] = s.api.crons["every"]["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "InvalidSchedule",
        "True",
        "UnparseableSchedule",
    )
    s.sync()  # the next sync reads the written condition: no second Warning
    assert s.reasons() == ["UnparseableSchedule"]


def test_a_deleted_parallelcronjob_is_never_synced_again(setup: Make) -> None:
    s = setup()
    s.crons.cron_deleted(UID)
    assert s.sync() is None
    assert s.api.calls == []
    assert UID not in s.crons.loops


def test_a_deletion_not_seen_yet_starts_no_job(setup: Make) -> None:
    """Paused, or its watch behind: the live read before the create finds it gone."""
    s = setup()
    del s.api.crons["every"]
    assert s.sync() is None
    assert s.api.of("create_job") == []
    assert UID not in s.crons.crons


def test_a_job_already_gone_is_not_reported_deleted(setup: Make) -> None:
    body = cron_body(concurrencyPolicy="Replace")
    body["status"] = {
        "active": [{"name": "old", "uid": "uid-old"}],
        "lastScheduleTime": "2026-12-04T11:59:00Z",
    }
    s = setup(body)
    s.api.jobs["old"] = running_job("old")
    s.job_informer_sees("old")
    del s.api.jobs["old"]  # deleted meanwhile (a second DELETE answers 404)
    s.sync()
    assert s.api.of("delete_job") == ["old"]
    assert "SuccessfulDelete" not in s.reasons()


def test_child_jobs_are_read_as_the_core_reads_them() -> None:
    assert child_job(running_job("x")).finished is None
