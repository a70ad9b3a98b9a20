"""Cron schedules as robfig/cron v3.0.1 parses and steps them (parser_test.go, spec_test.go,
constantdelay_test.go), plus what the port adds: upstream validation's refusal of TZ= and
its timeZone rules, and no hang on a day a zone skips.

robfig's tests read a time without an offset in time.Local: here that is UTC. Its
6-field rows (a seconds field, ``secondParser``) are built with :func:`spec6` from the
same field parser; a ``TZ=Zone`` schedule is the same schedule asked with the time put
in that zone first, which is what robfig's Next does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from paralleljob.core.cron.cron_schedule import (
    DOM,
    DOW,
    HOURS,
    MINUTES,
    MONTHS,
    SECONDS,
    STAR_BIT,
    TZ_IN_SCHEDULE,
    Bounds,
    ConstantDelaySchedule,
    CronSyntaxError,
    Schedule,
    SpecSchedule,
    UnknownTimeZone,
    all_bits,
    every_schedule,
    get_bits,
    get_field,
    get_range,
    load_time_zone,
    parse_go_duration,
    parse_schedule,
)

NEW_YORK = ZoneInfo("America/New_York")


def at(value: str) -> datetime:
    """getTime: robfig's layouts, an optional ``TZ=Zone`` prefix; no offset is UTC."""
    zone: tzinfo = UTC
    if value.startswith("TZ="):
        name, value = value[3:].split(" ", 1)
        zone = ZoneInfo(name)
    for layout in ("%a %b %d %H:%M %Y", "%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M:%S.%f %Y"):
        try:
            return datetime.strptime(value, layout).replace(tzinfo=zone)
        except ValueError:
            pass
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").astimezone(zone)


def spec6(text: str) -> tuple[SpecSchedule, tzinfo | None]:
    """secondParser (seconds minutes hours dom month dow) with its ``TZ=`` prefix."""
    zone = None
    if text.startswith(("TZ=", "CRON_TZ=")):
        prefix, text = text.split(" ", 1)
        zone = ZoneInfo(prefix.split("=", 1)[1])
    fields = text.split()
    bounds = (SECONDS, MINUTES, HOURS, DOM, MONTHS, DOW)
    bits = [get_field(f, b) for f, b in zip(fields, bounds, strict=True)]
    return SpecSchedule(*bits), zone


def same_instant(actual: datetime | None, expected: datetime | None) -> bool:
    """time.Equal: the same instant (an ambiguous wall time never compares equal across
    zones in Python, so compare timestamps)."""
    if actual is None or expected is None:
        return actual is expected
    return actual.timestamp() == expected.timestamp()


# --- parser_test.go ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "low", "high", "expected", "err"),
    [
        ("5", 0, 7, 1 << 5, ""),
        ("0", 0, 7, 1 << 0, ""),
        ("7", 0, 7, 1 << 7, ""),
        ("5-5", 0, 7, 1 << 5, ""),
        ("5-6", 0, 7, 1 << 5 | 1 << 6, ""),
        ("5-7", 0, 7, 1 << 5 | 1 << 6 | 1 << 7, ""),
        ("5-6/2", 0, 7, 1 << 5, ""),
        ("5-7/2", 0, 7, 1 << 5 | 1 << 7, ""),
        ("5-7/1", 0, 7, 1 << 5 | 1 << 6 | 1 << 7, ""),
        ("*", 1, 3, 1 << 1 | 1 << 2 | 1 << 3 | STAR_BIT, ""),
        ("*/2", 1, 3, 1 << 1 | 1 << 3, ""),
        ("5--5", 0, 0, 0, "too many hyphens"),
        ("jan-x", 0, 0, 0, "failed to parse int from"),
        ("2-x", 1, 5, 0, "failed to parse int from"),
        ("*/-12", 0, 0, 0, "negative number"),
        ("*//2", 0, 0, 0, "too many slashes"),
        ("1", 3, 5, 0, "below minimum"),
        ("6", 3, 5, 0, "above maximum"),
        ("5-3", 3, 5, 0, "beyond end of range"),
        ("*/0", 0, 0, 0, "should be a positive number"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_range(expr: str, low: int, high: int, expected: int, err: str) -> None:
    """TestRange."""
    if err:
        with pytest.raises(CronSyntaxError, match=err):
            get_range(expr, Bounds(low, high))
    else:
        assert get_range(expr, Bounds(low, high)) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("5", 1 << 5),
        ("5,6", 1 << 5 | 1 << 6),
        ("5,6,7", 1 << 5 | 1 << 6 | 1 << 7),
        ("1,5-7/2,3", 1 << 1 | 1 << 5 | 1 << 7 | 1 << 3),
    ],
)
def test_field(expr: str, expected: int) -> None:
    """TestField."""
    assert get_field(expr, Bounds(1, 7)) == expected


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        (MINUTES, 0xFFFFFFFFFFFFFFF),  # 0-59: 60 ones
        (HOURS, 0xFFFFFF),  # 0-23: 24 ones
        (DOM, 0xFFFFFFFE),  # 1-31: 31 ones, 1 zero
        (MONTHS, 0x1FFE),  # 1-12: 12 ones, 1 zero
        (DOW, 0x7F),  # 0-6: 7 ones
    ],
    ids=["minutes", "hours", "dom", "months", "dow"],
)
def test_all(bounds: Bounds, expected: int) -> None:
    """TestAll: all() adds the star bit."""
    assert all_bits(bounds) == expected | STAR_BIT


