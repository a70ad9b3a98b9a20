"""One sync of a ParallelCronJob, case by case as upstream tests the CronJob controller
(cronjob_controllerv2_test.go: TestControllerV2SyncCronJob, TestControllerV2CleanupFinishedJobs,
TestControllerV2JobAlreadyExistsButNotInActiveStatus; utils_test.go: TestMostRecentScheduleTime,
TestNextScheduleTime, TestNextScheduleTimeDuration, TestByJobStartTime,
TestGetJobFromTemplate2, at Kubernetes v1.37.2), then the extensions: catchUp,
lastMissedTime, nextScheduleTime, maxActive, triggers, the adoption of a job a crash left
unrecorded, and the history limits.

Where this sync differs from upstream's on purpose, the row says so: the MissSchedule
warning (upstream gives times up silently), a TZ= schedule (refused), and ``@every`` with
a short startingDeadlineSeconds (upstream's own table comments that row out as failing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict, Unpack

import pytest

from paralleljob.core.cron.cron_schedule import parse_schedule
from paralleljob.core.cron.cron_sync import (
    CATCH_UP_PACE_SECONDS,
    ActiveRef,
    ChildJob,
    CronInput,
    CronPlan,
    CronSpec,
    CronStatus,
    JobToCreate,
    Verify,
    plan_cron_sync,
    record_created,
    scheduled_timestamp_annotation,
)
from paralleljob.core.cron.cron_times import (
    FEW_MISSED,
    MANY_MISSED,
    NONE_MISSED,
    InvalidSchedule,
    due_time,
    get_job_name,
    get_time_hash_in_minutes,
    most_recent_schedule_time,
    next_schedule_time_duration,
    trigger_job_name,
)

NAME = "mycronjob"
ON_THE_HOUR = "0 * * * ?"
EVERY_HOUR = "@every 1h"
ERROR_SCHEDULE = "obvious error schedule"
NEW_YORK = "America/New_York"
SHORT_DEAD = 10
MEDIUM_DEAD = 2 * 60 * 60
LONG_DEAD = 1000000


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


TOP_OF_THE_HOUR = at("2016-05-19T10:00:00")
JUST_BEFORE_THE_PRIOR_HOUR = at("2016-05-19T08:59:00")
JUST_AFTER_THE_PRIOR_HOUR = at("2016-05-19T09:01:00")
JUST_BEFORE_THE_HOUR = at("2016-05-19T09:59:00")
JUST_AFTER_THE_HOUR = at("2016-05-19T10:01:00")
JUST_BEFORE_THE_NEXT_HOUR = at("2016-05-19T10:59:00")
WEEK_AFTER_THE_HOUR = at("2016-05-26T10:00:00")
LONG_AGO = at("2016-01-01T00:00:00")  # leading_since where it plays no part


def after_top(**delta: float) -> datetime:
    return TOP_OF_THE_HOUR + timedelta(**delta)


def seconds(**delta: float) -> float:
    """A requeue: the duration plus nextScheduleDelta."""
    return timedelta(**delta).total_seconds() + 0.1


def reasons(plan: CronPlan) -> list[str]:
    return [event.reason for event in plan.events]


# --- TestControllerV2SyncCronJob ----------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One row of upstream's table: the cron job, its one job, and what the sync does."""

    now: datetime
    policy: str = "Allow"
    schedule: str = ON_THE_HOUR
    time_zone: str | None = None
    deadline: int | None = None
    suspend: bool = False
    history: int | None = None  # successfulJobsHistoryLimit (upstream's cronJob(): nil)
    ran_previously: bool = False
    still_active: bool = False
    in_active_status: bool = True  # jobPresentInCJActiveStatus
    cronjob_creation_time: datetime | None = None
    job_creation_time: datetime = JUST_AFTER_THE_PRIOR_HOUR
    last_schedule_time: datetime | None = None
    # What the sync does.
    run: datetime | None = None  # the scheduled time of the job it creates
    delete: int = 0
    active: int = 0
    requeue: float | None = None
    events: tuple[str, ...] = ()


def upstream_input(row: Row) -> CronInput:
    """The test's set-up: a job (uid 1234) made for ``job_creation_time`` when the cron
    job ran before, finished 10 s after unless still active."""
    spec = CronSpec(
        schedule=row.schedule,
        time_zone=row.time_zone,
        starting_deadline_seconds=row.deadline,
        concurrency_policy=row.policy,
        suspend=row.suspend,
        successful_jobs_history_limit=row.history,
        failed_jobs_history_limit=None,
    )
    created = JUST_BEFORE_THE_PRIOR_HOUR if row.ran_previously else JUST_BEFORE_THE_HOUR
    status = CronStatus()
    children: tuple[ChildJob, ...] = ()
    if row.ran_previously:
        job_time = row.job_creation_time
        job = ChildJob(
            name=get_job_name(NAME, job_time),
            uid="1234",
            finished=None if row.still_active else "Complete",
            finish_time=None if row.still_active else job_time + timedelta(seconds=10),
            start_time=job_time,
            scheduled_time=job_time,
        )
        children = (job,)
        status = CronStatus(
            active=(ActiveRef(job.name, job.uid),) if row.in_active_status else (),
            last_schedule_time=row.last_schedule_time or JUST_AFTER_THE_PRIOR_HOUR,
        )
    return CronInput(
        name=NAME,
        creation_timestamp=row.cronjob_creation_time or created,
        deleting=False,
        spec=spec,
        status=status,
        children=children,
        now=row.now,
        leading_since=LONG_AGO,
    )


def planned(inp: CronInput) -> CronPlan:
    """plan_cron_sync as the shell runs it against an API server that holds what the
    caches hold (upstream's fakes): the live reads a first plan asks for find nothing
    more, and the second plan is the sync's."""
    first = plan_cron_sync(inp)
    return plan_cron_sync(replace(inp, live_checked=True)) if first.verify else first


def check(plan: CronPlan, row: Row) -> None:
    expected_create = (
        () if row.run is None else (JobToCreate(get_job_name(NAME, row.run), row.run),)
    )
    assert plan.create == expected_create
    assert len(plan.delete) == row.delete
    assert len(plan.status.active) == row.active
    assert reasons(plan) == list(row.events)
    if row.requeue is None:
        assert plan.requeue_after is None
    else:
        assert plan.requeue_after == pytest.approx(row.requeue)
    if row.run is not None:
        assert plan.status.last_schedule_time == row.run


A, F, R = "Allow", "Forbid", "Replace"
SAW = "SawCompletedJob"
MISSED = "MissSchedule"
TOO_MANY = "TooManyMissedTimes"
UNPARSEABLE = "UnparseableSchedule"
TOP = TOP_OF_THE_HOUR
WEEK = WEEK_AFTER_THE_HOUR


def _policies(name: str, row: Row) -> list[object]:
    """Upstream's A/F/R triplets of a row that every policy treats alike."""
    return [pytest.param(replace(row, policy=p), id=f"{name}, {p[0]}") for p in (A, F, R)]


class _Ran(TypedDict, total=False):
    ran_previously: bool
    still_active: bool


PRIOR: _Ran = {"ran_previously": True}
ACTIVE: _Ran = {"ran_previously": True, "still_active": True}

