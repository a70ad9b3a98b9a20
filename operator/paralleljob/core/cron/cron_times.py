"""The times of a ParallelCronJob's sync: upstream's ``mostRecentScheduleTime``,
``nextScheduleTimeDuration``, ``getJobName`` and ``getTimeHashInMinutes``
(``pkg/controller/cronjob/utils.go``, Kubernetes v1.37.2), and the scheduled times a sync
runs or gives up under each catch-up policy (:func:`due_time`).

Every time here is a UTC datetime: Python compares and subtracts two datetimes of the
same ZoneInfo by their wall clocks, which is wrong across a DST change, so the schedule
is asked in the cron job's location (:func:`next_time`) and its answer turned back into
UTC at once.

A schedule's times are the sequence ``next(anchor), next(next(anchor)), ...``. For a
crontab line the anchor does not matter; for ``@every`` it does, and here it is always
the cron job's last scheduled (or given-up) time or its creation. Upstream re-anchors
``@every`` at ``now - startingDeadlineSeconds`` instead, so an ``@every`` job whose
deadline is shorter than its period never starts late and mostly never starts (the case
its own test table comments out as failing); :func:`due_time` keeps the sequence.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from .cron_schedule import ConstantDelaySchedule, Schedule

#: nextScheduleDelta: the requeue lands this long after the scheduled time (NTP skew).
NEXT_SCHEDULE_DELTA = 0.1

#: Upstream's "too many missed" guard: more unmet times than this is a clock problem.
TOO_MANY_MISSED = 100

NONE_MISSED = "none"
FEW_MISSED = "few"
MANY_MISSED = "many"

LATEST = "Latest"
ALL = "All"
SKIP = "Skip"

_TICK = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class InvalidSchedule(ValueError):
    """A schedule that parses but never comes round twice (``59 23 31 2 *``)."""


def next_time(schedule: Schedule, after: datetime, loc: tzinfo) -> datetime | None:
    """The schedule's next time after ``after``, reckoned in the cron job's location."""
    found = schedule.next(after.astimezone(loc))
    return None if found is None else found.astimezone(UTC)


def most_recent_schedule_time(
    schedule: Schedule, loc: tzinfo, earliest: datetime, now: datetime
) -> tuple[datetime | None, str]:
    """mostRecentScheduleTime: the latest time of the sequence from ``earliest`` that is
    not after ``now`` (None if the first is), and upstream's rough count of the times
    since (none, few, or many: over :data:`TOO_MANY_MISSED`)."""
    t1 = next_time(schedule, earliest, loc)
    if t1 is not None and now < t1:
        return None, NONE_MISSED
    t2 = None if t1 is None else next_time(schedule, t1, loc)
    if t1 is not None and t2 is not None and now < t2:
        return t1, NONE_MISSED
    # No time, or a second time that is no later (robfig's zero time), is no schedule.
    interval = 0 if t1 is None or t2 is None else round((t2 - t1).total_seconds())
    if t1 is None or interval < 1:
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    # Count the periods of the first two times that fit before now, then start the search
    # two periods short of that: exact for @every, close for irregular crontab lines.
    missed = int((now - t1).total_seconds()) // interval + 1
    most_recent = None
    t = next_time(schedule, t1 + timedelta(seconds=(missed - 2) * interval), loc)
    while t is not None and t <= now:
        most_recent = t
        t = next_time(schedule, t, loc)
    return most_recent, MANY_MISSED if missed > TOO_MANY_MISSED else FEW_MISSED


def next_schedule_time_duration(
    schedule: Schedule, loc: tzinfo, earliest: datetime, now: datetime
) -> float | None:
    """nextScheduleTimeDuration: seconds until the time after the most recent one, plus
    :data:`NEXT_SCHEDULE_DELTA`; None when the schedule has no further time."""
    try:
        most_recent, missed = most_recent_schedule_time(schedule, loc, earliest, now)
    except InvalidSchedule:
        most_recent = now  # still requeue: aim for the next slot from now
    else:
        if most_recent is None:
            most_recent = earliest if missed == NONE_MISSED else now
    following = next_time(schedule, most_recent, loc)
    if following is None:
        return None
    return (following - now).total_seconds() + NEXT_SCHEDULE_DELTA


def first_after(
    schedule: Schedule, loc: tzinfo, anchor: datetime, bound: datetime
) -> datetime | None:
    """The first time of the sequence from ``anchor`` that is after ``bound``: exact, where
    mostRecentScheduleTime's estimate can miss a time before a gap (a weekend)."""
    first = next_time(schedule, anchor, loc)
    if first is None or first > bound:
        return first
    if isinstance(schedule, ConstantDelaySchedule):
        delay = timedelta(seconds=schedule.delay_seconds)
        return first + ((bound - first) // delay + 1) * delay
    return next_time(schedule, bound, loc)  # a crontab line's times do not hang on anchor


def latest_until(
    schedule: Schedule, loc: tzinfo, anchor: datetime, bound: datetime
) -> datetime | None:
    """The last time of the sequence from ``anchor`` that is not after ``bound``, exact."""
    latest = latest_times(schedule, loc, anchor, bound, 1)
    return latest[0] if latest else None


def times_between(
    schedule: Schedule, loc: tzinfo, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """The sequence from ``after`` up to ``until`` (inclusive): its first ``limit`` times."""
    times: list[datetime] = []
    t = next_time(schedule, after, loc)
    while t is not None and t <= until and len(times) < limit:
        times.append(t)
        t = next_time(schedule, t, loc)
    return times


def latest_times(
    schedule: Schedule, loc: tzinfo, anchor: datetime, now: datetime, count: int
) -> list[datetime]:
    """The last ``count`` times of the sequence from ``anchor`` up to ``now``, oldest
    first, without walking a backlog of years: look back ``count`` seconds, then twice as
    far, until the window holds ``count`` times or reaches the anchor."""
    lookback = timedelta(seconds=count)
    while True:
        start = anchor if lookback >= now - anchor else now - lookback
        window: deque[datetime] = deque(maxlen=count)
        t = first_after(schedule, loc, anchor, start)
        while t is not None and t <= now:
            window.append(t)
            t = next_time(schedule, t, loc)
        if len(window) == count or start == anchor:
            return list(window)
        lookback *= 2


@dataclass(frozen=True)
class Due:
    """What one sync makes of the scheduled times since the last one it ran or gave up.

    ``run``: the time to start a job for now (concurrency permitting), or None.
    ``missed``: how many times will never run (counted up to ``TOO_MANY_MISSED + 1``:
    more means "more than 100"), the latest of them ``last_missed``.
    ``too_many``: upstream's TooManyMissedTimes (Latest, Skip), or All's backlog cut to
    the latest :data:`TOO_MANY_MISSED` times.
    """

    run: datetime | None
    missed: int = 0
    last_missed: datetime | None = None
    too_many: bool = False


def due_time(
    schedule: Schedule,
    loc: tzinfo,
    catch_up: str,
    base: datetime,
    now: datetime,
    deadline: int | None,
    leading_since: datetime,
) -> Due:
    """Which scheduled time this sync runs, and which it gives up for good.

    The times after ``base`` (the last scheduled or given-up time, else the creation) and
    not after ``now`` are due. One may run if it is after ``now - startingDeadlineSeconds``
    and, for Skip, not before ``leading_since``. Latest and Skip run the most recent such
    time (upstream's nextScheduleTime); All runs the oldest, capped to the latest
    :data:`TOO_MANY_MISSED`. Every due time before the one that runs never will.
    """
    lowest = _lowest_runnable(base, now, deadline, catch_up, leading_since)
    snapped = _snap(schedule, loc, base, lowest)
    if catch_up == ALL:
        run, too_many = _oldest_due(schedule, loc, snapped, now)
    else:
        run, missed_kind = most_recent_schedule_time(schedule, loc, snapped, now)
        too_many = missed_kind == MANY_MISSED
    count, last = _given_up(schedule, loc, base, now if run is None else run - _TICK)
    return Due(run, count, last, too_many)


def _lowest_runnable(
    base: datetime, now: datetime, deadline: int | None, catch_up: str, leading_since: datetime
) -> datetime:
    """The moment a due time must be after to run (mostRecentScheduleTime's earliestTime
    with includeStartingDeadlineSeconds, and Skip's outage cut)."""
    lowest = base
    if deadline is not None:
        lowest = max(lowest, now - timedelta(seconds=deadline))
    if catch_up == SKIP:
        lowest = max(lowest, leading_since - _TICK)  # "at or after" leading_since
    return lowest


def _snap(schedule: Schedule, loc: tzinfo, base: datetime, lowest: datetime) -> datetime:
    """``lowest`` moved back onto the sequence from ``base`` (no time in between), so that
    the search from it finds the sequence's times (@every); a crontab line needs no move."""
    if lowest <= base:
        return base
    if not isinstance(schedule, ConstantDelaySchedule):
        return lowest
    return latest_until(schedule, loc, base, lowest) or base


def _oldest_due(
    schedule: Schedule, loc: tzinfo, anchor: datetime, now: datetime
) -> tuple[datetime | None, bool]:
    """All: the oldest runnable time, after dropping all but the latest 100."""
    if next_time(schedule, anchor, loc) is None:
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    backlog = times_between(schedule, loc, anchor, now, TOO_MANY_MISSED + 1)
    if len(backlog) <= TOO_MANY_MISSED:
        return (backlog[0] if backlog else None), False
    return latest_times(schedule, loc, anchor, now, TOO_MANY_MISSED)[0], True


def _given_up(
    schedule: Schedule, loc: tzinfo, base: datetime, until: datetime
) -> tuple[int, datetime | None]:
    """How many times of the sequence from ``base`` up to ``until`` there are (up to
    101), and the latest."""
    if until <= base:
        return 0, None
    count = len(times_between(schedule, loc, base, until, TOO_MANY_MISSED + 1))
    return count, (latest_until(schedule, loc, base, until) if count else None)


# --- Names and formats -------------------------------------------------------------------


def get_job_name(cron_job_name: str, scheduled_time: datetime) -> str:
    """getJobName: the job of a scheduled time is named after its Unix minute, so a sync
    that repeats after a crash finds the job it made instead of making another."""
    return f"{cron_job_name}-{get_time_hash_in_minutes(scheduled_time)}"


def get_time_hash_in_minutes(scheduled_time: datetime) -> int:
    """getTimeHashInMinutes: Unix seconds / 60, truncated toward zero as Go's division."""
    seconds = (scheduled_time - _EPOCH) // timedelta(seconds=1)  # Unix(): floored
    minutes = abs(seconds) // 60
    return minutes if seconds >= 0 else -minutes


def trigger_job_name(cron_job_name: str, trigger: str, previous: str | None = None) -> str:
    """A triggered run's job: ``-m`` and 9 hex digits of the SHA-256 of the trigger and
    the one acted on before it (``status.lastTrigger``): the same for a retried sync of
    the same change (so it adopts the job), another for each change, and no scheduled
    job's name."""
    key = trigger if previous is None else f"{previous}\x00{trigger}"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{cron_job_name}-m{digest[:9]}"


def format_rfc3339(t: datetime, loc: tzinfo) -> str:
    """Go's ``t.In(loc).Format(time.RFC3339)``: whole seconds, ``Z`` for a zero offset."""
    local = t.astimezone(loc)
    offset = local.utcoffset() or timedelta(0)
    seconds = offset.days * 86400 + offset.seconds
    if seconds == 0:
        zone = "Z"
    else:
        minutes = abs(seconds) // 60  # Go prints hours and minutes, dropping seconds
        zone = f"{'-' if seconds < 0 else '+'}{minutes // 60:02d}:{minutes % 60:02d}"
    return f"{local.year:04d}-{local:%m-%dT%H:%M:%S}{zone}"


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def format_rfc1123z_utc(t: datetime) -> str:
    """Go's ``t.UTC().Format(time.RFC1123Z)``, whatever the locale."""
    u = t.astimezone(UTC)
    return (
        f"{_DAYS[u.weekday()]}, {u.day:02d} {_MONTHS[u.month - 1]} {u.year:04d} {u:%H:%M:%S} +0000"
    )