@pytest.mark.parametrize(
    ("low", "high", "step", "expected"),
    [(0, 0, 1, 0x1), (1, 1, 1, 0x2), (1, 5, 2, 0x2A), (1, 4, 2, 0xA)],
)
def test_bits(low: int, high: int, step: int, expected: int) -> None:
    """TestBits."""
    assert get_bits(low, high, step) == expected


@pytest.mark.parametrize(
    ("expr", "err"),
    [
        # TestParseScheduleErrors, with five fields.
        ("* 5 j * *", "failed to parse int from"),
        ("@every Xm", "failed to parse duration"),
        ("@unrecognized", "unrecognized descriptor"),
        ("* * * *", "expected exactly 5 fields"),
        ("", "empty spec string"),
        # TestStandardSpecSchedule's errors.
        ("5 j * * *", "failed to parse int from"),
        # TestErrors.
        ("xyz", "expected exactly 5 fields"),
        ("60 0 * * *", "above maximum"),
        ("0 60 * * *", "above maximum"),
        ("0 0 * * XYZ", "failed to parse int from"),
        # TestSlash0NoHang (robfig#144).
        ("15/0 * * * *", "should be a positive number"),
    ],
    ids=lambda v: repr(v),
)
def test_parse_schedule_errors(expr: str, err: str) -> None:
    with pytest.raises(CronSyntaxError, match=err):
        parse_schedule(expr)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
        ("0 0 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("-1 * * * *", 'failed to parse int from : strconv.Atoi: parsing "": invalid syntax'),
        ("@daily ", "unrecognized descriptor: @daily "),
        ("@Daily", "unrecognized descriptor: @Daily"),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
        (
            "@every 5d",
            'failed to parse duration @every 5d: time: unknown unit "d" in duration "5d"',
        ),
        ("TZ=UTC 0 * * * *", TZ_IN_SCHEDULE),
        ("CRON_TZ=Asia/Tokyo 0 * * * *", TZ_IN_SCHEDULE),
        ("TZ=UTC  @midnight", TZ_IN_SCHEDULE),
    ],
    ids=lambda v: repr(v),
)
def test_error_messages_are_robfig_s_and_validation_s(expr: str, message: str) -> None:
    with pytest.raises(CronSyntaxError) as raised:
        parse_schedule(expr)
    assert str(raised.value) == message


def every5min() -> SpecSchedule:
    return SpecSchedule(1, 1 << 5, all_bits(HOURS), all_bits(DOM), all_bits(MONTHS), all_bits(DOW))


def midnight() -> SpecSchedule:
    return SpecSchedule(1, 1, 1, all_bits(DOM), all_bits(MONTHS), all_bits(DOW))