SYNC_ROWS = [
    *[
        pytest.param(
            Row(JUST_BEFORE_THE_HOUR, policy=p, schedule=ERROR_SCHEDULE, events=(UNPARSEABLE,)),
            id=f"never ran, not valid schedule, {p[0]}",
        )
        for p in (A, F, R)
    ],
    pytest.param(
        Row(JUST_BEFORE_THE_HOUR, time_zone="bad timezone", events=("UnknownTimeZone",)),
        id="never ran, not valid time zone",
    ),
    *_policies("never ran, not time", Row(JUST_BEFORE_THE_HOUR, requeue=seconds(minutes=1))),
    pytest.param(
        Row(JUST_BEFORE_THE_HOUR, time_zone=NEW_YORK, requeue=seconds(minutes=1)),
        id="never ran, not time in zone",
    ),
    *_policies(
        "never ran, is time",
        Row(JUST_AFTER_THE_HOUR, run=TOP, active=1, requeue=seconds(minutes=59)),
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR, time_zone=NEW_YORK, run=TOP, active=1, requeue=seconds(minutes=59)
        ),
        id="never ran, is time in zone",
    ),
    # Upstream runs it (and warns UnsupportedSchedule); validation refuses it on create.
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            schedule="TZ=UTC " + ON_THE_HOUR,
            time_zone=NEW_YORK,
            events=(UNPARSEABLE,),
        ),
        id="never ran, is time in zone, but TZ is also set in schedule (refused)",
    ),
    pytest.param(Row(JUST_AFTER_THE_HOUR, suspend=True), id="never ran, is time, suspended"),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR + timedelta(minutes=SHORT_DEAD + 1),
            deadline=SHORT_DEAD,
            requeue=seconds(minutes=59 - SHORT_DEAD - 1),
            events=(MISSED,),
        ),
        id="never ran, is time, past deadline",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR, deadline=LONG_DEAD, run=TOP, active=1, requeue=seconds(minutes=59)
        ),
        id="never ran, is time, not past deadline",
    ),
    *_policies(
        "prev ran but done, not time",
        Row(JUST_BEFORE_THE_HOUR, requeue=seconds(minutes=1), events=(SAW,), **PRIOR),
    ),
    *_policies(
        "prev ran but done, is time",
        Row(
            JUST_AFTER_THE_HOUR,
            run=TOP,
            active=1,
            requeue=seconds(minutes=59),
            events=(SAW,),
            **PRIOR,
        ),
    ),
    pytest.param(
        Row(JUST_AFTER_THE_HOUR, suspend=True, events=(SAW,), **PRIOR),
        id="prev ran but done, is time, suspended",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            deadline=SHORT_DEAD,
            requeue=seconds(minutes=59),
            events=(SAW, MISSED),
            **PRIOR,
        ),
        id="prev ran but done, is time, past deadline",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            deadline=LONG_DEAD,
            run=TOP,
            active=1,
            requeue=seconds(minutes=59),
            events=(SAW,),
            **PRIOR,
        ),
        id="prev ran but done, is time, not past deadline",
    ),
    *_policies(
        "still active, not time",
        Row(JUST_BEFORE_THE_HOUR, active=1, requeue=seconds(minutes=1), **ACTIVE),
    ),
    pytest.param(
        Row(JUST_AFTER_THE_HOUR, run=TOP, active=2, requeue=seconds(minutes=59), **ACTIVE),
        id="still active, is time, A",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            policy=F,
            active=1,
            requeue=seconds(minutes=59),
            events=("JobAlreadyActive",),
            **ACTIVE,
        ),
        id="still active, is time, F",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            policy=R,
            run=TOP,
            delete=1,
            active=1,
            requeue=seconds(minutes=59),
            **ACTIVE,
        ),
        id="still active, is time, R",
    ),
    pytest.param(
        Row(JUST_AFTER_THE_HOUR, suspend=True, active=1, **ACTIVE),
        id="still active, is time, suspended",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            deadline=SHORT_DEAD,
            active=1,
            requeue=seconds(minutes=59),
            events=(MISSED,),
            **ACTIVE,
        ),
        id="still active, is time, past deadline",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            deadline=LONG_DEAD,
            run=TOP,
            active=2,
            requeue=seconds(minutes=59),
            **ACTIVE,
        ),
        id="still active, is time, not past deadline",
    ),
    # Too many missed starting times: upstream warns and runs the latest.
    *[
        pytest.param(
            Row(
                WEEK,
                policy=p,
                deadline=dead,
                run=WEEK,
                active=1,
                requeue=seconds(hours=1),
                events=(SAW, TOO_MANY, MISSED),
                **PRIOR,
            ),
            id=f"prev ran but done, long overdue, {label}, {p[0]}",
        )
        for label, dead in (("not past deadline", LONG_DEAD), ("no deadline", None))
        for p in (A, R, F)
    ],
    *[
        pytest.param(
            Row(
                WEEK,
                policy=p,
                deadline=dead,
                run=WEEK,
                active=1,
                requeue=seconds(hours=1),
                events=(SAW, MISSED),
                **PRIOR,
            ),
            id=f"prev ran but done, long overdue, past {label} deadline, {p[0]}",
        )
        for label, dead in (("medium", MEDIUM_DEAD), ("short", SHORT_DEAD))
        for p in (A, R, F)
    ],
    # Time skew: the controller sees the job already made, takes no action.
    pytest.param(
        Row(
            JUST_BEFORE_THE_HOUR,
            policy=F,
            job_creation_time=JUST_AFTER_THE_HOUR,
            in_active_status=False,
            requeue=seconds(minutes=1),
            **PRIOR,
        ),
        id="this ran but done, time drifted back, F",
    ),
    # A slow cron job list: upstream re-reads the cron job and finds the job active;
    # here the sync finds the job of the due time among the children and adopts it.
    *[
        pytest.param(
            Row(
                JUST_AFTER_THE_HOUR + timedelta(milliseconds=100),
                policy=p,
                deadline=LONG_DEAD,
                job_creation_time=TOP + timedelta(milliseconds=100),
                in_active_status=False,
                active=1,
                requeue=seconds(minutes=59, milliseconds=-100),
                events=("UnexpectedJob",),
                **ACTIVE,
            ),
            id=f"this started but is not present in cronjob active list, not past deadline, {p[0]}",
        )
        for p in (A, F, R)
    ],
    # @every.
    pytest.param(
        Row(
            TOP,
            schedule=EVERY_HOUR,
            cronjob_creation_time=JUST_BEFORE_THE_HOUR,
            requeue=seconds(minutes=59),
        ),
        id="with @every schedule, never ran, not time",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_HOUR,
            schedule=EVERY_HOUR,
            cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            run=JUST_BEFORE_THE_HOUR,
            active=1,
            requeue=seconds(hours=1),
        ),
        id="with @every schedule, never ran, is time",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_HOUR + timedelta(seconds=SHORT_DEAD + 1),
            schedule=EVERY_HOUR,
            deadline=SHORT_DEAD,
            cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD - 1),
            events=(MISSED,),
        ),
        id="with @every schedule, never ran, is time, past deadline",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_HOUR + timedelta(seconds=SHORT_DEAD - 1),
            schedule=EVERY_HOUR,
            deadline=LONG_DEAD,
            cronjob_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            run=JUST_BEFORE_THE_HOUR,
            active=1,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD + 1),
        ),
        id="with @every schedule, never ran, is time, not past deadline",
    ),
    pytest.param(
        Row(
            TOP,
            schedule=EVERY_HOUR,
            job_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            requeue=seconds(minutes=59),
            events=(SAW,),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, not time",
    ),
    pytest.param(
        Row(
            TOP + timedelta(hours=1),
            schedule=EVERY_HOUR,
            job_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            run=JUST_BEFORE_THE_NEXT_HOUR,
            active=1,
            requeue=seconds(minutes=59),
            events=(SAW,),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, is time",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_NEXT_HOUR + timedelta(seconds=SHORT_DEAD + 1),
            schedule=EVERY_HOUR,
            deadline=SHORT_DEAD,
            job_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD - 1),
            events=(SAW, MISSED),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, is time, past deadline",
    ),
    # Commented out upstream ("This test will fail"): its @every re-anchors at
    # now - startingDeadlineSeconds and never finds 10:59. Here it runs.
    pytest.param(
        Row(
            JUST_BEFORE_THE_NEXT_HOUR + timedelta(seconds=SHORT_DEAD - 1),
            schedule=EVERY_HOUR,
            deadline=SHORT_DEAD,
            job_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            run=JUST_BEFORE_THE_NEXT_HOUR,
            active=1,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD + 1),
            events=(SAW,),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, is time, not past deadline",
    ),
    pytest.param(
        Row(
            TOP,
            schedule=EVERY_HOUR,
            job_creation_time=JUST_BEFORE_THE_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            active=1,
            requeue=seconds(minutes=59),
            **ACTIVE,
        ),
        id="with @every schedule, still active, not time",
    ),
    pytest.param(
        Row(
            JUST_AFTER_THE_HOUR,
            schedule=EVERY_HOUR,
            job_creation_time=JUST_BEFORE_THE_PRIOR_HOUR,
            last_schedule_time=JUST_BEFORE_THE_PRIOR_HOUR,
            run=JUST_BEFORE_THE_HOUR,
            active=2,
            requeue=seconds(minutes=58),
            **ACTIVE,
        ),
        id="with @every schedule, still active, is time",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_NEXT_HOUR + timedelta(seconds=SHORT_DEAD + 1),
            schedule=EVERY_HOUR,
            deadline=SHORT_DEAD,
            job_creation_time=JUST_BEFORE_THE_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            active=1,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD - 1),
            events=(MISSED,),
            **ACTIVE,
        ),
        id="with @every schedule, still active, is time, past deadline",
    ),
    pytest.param(
        Row(
            JUST_BEFORE_THE_NEXT_HOUR + timedelta(seconds=SHORT_DEAD - 1),
            schedule=EVERY_HOUR,
            deadline=LONG_DEAD,
            job_creation_time=JUST_BEFORE_THE_HOUR,
            last_schedule_time=JUST_BEFORE_THE_HOUR,
            run=JUST_BEFORE_THE_NEXT_HOUR,
            active=2,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD + 1),
            **ACTIVE,
        ),
        id="with @every schedule, still active, is time, not past deadline",
    ),
    pytest.param(
        Row(
            WEEK,
            schedule=EVERY_HOUR,
            cronjob_creation_time=JUST_AFTER_THE_PRIOR_HOUR,
            last_schedule_time=JUST_AFTER_THE_HOUR,
            run=WEEK - timedelta(minutes=59),
            active=1,
            requeue=seconds(minutes=1),
            events=(SAW, TOO_MANY, MISSED),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, long overdue, no deadline",
    ),
    pytest.param(
        Row(
            WEEK + timedelta(minutes=1, seconds=SHORT_DEAD + 1),
            schedule=EVERY_HOUR,
            deadline=SHORT_DEAD,
            cronjob_creation_time=JUST_AFTER_THE_PRIOR_HOUR,
            last_schedule_time=JUST_AFTER_THE_HOUR,
            requeue=seconds(hours=1, seconds=-SHORT_DEAD - 1),
            events=(SAW, MISSED),
            **PRIOR,
        ),
        id="with @every schedule, prev ran but done, long overdue, past deadline",
    ),
    # The history limit runs first (upstream's sync: cleanupFinishedJobs, then
    # syncCronJob): the job it deletes leaves the active list without SawCompletedJob.
    pytest.param(
        Row(JUST_BEFORE_THE_HOUR, history=0, delete=1, requeue=seconds(minutes=1), **PRIOR),
        id="set lastsuccessfultime if successfulJobHistoryLimit is zero",
    ),
    pytest.param(
        Row(JUST_BEFORE_THE_HOUR, history=10, requeue=seconds(minutes=1), events=(SAW,), **PRIOR),
        id="set lastsuccessfultime if successfulJobHistoryLimit is ten",
    ),
    pytest.param(
        Row(JUST_BEFORE_THE_HOUR, requeue=seconds(minutes=1), events=(SAW,), **PRIOR),
        id="set lastsuccessfultime if successfulJobHistoryLimit is nil",
    ),
]


