"""Cron schedules as upstream's CronJob controller reads them: a port of robfig/cron v3.0.1's
``ParseStandard`` (parser.go), ``SpecSchedule.Next`` (spec.go) and
``ConstantDelaySchedule.Next`` (constantdelay.go).

The port keeps robfig's exact semantics, quirks included, because a ParallelCronJob must
start its jobs at the very times a CronJob with the same schedule would:

- the day-of-month/day-of-week rule: when either field has a star (``*`` or ``?``) both
  must match, otherwise either may (``* * 1,15 * Sun`` runs on the 1st, the 15th and
  every Sunday);
- no time within five years of the search start: no time at all (``0 0 30 2 *``);
- daylight saving time: robfig works in the wall clock of the location and moves by
  absolute hours and minutes, so an hour that is skipped is skipped (a 02:30 job does
  not run on the spring-forward day) and an hour that repeats runs twice for an hourly
  job but once for a daily one. Its wall-clock resets use Go's ``time.Date``, whose
  choice for a skipped or repeated wall time differs from Python's ``fold``: it is
  reproduced by :func:`_go_date`.

Times are handled as whole Unix seconds inside ``next`` (robfig drops the sub-second
part at the start, and Go's ``Add`` and ``Truncate`` act on absolute time), and read as
wall-clock fields in the location of the time given, as robfig does for a schedule
without ``TZ=``. The caller puts the time in the cron job's time zone first
(:func:`load_time_zone`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

#: Set in a field's bits when the field had a star: the day-of-month/day-of-week rule.
STAR_BIT = 1 << 63

#: Upstream validation's words for a schedule that names its own time zone.
TZ_IN_SCHEDULE = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"


class CronSyntaxError(ValueError):
    """A schedule robfig's ParseStandard (or upstream validation) refuses."""


class UnknownTimeZone(ValueError):
    """A timeZone that upstream validation or Go's time.LoadLocation refuses."""


class Schedule(Protocol):
    """A parsed schedule: robfig's ``cron.Schedule``."""

    def next(self, after: datetime) -> datetime | None:
        """The first activation strictly after ``after`` (timezone-aware), in its tzinfo;
        None when there is none (robfig's zero time)."""
        ...


@dataclass(frozen=True)
class Bounds:
    """The values a field can take, and the names it accepts for them."""

    min: int
    max: int
    names: Mapping[str, int] = field(default_factory=dict)


_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

SECONDS = Bounds(0, 59)
MINUTES = Bounds(0, 59)
HOURS = Bounds(0, 23)
DOM = Bounds(1, 31)
MONTHS = Bounds(1, 12, {name: i + 1 for i, name in enumerate(_MONTH_NAMES)})
DOW = Bounds(0, 6, {name: i for i, name in enumerate(_DOW_NAMES)})


# --- Parsing (parser.go) ---------------------------------------------------------------


def parse_schedule(text: str) -> Schedule:
    """ParseStandard: five fields (minute hour dom month dow) or a descriptor.

    A schedule naming its own time zone (``TZ=``/``CRON_TZ=``) is refused with upstream
    validation's message: the time zone is the ``timeZone`` field's.
    """
    if not text:
        raise CronSyntaxError("empty spec string")
    # validateScheduleFormat refuses "TZ" anywhere, not only as a prefix.
    if "TZ" in text:
        raise CronSyntaxError(TZ_IN_SCHEDULE)
    if text.startswith("@"):
        return _parse_descriptor(text)
    fields = go_fields(text)
    if len(fields) != 5:
        found = "[" + " ".join(fields) + "]"
        raise CronSyntaxError(f"expected exactly 5 fields, found {len(fields)}: {found}")
    minute, hour, dom, month, dow = fields
    return SpecSchedule(
        second=1 << SECONDS.min,
        minute=get_field(minute, MINUTES),
        hour=get_field(hour, HOURS),
        dom=get_field(dom, DOM),
        month=get_field(month, MONTHS),
        dow=get_field(dow, DOW),
    )


_GO_SPACE = re.compile(r"[^\S\x1c-\x1f]+")