def annual() -> SpecSchedule:
    return SpecSchedule(1, 1, 1, 1 << 1, 1 << 1, all_bits(DOW))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # TestParseSchedule / TestStandardSpecSchedule.
        ("5 * * * *", every5min()),
        ("@every 5m", ConstantDelaySchedule(300)),
        ("@midnight", midnight()),
        ("@yearly", annual()),
        ("@annually", annual()),
        # The other descriptors (parseDescriptor).
        ("@daily", midnight()),
        ("@monthly", SpecSchedule(1, 1, 1, 1 << 1, all_bits(MONTHS), all_bits(DOW))),
        ("@weekly", SpecSchedule(1, 1, 1, all_bits(DOM), all_bits(MONTHS), 1 << 0)),
        (
            "@hourly",
            SpecSchedule(1, 1, all_bits(HOURS), all_bits(DOM), all_bits(MONTHS), all_bits(DOW)),
        ),
        # Names, case-insensitive; "?" is "*"; a stepped star is no star.
        ("0 0 ? jan-MAR Sun,sat", SpecSchedule(1, 1, 1, all_bits(DOM), 0b1110, 1 | 1 << 6)),
        ("0 0 */2 * *", SpecSchedule(1, 1, 1, get_bits(1, 31, 2), all_bits(MONTHS), all_bits(DOW))),
        # strings.Fields: any run of white space separates, at either end too.
        ("\t5  *\n* *   * ", every5min()),
        # @every rounds: under a second is a second, the fraction is dropped.
        ("@every 1h30m", ConstantDelaySchedule(5400)),
        ("@every 100ms", ConstantDelaySchedule(1)),
        ("@every 2.5s", ConstantDelaySchedule(2)),
        ("@every -5m", ConstantDelaySchedule(1)),
    ],
    ids=lambda v: repr(v) if isinstance(v, str) else None,
)
def test_parse_schedule(expr: str, expected: Schedule) -> None:
    assert parse_schedule(expr) == expected


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("0", 0),
        ("5s", 5_000_000_000),
        ("+5s", 5_000_000_000),
        ("-5s", -5_000_000_000),
        ("1.5h", 5_400_000_000_000),
        ("2h45m", 9_900_000_000_000),
        ("1h1m1s1ms1us1ns", 3_661_001_001_001),
        ("1\u00b5s", 1_000),
        ("1\u03bcs", 1_000),
        (".5s", 500_000_000),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
    ],
)
def test_go_durations(text: str, nanos: int) -> None:
    """time.ParseDuration, which @every uses."""
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize("text", ["", "-", "5", ".s", "1d", "9223372036854775808ns", "1.h.5"])
def test_go_durations_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"^time: "):
        parse_go_duration(text)


# --- spec_test.go: TestActivation --------------------------------------------------------


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        # Every fifteen minutes.
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
        # Every fifteen minutes, starting at 5 minutes.
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
        # Named months
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
        # Everything set.
        ("Sun Jul 15 08:30 2012", "30 08 ? Jul Sun", True),
        ("Sun Jul 15 08:30 2012", "30 08 15 Jul ?", True),
        ("Mon Jul 16 08:30 2012", "30 08 ? Jul Sun", False),
        ("Mon Jul 16 08:30 2012", "30 08 15 Jul ?", False),
        # Predefined schedules
        ("Mon Jul 9 15:00 2012", "@hourly", True),
        ("Mon Jul 9 15:04 2012", "@hourly", False),
        ("Mon Jul 9 15:00 2012", "@daily", False),
        ("Mon Jul 9 00:00 2012", "@daily", True),
        ("Mon Jul 9 00:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@weekly", True),
        ("Sun Jul 8 01:00 2012", "@weekly", False),
        ("Sun Jul 8 00:00 2012", "@monthly", False),
        ("Sun Jul 1 00:00 2012", "@monthly", True),
        # Test interaction of DOW and DOM.
        # If both are restricted, then only one needs to match.
        ("Sun Jul 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Fri Jun 15 00:00 2012", "* * 1,15 * Sun", True),
        ("Wed Aug 1 00:00 2012", "* * 1,15 * Sun", True),
        ("Sun Jul 15 00:00 2012", "* * */10 * Sun", True),  # verifies #70
        # However, if one has a star, then both need to match.
        ("Sun Jul 15 00:00 2012", "* * * * Mon", False),
        ("Mon Jul 9 00:00 2012", "* * 1,15 * *", False),
        ("Sun Jul 15 00:00 2012", "* * 1,15 * *", True),
        ("Sun Jul 15 00:00 2012", "* * */2 * Sun", True),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_activation(time: str, spec: str, expected: bool) -> None:
    """TestActivation: the schedule fires at ``time`` iff Next(time - 1s) is ``time``."""
    when = at(time)
    fires = parse_schedule(spec).next(when - timedelta(seconds=1))
    assert same_instant(fires, when) is expected