@pytest.mark.parametrize("row", SYNC_ROWS)
def test_controller_v2_sync_cron_job(row: Row) -> None:
    inp = upstream_input(row)
    plan = planned(inp)
    check(plan, row)
    if row.ran_previously and not row.still_active:
        completion = row.job_creation_time + timedelta(seconds=10)
        assert plan.status.last_successful_time == completion


def test_unparseable_schedule_message() -> None:
    plan = planned(upstream_input(Row(JUST_BEFORE_THE_HOUR, schedule=ERROR_SCHEDULE)))
    assert plan.events[0].type == "Warning"
    assert plan.events[0].message == (
        'unparseable schedule: "obvious error schedule" : '
        "expected exactly 5 fields, found 3: [obvious error schedule]"
    )
    assert plan.status.next_schedule_time is None


def test_unknown_time_zone_message() -> None:
    plan = planned(upstream_input(Row(JUST_BEFORE_THE_HOUR, time_zone="bad timezone")))
    assert (
        plan.events[0].message == 'invalid timeZone: "bad timezone": unknown time zone bad timezone'
    )


def test_job_already_active_message() -> None:
    row = Row(JUST_AFTER_THE_HOUR, policy=F, **ACTIVE)
    (event,) = planned(upstream_input(row)).events
    assert (event.type, event.message) == (
        "Normal",
        "Not starting job because prior execution is running and concurrency policy is Forbid",
    )


def test_too_many_missed_times_message() -> None:
    row = Row(WEEK, **PRIOR)
    too_many = planned(upstream_input(row)).events[1]
    assert (too_many.type, too_many.message) == (
        "Warning",
        "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check "
        "clock skew",
    )


def test_the_annotation_of_a_job_made_in_a_zone() -> None:
    """The job of 10:00 UTC made by a New York cron job says 06:00 EDT."""
    plan = planned(upstream_input(Row(JUST_AFTER_THE_HOUR, time_zone=NEW_YORK)))
    (create,) = plan.create
    assert create.scheduled_time is not None
    assert scheduled_timestamp_annotation(create.scheduled_time, NEW_YORK) == (
        "2016-05-19T06:00:00-04:00"
    )


# --- TestControllerV2CleanupFinishedJobs, ...JobAlreadyExistsButNotInActiveStatus --------


def child(
    name: str,
    uid: str | None = None,
    finished: str | None = None,
    start: datetime | None = None,
    finish: datetime | None = None,
    deleting: bool = False,
) -> ChildJob:
    return ChildJob(name, uid or name, finished, finish, start, None, deleting)


class SpecFields(TypedDict, total=False):
    time_zone: str | None
    starting_deadline_seconds: int | None
    concurrency_policy: str
    suspend: bool
    successful_jobs_history_limit: int | None
    failed_jobs_history_limit: int | None
    catch_up: str
    max_active: int | None


def cron(
    now: datetime,
    schedule: str = ON_THE_HOUR,
    status: CronStatus | None = None,
    children: tuple[ChildJob, ...] = (),
    created: datetime = JUST_BEFORE_THE_PRIOR_HOUR,
    leading_since: datetime = LONG_AGO,
    trigger: str | None = None,
    deleting: bool = False,
    **spec: Unpack[SpecFields],
) -> CronInput:
    return CronInput(
        name=NAME,
        creation_timestamp=created,
        deleting=deleting,
        spec=CronSpec(schedule=schedule, **spec),
        status=status or CronStatus(),
        children=children,
        now=now,
        leading_since=leading_since,
        trigger=trigger,
    )


def respec(inp: CronInput, changes: dict[str, Any]) -> CronInput:
    return replace(inp, spec=replace(inp.spec, **changes))


@pytest.mark.parametrize(
    ("now", "limit", "jobs", "deleted"),
    [
        pytest.param(
            JUST_AFTER_THE_HOUR,
            1,
            (
                child("finished-job-started-hour-ago", start=JUST_BEFORE_THE_PRIOR_HOUR),
                child("finished-job-started-minute-ago", start=JUST_BEFORE_THE_HOUR),
            ),
            ("finished-job-started-hour-ago",),
            id="jobs are still deleted when a cronjob can't create jobs due to jobs quota "
            "being reached (avoiding a deadlock)",
        ),
        pytest.param(
            JUST_BEFORE_THE_HOUR,
            2,
            (child("finished-job-started-hour-ago", start=JUST_BEFORE_THE_PRIOR_HOUR),),
            (),
            id="jobs are not deleted if history limit not reached",
        ),
    ],
)
def test_controller_v2_cleanup_finished_jobs(
    now: datetime, limit: int, jobs: tuple[ChildJob, ...], deleted: tuple[str, ...]
) -> None:
    jobs = tuple(replace(j, finished="Complete") for j in jobs)
    status = CronStatus(last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR)
    inp = cron(now, status=status, children=jobs, successful_jobs_history_limit=limit)
    assert planned(inp).delete == deleted


