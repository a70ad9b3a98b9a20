"""One sync of a ParallelCronJob, decided without I/O: upstream's ``syncCronJob`` and
``cleanupFinishedJobs`` (``pkg/controller/cronjob/cronjob_controllerv2.go``, Kubernetes
v1.37.2), creating ParallelJobs instead of Jobs. The steps run in upstream's order:

1. history cleanup: the oldest finished jobs beyond the history limits go;
2. the active list: finished jobs leave it (SawCompletedJob), vanished ones too
   (MissingJob), unfinished strangers are reported (UnexpectedJob) but not adopted;
   as upstream, neither judgement is made on the caches alone: a first plan asks for
   live reads (:class:`Verify`: the cron job, or the missing jobs, "to avoid a slow
   watch"), and the shell plans again with what the API server answered;
3. nothing more while the cron job is being deleted; then the time zone, suspend and
   the schedule, each of which may stop the sync (UnknownTimeZone, UnparseableSchedule,
   InvalidSchedule);
4. which scheduled time runs (:func:`.cron_times.due_time`, per ``catchUp``), and which
   will never run (``status.lastMissedTime``, MissSchedule);
5. concurrency: Forbid waits (JobAlreadyActive), so does Allow at ``maxActive``
   (TooManyActive); Replace deletes the active jobs;
6. the job of that time is created, or adopted when it already exists;
7. a trigger (annotation ``paralleljob.dev/trigger``) creates one job now, whatever the
   schedule, suspend and concurrency say.

Exactly once: the job of a scheduled time has a name that only that time gives
(:func:`.cron_times.get_job_name`), and so has a trigger's. A sync that finds the job it
would create among the children (the operator stopped after the create and before the
status write) adopts it instead. SuccessfulCreate and SuccessfulDelete are the shell's
events, sent once the API calls succeed; the plan's status already counts them: a
created job is in ``active`` with an empty uid, which :func:`record_created` fills in.
If a create fails, the shell writes none of the plan: the next sync decides again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo

from ... import constants as c
from ...constants import COND_COMPLETE as COMPLETE
from ...constants import COND_FAILED as FAILED
from ...constants import NORMAL, WARNING
from ..event import Event
from .cron_schedule import (
    CronSyntaxError,
    Schedule,
    UnknownTimeZone,
    load_time_zone,
    parse_schedule,
)
from .cron_times import (
    ALL,
    NEXT_SCHEDULE_DELTA,
    TOO_MANY_MISSED,
    Due,
    InvalidSchedule,
    due_time,
    first_after,
    format_rfc1123z_utc,
    format_rfc3339,
    get_job_name,
    next_schedule_time_duration,
    next_time,
    trigger_job_name,
)

#: With catchUpPolicy All and no cap on the active jobs (maxActiveJobs), one missed run
#: starts at most this often: an outage's 100 missed runs then take some 17 minutes to
#: start instead of 10 seconds (a burst of 100 jobs and their pods at once).
CATCH_UP_PACE_SECONDS = 10.0
ALLOW = "Allow"
FORBID = "Forbid"
REPLACE = "Replace"


@dataclass(frozen=True)
class CronSpec:
    schedule: str
    time_zone: str | None = None
    starting_deadline_seconds: int | None = None
    concurrency_policy: str = ALLOW  # Allow | Forbid | Replace
    suspend: bool = False
    successful_jobs_history_limit: int | None = 3  # None: keep all
    failed_jobs_history_limit: int | None = 1
    catch_up: str = "Latest"  # Latest | All | Skip
    max_active: int | None = None  # Allow only: at most this many active jobs


@dataclass(frozen=True)
class ChildJob:
    """A ParallelJob this cron job controls (its controller ownerReference)."""

    name: str
    uid: str
    finished: str | None  # Complete | Failed | None
    finish_time: datetime | None  # the Complete/Failed condition's lastTransitionTime
    start_time: datetime | None  # status.startTime (byJobStartTime)
    scheduled_time: datetime | None  # batch.kubernetes.io/cronjob-scheduled-timestamp
    deleting: bool = False


@dataclass(frozen=True)
class ActiveRef:
    name: str
    uid: str  # "" for a job the plan creates, until record_created


@dataclass(frozen=True)
class CronStatus:
    active: tuple[ActiveRef, ...] = ()
    last_schedule_time: datetime | None = None
    last_successful_time: datetime | None = None
    next_schedule_time: datetime | None = None
    last_missed_time: datetime | None = None
    last_trigger: str | None = None


@dataclass(frozen=True)
class CronInput:
    name: str
    creation_timestamp: datetime
    deleting: bool
    spec: CronSpec
    status: CronStatus
    children: tuple[ChildJob, ...]
    now: datetime
    leading_since: datetime  # when this replica started leading: Skip's outage cut
    trigger: str | None = None
    #: Whether the cron job and the jobs in ``verify`` were read live (the second plan).
    live_checked: bool = False
    #: The active jobs the API server still has though the caches do not show them.
    found_live: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Verify:
    """What the caches alone cannot tell (syncCronJob's live reads): whether the cron
    job read live lists a job the cached one does not (an unexpected job), and which
    active jobs missing from the caches the API server still has."""

    cron: bool = False
    jobs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.cron or bool(self.jobs)


@dataclass(frozen=True)
class JobToCreate:
    name: str
    scheduled_time: datetime | None  # None for a trigger: no scheduled-timestamp annotation


@dataclass(frozen=True)
class CronPlan:
    create: tuple[JobToCreate, ...]
    delete: tuple[str, ...]  # Replace's active jobs, then history cleanup (oldest first)
    status: CronStatus  # to write: active as if the creates and deletes succeed
    events: tuple[Event, ...]
    requeue_after: float | None  # seconds until the next sync is needed; None: none
    #: Live reads to make before anything else (then plan again with their answers).
    verify: Verify = Verify()


def plan_cron_sync(inp: CronInput) -> CronPlan:
    """What one sync of the cron job ``inp`` does (the steps in the module's docstring):
    first, unless ``inp.live_checked``, only the live reads the caches call for."""
    history, status = _cleanup_finished_jobs(inp.spec, inp.children, _in_utc(inp.status))
    if not inp.live_checked:
        verify = _verify(inp.children, status)
        if verify:
            return CronPlan((), (), status, (), None, verify)
    status, events = _reconcile_active(inp.children, status, inp.found_live)
    if inp.deleting:
        # Upstream: nothing but the status while the cron job is being deleted.
        return CronPlan((), history, replace(status, next_schedule_time=None), events, None)
    step = _schedule_step(inp, status)
    trigger_create, status = _trigger_step(inp, step.status)
    return CronPlan(
        create=step.create + trigger_create,
        delete=step.delete + history,
        status=status,
        events=events + step.events,
        requeue_after=step.requeue_after,
    )


def scheduled_timestamp_annotation(t: datetime, time_zone: str | None) -> str:
    """The scheduled-timestamp annotation's value: RFC 3339 in the cron job's time zone,
    as getJobFromTemplate2 writes it."""
    return format_rfc3339(t, load_time_zone(time_zone))


def record_created(status: CronStatus, name: str, uid: str) -> CronStatus:
    """The plan's status once the job ``name`` exists: its active entry gets its uid."""
    active = tuple(
        ActiveRef(name, uid) if ref.name == name and not ref.uid else ref for ref in status.active
    )
    return replace(status, active=active)


# --- 1. History (cleanupFinishedJobs) ---------------------------------------------------


def _cleanup_finished_jobs(
    spec: CronSpec, children: Iterable[ChildJob], status: CronStatus
) -> tuple[tuple[str, ...], CronStatus]:
    """The finished jobs beyond each history limit, oldest first (successful ones, then
    failed ones), and the active list without them. A job already being deleted counts
    as upstream counts it, but needs no second delete."""
    doomed: list[ChildJob] = []
    for kind, limit in (
        (COMPLETE, spec.successful_jobs_history_limit),
        (FAILED, spec.failed_jobs_history_limit),
    ):
        if limit is not None:
            finished = sorted((c for c in children if c.finished == kind), key=_by_start_time)
            doomed += finished[: max(0, len(finished) - limit)]
    gone = {c.uid for c in doomed}
    active = tuple(ref for ref in status.active if ref.uid not in gone)
    return tuple(c.name for c in doomed if not c.deleting), replace(status, active=active)


_NEVER = datetime.min.replace(tzinfo=UTC)


def _by_start_time(child: ChildJob) -> tuple[bool, datetime, str]:
    """byJobStartTime: by start time, unstarted last, the name breaking ties."""
    start = child.start_time
    return start is None, _NEVER if start is None else start.astimezone(UTC), child.name


# --- 2. The active list ------------------------------------------------------------------


def _unexpected(child: ChildJob, active: Iterable[ActiveRef]) -> bool:
    """An unfinished child the active list does not hold (one being deleted, Replace's
    say, is no stranger)."""
    return (
        child.finished is None
        and not child.deleting
        and not any(ref.uid == child.uid for ref in active)
    )


def _verify(children: tuple[ChildJob, ...], status: CronStatus) -> Verify:
    """The live reads syncCronJob makes before judging a job unexpected or missing."""
    uids = {child.uid for child in children}
    return Verify(
        cron=any(_unexpected(child, status.active) for child in children),
        jobs=tuple(ref.name for ref in status.active if ref.uid not in uids),
    )


def _reconcile_active(
    children: Iterable[ChildJob], status: CronStatus, found_live: frozenset[str] = frozenset()
) -> tuple[CronStatus, tuple[Event, ...]]:
    """syncCronJob's first loops: the active list against the children, and the time of
    the latest success. An active job the caches lack but the API server has
    (``found_live``) stays active."""
    active = list(status.active)
    events: list[Event] = []
    last_success = status.last_successful_time
    seen = set()
    for child in children:
        seen.add(child.uid)
        found = any(ref.uid == child.uid for ref in active)
        if child.finished is None:
            if _unexpected(child, active):
                message = f"Saw a job that the controller did not create or forgot: {child.name}"
                events.append(Event(WARNING, c.REASON_UNEXPECTED_JOB, message))
            continue
        if found:
            active = [ref for ref in active if ref.uid != child.uid]
            message = f"Saw completed job: {child.name}, condition: {child.finished}"
            events.append(Event(NORMAL, c.REASON_SAW_COMPLETED_JOB, message))
        if child.finished == COMPLETE:
            last_success = _later(last_success, child.finish_time)
    for ref in tuple(active):
        if ref.uid not in seen and ref.name not in found_live:
            events.append(
                Event(NORMAL, c.REASON_MISSING_JOB, f"Active job went missing: {ref.name}")
            )
            active.remove(ref)
    status = replace(status, active=tuple(active), last_successful_time=last_success)
    return status, tuple(events)


# --- 3.-6. The schedule --------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    status: CronStatus
    events: tuple[Event, ...] = ()
    create: tuple[JobToCreate, ...] = ()
    delete: tuple[str, ...] = ()
    requeue_after: float | None = None


@dataclass(frozen=True)
class _Clock:
    schedule: Schedule
    loc: tzinfo
    now: datetime


def _schedule_step(inp: CronInput, status: CronStatus) -> _Step:
    """The time zone, suspend and the schedule, in upstream's order; then the due time."""
    spec = inp.spec
    try:
        loc = load_time_zone(spec.time_zone)
    except UnknownTimeZone as err:
        message = f'invalid timeZone: "{spec.time_zone}": {err}'
        return _stopped(status, Event(WARNING, c.REASON_UNKNOWN_TIME_ZONE, message))
    if spec.suspend:
        return _stopped(status)
    try:
        schedule = parse_schedule(spec.schedule)
    except CronSyntaxError as err:
        message = f'unparseable schedule: "{spec.schedule}" : {err}'
        return _stopped(status, Event(WARNING, c.REASON_UNPARSEABLE_SCHEDULE, message))
    return _run_due(inp, status, _Clock(schedule, loc, inp.now.astimezone(UTC)))


def _stopped(status: CronStatus, *events: Event) -> _Step:
    """A sync that starts nothing and waits for a change of the spec (no requeue)."""
    return _Step(replace(status, next_schedule_time=None), events)


def _run_due(inp: CronInput, status: CronStatus, clock: _Clock) -> _Step:
    spec = inp.spec
    try:
        due = due_time(
            clock.schedule,
            clock.loc,
            spec.catch_up,
            _base(inp, status),
            clock.now,
            spec.starting_deadline_seconds,
            inp.leading_since.astimezone(UTC),
        )
    except InvalidSchedule as err:
        message = f"invalid schedule: {spec.schedule} : {err}"
        return _stopped(status, Event(WARNING, c.REASON_INVALID_SCHEDULE, message))
    status, events = _give_up(status, due, spec.catch_up)
    if due.run is None or _already_processed(inp.name, status, due.run):
        return _finish(inp, clock, status, events)
    blocked = _blocked(spec, status.active)
    if blocked is not None:
        return _finish(inp, clock, status, (*events, blocked))
    deletes, status = _replace_active(inp, status)
    create, status = _create_or_adopt(inp, status, due.run)
    return _finish(inp, clock, status, events, create, deletes, ran=due.run)


def _base(inp: CronInput, status: CronStatus) -> datetime:
    """Where the search for due times starts: the last scheduled time (else the
    creation), or the last given-up time if later, so a miss is reported once."""
    base = status.last_schedule_time or inp.creation_timestamp.astimezone(UTC)
    return _later(base, status.last_missed_time) or base


def _give_up(status: CronStatus, due: Due, catch_up: str) -> tuple[CronStatus, list[Event]]:
    """TooManyMissedTimes, MissSchedule (upstream's reason), and ``lastMissedTime``."""
    events = []
    if due.too_many:
        cut = f"catchUp All runs only the latest {TOO_MANY_MISSED}. " if catch_up == ALL else ""
        message = (
            f"too many missed start times. {cut}Set or decrease .spec.startingDeadlineSeconds"
            " or check clock skew"
        )
        events.append(Event(WARNING, c.REASON_TOO_MANY_MISSED_TIMES, message))
    if due.last_missed is None:
        return status, events
    latest = format_rfc1123z_utc(due.last_missed)
    if due.missed == 1:
        message = f"Missed scheduled time to start a job: {latest}"
    else:
        many = f"more than {TOO_MANY_MISSED}" if due.missed > TOO_MANY_MISSED else due.missed
        message = f"Missed {many} scheduled times to start a job, the latest: {latest}"
    events.append(Event(WARNING, c.REASON_MISS_SCHEDULE, message))
    return replace(status, last_missed_time=due.last_missed), events


def _already_processed(name: str, status: CronStatus, run: datetime) -> bool:
    """The job of ``run`` is active, or ``run`` is the last scheduled time."""
    job_name = get_job_name(name, run)
    return any(ref.name == job_name for ref in status.active) or status.last_schedule_time == run


def _blocked(spec: CronSpec, active: tuple[ActiveRef, ...]) -> Event | None:
    """Why a due time waits for the active jobs, if it does."""
    if spec.concurrency_policy == FORBID and active:
        message = (
            "Not starting job because prior execution is running and concurrency policy is Forbid"
        )
        return Event(NORMAL, c.REASON_JOB_ALREADY_ACTIVE, message)
    cap = spec.max_active
    if spec.concurrency_policy == ALLOW and cap is not None and len(active) >= cap:
        message = (
            f"Not starting job because {len(active)} jobs are active and maxActiveJobs is {cap}"
        )
        return Event(NORMAL, c.REASON_TOO_MANY_ACTIVE, message)
    return None


def _replace_active(inp: CronInput, status: CronStatus) -> tuple[tuple[str, ...], CronStatus]:
    """Replace: every active job goes (one already being deleted needs no call)."""
    if inp.spec.concurrency_policy != REPLACE:
        return (), status
    deleting = {c.uid for c in inp.children if c.deleting}
    names = tuple(ref.name for ref in status.active if ref.uid not in deleting)
    return names, replace(status, active=())


def _create_or_adopt(
    inp: CronInput, status: CronStatus, run: datetime
) -> tuple[tuple[JobToCreate, ...], CronStatus]:
    """The job of ``run``: created, or adopted if a crash left it made but unrecorded."""
    name = get_job_name(inp.name, run)
    create, status = _create_or_adopt_named(inp, status, name, run)
    return create, replace(status, last_schedule_time=run)


def _finish(
    inp: CronInput,
    clock: _Clock,
    status: CronStatus,
    events: Iterable[Event],
    create: tuple[JobToCreate, ...] = (),
    delete: tuple[str, ...] = (),
    ran: datetime | None = None,
) -> _Step:
    """The step's outcome with when to sync again: nextScheduleTimeDuration, or soon
    while catchUp All still has a backlog that concurrency lets start (at once up to
    maxActiveJobs; without a cap, one run every :data:`CATCH_UP_PACE_SECONDS`)."""
    base = _base(inp, status)
    requeue = next_schedule_time_duration(clock.schedule, clock.loc, base, clock.now)
    if inp.spec.catch_up == ALL and ran is not None and _blocked(inp.spec, status.active) is None:
        following = next_time(clock.schedule, ran, clock.loc)
        if following is not None and following <= clock.now:
            uncapped = inp.spec.concurrency_policy == ALLOW and inp.spec.max_active is None
            pace = CATCH_UP_PACE_SECONDS if uncapped else NEXT_SCHEDULE_DELTA
            requeue = pace if requeue is None else min(requeue, pace)
    try:
        upcoming = first_after(clock.schedule, clock.loc, base, clock.now)
    except InvalidSchedule:
        upcoming = None
    status = replace(status, next_schedule_time=upcoming)
    return _Step(status, tuple(events), create, delete, requeue)


# --- 7. Trigger --------------------------------------------------------------------------


def _trigger_step(inp: CronInput, status: CronStatus) -> tuple[tuple[JobToCreate, ...], CronStatus]:
    """A new trigger value: one job now (``kubectl create job --from=cronjob/...``). Its
    name follows from the value and the one before it, so that each change starts a job
    (A, B, then A again: three) and a sync retried before the status write adopts it."""
    trigger = inp.trigger
    if not trigger or trigger == status.last_trigger:
        return (), status
    name = trigger_job_name(inp.name, trigger, status.last_trigger)
    create, status = _create_or_adopt_named(inp, status, name, None)
    return create, replace(status, last_trigger=trigger)


# --- Helpers ----------------------------------------------------------------------------------


def _create_or_adopt_named(
    inp: CronInput, status: CronStatus, name: str, scheduled: datetime | None
) -> tuple[tuple[JobToCreate, ...], CronStatus]:
    existing = next((c for c in inp.children if c.name == name), None)
    if existing is None:
        return (JobToCreate(name, scheduled),), _with_active(status, ActiveRef(name, ""))
    if existing.finished is not None or any(ref.uid == existing.uid for ref in status.active):
        return (), status
    return (), _with_active(status, ActiveRef(existing.name, existing.uid))


def _with_active(status: CronStatus, ref: ActiveRef) -> CronStatus:
    return replace(status, active=(*status.active, ref))


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None or b is None:
        return a if b is None else b.astimezone(UTC)
    return max(a.astimezone(UTC), b.astimezone(UTC))


def _in_utc(status: CronStatus) -> CronStatus:
    """The status with its times in UTC: the only safe way to compare them."""

    def utc(t: datetime | None) -> datetime | None:
        return None if t is None else t.astimezone(UTC)

    return replace(
        status,
        last_schedule_time=utc(status.last_schedule_time),
        last_successful_time=utc(status.last_successful_time),
        next_schedule_time=utc(status.next_schedule_time),
        last_missed_time=utc(status.last_missed_time),
    )