def go_fields(text: str) -> list[str]:
    """strings.Fields: Go's unicode.IsSpace, which (unlike str.split) leaves the ASCII
    separators U+001C..U+001F inside a field."""
    return [part for part in _GO_SPACE.split(text) if part]


def get_field(text: str, bounds: Bounds) -> int:
    """getField: the bits of a comma-separated list of ranges (empty items are skipped)."""
    bits = 0
    for expr in text.split(","):
        if expr:
            bits |= get_range(expr, bounds)
    return bits


def get_range(expr: str, bounds: Bounds) -> int:
    """getRange: ``number | number "-" number [ "/" number ]``, or a star with a step."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    extra = 0
    if low_and_high[0] in ("*", "?"):
        # robfig ignores anything after a star's hyphen ("*-5" is "*").
        start, end, extra = bounds.min, bounds.max, STAR_BIT
    else:
        start = _parse_int_or_name(low_and_high[0], bounds.names)
        if len(low_and_high) > 2:
            raise CronSyntaxError(f"too many hyphens: {expr}")
        end = start if len(low_and_high) == 1 else _parse_int_or_name(low_and_high[1], bounds.names)
    if len(range_and_step) > 2:
        raise CronSyntaxError(f"too many slashes: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _must_parse_int(range_and_step[1])
        if len(low_and_high) == 1:
            end = bounds.max  # "N/step" means "N-max/step"
        if step > 1:
            extra = 0  # a stepped star is no star for the day rule ("*/2")
    _check_range(expr, start, end, step, bounds)
    return get_bits(start, end, step) | extra


def _check_range(expr: str, start: int, end: int, step: int, bounds: Bounds) -> None:
    if start < bounds.min:
        raise CronSyntaxError(f"beginning of range ({start}) below minimum ({bounds.min}): {expr}")
    if end > bounds.max:
        raise CronSyntaxError(f"end of range ({end}) above maximum ({bounds.max}): {expr}")
    if start > end:
        raise CronSyntaxError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronSyntaxError(f"step of range should be a positive number: {expr}")


def _parse_int_or_name(expr: str, names: Mapping[str, int]) -> int:
    named = names.get(expr.lower())
    return named if named is not None else _must_parse_int(expr)


_GO_INT = re.compile(r"[+-]?[0-9]+")


def _must_parse_int(expr: str) -> int:
    """mustParseInt: strconv.Atoi (ASCII digits, an optional sign, 64 bits), not negative."""
    if not _GO_INT.fullmatch(expr):
        raise CronSyntaxError(f"failed to parse int from {expr}: {_atoi_error(expr, 'syntax')}")
    # Past 19 digits it is out of int64's range (and int() would refuse 4,300 digits).
    num = int(expr) if len(expr.lstrip("+-").lstrip("0")) <= 19 else 1 << 63
    if not -(1 << 63) <= num < 1 << 63:
        raise CronSyntaxError(f"failed to parse int from {expr}: {_atoi_error(expr, 'range')}")
    if num < 0:
        raise CronSyntaxError(f"negative number ({num}) not allowed: {expr}")
    return num


def _atoi_error(expr: str, kind: str) -> str:
    """strconv.NumError's text; the value quoted as strconv.Quote does."""
    quoted = "".join(_strconv_escape(ch) for ch in expr)
    reason = "invalid syntax" if kind == "syntax" else "value out of range"
    return f'strconv.Atoi: parsing "{quoted}": {reason}'