def test_controller_v2_job_already_exists_but_not_in_active_status() -> None:
    """The job of the due time exists (made by a sync whose status write was lost): it is
    adopted, not made again."""
    due = JUST_BEFORE_THE_PRIOR_HOUR + timedelta(hours=1)
    job = child(get_job_name(NAME, due), uid="1234", start=due)
    status = CronStatus(last_schedule_time=JUST_BEFORE_THE_PRIOR_HOUR)
    inp = cron(
        JUST_BEFORE_THE_HOUR,
        EVERY_HOUR,
        status,
        (job,),
        concurrency_policy=F,
        created=JUST_BEFORE_THE_HOUR,
    )
    plan = planned(inp)
    assert plan.create == ()
    assert plan.status.active == (ActiveRef(job.name, "1234"),)
    assert plan.status.last_schedule_time == due


# --- utils_test.go -------------------------------------------------------------------------


def earliest_of(
    created: datetime,
    last: datetime | None,
    now: datetime,
    deadline: int | None = None,
    include_sds: bool = False,
) -> datetime:
    """mostRecentScheduleTime's earliestTime."""
    earliest = last or created
    if include_sds and deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=deadline))
    return earliest


@pytest.mark.parametrize(
    ("schedule", "created", "last", "now", "deadline", "include_sds", "recent", "missed"),
    [
        pytest.param(
            "0 * * * *", TOP, None, after_top(seconds=30), None, False, None, NONE_MISSED,
            id="now before next schedule",
        ),
        pytest.param(
            "0 * * * *", TOP, None, after_top(minutes=61), None, False,
            after_top(minutes=60), NONE_MISSED,
            id="now just after next schedule",
        ),
        pytest.param(
            "0 * * * *", after_top(seconds=10), None, after_top(minutes=301), None, False,
            after_top(minutes=300), FEW_MISSED,
            id="missed 5 schedules",
        ),
        pytest.param(
            "30 6-16/4 * * 1-5", TOP, after_top(minutes=30), after_top(hours=24, minutes=31),
            None, False, after_top(hours=24, minutes=30), FEW_MISSED,
            id="complex schedule",
        ),
        # Upstream's estimate jumps past Friday's last time: none found (kept as is).
        pytest.param(
            "30 10,11,12 * * 1-5", TOP, after_top(minutes=30), after_top(hours=30, minutes=30),
            None, False, None, FEW_MISSED,
            id="another complex schedule",
        ),
        pytest.param(
            "30 6-16/4 * * 1-5", TOP, after_top(minutes=30), after_top(hours=96, minutes=31),
            None, False, after_top(hours=96, minutes=30), FEW_MISSED,
            id="complex schedule with longer diff between executions",
        ),
        pytest.param(
            "30 6-16/4 * * 1-5", TOP, None, after_top(hours=24, minutes=31), None, False,
            after_top(hours=24, minutes=30), FEW_MISSED,
            id="complex schedule with shorter diff between executions",
        ),
        pytest.param(
            "@every 1h", after_top(minutes=-59), after_top(minutes=1), after_top(days=7), 10,
            False, after_top(days=6, hours=23, minutes=1), MANY_MISSED,
            id="@every schedule",
        ),
        pytest.param(
            "0 * * * *", TOP, TOP, after_top(seconds=30), None, False, None, NONE_MISSED,
            id="earliestTime being CreationTimestamp and LastScheduleTime",
        ),
        pytest.param(
            "*/5 * * * *", TOP, after_top(minutes=30), after_top(minutes=31), None, False, None,
            NONE_MISSED,
            id="earliestTime being LastScheduleTime",
        ),
        pytest.param(
            "*/5 * * * *", TOP, after_top(minutes=30), after_top(minutes=31), 60, False, None,
            NONE_MISSED,
            id="earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
        ),
        pytest.param(
            "*/5 * * * *", TOP, after_top(minutes=30), after_top(minutes=32), 60, True, None,
            NONE_MISSED,
            id="earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
        ),
    ],
)  # fmt: skip
def test_most_recent_schedule_time(
    schedule: str,
    created: datetime,
    last: datetime | None,
    now: datetime,
    deadline: int | None,
    include_sds: bool,
    recent: datetime | None,
    missed: str,
) -> None:
    earliest = earliest_of(created, last, now, deadline, include_sds)
    got = most_recent_schedule_time(parse_schedule(schedule), UTC, earliest, now)
    assert got == (recent, missed)


def test_most_recent_schedule_time_rogue_cronjob() -> None:
    """A schedule that parses but never comes (31 February): an error."""
    with pytest.raises(InvalidSchedule, match="less than 1 second"):
        most_recent_schedule_time(
            parse_schedule("59 23 31 2 *"), UTC, after_top(seconds=10), after_top(hours=1)
        )


T1 = TOP_OF_THE_HOUR
T2 = TOP_OF_THE_HOUR + timedelta(hours=1)


@pytest.mark.parametrize(
    ("created", "last", "now", "deadline", "expected"),
    [
        pytest.param(
            T1 - timedelta(minutes=10), None, T1 - timedelta(minutes=7), None, None,
            id="Case 1: no known start times, and none needed yet",
        ),
        pytest.param(
            T1 - timedelta(minutes=10), None, T1 + timedelta(seconds=2), None, T1,
            id="Case 2: no known start times, and one needed",
        ),
        pytest.param(
            T1 - timedelta(minutes=10), T1, T1 + timedelta(minutes=2), None, None,
            id="Case 3: known LastScheduleTime, no start needed",
        ),
        pytest.param(
            T1 - timedelta(minutes=10), T1, T2 + timedelta(minutes=5), None, T2,
            id="Case 4: known LastScheduleTime, a start needed",
        ),
        pytest.param(
            T1 - timedelta(hours=2), T1 - timedelta(hours=1), T2 + timedelta(minutes=5), None, T2,
            id="Case 5: known LastScheduleTime, two starts needed",
        ),
        pytest.param(
            T1 - timedelta(hours=2), T1 - timedelta(hours=1), T2 + timedelta(days=10), None,
            T2 + timedelta(days=10),
            id="Case 6: now is way way ahead of last start time, and there is no deadline",
        ),
        pytest.param(
            T1 - timedelta(hours=2), T1 - timedelta(hours=1), T2 + timedelta(days=10),
            2 * 60 * 60, T2 + timedelta(days=10),
            id="Case 7: now is way way ahead of last start time, but there is a short deadline",
        ),
    ],
)  # fmt: skip
def test_next_schedule_time(
    created: datetime,
    last: datetime | None,
    now: datetime,
    deadline: int | None,
    expected: datetime | None,
) -> None:
    """TestNextScheduleTime: nextScheduleTime is catchUp Latest's due time."""
    base = last or created
    due = due_time(parse_schedule(ON_THE_HOUR), UTC, "Latest", base, now, deadline, LONG_AGO)
    assert due.run == expected


def test_next_schedule_time_case_8_the_error_gets_populated_up() -> None:
    with pytest.raises(InvalidSchedule):
        due_time(
            parse_schedule("59 23 31 2 *"),
            UTC,
            "Latest",
            T1 + timedelta(seconds=10),
            T2,
            None,
            LONG_AGO,
        )


@pytest.mark.parametrize(
    ("schedule", "last", "now", "expected"),
    [
        pytest.param(
            "30 6-16/4 * * 1-5", after_top(minutes=30), after_top(hours=24, minutes=31),
            seconds(hours=3, minutes=59),
            id="complex schedule skipping weekend",
        ),
        pytest.param(
            "30 10,11,12 * * 1-5", after_top(minutes=30), after_top(hours=30, minutes=30),
            seconds(hours=66),
            id="another complex schedule skipping weekend",
        ),
        pytest.param(
            "0 12 * * 4", after_top(hours=2), after_top(days=19, hours=1, minutes=30),
            seconds(hours=48, minutes=30),
            id="once a week cronjob, missed two runs",
        ),
        pytest.param(
            "0 12 * * 5", None, after_top(hours=6), seconds(hours=20),
            id="no previous run of a cronjob",
        ),
    ],
)  # fmt: skip
def test_next_schedule_time_duration(
    schedule: str, last: datetime | None, now: datetime, expected: float
) -> None:
    earliest = last or TOP_OF_THE_HOUR
    got = next_schedule_time_duration(parse_schedule(schedule), UTC, earliest, now)
    assert got == pytest.approx(expected)