# --- spec_test.go: TestNext --------------------------------------------------------------


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        # Simple cases
        ("Mon Jul 9 14:45 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        # Wrap around hours
        ("Mon Jul 9 15:45 2012", "0 20-35/15 * * * *", "Mon Jul 9 16:20 2012"),
        # Wrap around days
        ("Mon Jul 9 23:46 2012", "0 */15 * * * *", "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", "0 20-35/15 * * * *", "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * * *", "Tue Jul 10 00:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * * *", "Tue Jul 10 01:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * * *", "Tue Jul 10 10:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"),
        # Wrap around months
        ("Mon Jul 9 23:35 2012", "0 0 0 9 Apr-Oct ?", "Thu Aug 9 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 0 */5 Apr,Aug,Oct Mon", "Tue Aug 1 00:00 2012"),
        ("Mon Jul 9 23:35 2012", "0 0 0 */5 Oct Mon", "Mon Oct 1 00:00 2012"),
        # Wrap around years
        ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon", "Mon Feb 4 00:00 2013"),
        ("Mon Jul 9 23:35 2012", "0 0 0 * Feb Mon/2", "Fri Feb 1 00:00 2013"),
        # Wrap around minute, hour, day, month, and year
        ("Mon Dec 31 23:59:45 2012", "0 * * * * *", "Tue Jan 1 00:00:00 2013"),
        # Leap year
        ("Mon Jul 9 23:35 2012", "0 0 0 29 Feb ?", "Mon Feb 29 00:00 2016"),
        # Daylight savings time 2am EST (-5) -> 3am EDT (-4)
        (
            "2012-03-11T00:00:00-0500",
            "TZ=America/New_York 0 30 2 11 Mar ?",
            "2013-03-11T02:30:00-0400",
        ),
        # hourly job
        ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T01:00:00-0500"),
        ("2012-03-11T01:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T03:00:00-0400"),
        ("2012-03-11T03:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T04:00:00-0400"),
        ("2012-03-11T04:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-03-11T05:00:00-0400"),
        # hourly job using CRON_TZ
        (
            "2012-03-11T00:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T01:00:00-0500",
        ),
        (
            "2012-03-11T01:00:00-0500",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T03:00:00-0400",
        ),
        (
            "2012-03-11T03:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T04:00:00-0400",
        ),
        (
            "2012-03-11T04:00:00-0400",
            "CRON_TZ=America/New_York 0 0 * * * ?",
            "2012-03-11T05:00:00-0400",
        ),
        # 1am nightly job
        ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-03-11T01:00:00-0500"),
        ("2012-03-11T01:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-03-12T01:00:00-0400"),
        # 2am nightly job (skipped)
        ("2012-03-11T00:00:00-0500", "TZ=America/New_York 0 0 2 * * ?", "2012-03-12T02:00:00-0400"),
        # Daylight savings time 2am EDT (-4) => 1am EST (-5)
        (
            "2012-11-04T00:00:00-0400",
            "TZ=America/New_York 0 30 2 04 Nov ?",
            "2012-11-04T02:30:00-0500",
        ),
        (
            "2012-11-04T01:45:00-0400",
            "TZ=America/New_York 0 30 1 04 Nov ?",
            "2012-11-04T01:30:00-0500",
        ),
        # hourly job
        ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T01:00:00-0400"),
        ("2012-11-04T01:00:00-0400", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0500", "TZ=America/New_York 0 0 * * * ?", "2012-11-04T02:00:00-0500"),
        # 1am nightly job (runs twice)
        ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 1 * * ?", "2012-11-04T01:00:00-0400"),
        ("2012-11-04T01:00:00-0400", "TZ=America/New_York 0 0 1 * * ?", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0500", "TZ=America/New_York 0 0 1 * * ?", "2012-11-05T01:00:00-0500"),
        # 2am nightly job
        ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 2 * * ?", "2012-11-04T02:00:00-0500"),
        ("2012-11-04T02:00:00-0500", "TZ=America/New_York 0 0 2 * * ?", "2012-11-05T02:00:00-0500"),
        # 3am nightly job
        ("2012-11-04T00:00:00-0400", "TZ=America/New_York 0 0 3 * * ?", "2012-11-04T03:00:00-0500"),
        ("2012-11-04T03:00:00-0500", "TZ=America/New_York 0 0 3 * * ?", "2012-11-05T03:00:00-0500"),
        # hourly job
        ("TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0400"),
        ("TZ=America/New_York 2012-11-04T01:00:00-0400", "0 0 * * * ?", "2012-11-04T01:00:00-0500"),
        ("TZ=America/New_York 2012-11-04T01:00:00-0500", "0 0 * * * ?", "2012-11-04T02:00:00-0500"),
        # 1am nightly job (runs twice)
        ("TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0400"),
        ("TZ=America/New_York 2012-11-04T01:00:00-0400", "0 0 1 * * ?", "2012-11-04T01:00:00-0500"),
        ("TZ=America/New_York 2012-11-04T01:00:00-0500", "0 0 1 * * ?", "2012-11-05T01:00:00-0500"),
        # 2am nightly job
        ("TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 2 * * ?", "2012-11-04T02:00:00-0500"),
        ("TZ=America/New_York 2012-11-04T02:00:00-0500", "0 0 2 * * ?", "2012-11-05T02:00:00-0500"),
        # 3am nightly job
        ("TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 3 * * ?", "2012-11-04T03:00:00-0500"),
        ("TZ=America/New_York 2012-11-04T03:00:00-0500", "0 0 3 * * ?", "2012-11-05T03:00:00-0500"),
        # Unsatisfiable
        ("Mon Jul 9 23:35 2012", "0 0 0 30 Feb ?", ""),
        ("Mon Jul 9 23:35 2012", "0 0 0 31 Apr ?", ""),
        # Monthly job
        ("TZ=America/New_York 2012-11-04T00:00:00-0400", "0 0 3 3 * ?", "2012-12-03T03:00:00-0500"),
        # Test the scenario of DST resulting in midnight not being a valid time.
        # https://github.com/robfig/cron/issues/157
        (
            "2018-10-17T05:00:00-0400",
            "TZ=America/Sao_Paulo 0 0 9 10 * ?",
            "2018-11-10T06:00:00-0500",
        ),
        (
            "2018-02-14T05:00:00-0500",
            "TZ=America/Sao_Paulo 0 0 9 22 * ?",
            "2018-02-22T07:00:00-0500",
        ),
    ],
    ids=lambda v: v or "no time",
)
def test_next(time: str, spec: str, expected: str) -> None:
    """TestNext (6 fields, the seconds first, as robfig's secondParser)."""
    schedule, zone = spec6(spec)
    after = at(time)
    actual = schedule.next(after if zone is None else after.astimezone(zone))
    assert same_instant(actual, at(expected) if expected else None)
    if actual is not None:
        assert actual.tzinfo is (after.tzinfo if zone is None else zone)


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        # Failing tests
        ("2016-01-03T13:09:03+0530", "14 14 * * *", "2016-01-03T14:14:00+0530"),
        ("2016-01-03T04:09:03+0530", "14 14 * * ?", "2016-01-03T14:14:00+0530"),
        # Passing tests
        ("2016-01-03T14:09:03+0530", "14 14 * * *", "2016-01-03T14:14:00+0530"),
        ("2016-01-03T14:00:00+0530", "14 14 * * ?", "2016-01-03T14:14:00+0530"),
    ],
)
def test_next_with_tz(time: str, spec: str, expected: str) -> None:
    """TestNextWithTz: a time with a fixed offset is reckoned in that offset."""
    after = datetime.strptime(time, "%Y-%m-%dT%H:%M:%S%z")
    actual = parse_schedule(spec).next(after)
    assert actual == datetime.strptime(expected, "%Y-%m-%dT%H:%M:%S%z")
    assert actual is not None and actual.utcoffset() == timedelta(hours=5, minutes=30)