_C_ESCAPES = {"\a": "a", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t", "\v": "v"}


def _strconv_escape(ch: str) -> str:
    if ch in ('"', "\\"):
        return "\\" + ch
    if ch.isprintable():
        return ch
    if ch in _C_ESCAPES:
        return "\\" + _C_ESCAPES[ch]
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def get_bits(low: int, high: int, step: int) -> int:
    """getBits: the bits low..high, every ``step``."""
    return sum(1 << i for i in range(low, high + 1, step))


def all_bits(bounds: Bounds) -> int:
    """all: every value of the field, plus the star bit."""
    return get_bits(bounds.min, bounds.max, 1) | STAR_BIT


def _parse_descriptor(text: str) -> Schedule:
    """parseDescriptor: the named schedules, exact and case-sensitive, and ``@every``."""
    spec = _DESCRIPTORS.get(text)
    if spec is not None:
        return spec
    every = "@every "
    if text.startswith(every):
        try:
            nanos = parse_go_duration(text[len(every) :])
        except ValueError as err:
            raise CronSyntaxError(f"failed to parse duration {text}: {err}") from None
        return every_schedule(nanos)
    raise CronSyntaxError(f"unrecognized descriptor: {text}")


# --- Go durations (time.ParseDuration) ---------------------------------------------------

_NS = 1
_SECOND_NS = 1_000_000_000
_UNITS = {
    "ns": _NS,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": _SECOND_NS,
    "m": 60 * _SECOND_NS,
    "h": 3600 * _SECOND_NS,
}
_DURATION_TERM = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """time.ParseDuration, in nanoseconds: ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+``."""
    body = text[1:] if text[:1] in ("-", "+") else text
    if body == "0":
        return 0
    if not body:
        raise ValueError(f"time: invalid duration {_go_quote(text)}")
    total, pos = 0, 0
    while pos < len(body):
        term = _DURATION_TERM.match(body, pos)
        assert term is not None  # every part of the pattern may be empty
        total += _duration_term(term, text)
        if total > 1 << 63:
            raise ValueError(f"time: invalid duration {_go_quote(text)}")
        pos = term.end()
    if text.startswith("-"):
        return -total
    if total > (1 << 63) - 1:
        raise ValueError(f"time: invalid duration {_go_quote(text)}")
    return total


def _duration_term(term: re.Match[str], orig: str) -> int:
    """One ``number[.fraction]unit`` of a duration, in nanoseconds."""
    whole, fraction, unit_name = term.group(1), term.group(2), term.group(3)
    # No digits (".s"), not a digit at all ("Xm"), or leadingInt's overflow: all before
    # the unit is read.
    if not (whole or fraction) or len(whole.lstrip("0")) > 19 or int(whole or "0") > 1 << 63:
        raise ValueError(f"time: invalid duration {_go_quote(orig)}")
    if not unit_name:
        raise ValueError(f"time: missing unit in duration {_go_quote(orig)}")
    unit = _UNITS.get(unit_name)
    if unit is None:
        raise ValueError(f"time: unknown unit {_go_quote(unit_name)} in duration {_go_quote(orig)}")
    value = int(whole or "0")
    if value > (1 << 63) // unit:
        raise ValueError(f"time: invalid duration {_go_quote(orig)}")
    value *= unit
    numerator, scale = _leading_fraction(fraction or "")
    if numerator > 0:
        # float64, as Go: nanosecond-accurate for fractions of an hour.
        value += int(numerator * (unit / scale))
        if value > 1 << 63:
            raise ValueError(f"time: invalid duration {_go_quote(orig)}")
    return value


def _leading_fraction(digits: str) -> tuple[int, int]:
    """leadingFraction: the digits Go accumulates before its uint64 would overflow, as a
    numerator and its power of ten."""
    numerator, scale = 0, 1
    for ch in digits:
        if numerator > ((1 << 63) - 1) // 10 or numerator * 10 + int(ch) > 1 << 63:
            break
        numerator, scale = numerator * 10 + int(ch), scale * 10
    return numerator, scale


def _go_quote(text: str) -> str:
    """time's quote: ASCII printable kept, anything else as \\x escapes of its UTF-8."""
    out = []
    for ch in text:
        if ch < " " or ord(ch) >= 0x80:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append("\\" + ch if ch in '"\\' else ch)
    return '"' + "".join(out) + '"'


# --- Go time arithmetic -----------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()


def _unix(t: datetime) -> tuple[int, int]:
    """Whole Unix seconds (floored) and the microseconds past them."""
    delta = t - _EPOCH
    return delta.days * 86400 + delta.seconds, delta.microseconds


def _wall(unix: int, loc: tzinfo) -> datetime:
    """The wall clock in ``loc`` at an instant: what Go's t.Year(), t.Hour()... read."""
    return (_EPOCH + timedelta(seconds=unix)).astimezone(loc)


def _offset(unix: int, loc: tzinfo) -> int:
    """loc.lookup(unix): the UTC offset in force at that instant, in seconds."""
    offset = _wall(unix, loc).utcoffset()
    return 0 if offset is None else offset.days * 86400 + offset.seconds


def _go_date(
    year: int, month: int, day: int, hour: int, loc: tzinfo, minute: int = 0, second: int = 0
) -> int:
    """time.Date(year, month, day, hour, minute, second, 0, loc) as Unix seconds, values out
    of range normalized as Go does. A wall time that a DST change skips or repeats resolves
    as Go's does: the offset in force at (the wall time read as UTC) minus that offset."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    days = date(year, month, 1).toordinal() - _EPOCH_ORDINAL + day - 1
    unix = days * 86400 + hour * 3600 + minute * 60 + second
    return unix - _offset(unix - _offset(unix, loc), loc)


def _weekday(wall: datetime) -> int:
    """Go's Weekday: Sunday is 0."""
    return (wall.weekday() + 1) % 7


# --- SpecSchedule.Next (spec.go) ---------------------------------------------------------


@dataclass(frozen=True)
class SpecSchedule:
    """A crontab line as bit sets, one bit per value (plus :data:`STAR_BIT`)."""

    second: int
    minute: int
    hour: int
    dom: int
    month: int
    dow: int

    def next(self, after: datetime) -> datetime | None:
        """SpecSchedule.Next in ``after``'s location; None past the five-year limit."""
        loc = after.tzinfo
        if loc is None:
            raise ValueError("a cron schedule needs a timezone-aware time")
        try:
            found = self._next_unix(_unix(after)[0] + 1, loc)  # the upcoming whole second
            return None if found is None else _wall(found, loc)
        except (OverflowError, ValueError):
            return None  # beyond datetime's year 9999: no time Python can name

    def _next_unix(self, t: int, loc: tzinfo) -> int | None:
        year_limit = _wall(t, loc).year + 5
        added = False
        while True:  # robfig's "WRAP:" label: each goto starts the checks again
            if _wall(t, loc).year > year_limit:
                return None
            steps = (self._month, self._day, self._hour, self._minute, self._second)
            for step in steps:
                t, added, wrapped = step(t, loc, added)
                if wrapped:
                    break
            else:
                return t

    def _month(self, t: int, loc: tzinfo, added: bool) -> tuple[int, bool, bool]:
        while not 1 << _wall(t, loc).month & self.month:
            if not added:
                added = True
                wall = _wall(t, loc)
                t = _go_date(wall.year, wall.month, 1, 0, loc)
            t = _add_date(t, loc, months=1)
            if _wall(t, loc).month == 1:
                return t, added, True
        return t, added, False

    def _day(self, t: int, loc: tzinfo, added: bool) -> tuple[int, bool, bool]:
        while not self._day_matches(_wall(t, loc)):
            if not added:
                added = True
                wall = _wall(t, loc)
                t = _go_date(wall.year, wall.month, wall.day, 0, loc)
            t = _next_day(t, loc)
            # Where DST makes midnight not exist the day starts at 23:00 the day before
            # or at 01:00: move to the nearer midnight, as robfig does.
            hour = _wall(t, loc).hour
            if hour != 0:
                t += (24 - hour) * 3600 if hour > 12 else -hour * 3600
            if _wall(t, loc).day == 1:
                return t, added, True
        return t, added, False

    def _hour(self, t: int, loc: tzinfo, added: bool) -> tuple[int, bool, bool]:
        while not 1 << _wall(t, loc).hour & self.hour:
            if not added:
                added = True
                wall = _wall(t, loc)
                t = _go_date(wall.year, wall.month, wall.day, wall.hour, loc)
            t += 3600
            if _wall(t, loc).hour == 0:
                return t, added, True
        return t, added, False

    def _minute(self, t: int, loc: tzinfo, added: bool) -> tuple[int, bool, bool]:
        while not 1 << _wall(t, loc).minute & self.minute:
            if not added:
                added = True
                t -= t % 60  # Truncate(time.Minute): absolute time, not the wall clock
            t += 60
            if _wall(t, loc).minute == 0:
                return t, added, True
        return t, added, False

    def _second(self, t: int, loc: tzinfo, added: bool) -> tuple[int, bool, bool]:
        while not 1 << _wall(t, loc).second & self.second:
            added = True  # Truncate(time.Second) is a no-op: t is in whole seconds
            t += 1
            if _wall(t, loc).second == 0:
                return t, added, True
        return t, added, False

    def _day_matches(self, wall: datetime) -> bool:
        """dayMatches: with a star in either field both must match, else either."""
        dom_match = bool(1 << wall.day & self.dom)
        dow_match = bool(1 << _weekday(wall) & self.dow)
        if self.dom & STAR_BIT or self.dow & STAR_BIT:
            return dom_match and dow_match
        return dom_match or dow_match


def _next_day(t: int, loc: tzinfo) -> int:
    """t.AddDate(0, 0, 1), except for a day the zone skips whole (Pacific/Apia's
    2011-12-30): there Go's Date resolves the next midnight to the same instant and robfig
    loops forever; step over it by 24 hours instead."""
    following = _add_date(t, loc, days=1)
    return following if following > t else t + 86400


def _add_date(t: int, loc: tzinfo, months: int = 0, days: int = 0) -> int:
    """t.AddDate(0, months, days): the same wall clock that many months/days later."""
    wall = _wall(t, loc)
    return _go_date(
        wall.year, wall.month + months, wall.day + days, wall.hour, loc, wall.minute, wall.second
    )


# --- ConstantDelaySchedule (constantdelay.go) --------------------------------------------


@dataclass(frozen=True)
class ConstantDelaySchedule:
    """``@every``: a fixed delay in whole seconds."""

    delay_seconds: int

    def next(self, after: datetime) -> datetime | None:
        """t + delay - t's sub-second part: the next activation on a whole second."""
        if after.tzinfo is None:
            raise ValueError("a cron schedule needs a timezone-aware time")
        unix, _ = _unix(after)
        try:
            return _wall(unix + self.delay_seconds, after.tzinfo)
        except OverflowError:
            return None


def every_schedule(nanos: int) -> ConstantDelaySchedule:
    """Every: under a second becomes a second; the sub-second part is dropped."""
    nanos = max(nanos, _SECOND_NS)
    return ConstantDelaySchedule(nanos // _SECOND_NS)


def _midnight_spec(dom: int, month: int, dow: int, hour: int = 1 << HOURS.min) -> SpecSchedule:
    return SpecSchedule(1 << SECONDS.min, 1 << MINUTES.min, hour, dom, month, dow)


_DESCRIPTORS: dict[str, Schedule] = {
    "@yearly": _midnight_spec(1 << DOM.min, 1 << MONTHS.min, all_bits(DOW)),
    "@annually": _midnight_spec(1 << DOM.min, 1 << MONTHS.min, all_bits(DOW)),
    "@monthly": _midnight_spec(1 << DOM.min, all_bits(MONTHS), all_bits(DOW)),
    "@weekly": _midnight_spec(all_bits(DOM), all_bits(MONTHS), 1 << DOW.min),
    "@daily": _midnight_spec(all_bits(DOM), all_bits(MONTHS), all_bits(DOW)),
    "@midnight": _midnight_spec(all_bits(DOM), all_bits(MONTHS), all_bits(DOW)),
    "@hourly": _midnight_spec(all_bits(DOM), all_bits(MONTHS), all_bits(DOW), all_bits(HOURS)),
}


# --- Time zones ----------------------------------------------------------------------------

#: validateTimeZone's rule for each '/'-separated part of a name (IANA's naming theory).
_TZ_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def load_time_zone(name: str | None) -> tzinfo:
    """The location of a cron job's ``timeZone``: None is UTC (the schedule's times are
    read in UTC, as kube-controller-manager runs); otherwise upstream validation's rules,
    then the IANA database. Raises :class:`UnknownTimeZone` with Go's words."""
    if name is None:
        return UTC
    if not name:
        raise UnknownTimeZone("timeZone must be nil or non-empty string")
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            raise UnknownTimeZone(f"unknown time zone {name}")
    if name.lower() == "local":
        raise UnknownTimeZone(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise UnknownTimeZone(f"unknown time zone {name}") from None