NOW_2018 = datetime(2018, 1, 1, 2, 3, 4, tzinfo=UTC)
LATER_2019 = datetime(2019, 1, 1, 2, 3, 4, tzinfo=UTC)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param((("b", None), ("a", None)), ("a", "b"), id="both have nil start times"),
        pytest.param(
            (("a", None), ("b", NOW_2018)), ("b", "a"), id="only the first has a nil start time"
        ),
        pytest.param(
            (("a", NOW_2018), ("b", None)), ("a", "b"), id="only the second has a nil start time"
        ),
        pytest.param(
            (("b", NOW_2018), ("a", NOW_2018)),
            ("a", "b"),
            id="both have non-nil, equal start time",
        ),
        pytest.param(
            (("a", LATER_2019), ("b", NOW_2018)),
            ("b", "a"),
            id="both have non-nil, different start time",
        ),
    ],
)
def test_by_job_start_time(
    jobs: tuple[tuple[str, datetime | None], ...], expected: tuple[str, ...]
) -> None:
    """TestByJobStartTime, seen in the order a history limit of 0 deletes them in."""
    children = tuple(child(n, finished="Complete", start=s) for n, s in jobs)
    inp = cron(JUST_BEFORE_THE_HOUR, children=children, successful_jobs_history_limit=0)
    assert planned(inp).delete == expected


@pytest.mark.parametrize(
    ("time_zone", "expected"),
    [
        pytest.param("UTC", "2016-05-19T10:00:00Z", id="UTC timezone"),
        pytest.param(None, "2016-05-19T10:00:00Z", id="nil timezone"),
        pytest.param("Europe/Rome", "2016-05-19T12:00:00+02:00", id="correct timezone"),
        pytest.param("Asia/Kolkata", "2016-05-19T15:30:00+05:30", id="half-hour offset"),
        pytest.param("Europe/London", "2016-01-19T10:00:00Z", id="zero offset in a zone"),
    ],
)
def test_get_job_from_template_2_scheduled_timestamp(time_zone: str | None, expected: str) -> None:
    """TestGetJobFromTemplate2's annotation: RFC 3339 in the cron job's zone, ``Z`` for a
    zero offset (Go's Z07:00), whole seconds."""
    scheduled = TOP_OF_THE_HOUR + timedelta(microseconds=250)
    if time_zone == "Europe/London":
        scheduled = scheduled.replace(month=1)  # GMT: offset zero
    assert scheduled_timestamp_annotation(scheduled, time_zone) == expected


@pytest.mark.parametrize(
    ("scheduled", "expected"),
    [
        (TOP_OF_THE_HOUR, f"{NAME}-24394200"),
        (TOP_OF_THE_HOUR + timedelta(seconds=59, microseconds=999999), f"{NAME}-24394200"),
        (datetime(2016, 5, 19, 6, 0, tzinfo=datetime.now().astimezone().tzinfo), None),
    ],
    ids=["top of the hour", "same minute", "any zone"],
)
def test_get_job_name(scheduled: datetime, expected: str | None) -> None:
    """getJobName: the name and the scheduled time's Unix minutes, whatever the zone."""
    minutes = int(scheduled.timestamp()) // 60
    assert get_time_hash_in_minutes(scheduled) == minutes
    assert get_job_name(NAME, scheduled) == (expected or f"{NAME}-{minutes}")


# --- catchUp -----------------------------------------------------------------------------

# An hourly job last run at 00:00; the operator was down from 00:30 to 05:30, so 01:00 to
# 05:00 passed unrun (5 times). It leads again from 05:30; the sync runs at 05:30:05.
DAY = at("2016-05-20T00:00:00")
OUTAGE_END = DAY + timedelta(hours=5, minutes=30)
AFTER_OUTAGE = OUTAGE_END + timedelta(seconds=5)


def hour(h: int) -> datetime:
    return DAY + timedelta(hours=h)


def outage(
    catch_up: str,
    deadline: int | None = None,
    policy: str = A,
    active: tuple[ChildJob, ...] = (),
    max_active: int | None = None,
    now: datetime = AFTER_OUTAGE,
    leading_since: datetime = OUTAGE_END,
    last: datetime = DAY,
) -> CronPlan:
    status = CronStatus(
        active=tuple(ActiveRef(j.name, j.uid) for j in active), last_schedule_time=last
    )
    inp = cron(
        now,
        "0 * * * *",
        status,
        active,
        leading_since=leading_since,
        catch_up=catch_up,
        starting_deadline_seconds=deadline,
        concurrency_policy=policy,
        max_active=max_active,
    )
    return planned(inp)


TO_06 = (hour(6) - AFTER_OUTAGE).total_seconds() + 0.1
RUNNING = (child("running", start=hour(0)),)


@pytest.mark.parametrize(
    ("plan", "run", "missed", "events", "requeue"),
    [
        pytest.param(outage("Latest"), hour(5), hour(4), (MISSED,), TO_06, id="Latest"),
        pytest.param(
            outage("All"), hour(1), None, (), CATCH_UP_PACE_SECONDS,
            id="All, no cap: the oldest, the next at the catch-up's pace",
        ),
        pytest.param(
            outage("Skip"), None, hour(5), (MISSED,), TO_06, id="Skip: all before leading"
        ),
        pytest.param(
            outage("Skip", leading_since=hour(5)), hour(5), hour(4), (MISSED,), TO_06,
            id="Skip: a time at leading_since runs",
        ),
        pytest.param(
            outage("Latest", deadline=7200), hour(5), hour(4), (MISSED,), TO_06,
            id="Latest with startingDeadlineSeconds",
        ),
        pytest.param(
            outage("All", deadline=7200), hour(4), hour(3), (MISSED,), CATCH_UP_PACE_SECONDS,
            id="All with startingDeadlineSeconds: the too-late ones are missed",
        ),
        pytest.param(
            outage("All", deadline=60), None, hour(5), (MISSED,), TO_06,
            id="All with a deadline shorter than the outage",
        ),
        pytest.param(
            outage("All", policy=F), hour(1), None, (), TO_06,
            id="All, Forbid: the next waits for this one",
        ),
        pytest.param(
            outage("All", policy=F, active=RUNNING), None, None, ("JobAlreadyActive",), TO_06,
            id="All, Forbid, one running: the oldest waits",
        ),
        pytest.param(
            outage("Latest", policy=F, active=RUNNING), None, hour(4),
            (MISSED, "JobAlreadyActive"), TO_06,
            id="Latest, Forbid, one running: the latest waits, the others are missed",
        ),
        pytest.param(
            outage("All", max_active=2, active=RUNNING), hour(1), None, (), TO_06,
            id="All, maxActive reached by this one",
        ),
        pytest.param(
            outage("All", policy=R, active=RUNNING), hour(1), None, (), 0.1,
            id="All, Replace: each replaces the last",
        ),
        pytest.param(
            outage("Latest", last=hour(4), leading_since=LONG_AGO),
            hour(5), None, (), TO_06,
            id="no outage: nothing missed",
        ),
    ],
)  # fmt: skip
def test_catch_up_after_an_outage(
    plan: CronPlan,
    run: datetime | None,
    missed: datetime | None,
    events: tuple[str, ...],
    requeue: float,
) -> None:
    assert [c.scheduled_time for c in plan.create] == ([] if run is None else [run])
    assert plan.status.last_missed_time == missed
    assert reasons(plan) == list(events)
    assert plan.requeue_after == pytest.approx(requeue)
    assert plan.status.next_schedule_time == hour(6)