@pytest.mark.parametrize(
    ("time", "spec", "expected"),
    [
        # The five-field forms of TestNext's daylight-saving rows, in the time's zone.
        ("2012-03-11T01:59:00-0500", "30 2 * * *", "2012-03-12T02:30:00-0400"),
        ("2012-03-11T01:00:00-0500", "0 * * * *", "2012-03-11T03:00:00-0400"),
        ("2012-11-04T01:00:00-0400", "0 * * * *", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0400", "0 1 * * *", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T01:00:00-0500", "0 1 * * *", "2012-11-05T01:00:00-0500"),
        ("2012-11-04T01:00:00-0400", "*/30 * * * *", "2012-11-04T01:30:00-0400"),
        ("2012-11-04T01:30:00-0400", "*/30 * * * *", "2012-11-04T01:00:00-0500"),
        ("2012-11-04T00:00:00-0400", "@daily", "2012-11-05T00:00:00-0500"),
        # Sub-seconds: the search starts at the next whole second.
        ("2012-11-04T00:59:59-0400", "0 1 * * *", "2012-11-04T01:00:00-0400"),
    ],
)
def test_next_across_new_york_dst(time: str, spec: str, expected: str) -> None:
    after = datetime.strptime(time, "%Y-%m-%dT%H:%M:%S%z").astimezone(NEW_YORK)
    actual = parse_schedule(spec).next(after)
    assert same_instant(actual, datetime.strptime(expected, "%Y-%m-%dT%H:%M:%S%z"))