def test_missed_schedule_event_names_how_many_and_the_latest() -> None:
    (event,) = outage("Latest").events
    assert (event.type, event.message) == (
        "Warning",
        "Missed 4 scheduled times to start a job, the latest: Fri, 20 May 2016 04:00:00 +0000",
    )
    (event,) = outage("Skip").events
    assert event.message == "Missed 5 scheduled times to start a job, the latest: " + (
        "Fri, 20 May 2016 05:00:00 +0000"
    )
    (event,) = outage("All", deadline=3 * 3600).events  # 01:00 and 02:00 too late
    assert event.message == "Missed 2 scheduled times to start a job, the latest: " + (
        "Fri, 20 May 2016 02:00:00 +0000"
    )


def test_all_runs_the_backlog_one_per_sync_oldest_first() -> None:
    """Each sync starts the next missed time, until the latest; then the schedule's pace."""
    status = CronStatus(last_schedule_time=hour(0))
    started = []
    for _ in range(6):
        inp = cron(AFTER_OUTAGE, "0 * * * *", status, catch_up="All")
        plan = planned(inp)
        started += [c.scheduled_time for c in plan.create]
        status = plan.status
    assert started == [hour(h) for h in range(1, 6)]
    assert plan.requeue_after == pytest.approx(TO_06)
    assert status.last_missed_time is None


def test_all_caps_the_backlog_at_100() -> None:
    """Three hours of every minute missed: the latest 100 run, the 80 before are missed."""
    now = at("2016-05-20T03:00:30")
    status = CronStatus(last_schedule_time=at("2016-05-20T00:00:00"))
    plan = planned(cron(now, "* * * * *", status, catch_up="All"))
    first = at("2016-05-20T01:21:00")
    assert plan.create == (JobToCreate(get_job_name(NAME, first), first),)
    assert plan.status.last_missed_time == first - timedelta(minutes=1)
    assert reasons(plan) == [TOO_MANY, MISSED]
    assert "catchUp All runs only the latest 100" in plan.events[0].message
    assert plan.events[1].message.startswith("Missed 80 scheduled times to start a job")
    assert plan.requeue_after == pytest.approx(CATCH_UP_PACE_SECONDS)


def test_all_under_a_cap_starts_the_backlog_at_once_up_to_it() -> None:
    """maxActiveJobs bounds the burst, so the next missed run is not held back."""
    status = CronStatus(last_schedule_time=hour(0))
    plan = planned(cron(AFTER_OUTAGE, "0 * * * *", status, catch_up="All", max_active=3))
    assert [c.scheduled_time for c in plan.create] == [hour(1)]
    assert plan.requeue_after == pytest.approx(0.1)


def test_latest_reports_more_than_100_missed() -> None:
    now = at("2016-05-20T03:00:30")
    status = CronStatus(last_schedule_time=at("2016-05-20T00:00:00"))
    plan = planned(cron(now, "* * * * *", status))
    assert plan.events[-1].message.startswith("Missed more than 100 scheduled times")
    assert plan.status.last_missed_time == at("2016-05-20T02:59:00")


def test_a_miss_is_reported_once() -> None:
    """The next sync starts after lastMissedTime: no second MissSchedule."""
    first = outage("Skip")
    inp = cron(
        AFTER_OUTAGE + timedelta(seconds=30),
        "0 * * * *",
        first.status,
        leading_since=OUTAGE_END,
        catch_up="Skip",
    )
    plan = planned(inp)
    assert (plan.create, plan.events, plan.status.last_missed_time) == ((), (), hour(5))
    later = planned(replace(inp, now=hour(6) + timedelta(seconds=1)))
    assert [c.scheduled_time for c in later.create] == [hour(6)]
    assert later.events == ()


def test_a_forbidden_time_runs_late_within_the_deadline() -> None:
    """Forbid waits: when the running job is gone, the same due time still runs if
    startingDeadlineSeconds allows (upstream's semantics, kept by maxActive too)."""
    now = hour(1) + timedelta(minutes=20)
    status = CronStatus(last_schedule_time=hour(0))
    waiting = planned(
        cron(
            now,
            "0 * * * *",
            replace(status, active=(ActiveRef("running", "running"),)),
            RUNNING,
            concurrency_policy=A,
            max_active=1,
            starting_deadline_seconds=3600,
        )
    )
    assert waiting.create == ()
    assert waiting.status.last_missed_time is None
    (event,) = waiting.events
    assert (event.type, event.reason, event.message) == (
        "Normal",
        "TooManyActive",
        "Not starting job because 1 jobs are active and maxActiveJobs is 1",
    )
    done = (replace(RUNNING[0], finished="Complete", finish_time=now),)
    ran = planned(
        cron(
            now + timedelta(minutes=1),
            "0 * * * *",
            waiting.status,
            done,
            max_active=1,
            starting_deadline_seconds=3600,
        )
    )
    assert [c.scheduled_time for c in ran.create] == [hour(1)]
    assert reasons(ran) == [SAW]


# --- maxActive -------------------------------------------------------------------------------


def running(n: int) -> tuple[ChildJob, ...]:
    return tuple(child(f"job-{i}", start=hour(0)) for i in range(n))


@pytest.mark.parametrize(
    ("policy", "max_active", "active", "creates", "deletes", "events"),
    [
        pytest.param(A, 2, 2, 0, 0, ("TooManyActive",), id="Allow at maxActive waits"),
        pytest.param(A, 2, 1, 1, 0, (), id="Allow below maxActive starts"),
        pytest.param(A, None, 5, 1, 0, (), id="Allow without maxActive starts"),
        pytest.param(F, 5, 1, 0, 0, ("JobAlreadyActive",), id="Forbid ignores maxActive"),
        pytest.param(R, 1, 1, 1, 1, (), id="Replace ignores maxActive"),
    ],
)
def test_max_active(
    policy: str,
    max_active: int | None,
    active: int,
    creates: int,
    deletes: int,
    events: tuple[str, ...],
) -> None:
    jobs = running(active)
    status = CronStatus(
        active=tuple(ActiveRef(j.name, j.uid) for j in jobs), last_schedule_time=hour(0)
    )
    inp = cron(
        hour(1) + timedelta(seconds=1),
        "0 * * * *",
        status,
        jobs,
        concurrency_policy=policy,
        max_active=max_active,
    )
    plan = planned(inp)
    assert (len(plan.create), len(plan.delete), reasons(plan)) == (creates, deletes, list(events))
    assert plan.requeue_after == pytest.approx(seconds(minutes=59, seconds=59))


# --- Triggers -------------------------------------------------------------------------------

TRIGGER = "2016-05-19T10:30:00Z"
TRIGGERED = trigger_job_name(NAME, TRIGGER)
#: The job of TRIGGER set after "an older one".
TRIGGERED_AFTER = trigger_job_name(NAME, TRIGGER, "an older one")


def test_trigger_job_name() -> None:
    """``-m`` and 9 hex digits of the SHA-256 of the trigger and the one before it: the
    same change, the same job; another change, another job, the same value again too."""
    digest = hashlib.sha256(TRIGGER.encode()).hexdigest()
    assert f"{NAME}-m{digest[:9]}" == TRIGGERED
    assert trigger_job_name(NAME, "again") != TRIGGERED
    names = [trigger_job_name(NAME, b, a) for a, b in ((None, "A"), ("A", "B"), ("B", "A"))]
    assert len(set(names)) == 3, "A, B, then A again: three jobs"


def test_each_change_of_the_trigger_starts_a_job_even_back_to_an_earlier_value() -> None:
    status = CronStatus(last_schedule_time=TOP)
    made = []
    for value in ("A", "B", "A"):
        plan = planned(cron(after_top(minutes=30), status=status, trigger=value))
        made += [c.name for c in plan.create]
        status = replace(plan.status, active=())
    assert len(made) == len(set(made)) == 3


@pytest.mark.parametrize(
    ("spec", "active"),
    [
        pytest.param({}, 0, id="new trigger"),
        pytest.param({"suspend": True}, 0, id="suspended"),
        pytest.param({"concurrency_policy": F}, 1, id="Forbid with a job running"),
        pytest.param({"max_active": 1}, 1, id="maxActive reached"),
        pytest.param({"schedule": ERROR_SCHEDULE}, 0, id="unparseable schedule"),
        pytest.param({"time_zone": "bad timezone"}, 0, id="unknown time zone"),
    ],
)
def test_a_new_trigger_creates_one_job_now(spec: dict[str, Any], active: int) -> None:
    jobs = running(active)
    status = CronStatus(
        active=tuple(ActiveRef(j.name, j.uid) for j in jobs),
        last_schedule_time=TOP_OF_THE_HOUR,
        last_trigger="an older one",
    )
    inp = respec(cron(after_top(minutes=30), status=status, children=jobs, trigger=TRIGGER), spec)
    plan = planned(inp)
    assert plan.create == (JobToCreate(TRIGGERED_AFTER, None),)
    assert plan.status.active[-1] == ActiveRef(TRIGGERED_AFTER, "")
    assert len(plan.status.active) == active + 1
    assert plan.status.last_trigger == TRIGGER
    assert plan.status.last_schedule_time == TOP_OF_THE_HOUR


@pytest.mark.parametrize(
    ("trigger", "children", "active", "last_trigger"),
    [
        pytest.param(TRIGGER, (), (), TRIGGER, id="repeated: acted on already"),
        pytest.param(None, (), (), TRIGGER, id="annotation removed"),
        pytest.param(
            TRIGGER,
            (child(TRIGGERED, uid="t-1", start=TOP),),
            (ActiveRef(TRIGGERED, "t-1"),),
            None,
            id="crash after the create: adopted",
        ),
        pytest.param(
            TRIGGER,
            (child(TRIGGERED, uid="t-1", finished="Complete", start=TOP, finish=TOP),),
            (),
            None,
            id="crash after the create, finished since: not made again",
        ),
    ],
)
def test_a_trigger_makes_at_most_one_job(
    trigger: str | None,
    children: tuple[ChildJob, ...],
    active: tuple[ActiveRef, ...],
    last_trigger: str | None,
) -> None:
    status = CronStatus(last_schedule_time=TOP, last_trigger=last_trigger)
    inp = cron(after_top(minutes=30), status=status, children=children, trigger=trigger)
    plan = planned(inp)
    assert plan.create == ()
    assert plan.status.active == active
    assert plan.status.last_trigger == TRIGGER


def test_a_trigger_and_a_due_time_in_one_sync_make_two_jobs() -> None:
    status = CronStatus(last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR)
    plan = planned(cron(JUST_AFTER_THE_HOUR, status=status, trigger=TRIGGER))
    assert plan.create == (JobToCreate(get_job_name(NAME, TOP), TOP), JobToCreate(TRIGGERED, None))
    assert [ref.name for ref in plan.status.active] == [get_job_name(NAME, TOP), TRIGGERED]


def test_no_trigger_while_the_cron_job_is_deleted() -> None:
    plan = planned(cron(JUST_AFTER_THE_HOUR, trigger=TRIGGER, deleting=True))
    assert (plan.create, plan.status.last_trigger, plan.requeue_after) == ((), None, None)


def test_record_created_fills_in_the_uid() -> None:
    plan = planned(cron(JUST_AFTER_THE_HOUR, trigger=TRIGGER))
    status = record_created(plan.status, TRIGGERED, "uid-9")
    assert ActiveRef(TRIGGERED, "uid-9") in status.active
    assert ActiveRef(TRIGGERED, "") not in status.active


# --- Exactly once: the crash after a create --------------------------------------------------


@pytest.mark.parametrize(
    ("finished", "active"),
    [
        pytest.param(None, 1, id="unfinished: adopted into active"),
        pytest.param("Complete", 0, id="finished already: only lastScheduleTime"),
        pytest.param("Failed", 0, id="failed already: only lastScheduleTime"),
    ],
)
def test_the_job_of_the_due_time_exists_already(finished: str | None, active: int) -> None:
    made = child(get_job_name(NAME, TOP), uid="made", finished=finished, start=TOP, finish=TOP)
    status = CronStatus(last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR)
    plan = planned(cron(JUST_AFTER_THE_HOUR, status=status, children=(made,)))
    assert plan.create == ()
    assert plan.status.last_schedule_time == TOP
    assert plan.status.active == ((ActiveRef(made.name, "made"),) if active else ())
    assert plan.requeue_after == pytest.approx(seconds(minutes=59))
    expected = ["UnexpectedJob"] if finished is None else []
    assert reasons(plan) == expected


def test_the_job_of_the_due_time_in_active_already_is_not_made_again() -> None:
    """inActiveListByName: a status written with the job but not lastScheduleTime."""
    made = child(get_job_name(NAME, TOP), uid="made", start=TOP)
    status = CronStatus(
        active=(ActiveRef(made.name, "made"),), last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR
    )
    plan = planned(cron(JUST_AFTER_THE_HOUR, status=status, children=(made,)))
    assert (plan.create, plan.events, plan.status.active) == ((), (), status.active)


# --- The active list ---------------------------------------------------------------------------


def test_a_stranger_or_a_missing_job_asks_for_live_reads_first() -> None:
    """syncCronJob reads the cron job live before an UnexpectedJob and each missing job
    before a MissingJob: the first plan asks for those reads and does nothing else."""
    status = CronStatus(active=(ActiveRef("gone", "gone"),), last_schedule_time=TOP)
    inp = cron(JUST_AFTER_THE_HOUR, status=status, children=(child("stranger"),))
    first = plan_cron_sync(inp)
    assert first.verify == Verify(cron=True, jobs=("gone",))
    assert (first.create, first.delete, first.events) == ((), (), ())
    quiet = cron(JUST_AFTER_THE_HOUR, status=CronStatus(last_schedule_time=TOP))
    assert not plan_cron_sync(quiet).verify, "nothing to read: one plan"


def test_an_active_job_the_api_server_still_has_stays_active() -> None:
    """The job informer lags: the live GET found it, so it is neither missing nor
    forgotten (Forbid still waits for it)."""
    status = CronStatus(
        active=(ActiveRef("slow", "slow"),), last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR
    )
    inp = cron(JUST_AFTER_THE_HOUR, status=status, concurrency_policy=F)
    plan = plan_cron_sync(replace(inp, live_checked=True, found_live=frozenset({"slow"})))
    assert plan.status.active == status.active
    assert reasons(plan) == ["JobAlreadyActive"]
    gone = plan_cron_sync(replace(inp, live_checked=True))
    assert reasons(gone)[0] == "MissingJob"
    assert len(gone.create) == 1, "missing for real: the due time runs"


def test_reconcile_the_active_list() -> None:
    """MissingJob, SawCompletedJob (Failed too), UnexpectedJob; a stranger being deleted is
    no stranger; lastSuccessfulTime is the latest completion."""
    children = (
        child("done-early", finished="Complete", finish=TOP - timedelta(minutes=30)),
        child("failed", finished="Failed", finish=TOP),
        child("done-late", finished="Complete", finish=TOP - timedelta(minutes=10)),
        child("stranger"),
        child("going", deleting=True),
        child("running"),
    )
    status = CronStatus(
        active=tuple(
            ActiveRef(n, n) for n in ("done-early", "failed", "gone", "running", "done-late")
        ),
        last_schedule_time=TOP,
        last_successful_time=TOP - timedelta(hours=5),
    )
    inp = cron(
        after_top(minutes=1),
        status=status,
        children=children,
        successful_jobs_history_limit=None,
        failed_jobs_history_limit=None,
    )
    plan = planned(inp)
    assert [(e.type, e.reason, e.message) for e in plan.events] == [
        ("Normal", "SawCompletedJob", "Saw completed job: done-early, condition: Complete"),
        ("Normal", "SawCompletedJob", "Saw completed job: failed, condition: Failed"),
        ("Normal", "SawCompletedJob", "Saw completed job: done-late, condition: Complete"),
        (
            "Warning",
            "UnexpectedJob",
            "Saw a job that the controller did not create or forgot: stranger",
        ),
        ("Normal", "MissingJob", "Active job went missing: gone"),
    ]
    assert plan.status.active == (ActiveRef("running", "running"),)
    assert plan.status.last_successful_time == TOP - timedelta(minutes=10)