def test_next_drops_the_sub_second_part() -> None:
    after = datetime(2012, 7, 9, 14, 59, 59, 999_999, tzinfo=UTC)
    assert parse_schedule("0 15 * * *").next(after) == datetime(2012, 7, 9, 15, tzinfo=UTC)


def test_no_time_within_five_years_is_none() -> None:
    """The search gives up past the year five years on (robfig's zero time): 30 February,
    and the leap day of 2104 (2100 is no leap year): found from 2099, not from 2098."""
    assert parse_schedule("0 0 30 2 *").next(datetime(2012, 7, 9, tzinfo=UTC)) is None
    assert parse_schedule("0 0 29 2 *").next(datetime(2098, 3, 1, tzinfo=UTC)) is None
    assert parse_schedule("0 0 29 2 *").next(datetime(2099, 3, 1, tzinfo=UTC)) == datetime(
        2104, 2, 29, tzinfo=UTC
    )


def test_a_day_the_zone_skips_is_stepped_over() -> None:
    """Pacific/Apia skipped 2011-12-30; robfig loops forever there (Go's Date resolves the
    missing midnight to the day before); the port steps over it."""
    apia = ZoneInfo("Pacific/Apia")
    after = datetime(2011, 12, 29, 13, 25, tzinfo=apia)
    actual = parse_schedule("12 * 19,30 * *").next(after)
    assert actual == datetime(2012, 1, 19, 0, 12, tzinfo=apia)


def test_next_needs_a_timezone_aware_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_schedule("* * * * *").next(datetime(2012, 7, 9))


# --- constantdelay_test.go -----------------------------------------------------------------

NS = 1
MS = 1_000_000
SECOND = 1_000_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE


@pytest.mark.parametrize(
    ("time", "delay", "expected"),
    [
        # Simple cases
        ("Mon Jul 9 14:45 2012", 15 * MINUTE + 50 * NS, "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", 15 * MINUTE, "Mon Jul 9 15:14 2012"),
        ("Mon Jul 9 14:59:59 2012", 15 * MINUTE, "Mon Jul 9 15:14:59 2012"),
        # Wrap around hours
        ("Mon Jul 9 15:45 2012", 35 * MINUTE, "Mon Jul 9 16:20 2012"),
        # Wrap around days
        ("Mon Jul 9 23:46 2012", 14 * MINUTE, "Tue Jul 10 00:00 2012"),
        ("Mon Jul 9 23:45 2012", 35 * MINUTE, "Tue Jul 10 00:20 2012"),
        ("Mon Jul 9 23:35:51 2012", 44 * MINUTE + 24 * SECOND, "Tue Jul 10 00:20:15 2012"),
        (
            "Mon Jul 9 23:35:51 2012",
            25 * HOUR + 44 * MINUTE + 24 * SECOND,
            "Thu Jul 11 01:20:15 2012",
        ),
        # Wrap around months
        ("Mon Jul 9 23:35 2012", 91 * 24 * HOUR + 25 * MINUTE, "Thu Oct 9 00:00 2012"),
        # Wrap around minute, hour, day, month, and year
        ("Mon Dec 31 23:59:45 2012", 15 * SECOND, "Tue Jan 1 00:00:00 2013"),
        # Round to nearest second on the delay
        ("Mon Jul 9 14:45 2012", 15 * MINUTE + 50 * NS, "Mon Jul 9 15:00 2012"),
        # Round up to 1 second if the duration is less.
        ("Mon Jul 9 14:45:00 2012", 15 * MS, "Mon Jul 9 14:45:01 2012"),
        # Round to nearest second when calculating the next time.
        ("Mon Jul 9 14:45:00.005 2012", 15 * MINUTE, "Mon Jul 9 15:00 2012"),
        # Round to nearest second for both.
        ("Mon Jul 9 14:45:00.005 2012", 15 * MINUTE + 50 * NS, "Mon Jul 9 15:00 2012"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_constant_delay_next(time: str, delay: int, expected: str) -> None:
    """TestConstantDelayNext."""
    assert every_schedule(delay).next(at(time)) == at(expected)


def test_every_counts_absolute_time_across_dst() -> None:
    """@every adds elapsed time: an hour after 01:30 EDT on the fall-back day is 01:30 EST."""
    after = datetime(2012, 11, 4, 5, 30, tzinfo=UTC).astimezone(NEW_YORK)
    actual = parse_schedule("@every 1h").next(after)
    assert actual is not None and actual.astimezone(UTC) == datetime(2012, 11, 4, 6, 30, tzinfo=UTC)
    assert actual.utcoffset() == timedelta(hours=-5)


# --- Time zones (validateTimeZone, time.LoadLocation) ------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (None, UTC),
        ("UTC", ZoneInfo("UTC")),
        ("America/New_York", NEW_YORK),
        ("Etc/GMT+5", ZoneInfo("Etc/GMT+5")),
    ],
)
def test_load_time_zone(name: str | None, expected: tzinfo) -> None:
    assert load_time_zone(name) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "timeZone must be nil or non-empty string"),
        ("bad timezone", "unknown time zone bad timezone"),
        ("America/Nowhere", "unknown time zone America/Nowhere"),
        ("../etc/passwd", "unknown time zone ../etc/passwd"),
        ("America//New_York", "unknown time zone America//New_York"),
        ("/America/New_York", "unknown time zone /America/New_York"),
        ("-America/New_York", "unknown time zone -America/New_York"),
        ("America/Argentina_Buenos_Aires", "unknown time zone America/Argentina_Buenos_Aires"),
        (
            "Local",
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
        (
            "local",
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ),
    ],
    ids=repr,
)
def test_unknown_time_zones(name: str, message: str) -> None:
    with pytest.raises(UnknownTimeZone) as raised:
        load_time_zone(name)
    assert str(raised.value) == message


def test_a_fixed_offset_time_zone_object_works() -> None:
    """Any tzinfo will do: the schedule reads the wall clock of the time given."""
    plus_one = timezone(timedelta(hours=1))
    after = datetime(2012, 7, 9, 14, 45, tzinfo=plus_one)
    assert parse_schedule("0 15 * * *").next(after) == datetime(2012, 7, 9, 15, tzinfo=plus_one)