def test_a_cron_job_being_deleted_only_updates_its_status() -> None:
    done = child("done", finished="Complete", start=TOP, finish=TOP)
    old = child("old", finished="Complete", start=TOP - timedelta(hours=1), finish=TOP)
    status = CronStatus(
        active=(ActiveRef("done", "done"),), last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR
    )
    inp = cron(
        JUST_AFTER_THE_HOUR,
        status=status,
        children=(done, old),
        deleting=True,
        successful_jobs_history_limit=1,
    )
    plan = planned(inp)
    assert (plan.create, plan.delete, plan.requeue_after) == ((), ("old",), None)
    assert reasons(plan) == [SAW]
    assert plan.status.next_schedule_time is None


# --- History limits -------------------------------------------------------------------------


def finished_jobs(kind: str, n: int, prefix: str) -> tuple[ChildJob, ...]:
    return tuple(
        child(f"{prefix}-{i}", finished=kind, start=TOP - timedelta(hours=n - i), finish=TOP)
        for i in range(n)
    )


@pytest.mark.parametrize(
    ("successful", "failed", "deleted"),
    [
        pytest.param(3, 1, ("ok-0", "ok-1", "bad-0", "bad-1"), id="defaults: 3 and 1"),
        pytest.param(None, None, (), id="no limits: keep all"),
        pytest.param(0, None, ("ok-0", "ok-1", "ok-2", "ok-3", "ok-4"), id="0 successful"),
        pytest.param(None, 0, ("bad-0", "bad-1", "bad-2"), id="0 failed"),
        pytest.param(10, 10, (), id="under the limits"),
    ],
)
def test_history_limits(
    successful: int | None, failed: int | None, deleted: tuple[str, ...]
) -> None:
    children = finished_jobs("Complete", 5, "ok") + finished_jobs("Failed", 3, "bad")
    inp = cron(
        JUST_BEFORE_THE_HOUR,
        children=children,
        successful_jobs_history_limit=successful,
        failed_jobs_history_limit=failed,
    )
    assert planned(inp).delete == deleted


def test_a_job_already_being_deleted_counts_but_is_not_deleted_again() -> None:
    children = finished_jobs("Complete", 3, "ok")
    children = (replace(children[0], deleting=True), *children[1:])
    inp = cron(JUST_BEFORE_THE_HOUR, children=children, successful_jobs_history_limit=1)
    assert planned(inp).delete == ("ok-1",)


def test_replace_deletes_come_before_the_history_cleanup() -> None:
    old = finished_jobs("Complete", 2, "ok")
    run = child("run", start=JUST_AFTER_THE_PRIOR_HOUR)
    status = CronStatus(
        active=(ActiveRef("run", "run"),), last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR
    )
    inp = cron(
        JUST_AFTER_THE_HOUR,
        status=status,
        children=(*old, run),
        concurrency_policy=R,
        successful_jobs_history_limit=1,
    )
    plan = planned(inp)
    assert plan.delete == ("run", "ok-0")
    assert [ref.name for ref in plan.status.active] == [get_job_name(NAME, TOP)]


def test_replace_does_not_delete_a_job_being_deleted_again() -> None:
    going = child("going", start=JUST_AFTER_THE_PRIOR_HOUR, deleting=True)
    status = CronStatus(
        active=(ActiveRef("going", "going"),), last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR
    )
    inp = cron(JUST_AFTER_THE_HOUR, status=status, children=(going,), concurrency_policy=R)
    plan = planned(inp)
    assert (plan.delete, len(plan.create)) == ((), 1)
    assert [ref.name for ref in plan.status.active] == [get_job_name(NAME, TOP)]


# --- nextScheduleTime, time zones, invalid schedules ------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "time_zone", "now", "last", "expected"),
    [
        pytest.param(
            "0 9 * * *", NEW_YORK, JUST_AFTER_THE_HOUR, None, at("2016-05-19T13:00:00"),
            id="09:00 in New York is 13:00 UTC in May",
        ),
        pytest.param(
            "0 9 * * *", NEW_YORK, at("2016-01-19T10:01:00"), None, at("2016-01-19T14:00:00"),
            id="and 14:00 UTC in January",
        ),
        pytest.param(
            "30 2 * * *", NEW_YORK, at("2016-03-13T05:00:00"), at("2016-03-12T07:30:00"),
            at("2016-03-14T06:30:00"), id="02:30 does not exist on the spring-forward day",
        ),
        pytest.param(
            "0 1 * * *", NEW_YORK, at("2016-11-06T05:30:00"), at("2016-11-06T05:00:00"),
            at("2016-11-06T06:00:00"), id="01:00 comes twice on the fall-back day",
        ),
        pytest.param(
            EVERY_HOUR, None, JUST_AFTER_THE_HOUR, JUST_BEFORE_THE_HOUR + timedelta(seconds=7),
            JUST_BEFORE_THE_NEXT_HOUR + timedelta(seconds=7), id="@every counts from the last run",
        ),
    ],
)  # fmt: skip
def test_next_schedule_time_in_the_status(
    schedule: str, time_zone: str | None, now: datetime, last: datetime | None, expected: datetime
) -> None:
    status = CronStatus(last_schedule_time=last or now - timedelta(seconds=1))
    plan = planned(cron(now, schedule, status, time_zone=time_zone))
    assert plan.create == ()
    assert plan.status.next_schedule_time == expected
    assert plan.requeue_after == pytest.approx((expected - now).total_seconds() + 0.1)


def test_the_second_one_oclock_of_the_fall_back_day_runs_too() -> None:
    """An hourly job in New York runs at 01:00 EDT and again at 01:00 EST."""
    first = at("2016-11-06T05:00:00")  # 01:00 EDT
    status = CronStatus(last_schedule_time=first)
    plan = planned(cron(at("2016-11-06T06:00:01"), "0 * * * *", status, time_zone=NEW_YORK))
    (create,) = plan.create
    assert create.scheduled_time == at("2016-11-06T06:00:00")
    assert scheduled_timestamp_annotation(at("2016-11-06T06:00:00"), NEW_YORK) == (
        "2016-11-06T01:00:00-05:00"
    )
    assert scheduled_timestamp_annotation(first, NEW_YORK) == "2016-11-06T01:00:00-04:00"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param({"suspend": True}, None, id="suspended"),
        pytest.param({"schedule": ERROR_SCHEDULE}, "UnparseableSchedule", id="unparseable"),
        pytest.param({"time_zone": "Mars/Olympus"}, "UnknownTimeZone", id="unknown time zone"),
        pytest.param({"schedule": "59 23 31 2 *"}, "InvalidSchedule", id="never comes"),
    ],
)
def test_no_next_schedule_time_and_no_requeue(spec: dict[str, Any], reason: str | None) -> None:
    status = CronStatus(last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR, next_schedule_time=TOP)
    plan = planned(respec(cron(JUST_AFTER_THE_HOUR, status=status), spec))
    assert (plan.create, plan.requeue_after, plan.status.next_schedule_time) == ((), None, None)
    assert reasons(plan) == ([] if reason is None else [reason])


def test_invalid_schedule_message() -> None:
    status = CronStatus(last_schedule_time=JUST_AFTER_THE_PRIOR_HOUR)
    plan = planned(cron(after_top(days=400), "59 23 31 2 *", status))
    (event,) = plan.events
    assert (event.type, event.message) == (
        "Warning",
        "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than "
        "1 second",
    )


def test_times_in_any_zone_are_compared_as_instants() -> None:
    """Inputs in a local zone (an ambiguous hour included) decide as their UTC selves."""
    from zoneinfo import ZoneInfo

    ny = ZoneInfo(NEW_YORK)
    last = at("2016-11-06T05:00:00").astimezone(ny)  # 01:00 EDT (fold 0)
    now = at("2016-11-06T06:00:01").astimezone(ny)  # 01:00:01 EST (fold 1)
    status = CronStatus(last_schedule_time=last)
    plan = planned(cron(now, "0 * * * *", status, created=last, time_zone=NEW_YORK))
    assert [c.scheduled_time for c in plan.create] == [at("2016-11-06T06:00:00")]
    assert plan.status.last_schedule_time == at("2016-11-06T06:00:00")
    assert plan.status.last_schedule_time is not None
    assert plan.status.last_schedule_time.tzinfo is UTC
